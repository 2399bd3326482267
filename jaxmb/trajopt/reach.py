"""The Panda reach of the tests, the benchmark and notebook 09: the seven-joint Panda
(`jaxmb.envs.panda_reach.panda_model`) from its ready pose at rest brings its tool centre point to a target.

Costs, as ``benchmarks/crocoddyl_peer.py`` builds them for Crocoddyl: running ``dt (GOAL |p - target|^2 / 2 +
STATE |x (-) x0|_a^2 / 2 + CONTROL |u|^2 / 2)``, terminal ``GOAL_TERMINAL |p - target|^2 / 2 + STATE_TERMINAL
|x (-) x0|_a^2 / 2``, with ``a = STATE_ACTIVATION`` (positions 1, velocities 10); ``HORIZON`` knots of ``DT``.
The initial guess: ``x0`` at every node and the gravity torques at ``x0`` (infeasible).
"""

import jax.numpy as jnp

from jaxmb.dynamics.inverse import gravity_forces
from jaxmb.envs.panda_reach import Q_HOME, TOOL, panda_model
from jaxmb.trajopt.costs import (
    control_regularization,
    frame_translation,
    state_regularization,
)
from jaxmb.trajopt.problem import shooting_problem

HORIZON, DT = 100, 0.01
GOAL, GOAL_TERMINAL, STATE, STATE_TERMINAL, CONTROL = 1e-1, 1e3, 1e-2, 1e-2, 1e-4
STATE_ACTIVATION = (1.0,) * 7 + (10.0,) * 7
TARGET = (0.5, 0.2, 0.5)
"""The default target (m, world axes)."""


def peer_spec(targets, method="fddp", u_lower=None, u_upper=None):
    """The problem as ``benchmarks/crocoddyl_peer.py`` reads it (a dict to dump as JSON)."""
    return {"robot": "panda", "frame": TOOL, "horizon": HORIZON, "dt": DT, "q0": list(Q_HOME),
            "targets": [list(map(float, t)) for t in targets], "method": method,
            "u_lower": None if u_lower is None else list(map(float, u_lower)),
            "u_upper": None if u_upper is None else list(map(float, u_upper)),
            "weights": {"goal": GOAL, "goal_terminal": GOAL_TERMINAL, "state": STATE,
                        "state_terminal": STATE_TERMINAL, "control": CONTROL},
            "state_activation": list(STATE_ACTIVATION)}


def panda_reach(target=TARGET, u_lower=None, u_upper=None, model=None, horizon=HORIZON):
    """``(problem, xs, us)``: the reach toward ``target`` (3,) and its initial guess; ``u_lower``/``u_upper``
    (7,) torque bounds (N m) for box-FDDP; ``model`` the Panda's `jaxmb.Model` (loaded where None); ``horizon``
    the knots."""
    model = panda_model()[0] if model is None else model
    q0 = jnp.asarray(Q_HOME)
    x0 = jnp.concatenate([q0, jnp.zeros(7)])
    running = [frame_translation(model, TOOL, target, GOAL), state_regularization(model, x0, STATE, STATE_ACTIVATION),
               control_regularization(7, weight=CONTROL)]
    terminal = [frame_translation(model, TOOL, target, GOAL_TERMINAL),
                state_regularization(model, x0, STATE_TERMINAL, STATE_ACTIVATION)]
    problem = shooting_problem(model, x0, DT, horizon, running, terminal, u_lower, u_upper)
    us = jnp.broadcast_to(gravity_forces(model, q0), (horizon, 7))
    return problem, jnp.broadcast_to(x0, (horizon + 1, 14)), us
