"""First-order shooting baselines: a problem's controls (single shooting) or its nodes and controls (multiple
shooting) descended by an optax optimizer on the gradient of the cost, one `lax.scan` of ``steps`` updates.

They are the methods a user reaches for before DDP, and the yardstick that DDP's second-order steps are measured
against (`benchmarks/trajopt.py`): the same `jaxmb.trajopt.Problem`, its cost `total_cost`, its dynamics `step`.

* **Single shooting**: the variables are the controls ``us`` (N, nu); the states are their `rollout` from ``x0``,
  always feasible; the gradient flows back through the whole horizon, which makes long or unstable horizons stiff.
* **Multiple shooting** (Bock and Plitt, "A multiple shooting algorithm for direct solution of optimal control
  problems", 1984): the variables are the controls and a tangent displacement ``dx`` (N + 1, ndx) of every node from
  its start, ``xs = integrate_state(xs_start, dx)`` (the nodes stay on the joints' manifolds); the gaps between
  nodes (`gaps`) are equality constraints, met by an augmented Lagrangian: rounds of descent on the cost plus
  multipliers times the gaps plus a quadratic penalty, each round's end moving the multipliers by the penalty
  times the gaps, so that the gaps close without the penalty growing.

Both clip the controls to the problem's bounds after each update (projected gradient). Batched multi-start is the
caller's ``jax.vmap`` over initial guesses, then the lowest cost:

>>> sols = jax.vmap(lambda us: trajopt.single_shooting(problem, us, steps=500))(starts)   # (starts, N, nu)
>>> best = jax.tree.map(lambda x: x[jnp.argmin(sols.cost)], sols)
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxmb.trajopt.problem import gaps, rollout, total_cost
from jaxmb.trajopt.solver import initial_guess
from jaxmb.trajopt.state import integrate_state


class ShootingSolution(NamedTuple):
    """xs (N + 1, nx), us (N, nu): the trajectory after the last update; cost (): its `total_cost`; costs
    (steps,): the objective before each update (with the gap penalty, for multiple shooting); gaps (): the largest
    gap entry of ``(xs, us)`` (zero for single shooting, whose states are a rollout)."""

    xs: jnp.ndarray
    us: jnp.ndarray
    cost: jnp.ndarray
    costs: jnp.ndarray
    gaps: jnp.ndarray


def _descend(objective, variables, optimizer, steps, project):
    """``steps`` updates of ``optimizer`` on ``objective``; the variables after each are ``project``ed. Each update
    is handed the value and the objective too, which optimizers with a line search (``optax.lbfgs``) take."""
    optimizer = optax.with_extra_args_support(optimizer)
    state = optimizer.init(variables)

    def update(carry, _):
        variables, state = carry
        value, grad = jax.value_and_grad(objective)(variables)
        updates, state = optimizer.update(grad, state, variables, value=value, grad=grad, value_fn=objective)
        return (project(optax.apply_updates(variables, updates)), state), value

    (variables, _), values = jax.lax.scan(update, (variables, state), None, length=steps)
    return variables, values


def _clip(problem, us):
    return jnp.clip(us, problem.u_lower, problem.u_upper)


def single_shooting(problem, us=None, *, optimizer=None, steps=500) -> ShootingSolution:
    """Descend the cost of the rollout of ``us`` (N, nu) (zeros where None) from ``x0`` with ``optimizer`` (an
    ``optax.GradientTransformation``; ``optax.adam(1e-2)`` where None) for ``steps`` updates."""
    _, us = initial_guess(problem, None, us)
    optimizer = optax.adam(1e-2) if optimizer is None else optimizer
    us, values = _descend(lambda us: total_cost(problem, rollout(problem, us), us), _clip(problem, us), optimizer,
                          steps, lambda us: _clip(problem, us))
    xs = rollout(problem, us)
    return ShootingSolution(xs, us, total_cost(problem, xs, us), values, jnp.zeros((), us.dtype))


def multiple_shooting(problem, xs=None, us=None, *, optimizer=None, steps=500, rounds=10,
                      penalty=1e2) -> ShootingSolution:
    """Minimize ``total_cost(xs, us)`` subject to ``gaps(xs, us) = 0`` by the augmented Lagrangian (Hestenes,
    "Multiplier and gradient methods", 1969): ``rounds`` rounds, each of ``steps`` updates of ``optimizer``
    (``optax.adam(1e-2)`` where None, started afresh) on ``cost + lambda . f + penalty / 2 |f|^2`` over the controls
    and the nodes' tangent displacements from ``xs`` (N + 1, nx), ``us`` (N, nu) (`initial_guess` where None:
    ``x0`` at every node, zero controls), then ``lambda += penalty f``. ``costs`` (rounds * steps,)."""
    xs, us = initial_guess(problem, xs, us)
    optimizer = optax.adam(1e-2) if optimizer is None else optimizer
    model = problem.model

    def nodes(dx):
        return jax.vmap(lambda x, d: integrate_state(model, x, d))(xs, dx)

    def lagrangian(v, multipliers):
        dx, us = v
        x = nodes(dx)
        f = gaps(problem, x, us)
        return total_cost(problem, x, us) + jnp.sum(multipliers * f) + 0.5 * penalty * jnp.sum(f * f)

    def round_(carry, _):
        v, multipliers = carry
        v, values = _descend(lambda v: lagrangian(v, multipliers), v, optimizer, steps,
                             lambda v: (v[0], _clip(problem, v[1])))
        return (v, multipliers + penalty * gaps(problem, nodes(v[0]), v[1])), values

    start = (jnp.zeros((problem.horizon + 1, problem.ndx), xs.dtype), _clip(problem, us))
    ((dx, us), _), values = jax.lax.scan(round_, (start, jnp.zeros_like(start[0])), None, length=rounds)
    xs = nodes(dx)
    return ShootingSolution(xs, us, total_cost(problem, xs, us), values.reshape(-1),
                            jnp.max(jnp.abs(gaps(problem, xs, us))))
