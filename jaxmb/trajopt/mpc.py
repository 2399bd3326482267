"""Model-predictive control on `jaxmb.sim`: at every control step the shooting problem is re-solved from the
simulator's state, warm-started from the previous solution shifted by one knot, and its first control is applied
(held for the control step) as generalized forces ``qfrc`` (`jaxmb.sim.step`), with the solution's feedback
``u = u_0 - K_0 (x (-) x_0)`` at each simulator step of it, so that ``substeps`` simulator steps run per solve.

The whole closed loop is one ``lax.scan`` over control steps, so it compiles once, and ``jax.vmap`` runs a batch
of them. The problem changes between solves through ``update(problem, k)`` (a Python function, static: a moving
target, say), which must keep its shapes.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.sim.stepping import step as sim_step
from jaxmb.trajopt.solver import Options, solve
from jaxmb.trajopt.state import difference


class MpcTrace(NamedTuple):
    """One row per control step: x (steps, nx) the state the solve started from, u (steps, nu) the first control,
    cost (steps,) and iterations (steps,) of each solve, gaps (steps,) of its solution."""

    x: jnp.ndarray
    u: jnp.ndarray
    cost: jnp.ndarray
    iterations: jnp.ndarray
    gaps: jnp.ndarray


def shift(xs, us):
    """The warm start one knot later: every node moved forward, the last repeated."""
    return jnp.concatenate([xs[1:], xs[-1:]]), jnp.concatenate([us[1:], us[-1:]])


def receding_horizon(scene, problem, state, steps, update=None, xs=None, us=None, substeps=1, sim_dt=None,
                     method="fddp", options=None):
    """``(final sim state, MpcTrace)``: ``steps`` control steps of MPC (module docstring) from the `jaxmb.sim` state
    ``state``; each solve starts from ``(q, qd)`` of the simulator, runs at most ``options.max_iterations``
    iterations (ten where ``options`` is None) and is warm-started from the previous one (``xs``, ``us`` the first
    warm start: ``x`` at every node and zero controls where None). The control step is ``substeps * sim_dt`` (``sim_dt`` defaults to the
    problem's ``dt / substeps``). ``scene``'s model must be the problem's (its controls are not used)."""
    options = Options(max_iterations=10) if options is None else options
    model = problem.model
    actuated = np.asarray(problem.actuated, int)
    sim_dt = problem.dt / substeps if sim_dt is None else sim_dt
    N = problem.horizon
    x_start = jnp.concatenate([state.q, state.qd])
    xs = jnp.broadcast_to(x_start, (N + 1, x_start.shape[0])) if xs is None else xs
    us = jnp.zeros((N, problem.nu), x_start.dtype) if us is None else us

    def control_step(carry, k):
        sim_state, xs, us = carry
        x = jnp.concatenate([sim_state.q, sim_state.qd])
        p = problem if update is None else update(problem, k)
        p = p.replace(x0=x)
        sol = solve(p, xs.at[0].set(x), us, method=method, options=options)

        def sim_substep(s, _):
            dx = difference(model, sol.xs[0], jnp.concatenate([s.q, s.qd]))
            u = sol.us[0] - sol.K[0] @ dx
            qfrc = jnp.zeros(model.nv, x.dtype).at[actuated].set(u)
            return sim_step(scene, s, None, sim_dt, qfrc=qfrc), None

        sim_state, _ = jax.lax.scan(sim_substep, sim_state, None, length=substeps)
        xs_next, us_next = shift(sol.xs, sol.us)
        return (sim_state, xs_next, us_next), MpcTrace(x, sol.us[0], sol.cost, sol.iterations, sol.gaps)

    (state, _, _), trace = jax.lax.scan(control_step, (state, xs, us), jnp.arange(steps))
    return state, trace
