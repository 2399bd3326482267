"""States forward to a partitioned model and results back to the unpartitioned joints and bodies.

Coordinates, joint by joint (`jaxmb.partitioning.build`): a spherical joint's quaternion becomes the angles of the
partition's rotation sequence and back (`jaxmb.partitioning.sequences`; the quaternion comes back with ``w >= 0``,
the same rotation); a free joint's ``[p, quaternion]`` becomes ``[p, angles]``; a planar joint's ``[x, y, theta]``
and the screw, universal and gimbal joints' coordinates are the same in both.

Velocities: ``qd_k = S qd_sub`` with ``S = H H_bar*`` (`jaxmb.partitioning.hinges.velocity_maps`): a spherical
joint's body-frame angular velocity ``w = E(t) t_dot``; a free joint's ``[w; v] = [E t_dot; R* p_dot]``; a planar
joint's body-frame ``[vx, vy]`` the plane rates turned by ``-theta``. Forward, the rates solve ``S qd_sub = qd_k``
where the joint is not locked; where it is (`jaxmb.partitioning.gimbal_lock`), they are the damped least-squares
solution ``(S* S + tol 1) qd_sub = S* qd_k``: finite, the ``locked`` flag set, and meaningless, the exact rates
being unbounded. The solve that is not taken sees the identity, so neither value nor gradient is NaN. Back, accelerations take the rate of the map:
``qdd_k = S qdd_sub + S_dot qd_sub``, ``S_dot qd_sub`` by a `jax.jvp` along the sub-hinges' rates.

Generalized forces go forward by power, ``tau_sub = S* tau_k``; external forces act on the real bodies. Body
quantities come back as the real bodies' rows: by eq. (4), ``V``, ``alpha`` and the inter-body force ``f`` of body
k are the same in both models, in body k's frame.

Every function takes one state and is jit-, vmap- and grad-able.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.dynamics.articulated import articulated_body
from jaxmb.model import check_shapes
from jaxmb.partitioning.hinges import (
    default_tolerance,
    lock_from_hinges,
    unpartitioned_hinge_maps,
    velocity_maps,
)
from jaxmb.partitioning.sequences import angles_to_quaternion, quaternion_to_angles
from jaxmb.spatial import mm, mv, swap


class PartitionedState(NamedTuple):
    """A state of the partitioned model: ``q`` (nq_p,), ``qd`` (nv_p,), and ``locked`` (nj,), the gimbal-lock flag
    of each unpartitioned joint (`jaxmb.partitioning.GimbalLock`)."""

    q: jnp.ndarray
    qd: jnp.ndarray
    locked: jnp.ndarray


class UnpartitionedState(NamedTuple):
    """A state in the unpartitioned coordinates (`PartitionMap.nq`, ``nv``): ``q``, ``qd``, and ``qdd`` (None
    where no accelerations were given)."""

    q: jnp.ndarray
    qd: jnp.ndarray
    qdd: jnp.ndarray | None


class PartitionedForces(NamedTuple):
    """``tau`` (nv_p,) and ``f_ext`` (nb_p, 6) or None, for the partitioned model."""

    tau: jnp.ndarray
    f_ext: jnp.ndarray | None


class PartitionedDynamics(NamedTuple):
    """Forward dynamics through the partitioned model, mapped back: ``qdd`` (nv,) in the unpartitioned
    coordinates; ``V``, ``alpha`` and the inter-body forces ``f`` (N, 6) of the unpartitioned bodies
    (`PartitionMap.body_names` order, body frames); ``locked`` (nj,): where set, that joint is at gimbal lock and
    the results carry no meaning."""

    qdd: jnp.ndarray
    V: jnp.ndarray
    alpha: jnp.ndarray
    f: jnp.ndarray
    locked: jnp.ndarray


def _assemble(size, index, values, dtype):
    """The (size,) vector whose entries ``index`` (static, covering it) are ``values``."""
    if not index:
        return jnp.zeros(size, dtype)
    at = np.concatenate([np.asarray(i).reshape(-1) for i in index])
    return jnp.zeros(size, dtype).at[at].set(jnp.concatenate([v.reshape(-1) for v in values]))


def _configuration_forward(g, q_k, sequence):
    if g.type == "spherical":
        return jax.vmap(lambda x: quaternion_to_angles(x, sequence))(q_k)
    if g.type == "free":
        return jnp.concatenate([q_k[:, :3], jax.vmap(lambda x: quaternion_to_angles(x, sequence))(q_k[:, 3:])], 1)
    return q_k


def _configuration_back(g, q_sub, sequence):
    if g.type == "spherical":
        return jax.vmap(lambda x: angles_to_quaternion(x, sequence))(q_sub)
    if g.type == "free":
        return jnp.concatenate([q_sub[:, :3], jax.vmap(lambda x: angles_to_quaternion(x, sequence))(q_sub[:, 3:])], 1)
    return q_sub


def to_partitioned(partition, q, qd, tol=None) -> PartitionedState:
    """The partitioned state of the unpartitioned ``(q, qd)`` ((nq,), (nv,) in `PartitionMap` layout), with the
    gimbal-lock flags (``tol`` None: `jaxmb.partitioning.hinges.default_tolerance`)."""
    pmap, model = partition.map, partition.model
    tol = default_tolerance(q.dtype) if tol is None else tol
    q_p = _assemble(model.nq, [g.sub for g in pmap.groups],
                    [_configuration_forward(g, q[np.asarray(g.q)], pmap.sequence) for g in pmap.groups], q.dtype)
    H_bar = unpartitioned_hinge_maps(partition, q_p)
    lock = lock_from_hinges(partition, H_bar, tol)
    rates = []
    for g, S in zip(pmap.groups, velocity_maps(partition, H_bar)):
        qd_k = qd[np.asarray(g.v)]
        if S is None:
            rates.append(qd_k)
            continue
        locked = lock.locked[np.asarray(g.joints)][:, None, None]
        identity = jnp.eye(S.shape[-1], dtype=S.dtype)
        exact = jnp.linalg.solve(jnp.where(locked, identity, S), qd_k[..., None])
        damped = jnp.linalg.solve(mm(swap(S), S) + tol * identity, mv(swap(S), qd_k)[..., None])
        rates.append(jnp.where(locked, damped, exact)[..., 0])
    qd_p = _assemble(model.nv, [g.sub for g in pmap.groups], rates, qd.dtype)
    return PartitionedState(q_p, qd_p, lock.locked)


def _rates_back(partition, q, qd):
    """``qd_k = S(q) qd`` per group, from the partitioned ``(q, qd)``."""
    out = []
    for g, S in zip(partition.map.groups, velocity_maps(partition, unpartitioned_hinge_maps(partition, q))):
        qd_sub = qd[np.asarray(g.sub)]
        out.append(qd_sub if S is None else mv(S, qd_sub))
    return out


def from_partitioned(partition, q, qd, qdd=None) -> UnpartitionedState:
    """The unpartitioned state of the partitioned ``(q, qd)`` and, if given, accelerations ``qdd``:
    ``qdd_k = S qdd_sub + S_dot qd_sub`` (module docstring)."""
    pmap = partition.map
    check_shapes(partition.model, q=q, qd=qd, qdd=qdd)
    q_k = _assemble(pmap.nq, [g.q for g in pmap.groups],
                    [_configuration_back(g, q[np.asarray(g.sub)], pmap.sequence) for g in pmap.groups], q.dtype)
    index = [g.v for g in pmap.groups]
    if qdd is None:
        return UnpartitionedState(q_k, _assemble(pmap.nv, index, _rates_back(partition, q, qd), qd.dtype), None)
    rates, drift = jax.jvp(lambda x: _rates_back(partition, x, qd), (q,), (qd,))  # S qd, S_dot qd (q_dot = qd)
    accelerations = [r + d for r, d in zip(_rates_back(partition, q, qdd), drift)]
    return UnpartitionedState(q_k, _assemble(pmap.nv, index, rates, qd.dtype),
                              _assemble(pmap.nv, index, accelerations, qdd.dtype))


def to_partitioned_forces(partition, q, tau, f_ext=None) -> PartitionedForces:
    """The generalized forces ``tau_sub = S* tau_k`` at the partitioned configuration ``q`` (nq_p,) for the
    unpartitioned ``tau`` (nv,), and the unpartitioned bodies' external forces ``f_ext`` (N, 6) (body frames,
    about their origins) on the same bodies of the partitioned model, none on the massless ones."""
    pmap, model = partition.map, partition.model
    parts = []
    for g, S in zip(pmap.groups, velocity_maps(partition, unpartitioned_hinge_maps(partition, q))):
        tau_k = tau[np.asarray(g.v)]
        parts.append(tau_k if S is None else mv(swap(S), tau_k))
    tau_p = _assemble(model.nv, [g.sub for g in pmap.groups], parts, tau.dtype)
    if f_ext is None:
        return PartitionedForces(tau_p, None)
    return PartitionedForces(tau_p, jnp.zeros((model.nb, 6), f_ext.dtype).at[np.asarray(pmap.body)].set(f_ext))


def unpartitioned_bodies(partition, x):
    """The unpartitioned bodies' rows (N, ...) of a per-body array ``x`` (nb_p, ...) of the partitioned model."""
    return x[np.asarray(partition.map.body)]


def partitioned_dynamics(partition, q, qd, tau, f_ext=None, tol=None) -> PartitionedDynamics:
    """Forward dynamics of the unpartitioned state ``(q, qd, tau, f_ext)`` (`PartitionMap` layout; ``f_ext``
    (N, 6) or None) by the partitioned model's articulated-body sweep, every ``D(k)`` a scalar, with the results
    mapped back (`PartitionedDynamics`). The inter-body forces are ``f(k) = P(k)(alpha(k) - a(k)) + z(k)``
    (Jain 2018, eq. 18) of the real bodies, equal to the unpartitioned model's by eq. (4)."""
    state = to_partitioned(partition, q, qd, tol)
    forces = to_partitioned_forces(partition, state.q, tau, f_ext)
    ab = articulated_body(partition.model, state.q, state.qd, forces.tau, forces.f_ext)
    f = mv(ab.P, ab.alpha - ab.a) + ab.z
    qdd = from_partitioned(partition, state.q, state.qd, ab.qdd).qdd
    return PartitionedDynamics(qdd, unpartitioned_bodies(partition, ab.V), unpartitioned_bodies(partition, ab.alpha),
                               unpartitioned_bodies(partition, f), state.locked)
