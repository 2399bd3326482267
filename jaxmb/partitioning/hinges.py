"""The unpartitioned joints seen from a partitioned model: their hinge maps and Coriolis terms by condition (5),
the block-LDL view of their ``D(k)``, the velocity maps between the two sets of coordinates, and gimbal lock.

For a joint whose sub-hinges move the bodies ``b_1, ..., b_n`` (parent side first, ``b_n = k`` the real body, the
others massless), with ``T_j`` the pose of ``b_n`` in ``b_j`` (the product of the sub-hinges' joint poses
``j+1..n``: ``phi(b_j, b_n)``), Jain, "Partitioning of Recursive Multibody Dynamics" (2022), condition (5) reads,
in the frame of body k:

    H_bar(k) = [H(b_j) phi(b_j, k)]_j          (n, 6): row j is sub-hinge j's motion seen in body k
    a_bar(k) = sum_j phi*(b_j, k) a(b_j)        the unpartitioned Coriolis term

and the partitioned articulated-body sweep performs a block-LDL factorization of the unpartitioned
``D_bar(k) = H_bar(k) P(k) H_bar*(k)``: eliminating the sub-hinges from the tip, each scalar ``D(b_j)`` is the
Schur complement of those after it, and

    D_bar(k) = L diag(D(b_1), ..., D(b_n)) L*,   L[i, j] = H(b_i) phi(b_i, b_j) G(b_j) (i < j),  L[i, i] = 1

with ``L`` unit upper triangular in the sub-hinge order: the joint's block of the innovations factor
``[I + H phi K]`` (Jain, "Computing Inter-Body Constraint Forces in Recursive Multibody Dynamics", 2018, eq. 10).
``D_bar(k)`` is nonsingular exactly where ``H_bar(k)`` has full rank; where it loses rank the joint is locked
(`gimbal_lock`).

Results are per `jaxmb.partitioning.JointGroup` (``partition.map.groups``): a tuple with one entry per group, its
leading axis the group's m joints.
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxmb.dynamics.articulated import articulated_inertias, velocity_terms
from jaxmb.hinges import hinge_map, joint_poses
from jaxmb.spatial import Transform, compose, dot, mm, phi_star, swap


def _rows(x, index):
    return x[np.asarray(index)]


def chain_poses(partition, X):
    """Per group, ``T[i][j]`` for ``i <= j``: the pose of ``b_j`` in ``b_i`` (``phi(b_i, b_j)``), a `Transform`
    of m poses, from the partitioned model's joint poses ``X`` (nb, ...) (`jaxmb.hinges.joint_poses`)."""
    out = []
    for g in partition.map.groups:
        bodies = np.asarray(g.bodies)
        m, n = bodies.shape
        identity = Transform(jnp.broadcast_to(jnp.eye(3, dtype=X.p.dtype), (m, 3, 3)), jnp.zeros((m, 3), X.p.dtype))
        T = {}
        for j in range(n):
            T[j, j] = identity
            for i in range(j - 1, -1, -1):
                T[i, j] = compose(Transform(_rows(X.R, bodies[:, i + 1]), _rows(X.p, bodies[:, i + 1])), T[i + 1, j])
        out.append(T)
    return tuple(out)


def _hinges(partition, T, H):
    """Per group, ``H_bar`` (m, n, 6) from the chain poses ``T`` and the partitioned hinge rows ``H`` (nv, 6)."""
    out = []
    for g, Tg in zip(partition.map.groups, T):
        sub = np.asarray(g.sub)
        n = sub.shape[1]
        out.append(jnp.stack([phi_star(Tg[j, n - 1], _rows(H, sub[:, j])) for j in range(n)], 1))
    return tuple(out)


def unpartitioned_hinge_maps(partition, q):
    """``H_bar(k)`` (condition 5) of every unpartitioned joint at the partitioned configuration ``q`` (nq,): per
    group (m, n, 6), row j the motion of unit rate of sub-hinge j in the frame of the joint's body k."""
    model = partition.model
    return _hinges(partition, chain_poses(partition, joint_poses(model, q)), hinge_map(model))


def unpartitioned_coriolis(partition, q, qd):
    """``a_bar(k) = sum_j phi*(b_j, k) a(b_j)`` (condition 5; ``a(k) + phi*(k', k) a(k')`` for two sub-hinges) of
    every unpartitioned joint, from the partitioned state ``(q, qd)``: per group (m, 6), in body k's frame."""
    terms = velocity_terms(partition.model, q, qd)
    out = []
    for g, Tg in zip(partition.map.groups, chain_poses(partition, terms.X)):
        bodies = np.asarray(g.bodies)
        n = bodies.shape[1]
        out.append(sum(phi_star(Tg[j, n - 1], _rows(terms.a, bodies[:, j])) for j in range(n)))
    return tuple(out)


class BlockLDL(NamedTuple):
    """The block-LDL view of one group's unpartitioned ``D_bar(k)`` (module docstring).

    D_bar (m, n, n): ``H_bar(k) P(k) H_bar*(k)``.   L (m, n, n): unit upper triangular.   D (m, n): the sub-hinges'
    scalar ``D(b_j)``, parent side first. ``D_bar = L diag(D) L*``.
    """

    D_bar: jnp.ndarray
    L: jnp.ndarray
    D: jnp.ndarray


def block_ldl(partition, q):
    """`BlockLDL` per group at the partitioned configuration ``q`` (nq,): ``D_bar(k)`` from ``H_bar(k)``
    (condition 5) and the articulated inertia ``P(k)`` of the partitioned sweep, and the factors ``L``, ``D`` of
    the sweep's own gains ``G(b_j)`` and scalars ``D(b_j)`` (`jaxmb.articulated_inertias`)."""
    model = partition.model
    X = joint_poses(model, q)
    H = hinge_map(model)
    ai = articulated_inertias(model, q)
    T = chain_poses(partition, X)
    out = []
    for g, Tg, H_bar in zip(partition.map.groups, T, _hinges(partition, T, H)):
        bodies, sub = np.asarray(g.bodies), np.asarray(g.sub)
        m, n = sub.shape
        P = _rows(ai.P, bodies[:, -1])
        D_bar = mm(H_bar, mm(P, swap(H_bar)))
        one, zero = jnp.ones(m, q.dtype), jnp.zeros(m, q.dtype)
        L = jnp.stack([jnp.stack([one if i == j else zero if i > j else
                                  dot(phi_star(Tg[i, j], _rows(H, sub[:, i])), _rows(ai.G, sub[:, j]))
                                  for j in range(n)], -1) for i in range(n)], -2)
        out.append(BlockLDL(D_bar, L, _rows(ai.D, sub)[..., 0]))
    return tuple(out)


def default_tolerance(dtype):
    """The gimbal-lock tolerance where none is given: the square root of the dtype's machine epsilon (1.5e-8 in
    float64, 3.5e-4 in float32), the volume below which the rates' solve loses half the digits."""
    return float(np.sqrt(np.finfo(dtype).eps))


class GimbalLock(NamedTuple):
    """Per unpartitioned joint (in `PartitionMap.joints` order): ``volume`` (nj,), ``sqrt det(H_bar H_bar*)``, the
    volume spanned by its sub-hinges' unit axes as seen in its body (``|cos t2|`` for a spherical, free or gimbal
    joint, 1 for a screw or planar joint, the sine of the angle between the axes for a universal joint), and
    ``locked`` (nj,), ``volume <= tol``: ``H_bar(k)`` has (nearly) lost rank, so ``D_bar(k)`` and the first
    sub-hinge's ``D`` vanish and the rates of the joint's coordinates are unbounded."""

    volume: jnp.ndarray
    locked: jnp.ndarray


def lock_from_hinges(partition, H_bar, tol):
    """`GimbalLock` from the per-group ``H_bar`` (`unpartitioned_hinge_maps`); ``tol`` None: `default_tolerance`."""
    dtype = H_bar[0].dtype
    tol = default_tolerance(dtype) if tol is None else tol
    volume = jnp.zeros(len(partition.map.joints), dtype)
    for g, H in zip(partition.map.groups, H_bar):
        det = jnp.linalg.det(mm(H, swap(H)))
        positive = det > 0
        volume = volume.at[np.asarray(g.joints)].set(jnp.where(positive, jnp.sqrt(jnp.where(positive, det, 1.0)), 0.0))
    return GimbalLock(volume, volume <= tol)


def gimbal_lock(partition, q, tol=None) -> GimbalLock:
    """`GimbalLock` of every unpartitioned joint at the partitioned configuration ``q`` (nq,), with ``tol`` (None:
    `default_tolerance` of ``q``'s dtype). A flag, computed without dividing by anything that vanishes."""
    return lock_from_hinges(partition, unpartitioned_hinge_maps(partition, q), tol)


def velocity_maps(partition, H_bar):
    """Per group, ``S`` (m, nv, n) with ``qd_k = S qd_sub`` (the joint's velocity coordinates from its sub-hinges'
    rates): ``S = H H_bar*``, ``H`` the unpartitioned joint's constant hinge map, whose rows are orthonormal, and
    ``H_bar`` by condition (5), since both give the joint's motion ``H* qd_k = H_bar* qd_sub``. None for the
    `jaxmb.partitioning.build.IDENTITY_TYPES` (``S = 1``)."""
    return tuple(None if g.hinge is None else mm(jnp.asarray(g.hinge, Hb.dtype), swap(Hb))
                 for g, Hb in zip(partition.map.groups, H_bar))
