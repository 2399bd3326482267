"""The state ``x = (q, v)`` of a shooting problem on the joints' manifolds: its tangent difference and integration.

A state has ``nx = nq + nv`` numbers and ``ndx = 2 nv`` tangent directions. ``integrate_state(model, x, dx)`` moves
``q`` by ``dq`` as `jaxmb.integrate` moves it for unit time and adds ``dv`` to ``v``; ``difference(model, x0, x1)``
is its inverse, the tangent ``dx`` at ``x0`` with ``integrate_state(model, x0, dx) = x1`` (Crocoddyl's
``StateMultibody.diff(x0, x1)``, Pinocchio's ``difference``): ``q1 - q0`` for screw joints, the logarithm of
``q0^-1 q1`` for spherical, planar and free joints, whose `jaxmb.integrate` is the exponential of a constant body
twist.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.configuration import integrate
from jaxmb.rotation import quat_multiply, quat_to_matrix, safe_norm, so3_left_jacobian


def split(model, x):
    """``(q, v)``, (nq,) and (nv,), of a state ``x`` (nq + nv,)."""
    return x[:model.nq], x[model.nq:]


def quat_log(quat):
    """The rotation vector (3,) of the unit quaternion ``[w, x, y, z]``, the inverse of `jaxmb.rotation.quat_exp`
    (the shorter of the two arcs), smooth through the identity: ``2 atan2(|u|, w) u / |u|`` with
    ``atan2(n, w)/n -> 1/w`` at ``n = |u| -> 0``."""
    quat = jnp.where(quat[0] < 0, -quat, quat)
    w, u = quat[0], quat[1:]
    n = safe_norm(u)
    small = n < 1e-6
    safe_n = jnp.where(small, 1.0, n)
    factor = jnp.where(small, (1.0 - n * n / (3.0 * w * w)) / w, jnp.arctan2(n, w) / safe_n)
    return 2.0 * factor * u


def _quat_conjugate(quat):
    return quat * jnp.array([1.0, -1.0, -1.0, -1.0], quat.dtype)


def matrix_to_quat(R):
    """The unit quaternion ``[w, x, y, z]`` (w >= 0) of the rotation matrix ``R`` (3, 3), by Shepperd's method: from
    the largest of ``1 + tr R``, ``1 + 2 R_ii - tr R``, each branch dividing by a number above 1/2."""
    t = jnp.trace(R)
    d = jnp.diagonal(R)
    cands = jnp.stack([1.0 + t, 1.0 + 2.0 * d[0] - t, 1.0 + 2.0 * d[1] - t, 1.0 + 2.0 * d[2] - t])
    i = jnp.argmax(cands)
    s = 2.0 * jnp.sqrt(jnp.max(cands))
    qw = jnp.stack([s / 4, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s])
    qx = jnp.stack([(R[2, 1] - R[1, 2]) / s, s / 4, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s])
    qy = jnp.stack([(R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, s / 4, (R[1, 2] + R[2, 1]) / s])
    qz = jnp.stack([(R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, s / 4])
    quat = jnp.stack([qw, qx, qy, qz])[i]
    return jnp.where(quat[0] < 0, -quat, quat)


def se3_log(R, p):
    """The body twist ``[w; v]`` (6,) whose exponential for unit time is the pose ``(R, p)``: ``w = log R``,
    ``v = V(w)^-1 p`` (`jaxmb.rotation.so3_left_jacobian`), the inverse of the free joint's `jaxmb.integrate`."""
    w = quat_log(matrix_to_quat(R))
    return jnp.concatenate([w, jnp.linalg.solve(so3_left_jacobian(w), p)])


def _block_difference(kind, q0, q1):
    """The tangent from ``q0`` to ``q1`` of one joint of ``kind``, one of the four of `jaxmb.joints.KINDS`."""
    if kind == "screw":
        return q1 - q0
    if kind == "spherical":
        return quat_log(quat_multiply(_quat_conjugate(q0), q1))
    if kind == "free":  # the SE(3) logarithm of q0^-1 q1, its rotation read from the quaternions themselves
        w = quat_log(quat_multiply(_quat_conjugate(q0[3:]), q1[3:]))
        dp = quat_to_matrix(q0[3:]).T @ (q1[:3] - q0[:3])
        return jnp.concatenate([w, jnp.linalg.solve(so3_left_jacobian(w), dp)])
    # planar: an SE(2) logarithm, the planar joint integrating a constant body twist [vx, vy, w]
    c, s = jnp.cos(q0[2]), jnp.sin(q0[2])
    dp = jnp.stack([c * (q1[0] - q0[0]) + s * (q1[1] - q0[1]), -s * (q1[0] - q0[0]) + c * (q1[1] - q0[1]),
                    jnp.zeros_like(q0[0])])
    dtheta = q1[2] - q0[2]
    r = jnp.stack([jnp.zeros_like(dtheta), jnp.zeros_like(dtheta), dtheta])
    v = jnp.linalg.solve(so3_left_jacobian(r), dp)
    return jnp.stack([v[0], v[1], dtheta])


def configuration_difference(model, q0, q1):
    """The tangent ``dq`` (nv,) at ``q0`` with ``jaxmb.integrate(model, q0, dq, 1) = q1``."""
    out = jnp.zeros(model.nv, q0.dtype)
    for blk in model.topology.kind_blocks:
        d = jax.vmap(lambda a, b, kind=blk.kind: _block_difference(kind, a, b))(q0[blk.q_index], q1[blk.q_index])
        out = out.at[np.asarray(blk.v_index)].set(d)
    return out


def difference(model, x0, x1):
    """The tangent ``dx = x1 (-) x0`` (2 nv,) at ``x0``: ``integrate_state(model, x0, dx) = x1``."""
    (q0, v0), (q1, v1) = split(model, x0), split(model, x1)
    return jnp.concatenate([configuration_difference(model, q0, q1), v1 - v0])


def integrate_state(model, x, dx):
    """``x (+) dx`` (nq + nv,): ``q`` moved by ``dx[:nv]`` on its manifold (`jaxmb.integrate` for unit time), ``v``
    plus ``dx[nv:]``."""
    q, v = split(model, x)
    return jnp.concatenate([integrate(model, q, dx[:model.nv], 1.0), v + dx[model.nv:]])


def is_vector_space(model):
    """Whether every joint is a screw joint, so that ``q`` is a vector space and ``difference`` subtracts."""
    return all(blk.kind == "screw" for blk in model.topology.kind_blocks)
