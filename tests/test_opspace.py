"""Operational space on random trees, in float64: the compliance Lambda^-1 = J M^-1 J* by column sweeps, the
Upsilon kernel, the projector identities of Lemmas 10.3-10.4, C_os three ways, the operational-space controller
in closed loop, and the derivatives of Lambda^-1 (book ch. 10; tests named by equation).

Dense references: `jaxmb.operators.dense_operators` (blocks from the recursions, stacked in numpy), the CRBA mass
matrix with a dense solve, and the frame Jacobians of `jaxmb.jacobian`. Pinocchio's Jacobians and mass matrix
check the same compliance on the real robots in tests/test_pinocchio_oracle.py.

Compiling dominates the cost, so `evaluate` computes every quantity the tests compare in one jitted program per
model (all tasks and gravity variants), called per state, and the tests only compare its outputs.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import checks
import jaxmb
from jaxmb.testing import random_inertia, random_model, random_state

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


def dense_task(m, q, qd, n, axes, reference, per_frame):
    """J, Jdot qd of the task from the per-frame functions of jaxmb.kinematics; ``per_frame``: a dict that keeps
    each frame's (Jacobian, bias acceleration) for the other tasks of the same state."""
    rows = np.asarray(jaxmb.dynamics.opspace.task(m, frames_of(m, n), axes, reference).axes)
    for f in frames_of(m, n):
        if (f, reference) not in per_frame:
            per_frame[f, reference] = (jaxmb.jacobian(m, q, f, reference),
                                       jaxmb.frame_bias_acceleration(m, q, qd, f, reference))
    J, a = zip(*(per_frame[f, reference] for f in frames_of(m, n)))
    return jnp.concatenate([x[rows] for x in J]), jnp.concatenate([x[rows] for x in a])


def dense_Omega(ops):
    """Omega = psi* H* D^-1 H psi (10.12) from the dense operators."""
    return ops.psi.T @ ops.H.T @ np.linalg.solve(ops.D, ops.H @ ops.psi)


def _full_rank_task(name):
    """A task with fewer rows than the upstream coordinates of its frames, so that Lambda exists."""
    return "two-frames-two-axes" if name != "floating-mixed" else "two-frames-two-axes-world"


# -- everything the tests compare, for one model at each state -----------------------------------------------------
#
# Compiling dominates the cost of this module, so `evaluate` computes every quantity the tests compare in one
# jitted program per model: all tasks and the gravity variants (with gravity and without, a `jax.lax.map`), called
# for the state of every test (one seed each). The tests only compare its outputs.

SEEDS = tuple(range(10))  # the state of seed s is random_state(model, PRNGKey(s)); each test uses its own seeds
WALKED_TASK = "two-frames-two-axes-world"  # the task whose compliance `evaluate` also gets alone, by the walk
GRAVITY = {"gravity": 0, "no-gravity": 1}  # index along the gravity axis of `evaluated(name)["gravity"]`


def _evaluate(m, q, qd, tau, u, posture, full_rank):
    """All quantities at one state; ``u`` and ``posture`` are the task accelerations and posture forces of the
    closed-loop controller, on the task ``full_rank``."""
    out, per_frame = {"tasks": {}}, {}
    for task_name, (n, axes, reference) in TASKS.items():
        frames = frames_of(m, n)
        ts = jaxmb.task_space(m, q, frames, axes, reference)
        J, a_os = dense_task(m, q, qd, n, axes, reference, per_frame)
        out["tasks"][task_name] = {
            "ts": ts,
            "J_dense": J,
            "a_os": a_os,
        }
    n, axes, reference = TASKS[WALKED_TASK]  # the walk alone (`task_space` walks the same columns)
    out["Lambda_inv_walked"] = jaxmb.operational_space_compliance(m, q, frames_of(m, n), axes, reference)
    out["M"] = jaxmb.mass_matrix(m, q)
    out["Lambda_inv_bodies"] = jaxmb.operational_space_compliance(m, q, m.body_names[-2:])  # body origins
    out["upsilon"] = jaxmb.upsilon(m, q)
    X = jaxmb.hinges.joint_poses(m, q)
    out["X_R"], out["X_p"] = X.R, X.p
    out["R"] = jaxmb.forward_kinematics(m, q).R

    n, axes, reference = TASKS[full_rank]
    frames = frames_of(m, n)
    J, a_os = out["tasks"][full_rank]["J_dense"], out["tasks"][full_rank]["a_os"]

    def with_gravity(gravity):
        mg = m.replace(gravity=gravity)
        ab = jaxmb.articulated_body(mg, q, qd, tau)

        def closed_loop(tau_posture):
            tau_c = jaxmb.operational_space_control(mg, q, qd, frames, u, tau_posture, axes, reference, damping=0.0)
            return J @ jaxmb.forward_dynamics(mg, q, qd, tau_c) + a_os

        return {
            "C": jaxmb.bias_forces(mg, q, qd),
            "C_os": jaxmb.operational_space_bias(mg, q, qd, tau, frames, axes, reference, damping=0.0),
            "a": ab.a,
            "z": ab.z,
            "tau_bar": ab.tau_bar,
            "P": ab.P,  # the articulated inertias, of q alone (the same with any qd, tau and gravity)
            "closed_loop": jax.lax.map(closed_loop, jnp.stack([jnp.zeros(m.nv), posture])),  # [no posture, posture]
        }

    out["gravity"] = jax.lax.map(with_gravity, jnp.stack([m.gravity, jnp.zeros(3)]))
    return out


# One program per model, called for each state: a program for the batch, through the batching rules of the sweeps,
# takes longer to compile (tests/test_batching.py checks those rules against single states).
evaluate = functools.partial(checks.fast_jit, static_argnames="full_rank")(_evaluate)


def controller_inputs(name, seed):
    """Task accelerations u and posture forces of the closed-loop test at the state of ``seed``."""
    m = model(name)
    n, axes, _ = TASKS[_full_rank_task(name)]
    c = n * len(jaxmb.dynamics.opspace.task(m, frames_of(m, n), axes).axes)
    return (jax.random.normal(jax.random.PRNGKey(seed), (c,)),
            jax.random.normal(jax.random.PRNGKey(seed + 100), (m.nv,)))


@functools.cache
def evaluated(name):
    """{seed: (state (q, qd, tau), outputs as numpy arrays)} for every seed of SEEDS."""
    states = [state(name, s) for s in SEEDS]
    inputs = [controller_inputs(name, s) for s in SEEDS]
    out = [jax.tree.map(np.asarray, evaluate(model(name), *state, *controls, full_rank=_full_rank_task(name)))
           for state, controls in zip(states, inputs)]
    return {s: (tuple(np.asarray(x) for x in states[i]), out[i]) for i, s in enumerate(SEEDS)}


@functools.cache
def operators(name, seed):
    """The dense operators (`jaxmb.operators.dense_operators`) at the configuration of ``seed``."""
    return checks.dense_operators(model(name), evaluated(name)[seed][0][0])


def state(name, seed):
    m = model(name)
    return _random_state(m, jax.random.PRNGKey(seed))


_random_state = checks.fast_jit(random_state)  # one program per model instead of op by op


@pytest.mark.parametrize("task_name", list(TASKS))
@pytest.mark.parametrize("name", ALL)
def test_10_6_compliance_is_J_Minv_Jstar(name, task_name):
    _, out = evaluated(name)[0]
    t = out["tasks"][task_name]
    J, M = t["J_dense"], out["M"]
    assert_close(t["ts"].J, J)
    assert_close(t["ts"].Lambda_inv, J @ np.linalg.solve(M, J.T))
    assert_close(t["ts"].Minv_Jt, np.linalg.solve(M, J.T))
    if task_name == WALKED_TASK:
        assert_close(out["Lambda_inv_walked"], t["ts"].Lambda_inv)


@pytest.mark.parametrize("name", ALL)
def test_10_12_compliance_is_B_star_Omega_B_and_Omega_two_ways(name):
    """Omega = psi* H* D^-1 H psi = phi* H* M^-1 H phi (10.12), and Lambda^-1 = B* Omega B for frames at body
    origins, B picking the bodies' blocks."""
    m = model(name)
    _, out = evaluated(name)[1]
    ops = operators(name, 1)
    M = out["M"]
    Omega = dense_Omega(ops)
    assert_close(Omega, ops.phi.T @ ops.H.T @ np.linalg.solve(M, ops.H @ ops.phi))
    bodies = [m.nb - 2, m.nb - 1]
    B = np.zeros((6 * m.nb, 12))
    for i, k in enumerate(bodies):
        B[6 * k : 6 * k + 6, 6 * i : 6 * i + 6] = np.eye(6)
    assert_close(out["Lambda_inv_bodies"], B.T @ Omega @ B)


@pytest.mark.parametrize("name", ALL)
def test_10_16_upsilon_is_diagonal_of_Omega(name):
    m = model(name)
    _, out = evaluated(name)[2]
    ops = operators(name, 2)
    Omega = dense_Omega(ops)
    U = out["upsilon"]
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
    _, out = evaluated("floating-mixed")[3]
    assert m.joint_types[0] == "free"
    assert_close(out["upsilon"][0], np.linalg.inv(out["gravity"]["P"][GRAVITY["no-gravity"]][0]))


@pytest.mark.parametrize("name", ALL)
def test_10_35_to_10_40_projector_identities(name):
    o = operators(name, 4)
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


def task_rows(m, R, frames, axes, reference):
    """The task rows d (m, r, 6) of frames at body origins: rows of I (frame axes) or of diag(R, R) (world axes),
    R (nb, 3, 3) the world rotations of the bodies."""
    rows = np.asarray(jaxmb.dynamics.opspace.task(m, frames, axes, reference).axes)
    out = []
    for f in frames:
        S = np.eye(6)
        if reference == "world_aligned":
            S[:3, :3] = S[3:, 3:] = R[m.body_index(f)]
        out.append(S[rows])
    return np.stack(out)


@pytest.mark.parametrize("gravity", list(GRAVITY))
@pytest.mark.parametrize("name", ALL)
def test_C_os_three_ways(name, gravity):
    """C_os from the definition (10.8), from Alg 10.5 written with the dense operators, and from the library's
    shortcut -Lambda B* alpha_free (Lemma 10.5).

    Alg 10.5: theta = z of the articulated-body sweep; eta = psi* (H* D^-1 (H theta - T) - a_gr), the world's
    pseudo-acceleration [0; -g] entering each root body through psi*(world, root) = tau_bar* phi*; zeta = eta +
    col{[0; -g]} in body coordinates; C_os = Lambda B* zeta."""
    m = model(name, gravity == "gravity")
    n, axes, reference = TASKS[_full_rank_task(name)]
    frames = frames_of(m, n)
    for seed in (5, 6):
        (q, qd, tau), out = evaluated(name)[seed]
        t, g = out["tasks"][_full_rank_task(name)], jax.tree.map(lambda a: a[GRAVITY[gravity]], out["gravity"])
        J, M = t["J_dense"], out["M"]
        Lam = np.linalg.inv(J @ np.linalg.solve(M, J.T))
        definition = -Lam @ (J @ np.linalg.solve(M, tau - g["C"]) + t["a_os"])  # (10.8)
        scale = max(1.0, float(np.abs(definition).max()))
        assert_close(g["C_os"], definition, scale=scale)

        o = operators(name, seed)
        R = out["R"]
        g_pseudo = -np.asarray(m.gravity)
        a_gr = g["a"].copy()
        for k, p in enumerate(m.topology.parent):
            if p < 0:
                X_k = jaxmb.Transform(jnp.asarray(out["X_R"][k]), jnp.asarray(out["X_p"][k]))
                world = jaxmb.spatial.phi_star(X_k, jnp.concatenate([jnp.zeros(3), g_pseudo]))
                a_gr[k] += g["tau_bar"][k].T @ np.asarray(world)
        z, T = g["z"].reshape(-1), tau
        eta = o.psi.T @ (o.H.T @ np.linalg.solve(o.D, o.H @ z - T) - a_gr.reshape(-1))
        zeta = eta.reshape(m.nb, 6) + np.concatenate([np.zeros((m.nb, 3)), R.transpose(0, 2, 1) @ g_pseudo], -1)
        d = task_rows(m, R, frames, axes, reference)
        B_zeta = np.concatenate([d[i] @ zeta[m.body_index(f)] for i, f in enumerate(frames)])
        assert_close(Lam @ B_zeta, definition, scale=scale)


@pytest.mark.parametrize("gravity", list(GRAVITY))
@pytest.mark.parametrize("name", ALL)
def test_controller_gives_task_accelerations_u(name, gravity):
    """Closed loop: tau = J* (Lambda u + C_os) + N* tau_posture in forward dynamics gives J qdd + Jdot qd = u,
    whatever the posture forces (N* is dynamically consistent)."""
    for seed in (7, 8):
        _, out = evaluated(name)[seed]
        u, _ = controller_inputs(name, seed)
        no_posture, posture = out["gravity"]["closed_loop"][GRAVITY[gravity]]
        assert_close(no_posture, u)
        assert_close(posture, u)


@pytest.mark.parametrize("name", ["chain-revolute", "floating-mixed"])
def test_compliance_gradients_match_finite_differences(name):
    m = model(name)
    q, _, _ = state(name, 9)
    frames = frames_of(m, 2)
    if m.joint_types[0] == "free":  # differentiate along the tangent of the quaternion sphere too
        f = lambda q: jaxmb.operational_space_compliance(m, q, frames, "linear", "world_aligned")
    else:
        f = lambda q: jaxmb.operational_space_compliance(m, q, frames)
    checks.check_grads(f, (q,), atol=1e-6, rtol=1e-6)


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

    def total(arm, q):
        return jnp.sum(jaxmb.operational_space_inertia(arm, q, "tip", "linear").Lambda)

    @checks.fast_jit  # one program instead of op by op
    def evaluate(arm, q, bent):
        return (jaxmb.operational_space_inertia(arm, q, "tip", "linear"), jax.grad(total, argnums=1)(arm, q),
                jaxmb.operational_space_inertia(arm, bent, "tip", (3, 4)).rank_deficient)

    out, grad, bent_rank_deficient = evaluate(arm, q, jnp.array([0.3, 0.8, -0.5]))
    assert bool(out.rank_deficient)
    assert np.all(np.isfinite(out.Lambda))
    assert np.all(np.isfinite(grad))
    assert not bool(bent_rank_deficient)


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


def _two_trees_with_frames():
    """Two trees on a fixed base, with spherical, planar and revolute joints on the frames' paths (so that one walk
    step meets joints of different sizes), and frames on the world, on a root, twice on one body, and on both
    trees."""
    rng = np.random.default_rng(7)
    b = jaxmb.ModelBuilder("two-trees")
    bodies = (("a0", None, jaxmb.joints.spherical()), ("a1", "a0", jaxmb.joints.revolute((0, 1, 0))),
              ("a2", "a1", jaxmb.joints.planar()), ("a3", "a0", jaxmb.joints.prismatic((1, 0, 0))),
              ("a4", "a3", jaxmb.joints.revolute((0, 0, 1))), ("c0", None, jaxmb.joints.revolute((1, 0, 0))),
              ("c1", "c0", jaxmb.joints.spherical()))
    for name, parent, joint in bodies:
        mass, com, inertia = random_inertia(rng)
        b.add_body(name, parent, joint, placement=(np.eye(3), rng.uniform(-0.5, 0.5, 3)), mass=mass, com=com,
                   inertia=inertia)
    for name, body in (("ground", None), ("tip", "a2"), ("tip2", "a2"), ("side", "a4"), ("root", "a0"),
                       ("other", "c1")):
        b.add_frame(name, body, (np.eye(3), rng.uniform(-0.3, 0.3, 3)))
    return b.build()


WALK_TASKS = {
    "all": ("tip", "ground", "side", "other", "root", "tip2"),
    "one tree": ("side", "tip"),
    "root only": ("root",),
    "world only": ("ground",),
}


@pytest.mark.parametrize("reference", ["local", "world_aligned"])
def test_compliance_walk_equals_J_times_the_down_sweeps_Minv_Jstar_and_dense_J_Minv_Jstar(reference):
    """The frames' walk up their paths (`jaxmb.dynamics.compliance`) gives the compliance of J times the
    ``M^-1 J*`` of the down sweep (`task_space`) and of the dense J M^-1 J*, for frames anywhere: frames fixed to
    the world have zero rows, frames on two trees of a fixed base a zero block, and a spherical joint meets planar
    and prismatic ones at one step."""
    m = _two_trees_with_frames()
    qs = [_random_state(m, jax.random.PRNGKey(s))[0] for s in range(3)]

    @checks.fast_jit
    def both(q):
        out = {}
        for name, frames in WALK_TASKS.items():  # two of the six axes on the task with every kind of frame
            for r, axes in ((6, None), (2, (1, 5))) if name == "all" else ((6, None),):
                out[name, r] = (jaxmb.operational_space_compliance(m, q, frames, axes, reference),
                                   jaxmb.task_space(m, q, frames, axes, reference))
        return out, jaxmb.mass_matrix(m, q)

    out, M = jax.tree.map(lambda *x: np.stack(x), *[both(q) for q in qs])  # one program, called per state
    for (name, r), (walked, ts) in out.items():
        for i in range(len(qs)):
            assert_close(walked[i], ts.Lambda_inv[i])
            assert_close(walked[i], ts.J[i] @ ts.Minv_Jt[i])
            assert_close(ts.Minv_Jt[i], np.linalg.solve(M[i], ts.J[i].T))
            assert_close(walked[i], ts.J[i] @ np.linalg.solve(M[i], ts.J[i].T))
            if "ground" in WALK_TASKS[name]:
                g = WALK_TASKS[name].index("ground")
                assert not walked[i][r * g : r * g + r].any() and not walked[i][:, r * g : r * g + r].any()
    tip, other = WALK_TASKS["all"].index("tip"), WALK_TASKS["all"].index("other")
    assert not out["all", 6][0][:, 6 * tip : 6 * tip + 6, 6 * other : 6 * other + 6].any()


def test_compliance_walk_visits_only_the_frames_ancestors():
    """Each step of the walk holds every frame whose path is still that long, at its s-th ancestor: the walk
    visits the bodies of the frames' paths, each once per frame below it, and no other body."""
    m = _two_trees_with_frames()
    t = jaxmb.dynamics.opspace.task(m, WALK_TASKS["all"])
    plan = jaxmb.dynamics.compliance.walk(m.topology, t.body)
    paths = {f: m.topology.ancestors(t.body[f]) for f in plan.order}
    assert [len(paths[f]) for f in plan.order] == sorted((len(p) for p in paths.values()), reverse=True)
    assert t.frames[t.body.index(-1)] == "ground" and t.body.index(-1) not in plan.order
    for s, step in enumerate(plan.steps):
        at = {int(f): int(b) for g in step.groups for f, b in zip(plan.order[g.pos], g.body)}
        assert at == {int(f): paths[f][s] for f in plan.order if len(paths[f]) > s}
        for g in step.groups:
            assert np.all(m.topology.nv_body[g.body] == g.dofs.shape[1])
    assert sum(len(p) for p in paths.values()) == sum(len(g.pos) for step in plan.steps for g in step.groups)
