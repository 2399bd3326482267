"""Costs of a shooting problem in Crocoddyl's residual-and-activation form: ``weight * 1/2 sum(activation r^2)``.

Each cost is a residual ``r(model, q, v, u)`` (nr,) with a scalar ``weight`` and per-component ``activation``
weights (nr,) (Crocoddyl's ``CostModelResidual`` with ``ActivationModelWeightedQuad``, summed by
``CostModelSum`` with the weight given to ``addCost``). Numbers (targets, weights) are JAX leaves, so a batch of
targets is ``jax.vmap`` over a problem and never recompiles; the frame a cost follows is static.

The derivatives are Gauss-Newton's, as Crocoddyl takes them: with ``R = dr/d(dx, u)`` (``dx`` the state's tangent,
`jaxmb.trajopt.state`), ``l_x = R' A r`` and ``l_xx = R' A R`` (``A = weight diag(activation)``), the residual's
second derivatives left out. ``R`` is the exact Jacobian, a forward-mode derivative along the tangent directions.
"""

from dataclasses import dataclass, field, replace

import jax
import jax.numpy as jnp

from jaxmb.dynamics.energy import center_of_mass
from jaxmb.errors import ModelError
from jaxmb.kinematics import frame_poses, frame_velocity
from jaxmb.model import pytree_dataclass
from jaxmb.spatial import Transform
from jaxmb.trajopt.state import difference, integrate_state, se3_log, split


def _frame(model, name, cost):
    if name not in model.frame_names:
        raise ModelError(f"{cost}: the model has no frame {name!r}; its frames are model.frame_names "
                         f"({', '.join(model.frame_names[:8])}, ...)")
    return model.frame_index(name)


def _activation(activation, n, dtype=float):
    a = jnp.ones(n, dtype) if activation is None else jnp.asarray(activation, dtype)
    if a.shape != (n,):
        raise ModelError(f"a cost's activation weights have shape {a.shape}; give ({n},), one per residual")
    return a


@pytree_dataclass
@dataclass(frozen=True)
class FrameTranslation:
    """``r = p_frame(q) - target`` (3,), world coordinates (Crocoddyl's ``ResidualModelFrameTranslation``)."""

    target: jnp.ndarray
    weight: jnp.ndarray
    activation: jnp.ndarray
    frame: int = field(metadata=dict(static=True))
    uses_control = False

    def residual(self, model, q, v, u):
        return frame_poses(model, q).p[self.frame] - self.target


@pytree_dataclass
@dataclass(frozen=True)
class FramePlacement:
    """``r = log(target^-1 T_frame(q))`` (6,), the body twist ``[w; v]`` (angular first, `jaxmb.trajopt.state.se3_log`)
    from the target pose to the frame's (Crocoddyl's ``ResidualModelFramePlacement``, whose ``log6`` orders the
    linear part first)."""

    target: Transform
    weight: jnp.ndarray
    activation: jnp.ndarray
    frame: int = field(metadata=dict(static=True))
    uses_control = False

    def residual(self, model, q, v, u):
        T = frame_poses(model, q)
        R, p = T.R[self.frame], T.p[self.frame]
        return se3_log(self.target.R.T @ R, self.target.R.T @ (p - self.target.p))


@pytree_dataclass
@dataclass(frozen=True)
class FrameVelocity:
    """``r = V_frame(q, v) - target`` (6,), the frame's spatial velocity ``[w; v]`` in its own coordinates
    (Crocoddyl's ``ResidualModelFrameVelocity`` in ``LOCAL``, angular first here)."""

    target: jnp.ndarray
    weight: jnp.ndarray
    activation: jnp.ndarray
    frame: int = field(metadata=dict(static=True))
    name: str = field(metadata=dict(static=True))
    uses_control = False

    def residual(self, model, q, v, u):
        return frame_velocity(model, q, v, self.name, "local") - self.target


@pytree_dataclass
@dataclass(frozen=True)
class CenterOfMass:
    """``r = c(q) - target`` (3,), the centre of mass of all bodies (Crocoddyl's ``ResidualModelCoMPosition``)."""

    target: jnp.ndarray
    weight: jnp.ndarray
    activation: jnp.ndarray
    uses_control = False

    def residual(self, model, q, v, u):
        return center_of_mass(model, q) - self.target


@pytree_dataclass
@dataclass(frozen=True)
class StateRegularization:
    """``r = x (-) reference`` (2 nv,), the tangent difference (Crocoddyl's ``ResidualModelState``)."""

    reference: jnp.ndarray
    weight: jnp.ndarray
    activation: jnp.ndarray
    uses_control = False

    def residual(self, model, q, v, u):
        return difference(model, self.reference, jnp.concatenate([q, v]))


@pytree_dataclass
@dataclass(frozen=True)
class ControlRegularization:
    """``r = u - reference`` (nu,) (Crocoddyl's ``ResidualModelControl``)."""

    reference: jnp.ndarray
    weight: jnp.ndarray
    activation: jnp.ndarray
    uses_control = True

    def residual(self, model, q, v, u):
        return u - self.reference


def frame_translation(model, frame, target, weight=1.0, activation=None):
    """A `FrameTranslation` cost of the frame (or body) named ``frame`` toward ``target`` (3,)."""
    return FrameTranslation(jnp.asarray(target, float), jnp.asarray(weight, float), _activation(activation, 3),
                            _frame(model, frame, "frame_translation"))


def frame_placement(model, frame, target: Transform, weight=1.0, activation=None):
    """A `FramePlacement` cost of ``frame`` toward the world pose ``target``."""
    return FramePlacement(target, jnp.asarray(weight, float), _activation(activation, 6),
                          _frame(model, frame, "frame_placement"))


def frame_velocity_cost(model, frame, target=None, weight=1.0, activation=None):
    """A `FrameVelocity` cost of ``frame`` toward ``target`` (6,) (zero: at rest)."""
    target = jnp.zeros(6) if target is None else jnp.asarray(target, float)
    return FrameVelocity(target, jnp.asarray(weight, float), _activation(activation, 6),
                         _frame(model, frame, "frame_velocity_cost"), frame)


def center_of_mass_cost(model, target, weight=1.0, activation=None):
    """A `CenterOfMass` cost toward ``target`` (3,)."""
    return CenterOfMass(jnp.asarray(target, float), jnp.asarray(weight, float), _activation(activation, 3))


def state_regularization(model, reference, weight=1.0, activation=None):
    """A `StateRegularization` cost toward the state ``reference`` (nq + nv,); ``activation`` (2 nv,)."""
    reference = jnp.asarray(reference, float)
    if reference.shape != (model.nq + model.nv,):
        raise ModelError(f"state_regularization: the reference has shape {reference.shape}; give the state "
                         f"(q, v), ({model.nq + model.nv},)")
    return StateRegularization(reference, jnp.asarray(weight, float), _activation(activation, 2 * model.nv))


def control_regularization(nu, reference=None, weight=1.0, activation=None):
    """A `ControlRegularization` cost of ``nu`` controls toward ``reference`` (nu,) (zero by default)."""
    reference = jnp.zeros(nu) if reference is None else jnp.asarray(reference, float)
    if reference.shape != (nu,):
        raise ModelError(f"control_regularization: the reference has shape {reference.shape}; give ({nu},)")
    return ControlRegularization(reference, jnp.asarray(weight, float), _activation(activation, nu))


def cost_value(costs, model, x, u):
    """``sum_i weight_i 1/2 sum(activation_i r_i^2)`` over ``costs`` (a tuple) at the state ``x`` and control
    ``u`` (None at the terminal knot)."""
    q, v = split(model, x)
    total = jnp.zeros((), x.dtype)
    for c in costs:
        r = c.residual(model, q, v, u)
        total = total + c.weight * 0.5 * jnp.sum(c.activation * r * r)
    return total


def cost_derivatives(costs, model, x, u):
    """Gauss-Newton derivatives of `cost_value` in the state's tangent ``dx`` (2 nv,) and in ``u`` (nu,): ``(l,
    l_x, l_u, l_xx, l_uu, l_xu)`` with shapes (), (ndx,), (nu,), (ndx, ndx), (nu, nu), (ndx, nu); for ``u = None``
    the control terms are empty (shape 0)."""
    ndx = 2 * model.nv
    nu = 0 if u is None else u.shape[0]
    l, lx, lu = jnp.zeros((), x.dtype), jnp.zeros(ndx, x.dtype), jnp.zeros(nu, x.dtype)
    lxx, luu, lxu = jnp.zeros((ndx, ndx), x.dtype), jnp.zeros((nu, nu), x.dtype), jnp.zeros((ndx, nu), x.dtype)
    for c in costs:
        def r_of(dx, du, c=c):
            q, v = split(model, integrate_state(model, x, dx))
            return c.residual(model, q, v, None if u is None else u + du)

        zero = (jnp.zeros(ndx, x.dtype), jnp.zeros(nu, x.dtype))
        r = r_of(*zero)
        Rx, Ru = jax.jacfwd(r_of, argnums=(0, 1))(*zero)
        A = c.weight * c.activation
        Ar = A * r
        l = l + 0.5 * jnp.dot(Ar, r)
        lx, lu = lx + Rx.T @ Ar, lu + Ru.T @ Ar
        lxx, luu, lxu = lxx + Rx.T @ (A[:, None] * Rx), luu + Ru.T @ (A[:, None] * Ru), lxu + Rx.T @ (A[:, None] * Ru)
    return l, lx, lu, lxx, luu, lxu


def retarget(costs, target):
    """``costs`` (a tuple) with the target of every `FrameTranslation` replaced by ``target`` (3,) (a moving
    target of MPC; a batch of targets under ``jax.vmap``)."""
    return tuple(replace(c, target=jnp.asarray(target, c.target.dtype)) if isinstance(c, FrameTranslation) else c
                 for c in costs)
