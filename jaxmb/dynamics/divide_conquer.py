"""Divide-and-conquer forward dynamics of a serial chain in O(log n) sequential depth (book 10.4, Lemma 10.6,
Alg 10.6; Featherstone's DCA).

Every subsystem, a run of consecutive bodies, is written in compliance form at two handles, 1 on its first body
(the inboard joint) and 2 on its last body (the outboard joint), each in the frame of its body (10.46)::

    [beta_dot_1]   [Lambda_11   Lambda_12] [f_1]   [C_1]
    [beta_dot_2] = [Lambda_12*  Lambda_22] [f_2] + [C_2]

``f_h`` is the spatial force applied at handle h, ``beta_dot_h`` the handle's spatial acceleration, with the
Coriolis term ``a(k)`` of the inboard joint taken out of ``beta_dot_1`` so that a joint reads
``beta_dot_1(B) - phi*(X) beta_dot_2(A) = H*(k) qdd(k)`` (10.47). A leaf is one body: every block is
``M(k)^-1``, ``C_2 = -M(k)^-1 b(k)`` (``b`` the gyroscopic force less ``f_ext``) and ``C_1 = C_2 - a(k)``.

Assembly (10.48): the pair (A, B) joined by the joint of B's first body k, whose pose in A's last body is X.
With A's handle 2 moved to B's handle 1, ``K = phi* Lambda_22(A) phi + Lambda_11(B)`` (the book's
``Lambda_22^A + Lambda_22^B``) and ``E = H K^-1 H* + diag(armature(k))``, the joint force on B is
``f = -W r + K^-1 H* E^-1 T(k)`` with ``W = K^-1 - K^-1 H* E^-1 H K^-1`` and the handle mismatch
``r = C_1(B) - C_2(A) + Lambda_12(B) f_2(B) - Lambda_21(A) f_1(A)``; the armature enters through ``E``. The
combined subsystem keeps A's handle 1 and B's handle 2. The chain is joined to the world last (10.53): the world
has no compliance and the acceleration ``alpha(world) = [0; -g]``, so gravity enters as in the AB algorithm.
Back-substitution (book (A.16)) runs the levels in reverse: each joint, knowing its
subsystem's handle forces, finds ``qdd(k)`` and its force ``f`` and hands ``(f_1, -phi f)`` to A and
``(f, f_2)`` to B.

Depth: a chain of n bodies takes ceil(log2 n) assembly levels, each one `vmap` over all its pairs (an odd
subsystem out passes through), one ground connection, and as many back-substitution levels; the world poses and
velocities are prefix scans (`jax.lax.associative_scan`), also of depth O(log n). The work is O(n), a larger
constant than the AB algorithm's (benchmarks/README.md). Requires every body to have a positive definite
spatial inertia (a massless body gives non-finite accelerations); multi-dof joints of one level are padded to the
level's largest joint with unit-armature dummy coordinates, which take zero acceleration.
"""

from functools import lru_cache
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import eager_jit, take_rows
from jaxmb.dynamics.ab_steps import solve_small
from jaxmb.hinges import (
    base_acceleration,
    body_inertias,
    hinge_map,
    hinge_motion,
    joint_poses,
)
from jaxmb.model import check_shapes
from jaxmb.spatial import (
    compose,
    cross_force,
    cross_motion,
    mm,
    mv,
    phi,
    phi_star,
    phi_star_inv,
    skew,
    swap,
)


class _Level(NamedTuple):
    """One assembly level: subsystems ``2i`` and ``2i + 1`` join for i < pairs; an odd last one passes through.
    joints (pairs,): the body whose inboard joint joins each pair; dofs (pairs, nv_max): its coordinates, padded
    with ``nv`` (a dummy coordinate)."""

    pairs: int
    joints: np.ndarray
    dofs: np.ndarray


class _Plan(NamedTuple):
    levels: tuple
    order: np.ndarray  # qdd[j] = concatenated back-substitution outputs[order[j]]


@lru_cache(maxsize=64)
def _plan(topo, body_names):
    """The static assembly schedule of a chain; ValueError naming a body with two children otherwise."""
    children = np.bincount(topo.parent + 1, minlength=topo.nb + 1)
    if children[0] > 1:
        roots = [body_names[i] for i in np.flatnonzero(topo.parent < 0)]
        raise ValueError(f"forward_dynamics_dc needs a serial chain, but the world has {children[0]} children "
                         f"{roots}")
    if topo.nb and children[1:].max() > 1:
        k = int(np.argmax(children[1:]))
        kids = [body_names[i] for i in np.flatnonzero(topo.parent == k)]
        raise ValueError(f"forward_dynamics_dc needs a serial chain, but body {body_names[k]!r} has "
                         f"{children[k + 1]} children {kids}")
    first = np.arange(topo.nb)  # first body of each subsystem; breadth-first numbering of a chain: parent[k] = k - 1
    levels = []
    while len(first) > 1:
        pairs = len(first) // 2
        joints = first[1 : 2 * pairs : 2]
        dofs = np.full((pairs, topo.nv_body[joints].max()), topo.nv)
        for i, k in enumerate(joints):
            dofs[i, : topo.nv_body[k]] = topo.v_offset[k] + np.arange(topo.nv_body[k])
        levels.append(_Level(pairs, joints, dofs))
        first = np.concatenate([first[0 : 2 * pairs : 2], first[2 * pairs :]])
    outputs = np.concatenate([np.arange(topo.nv_body[0])] + [lvl.dofs.reshape(-1) for lvl in reversed(levels)])
    return _Plan(tuple(levels), np.argsort(outputs, kind="stable")[: topo.nv])


def _inertia_inverse(mass, com, I_c):
    """``M^-1`` (6, 6) of a body about its origin, from ``M = phi(c) diag(I_c, m) phi*(c)`` (2.11), with
    ``J = I_c^-1``: ``[[J, -J c~], [c~ J, 1/m - c~ J c~]]``. No 6x6 inversion, so no loss to a far centre of mass."""
    J = solve_small(I_c, jnp.eye(3, dtype=I_c.dtype))
    cx = skew(com)
    Jc = mm(J, cx)
    top = jnp.concatenate([J, -Jc], -1)
    bottom = jnp.concatenate([-swap(Jc), jnp.eye(3, dtype=J.dtype) / mass - mm(cx, Jc)], -1)
    return jnp.concatenate([top, bottom], -2)


def _chain_terms(model, q, qd, f_ext):
    """Joint poses ``X``, hinge map ``H`` (nv, 6), Coriolis terms ``a`` and gyroscopic forces ``b`` (less
    ``f_ext``) (nb, 6) in body coordinates, with the velocities from world-frame prefix scans (depth O(log n))."""
    X = joint_poses(model, q)
    H = hinge_map(model)
    vJ = hinge_motion(model, H, qd)  # H*(k) qd(k)
    T = jax.lax.associative_scan(compose, X)  # world pose of body k: X(0) X(1) ... X(k)
    V = phi_star(T, jnp.cumsum(phi_star_inv(T, vJ), 0))  # V(k) = sum_{j <= k} phi^-*(world, j) H*(j) qd(j)
    a = cross_motion(V, vJ)  # a(k) = V(k) x H*(k) qd(k)
    b = cross_force(V, mv(body_inertias(model), V))  # b(k) = V-bar(k) M(k) V(k)
    return X, H, a, b if f_ext is None else b - f_ext


def _hinge(K, H, armature):
    """The joint between two handles whose compliances add to ``K`` (6, 6), with hinge map ``H`` (p, 6) and
    ``armature`` (p,): ``K^-1`` (6, 6), ``G = K^-1 H*`` (6, p) and ``E^-1`` (p, p)."""
    Kinv = solve_small(K, jnp.eye(6, dtype=K.dtype))
    G = mm(Kinv, H.T)
    Einv = solve_small(mm(H, G) + jnp.diag(armature), jnp.eye(H.shape[0], dtype=K.dtype))  # E = H K^-1 H* + A
    return Kinv, G, Einv


def _joint_solve(Kinv, G, Einv, r, T):
    """``qdd`` and the joint force ``f`` of a joint with handle mismatch ``r``: ``K f + r = H* qdd`` (10.47) and
    ``H f = T - diag(armature) qdd`` (10.50, the rotor taking its share of ``T``)."""
    qdd = mv(Einv, T + mv(swap(G), r))  # (H K^-1 H* + A) qdd = T + H K^-1 r
    return qdd, mv(G, qdd) - mv(Kinv, r)  # f = K^-1 (H* qdd - r)


class Handles(NamedTuple):
    """A subchain's two-handle operational-space quantities (10.46): the compliances ``Lambda_11``, ``Lambda_12``,
    ``Lambda_22`` (6, 6) between its first body (handle 1) and its last (handle 2), and the free accelerations
    ``C_1``, ``C_2`` (6,) of its handles, each in its handle's coordinates."""

    L11: jnp.ndarray
    L12: jnp.ndarray
    L22: jnp.ndarray
    C1: jnp.ndarray
    C2: jnp.ndarray


class PairFactors(NamedTuple):
    """What `_assemble` keeps of one pair for `_back`: ``Lambda_12`` of A moved to B's handle-1 frame and
    ``Lambda_12`` of B (6, 6), the joint's ``K^-1`` (6, 6), ``G = K^-1 H*`` (6, p), ``E^-1`` (p, p) (`_hinge`) and the
    handle mismatch ``r0`` (6,) at zero handle forces."""

    A12: jnp.ndarray
    B12: jnp.ndarray
    Kinv: jnp.ndarray
    G: jnp.ndarray
    Einv: jnp.ndarray
    r0: jnp.ndarray


def _assemble(A, B, X, H, armature, T):
    """Lemma 10.6 for one pair: A's last body joined to B's first body by the joint of pose ``X``; ``A``, ``B``
    `Handles`. Returns the joined subchain's `Handles` and the pair's `PairFactors`."""
    A11, A12, A22, a1, a2 = A
    B11, B12, B22, b1, b2 = B
    A12 = phi_star(X, A12)  # Lambda_12(A) phi(X): A's handle 2 in B's handle-1 frame   (10.16)
    A22 = phi_star(X, swap(phi_star(X, A22)))  # phi*(X) Lambda_22(A) phi(X)
    a2 = phi_star(X, a2)  # phi*(X) C_2(A)
    # W = P* [P K P*]^-1 P (10.48) without the complement P of H*: W = K^-1 - K^-1 H* E^-1 H K^-1. K is positive
    # definite (a sum of compliances of free-floating bodies), so both solves are SPD; no P has to be chosen from H
    # (a data-dependent, non-smooth choice), and the armature enters E, which the P form cannot carry.
    r0 = b1 - a2  # r = C_1(B) - C_2(A) + Lambda_12(B) f_2 - Lambda_21(A) f_1
    Kinv, G, Einv = _hinge(A22 + B11, H, armature)  # K = Lambda_22(A) + Lambda_11(B)
    f0 = _joint_solve(Kinv, G, Einv, r0, T)[1]  # the joint force at zero handle forces
    W = Kinv - mm(mm(G, Einv), swap(G))
    AW = mm(A12, W)
    C11 = A11 - mm(AW, swap(A12))  # Lambda_11(C) = Lambda_11(A) - Lambda_12(A) W Lambda_21(A)   (10.48)
    C12 = mm(AW, B12)  # Lambda_12(C) = Lambda_12(A) W Lambda_12(B)
    C22 = B22 - mm(swap(B12), mm(W, B12))  # Lambda_22(C) = Lambda_22(B) - Lambda_21(B) W Lambda_12(B)
    c1 = a1 - mv(A12, f0)  # C_1(C) = C_1(A) - Lambda_12(A) f0     (10.48)
    c2 = b2 + mv(swap(B12), f0)  # C_2(C) = C_2(B) + Lambda_21(B) f0
    return (Handles(L11=C11, L12=C12, L22=C22, C1=c1, C2=c2),
            PairFactors(A12=A12, B12=B12, Kinv=Kinv, G=G, Einv=Einv, r0=r0))


def _back(F1, F2, X, saved, T):
    """Back-substitution for one pair: the joint's ``qdd`` and the handle-2 force on A, the handle-1 force on B."""
    A12, B12, Kinv, G, Einv, r0 = saved
    r = r0 + mv(B12, F2) - mv(swap(A12), F1)
    qdd, f = _joint_solve(Kinv, G, Einv, r, T)
    return qdd, -phi(X, f), f  # f_2(A) = -phi(X) f, f_1(B) = f


def _join(merged, sub, n):
    """The merged pairs, then the subsystem that passed through (if any) of ``sub`` (2n or 2n + 1 rows)."""
    return jax.tree.map(lambda m, x: jnp.concatenate([m, x[2 * n :]]), merged, sub)


def _per_dof(x, lvl):
    """Rows of a per-coordinate array (nv + 1, ...) for each joint of a level: (pairs, nv_max, ...)."""
    return take_rows(x, lvl.dofs.reshape(-1)).reshape(lvl.dofs.shape + x.shape[1:])


def _pairs(x, n):
    return jax.tree.map(lambda y: y[0 : 2 * n : 2], x), jax.tree.map(lambda y: y[1 : 2 * n : 2], x)


def _interleave(a, b, rest):
    return jnp.concatenate([jnp.stack([a, b], 1).reshape((-1,) + a.shape[1:]), rest])


@eager_jit
def forward_dynamics_dc(model, q, qd, tau, f_ext=None):
    """Joint accelerations ``qdd`` (nv,) of a serial chain by divide and conquer (Alg 10.6), equal to
    `jaxmb.forward_dynamics` (armature included) in O(log n) sequential depth.

    Args: q (nq,), qd (nv,), tau (nv,), f_ext (nb, 6) or None (body coordinates, about the body origins).
    Raises ValueError (at trace time) unless every body, and the world, has at most one child.
    """
    check_shapes(model, q=q, qd=qd, tau=tau, f_ext=f_ext)
    if not model.nb:
        return jnp.zeros(0, model.mass.dtype)  # no joint to accelerate
    plan = _plan(model.topology, model.body_names)
    X, H, a, b = _chain_terms(model, q, qd, f_ext)
    Y = jax.vmap(_inertia_inverse)(model.mass, model.com, model.inertia)  # leaves: Lambda = M^-1
    c = -mv(Y, b)  # the free acceleration M^-1 (f_ext - b)
    sub = Handles(L11=Y, L12=Y, L22=Y, C1=c - a, C2=c)  # the handles of each body   (10.46)
    dtype = Y.dtype
    H_pad = jnp.concatenate([H, jnp.zeros((1, 6), dtype)])
    A_pad = jnp.concatenate([model.armature, jnp.ones(1, dtype)])
    T_pad = jnp.concatenate([tau, jnp.zeros(1, dtype)])

    saved = []
    for lvl in plan.levels:  # assembly, one vmap per level
        A, B = _pairs(sub, lvl.pairs)
        X_l = take_rows(X, lvl.joints)
        merged, s = jax.vmap(_assemble)(A, B, X_l, _per_dof(H_pad, lvl), _per_dof(A_pad, lvl), _per_dof(T_pad, lvl))
        sub = _join(merged, sub, lvl.pairs)
        saved.append((X_l, s))

    # ground connection (10.53): K = Lambda_11 of the chain, C_2(world) = phi*(X(0)) alpha(world)
    n0 = model.topology.nv_body[0]
    X0 = jax.tree.map(lambda x: x[0], X)
    r0 = sub.C1[0] - phi_star(X0, base_acceleration(model))
    qdd0, f0 = _joint_solve(*_hinge(sub.L11[0], H[:n0], model.armature[:n0]), r0, tau[:n0])  # the tip: f_2 = 0

    F1, F2 = f0[None], jnp.zeros((1, 6), dtype)  # handle forces of the whole chain
    qdds = [qdd0]
    for lvl, (X_l, s) in zip(reversed(plan.levels), reversed(saved)):  # back-substitution, one vmap per level
        n = lvl.pairs
        qdd, fA2, fB1 = jax.vmap(_back)(F1[:n], F2[:n], X_l, s, _per_dof(T_pad, lvl))
        F1, F2 = _interleave(F1[:n], fB1, F1[n:]), _interleave(fA2, F2[:n], F2[n:])
        qdds.append(qdd.reshape(-1))
    return take_rows(jnp.concatenate(qdds), plan.order)
