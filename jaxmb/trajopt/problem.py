"""A shooting problem: N knots of one state ``x = (q, v)`` moved by the forward dynamics, with running and
terminal costs and control bounds, after Crocoddyl's ``ShootingProblem`` of ``IntegratedActionModelEuler`` models.

Dynamics (semi-implicit Euler, as Crocoddyl's ``IntegratedActionModelEuler``)::

    a = FD(q, v, S u),   v' = v + a dt,   q' = q (+) v' dt

with ``S`` the (nv, nu) selection of the actuated velocity coordinates (all of them by default; a floating base's
six left out by ``actuated``). The Jacobians in the tangent directions (`jaxmb.trajopt.state`) come from the
analytic ``d a/d q``, ``d a/d v``, ``d a/d tau = M^-1`` of `jaxmb.forward_dynamics_derivatives`; only the
integration ``q (+) w`` of the configuration is differentiated by forward mode (its two Jacobians ``J_q``, ``J_w``,
the identity for screw joints)::

    d q'  = J_q dq + J_w dt dv',    dv' = dv + dt (a_q dq + a_v dv + M^-1 S du)

Costs: the running cost of a knot is ``dt`` times its costs' sum (`jaxmb.trajopt.costs`), the terminal cost is its
costs' sum, as Crocoddyl scales a running model's cost by its time step.
"""

from dataclasses import dataclass, field, replace
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.configuration import integrate
from jaxmb.dynamics.articulated import forward_dynamics
from jaxmb.dynamics.derivatives import forward_dynamics_derivatives
from jaxmb.errors import ModelError
from jaxmb.model import Model, pytree_dataclass
from jaxmb.trajopt.costs import cost_derivatives, cost_value
from jaxmb.trajopt.state import configuration_difference, difference, split


@pytree_dataclass
@dataclass(frozen=True)
class Problem:
    """A shooting problem of ``horizon`` running knots and one terminal knot.

    Leaves: model (`jaxmb.Model`), x0 (nx,) the initial state, dt () the time step, running / terminal (tuples of
    costs, `jaxmb.trajopt.costs`), u_lower / u_upper (nu,) control bounds (+-inf where none; only the box solver
    enforces them). Static: horizon N, actuated (nu,) the velocity coordinates the controls drive.
    """

    model: Model
    x0: jnp.ndarray
    dt: jnp.ndarray
    running: tuple
    terminal: tuple
    u_lower: jnp.ndarray
    u_upper: jnp.ndarray
    horizon: int = field(metadata=dict(static=True))
    actuated: tuple = field(metadata=dict(static=True))

    @property
    def nx(self):
        return self.model.nq + self.model.nv

    @property
    def ndx(self):
        return 2 * self.model.nv

    @property
    def nu(self):
        return len(self.actuated)

    def replace(self, **changes):
        """The problem with the fields ``changes`` replaced (new numbers of the same shapes do not recompile)."""
        return replace(self, **changes)


def shooting_problem(model, x0, dt, horizon, running, terminal, u_lower=None, u_upper=None, actuated=None):
    """A `Problem`; ``actuated`` the names of the actuated joints (all movable joints by default), ``u_lower`` /
    ``u_upper`` (nu,) or None (unbounded). Raises `jaxmb.ModelError` for a control cost at the terminal knot or
    shapes that do not fit."""
    if actuated is None:
        dofs = tuple(range(model.nv))
    else:
        dofs = []
        for name in actuated:
            if name not in model.joint_names:
                raise ModelError(f"shooting_problem: actuated joint {name!r} is not a joint of the model; its "
                                 f"joints are {', '.join(model.joint_names)}")
            dofs += np.atleast_1d(model.v_index(name)).tolist()
        dofs = tuple(int(d) for d in dofs)
    nu = len(dofs)
    for c in terminal:
        if c.uses_control:
            raise ModelError(f"shooting_problem: the terminal knot has no control; remove its "
                             f"{type(c).__name__} cost")
    x0 = jnp.asarray(x0, float)
    if x0.shape != (model.nq + model.nv,):
        raise ModelError(f"shooting_problem: x0 has shape {x0.shape}; give the state (q, v), "
                         f"({model.nq + model.nv},)")
    lower = jnp.full(nu, -jnp.inf) if u_lower is None else jnp.broadcast_to(jnp.asarray(u_lower, float), (nu,))
    upper = jnp.full(nu, jnp.inf) if u_upper is None else jnp.broadcast_to(jnp.asarray(u_upper, float), (nu,))
    return Problem(model, x0, jnp.asarray(dt, float), tuple(running), tuple(terminal), lower, upper, int(horizon),
                   dofs)


def _torques(problem, u):
    return jnp.zeros(problem.model.nv, u.dtype).at[np.asarray(problem.actuated, int)].set(u)


def step(problem, x, u):
    """The next state (nx,) from ``x`` (nx,) under the control ``u`` (nu,) (module docstring)."""
    model = problem.model
    q, v = split(model, x)
    a = forward_dynamics(model, q, v, _torques(problem, u))
    v_next = v + a * problem.dt
    return jnp.concatenate([integrate(model, q, v_next, problem.dt), v_next])


def integration_jacobians(model, q, w):
    """``J_q, J_w`` (nv, nv): the tangent Jacobians of ``q (+) w`` (`jaxmb.integrate` for unit time) in ``q``
    and ``w``, at ``q (+) w`` (Pinocchio's ``dIntegrate``)."""
    q_next = integrate(model, q, w, 1.0)

    def moved(dq, dw):
        return configuration_difference(model, q_next, integrate(model, integrate(model, q, dq, 1.0), w + dw, 1.0))

    zero = jnp.zeros(model.nv, w.dtype)
    return jax.jacfwd(moved, argnums=(0, 1))(zero, zero)


class StepDerivatives(NamedTuple):
    """`step` and its tangent Jacobians: x_next (nx,), Fx (ndx, ndx), Fu (ndx, nu)."""

    x_next: jnp.ndarray
    Fx: jnp.ndarray
    Fu: jnp.ndarray


def step_derivatives(problem, x, u) -> StepDerivatives:
    """`step` and its exact Jacobians in the tangent directions (module docstring)."""
    model, dt = problem.model, problem.dt
    q, v = split(model, x)
    d = forward_dynamics_derivatives(model, q, v, _torques(problem, u))
    v_next = v + d.qdd * dt
    J_q, J_w = integration_jacobians(model, q, v_next * dt)
    eye = jnp.eye(model.nv, dtype=x.dtype)
    dv_dx = jnp.concatenate([dt * d.dqdd_dq, eye + dt * d.dqdd_dqd], 1)  # d v'/d (dq, dv)
    dv_du = dt * d.dqdd_dtau[:, np.asarray(problem.actuated, int)]
    dq_dx = jnp.concatenate([J_q, jnp.zeros_like(J_q)], 1) + dt * J_w @ dv_dx
    Fx = jnp.concatenate([dq_dx, dv_dx])
    Fu = jnp.concatenate([dt * J_w @ dv_du, dv_du])
    return StepDerivatives(jnp.concatenate([integrate(model, q, v_next, dt), v_next]), Fx, Fu)


def knot_cost(problem, x, u):
    """The running cost of one knot, ``dt`` times its costs' sum."""
    return problem.dt * cost_value(problem.running, problem.model, x, u)


def terminal_cost(problem, x):
    """The terminal cost, its costs' sum."""
    return cost_value(problem.terminal, problem.model, x, None)


def rollout(problem, us, x0=None):
    """The states (N + 1, nx) from ``x0`` (the problem's by default) under the controls ``us`` (N, nu)."""
    def body(x, u):
        x_next = step(problem, x, u)
        return x_next, x_next

    x0 = problem.x0 if x0 is None else x0
    _, xs = jax.lax.scan(body, x0, us)
    return jnp.concatenate([x0[None], xs])


def total_cost(problem, xs, us):
    """The problem's cost of the trajectory ``xs`` (N + 1, nx), ``us`` (N, nu)."""
    running = jax.vmap(lambda x, u: knot_cost(problem, x, u))(xs[:-1], us)
    return jnp.sum(running) + terminal_cost(problem, xs[-1])


def gaps(problem, xs, us):
    """The defects ``f`` (N + 1, ndx) between shooting nodes, as Crocoddyl's ``fs``: ``f_0 = x0 (-) xs_0``,
    ``f_{t+1} = step(xs_t, us_t) (-) xs_{t+1}``, each at the node's own state."""
    model = problem.model
    x_next = jax.vmap(lambda x, u: step(problem, x, u))(xs[:-1], us)
    f0 = difference(model, xs[0], problem.x0)
    return jnp.concatenate([f0[None], jax.vmap(lambda a, b: difference(model, a, b))(xs[1:], x_next)])


class Linearization(NamedTuple):
    """The linear-quadratic model of a problem about a trajectory: cost (), the running derivatives Fx (N, ndx,
    ndx), Fu (N, ndx, nu), Lx (N, ndx), Lu (N, nu), Lxx (N, ndx, ndx), Luu (N, nu, nu), Lxu (N, ndx, nu), the
    terminal Lx_T (ndx,), Lxx_T (ndx, ndx), and the gaps fs (N + 1, ndx) (`gaps`)."""

    cost: jnp.ndarray
    Fx: jnp.ndarray
    Fu: jnp.ndarray
    Lx: jnp.ndarray
    Lu: jnp.ndarray
    Lxx: jnp.ndarray
    Luu: jnp.ndarray
    Lxu: jnp.ndarray
    Lx_T: jnp.ndarray
    Lxx_T: jnp.ndarray
    fs: jnp.ndarray


def linearize(problem, xs, us) -> Linearization:
    """The `Linearization` about ``xs`` (N + 1, nx), ``us`` (N, nu): step Jacobians (`step_derivatives`) and
    Gauss-Newton cost derivatives (`jaxmb.trajopt.costs.cost_derivatives`), running ones times ``dt``."""
    model, dt = problem.model, problem.dt

    def knot(x, u):
        s = step_derivatives(problem, x, u)
        l, lx, lu, lxx, luu, lxu = cost_derivatives(problem.running, model, x, u)
        return s, (dt * l, dt * lx, dt * lu, dt * lxx, dt * luu, dt * lxu)

    s, (l, lx, lu, lxx, luu, lxu) = jax.vmap(knot)(xs[:-1], us)
    lT, lx_T, _, lxx_T, _, _ = cost_derivatives(problem.terminal, model, xs[-1], None)
    f0 = difference(model, xs[0], problem.x0)
    fs = jnp.concatenate([f0[None], jax.vmap(lambda a, b: difference(model, a, b))(xs[1:], s.x_next)])
    return Linearization(jnp.sum(l) + lT, s.Fx, s.Fu, lx, lu, lxx, luu, lxu, lx_T, lxx_T, fs)
