"""Operational space on random trees, in float64: the compliance Lambda^-1 = J M^-1 J* by column sweeps, the
Upsilon kernel, the projector identities of Lemmas 10.3-10.4, C_os three ways, the operational-space controller
in closed loop, and the derivatives of Lambda^-1 (book_part2 digest, section 2; tests named by equation).

Dense references: `jaxmb.operators.dense_operators` (blocks from the recursions, stacked in numpy), the CRBA mass
matrix with a dense solve, and the frame Jacobians of `jaxmb.jacobian`. Pinocchio's Jacobians and mass matrix
check the same compliance on the real robots in tests/test_pinocchio_oracle.py.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import checks
import jaxmb
from jaxmb.operators import dense_operators
from jaxmb.testing import random_model, random_state

RTOL = 1e-10

MODEL_SPECS = {
    "chain-revolute": dict(seed=1, n_bodies=6, joint_mix="revolute", floating_base=False, branching=0.0),
    "tree-screw": dict(seed=16, n_bodies=7, joint_mix="screw", floating_base=False, branching=0.7),
    "floating-mixed": dict(seed=41, n_bodies=7, joint_mix="mixed", floating_base=True, branching=0.4),
}
ALL = list(MODEL_SPECS)
TASKS = {  # (frames: the last n bodies, axes, reference)
    "one-frame": (1, None, "local"),
    "two-points-world": (2, "linear", "world_aligned"),
    "two-frames-two-axes": (2, (0, 4), "local"),
    "three-frames-world": (3, None, "world_aligned"),
    "two-frames-two-axes-world": (2, (1, 3), "world_aligned"),
}

assert_close = functools.partial(checks.assert_close, rtol=RTOL)


@functools.cache
def model(name, gravity=True):
    m = random_model(**MODEL_SPECS[name])
    return m if gravity else m.replace(gravity=jnp.zeros(3))


def frames_of(m, n):
    return m.body_names[-n:]


def dense_task(m, q, qd, n, axes, reference):
    """J, Jdot qd of the task from the per-frame functions of jaxmb.kinematics."""
    rows = np.asarray(jaxmb.dynamics.opspace.task(m, frames_of(m, n), axes, reference).axes)
    J = jnp.concatenate([jaxmb.jacobian(m, q, f, reference)[rows] for f in frames_of(m, n)])
    a = jnp.concatenate([jaxmb.frame_bias_acceleration(m, q, qd, f, reference)[rows] for f in frames_of(m, n)])
    return J, a


@functools.cache
def compiled(name, task_name, gravity=True):
    m = model(name, gravity)
    n, axes, reference = TASKS[task_name]
    frames = frames_of(m, n)

    def evaluate(q, qd, tau):
        ts = jaxmb.task_space(m, q, frames, axes, reference)
        J, a_os = dense_task(m, q, qd, n, axes, reference)
        M = jaxmb.mass_matrix(m, q)
        return {
            "ts": ts,
            "J_dense": J,
            "a_os": a_os,
            "M": M,
            "C": jaxmb.bias_forces(m, q, qd),
            "Lambda_inv": jaxmb.operational_space_compliance(m, q, frames, axes, reference),
            "C_os": jaxmb.operational_space_bias(m, q, qd, tau, frames, axes, reference, damping=0.0),
            "alpha_free": jaxmb.articulated_body(m, q, qd, tau).alpha,
        }

    return jax.jit(evaluate)


def dense_Omega(ops):
    """Omega = psi* H* D^-1 H psi (10.12) from the dense operators."""
    return ops.psi.T @ ops.H.T @ np.linalg.solve(ops.D, ops.H @ ops.psi)


def state(name, seed):
    m = model(name)
    return random_state(m, jax.random.PRNGKey(seed))


@pytest.mark.parametrize("task_name", list(TASKS))
@pytest.mark.parametrize("name", ALL)
def test_10_6_compliance_is_J_Minv_Jstar(name, task_name):
    q, qd, tau = state(name, 0)
    out = compiled(name, task_name)(q, qd, tau)
    J, M = out["J_dense"], out["M"]
    assert_close(out["ts"].J, J)
    assert_close(out["Lambda_inv"], J @ jnp.linalg.solve(M, J.T))
    assert_close(out["ts"].Minv_Jt, jnp.linalg.solve(M, J.T))


@pytest.mark.parametrize("name", ALL)
def test_10_12_compliance_is_B_star_Omega_B_and_Omega_two_ways(name):
    """Omega = psi* H* D^-1 H psi = phi* H* M^-1 H phi (10.12), and Lambda^-1 = B* Omega B for frames at body
    origins, B picking the bodies' blocks."""
    m = model(name)
    q, _, _ = state(name, 1)
    ops = dense_operators(m, q)
    M = np.asarray(jaxmb.mass_matrix(m, q))
    Omega = dense_Omega(ops)
    assert_close(Omega, ops.phi.T @ ops.H.T @ np.linalg.solve(M, ops.H @ ops.phi))
    bodies = [m.nb - 2, m.nb - 1]
    B = np.zeros((6 * m.nb, 12))
    for i, k in enumerate(bodies):
        B[6 * k : 6 * k + 6, 6 * i : 6 * i + 6] = np.eye(6)
    assert_close(jaxmb.operational_space_compliance(m, q, [m.body_names[k] for k in bodies]), B.T @ Omega @ B)


@pytest.mark.parametrize("name", ALL)
def test_10_16_upsilon_is_diagonal_of_Omega(name):
    m = model(name)
    q, _, _ = state(name, 2)
    ops = dense_operators(m, q)
    Omega = dense_Omega(ops)
    U = np.asarray(jaxmb.upsilon(m, q))
    for k in range(m.nb):
        assert_close(U[k], Omega[6 * k : 6 * k + 6, 6 * k : 6 * k + 6])
    # (10.16) as written: Upsilon(k) = psi*(parent, k) Upsilon(parent) psi(parent, k) + H* D^-1 H (k)
    HDH = ops.H.T @ np.linalg.inv(ops.D) @ ops.H
    for k, p in enumerate(m.topology.parent):
        psi = ops.E_psi[6 * p : 6 * p + 6, 6 * k : 6 * k + 6] if p >= 0 else np.zeros((6, 6))
        Up = U[p] if p >= 0 else np.zeros((6, 6))
        assert_close(U[k], psi.T @ Up @ psi + HDH[6 * k : 6 * k + 6, 6 * k : 6 * k + 6])


def test_remark_10_2_upsilon_of_free_root_is_P_inverse():
    m = model("floating-mixed")
    q, _, _ = state("floating-mixed", 3)
    zero = jnp.zeros(m.nv)
    P_root = jaxmb.articulated_body(m, q, zero, zero).P[0]
    assert m.joint_types[0] == "free"
    assert_close(jaxmb.upsilon(m, q)[0], jnp.linalg.inv(P_root))


@pytest.mark.parametrize("name", ALL)
def test_10_35_to_10_40_projector_identities(name):
    m = model(name)
    q, _, _ = state(name, 4)
    o = dense_operators(m, q)
    Omega = dense_Omega(o)
    U = Omega @ o.M  # the projector Omega M (Lemma 10.3)
    U_perp = np.eye(len(U)) - U
    assert_close(Omega @ o.M @ Omega, Omega)  # Omega M Omega = Omega, so U^2 = U
    assert_close(U @ U, U)
    assert_close(U_perp.T @ o.M @ U, np.zeros_like(U))
    assert_close(U.T @ o.M @ U, o.M @ U)
    assert_close(U @ o.phi.T, o.phi.T - (o.psi.T - Omega @ o.P))
    assert_close(U @ o.psi.T, Omega @ o.P)
    assert_close((o.psi - o.P @ Omega) @ o.M @ o.phi.T, o.psi @ o.M @ o.psi.T - o.P @ Omega @ o.P)
    assert_close(U_perp @ o.phi.T @ o.H.T, np.zeros_like(o.H.T))
    assert_close(U_perp @ o.psi.T @ o.H.T, np.zeros_like(o.H.T))
    assert_close(o.psi @ o.P @ o.H.T, o.P @ o.H.T)  # (10.40)


def _full_rank_task(name):
    """A task with fewer rows than the upstream coordinates of its frames, so that Lambda exists."""
    return "two-frames-two-axes" if name != "floating-mixed" else "two-frames-two-axes-world"


def task_rows(m, q, frames, axes, reference):
    """The task rows d (m, r, 6) of frames at body origins: rows of I (frame axes) or of diag(R, R) (world axes)."""
    rows = np.asarray(jaxmb.dynamics.opspace.task(m, frames, axes, reference).axes)
    R = np.asarray(jaxmb.forward_kinematics(m, q).R)
    out = []
    for f in frames:
        S = np.eye(6)
        if reference == "world_aligned":
            S[:3, :3] = S[3:, 3:] = R[m.body_index(f)]
        out.append(S[rows])
    return np.stack(out)


@pytest.mark.parametrize("gravity", [True, False], ids=["gravity", "no-gravity"])
@pytest.mark.parametrize("name", ALL)
def test_C_os_three_ways(name, gravity):
    """C_os from the definition (10.8), from Alg 10.5 written with the dense operators, and from the library's
    shortcut -Lambda B* alpha_free (Lemma 10.5).

    Alg 10.5: theta = z of the articulated-body sweep; eta = psi* (H* D^-1 (H theta - T) - a_gr), the world's
    pseudo-acceleration [0; -g] entering each root body through psi*(world, root) = tau_bar* phi*; zeta = eta +
    col{[0; -g]} in body coordinates; C_os = Lambda B* zeta."""
    m = model(name, gravity)
    n, axes, reference = TASKS[_full_rank_task(name)]
    frames = frames_of(m, n)
    for seed in (5, 6):
        q, qd, tau = state(name, seed)
        out = compiled(name, _full_rank_task(name), gravity)(q, qd, tau)
        J, M = out["J_dense"], out["M"]
        Lam = np.linalg.inv(J @ jnp.linalg.solve(M, J.T))
        definition = -Lam @ (J @ jnp.linalg.solve(M, tau - out["C"]) + out["a_os"])  # (10.8)
        assert_close(out["C_os"], definition, scale=max(1.0, float(jnp.abs(definition).max())))

        ab = jaxmb.articulated_body(m, q, qd, tau)
        o = dense_operators(m, q)
        X = jaxmb.hinges.joint_poses(m, q)
        R = np.asarray(jaxmb.forward_kinematics(m, q).R)
        g_pseudo = -np.asarray(m.gravity)
        a_gr = np.asarray(ab.a).copy()
        for k, p in enumerate(m.topology.parent):
            if p < 0:
                world = jaxmb.spatial.phi_star(jaxmb.Transform(X.R[k], X.p[k]), jnp.concatenate([jnp.zeros(3), g_pseudo]))
                a_gr[k] += np.asarray(ab.tau_bar[k]).T @ np.asarray(world)
        z, T = np.asarray(ab.z).reshape(-1), np.asarray(tau)
        eta = o.psi.T @ (o.H.T @ np.linalg.solve(o.D, o.H @ z - T) - a_gr.reshape(-1))
        zeta = eta.reshape(m.nb, 6) + np.concatenate([np.zeros((m.nb, 3)), R.transpose(0, 2, 1) @ g_pseudo], -1)
        d = task_rows(m, q, frames, axes, reference)
        B_zeta = np.concatenate([d[i] @ zeta[m.body_index(f)] for i, f in enumerate(frames)])
        assert_close(Lam @ B_zeta, definition, scale=max(1.0, float(jnp.abs(definition).max())))


@pytest.mark.parametrize("gravity", [True, False], ids=["gravity", "no-gravity"])
@pytest.mark.parametrize("name", ALL)
def test_controller_gives_task_accelerations_u(name, gravity):
    """Closed loop: tau = J* (Lambda u + C_os) + N* tau_posture in forward dynamics gives J qdd + Jdot qd = u,
    whatever the posture forces (N* is dynamically consistent)."""
    m = model(name, gravity)
    n, axes, reference = TASKS[_full_rank_task(name)]
    frames = frames_of(m, n)

    @jax.jit
    def closed_loop(q, qd, u, tau_posture):
        tau = jaxmb.operational_space_control(m, q, qd, frames, u, tau_posture, axes, reference, damping=0.0)
        J, a_os = dense_task(m, q, qd, n, axes, reference)
        return J @ jaxmb.forward_dynamics(m, q, qd, tau) + a_os

    for seed in (7, 8):
        q, qd, _ = state(name, seed)
        c = len(frames) * len(jaxmb.dynamics.opspace.task(m, frames, axes).axes)
        u = jax.random.normal(jax.random.PRNGKey(seed), (c,))
        posture = jax.random.normal(jax.random.PRNGKey(seed + 100), (m.nv,))
        assert_close(closed_loop(q, qd, u, jnp.zeros(m.nv)), u)
        assert_close(closed_loop(q, qd, u, posture), u)


@pytest.mark.parametrize("name", ["chain-revolute", "floating-mixed"])
def test_compliance_gradients_match_finite_differences(name):
    m = model(name)
    q, _, _ = state(name, 9)
    frames = frames_of(m, 2)
    if m.joint_types[0] == "free":  # differentiate along the tangent of the quaternion sphere too
        f = lambda q: jaxmb.operational_space_compliance(m, q, frames, "linear", "world_aligned")
    else:
        f = lambda q: jaxmb.operational_space_compliance(m, q, frames)
    check_grads(f, (q,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


def test_damped_inertia_is_finite_and_differentiable_at_a_singular_arm():
    """A planar 3-link arm stretched straight (q = 0) has a singular 3-row point task (the points cannot move
    along the arm): the damped inverse flags it, stays finite, and so does its gradient."""
    b = jaxmb.ModelBuilder("planar-arm")
    parent = None
    for i in range(3):
        b.add_body(f"l{i}", parent, jaxmb.joints.revolute((0, 0, 1)), placement=(np.eye(3), (0.5 * (i > 0), 0, 0)),
                   mass=1.0, com=(0.25, 0, 0), inertia=0.01 * np.eye(3))
        parent = f"l{i}"
    b.add_frame("tip", "l2", (np.eye(3), (0.5, 0.0, 0.0)))
    arm = b.build()
    q = jnp.zeros(arm.nq)

    def total(q):
        return jnp.sum(jaxmb.operational_space_inertia(arm, q, "tip", "linear").Lambda)

    out = jaxmb.operational_space_inertia(arm, q, "tip", "linear")
    assert bool(out.rank_deficient)
    assert np.all(np.isfinite(out.Lambda))
    assert np.all(np.isfinite(jax.grad(total)(q)))
    bent = jnp.array([0.3, 0.8, -0.5])
    assert not bool(jaxmb.operational_space_inertia(arm, bent, "tip", (3, 4)).rank_deficient)


def test_task_errors_name_the_problem():
    m = model("chain-revolute")
    q = jnp.zeros(m.nq)
    with pytest.raises(KeyError, match="no frame or body 'hand'"):
        jaxmb.operational_space_compliance(m, q, "hand")
    with pytest.raises(ValueError, match="axes"):
        jaxmb.operational_space_compliance(m, q, "b5", axes=(0, 6))
    with pytest.raises(ValueError, match="reference"):
        jaxmb.operational_space_compliance(m, q, "b5", reference="world")
    with pytest.raises(ValueError, match="distinct"):
        jaxmb.operational_space_compliance(m, q, ["b5", "b5"])
    with pytest.raises(ValueError, match="task rows"):
        jaxmb.operational_space_control(m, q, jnp.zeros(m.nv), "b5", jnp.zeros(3))
