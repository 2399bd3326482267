"""The Newton solver (`jaxmb.sim.newton`), with elliptic cones and with pyramids: its impulses against the conic
dual solved by accelerated projected gradient, its line search against numpy's roots, its articulated-body Hessian
against the dense one, closed-form mechanics of the relaxed cones, and its implicit derivatives against finite
differences.
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


CONES = ("elliptic", "pyramidal")


def stacked_boxes(cone="elliptic"):
    """Two free boxes, one on the other, on the floor: the contacts between them have two moving sides."""
    b = jaxmb.ModelBuilder("stack")
    for name in ("lower", "upper"):
        b.add_body(name, None, joints.free(), mass=MASS, inertia=np.diag([0.03, 0.04, 0.05]))
    model = b.build()
    scene = make_scene(model, [plane(name="floor", friction=0.5), box("lower", HALF, friction=0.5),
                               box("upper", HALF, friction=0.5)], solver="newton", cone=cone)
    quat = [1.0, 0, 0, 0]
    q0 = jnp.asarray([0, 0, HALF[2], *quat, 0.02, 0.01, 3 * HALF[2], *quat])
    return scene, q0


def constraints_at(scene, state, dt):
    return euler(scene, state.q, state.qd, jnp.zeros(scene.nu), dt, state.impulse).constraints


def problem_at(scene, state, dt):
    cf = constraints_at(scene, state, dt)
    return cf.problem, cf.solution


def dual(prob):
    """``(A, b)`` of the dual of ``prob``, ``min 0.5 p* A p + b* p`` with ``A = J M^-1 J* + R``, ``b = J v_free -
    v_star``, over the cones ``|p_t| <= mu p_n`` and the bounds ``lo <= p <= hi``, in numpy."""
    Minv = jax.vmap(prob.metric.inverse)(jnp.eye(prob.J.shape[1], dtype=prob.J.dtype))
    A = prob.J @ Minv @ prob.J.T + jnp.diag(1.0 / prob.D)
    return np.asarray(A), np.asarray(prob.J @ prob.v_free - prob.v_star)


def project(p, mu, lo, hi):
    """``p`` projected on the cones ``|p_t| <= mu p_n`` (its first ``3 len(mu)`` entries) and the bounds."""
    c = 3 * len(mu)
    x = p[:c].reshape(-1, 3)
    r = np.linalg.norm(x[:, 1:], axis=1)
    p_n = (x[:, 0] + mu * r) / (1 + mu ** 2)
    surface = np.concatenate([p_n[:, None], (mu * p_n)[:, None] * x[:, 1:] / np.maximum(r, 1e-300)[:, None]], 1)
    cones = np.where((r <= mu * x[:, 0])[:, None], x, np.where((x[:, 0] <= -mu * r)[:, None], 0.0, surface))
    return np.concatenate([cones.reshape(-1), np.clip(p[c:], lo, hi)])


def dual_solution(prob, iterations=200000):
    """The solution of `dual` by accelerated projected gradient (Nesterov's, with O'Donoghue and Candes's adaptive
    restart), until a step changes no impulse by more than 1e-15 of the largest."""
    A, b = dual(prob)
    mu, lo, hi = (np.asarray(x) for x in (prob.mu, prob.lo, prob.hi))
    step = 1.0 / np.linalg.eigvalsh(A)[-1]
    p = y = np.zeros_like(b)
    t = 1.0
    for _ in range(iterations):
        p_next = project(y - step * (A @ y + b), mu, lo, hi)
        t_next = (1 + np.sqrt(1 + 4 * t * t)) / 2
        restart = (y - p_next) @ (p_next - p) > 0
        y = p_next if restart else p_next + (t - 1) / t_next * (p_next - p)
        t_next = 1.0 if restart else t_next
        if np.max(np.abs(p_next - p)) <= 1e-15 * np.max(np.abs(p_next)):
            return p_next
        p, t = p_next, t_next
    raise AssertionError("the projected gradient did not converge")


def tilted_box_state(scene):
    quat = np.array([np.cos(0.05), np.sin(0.05), 0.0, 0.0])
    q0 = jnp.asarray(np.concatenate([[0.0, 0.0, 0.12], quat]))
    state = init_state(scene, q0, jnp.array([0.3, 0.2, 2.0, 1.5, -0.5, 0.0]))
    return rollout(scene, state, 0.001, steps=40)[0]


def as_newton(scene, regularization=1e-2, cone="elliptic"):
    """``scene`` with the Newton solver, its default regularization and ``cone``."""
    return scene.replace(options=dataclasses.replace(scene.options, solver="newton", cone=cone),
                         contact=scene.contact.replace(regularization=jnp.asarray(regularization)))


@pytest.mark.parametrize("cone", CONES)
def test_impulses_are_the_conic_dual_solution(quadruped, cone):
    """On a box sliding and tipping (four contacts, the articulated-body Hessian) and in the step where it lands
    sliding (warm-started by the step that left its contacts apart), on the quadruped landing on its feet with its
    twelve limit rows, and on two stacked boxes (contacts between moving bodies: the dense Hessian), the Newton
    impulses equal the dual's solved by accelerated projected gradient to 1e-10 relative, and the velocity that the
    solver returns and the step takes is that of its impulses, ``v_free + M^-1 J* p``, to 1e-10 relative."""
    box_newton = box_scene(mu=0.4, solver="newton", cone=cone)
    model, scenes, q0, pose = quadruped
    walk = as_newton(scenes["constraint"], cone=cone)
    stack, q_stack = stacked_boxes(cone)
    falling = init_state(box_newton, box_on((0, 0, 1), HALF[2] + 0.004), jnp.array([0, 0, 0, 1.0, 0, -0.5]))
    _, approach = rollout(box_newton, falling, 0.002, steps=10)
    landing = int(np.argmax(np.asarray(approach.contact.force[:, 0, 0]) > 0))
    assert landing > 0  # the step before it left the contact apart
    cases = [(box_newton, tilted_box_state(box_newton)),
             (box_newton, jax.tree.map(lambda x: x[landing - 1], approach)),
             (walk, rollout(walk, init_state(walk, q0), 0.002, ctrls=jnp.tile(pose, (60, 1)))[0]),
             (stack, rollout(stack, init_state(stack, q_stack), 0.001, steps=30)[0])]
    for scene, state in cases:
        cf = fast_jit(constraints_at)(scene, state, 0.002)
        prob, p = cf.problem, cf.solution
        assert isinstance(prob.metric, newton.DenseMetric) == (scene is stack)
        reference = dual_solution(prob)
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
        prob = newton.Problem(None, None, None, jnp.asarray(D), jnp.zeros(0), jnp.asarray(lo), jnp.asarray(hi), None)
        alpha = float(newton.line_search(prob, jnp.asarray(w), jnp.asarray(dw), slope0, curvature))
        assert abs(alpha - expected) < 1e-12 * expected, (alpha, expected)
        checked += k > 0  # the root past a breakpoint
    assert checked > 30


def test_line_search_finds_the_root_of_the_slope_through_sliding_cones():
    """On random cones (friction 0.2 to 1.5) and scalar rows, most of the cones sliding somewhere along the step,
    the line search's step length is the root of the slope ``phi'`` found by bisection in numpy, to 1e-10
    relative."""
    rng = np.random.default_rng(1)
    sliding = 0
    for _ in range(40):
        nc, k = 8, 10
        mu = rng.uniform(0.2, 1.5, nc)
        D = np.concatenate([np.repeat(rng.uniform(0.5, 50.0, nc), 3), rng.uniform(0.5, 50.0, k)])
        lo = np.where(rng.random(k) < 0.3, -rng.uniform(0.0, 1.0, k), 0.0)
        hi = np.where(lo < 0, -lo, np.inf)
        w, dw = rng.normal(size=3 * nc + k) * 0.1, rng.normal(size=3 * nc + k) * 0.1
        curvature = rng.uniform(0.01, 1.0)
        slope0 = dw @ project(-D * w, mu, lo, hi) - abs(rng.normal())

        def slope(alpha):
            return slope0 + alpha * curvature - dw @ project(-D * (w + alpha * dw), mu, lo, hi)

        a, b = 0.0, 1.0
        while slope(b) <= 0:
            a, b = b, 2 * b
        for _ in range(200):
            middle = (a + b) / 2
            a, b = (middle, b) if slope(middle) <= 0 else (a, middle)
        prob = newton.Problem(None, None, None, jnp.asarray(D), jnp.asarray(mu), jnp.asarray(lo), jnp.asarray(hi),
                              None)
        alpha = float(newton.line_search(prob, jnp.asarray(w), jnp.asarray(dw), slope0, curvature))
        assert abs(alpha - a) < 1e-10 * a, (alpha, a)
        sliding += bool(np.any(newton.zones(prob, jnp.asarray(-D * (w + a * dw))).sliding))
    assert sliding > 30


@pytest.mark.parametrize("cone", CONES)
def test_articulated_body_hessian_solve_is_the_dense_one(cone):
    """``(M + J* H J)^-1 x`` by the articulated-body sweep with the rows' Hessian as added body inertias and
    armature equals the dense solve with the mass matrix, on a random floating tree of every joint kind with
    spheres on the floor and a Coulomb friction row on every coordinate, for a random Hessian ``H`` (a random
    positive semi-definite block on each cone, random weights on the scalar rows, zeros among both)."""
    tree = random_model(3, n_bodies=7, floating_base=True)
    spheres = [sphere(f"b{i}", 0.1, name=f"s{i}") for i in range(1, 7)]
    scene = make_scene(tree, [plane(name="floor")] + spheres, frictionloss=0.5, solver="newton", cone=cone,
                       pairs_include=[("floor", g.name) for g in spheres])
    q = jaxmb.random_configuration(tree, jax.random.PRNGKey(1))
    state = init_state(scene, q)
    prob, _ = fast_jit(problem_at)(scene, state, 0.002)
    assert isinstance(prob.metric, newton.TreeMetric)
    rng = np.random.default_rng(0)
    nc = prob.mu.shape[0]
    k = prob.J.shape[0] - 3 * nc
    B = rng.normal(size=(nc, 3, 3)) * (rng.uniform(size=(nc, 1, 1)) > 0.3)
    H = newton.RowHessian(jnp.asarray(B @ np.swapaxes(B, 1, 2)),
                          jnp.asarray(rng.uniform(0, 50, k) * (rng.uniform(size=k) > 0.3)))
    block = np.zeros((prob.J.shape[0],) * 2)
    for c in range(nc):
        block[3 * c:3 * c + 3, 3 * c:3 * c + 3] = H.C[c]
    block[3 * nc:, 3 * nc:] = np.diag(H.h)
    assert np.allclose(H.times(prob.J), block @ prob.J, rtol=0, atol=1e-12)
    x = jnp.asarray(rng.normal(size=tree.nv))
    M = jaxmb.mass_matrix(tree, q)
    dense = jnp.linalg.solve(M + prob.J.T @ block @ prob.J, x)
    for y in (prob.metric.hessian_inverse(H, prob.J)(x), prob.metric.hessian_solve(H, prob.J, x)):
        assert float(jnp.max(jnp.abs(y - dense))) < 1e-12 * float(jnp.max(jnp.abs(dense)))


@pytest.mark.parametrize("cone", CONES)
def test_resting_box_and_stack_carry_their_weights(cone):
    """A box on its four corners carries its weight to 1e-9 relative and, once settled into the softness's
    penetration, moves by less than 1e-7 m in 5 s; of two stacked boxes, the floor carries both weights and the
    lower box's top the upper's."""
    scene = box_scene(solver="newton", cone=cone)
    final, states = rollout(scene, init_state(scene, box_on((0, 0, 1))), 0.002, steps=2600)
    assert abs(float(jnp.sum(final.contact.force[:, 0])) / (MASS * G) - 1) < 1e-9
    assert float(jnp.max(jnp.abs(states.q[100:, :3] - states.q[100, :3]))) < 1e-7
    stack, q0 = stacked_boxes(cone)
    final, _ = rollout(stack, init_state(stack, q0), 0.001, steps=1000)
    normal = np.asarray(final.contact.force[:, 0])
    on_floor = [i for i, (a, b) in enumerate(zip(stack.pairs.contact_a, stack.pairs.contact_b)) if 0 in (a, b)]
    between = [i for i in range(stack.nc) if i not in on_floor]
    assert abs(normal[on_floor].sum() / (2 * MASS * G) - 1) < 1e-9
    assert abs(normal[between].sum() / (MASS * G) - 1) < 1e-9


@pytest.mark.parametrize("cone", CONES)
def test_one_newton_step_from_the_last_impulses_solves_a_step_whose_rows_keep_their_zones(cone):
    """A box resting on its four corners and two stacked boxes (the dense Hessian), their free velocity raised by
    three times the rows' soft velocity ``max p / D`` (a small change of the step, after which the velocity of the
    last impulses puts the floor rows out of contact, while the impulses keep their zones): warm-started at the
    last impulses, the first Newton step, taken in their zones, lands on the solution of thirty steps to 1e-12
    relative."""
    box_newton = box_scene(solver="newton", cone=cone)
    stack, q_stack = stacked_boxes(cone)
    for scene, q0 in ((box_newton, box_on((0, 0, 1))), (stack, q_stack)):
        state, _ = rollout(scene, init_state(scene, q0), 0.002, steps=300)
        prob, p = fast_jit(problem_at)(scene, state, 0.002)
        up = 3 * float(jnp.max(p / prob.D))
        raised = prob._replace(v_free=prob.v_free.at[5::6].add(up))
        w = raised.J @ (raised.v_free + raised.metric.inverse(raised.J.T @ p)) - raised.v_star
        rows = np.arange(0, 3 * scene.nc, 3) if cone == "elliptic" else np.arange(4 * scene.nc)  # normals, edges
        assert float(jnp.max(w[rows][p[rows] > 0])) > 0  # floor rows out, at that velocity
        one = newton.solve(raised, p, 1, 0.0)
        converged = newton.solve(raised, p, 30, 0.0)
        assert float(jnp.min(converged[rows][p[rows] > 0])) > 0  # the impulses keep their zones
        assert float(jnp.max(jnp.abs(one - converged))) < 1e-12 * float(jnp.max(jnp.abs(converged)))


def test_sliding_box_decelerates_at_mu_g_on_the_pyramid_edges():
    """Launched at 2 m/s along a pyramid's edge plane (the contact frame's first tangent), a box decelerates at ``mu
    g`` within 1e-3 with every corner's friction at ``-mu`` times its normal force, rising less than 0.5 mm on its
    contacts while it slides (the relaxation: a pyramid edge asks the normal velocity for a share of ``mu`` times
    the slip), and stops."""
    scene = box_scene(mu=0.5, solver="newton", cone="pyramidal")
    state = init_state(scene, box_on((0, 0, 1)), jnp.array([0, 0, 0, 2.0, 0, 0]))
    assert np.allclose(state.contact.frame[:, 1], [1.0, 0, 0])
    final, states = rollout(scene, state, 0.001, steps=500)
    v = np.asarray(states.qd[:, 3])
    assert abs((v[50] - v[250]) / 0.2 / (0.5 * G) - 1) < 1e-3
    f = np.asarray(states.contact.force[100])
    assert np.allclose(f[:, 1], -0.5 * f[:, 0], rtol=1e-9, atol=0) and np.all(f[:, 0] > 0)
    assert float(jnp.max(states.q[:, 2])) - HALF[2] < 5e-4
    assert abs(float(final.qd[3])) < 1e-5


@pytest.mark.parametrize("direction", [(1.0, 0.0), (0.6, 0.8)])
def test_sliding_box_decelerates_at_mu_g_in_any_direction_on_the_elliptic_cone(direction):
    """Launched at 2 m/s along the contact frame's first tangent or across both tangents, a box decelerates at
    ``mu g`` within 1e-3 with every corner's friction ``mu`` times its normal force (1e-9) against the slip (the
    box yaws a little: within 5e-5 rad of the launch direction), rising less than 0.5 mm on its contacts, and
    stops (a pyramid's friction is ``mu`` only along its edges' planes)."""
    scene = box_scene(mu=0.5, solver="newton")
    u = np.array([*direction, 0.0])
    state = init_state(scene, box_on((0, 0, 1)), jnp.asarray(np.concatenate([np.zeros(3), 2.0 * u])))
    final, states = rollout(scene, state, 0.001, steps=500)
    speed = np.asarray(states.qd[:, 3:5]) @ u[:2]
    assert abs((speed[50] - speed[250]) / 0.2 / (0.5 * G) - 1) < 1e-3
    f = np.asarray(states.contact.force[100])
    tangential = np.einsum("ctk,k->ct", np.asarray(states.contact.frame[100, :, 1:]), u)  # the slip's axes
    magnitude = np.linalg.norm(f[:, 1:], axis=1)
    assert np.allclose(magnitude, 0.5 * f[:, 0], rtol=1e-9, atol=0)
    assert np.all(np.sum(f[:, 1:] * tangential, 1) < -(1 - 1e-9) * magnitude)
    assert np.all(f[:, 0] > 0) and float(jnp.max(states.q[:, 2])) - HALF[2] < 5e-4
    assert float(jnp.max(jnp.abs(final.qd[3:]))) < 1e-5


@pytest.mark.parametrize("cone", CONES)
def test_box_on_incline_creeps_by_its_softness_below_the_friction_angle_and_slides_above(cone):
    """On a plane tilted by ``theta`` about the first tangent's normal, with ``mu = 0.5`` (``atan(0.5) = 0.4636``
    rad): at 0.4 rad a box creeps down at a steady speed proportional to the regularization (the rows' softness
    ``R``: tenfold less at a tenth of it, to 1e-3), at 0.6 rad it slides down at ``g (sin - mu cos)`` within 1 %."""
    normal = (np.sin(0.4), 0.0, np.cos(0.4))
    creep = []
    for regularization in (1e-2, 1e-3):
        scene = box_scene(mu=0.5, normal=normal, solver="newton", regularization=regularization, cone=cone)
        _, states = rollout(scene, init_state(scene, box_on(normal)), 0.001, steps=500)
        speed = np.linalg.norm(np.asarray(states.qd[:, 3:]), axis=1)
        assert np.ptp(speed[100:]) < 1e-3 * speed[-1]
        creep.append(speed[-1])
    assert abs(creep[0] / creep[1] / 10 - 1) < 1e-3
    normal = (np.sin(0.6), 0.0, np.cos(0.6))
    scene = box_scene(mu=0.5, normal=normal, solver="newton", cone=cone)
    _, states = rollout(scene, init_state(scene, box_on(normal)), 0.001, steps=500)
    speed = np.linalg.norm(np.asarray(states.qd[:, 3:]), axis=1)
    expected = G * (np.sin(0.6) - 0.5 * np.cos(0.6))
    assert abs((speed[400] - speed[100]) / 0.3 / expected - 1) < 1e-2


@pytest.mark.parametrize("cone", CONES)
def test_implicit_derivatives_match_finite_differences(cone):
    """The solve's derivative by the implicit function theorem, in forward and reverse mode, against central
    differences in the free velocity, the rows' Jacobian and targets, on the tipping box (rows inside, at and above
    their bounds); and the gradient of the box's velocity after 50 sliding steps in the friction and the launch
    velocity, to 1e-6 relative."""
    scene = box_scene(mu=0.4, solver="newton", cone=cone)
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
    """An unknown solver, a cap on the limit rows, a zero regularization, an unknown cone, a pyramid without the
    Newton solver are errors when the scene is built."""
    tree = random_model(0, n_bodies=3)
    with pytest.raises(ModelError, match="unknown solver 'cg'"):
        make_scene(tree, solver="cg")
    with pytest.raises(ModelError, match="limit_rows caps"):
        make_scene(tree, solver="newton", limit_rows=1)
    with pytest.raises(ModelError, match="positive regularization"):
        make_scene(tree, solver="newton", regularization=0.0)
    with pytest.raises(ModelError, match="unknown cone 'round'"):
        make_scene(tree, solver="newton", cone="round")
    with pytest.raises(ModelError, match="cone='pyramidal' is a choice of solver='newton'"):
        make_scene(tree, cone="pyramidal")
