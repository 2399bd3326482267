"""jaxmb.trajopt batched and differentiated: FDDP under ``jax.vmap`` over reach targets equals the unbatched solve,
and the implicit-function-theorem derivatives of the optimal trajectory and of the optimal cost with respect to
the target equal central differences of re-solves, on a two-link arm reaching with its tip."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from checks import assert_close, fast_jit

from jaxmb import joints, trajopt
from jaxmb.model import ModelBuilder

EPS = 1e-4
TIGHT = trajopt.Options(th_stop=1e-30, max_iterations=60)  # to rounding: the differences divide the solve's error


def arm():
    b = ModelBuilder("arm", gravity=(0.0, 0.0, -9.81))
    b.add_body("upper", None, joints.revolute((0.0, 1.0, 0.0)), joint_name="shoulder", mass=1.0,
               com=(0.0, 0.0, -0.2), inertia=np.diag([0.02, 0.02, 1e-3]))
    b.add_body("fore", "upper", joints.revolute((0.0, 1.0, 0.0)), joint_name="elbow", mass=0.6, com=(0.0, 0.0, -0.15),
               inertia=np.diag([0.01, 0.01, 1e-3]), placement=(np.eye(3), (0.0, 0.0, -0.4)))
    b.add_body("tip", "fore", joints.fixed(), joint_name="wrist", placement=(np.eye(3), (0.0, 0.0, -0.3)))
    return b.build()


MODEL = arm()
X0 = jnp.array([0.3, 0.5, 0.0, 0.0])


def problem_at(target):
    running = [trajopt.frame_translation(MODEL, "tip", target, 1.0),
               trajopt.state_regularization(MODEL, X0, 1e-2, [1.0, 1.0, 0.1, 0.1]),
               trajopt.control_regularization(2, weight=1e-3)]
    terminal = [trajopt.frame_translation(MODEL, "tip", target, 1e2),
                trajopt.state_regularization(MODEL, X0, 1e-1, [0.0, 0.0, 1.0, 1.0])]
    return trajopt.shooting_problem(MODEL, X0, 0.02, 40, running, terminal)


def observed(target):
    """A scalar of the optimal trajectory (end configuration and a mid-horizon control), the optimal cost, and
    the trajectory's largest gap."""
    problem = problem_at(target)
    xs, us = trajopt.optimum(problem, options=TIGHT)
    value = jnp.sum(xs[-1] * jnp.array([1.0, -2.0, 0.5, 0.3])) + 0.1 * jnp.sum(us[20])
    return value, trajopt.total_cost(problem, xs, us), jnp.max(jnp.abs(trajopt.gaps(problem, xs, us))), xs


TARGET = jnp.array([0.35, 0.0, -0.45])


@pytest.fixture(scope="module")
def batch():
    targets = jnp.concatenate([TARGET[None], TARGET + EPS * jnp.eye(3), TARGET - EPS * jnp.eye(3)])
    return fast_jit(jax.vmap(observed))(targets)


@pytest.fixture(scope="module")
def gradients():
    def both(t):
        return observed(t)[:2]

    return fast_jit(lambda t: (both(t), jax.jacrev(both)(t)))(TARGET)


def test_vmap_over_targets_equals_the_unbatched_solve(batch, gradients):
    value, cost, gap, xs = batch
    (value_1, cost_1), _ = gradients
    assert float(jnp.max(gap)) < 1e-13
    assert_close(value[0], value_1, 1e-12)
    assert_close(cost[0], cost_1, 1e-12)
    assert float(jnp.max(jnp.abs(xs[1] - xs[0]))) > 1e-6  # the targets move the optimum


def test_implicit_derivatives_equal_central_differences_of_re_solves(batch, gradients):
    value, cost, _, _ = batch
    _, (d_value, d_cost) = gradients
    assert_close(d_value, (value[1:4] - value[4:7]) / (2 * EPS), 1e-7)
    assert_close(d_cost, (cost[1:4] - cost[4:7]) / (2 * EPS), 1e-7)
    assert float(jnp.max(jnp.abs(d_value))) > 0.1
