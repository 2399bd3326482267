"""Closed loops by constraint embedding (book ch. 11 and 15; Chignoli et al. 2023), in float64.

Random trees closed by random loop closures and gear couplings (`jaxmb.testing.random_loop_model`) and a planar
four-bar check the embedded AB algorithm against the two dense references on the same spanning tree (Lagrange
multipliers, projection), the constraint algebra against autodiff and closed forms, inverse dynamics, the
cut-joint forces and the gradients. As in test_identities, each model's quantities come from one jitted program,
called for each of its states.
"""

import functools
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import checks
import jaxmb
from jaxmb import joints, loops
from jaxmb.batching import chunks as batching
from jaxmb.errors import ModelError
from jaxmb.loops import articulated as loop_articulated
from jaxmb.loops.embedding import _solve as solve_small_system
from jaxmb.model import ModelBuilder
from jaxmb.rotation import quat_exp, quat_to_matrix
from jaxmb.spatial import Transform
from jaxmb.testing import random_loop_model, random_model

RTOL = 1e-9

MODEL_SPECS = {
    # a revolute (5-row) closure and a coupling merged into one cluster of 7 bodies, fixed base
    "revolute": dict(seed=0, n_bodies=8, floating_base=False, closures=("revolute",), couplings=1),
    # a ball closure and a coupling merged into one cluster of 6 bodies, under a free base
    "ball-floating": dict(seed=6, n_bodies=7, floating_base=True, closures=("ball",), couplings=1),
    # gear couplings only: small clusters side by side in the schedule
    "couplings": dict(seed=2, n_bodies=9, floating_base=False, closures=(), couplings=2),
}
N_STATES = 2


# -- a planar four-bar hanging under a vertical slider (book 15.14; Chignoli et al. 2023, sec. VI) ------------

L1, L2, L3, OFFSET = 0.1, 0.15, 0.12, 0.06  # driver, coupler (to the closure point), support, hinge spacing
Q_FOUR_BAR = np.array([0.1, -1.2, -0.2995625, 1.59550865])  # hip, driver, support, coupler: closed (4e-9)


def four_bar_tree():
    b = ModelBuilder("four-bar", gravity=(0, -9.81, 0))
    b.add_body("hip", None, joints.prismatic((0, 1, 0)), mass=2.0, inertia=np.eye(3) * 0.01)
    b.add_body("driver", "hip", joints.revolute((0, 0, 1)), mass=0.2, com=(L1 / 2, 0, 0),
               inertia=np.diag([1e-4, 5e-4, 5e-4]))
    b.add_body("support", "hip", joints.revolute((0, 0, 1)), placement=(np.eye(3), (OFFSET, 0, 0)), mass=0.2,
               com=(L3 / 2, 0, 0), inertia=np.diag([1e-4, 5e-4, 5e-4]))
    b.add_body("coupler", "driver", joints.revolute((0, 0, 1)), placement=(np.eye(3), (L1, 0, 0)), mass=0.3,
               com=(0.18, 0, 0), inertia=np.diag([1e-4, 2e-3, 2e-3]))
    return b.build()


def four_bar_phi(x, l1, l2, l3, o):
    """The planar four-bar closure in the hip frame (Chignoli et al. 2023, sec. VI), x = (driver, support, coupler)."""
    q0, q1, q2 = x
    return jnp.stack([l1 * jnp.cos(q0) + l2 * jnp.cos(q0 + q2) - l3 * jnp.cos(q1) - o,
                      l1 * jnp.sin(q0) + l2 * jnp.sin(q0 + q2) - l3 * jnp.sin(q1)])


def four_bar_K_k(x, xd, l1, l2, l3):
    """The closed forms of ``K = dphi/dx`` and ``k = -Kdot xd`` (Chignoli et al. 2023, sec. VI)."""
    q0, q1, q2 = x
    d0, d1, d2 = xd
    s0, c0, s1, c1 = jnp.sin(q0), jnp.cos(q0), jnp.sin(q1), jnp.cos(q1)
    s02, c02 = jnp.sin(q0 + q2), jnp.cos(q0 + q2)
    K = jnp.array([[-l1 * s0 - l2 * s02, l3 * s1, -l2 * s02], [l1 * c0 + l2 * c02, -l3 * c1, l2 * c02]])
    k = jnp.array([l1 * c0 * d0**2 + l2 * c02 * (d0 + d2) ** 2 - l3 * c1 * d1**2,
                   l1 * s0 * d0**2 + l2 * s02 * (d0 + d2) ** 2 - l3 * s1 * d1**2])
    return K, k


def four_bar(independent=("driver",), analytic=False):
    tree = four_bar_tree()
    if analytic:
        closure = loops.implicit(["driver", "support", "coupler"], four_bar_phi, (L1, L2, L3, OFFSET), "four-bar")
    else:
        closure = loops.loop_closure("coupler", "support", (np.eye(3), (L2, 0, 0)), (np.eye(3), (L3, 0, 0)),
                                     kind="planar")
    return loops.close_loops(tree, [closure], independent=list(independent), q_reference=Q_FOUR_BAR)


# -- cases -----------------------------------------------------------------------------------------------------


class Case(NamedTuple):
    lm: loops.LoopModel
    states: list  # [(q, yd, tau, f_ext)], q closed


def _state(lm, q_closed, key, spread):
    k1, k2, k3, k4 = jax.random.split(key, 4)
    moved = jaxmb.integrate(lm.tree, q_closed, jax.random.normal(k1, (lm.nv,)), spread)  # on the manifold
    sol = loops.solve_configuration(lm, loops.independent_configuration(lm, moved), guess=q_closed, iterations=20)
    yd = jax.random.normal(k2, (lm.ny,))
    tau = jax.random.normal(k3, (lm.ny,))
    f_ext = 0.3 * jax.random.normal(k4, (lm.tree.nb, 6))
    return sol, yd, tau, f_ext


def _states(lm, q_closed, seed, n=N_STATES, spread=0.05):
    """``n`` closed states near ``q_closed``, drawn in one compiled program (op by op, each new shape of each
    operation would compile a program of its own), one state at a time (`jax.lax.map`)."""
    keys = jnp.stack([jax.random.PRNGKey(seed * 100 + i) for i in range(n)])
    draw = checks.fast_jit(lambda lm, q, keys: jax.lax.map(lambda key: _state(lm, q, key, spread), keys))
    sol, yd, tau, f_ext = draw(lm, q_closed, keys)
    assert bool(jnp.all(sol.converged)), sol.residual
    return [(sol.q[i], yd[i], tau[i], f_ext[i]) for i in range(n)]


@functools.cache
def get_case(name) -> Case:
    if name == "four-bar":
        lm = four_bar()
        return Case(lm, _states(lm, jnp.asarray(Q_FOUR_BAR), 7))
    lm, q = random_loop_model(**MODEL_SPECS[name])
    return Case(lm, _states(lm, q, MODEL_SPECS[name]["seed"] + 11))


ALL = list(MODEL_SPECS) + ["four-bar"]


class Outputs(NamedTuple):
    residual: jnp.ndarray
    KG: jnp.ndarray
    Kg_minus_k: jnp.ndarray
    ydd: jnp.ndarray
    ydd_projected: jnp.ndarray
    qdd: jnp.ndarray
    qdd_lagrange: jnp.ndarray
    lam_lagrange: jnp.ndarray
    lam_embedded: jnp.ndarray
    tau_back: jnp.ndarray
    M: jnp.ndarray
    M_autodiff: jnp.ndarray
    C: jnp.ndarray
    Kqd: jnp.ndarray
    tau_span: jnp.ndarray
    tau_with_cut_forces: jnp.ndarray


def _evaluate(lm, q, yd, tau, f_ext):
    G = loops.embedding_matrix(lm, q)
    K = loops.constraint_jacobian(lm, q)
    qd = loops.spanning_velocity(lm, q, yd)
    k = loops.constraint_bias(lm, q, qd)
    g = loops.spanning_acceleration(lm, q, yd, jnp.zeros_like(yd))
    ydd = loops.forward_dynamics(lm, q, yd, tau, f_ext)
    qdd = loops.spanning_acceleration(lm, q, yd, ydd)
    tau_span = G @ jnp.linalg.solve(G.T @ G, tau)  # any tau_span with G* tau_span = tau
    qdd_l, lam = loops.lagrange_forward_dynamics(lm, q, qd, tau_span, f_ext)
    f_cut, tau_c = loops.cut_joint_forces(lm, q, lam)
    tau_with_cut_forces = jaxmb.inverse_dynamics(lm.tree, q, qd, qdd, f_ext + f_cut) - tau_c
    inverse = lambda a: loops.inverse_dynamics(lm, q, yd, a, f_ext)  # noqa: E731
    # inverse dynamics at ydd and jax.jacfwd of it, a column at a time: linearized once (the sweeps traced once for
    # both), its linear part mapped over the columns (unbatched)
    tau_back, tangent = jax.linearize(inverse, ydd)
    M_autodiff = jax.lax.map(tangent, jnp.eye(lm.ny, dtype=ydd.dtype)).T
    return Outputs(
        residual=loops.constraint_residual(lm, q),
        KG=K @ G,
        Kg_minus_k=K @ g - k,
        ydd=ydd,
        ydd_projected=loops.projected_forward_dynamics(lm, q, yd, tau, f_ext),
        qdd=qdd,
        qdd_lagrange=qdd_l,
        lam_lagrange=lam,
        lam_embedded=loops.constraint_forces(lm, q, qd, qdd, tau_span, f_ext),
        tau_back=tau_back,
        M=loops.mass_matrix(lm, q),
        M_autodiff=M_autodiff,
        C=loops.bias_forces(lm, q, yd, f_ext),
        Kqd=K @ qd,
        tau_span=tau_span,
        tau_with_cut_forces=tau_with_cut_forces,
    )


_EVALUATE = checks.fast_jit(_evaluate)  # one program per model, called for each state


@functools.cache
def evaluate(name) -> Outputs:
    """`_evaluate` at each state of the case, stacked along a leading axis."""
    case = get_case(name)
    return jax.tree.map(lambda *x: jnp.stack(x), *[_EVALUATE(case.lm, *s) for s in case.states])


@pytest.fixture(scope="module", params=ALL)
def out(request):
    return get_case(request.param), evaluate(request.param)


# -- constraint algebra -------------------------------------------------------------------------------------------


def test_solved_configurations_close_every_loop(out):
    case, o = out
    assert float(jnp.abs(o.residual).max()) < 1e-12


def test_embedding_spans_the_constraint_null_space(out):
    """K G = 0 (the embedded velocities satisfy the constraints) and K g = k (15.24-15.27)."""
    case, o = out
    scale = float(jnp.abs(o.KG).max()) + 1.0
    assert float(jnp.abs(o.KG).max()) < 1e-12 * scale
    assert float(jnp.abs(o.Kqd).max()) < 1e-12
    assert float(jnp.abs(o.Kg_minus_k).max()) < 1e-11


def test_four_bar_closed_forms_of_K_and_k_equal_autodiff():
    lm = four_bar(analytic=True)
    (q, yd, _, _), _ = get_case("four-bar").states

    @checks.fast_jit  # one program instead of op by op
    def both(q, yd):
        qd = loops.spanning_velocity(lm, q, yd)
        K, k = four_bar_K_k(q[1:], qd[1:], L1, L2, L3)
        return loops.constraint_jacobian(lm, q)[:, 1:], K, loops.constraint_bias(lm, q, qd), k

    K_sweeps, K, k_sweeps, k = both(q, yd)
    checks.assert_close(K_sweeps, K, 1e-13)
    checks.assert_close(k_sweeps, k, 1e-13)


CLOSURE_SPECS = {  # one random loop closure of each kind
    "revolute": dict(seed=0, n_bodies=8, closures=("revolute",), couplings=0),
    "ball-floating": dict(seed=0, n_bodies=9, floating_base=True, closures=("ball",), couplings=0),
    "weld": dict(seed=3, n_bodies=8, closures=("weld",), couplings=0),
    "planar": dict(seed=1, n_bodies=8, closures=("planar",), couplings=0),
}


def _closure_to_the_world():
    """A random chain of seven bodies whose tip is held by a revolute joint to the world (the loop's other end)."""
    tree = random_model(5, 7, "screw", floating_base=False, branching=0.0)
    T = jaxmb.forward_kinematics(tree, jaxmb.random_configuration(tree, jax.random.PRNGKey(5)))
    held = tree.body_names[6]
    placement = (np.asarray(T.R[6]), np.asarray(T.p[6]))
    return loops.close_loops(tree, [loops.loop_closure(None, held, placement, kind="revolute", axis=(0, 1, 0))],
                             q_reference=jaxmb.random_configuration(tree, jax.random.PRNGKey(5)))


RATE_CASES = {
    **{name: lambda spec=spec: random_loop_model(**spec)[0] for name, spec in CLOSURE_SPECS.items()},
    "to-the-world": _closure_to_the_world,
    "couplings": lambda: random_loop_model(**MODEL_SPECS["couplings"])[0],
    "belt-leg (linear couplings)": lambda: loops.mechanisms.belt_leg(),
    "four-bar (implicit, by autodiff)": lambda: four_bar(analytic=True),
}


@pytest.mark.parametrize("name", list(RATE_CASES))
def test_constraint_rates_equal_autodiff_of_the_residual(name):
    """Each constraint's ``K`` block and ``k = -Kdot qd`` (a loop closure's: the relative spatial Jacobian of the
    cut joint and its bias acceleration; a coupling's: constants) equal ``jax.jacfwd`` and a nested ``jax.jvp`` of
    its residual, away from the loop too."""
    lm = RATE_CASES[name]()

    def rates(c, params, q, qd):
        f = lambda x: c.residual(lm.tree, params, q.at[jnp.asarray(c.coordinates)].set(x))
        x = q[jnp.asarray(c.coordinates)]
        k_autodiff = -jax.jvp(lambda x: jax.jvp(f, (x,), (qd,))[1], (x,), (qd,))[1]
        return c.jacobian(lm.tree, params, q), jax.jacfwd(f)(x), c.bias(lm.tree, params, q, qd), k_autodiff

    def every_constraint(key):
        k1, k2 = jax.random.split(key)
        q = jaxmb.random_configuration(lm.tree, k1)
        rate = jax.random.normal(k2, (lm.nq,))  # a rate per entry of q, of which each constraint reads its own
        return [rates(c, p, q, rate[jnp.asarray(c.coordinates)]) for c, p in zip(lm.constraints, lm.params)]

    keys = jnp.stack([jax.random.PRNGKey(i) for i in range(4)])
    for c, (K, K_autodiff, k, k_autodiff) in zip(lm.constraints, checks.fast_jit(jax.vmap(every_constraint))(keys)):
        assert K.shape == (4, c.size, len(c.coordinates))
        checks.assert_close(K, K_autodiff, 1e-13)
        checks.assert_close(k, k_autodiff, 1e-13)


def test_four_bar_closure_and_its_closed_form_embed_alike():
    """Two residuals of one loop (the cut joint in the coupler's frame, the closed form in the hip frame) differ
    by an invertible matrix, so they give the same G and g on the constraint manifold."""
    closure, analytic = four_bar(), four_bar(analytic=True)
    for q, yd, tau, _ in get_case("four-bar").states:
        checks.assert_close(loops.embedding_matrix(analytic, q), loops.embedding_matrix(closure, q), 1e-12)
        checks.assert_close(loops.spanning_acceleration(analytic, q, yd, tau),
                            loops.spanning_acceleration(closure, q, yd, tau), 1e-12)


def test_choice_of_independent_coordinate_does_not_change_the_motion():
    """Driver, support or coupler independent: the same spanning accelerations."""
    q, yd, tau, f_ext = get_case("four-bar").states[0]
    base, others = four_bar(), [four_bar((choice,)) for choice in ("support", "coupler")]

    @checks.fast_jit  # one program instead of op by op
    def motions(q, yd, tau, f_ext):
        qd = loops.spanning_velocity(base, q, yd)
        G = loops.embedding_matrix(base, q)
        tau_span = G @ jnp.linalg.solve(G.T @ G, tau)
        expected = loops.spanning_acceleration(base, q, yd, loops.forward_dynamics(base, q, yd, tau, f_ext))
        qdds = []
        for lm in others:
            yd_c = loops.independent_velocity(lm, qd)
            tau_c = loops.generalized_force(lm, q, tau_span)
            qdds.append(loops.spanning_acceleration(lm, q, yd_c, loops.forward_dynamics(lm, q, yd_c, tau_c, f_ext)))
        return expected, qdds

    expected, qdds = motions(q, yd, tau, f_ext)
    for qdd in qdds:
        checks.assert_close(qdd, expected, 1e-11)


# -- dynamics against the references ------------------------------------------------------------------------------


def test_embedded_forward_dynamics_equals_projection(out):
    case, o = out
    checks.assert_close(o.ydd, o.ydd_projected, RTOL)


def test_embedded_forward_dynamics_equals_lagrange_multipliers(out):
    case, o = out
    checks.assert_close(o.qdd, o.qdd_lagrange, RTOL)


def test_cut_joint_forces_of_the_embedded_solution_equal_the_multipliers(out):
    case, o = out
    checks.assert_close(o.lam_embedded, o.lam_lagrange, 1e-8, scale=float(jnp.abs(o.lam_lagrange).max()) + 1)


def test_the_tree_driven_by_the_cut_joint_forces_moves_as_the_closed_system(out):
    """Applied to the spanning tree as spatial forces (closures) and joint forces (couplings), the multipliers
    make the tree's own inverse dynamics of the constrained motion return the actuator forces."""
    case, o = out
    checks.assert_close(o.tau_with_cut_forces, o.tau_span, RTOL, scale=1.0 + float(jnp.abs(o.lam_lagrange).max()))


def test_baumgarte_rows_pull_a_drifted_state_back_to_the_loop():
    """Off the constraint manifold, the stabilized multipliers give K qdd = k - 2 zeta omega K qd - omega^2 phi."""
    lm = four_bar()
    q, yd, tau, _ = get_case("four-bar").states[0]
    q = q.at[2].add(1e-3)  # the support joint off its loop
    qd = jnp.array([0.1, 0.4, -0.3, 0.2])
    damping, stiffness = 20.0, 100.0

    @checks.fast_jit
    def rows(q, qd):
        qdd, _ = loops.lagrange_forward_dynamics(lm, q, qd, jnp.zeros(lm.nv), baumgarte=(damping, stiffness))
        K = loops.constraint_jacobian(lm, q)
        target = loops.constraint_bias(lm, q, qd) - damping * K @ qd - stiffness * loops.constraint_residual(lm, q)
        return K @ qdd, target, loops.constraint_residual(lm, q)

    Kqdd, target, phi = rows(q, qd)
    assert float(jnp.abs(phi).max()) > 1e-5
    checks.assert_close(Kqdd, target, 1e-10)


def test_inverse_dynamics_inverts_forward_dynamics(out):
    case, o = out
    tau = jnp.stack([s[2] for s in case.states])
    checks.assert_close(o.tau_back, tau, RTOL, scale=1.0)


def test_mass_matrix_is_symmetric_positive_definite_and_the_derivative_of_inverse_dynamics(out):
    case, o = out
    checks.assert_close(o.M, jnp.swapaxes(o.M, -1, -2), 1e-13)
    assert float(jnp.linalg.eigvalsh(o.M).min()) > 0
    checks.assert_close(o.M_autodiff, o.M, 1e-11)


def test_forward_dynamics_solves_the_embedded_equations(out):
    """M_y ydd + C_y = tau (15.7)."""
    case, o = out
    tau = jnp.stack([s[2] for s in case.states])
    checks.assert_close(jnp.einsum("bij,bj->bi", o.M, o.ydd) + o.C, tau, RTOL, scale=1.0)


def test_without_constraints_the_cluster_sweep_is_the_tree_aba():
    """Every node a one-body cluster with G = 1: the AB algorithm of the tree, on a mixed free-floating tree."""
    tree = random_model(41, 7, "mixed", floating_base=True, armature=True)
    lm = loops.close_loops(tree, [])
    key = jax.random.PRNGKey(5)
    q = jaxmb.random_configuration(tree, key)
    qd, tau = jax.random.normal(key, (2, tree.nv))
    f_ext = jax.random.normal(jax.random.fold_in(key, 1), (tree.nb, 6))
    both = checks.fast_jit(lambda *state: (loops.forward_dynamics(lm, *state), jaxmb.forward_dynamics(tree, *state)))
    checks.assert_close(*both(q, qd, tau, f_ext), 1e-11)


def test_the_cluster_tree_aggregates_paths_to_the_common_ancestor():
    """Four-bar: the loop driver-coupler-support hangs from the hip, which stays a node of its own (15.14)."""
    lm = four_bar()
    names = lm.tree.body_names
    loop = [c for c in lm.clusters if c.loop]
    assert len(loop) == 1 and sorted(names[b] for b in loop[0].bodies) == ["coupler", "driver", "support"]
    assert names[loop[0].anchor] == "hip"
    assert [len(level) for level in lm.schedule] == [1, 1]


def test_couplings_on_separate_branches_make_separate_clusters():
    case = get_case("couplings")
    loop = case.lm.loop_clusters
    assert len(loop) >= 2
    bodies = [set(c.bodies) for c in loop]
    assert all(not (a & b) for i, a in enumerate(bodies) for b in bodies[i + 1 :])


def test_operational_space_compliance_by_embedded_sweeps_equals_the_dense_product():
    """Lambda^-1 = J_y M_y^-1 J_y* (10.6 with 15.8) at two frames on the four-bar's loop."""
    case = get_case("four-bar")
    q, frames = case.states[0][0], ("coupler", "support")

    @checks.fast_jit
    def both(q):
        J_y = loops.task_jacobian(case.lm, q, frames)
        dense = J_y @ jnp.linalg.solve(loops.mass_matrix(case.lm, q), J_y.T)
        return loops.operational_space_compliance(case.lm, q, frames), dense

    checks.assert_close(*both(q), 1e-10)


# -- transforms and gradients -----------------------------------------------------------------------------------


def test_jit_equals_eager_and_vmap_equals_a_loop():
    """`loops.forward_dynamics` called outside transformations (the library's own compiled program), state by
    state, equals it traced under `jax.vmap` inside a caller's `jax.jit` (one program for the batch; an op-by-op
    `jax.vmap` would compile each operation's program of its own, ~500)."""
    case = get_case("four-bar")
    eager = [loops.forward_dynamics(case.lm, *s) for s in case.states]
    batched = checks.fast_jit(jax.vmap(loops.forward_dynamics, (None, 0, 0, 0, 0)))(
        case.lm, *[jnp.stack(x) for x in zip(*case.states)])
    checks.assert_close(batched, jnp.stack(eager), 1e-13)


def test_vmap_runs_in_chunks_without_scatters_and_equals_state_by_state_gradients_too(monkeypatch):
    """Under `jax.vmap` the CPU computes a batch a chunk of states at a time (`jaxmb.batching.in_cpu_chunks`,
    batch first); with loops of at most 3 dependent coordinates (the four-bar's 2) the forward call has no scatter
    and no LAPACK call (XLA's CPU backend runs both as loops over the batch). Values and gradients equal those of
    single states."""
    monkeypatch.setattr(batching, "CHUNK_STATES_VMAP", 1)  # each state a chunk of its own
    case = get_case("four-bar")
    stacked = [jnp.stack(x) for x in zip(*case.states)]
    batched = jax.vmap(lambda *a: loops.forward_dynamics(case.lm, *a))
    assert "scan" in str(jax.make_jaxpr(batched)(*stacked))  # the lax.map over chunks
    lowered = jax.jit(batched).lower(*stacked)
    text = lowered.as_text()
    assert "scatter" not in text and "lapack" not in text
    fast = None if os.environ.get("JAXMB_TEST_XLA_DEFAULTS") else checks.FAST_COMPILE_OPTIONS
    checks.assert_close(lowered.compile(fast)(*stacked),  # the program whose text was read, compiled quickly
                        jnp.stack([loops.forward_dynamics(case.lm, *s) for s in case.states]), 1e-13)
    grad = jax.grad(lambda *a: jnp.sum(jnp.sin(loops.forward_dynamics(case.lm, *a))), argnums=(1, 2, 3))
    got, one = checks.fast_jit(jax.vmap(grad))(*stacked), checks.fast_jit(grad)
    for i, state in enumerate(case.states):
        jax.tree.map(lambda g, w: checks.assert_close(g[i], w, 1e-12), got, one(*state))


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_the_embedding_solves_small_systems_as_lu_does(m):
    A = jax.random.normal(jax.random.PRNGKey(m), (m, m)) + 2 * jnp.eye(m)
    B = jax.random.normal(jax.random.PRNGKey(10 + m), (m, 3))
    np.testing.assert_allclose(solve_small_system(A, B), np.linalg.solve(A, B), rtol=1e-13, atol=1e-14)


def test_gradients_of_embedded_forward_dynamics_in_the_state_and_the_parameters(check_grads_in_groups):
    case = get_case("four-bar")
    q, yd, tau, f_ext = case.states[0]
    lm = case.lm
    y = loops.independent_configuration(lm, q)

    def fd(y, yd, tau, tree_mass, closure_params):
        model = lm.replace(tree=lm.tree.replace(mass=tree_mass), params=closure_params)
        return loops.forward_dynamics(model, loops.solve_configuration(model, y, guess=q).q, yd, tau, f_ext)

    check_grads_in_groups(fd, (y, yd, tau, lm.tree.mass, lm.params), [(0, 1, 2), (3, 4)], eps=1e-6)


def _through_the_sweeps(lm, q, yd, tau, f_ext):
    return loop_articulated._factor(lm, q, yd, tau, f_ext)[0]


def _on_the_manifold(fd, q):
    """``fd`` as a function of ``(lm, w, v, yd, tau, f_ext)``: joint placements turned by ``exp(w)`` (nb, 3) and
    joint axes normalized, the configuration ``integrate(q, v)``. Two computations of one function on rotations,
    unit axes and unit quaternions may differ off them (``R*`` is the inverse of ``R`` only on SO(3)); composed
    with this map they are one function of unconstrained arguments, with equal derivatives of every order."""

    def on_manifold(lm, w, v, yd, tau, f_ext):
        tree = lm.tree
        R = jax.lax.stop_gradient(tree.X_tree.R) @ jax.vmap(lambda r: quat_to_matrix(quat_exp(r)))(w)
        axis = tree.axis / jnp.linalg.norm(tree.axis, axis=-1, keepdims=True)
        lm = lm.replace(tree=tree.replace(X_tree=Transform(R, tree.X_tree.p), axis=axis))
        return fd(lm, jaxmb.integrate(lm.tree, q, v, 1.0), yd, tau, f_ext)

    return on_manifold


@checks.fast_jit(static_argnums=(0, 1))
def _derivatives(fd, second_order, lm, q, yd, tau, f_ext, w, v, directions):
    """Of ``sum(sin(fd(...)))`` or ``fd`` on the manifold (`_on_the_manifold`) at ``(w, v)``, in every argument (the
    model's leaves included): a directional derivative, the gradient, and with ``second_order`` the Hessian times
    that direction."""
    f = _on_the_manifold(fd, q)
    args = (lm, w, v, yd, tau, f_ext)
    gradient = jax.grad(lambda *a: jnp.sum(jnp.sin(f(*a))), argnums=range(6))
    return jax.jvp(f, args, directions)[1], *(jax.jvp(gradient, args, directions) if second_order else
                                              (gradient(*args),))


@pytest.mark.parametrize("name, second_order", [("ball-floating", False), ("four-bar", True)])
def test_forward_dynamics_derivatives_equal_autodiff_through_the_sweeps(name, second_order):
    """`loops.forward_dynamics` differentiates by the implicit function theorem on the cluster RNEA,
    ``d ydd = M_y^-1 (d tau - d ID_y)``; a directional derivative, its gradient and a Hessian-vector product (the
    rule differentiated again) equal those of autodiff through the embedded AB sweeps, in the state, ``f_ext`` and
    every parameter of the tree and the constraints. The configuration need not close the loops: both solve the
    embedded equations at any ``q``. (The Hessian on the smaller model: its programs are the slowest of the suite to compile.)"""
    case = get_case(name)
    q, yd, tau, f_ext = case.states[0]
    key_w, key_v, key_d = jax.random.split(jax.random.PRNGKey(5), 3)
    w = 0.1 * jax.random.normal(key_w, (case.lm.tree.nb, 3))
    v = 0.1 * jax.random.normal(key_v, (case.lm.nv,))
    flat, tree = jax.tree.flatten((case.lm, w, v, yd, tau, f_ext))
    keys = jax.random.split(key_d, len(flat))
    directions = jax.tree.unflatten(tree, [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, flat)])
    implicit, sweeps = (_derivatives(fd, second_order, case.lm, q, yd, tau, f_ext, w, v, directions)
                        for fd in (loops.forward_dynamics, _through_the_sweeps))
    for part, expected in zip(implicit, sweeps):  # each relative to its largest entry (Hessian's: up to 1e8)
        scale = max(float(jnp.abs(x).max()) for x in jax.tree.leaves(expected) if x.size)
        for a, b in zip(jax.tree.leaves(part), jax.tree.leaves(expected)):
            checks.assert_close(a, b, 1e-10, scale)


def test_pinocchio_constrained_forward_dynamics_on_the_same_spanning_tree():
    """panda with its hand pinned to the world (a ball closure) and the fingers coupled: jaxmb's embedded AB
    algorithm against Pinocchio's KKT ``forwardDynamics(q, v, tau, K, -k)``."""
    pin = pytest.importorskip("pinocchio")
    import pinocchio_bridge as pb

    tree, pm, bridge = pb.load_pair("panda")
    key = jax.random.PRNGKey(3)
    q0 = jaxmb.random_configuration(tree, key)
    hand = jaxmb.forward_kinematics(tree, q0)
    i = tree.body_index("panda_link7")
    pin_point = (np.eye(3), np.asarray(hand.R[i] @ jnp.array([0.0, 0.0, 0.1]) + hand.p[i]))
    fingers = [n for n in tree.joint_names if "finger" in n]
    lm = loops.close_loops(tree, [loops.loop_closure("panda_link7", None, (np.eye(3), (0, 0, 0.1)), pin_point,
                                                     kind="ball"),
                                  loops.coupling(fingers[1], fingers[0], 1.0, float(q0[-1] - q0[-2]))],
                           q_reference=q0)
    assert lm.ny == tree.nv - 4
    q, yd, tau, _ = _states(lm, q0, 21, n=1)[0]

    @checks.fast_jit  # one program instead of op by op
    def embedded(q, yd, tau):
        qd = loops.spanning_velocity(lm, q, yd)
        G = loops.embedding_matrix(lm, q)
        tau_span = G @ jnp.linalg.solve(G.T @ G, tau)
        qdd = loops.spanning_acceleration(lm, q, yd, loops.forward_dynamics(lm, q, yd, tau))
        return qd, tau_span, qdd, loops.constraint_jacobian(lm, q), loops.constraint_bias(lm, q, qd)

    qd, tau_span, qdd, K, k = (np.asarray(x) for x in embedded(q, yd, tau))
    K = K @ bridge.P.T  # columns in Pinocchio's velocity order
    data = pm.createData()
    a_pin = pin.forwardDynamics(pm, data, bridge.q_to_pin(q), bridge.P @ qd, bridge.P @ tau_span, K, -k, 0.0)
    checks.assert_close(bridge.P.T @ a_pin, qdd, RTOL)


# -- bad input --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("constraints, match", [
    ([loops.coupling("nope", "driver", 2.0)], "no movable joint 'nope'"),
    ([loops.loop_closure("coupler", "coupler")], "same body"),
    ([loops.loop_closure("coupler", "nowhere")], "no body or frame 'nowhere'"),
    ([loops.loop_closure("coupler", "support", kind="hinge")], "kind must be one of"),
    ([loops.loop_closure("coupler", "support", kind="weld")], "leave no degree of freedom"),
    ([loops.linear_coupling(["driver", "support", "coupler"], [[1, 1, 1]])] * 2, "not independent"),
])
def test_bad_constraints_raise_a_model_error_naming_them(constraints, match):
    with pytest.raises(ModelError, match=match):
        loops.close_loops(four_bar_tree(), constraints, q_reference=Q_FOUR_BAR)


def test_a_loop_through_a_multi_dof_joint_is_refused():
    tree = random_model(41, 7, "mixed", floating_base=True)
    sph = tree.joint_types.index("spherical")
    below = [i for i in range(tree.nb) if tree.topology.parent[i] == sph]
    other = next(i for i in range(1, tree.nb) if i != sph and i not in below)
    with pytest.raises(ModelError, match="1-dof"):
        loops.close_loops(tree, [loops.loop_closure(tree.body_names[sph], tree.body_names[other], kind="ball")])


def test_a_wrong_choice_of_independent_coordinates_is_refused():
    with pytest.raises(ModelError, match="needs 1 independent"):
        four_bar(("driver", "support"))
    with pytest.raises(ModelError, match="in no loop"):
        four_bar(("driver", "hip"))


# -- singular reference poses, wrapped angles, the multipliers' basis ------------------------------------------------


def _flat_four_bar():
    """A four-bar in the x-z plane (hinges about y) that lies flat along x at zero angles: crank 0.1 m from the
    origin, coupler 0.3 m, rocker 0.1 m pointing back from its pivot at (0.5, 0, 0). Every point of the loop is on
    the x axis there, so every joint moves the closure point along z only: the pose is singular."""
    Y = (0.0, 1.0, 0.0)
    b = ModelBuilder("flat_four_bar")
    rod = lambda m, length: dict(mass=m, com=(length / 2, 0.0, 0.0), inertia=np.diag([1e-5, m * length**2 / 12, 1e-5]))
    b.add_body("crank", None, joints.revolute(Y), **rod(0.1, 0.1))
    b.add_body("coupler", "crank", joints.revolute(Y), placement=(np.eye(3), (0.1, 0.0, 0.0)), **rod(0.2, 0.3))
    b.add_body("rocker", None, joints.revolute(Y), placement=(np.eye(3), (0.5, 0.0, 0.0)), **rod(0.1, -0.1))
    b.add_frame("coupler_tip", "coupler", (np.eye(3), (0.3, 0.0, 0.0)))
    b.add_frame("rocker_tip", "rocker", (np.eye(3), (-0.1, 0.0, 0.0)))
    return b.build(), loops.loop_closure("coupler_tip", "rocker_tip", kind="planar", axis=Y)


@pytest.mark.parametrize("independent", [["crank"], ["coupler"], ["rocker"], None])
def test_singular_reference_pose_is_named_as_such_with_q_reference_as_the_remedy(independent):
    """At a pose where the constraint Jacobian has lower rank than the constraint rows (the flattened four-bar),
    no choice of dependent coordinates helps: the error says the pose is singular and to pass q_reference; a
    non-singular q_reference (it need not close the loop) then builds the model."""
    tree, closure = _flat_four_bar()
    with pytest.raises(ModelError) as info:
        loops.close_loops(tree, [closure], independent=independent)
    message = str(info.value)
    for fragment in ("reference pose is singular", "rank 1, below its 2 constraint rows", "q_reference",
                     "neutral configuration"):
        assert fragment in message, message
    assert "choose others" not in message
    q_ref = jnp.zeros(3)
    for name, angle in (("crank", 0.4), ("coupler", -0.8), ("rocker", 0.6)):  # bent, near a closed pose
        q_ref = q_ref.at[tree.joint_coordinates(name)[0]].set(angle)
    lm = loops.close_loops(tree, [closure], independent=independent, q_reference=q_ref)
    assert lm.ny == 1


def test_solve_configuration_wraps_dependent_angles_to_the_guess_turn():
    """Newton's method from the neutral configuration can end whole turns away; the dependent revolute angles come
    back in (-pi, pi] without a guess and within half a turn of the guess with one, still closing the loop."""
    lm = loops.mechanisms.four_bar_leg()
    dep = np.asarray(loops.position.dependent_q_index(lm))
    solve = checks.fast_jit(loops.solve_configuration, static_argnums=3)
    converged = 0
    for driver in np.linspace(-3.0, 3.0, 13):
        y = jnp.array([0.0, driver])
        sol = solve(lm, y, None, 30)
        if not bool(sol.converged):
            continue
        q = np.asarray(sol.q)
        assert np.all((q[dep] > -np.pi) & (q[dep] <= np.pi)), (driver, q[dep])
        shifted = jnp.asarray(q).at[dep].add(2 * np.pi * np.array([1.0, -2.0]))
        moved = np.asarray(solve(lm, y, shifted, 30).q)
        np.testing.assert_allclose(moved[dep], q[dep] + 2 * np.pi * np.array([1.0, -2.0]), atol=1e-9)
        assert float(jnp.max(jnp.abs(loops.constraint_residual(lm, sol.q)))) < 1e-9  # still a solution
        converged += 1
    assert converged >= 8  # most drives converge from the neutral guess


def test_constraint_forces_are_the_kkt_multipliers_in_the_documented_row_basis():
    """lambda of `constraint_forces` equals the multipliers of the dense KKT system M qdd - K* lambda = tau - C,
    K qdd = k, where K's rows are built here from frame poses in the documented basis: the planar closure's rows
    u1 . d and u2 . d, d frame b's origin in frame a's axes, (u1, u2) = orthonormal_pair(axis)."""
    from jaxmb.loops.constraints import orthonormal_pair

    lm = loops.mechanisms.four_bar_leg()
    q = loops.mechanisms.reference_configuration(lm)
    yd = jnp.array([0.3, -1.2])
    tau = jnp.array([0.5, 0.2, -0.1, 0.05])
    tree = lm.tree
    a, b = tree.frame_index("lever"), tree.frame_index("rod_end")
    U = jnp.asarray(orthonormal_pair(np.array([0.0, 1.0, 0.0])))

    def rows(q):
        T = jaxmb.frame_poses(tree, q)
        return U @ (T.R[a].T @ (T.p[b] - T.p[a]))

    @checks.fast_jit  # one program instead of op by op
    def evaluate(q, yd, tau):
        qd = loops.spanning_velocity(lm, q, yd)
        K = jax.jacfwd(rows)(q)  # every joint has nq = nv = 1
        k = -jax.jvp(lambda q: jax.jacfwd(rows)(q) @ qd, (q,), (qd,))[1]
        M, C = jaxmb.mass_matrix(tree, q), jaxmb.bias_forces(tree, q, qd)
        n, m = tree.nv, K.shape[0]
        kkt = jnp.block([[M, -K.T], [K, jnp.zeros((m, m))]])
        sol = jnp.linalg.solve(kkt, jnp.concatenate([tau - C, k]))
        qdd, lam_kkt = sol[:n], sol[n:]
        return (rows(q), loops.constraint_residual(lm, q), loops.constraint_forces(lm, q, qd, qdd, tau),
                loops.lagrange_forward_dynamics(lm, q, qd, tau)[1], lam_kkt)

    rows_q, residual, lam, lam_lagrange, lam_kkt = evaluate(q, yd, tau)
    np.testing.assert_allclose(rows_q, residual, atol=1e-12)
    np.testing.assert_allclose(lam, lam_kkt, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(lam_lagrange, lam_kkt, rtol=1e-9, atol=1e-9)
    assert float(jnp.max(jnp.abs(lam_kkt))) > 1e-3  # a real force, not a vacuous zero
