"""The joint-force regressor ``tau = Y(q, qd, qdd) pi``: inverse dynamics is linear in the bodies' inertial
parameters (Atkeson, An and Hollerbach, "Estimation of inertial parameters of manipulator loads and links", 1986).

Each body has 10 standard parameters, in Pinocchio's order (``Inertia.toDynamicParameters``)::

    pi_k = [m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]

with ``c`` the centre of mass in the body frame and ``I = I_C - m c~ c~`` the rotational inertia about the body
frame's origin (the parallel-axis theorem (2.11)). The regressor is computed by the recursions of Newton-Euler,
not by differentiating inverse dynamics: a `down` sweep gives each body's velocity ``V(k)`` and acceleration
``alpha(k)`` (gravity as the world's acceleration, (5.39)), in which the body force ``M(k) alpha(k) + b(k)`` is
linear, ``f(k) = Y_k pi_k`` with the 6x10 `body_regressor` ``Y_k``; the joint forces (5.42) project the sum of
the blocks of each joint's subtree on its hinge, ``Y(i rows, j block) = H(i) phi(i, j) Y_j`` for every body j
that joint i carries, computed in world coordinates, where the sum needs no congruence: one product of the
coordinates' world hinge axes (nv, 6) with the blocks moved to the world (6, 10 nb), masked to the carried
bodies. (Carrying the blocks inward by an `up` sweep, ``F(k) = sum_children phi(k, j) F(j) + Y_k``, keeps
10 nb columns per body: O(nb^2) per state in memory, a 50-dof humanoid's state as large as its program's
cache.)

Joint-space terms have columns of their own, one per velocity coordinate (`joint_columns`): the armature
(``armature * qdd``, `jaxmb.Model.armature`), viscous friction (``f_v * qd``) and Coulomb friction (``f_c *
sign(qd)``, or ``f_c * tanh(qd / smoothing)``).

The energies are linear in the same parameters (`energy_regressors`): ``T = y_T pi``, ``U = y_U pi``, for fits
by the energy theorem that need no accelerations (Gautier and Khalil, "On the identification of the inertial
parameters of robots", 1988).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.hinges import base_acceleration, hinge_map, joint_poses
from jaxmb.kinematics import body_velocities, forward_kinematics, world_hinges
from jaxmb.model import Model, check_shapes
from jaxmb.spatial import cross3, cross_motion, mv, phi, phi_star, skew
from jaxmb.sweeps import down

N_BODY = 10
"""Standard inertial parameters per body."""


def _inertia_map(x):
    """``L(x)`` (3, 6) with ``I x = L(x) [I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]`` for a symmetric ``I``."""
    z = jnp.zeros_like(x[0])
    return jnp.stack([jnp.stack([x[0], x[1], z, x[2], z, z]),
                      jnp.stack([z, x[0], x[1], z, x[2], z]),
                      jnp.stack([z, z, z, x[0], x[1], x[2]])])


def body_regressor(V, alpha):
    """``Y_k`` (6, 10) with ``M(k) alpha + V-bar M(k) V = Y_k pi_k`` (5.42), for a body's velocity ``V`` and
    acceleration ``alpha`` (6,) in its frame, angular first. With ``V = [w; v]``, ``alpha = [w'; v']``, the
    acceleration of the origin ``a = v' + w x v`` and ``h = m c``::

        n = I w' + w x I w + h x a           f = m a + w' x h + w x (w x h)
    """
    w, v, wd, vd = V[:3], V[3:], alpha[:3], alpha[3:]
    a = vd + cross3(w, v)
    zero3, zero6 = jnp.zeros((3, 1), V.dtype), jnp.zeros((3, 6), V.dtype)
    W = skew(w)
    top = jnp.concatenate([zero3, -skew(a), _inertia_map(wd) + W @ _inertia_map(w)], 1)
    bottom = jnp.concatenate([a[:, None], skew(wd) + W @ W, zero6], 1)
    return jnp.concatenate([top, bottom], 0)


class BodyKinematics(NamedTuple):
    """A body's velocity ``V`` and acceleration ``alpha`` (6,) in its frame, as the down sweep hands them on."""

    V: jnp.ndarray
    alpha: jnp.ndarray


def _motion_step(parent, X_k, H_k, qd_k, qdd_k):
    vJ = mv(H_k.T, qd_k)  # H*(k) qd(k)
    V = phi_star(X_k, parent.V) + vJ  # V(k) = phi*(parent, k) V(parent) + H*(k) qd(k)
    a = cross_motion(V, vJ)  # a(k) = V(k) x H*(k) qd(k)
    alpha = phi_star(X_k, parent.alpha) + mv(H_k.T, qdd_k) + a  # (9.10)
    return BodyKinematics(V, alpha), ()


def _carried_columns(topo):
    """Static (nv, 10 nb) mask: True where coordinate i's joint carries the body of column block j (the
    coordinate's body is j's body or an ancestor of it)."""
    carried = np.eye(topo.nb, dtype=bool)  # carried[k, j]: body k is body j or one of its ancestors
    for j in range(topo.nb):  # breadth-first order: a parent's column is complete before its children's
        if topo.parent[j] >= 0:
            carried[:, j] |= carried[:, topo.parent[j]]
    return np.repeat(carried[topo.dof_body], N_BODY, axis=1)


def regressor(model: Model, q, qd, qdd):
    """``Y`` (nv, 10 nb) with ``inverse_dynamics(model, q, qd, qdd) = Y @ parameters(model) + armature * qdd``:
    the joint forces of every body's 10 standard parameters (module docstring), in body order.

    Args: q (nq,), qd (nv,), qdd (nv,).
    """
    check_shapes(model, q=q, qd=qd, qdd=qdd)
    topo, dtype = model.topology, model.mass.dtype
    X, H = joint_poses(model, q), hinge_map(model)
    root = BodyKinematics(jnp.zeros(6, dtype), base_acceleration(model))
    motion, _ = down(topo, _motion_step, root, X, dofs=(H, qd, qdd))
    Y_body = jax.vmap(body_regressor)(motion.V, motion.alpha)  # (nb, 6, 10)
    # The inward projection in world coordinates, where the sum over a subtree needs no congruence (9.16): each
    # block moved to the world, F_j = phi(world, j) Y_j, and projected on the world hinge axis of every
    # coordinate whose joint carries body j.
    T = forward_kinematics(model, q)
    F = jax.vmap(phi)(T, jnp.swapaxes(Y_body, 1, 2))  # (nb, 10, 6)
    rows = world_hinges(model, T) @ F.reshape(-1, 6).T  # (nv, 10 nb)
    return jnp.where(_carried_columns(topo), rows, jnp.zeros((), dtype))


def joint_columns(qd, qdd, coulomb_smoothing=0.0):
    """The joint-space columns ``[diag(qdd), diag(qd), diag(s(qd))]`` (nv, 3 nv): the forces of unit armature,
    viscous friction and Coulomb friction on each coordinate, with ``s = sign``, or ``tanh(qd /
    coulomb_smoothing)`` for a smoothing velocity > 0 (differentiable, and equal to ``sign`` away from rest)."""
    s = jnp.sign(qd) if not coulomb_smoothing else jnp.tanh(qd / coulomb_smoothing)
    return jnp.concatenate([jnp.diag(qdd), jnp.diag(qd), jnp.diag(s)], 1)


def parameters(model: Model):
    """``pi`` (10 nb,): every body's standard parameters (module docstring), in body order."""
    m, c = model.mass, model.com
    h = m[:, None] * c
    I_C = 0.5 * (model.inertia + jnp.swapaxes(model.inertia, 1, 2))
    I = I_C - m[:, None, None] * jax.vmap(lambda c: skew(c) @ skew(c))(c)  # about the origin (2.11)
    six = jnp.stack([I[:, 0, 0], I[:, 0, 1], I[:, 1, 1], I[:, 0, 2], I[:, 1, 2], I[:, 2, 2]], 1)
    return jnp.concatenate([m[:, None], h, six], 1).reshape(-1)


def with_parameters(model: Model, pi) -> Model:
    """``model`` with the bodies' mass, centre of mass and rotational inertia about it from ``pi`` (10 nb,), the
    inverse of `parameters` for bodies of positive mass."""
    p = jnp.reshape(pi, (model.nb, N_BODY))
    m, h = p[:, 0], p[:, 1:4]
    xx, xy, yy, xz, yz, zz = (p[:, 4 + i] for i in range(6))
    I = jnp.stack([jnp.stack([xx, xy, xz], -1), jnp.stack([xy, yy, yz], -1), jnp.stack([xz, yz, zz], -1)], 1)
    c = h / m[:, None]
    I_C = I + m[:, None, None] * jax.vmap(lambda c: skew(c) @ skew(c))(c)
    return model.replace(mass=m, com=c, inertia=I_C)


class EnergyRegressors(NamedTuple):
    """Rows (10 nb,) with ``kinetic_energy = T @ pi + 1/2 sum armature qd^2`` and ``potential_energy = U @ pi``."""

    T: jnp.ndarray
    U: jnp.ndarray


def energy_regressors(model: Model, q, qd) -> EnergyRegressors:
    """The energies' rows in the standard parameters. Per body, with ``V = [w; v]`` in its frame, ``R, p`` its
    pose in the world and ``h = m c``: ``T_k = 1/2 m v.v + h.(v x w) + 1/2 w.I w`` (2.14) and
    ``U_k = -m g.p - h.(R* g)``. Args: q (nq,), qd (nv,)."""
    check_shapes(model, q=q, qd=qd)
    V, T_world = body_velocities(model, q, qd), forward_kinematics(model, q)
    w, v = V[:, :3], V[:, 3:]
    quad = jnp.stack([w[:, 0] ** 2 / 2, w[:, 0] * w[:, 1], w[:, 1] ** 2 / 2, w[:, 0] * w[:, 2],
                      w[:, 1] * w[:, 2], w[:, 2] ** 2 / 2], 1)
    T = jnp.concatenate([0.5 * jnp.sum(v * v, 1)[:, None], jnp.cross(v, w), quad], 1)
    g_body = jnp.einsum("kji,j->ki", T_world.R, model.gravity)  # R* g
    U = jnp.concatenate([-(T_world.p @ model.gravity)[:, None], -g_body, jnp.zeros((model.nb, 6), V.dtype)], 1)
    return EnergyRegressors(T.reshape(-1), U.reshape(-1))
