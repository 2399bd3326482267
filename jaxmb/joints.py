"""Joint kinds: the joint transform, the hinge map ``H(k)``, configuration rates and integration on the manifold.

A joint connects the *joint frame* (fixed on the parent, placed by the model's ``X_tree``) to the child body
frame. Every kind here has a hinge map ``H*(k)`` that is constant in child-frame coordinates, so the Coriolis term
is ``a(k) = V(k) x (H*(k) qd(k))`` for all of them (book ch. 5).

=========  ====  ====  ==========================================================================
kind       nq    nv    coordinates
=========  ====  ====  ==========================================================================
screw      1     1     angle or displacement; revolute ``(1, 0)``, prismatic ``(0, 1)``, helical ``(1, h)``
spherical  4     3     ``q = [w, x, y, z]``, ``qd`` = body-frame angular velocity
planar     3     3     ``q = [x, y, theta]`` in the plane normal to ``axis`` (xy for z), ``qd = [vx, vy, w]`` body frame
free       7     6     ``q = [p (3), w, x, y, z]``, pose in the joint frame; ``qd = [omega; v]`` in the body frame
=========  ====  ====  ==========================================================================

A screw joint has per-joint parameters (model leaves): a unit ``axis`` (3,) and ``coef = (c_w, c_v)``; its
transform is a rotation by ``c_w q`` about the axis and a translation ``c_v q`` along it, and
``H(k) = [c_w axis, c_v axis]``. One kind for revolute, prismatic and helical joints keeps a tree level free of
branches. Each method works on one joint; the model maps them over all joints of a kind. A planar joint uses
``axis`` as the normal of its plane (`plane_basis`).

A *continuous* joint (an unlimited revolute joint) is a screw with one coordinate, the angle itself: nq = nv = 1.
Pinocchio stores it as the pair ``(cos q, sin q)`` (nq = 2, nv = 1); convert at that boundary. Nothing wraps the
angle, so it counts turns.

A *free* joint's ``q[:3]`` and quaternion are the pose of the child body frame in the joint frame, that is
relative to the joint's placement ``X_tree`` in its parent (the world for a root). They are world coordinates
only when that placement is the identity, as it is for the root added by ``load_urdf(..., floating_base=True)``
and for a root added without a ``placement``. The same holds for the planar joint's ``x, y, theta``.
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.rotation import axis_angle_to_matrix, quat_exp, quat_multiply, quat_to_matrix, so3_left_jacobian
from jaxmb.spatial import Transform, mv, skew, mm


@dataclass(frozen=True)
class JointKind(ABC):
    name: str
    nq: int
    nv: int

    @abstractmethod
    def transform(self, q, axis, coef) -> Transform:
        """Pose of the child body frame in the joint frame, ``q`` (nq,) -> Transform."""

    @abstractmethod
    def hinge_map(self, axis, coef):
        """``H(k)`` (nv, 6): row i is the child-frame spatial motion of unit rate of coordinate i."""

    def configuration_rate(self, q, qd):
        """``dq/dt`` (nq,) for velocity ``qd`` (nv,), without normalization (for ODE integrators)."""
        return qd

    def integrate(self, q, qd, dt):
        """Configuration reached from ``q`` after moving at constant ``qd`` for ``dt``, on the manifold."""
        return q + qd * dt

    def neutral(self):
        return np.zeros(self.nq)

    def random(self, key, lower, upper):
        """A random configuration within finite limits, else in ``[-pi, pi]`` per coordinate."""
        lo = jnp.where(jnp.isfinite(lower), lower, -jnp.pi)
        hi = jnp.where(jnp.isfinite(upper), upper, jnp.pi)
        return jax.random.uniform(key, (self.nq,), lo.dtype, lo, hi)


class _Screw(JointKind):
    def transform(self, q, axis, coef):
        return Transform(axis_angle_to_matrix(axis, coef[0] * q[0]), axis * (coef[1] * q[0]))

    def hinge_map(self, axis, coef):
        return jnp.concatenate([coef[0] * axis, coef[1] * axis])[None, :]


def _random_unit_quaternion(key, dtype):
    u = jax.random.normal(key, (4,), dtype)
    u = u / jnp.linalg.norm(u)
    return u * jnp.sign(u[0] + (u[0] == 0))


def _quat_rate(quat, omega):
    """``dq/dt = 1/2 q (x) [0, omega]`` for a body-frame angular velocity."""
    return 0.5 * quat_multiply(quat, jnp.concatenate([jnp.zeros_like(omega[:1]), omega]))


def _normalize(quat):
    return quat / jnp.sqrt(jnp.sum(quat * quat))


class _Spherical(JointKind):
    def transform(self, q, axis, coef):
        return Transform(quat_to_matrix(q), jnp.zeros(3, q.dtype))

    def hinge_map(self, axis, coef):
        return jnp.eye(3, 6, dtype=axis.dtype)

    def configuration_rate(self, q, qd):
        return _quat_rate(q, qd)

    def integrate(self, q, qd, dt):
        return _normalize(quat_multiply(q, quat_exp(qd * dt)))

    def neutral(self):
        return np.array([1.0, 0.0, 0.0, 0.0])

    def random(self, key, lower, upper):
        return _random_unit_quaternion(key, lower.dtype)


def plane_basis(normal):
    """``B`` (3, 3), a rotation whose third column is the unit ``normal``: the smallest rotation that takes z to
    ``normal`` (for a normal with a negative z component, the one that takes z to its reflection, followed by a
    half turn about x, so that no division by ``1 + n_z`` nears zero). ``B = 1`` for the normal z, exactly.

    A planar joint moves in the plane normal to ``normal``; its coordinates ``x, y`` run along ``B``'s first two
    columns. Rodrigues' formula for the rotation about ``z x n`` by the angle between them:
    ``B = 1 + k~ + k~ k~ / (1 + c)`` with ``k = z x n``, ``c = z . n``."""
    flip = normal[2] < 0
    half_turn = jnp.array([1.0, -1.0, -1.0], normal.dtype)
    m = jnp.where(flip, half_turn * normal, normal)
    k = jnp.stack([-m[1], m[0], jnp.zeros_like(m[0])])
    kx = skew(k)
    B = jnp.eye(3, dtype=normal.dtype) + kx + mm(kx, kx) / (1.0 + m[2])
    return jnp.where(flip, half_turn[:, None] * B, B)


class _Planar(JointKind):
    """Motion in the plane through the joint frame's origin normal to the unit ``axis`` (default z): ``q = [x, y,
    theta]``, with ``x, y`` along the first two columns of ``B = plane_basis(axis)`` and ``theta`` the rotation
    about ``axis``; ``qd = [vx, vy, w]``, body-frame velocities along the same directions and about ``axis`` (the
    child frame keeps ``B``'s columns fixed, so ``H`` is constant in it). For the normal z, ``B = 1``: ``x, y`` in
    the joint frame's xy-plane and ``theta`` about z."""

    def transform(self, q, axis, coef):
        c, s, o = jnp.cos(q[2]), jnp.sin(q[2]), jnp.zeros_like(q[2])
        Rz = jnp.stack([jnp.stack([c, -s, o]), jnp.stack([s, c, o]), jnp.stack([o, o, o + 1])])
        B = plane_basis(axis)
        return Transform(mm(mm(B, Rz), B.T), q[0] * B[:, 0] + q[1] * B[:, 1])

    def hinge_map(self, axis, coef):
        # qd = [vx, vy, w]: translations along B's first two columns, rotation about the normal B[:, 2]
        B = plane_basis(axis)
        zero = jnp.zeros(3, axis.dtype)
        return jnp.stack([jnp.concatenate([zero, B[:, 0]]), jnp.concatenate([zero, B[:, 1]]),
                          jnp.concatenate([B[:, 2], zero])])

    def configuration_rate(self, q, qd):
        c, s = jnp.cos(q[2]), jnp.sin(q[2])
        return jnp.stack([c * qd[0] - s * qd[1], s * qd[0] + c * qd[1], qd[2]])

    def integrate(self, q, qd, dt):
        # exact SE(2) exponential of the constant body twist
        r = jnp.stack([jnp.zeros_like(qd[2]), jnp.zeros_like(qd[2]), qd[2] * dt])
        dp = mv(so3_left_jacobian(r), jnp.stack([qd[0], qd[1], jnp.zeros_like(qd[0])]) * dt)
        c, s = jnp.cos(q[2]), jnp.sin(q[2])
        return jnp.stack([q[0] + c * dp[0] - s * dp[1], q[1] + s * dp[0] + c * dp[1], q[2] + qd[2] * dt])


class _Free(JointKind):
    def transform(self, q, axis, coef):
        return Transform(quat_to_matrix(q[3:]), q[:3])

    def hinge_map(self, axis, coef):
        return jnp.eye(6, dtype=axis.dtype)

    def configuration_rate(self, q, qd):
        return jnp.concatenate([mv(quat_to_matrix(q[3:]), qd[3:]), _quat_rate(q[3:], qd[:3])])

    def integrate(self, q, qd, dt):
        # exact SE(3) exponential of the constant body twist [omega; v]
        w, v = qd[:3] * dt, qd[3:] * dt
        p = q[:3] + mv(quat_to_matrix(q[3:]), mv(so3_left_jacobian(w), v))
        return jnp.concatenate([p, _normalize(quat_multiply(q[3:], quat_exp(w)))])

    def neutral(self):
        return np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])

    def random(self, key, lower, upper):
        k1, k2 = jax.random.split(key)
        lo = jnp.where(jnp.isfinite(lower[:3]), lower[:3], -1.0)
        hi = jnp.where(jnp.isfinite(upper[:3]), upper[:3], 1.0)
        return jnp.concatenate([jax.random.uniform(k1, (3,), lo.dtype, lo, hi), _random_unit_quaternion(k2, lo.dtype)])


SCREW = _Screw("screw", 1, 1)
SPHERICAL = _Spherical("spherical", 4, 3)
PLANAR = _Planar("planar", 3, 3)
FREE = _Free("free", 7, 6)
KINDS = {k.name: k for k in (SCREW, SPHERICAL, PLANAR, FREE)}


# -- joint specifications for model builders ------------------------------------------------------------------


@dataclass(frozen=True)
class Joint:
    """A joint as a model builder takes it. ``kind`` is None for a fixed joint (merged into its parent)."""

    type: str
    kind: JointKind | None
    axis: tuple = (0.0, 0.0, 1.0)
    coef: tuple = (1.0, 0.0)
    lower: tuple | None = field(default=None)
    upper: tuple | None = field(default=None)


def unit_axis(axis, what):
    """``axis`` scaled to unit length, a tuple of three floats: a screw joint's axis or a planar joint's plane
    normal, which Rodrigues' formula and `plane_basis` take as unit vectors (with another length the joint
    transform is no rigid motion). A ``ValueError`` that starts with ``what`` for anything but a finite nonzero
    3-vector."""
    a = np.asarray(axis, dtype=float)
    n = np.linalg.norm(a)
    if a.shape != (3,) or not np.isfinite(n) or n < 1e-12:
        raise ValueError(f"{what} must be a nonzero 3-vector, got {axis!r}")
    return tuple(a / n)


def revolute(axis=(0.0, 0.0, 1.0), lower=None, upper=None) -> Joint:
    return Joint("revolute", SCREW, unit_axis(axis, "revolute joint axis"), (1.0, 0.0), _lim(lower), _lim(upper))


def continuous(axis=(0.0, 0.0, 1.0)) -> Joint:
    """An unlimited revolute joint with one coordinate, the angle (nq = 1; Pinocchio's ``(cos, sin)`` has nq = 2)."""
    return Joint("continuous", SCREW, unit_axis(axis, "continuous joint axis"), (1.0, 0.0))


def prismatic(axis=(0.0, 0.0, 1.0), lower=None, upper=None) -> Joint:
    return Joint("prismatic", SCREW, unit_axis(axis, "prismatic joint axis"), (0.0, 1.0), _lim(lower), _lim(upper))


def helical(axis=(0.0, 0.0, 1.0), pitch=0.0, lower=None, upper=None) -> Joint:
    """Rotation by q about ``axis`` with a translation ``pitch * q`` along it (pitch in m/rad)."""
    return Joint("helical", SCREW, unit_axis(axis, "helical joint axis"), (1.0, float(pitch)), _lim(lower), _lim(upper))


def spherical() -> Joint:
    return Joint("spherical", SPHERICAL)


def planar(normal=(0.0, 0.0, 1.0)) -> Joint:
    """Motion in the plane normal to ``normal`` (default z), ``q = [x, y, theta]`` (`plane_basis` gives the
    directions of ``x`` and ``y``; for the normal z they are the joint frame's x and y)."""
    return Joint("planar", PLANAR, unit_axis(normal, "planar joint normal"))


def free() -> Joint:
    """Six degrees of freedom, ``q = [p (3), w, x, y, z]``: the child body's position and orientation in the joint
    frame (the world only where the joint's placement is the identity), ``qd = [omega; v]`` in the body frame."""
    return Joint("free", FREE)


def fixed() -> Joint:
    return Joint("fixed", None)


def _lim(x):
    return None if x is None else (float(x),)
