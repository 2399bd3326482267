"""Rotations and unit quaternions.

Quaternions are scalar first, ``q = [w, x, y, z]`` (the order of MJX, jaxsim and jaxlie). Jain's book (appendix B)
and Pinocchio store them scalar last, ``[x, y, z, w]``: use `wxyz_to_xyzw` / `xyzw_to_wxyz` at that boundary.

Nothing here normalizes a quaternion: the dynamics take the configuration as given, and only the integrators
(`jaxmb.joints`) renormalize, so gradients stay finite at the identity.
"""

import jax.numpy as jnp

from jaxmb.spatial import cross3, mm, skew


def wxyz_to_xyzw(q):
    return jnp.concatenate([q[..., 1:], q[..., :1]], -1)


def xyzw_to_wxyz(q):
    return jnp.concatenate([q[..., 3:], q[..., :3]], -1)


def quat_to_matrix(q):
    """Rotation matrix (3, 3) of a unit quaternion ``[w, x, y, z]``: ``R = 1 + 2 w v~ + 2 v~ v~``."""
    w, v = q[..., 0], q[..., 1:]
    vx = skew(v)
    return jnp.eye(3, dtype=q.dtype) + 2.0 * w[..., None, None] * vx + 2.0 * mm(vx, vx)


def quat_multiply(a, b):
    """Hamilton product ``a (x) b`` of quaternions ``[w, x, y, z]``."""
    aw, av = a[..., :1], a[..., 1:]
    bw, bv = b[..., :1], b[..., 1:]
    w = aw * bw - jnp.sum(av * bv, -1, keepdims=True)
    v = aw * bv + bw * av + cross3(av, bv)
    return jnp.concatenate([w, v], -1)


def _safe_norm(x):
    """``|x|`` with a finite (zero) gradient at ``x = 0`` (the double-where trick)."""
    sq = jnp.sum(x * x, -1)
    nonzero = sq > 0
    return jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, sq, 1.0)), 0.0)


def quat_exp(r):
    """Unit quaternion of the rotation vector ``r`` (3,) (angle |r| about r/|r|); smooth through ``r = 0``."""
    theta = _safe_norm(r)
    half = 0.5 * theta
    small = theta < 1e-4
    safe = jnp.where(small, 1.0, theta)
    # sin(theta/2)/theta, with its Taylor series near zero
    k = jnp.where(small, 0.5 - theta**2 / 48.0, jnp.sin(half) / safe)
    return jnp.concatenate([jnp.cos(half)[..., None], k[..., None] * r], -1)


def axis_angle_to_matrix(axis, angle):
    """Rodrigues' formula for a unit ``axis`` (3,) and an ``angle`` (): ``1 + sin a~ + (1 - cos) a~ a~``."""
    ax = skew(axis)
    s, c = jnp.sin(angle)[..., None, None], jnp.cos(angle)[..., None, None]
    return jnp.eye(3, dtype=ax.dtype) + s * ax + (1.0 - c) * mm(ax, ax)


def rpy_to_matrix(rpy):
    """URDF roll-pitch-yaw (fixed axes x, then y, then z): ``R = Rz(yaw) Ry(pitch) Rx(roll)``."""
    r, p, y = rpy[..., 0], rpy[..., 1], rpy[..., 2]
    cr, sr, cp, sp, cy, sy = jnp.cos(r), jnp.sin(r), jnp.cos(p), jnp.sin(p), jnp.cos(y), jnp.sin(y)
    return jnp.stack(
        [
            jnp.stack([cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr], -1),
            jnp.stack([sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr], -1),
            jnp.stack([-sp, cp * sr, cp * cr], -1),
        ],
        -2,
    )
