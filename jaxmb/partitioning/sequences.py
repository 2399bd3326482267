"""Rotation sequences: a rotation as three angles about the axes of a moving frame, and back.

A *sequence* names three distinct axes of x, y, z, ``"xyz"`` for instance: the rotation ``R = R_i(t1) R_j(t2)
R_k(t3)`` turns by ``t1`` about axis ``i``, then by ``t2`` about axis ``j`` of the frame so turned, then by ``t3``
about axis ``k`` of the frame turned twice (intrinsic Tait-Bryan angles). A chain of three revolute sub-hinges
about ``i``, ``j``, ``k`` with no offsets between them has exactly this pose, so these are the coordinates of a
spherical joint partitioned into a gimbal (`jaxmb.partitioning.partition_model`).

The body-frame angular velocity is ``w = E(t) t_dot`` with ``det E = e cos t2`` (``e = +1`` for the cyclic
sequences xyz, yzx, zxy, ``-1`` for the others): the map is singular, the gimbal locked, where ``cos t2 = 0``.
Sequences with a repeated axis (proper Euler angles, ``"zxz"``) are refused: they lock at ``t2 = 0``, the
identity, where every spherical joint starts.

Quaternions are scalar first, ``[w, x, y, z]`` (`jaxmb.rotation`).
"""

import jax.numpy as jnp

from jaxmb.errors import ModelError
from jaxmb.rotation import quat_multiply, quat_to_matrix, safe_norm

AXES = "xyz"


def sequence_axes(sequence):
    """The axis indices ``(i, j, k)`` of ``sequence`` and its sign ``e`` (+1 cyclic, -1 otherwise); raises
    `ModelError` unless it names three distinct axes of x, y, z."""
    if not isinstance(sequence, str) or sorted(sequence) != sorted(AXES):
        raise ModelError(f"a rotation sequence names each of x, y, z once (a Tait-Bryan sequence such as 'xyz' or "
                         f"'zyx'), got {sequence!r}; sequences with a repeated axis lock at the identity")
    i, j, k = (AXES.index(a) for a in sequence)
    return (i, j, k), (1.0 if (j - i) % 3 == 1 else -1.0)


def angles_to_quaternion(angles, sequence):
    """The unit quaternion (4,) of ``R = R_i(t1) R_j(t2) R_k(t3)`` for ``angles`` (3,), with ``w >= 0``."""
    axes, _ = sequence_axes(sequence)
    parts = []
    for n, t in zip(axes, angles):
        half = 0.5 * t
        v = jnp.zeros(3, angles.dtype).at[n].set(jnp.sin(half))
        parts.append(jnp.concatenate([jnp.cos(half)[None], v]))
    quat = quat_multiply(quat_multiply(parts[0], parts[1]), parts[2])
    return jnp.where(quat[0] < 0, -quat, quat)


def quaternion_to_angles(quat, sequence):
    """Angles ``(t1, t2, t3)`` (3,) with ``R_i(t1) R_j(t2) R_k(t3) = R(quat)``, ``t2`` in ``[-pi/2, pi/2]`` and
    ``t1, t3`` in ``(-pi, pi]``.

    From the rotation matrix: ``R[i, k] = e sin t2``, ``(R[i, i], R[i, j]) = cos t2 (cos t3, -e sin t3)`` and
    ``(R[k, k], R[j, k]) = cos t2 (cos t1, -e sin t1)``. Near the gimbal lock (``cos t2 -> 0``) those last entries
    are rounding noise, so ``t3`` is not read from them but from ``R_i(t1)* R = R_j(t2) R_k(t3)``, whose row ``j``
    is ``(cos t3, e sin t3)`` at columns ``(j, i)`` whatever ``t2``: the angles reproduce ``R`` to rounding at every
    attitude. At the lock itself only ``t1 +- t3`` is defined, and ``t1 = 0``. The arguments of every arctan2 are
    kept away from ``(0, 0)``, so no gradient is NaN."""
    (i, j, k), e = sequence_axes(sequence)
    R = quat_to_matrix(quat)
    c2 = safe_norm(jnp.stack([R[i, i], R[i, j]]))
    t2 = jnp.arctan2(e * R[i, k], c2)
    locked = c2 <= jnp.finfo(R.dtype).eps
    t1 = jnp.arctan2(jnp.where(locked, 0.0, -e * R[j, k]), jnp.where(locked, 1.0, R[k, k]))
    # row j of R_i(t1)* R: column j of R_i(t1) is cos t1 e_j + e sin t1 e_k
    c1, s1 = jnp.cos(t1), e * jnp.sin(t1)
    t3 = jnp.arctan2(e * (c1 * R[j, i] + s1 * R[k, i]), c1 * R[j, j] + s1 * R[k, j])
    return jnp.stack([t1, t2, t3])
