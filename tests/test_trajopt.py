"""jaxmb.trajopt: the discretized dynamics' Jacobians against central differences, the costs' Gauss-Newton
gradients against central differences, a linear-quadratic problem solved in one iteration against numpy's
Riccati recursion, FDDP closing the gaps of an infeasible warm start, box-FDDP swinging a pendulum up within its
torque limit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from checks import assert_close, fast_jit

import jaxmb
from jaxmb import joints, trajopt
from jaxmb.model import ModelBuilder
from jaxmb.spatial import Transform

EPS = 1e-6


def perturbed(model, x, u, eps=EPS):
    """``(xs, us)``: ``(x, u)``, then ``x (+) e_j eps``, ``x (+) -e_j eps`` and ``u +- e_j eps`` (one batch of
    1 + 2 ndx + 2 nu points, so that a function of them is traced once)."""
    ndx, nu = 2 * model.nv, u.shape[0]
    E, Eu = eps * jnp.eye(ndx), eps * jnp.eye(nu)
    moved = jax.vmap(lambda e: trajopt.integrate_state(model, x, e))(jnp.concatenate([E, -E]))
    xs = jnp.concatenate([x[None], moved, jnp.broadcast_to(x, (2 * nu, x.shape[0]))])
    us = jnp.concatenate([jnp.broadcast_to(u, (1 + 2 * ndx, nu)), u + Eu, u - Eu])
    return xs, us


def central_columns(f, model, x, u, eps=EPS):
    """``f(x, u)`` of a state-valued ``f`` and the columns ``(f(x (+) e_j eps, u) (-) f(x (+) -e_j eps, u)) / 2 eps``
    at it, then those of ``u``: (nx,), (ndx, ndx), (ndx, nu)."""
    ndx, nu = 2 * model.nv, u.shape[0]
    ys = jax.vmap(f)(*perturbed(model, x, u, eps))
    d = jax.vmap(lambda b: trajopt.difference(model, ys[0], b))(ys[1:])
    plus_x, minus_x, plus_u, minus_u = d[:ndx], d[ndx:2 * ndx], d[2 * ndx:2 * ndx + nu], d[2 * ndx + nu:]
    return ys[0], ((plus_x - minus_x).T / (2 * eps), (plus_u - minus_u).T / (2 * eps))


@pytest.fixture(scope="module")
def floating():
    """A floating base with a spherical and a revolute limb: free, spherical and screw joints, random state."""
    b = ModelBuilder("floating", gravity=(0.0, 0.0, -9.81))
    b.add_body("base", None, joints.free(), joint_name="root", mass=3.0, com=(0.05, -0.02, 0.01),
               inertia=np.diag([0.1, 0.2, 0.15]))
    b.add_body("ball", "base", joints.spherical(), joint_name="hip", mass=0.5, com=(0.0, 0.1, -0.1),
               inertia=np.diag([0.01, 0.02, 0.015]), placement=(np.eye(3), (0.2, 0.1, 0.0)))
    b.add_body("shin", "ball", joints.revolute((0.0, 1.0, 0.0)), joint_name="knee", mass=0.3, com=(0.0, 0.0, -0.1),
               inertia=np.diag([0.01, 0.01, 2e-3]), placement=(np.eye(3), (0.0, 0.1, -0.2)))
    model = b.build()
    q = jaxmb.random_configuration(model, jax.random.PRNGKey(0))
    v = jax.random.normal(jax.random.PRNGKey(1), (model.nv,))
    return model, jnp.concatenate([q, v])


def test_step_jacobians_match_central_differences_on_free_and_spherical_joints(floating):
    model, x = floating
    problem = trajopt.shooting_problem(model, x, 0.01, 1, [], [])
    u = jax.random.normal(jax.random.PRNGKey(2), (model.nv,))
    d, (x_next, (Fx, Fu)) = fast_jit(lambda p, x, u: (
        trajopt.step_derivatives(p, x, u), central_columns(lambda y, w: trajopt.step(p, y, w), p.model, x, u)))(
        problem, x, u)
    assert_close(d.x_next, x_next, 1e-14)
    assert_close(d.Fx, Fx, 1e-7)
    assert_close(d.Fu, Fu, 1e-7)


def test_cost_gradients_match_central_differences(floating):
    model, x = floating
    nu = model.nv
    frame = model.frame_names[-1]
    target = Transform(jnp.asarray(jaxmb.rotation.axis_angle_to_matrix(jnp.array([0.0, 0.6, 0.8]), 0.4)),
                       jnp.array([0.1, -0.2, 0.3]))
    costs = (trajopt.frame_translation(model, frame, [0.3, 0.1, -0.2], 2.0, [1.0, 2.0, 3.0]),
             trajopt.frame_placement(model, frame, target, 0.5),
             trajopt.frame_velocity_cost(model, frame, jnp.arange(6.0) / 10, 0.3),
             trajopt.center_of_mass_cost(model, [0.0, 0.1, 0.2], 4.0),
             trajopt.state_regularization(model, trajopt.integrate_state(model, x, 0.3 * jnp.ones(2 * model.nv)),
                                          0.7, jnp.linspace(0.5, 2.0, 2 * model.nv)),
             trajopt.control_regularization(nu, jnp.ones(nu), 0.1))
    def check(costs, x, u):
        ndx = 2 * model.nv
        values = jax.vmap(lambda x, u: trajopt.cost_value(costs, model, x, u))(*perturbed(model, x, u))
        gx = (values[1:1 + ndx] - values[1 + ndx:1 + 2 * ndx]) / (2 * EPS)
        gu = (values[1 + 2 * ndx:1 + 2 * ndx + nu] - values[1 + 2 * ndx + nu:]) / (2 * EPS)
        return trajopt.cost_derivatives(costs, model, x, u), values[0], gx, gu

    (l, lx, lu, *_), value, gx, gu = fast_jit(check)(costs, x, jnp.linspace(-1.0, 1.0, nu))
    assert_close(l, value, 1e-14)
    assert_close(lx, gx, 1e-7)
    assert_close(lu, gu, 1e-7)


def stage_model():
    """Two orthogonal prismatic joints without gravity: ``a = M^-1 u`` with a constant diagonal ``M``, so the
    semi-implicit Euler step is linear."""
    b = ModelBuilder("stage", gravity=(0.0, 0.0, 0.0))
    b.add_body("x", None, joints.prismatic((1.0, 0.0, 0.0)), joint_name="x", mass=2.0, inertia=np.eye(3) * 1e-2)
    b.add_body("y", "x", joints.prismatic((0.0, 1.0, 0.0)), joint_name="y", mass=0.5, inertia=np.eye(3) * 1e-2)
    return b.build()


def riccati_lqr(A, B, Q, R, QN, x_ref, x0, N):
    """numpy's backward Riccati recursion and rollout of ``min sum (x - x_ref)' Q (x - x_ref) / 2 + u' R u / 2 +
    (x_N - x_ref)' QN (x_N - x_ref) / 2`` subject to ``x' = A x + B u``."""
    P, p = QN, -QN @ x_ref
    gains = []
    for _ in range(N):
        H = R + B.T @ P @ B
        K = np.linalg.solve(H, B.T @ P @ A)
        k = np.linalg.solve(H, B.T @ p)
        gains.append((K, k))
        p = -Q @ x_ref + A.T @ p - K.T @ (B.T @ p)
        P = Q + A.T @ P @ A - A.T @ P @ B @ K
    xs, us = [x0], []
    for K, k in reversed(gains):
        us.append(-K @ xs[-1] - k)
        xs.append(A @ xs[-1] + B @ us[-1])
    return np.array(xs), np.array(us)


def test_lqr_is_solved_in_one_iteration_as_riccati():
    model = stage_model()
    N, dt = 30, 0.05
    x0 = jnp.array([0.3, -0.2, 0.0, 0.1])
    x_ref = np.array([1.0, 0.5, 0.0, 0.0])
    wx, wu, wN = np.array([1.0, 2.0, 0.1, 0.2]), np.array([0.01, 0.03]), np.array([100.0, 50.0, 1.0, 1.0])
    problem = trajopt.shooting_problem(model, x0, dt, N,
                                       [trajopt.state_regularization(model, x_ref, 1.0, wx),
                                        trajopt.control_regularization(2, weight=1.0, activation=wu)],
                                       [trajopt.state_regularization(model, x_ref, 1.0, wN)])
    Minv = np.diag([1 / 2.5, 1 / 0.5])  # the x carriage carries the y body
    A = np.block([[np.eye(2), dt * np.eye(2)], [np.zeros((2, 2)), np.eye(2)]])
    B = np.vstack([dt * dt * Minv, dt * Minv])
    xs_ref, us_ref = riccati_lqr(A, B, dt * np.diag(wx), dt * np.diag(wu), np.diag(wN), x_ref, np.asarray(x0), N)
    exact = trajopt.Options(reg_init=0.0, reg_min=0.0)  # Crocoddyl's default 1e-9 would perturb the Riccati pass
    solve = fast_jit(lambda p, o: trajopt.solve(p, options=o))
    one = solve(problem, exact._replace(max_iterations=1))
    assert_close(one.xs, xs_ref, 1e-12)
    assert_close(one.us, us_ref, 1e-12)
    assert float(one.gaps) < 1e-14
    full = solve(problem, exact)
    assert bool(full.converged) and int(full.iterations) == 2  # the second iteration finds nothing to improve
    assert_close(full.us, us_ref, 1e-12)


def pendulum(max_torque):
    b = ModelBuilder("pendulum", gravity=(0.0, 0.0, -9.81))
    b.add_body("pole", None, joints.revolute((0.0, 1.0, 0.0)), joint_name="hinge", mass=1.0, com=(0.0, 0.0, -0.5),
               inertia=np.diag([1e-3, 1e-3, 1e-3]))
    model = b.build()
    up = jnp.array([np.pi, 0.0])
    running = [trajopt.state_regularization(model, up, 1e-2, [1.0, 0.1]), trajopt.control_regularization(1, weight=1e-3)]
    terminal = [trajopt.state_regularization(model, up, 1e3)]
    return trajopt.shooting_problem(model, jnp.zeros(2), 0.04, 100, running, terminal, -max_torque, max_torque)


@pytest.fixture(scope="module")
def swing_up():
    problem = pendulum(2.0)  # mgl = 4.9 N m: it has to pump
    solve = fast_jit(lambda p, xs, us: (trajopt.solve(p, xs, us, method="box_fddp"), trajopt.solve(p, xs, us)))
    xs = jnp.linspace(problem.x0, jnp.array([np.pi, 0.0]), problem.horizon + 1)  # infeasible: a straight line
    return problem, xs, solve(problem, xs, jnp.zeros((problem.horizon, 1)))


def test_fddp_closes_the_gaps_of_an_infeasible_warm_start(swing_up):
    problem, xs, (box, free) = swing_up
    assert float(jnp.max(jnp.abs(trajopt.gaps(problem, xs, jnp.zeros((problem.horizon, 1)))))) > 1e-2
    for sol in (box, free):
        assert bool(sol.converged) and bool(sol.feasible)
        assert float(sol.gaps) < 1e-13
        # each node is the step of the one before (a rollout from x0 would amplify rounding near the top)
        assert float(jnp.max(jnp.abs(trajopt.gaps(problem, sol.xs, sol.us)))) < 1e-13


def test_box_fddp_swings_the_pendulum_up_within_its_torque_limit(swing_up):
    _, _, (box, free) = swing_up
    assert float(jnp.max(jnp.abs(free.us))) > 2.5  # unconstrained, the optimum exceeds the limit
    assert float(jnp.max(jnp.abs(box.us))) <= 2.0
    assert float(jnp.max(jnp.abs(box.us))) > 2.0 - 1e-9  # the bound is active
    assert abs(float(box.xs[-1, 0]) - np.pi) < 1e-4 and abs(float(box.xs[-1, 1])) < 1e-4
