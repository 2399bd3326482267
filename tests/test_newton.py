"""The Newton solver (`jaxmb.sim.newton`): its impulses against the box-constrained dual solved by sweeps, its
articulated-body Hessian against the dense one, closed-form mechanics of the relaxed pyramid, and its implicit
derivatives against finite differences.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb import assets, joints
from jaxmb.errors import ModelError
from jaxmb.loops import mechanisms
from jaxmb.sim import box, init_state, make_scene, plane, position, rollout, sphere, urdf_geometry
from jaxmb.sim import newton, solver
from jaxmb.sim.integrators import euler
from jaxmb.testing import random_model

from checks import check_grads, fast_jit
from test_contact import G, HALF, MASS, box_on, box_scene, quadruped, sliding_speed_gradients  # noqa: F401


def stacked_boxes():
    """Two free boxes, one on the other, on the floor: the contacts between them have two moving sides."""
    b = jaxmb.ModelBuilder("stack")
    for name in ("lower", "upper"):
        b.add_body(name, None, joints.free(), mass=MASS, inertia=np.diag([0.03, 0.04, 0.05]))
    model = b.build()
    scene = make_scene(model, [plane(name="floor", friction=0.5), box("lower", HALF, friction=0.5),
                               box("upper", HALF, friction=0.5)], solver="newton")
    quat = [1.0, 0, 0, 0]
    q0 = jnp.asarray([0, 0, HALF[2], *quat, 0.02, 0.01, 3 * HALF[2], *quat])
    return scene, q0


def constraints_at(scene, state, dt):
    return euler(scene, state.q, state.qd, jnp.zeros(scene.nu), dt, state.impulse).constraints


def problem_at(scene, state, dt):
    cf = constraints_at(scene, state, dt)
    return cf.problem, cf.impulse


def dual(prob):
    """The box-constrained dual of ``prob``, ``min 0.5 p* (J M^-1 J* + R) p + (J v_free - v_star)* p`` over ``lo <= p
    <= hi``, as scalar rows of `jaxmb.sim.solver`'s sweeps."""
    Minv = jax.vmap(prob.metric.inverse)(jnp.eye(prob.J.shape[1], dtype=prob.J.dtype))
    A = prob.J @ Minv @ prob.J.T
    return solver.Problem(A + jnp.diag(1.0 / prob.D), prob.J @ prob.v_free - prob.v_star, jnp.zeros(0, A.dtype),
                          prob.lo, prob.hi)


def tilted_box_state(scene):
    quat = np.array([np.cos(0.05), np.sin(0.05), 0.0, 0.0])
    q0 = jnp.asarray(np.concatenate([[0.0, 0.0, 0.12], quat]))
    state = init_state(scene, q0, jnp.array([0.3, 0.2, 2.0, 1.5, -0.5, 0.0]))
    return rollout(scene, state, 0.001, steps=40)[0]


def as_newton(scene, regularization=1e-2):
    """``scene`` with the Newton solver and its default regularization."""
    return scene.replace(options=dataclasses.replace(scene.options, solver="newton"),
                         contact=scene.contact.replace(regularization=jnp.asarray(regularization)))


def test_impulses_are_the_box_constrained_dual_solution(quadruped):
    """On a box sliding and tipping (four pyramids, the articulated-body Hessian), on the quadruped landing on its
    feet with its twelve limit rows, and on two stacked boxes (contacts between moving bodies: the dense Hessian),
    the Newton impulses equal the dual's solved by 20000 sweeps to 1e-10 relative, and the velocity that the solver
    returns and the step takes is that of its impulses, ``v_free + M^-1 J* p``, to 1e-10 relative."""
    box_newton = box_scene(mu=0.4, solver="newton")
    model, scenes, q0, pose = quadruped
    walk = as_newton(scenes["constraint"])
    stack, q_stack = stacked_boxes()
    cases = [(box_newton, tilted_box_state(box_newton)),
             (walk, rollout(walk, init_state(walk, q0), 0.002, ctrls=jnp.tile(pose, (60, 1)))[0]),
             (stack, rollout(stack, init_state(stack, q_stack), 0.001, steps=30)[0])]
    for scene, state in cases:
        cf = fast_jit(constraints_at)(scene, state, 0.002)
        prob, p = cf.problem, cf.impulse
        assert isinstance(prob.metric, newton.DenseMetric) == (scene is stack)
        reference = solver.solve(dual(prob), jnp.zeros_like(p), 20000, 0.0)
        scale = float(jnp.max(jnp.abs(reference)))
        assert scale > 1e-3  # in contact
        assert float(jnp.max(jnp.abs(p - reference))) < 1e-10 * scale
        v = prob.v_free + prob.metric.inverse(prob.J.T @ p)
        assert float(jnp.max(jnp.abs(cf.velocity - v))) < 1e-10 * float(jnp.max(jnp.abs(v)))


def test_line_search_lands_on_the_root_of_the_piecewise_linear_slope():
    """On random rows (unilateral and two-sided, stiffnesses over two decades, most of them crossing a bound along the
    step), the line search's step length is the root of the slope ``phi'`` found by evaluating it at every
    breakpoint in numpy, to 1e-12 relative."""
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(60):
        n = 40
        D = rng.uniform(0.5, 50.0, n)
        lo = np.where(rng.random(n) < 0.3, -rng.uniform(0.0, 1.0, n), 0.0)
        hi = np.where(lo < 0, -lo, np.inf)
        w, dw = rng.normal(size=n) * 0.1, rng.normal(size=n) * 0.1
        curvature = rng.uniform(0.01, 1.0)
        p0 = np.clip(-D * w, lo, hi)
        slope0 = dw @ p0 - abs(rng.normal())  # phi'(0) = slope0 - dw* p(w) < 0: a descent direction

        def slope(alpha):
            return slope0 + alpha * curvature - dw @ np.clip(-D * (w + alpha * dw), lo, hi)

        with np.errstate(divide="ignore", invalid="ignore"):
            crossings = np.concatenate([(-lo / D - w) / dw, (-hi / D - w) / dw])
        points = np.sort(np.concatenate([[0.0], crossings[np.isfinite(crossings) & (crossings > 0)]]))
        at = np.array([slope(a) for a in points])
        k = np.flatnonzero(at <= 0)[-1]
        right = points[k + 1] if k + 1 < len(points) else points[k] + 1.0
        rate = (slope(right) - at[k]) / (right - points[k])
        expected = points[k] - at[k] / rate
        prob = newton.Problem(None, None, None, jnp.asarray(D), jnp.asarray(lo), jnp.asarray(hi), None)
        alpha = float(newton.line_search(prob, jnp.asarray(w), jnp.asarray(dw), slope0, curvature))
        assert abs(alpha - expected) < 1e-12 * expected, (alpha, expected)
        checked += k > 0  # the root past a breakpoint
    assert checked > 30


def test_articulated_body_hessian_solve_is_the_dense_one():
    """``(M + J* diag(h) J)^-1 x`` by the articulated-body sweep with the active rows as added body inertias and
    armature equals the dense solve with the mass matrix, on a random floating tree of every joint kind with
    spheres on the floor and a Coulomb friction row on every coordinate, for random weights ``h`` (zeros among
    them)."""
    tree = random_model(3, n_bodies=7, floating_base=True)
    spheres = [sphere(f"b{i}", 0.1, name=f"s{i}") for i in range(1, 7)]
    scene = make_scene(tree, [plane(name="floor")] + spheres, frictionloss=0.5, solver="newton",
                       pairs_include=[("floor", g.name) for g in spheres])
    q = jaxmb.random_configuration(tree, jax.random.PRNGKey(1))
    state = init_state(scene, q)
    prob, _ = fast_jit(problem_at)(scene, state, 0.002)
    assert isinstance(prob.metric, newton.TreeMetric)
    rng = np.random.default_rng(0)
    n = prob.J.shape[0]
    h = jnp.asarray(rng.uniform(0, 50, n) * (rng.uniform(size=n) > 0.3))
    x = jnp.asarray(rng.normal(size=tree.nv))
    M = jaxmb.mass_matrix(tree, q)
    dense = jnp.linalg.solve(M + prob.J.T @ (h[:, None] * prob.J), x)
    for y in (prob.metric.hessian_inverse(h, prob.J)(x), prob.metric.hessian_solve(h, prob.J, x)):
        assert float(jnp.max(jnp.abs(y - dense))) < 1e-12 * float(jnp.max(jnp.abs(dense)))


def test_resting_box_and_stack_carry_their_weights():
    """A box on its four corners carries its weight to 1e-9 relative and, once settled into the softness's
    penetration, moves by less than 1e-7 m in 5 s; of two stacked boxes, the floor carries both weights and the
    lower box's top the upper's."""
    scene = box_scene(solver="newton")
    final, states = rollout(scene, init_state(scene, box_on((0, 0, 1))), 0.002, steps=2600)
    assert abs(float(jnp.sum(final.contact.force[:, 0])) / (MASS * G) - 1) < 1e-9
    assert float(jnp.max(jnp.abs(states.q[100:, :3] - states.q[100, :3]))) < 1e-7
    stack, q0 = stacked_boxes()
    final, _ = rollout(stack, init_state(stack, q0), 0.001, steps=1000)
    normal = np.asarray(final.contact.force[:, 0])
    on_floor = [i for i, (a, b) in enumerate(zip(stack.pairs.contact_a, stack.pairs.contact_b)) if 0 in (a, b)]
    between = [i for i in range(stack.nc) if i not in on_floor]
    assert abs(normal[on_floor].sum() / (2 * MASS * G) - 1) < 1e-9
    assert abs(normal[between].sum() / (MASS * G) - 1) < 1e-9


def test_one_newton_step_from_the_last_impulses_solves_a_step_whose_rows_keep_their_zones():
    """A box resting on its four corners and two stacked boxes (the dense Hessian), their free velocity raised by
    three times the rows' soft velocity ``max p / D`` (a small change of the step, after which the velocity of the
    last impulses puts the floor rows out of contact, while the impulses keep their zones): warm-started at the
    last impulses, the first Newton step, taken in their zones, lands on the solution of thirty steps to 1e-12
    relative."""
    box_newton = box_scene(solver="newton")
    stack, q_stack = stacked_boxes()
    for scene, q0 in ((box_newton, box_on((0, 0, 1))), (stack, q_stack)):
        state, _ = rollout(scene, init_state(scene, q0), 0.002, steps=300)
        prob, p = fast_jit(problem_at)(scene, state, 0.002)
        up = 3 * float(jnp.max(p / prob.D))
        raised = prob._replace(v_free=prob.v_free.at[5::6].add(up))
        w = raised.J @ (raised.v_free + raised.metric.inverse(raised.J.T @ p)) - raised.v_star
        assert float(jnp.max(w[: 4 * scene.nc][p[: 4 * scene.nc] > 0])) > 0  # floor rows out, at that velocity
        one = newton.solve(raised, p, 1, 0.0)
        converged = newton.solve(raised, p, 30, 0.0)
        assert float(jnp.min(converged[: 4 * scene.nc][p[: 4 * scene.nc] > 0])) > 0  # the impulses keep their zones
        assert float(jnp.max(jnp.abs(one - converged))) < 1e-12 * float(jnp.max(jnp.abs(converged)))


def test_sliding_box_decelerates_at_mu_g_on_the_pyramid_edges():
    """Launched at 2 m/s along a pyramid's edge plane (the contact frame's first tangent), a box decelerates at ``mu
    g`` within 1e-3 with every corner's friction at ``-mu`` times its normal force, rising less than 0.5 mm on its
    contacts while it slides (the relaxation: a pyramid edge asks the normal velocity for a share of ``mu`` times
    the slip), and stops."""
    scene = box_scene(mu=0.5, solver="newton")
    state = init_state(scene, box_on((0, 0, 1)), jnp.array([0, 0, 0, 2.0, 0, 0]))
    assert np.allclose(state.contact.frame[:, 1], [1.0, 0, 0])
    final, states = rollout(scene, state, 0.001, steps=500)
    v = np.asarray(states.qd[:, 3])
    assert abs((v[50] - v[250]) / 0.2 / (0.5 * G) - 1) < 1e-3
    f = np.asarray(states.contact.force[100])
    assert np.allclose(f[:, 1], -0.5 * f[:, 0], rtol=1e-9, atol=0) and np.all(f[:, 0] > 0)
    assert float(jnp.max(states.q[:, 2])) - HALF[2] < 5e-4
    assert abs(float(final.qd[3])) < 1e-5


def test_box_on_incline_creeps_by_its_softness_below_the_friction_angle_and_slides_above():
    """On a plane tilted by ``theta`` about the first tangent's normal, with ``mu = 0.5`` (``atan(0.5) = 0.4636``
    rad): at 0.4 rad a box creeps down at a steady speed proportional to the regularization (the rows' softness
    ``R``: tenfold less at a tenth of it, to 1e-3), at 0.6 rad it slides down at ``g (sin - mu cos)`` within 1 %."""
    normal = (np.sin(0.4), 0.0, np.cos(0.4))
    creep = []
    for regularization in (1e-2, 1e-3):
        scene = box_scene(mu=0.5, normal=normal, solver="newton", regularization=regularization)
        _, states = rollout(scene, init_state(scene, box_on(normal)), 0.001, steps=500)
        speed = np.linalg.norm(np.asarray(states.qd[:, 3:]), axis=1)
        assert np.ptp(speed[100:]) < 1e-3 * speed[-1]
        creep.append(speed[-1])
    assert abs(creep[0] / creep[1] / 10 - 1) < 1e-3
    normal = (np.sin(0.6), 0.0, np.cos(0.6))
    scene = box_scene(mu=0.5, normal=normal, solver="newton")
    _, states = rollout(scene, init_state(scene, box_on(normal)), 0.001, steps=500)
    speed = np.linalg.norm(np.asarray(states.qd[:, 3:]), axis=1)
    expected = G * (np.sin(0.6) - 0.5 * np.cos(0.6))
    assert abs((speed[400] - speed[100]) / 0.3 / expected - 1) < 1e-2


def test_implicit_derivatives_match_finite_differences():
    """The solve's derivative by the implicit function theorem, in forward and reverse mode, against central
    differences in the free velocity, the rows' Jacobian and targets, on the tipping box (rows inside, at and above
    their bounds); and the gradient of the box's velocity after 50 sliding steps in the friction and the launch
    velocity, to 1e-6 relative."""
    scene = box_scene(mu=0.4, solver="newton")
    prob, p0 = fast_jit(problem_at)(scene, tilted_box_state(scene), 0.001)

    assert np.allclose(prob.J, prob.metric.d, rtol=0, atol=1e-15)  # the box's rows are its body rows: d moves with J

    def impulses(v_free, J, v_star):
        metric = dataclasses.replace(prob.metric, d=J)
        return newton.solve(prob._replace(v_free=v_free, J=J, v_star=v_star, metric=metric), p0, 30, 1e-12)

    check_grads(impulses, (prob.v_free, prob.J, prob.v_star), eps=1e-7, atol=1e-6, rtol=1e-5)

    grad, fd = sliding_speed_gradients(scene, lateral=0.0)
    for g, d in zip(grad, fd):
        assert abs(float(g) - float(d)) < 1e-6 * max(1.0, abs(float(d))), (grad, fd)


def test_quadruped_stands_in_single_precision_and_its_walk_has_finite_gradients(quadruped):
    """The quadruped dropped on its feet under PD control carries its weight (float64, 1e-4 relative) and stands in
    float32 without a diverged world; the gradient of its height after 500 steps of a trotting gait in the gait
    amplitude is finite and not zero."""
    model, scenes, q0, pose = quadruped
    scene = as_newton(scenes["constraint"])
    final, _ = rollout(scene, init_state(scene, q0), 0.002, ctrls=jnp.tile(pose, (1500, 1)))
    weight = float(jaxmb.total_mass(model)) * G
    assert abs(float(jnp.sum(final.contact.force[:, 0])) / weight - 1) < 1e-4
    model32 = model.cast(jnp.float32)
    feet = urdf_geometry(assets.path("quadruped.urdf"), model32)
    acts = [position(j, kp=60.0, kv=2.0, force_limit=25.0) for j in model.joint_names[1:]]
    single = make_scene(model32, [plane(name="floor", friction=0.8)] + feet, actuators=acts, integrator="euler",
                        solver="newton", pairs_include=[("floor", g.name) for g in feet])
    final32, _ = rollout(single, init_state(single, q0.astype(jnp.float32)), 0.002,
                         ctrls=jnp.tile(pose, (1500, 1)).astype(jnp.float32))
    assert int(final32.diverged) == 0 and abs(float(final32.q[2]) - float(final.q[2])) < 1e-3
    t = jnp.arange(500) * 0.002
    legs = jnp.array([1.0 if n.startswith(("FL", "RR")) else -1.0 for n in model.joint_names[1:]])
    knee = jnp.array([1.0 if n.endswith("knee") else 0.0 for n in model.joint_names[1:]])

    def height(amplitude):
        gait = pose + amplitude * jnp.sin(2 * jnp.pi * 2 * t)[:, None] * legs * knee
        return rollout(scene, init_state(scene, q0), 0.002, ctrls=gait)[0].q[2]

    g = fast_jit(jax.grad(height))(0.4)
    assert np.isfinite(float(g)) and float(g) != 0.0


def test_scene_errors_name_the_newton_solver_option():
    """An unknown solver, a cap on the limit rows, a zero regularization and a closed-loop model with
    ``solver="newton"`` are errors when the scene is built."""
    tree = random_model(0, n_bodies=3)
    with pytest.raises(ModelError, match="unknown solver 'cg'"):
        make_scene(tree, solver="cg")
    with pytest.raises(ModelError, match="limit_rows caps"):
        make_scene(tree, solver="newton", limit_rows=1)
    with pytest.raises(ModelError, match="positive regularization"):
        make_scene(tree, solver="newton", regularization=0.0)
    with pytest.raises(ModelError, match="steps trees"):
        make_scene(mechanisms.four_bar_leg(), solver="newton")
