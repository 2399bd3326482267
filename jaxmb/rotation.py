"""Rotations and unit quaternions.

Quaternions are scalar first, ``q = [w, x, y, z]`` (the order of MJX, jaxsim and jaxlie). Jain's book (appendix B)
and Pinocchio store them scalar last, ``[x, y, z, w]``: use `wxyz_to_xyzw` / `xyzw_to_wxyz` at that boundary.

Nothing here normalizes a quaternion: the dynamics take the configuration as given, and only the integrators
(`jaxmb.joints`) renormalize, so gradients stay finite at the identity.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

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


def safe_norm(x):
    """``|x|`` over the last axis, with a finite (zero) gradient at ``x = 0``.

    ``jnp.linalg.norm`` has the gradient ``x/|x|``, NaN at zero, which a rotation vector or twist of zero (a body at
    rest) would pass into every gradient. The double-where trick evaluates the square root only where the squared
    norm is positive, so neither branch produces a NaN for the gradient to pick up."""
    sq = jnp.sum(x * x, -1)
    nonzero = sq > 0
    return jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, sq, 1.0)), 0.0)


def quat_exp(r):
    """Unit quaternion of the rotation vector ``r`` (3,) (angle |r| about r/|r|); smooth through ``r = 0``."""
    theta = safe_norm(r)
    half = 0.5 * theta
    small = theta < 1e-4
    safe = jnp.where(small, 1.0, theta)
    # sin(theta/2)/theta, with its Taylor series near zero
    k = jnp.where(small, 0.5 - theta**2 / 48.0, jnp.sin(half) / safe)
    return jnp.concatenate([jnp.cos(half)[..., None], k[..., None] * r], -1)


# (t - sin t)/t^3 = sum_k (-1)^k t^(2k) / (2k + 3)!, k = 0..10: below t = 2 the first omitted term is below
# float64 rounding of the sum (1/6 and more), and above it the closed form loses at most about 2 ulp.
_SERIES_BELOW = 2.0
_B_SERIES = tuple((-1) ** k / math.factorial(2 * k + 3) for k in range(11))


def left_jacobian_coefficients(theta):
    """``a = (1 - cos t)/t^2`` and ``b = (t - sin t)/t^3`` for rotation angles ``t = theta`` (any shape), in forms
    free of cancellation, so that both are exact to the dtype's rounding at every angle (float32 included).

    The textbook forms subtract nearly equal numbers for small ``t``: in float32, ``1 - cos t`` is 0 below
    ``t`` of about 3e-4, so a body turning slowly would translate without the ``a r~ v`` term of the SE(3)
    exponential (`so3_left_jacobian`). Here ``a = 2 sin^2(t/2)/t^2 = (sin(t/2)/(t/2))^2 / 2``, which has no
    subtraction, and ``b`` is its Taylor series below ``t = 2`` (eleven terms; the closed form above). The
    double-where trick keeps the gradient finite at ``t = 0``: the division is evaluated only at a safe angle.
    """
    small = theta < 1e-4  # where sin(h)/h would divide 0 by 0; its series 1 - t^2/24 is exact to rounding there
    half = 0.5 * jnp.where(small, 1.0, theta)
    sinc = jnp.sin(half) / half
    a = jnp.where(small, 0.5 - theta**2 / 24.0, 0.5 * sinc * sinc)
    t2 = theta * theta
    series = jnp.zeros_like(theta)
    for c in reversed(_B_SERIES):  # Horner's rule in t^2
        series = series * t2 + c
    big = theta >= _SERIES_BELOW
    tb = jnp.where(big, theta, _SERIES_BELOW)
    b = jnp.where(big, (tb - jnp.sin(tb)) / tb**3, series)
    return a, b


def so3_left_jacobian(r):
    """``V(r) = 1 + a r~ + b r~ r~`` (3, 3) with ``a = (1 - cos t)/t^2``, ``b = (t - sin t)/t^3``, ``t = |r|``: the
    left Jacobian of SO(3), which maps the linear velocity of a constant body twist ``[r; v]`` (per unit time) to
    the translation of the SE(3) exponential, ``p = V(r) v``. The coefficients come from
    `left_jacobian_coefficients`, exact in float32 at small angles."""
    a, b = left_jacobian_coefficients(safe_norm(r))
    rx = skew(r)
    return jnp.eye(3, dtype=r.dtype) + a[..., None, None] * rx + b[..., None, None] * mm(rx, rx)


def so3_dexp_inverse(r, w):
    """``dexp^-1_r(w) = w + r x w / 2 + c r x (r x w)`` (3,), ``c = (1 - (t/2) cot(t/2)) / t^2``, ``t = |r|``: the
    rate of the rotation vector ``r`` of ``R0 exp(r)`` turning at the body angular velocity ``w`` (the inverse of
    SO(3)'s right Jacobian). Runge-Kutta-Munthe-Kaas stages take it (Munthe-Kaas, "High order Runge-Kutta methods
    on manifolds", 1999). ``c`` is its Taylor series ``1/12 + t^2/720 + t^4/30240`` below ``t = 1e-2``, where the
    closed form would lose digits to cancellation, and the next term is below float64 rounding."""
    t = safe_norm(r)
    small = t < 1e-2
    ts = jnp.where(small, 1.0, t)
    c = jnp.where(small, 1.0 / 12.0 + t**2 / 720.0 + t**4 / 30240.0,
                  (1.0 - 0.5 * ts / jnp.tan(0.5 * ts)) / ts**2)
    rw = cross3(r, w)
    return w + 0.5 * rw + c[..., None] * cross3(r, rw)


def axis_angle_to_matrix(axis, angle):
    """Rodrigues' formula for a unit ``axis`` (3,) and an ``angle`` (): ``1 + sin a~ + (1 - cos) a~ a~``."""
    ax = skew(axis)
    s, c = jnp.sin(angle)[..., None, None], jnp.cos(angle)[..., None, None]
    return jnp.eye(3, dtype=ax.dtype) + s * ax + (1.0 - c) * mm(ax, ax)


def rpy_to_matrix(rpy):
    """URDF roll-pitch-yaw (fixed axes x, then y, then z): ``R = Rz(yaw) Ry(pitch) Rx(roll)``. A JAX array (or a
    tracer) gives a JAX array; numbers and numpy arrays give a numpy array, so that a file loader pays no JAX
    dispatch per element."""
    xp = jnp if isinstance(rpy, jax.Array) else np
    rpy = xp.asarray(rpy)
    r, p, y = rpy[..., 0], rpy[..., 1], rpy[..., 2]
    cr, sr, cp, sp, cy, sy = xp.cos(r), xp.sin(r), xp.cos(p), xp.sin(p), xp.cos(y), xp.sin(y)
    return xp.stack(
        [
            xp.stack([cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr], -1),
            xp.stack([sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr], -1),
            xp.stack([-sp, cp * sr, cp * cr], -1),
        ],
        -2,
    )
