"""The mechanisms of `jaxmb.loops.mechanisms` in float64: constraint-embedded
forward dynamics against projection and Lagrange multipliers, inverse dynamics, the mass matrix, a geared link's
closed form, the armature approximation, and energy conservation under RK4.

Each mechanism compiles one program for the comparisons at a batch of random consistent states (`_quantities`),
once per module, and the two with energy tests one more for RK4.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import checks
import jaxmb
from jaxmb import loops
from jaxmb.loops import mechanisms
from pinocchio_bridge import compile_fast

RTOL = 1e-9  # relative to the magnitude of the expected value
N_STATES = 2
BUILDERS = {
    "chain": mechanisms.geared_pendulum_chain,
    "four_bar": mechanisms.four_bar_leg,
    "belt": mechanisms.belt_leg,
    "differential": mechanisms.bevel_differential,
    "quadruped": mechanisms.quadruped_with_rotors,
}

assert_close = functools.partial(checks.assert_close, rtol=RTOL)


@functools.cache
def _models(name):
    """The exact `LoopModel`, the armature model (None for the four-bar) and the reference configuration."""
    lm = BUILDERS[name]()
    approx = None if name == "four_bar" else BUILDERS[name](exact=False)
    return lm, approx, mechanisms.reference_configuration(lm)


def _quantities(lm, approx, q_ref, key):
    """At a random consistent state near ``q_ref``: the constraint-embedded ``ydd`` and ``tau`` back from it, and
    the references (projection, Lagrange multipliers, the mass matrix, the armature model)."""
    k_q, k_yd, k_tau = jax.random.split(key, 3)
    q_near = jaxmb.integrate(lm.tree, q_ref, 0.05 * jax.random.normal(k_q, (lm.nv,)), 1.0)
    solved = loops.solve_configuration(lm, loops.independent_configuration(lm, q_near), guess=q_ref, iterations=4)
    q, yd, tau = solved.q, jax.random.normal(k_yd, (lm.ny,)), 3.0 * jax.random.normal(k_tau, (lm.ny,))
    ydd = loops.forward_dynamics(lm, q, yd, tau)
    G = loops.embedding_matrix(lm, q)
    qdd, _ = loops.lagrange_forward_dynamics(lm, q, loops.spanning_velocity(lm, q, yd),
                                             jnp.linalg.pinv(G.T) @ tau)  # spanning tau with G* tau = tau_y
    out = dict(residual=solved.residual, tau=tau, ydd=ydd, tau_back=loops.inverse_dynamics(lm, q, yd, ydd),
               lagrange=qdd[jnp.asarray(lm.y_v_index)], projected=loops.projected_forward_dynamics(lm, q, yd, tau),
               M=loops.mass_matrix(lm, q))
    if approx is not None:
        out["armature"] = jaxmb.forward_dynamics(approx, loops.independent_configuration(lm, q), yd, tau)
    return out


@functools.cache
def _evaluated(name):
    """`_quantities` at ``N_STATES`` states, stacked (one compiled program, unbatched: it compiles faster)."""
    lm, approx, q_ref = _models(name)
    keys = jax.random.split(jax.random.PRNGKey(7), N_STATES)
    program = compile_fast(jax.jit(_quantities), lm, approx, q_ref, keys[0])
    outs = [program(lm, approx, q_ref, key) for key in keys]
    return {k: np.stack([out[k] for out in outs]) for k in outs[0]}


@pytest.fixture(scope="module", autouse=True)
def _forget_programs():
    yield
    for f in (_models, _evaluated, _rk4_derivative):
        f.cache_clear()


@pytest.mark.parametrize("name", BUILDERS)
def test_builds_at_a_consistent_reference(name):
    lm, approx, q_ref = _models(name)
    assert isinstance(lm, loops.LoopModel)
    assert float(jnp.max(jnp.abs(loops.constraint_residual(lm, q_ref)))) < 1e-12
    if approx is not None:  # the armature model's coordinates are the independent ones, in order
        assert approx.joint_names == lm.independent_joints
        assert_close(mechanisms.reference_configuration(approx), loops.independent_configuration(lm, q_ref))
    assert np.all(_evaluated(name)["residual"] < 1e-12)


@pytest.mark.parametrize("name", BUILDERS)
def test_embedded_forward_dynamics_matches_projection_and_multipliers(name):
    out = _evaluated(name)
    assert_close(out["ydd"], out["projected"])
    assert_close(out["ydd"], out["lagrange"])


@pytest.mark.parametrize("name", BUILDERS)
def test_projection_matches_multipliers(name):
    out = _evaluated(name)
    assert_close(out["projected"], out["lagrange"])


@pytest.mark.parametrize("name", BUILDERS)
def test_inverse_dynamics_inverts_forward_dynamics(name):
    out = _evaluated(name)
    assert_close(out["tau_back"], out["tau"])


@pytest.mark.parametrize("name", BUILDERS)
def test_mass_matrix_is_symmetric_positive_definite(name):
    for M in _evaluated(name)["M"]:
        assert_close(M, M.T, scale=np.max(np.abs(M)))
        assert np.linalg.eigvalsh(M).min() > 0


@pytest.mark.parametrize("name, equal", [("chain", False), ("belt", False), ("differential", True),
                                         ("quadruped", False)])
def test_armature_approximation(name, equal):
    """Exact for two equal rotors on a fixed base (the differential); rotors on moving links (the chain, the belt
    leg's thigh, the quadruped's legs) and the belt's ankle cross term make a difference."""
    out = _evaluated(name)
    scale = max(1.0, float(np.max(np.abs(out["ydd"]))))
    diff = float(np.max(np.abs(out["armature"] - out["ydd"]))) / scale
    assert diff < 1e-12 if equal else diff > 1e-6, diff


def test_geared_link_closed_form():
    """One link under its rotor on a fixed base: ``(I_link + N^2 J_rotor) qdd = tau - m g l sin q``, exactly
    for both models."""
    gear = 10.0
    lm, approx = mechanisms.geared_pendulum_chain(1, gear), mechanisms.geared_pendulum_chain(1, gear, exact=False)
    link, rotor = mechanisms.CHAIN_LINK, mechanisms.CHAIN_ROTOR
    m, L, r = link["mass"], link["length"], link["radius"]
    I_link = m * (3 * r**2 + L**2) / 12 + m * (L / 2) ** 2  # about the joint
    y, yd, tau = jnp.array([0.7]), jnp.array([-1.3]), jnp.array([0.8])
    q = loops.solve_configuration(lm, y).q  # [q_link, N q_link]
    expected = (tau - m * 9.81 * L / 2 * np.sin(y)) / (I_link + gear**2 * rotor.J_axial)
    assert_close(compile_fast(jax.jit(loops.forward_dynamics), lm, q, yd, tau)(lm, q, yd, tau), expected,
                 rtol=1e-12)
    assert_close(compile_fast(jax.jit(jaxmb.forward_dynamics), approx, y, yd, tau)(approx, y, yd, tau), expected,
                 rtol=1e-12)


# -- energy under RK4 -----------------------------------------------------------------------------------------


def _quaternion_norms(tree, q):
    """(nq,): the norm of its quaternion at each free base's quaternion entry, 1 elsewhere."""
    s = jnp.ones_like(q)
    for blk in tree.topology.kind_blocks:
        if blk.kind == "free":
            quat = blk.q_index[:, 3:]
            s = s.at[quat].set(jnp.linalg.norm(q[quat], axis=-1, keepdims=True))
    return s


def _derivative(lm, y, yd, guess):
    """``(q, dy/dt, ydd, energy, residual)`` at independent positions ``y``, ``tau = 0``; ``q`` solved from
    ``guess``. A quaternion enters the dynamics normalized and its rate scales with its norm, so the ODE in
    ``y`` is smooth, keeps the norm, and RK4 keeps its order."""
    idx = jnp.asarray(lm.y_q_index)
    q_raw = guess.at[idx].set(y)
    s = _quaternion_norms(lm.tree, q_raw)
    solved = loops.solve_configuration(lm, (q_raw / s)[idx], guess=guess, iterations=4)
    q = solved.q
    qd = loops.spanning_velocity(lm, q, yd)
    y_rate = (jaxmb.configuration_rate(lm.tree, q, qd) * s)[idx]
    ydd = loops.forward_dynamics(lm, q, yd, jnp.zeros_like(yd))
    energy = jaxmb.kinetic_energy(lm.tree, q, qd) + jaxmb.potential_energy(lm.tree, q)
    return q, y_rate, ydd, energy, solved.residual


@functools.cache
def _rk4_derivative(name):
    lm, _, q = _models(name)
    args = (lm, loops.independent_configuration(lm, q), jnp.zeros(lm.ny), q)
    return compile_fast(jax.jit(_derivative), *args)


def _energy_drift(name, yd, dt, horizon=0.2):
    """``max_t |E(t) - E(0)|`` of classical RK4 on ``(y, yd)`` from the reference, and the largest loop residual."""
    lm, _, q = _models(name)
    f = _rk4_derivative(name)
    y = loops.independent_configuration(lm, q)
    q, _, _, E0, residual = f(lm, y, yd, q)
    drift = 0.0
    for _ in range(int(round(horizon / dt))):
        q1, k1, a1, E, r1 = f(lm, y, yd, q)
        q2, k2, a2, _, r2 = f(lm, y + dt / 2 * k1, yd + dt / 2 * a1, q1)
        q3, k3, a3, _, r3 = f(lm, y + dt / 2 * k2, yd + dt / 2 * a2, q2)
        q, k4, a4, _, r4 = f(lm, y + dt * k3, yd + dt * a3, q3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        yd = yd + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        drift, residual = max(drift, abs(float(E - E0))), max(residual, r1, r2, r3, r4)
    _, _, _, E, r = f(lm, y, yd, q)
    return max(drift, abs(float(E - E0))), float(max(residual, r))


@pytest.mark.parametrize("name", ["four_bar", "quadruped"])
def test_rk4_conserves_energy_at_fourth_order(name):
    """tau = 0, no damping: the energy error of RK4 falls 16-fold when dt halves, and the loops stay closed."""
    lm = _models(name)[0]
    yd = 2.0 * jax.random.normal(jax.random.PRNGKey(3), (lm.ny,))
    if name == "four_bar":
        yd = jnp.array([0.5, 6.0])  # slider, driver: the linkage swings through 1.2 rad
    (drift, res), (drift_half, res_half) = (_energy_drift(name, yd, dt) for dt in (0.005, 0.0025))
    assert 1e-12 < drift_half < drift < 1e-6
    assert drift / drift_half > 10, (drift, drift_half)
    assert max(res, res_half) < 1e-12
