"""Frictional contact with known answers: resting, sliding, sticking, dropping, standing; the solver's optimality
conditions; the compliant model against the constraint model; gradients through contact.

Closed-form mechanics is the oracle: a box at rest carries its weight, slides to a stop at the deceleration
``mu g``, sticks on an incline below ``tan(theta) = mu`` and slides above it at ``g (sin - mu cos)``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb import assets, joints
from jaxmb.sim import box, init_state, make_scene, plane, position, residuals, rollout, sphere, step, urdf_geometry
from jaxmb.kinematics import forward_kinematics
from jaxmb.sim.compliance import row_space
from jaxmb.sim.contact_frames import contacts
from jaxmb.sim.joint_rows import joint_rows
from jaxmb.sim.integrators import euler
from jaxmb.sim.stages import step_factors
from jaxmb.testing import random_model
from jaxmb.sim.solver import solve, sweep

from checks import fast_jit

G = 9.81
MASS = 2.0
HALF = (0.2, 0.15, 0.1)


def free_body(shape):
    b = jaxmb.ModelBuilder("body")
    b.add_body("body", None, joints.free(), mass=MASS, inertia=np.diag([0.03, 0.04, 0.05]))
    return b.build(), shape


def box_scene(mu=0.5, normal=(0.0, 0.0, 1.0), **options):
    model, _ = free_body(None)
    return make_scene(model, [plane(normal=normal, name="floor", friction=mu), box("body", HALF, friction=mu)],
                      **options)


def box_on(normal, height=HALF[2]):
    """A box resting on the plane through the origin with unit ``normal`` (in the xz-plane), its faces aligned."""
    n = np.asarray(normal) / np.linalg.norm(normal)
    theta = np.arctan2(n[0], n[2])  # the plane's tilt about y
    quat = np.array([np.cos(theta / 2), 0.0, np.sin(theta / 2), 0.0])
    return jnp.asarray(np.concatenate([height * n, quat]))


def test_resting_box_carries_its_weight_without_drift():
    """On four corner contacts the normal forces sum to the weight to 1e-6 relative, and over 10 s the box moves by
    less than 1e-6 m."""
    scene = box_scene()
    final, states = rollout(scene, init_state(scene, box_on((0, 0, 1))), 0.002, steps=5000)
    weight = float(jnp.sum(final.contact.force[:, 0]))
    assert abs(weight / (MASS * G) - 1) < 1e-6
    assert float(jnp.max(jnp.abs(states.q[:, :3] - states.q[0, :3]))) < 1e-6


def test_sliding_box_decelerates_at_mu_g():
    """Launched at 2 m/s on a plane of friction 0.5, a box decelerates at ``mu g`` within 1 % (here far closer) and
    stops."""
    scene = box_scene(mu=0.5)
    state = init_state(scene, box_on((0, 0, 1)), jnp.array([0, 0, 0, 2.0, 0, 0]))
    final, states = rollout(scene, state, 0.001, steps=500)
    v = np.asarray(states.qd[:, 3])
    deceleration = (v[50] - v[250]) / 0.2
    assert abs(deceleration / (0.5 * G) - 1) < 1e-3
    assert abs(float(final.qd[3])) < 1e-6


@pytest.mark.parametrize("tilt, sticks", [(0.4, True), (0.6, False)])
def test_box_on_incline_sticks_below_the_friction_angle_and_slides_above(tilt, sticks):
    """On a plane tilted by ``theta`` with ``mu = 0.5`` (``atan(0.5) = 0.4636`` rad), a box placed at rest sticks
    (moves less than a micrometre in 0.5 s) or slides down at ``g (sin theta - mu cos theta)`` within 1 %."""
    normal = (np.sin(tilt), 0.0, np.cos(tilt))
    scene = box_scene(mu=0.5, normal=normal)
    final, states = rollout(scene, init_state(scene, box_on(normal)), 0.001, steps=500)
    moved = float(jnp.linalg.norm(final.q[:3] - states.q[0, :3]))
    if sticks:
        assert moved < 1e-6
    else:
        expected = G * (np.sin(tilt) - 0.5 * np.cos(tilt))
        speed = np.linalg.norm(np.asarray(states.qd[:, 3:]), axis=1)  # body-frame linear velocity
        acceleration = (speed[400] - speed[100]) / 0.3
        assert abs(acceleration / expected - 1) < 1e-2


def test_dropped_sphere_lands_without_bouncing():
    """A ball dropped from 0.5 m meets the floor with no rebound: from the step it lands, it never rises above its
    radius by a nanometre nor moves up faster than a micrometre per second (the stabilization removes the
    regularization's sub-nanometre penetration), and it rests at its radius with a normal force equal to its
    weight."""
    model, _ = free_body(None)
    r = 0.1
    scene = make_scene(model, [plane(name="floor"), sphere("body", r)])
    q0 = jnp.array([0, 0, 0.5, 1.0, 0, 0, 0])
    final, states = rollout(scene, init_state(scene, q0), 0.001, steps=1000)
    z = np.asarray(states.q[:, 2])
    landed = int(np.argmax(z < r + 1e-6))
    assert landed > 0 and np.all(z[landed:] < r + 1e-9)
    assert float(jnp.max(states.qd[landed:, 5])) < 1e-6
    assert abs(float(final.q[2]) - r) < 1e-5
    assert abs(float(final.contact.force[0, 0]) / (MASS * G) - 1) < 1e-6


def solved_problem(scene, state, dt):
    cf = euler(scene, state.q, state.qd, jnp.zeros(scene.nu), dt, state.impulse).constraints
    return cf.problem, cf.impulse


def test_contact_impulses_satisfy_the_coulomb_conditions():
    """A box sliding and spinning on a plane, and tipped onto one edge: at the step's impulses the normal
    complementarity, the cone, and the alignment of friction with slip hold to 1e-9 (relative to the impulses)
    after the solver's sweeps (and the previous steps' warm start)."""
    scene = box_scene(mu=0.4, iterations=60)
    quat = np.array([np.cos(0.05), np.sin(0.05), 0.0, 0.0])
    q0 = jnp.asarray(np.concatenate([[0.0, 0.0, 0.12], quat]))
    state = init_state(scene, q0, jnp.array([0.3, 0.2, 2.0, 1.5, -0.5, 0.0]))
    state, _ = rollout(scene, state, 0.001, steps=40)
    prob, p = solved_problem(scene, state, 0.001)
    scale = float(jnp.max(jnp.abs(p)))
    assert scale > 1e-4  # in contact
    for name, r in residuals(prob, p).items():
        if r.size:
                assert float(jnp.max(jnp.abs(r))) < 1e-9 * max(scale, 1.0), name


def test_solver_stops_at_the_first_sweep_that_changes_the_impulses_by_less_than_its_tolerance():
    """From a cold start the solve returns exactly the sweeps up to the first whose change is within ``tolerance``
    of the largest impulse, well short of its cap; warm-started at that answer it stops after one sweep; batched
    with it, each world keeps its own answer (the batch runs until the cold world stops, and the warm one does
    not sweep on)."""
    scene = box_scene(mu=0.4)
    quat = np.array([np.cos(0.05), np.sin(0.05), 0.0, 0.0])
    state = init_state(scene, jnp.asarray(np.concatenate([[0.0, 0.0, 0.12], quat])),
                       jnp.array([0.3, 0.2, 2.0, 1.5, -0.5, 0.0]))
    state, _ = rollout(scene, state, 0.001, steps=40)
    prob, _ = solved_problem(scene, state, 0.001)
    tol, cap = 1e-6, 500
    p, k = jnp.zeros_like(prob.b), 0
    while True:
        k, p_next = k + 1, sweep(prob, p)
        done = float(jnp.max(jnp.abs(p_next - p))) <= tol * float(jnp.max(jnp.abs(p_next)))
        p = p_next
        if done:
            break
    assert 1 < k < cap // 10
    solved = jax.jit(solve, static_argnums=(2, 3))
    np.testing.assert_array_equal(solved(prob, jnp.zeros_like(p), cap, tol), p)
    np.testing.assert_array_equal(solved(prob, p, cap, tol), sweep(prob, p))
    both = jax.vmap(solved, in_axes=(None, 0, None, None))(prob, jnp.stack([jnp.zeros_like(p), p]), cap, tol)
    alone = jnp.stack([p, sweep(prob, p)])  # batched, the sweeps' products may round differently
    np.testing.assert_allclose(both, alone, rtol=0, atol=1e-13 * float(jnp.max(jnp.abs(p))))
    assert float(jnp.max(jnp.abs(sweep(prob, sweep(prob, p)) - sweep(prob, p)))) > 1e-11  # a sweep more shows


def test_compliant_contact_converges_to_the_constraint_model_as_stiffness_grows():
    """The resting penetration of a compliant sphere, and its distance from the constraint model's rest height,
    shrink as the stiffness grows, by ``10^(2/3)`` a decade (the Hunt-Crossley force ``k delta^1.5`` at rest)."""
    model, _ = free_body(None)
    q0 = jnp.array([0, 0, 0.2, 1.0, 0, 0, 0])
    rigid = make_scene(model, [plane(name="floor"), sphere("body", 0.1)])
    z_rigid = float(rollout(rigid, init_state(rigid, q0), 0.001, steps=800)[0].q[2])
    gaps = []
    for k in (1e5, 1e6, 1e7):
        soft = make_scene(model, [plane(name="floor"), sphere("body", 0.1)], contact="compliant", stiffness=k,
                          dissipation=20.0)
        final = rollout(soft, init_state(soft, q0), 0.0002, steps=4000)[0]
        gaps.append(abs(float(final.q[2]) - z_rigid))
        assert abs((0.1 - float(final.q[2])) - (MASS * G / k) ** (2 / 3)) < 1e-6
    assert gaps[0] > 4 * gaps[1] > 16 * gaps[2]


@pytest.fixture(scope="module")
def quadruped():
    path = assets.path("quadruped.urdf")
    model = jaxmb.load_urdf(path, floating_base=True)
    feet = urdf_geometry(path, model)
    acts = [position(j, kp=60.0, kv=2.0, force_limit=25.0) for j in model.joint_names[1:]]
    q0 = jnp.asarray(assets.quadruped_standing())
    pose = q0[7:]
    scenes = {c: make_scene(model, [plane(name="floor", friction=0.8)] + feet, actuators=acts, contact=c,
                            integrator=i, pairs_include=[("floor", g.name) for g in feet])
              for c, i in (("constraint", "euler"), ("compliant", "implicit"))}
    return model, scenes, q0, pose


def _row_space_and_dense(scene, q):
    """The solver rows' ``(J, A)`` at ``q`` (`jaxmb.sim.compliance.row_space`), and ``J M^-1 J*`` from the dense
    mass matrix."""
    model = scene.model
    T = forward_kinematics(model, q)
    qd = jnp.zeros(model.nv, q.dtype)
    ab = step_factors(model, q, qd, qd, None)
    J, A = row_space(scene, model, q, T, contacts(scene, T), ab, joint_rows(scene, q, 0.002))
    return A, J @ jnp.linalg.solve(jaxmb.mass_matrix(model, q), J.T)


def test_solver_rows_compliance_is_J_Minv_Jt_of_the_dense_mass_matrix(quadruped):
    """The compliance of the solver's rows from their walks up the tree (contact sides as task frames, joint rows
    as unit generalized forces entering at their joints) equals ``J M^-1 J*``: the quadruped's four feet and
    twelve limit rows, signed toward the nearer limit; a random floating tree of every joint kind with spheres on
    its bodies and a Coulomb friction row on every coordinate, multi-dof joints' included; the same tree with pairs
    of its spheres colliding with each other too, whose contacts have two moving sides."""
    model, scenes, q0, _ = quadruped
    q = q0.at[7:].add(jnp.asarray(np.random.default_rng(0).uniform(-0.3, 0.3, model.nv - 6)))
    tree = random_model(3, n_bodies=7, floating_base=True)
    spheres = [sphere(f"b{i}", 0.1, name=f"s{i}") for i in range(1, 7)]
    random_scene = make_scene(tree, [plane(name="floor")] + spheres, frictionloss=0.5,
                              pairs_include=[("floor", g.name) for g in spheres])
    between = make_scene(tree, [plane(name="floor")] + spheres, frictionloss=0.5,
                         pairs_include=[("floor", g.name) for g in spheres] + [("s1", "s4"), ("s2", "s6")])
    q_tree = jaxmb.random_configuration(tree, jax.random.PRNGKey(1))
    for scene, at in ((scenes["constraint"], q), (random_scene, q_tree), (between, q_tree)):
        A, dense = fast_jit(_row_space_and_dense)(scene, at)
        assert A.shape == (scene.rows, scene.rows)
        assert float(jnp.max(jnp.abs(A - dense))) < 1e-12 * float(jnp.max(jnp.abs(dense)))


@pytest.mark.parametrize("contact", ["constraint", "compliant"])
def test_quadruped_standing_on_four_feet_carries_its_weight(quadruped, contact):
    """Dropped onto its feet under PD control, the quadruped settles; its four normal forces sum to its weight to
    1e-4 relative and each foot carries a share. The compliant model steps implicitly (its stiff contact at the
    same step as the constraint model's)."""
    model, scenes, q0, pose = quadruped
    scene = scenes[contact]
    final, _ = rollout(scene, init_state(scene, q0), 0.002, ctrls=jnp.tile(pose, (2000, 1)))
    normal = np.asarray(final.contact.force[:, 0])
    weight = float(jaxmb.total_mass(model)) * G
    assert abs(normal.sum() / weight - 1) < 1e-4
    assert np.all(normal > 0.1 * weight / 4)


def bouncing_ball(contact, integrator):
    model, _ = free_body(None)
    return make_scene(model, [plane(name="floor", friction=0.6), sphere("body", 0.1)], contact=contact,
                      integrator=integrator, stiffness=1e4, dissipation=1.0, slip_velocity=0.05)


def test_gradients_through_twenty_compliant_steps_match_finite_differences():
    """Reverse and forward mode through 20 explicit steps of a ball rolling and pressing into the floor, against
    central differences, in the initial state and in the friction."""
    from checks import check_grads

    scene = bouncing_ball("compliant", "euler")

    def final_state(q0, qd0, mu):
        sc = scene.replace(geometry=scene.geometry.replace(friction=scene.geometry.friction.at[1].set(mu)))
        return rollout(sc, init_state(sc, q0, qd0), 0.002, steps=20, checkpoint=False)[0].q[:3]

    q0 = jnp.array([0, 0, 0.095, 1.0, 0, 0, 0])
    check_grads(final_state, (q0, jnp.array([0.5, 0.0, 1.0, 1.0, 0.2, -0.3]), jnp.asarray(0.6)), atol=1e-6,
                rtol=1e-5)


def sliding_speed_gradients(scene, lateral):
    """``(jax.grad, central differences)`` of the x velocity of a box after 50 steps of 1 ms, launched at 2 m/s
    along x and ``lateral`` along y, in the friction coefficient (at 0.5) and the launch speed (at 2)."""

    def speed(mu, v0):
        sc = scene.replace(geometry=scene.geometry.replace(friction=jnp.full(2, mu)))
        state = init_state(sc, box_on((0, 0, 1)), jnp.array([0, 0, 0, v0, lateral, 0]))
        return rollout(sc, state, 0.001, steps=50)[0].qd[3]

    f = fast_jit(speed)
    grad = fast_jit(jax.grad(speed, argnums=(0, 1)))(0.5, 2.0)
    h = 1e-5
    return grad, ((f(0.5 + h, 2.0) - f(0.5 - h, 2.0)) / (2 * h), (f(0.5, 2.0 + h) - f(0.5, 2.0 - h)) / (2 * h))


def test_implicit_gradient_of_the_constraint_solve_matches_finite_differences():
    """Away from a switch (the box slides on all four corners throughout), the gradient of the box's velocity
    after 50 steps with respect to the friction coefficient and the launch velocity, by the implicit function
    theorem at each step's solution, matches central differences to 1e-6 relative."""
    grad, fd = sliding_speed_gradients(box_scene(mu=0.5, iterations=60), lateral=0.3)
    for g, d in zip(grad, fd):
        assert abs(float(g) - float(d)) < 1e-6 * max(1.0, abs(float(d))), (grad, fd)
    direction = 2.0 / np.hypot(2.0, 0.3)  # the friction decelerates along the slip, whose direction stays
    assert abs(float(grad[0]) + G * 0.05 * direction) < 1e-4  # d v_x / d mu = -g t cos


@pytest.mark.parametrize("contact", ["constraint", "compliant"])
def test_gradients_through_a_thousand_steps_of_a_walking_quadruped_are_finite(quadruped, contact):
    """Reverse mode through 1000 steps of the quadruped stepping in place (feet lifting off and landing: contacts
    open and close) with a trotting gait: the gradient with respect to the gait amplitude and the servo gain is
    finite and not zero. The compliant model steps implicitly."""
    model, scenes, q0, pose = quadruped
    scene = scenes[contact]
    t = jnp.arange(1000) * 0.002
    legs = jnp.array([1.0 if n.startswith(("FL", "RR")) else -1.0 for n in model.joint_names[1:]])
    knee = jnp.array([1.0 if n.endswith("knee") else 0.0 for n in model.joint_names[1:]])

    def height(amplitude, kp):
        gait = pose + amplitude * jnp.sin(2 * jnp.pi * 2 * t)[:, None] * legs * knee
        act = scene.actuators
        sc = scene.replace(actuators=act.replace(kp=act.kp * kp / 60.0))
        return rollout(sc, init_state(sc, q0), 0.002, ctrls=gait)[0].q[2]

    g = fast_jit(jax.grad(height, argnums=(0, 1)))(0.4, 60.0)
    assert all(np.isfinite(float(x)) and float(x) != 0.0 for x in g), g


def test_friction_block_is_the_disk_minimizer_of_ill_conditioned_quadratics():
    """The sweep's tangential block (`jaxmb.sim.solver._friction`: ``argmin 0.5 p* A p + r* p`` over ``|p| <=
    radius``) against bisection in double precision on the ``g`` of the circle's point ``p = -(A + g)^-1 r``, for
    ``A`` of condition 1 to 1e6 at any angle (equal eigenvalues too), ``r`` nearly along its stiff or its soft
    axis, and radii from a millionth of the unconstrained minimizer's length to above it, half of them near the
    hard case of a trust region step (More and Sorensen, Computing a trust region step, 1983), where ``1/|p(g)|``
    bends sharply: within a few units of round-off times the condition number, in single and double precision;
    zero at ``r = 0`` and at zero radius."""
    from jaxmb.sim.solver import _friction

    rng = np.random.default_rng(0)
    n = 400
    cond = 10 ** rng.uniform(0, 6, n)
    cond[:20] = 1.0
    l1, angle = 10 ** rng.uniform(-2, 2, n), rng.uniform(0, np.pi, n)
    Q = np.stack([np.stack([np.cos(angle), -np.sin(angle)], -1), np.stack([np.sin(angle), np.cos(angle)], -1)], -2)
    A = np.einsum("nij,nj,nkj->nik", Q, np.stack([l1, l1 / cond], -1), Q)
    A = 0.5 * (A + np.swapaxes(A, 1, 2))
    tilt = 10 ** rng.uniform(-8, 0, n) * rng.choice([-1, 1], n)  # off the axis, in radians
    axis = rng.integers(0, 2, n)
    along = np.where(axis[:, None] == 0, Q[:, :, 0], Q[:, :, 1])
    across = np.where(axis[:, None] == 0, Q[:, :, 1], -Q[:, :, 0])
    r = (np.cos(tilt)[:, None] * along + np.sin(tilt)[:, None] * across) * 10 ** rng.uniform(-2, 2, n)[:, None]
    free = np.linalg.norm(np.linalg.solve(A, r[..., None])[..., 0], axis=-1)
    share = np.stack([10 ** rng.uniform(-6, 0, n), 1 - 10 ** rng.uniform(-8, -1, n), rng.uniform(1, 2, n)], -1)
    radius = free * share[np.arange(n), rng.integers(0, 3, n)]
    # the second half near the hard case of a trust region step: r off the stiff axis by so little that the soft
    # axis still carries most of the unconstrained minimizer, the radius near its stiff part alone
    h = np.arange(n // 2, n)
    cond[h] = 10 ** rng.uniform(2, 6, n // 2)
    A[h] = np.einsum("nij,nj,nkj->nik", Q[h], np.stack([l1[h], l1[h] / cond[h]], -1), Q[h])
    A[h] = 0.5 * (A[h] + np.swapaxes(A[h], 1, 2))
    tilt = 10 ** rng.uniform(0, 2, n // 2) / cond[h]
    length = np.linalg.norm(r[h], axis=-1)[:, None]
    r[h] = (np.cos(tilt)[:, None] * Q[h, :, 0] + np.sin(tilt)[:, None] * Q[h, :, 1]) * length
    radius[h] = np.linalg.norm(r[h], axis=-1) / l1[h] * 10 ** rng.uniform(-0.3, 0.3, n // 2)
    r[20:24], radius[24:28] = 0.0, 0.0

    solve = fast_jit(jax.vmap(_friction))
    for dtype in (np.float32, np.float64):
        A_d, r_d, rho_d = (x.astype(dtype).astype(np.float64) for x in (A, r, radius))
        A_d = 0.5 * (A_d + np.swapaxes(A_d, 1, 2))
        eye = np.eye(2)

        def p_of(g):
            return -np.linalg.solve(A_d + g[:, None, None] * eye, r_d[..., None])[..., 0]

        lo, hi = np.zeros(n), np.linalg.norm(r_d, axis=-1) / np.maximum(rho_d, 1e-300)  # |p(hi)| <= radius
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            outside = np.linalg.norm(p_of(mid), axis=-1) > rho_d
            lo, hi = np.where(outside, mid, lo), np.where(outside, hi, mid)
        sliding = np.linalg.norm(p_of(np.zeros(n)), axis=-1) > rho_d
        p_circle = p_of(hi)
        p_circle *= (rho_d / np.maximum(np.linalg.norm(p_circle, axis=-1), 1e-300))[:, None]
        ref = np.where(sliding[:, None], p_circle, p_of(np.zeros(n)))
        ref[rho_d == 0] = 0.0
        p = np.asarray(solve(*(jnp.asarray(x, dtype) for x in (A_d, r_d, rho_d))), np.float64)
        assert np.all(np.isfinite(p))
        assert np.all(p[20:28] == 0.0)
        error = np.linalg.norm(p - ref, axis=-1) / np.maximum(np.linalg.norm(ref, axis=-1), 1e-300)
        bound = 20 * np.finfo(dtype).eps * cond
        assert np.all(error[28:] <= bound[28:]), (dtype, np.max(error[28:] / bound[28:]))
