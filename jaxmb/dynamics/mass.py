"""Composite rigid bodies and the mass matrix (book Alg 9.2 / 9.3, (9.16)-(9.20))."""

import jax.numpy as jnp

from jaxmb.batching import computed_once, eager_jit, in_cpu_chunks, take_rows
from jaxmb.hinges import body_inertias, hinge_map, joint_poses, root_joints_left_out, rotational_inertias
from jaxmb.model import check_shapes
from jaxmb.spatial import Transform, compose, cross3, mm, mv, phi_congruence, phi_star_inv, skew, swap, transform_point
from jaxmb.sweeps import down, subtree_sums, up


def _composite_step(R_children, X_k, M_k):
    R = R_children + M_k  # R(k) = sum_children phi(k, j) R(j) phi*(k, j) + M(k)   (9.16)
    return phi_congruence(X_k, R), R


@eager_jit
def composite_inertias(model, q):
    """``R(k)`` (nb, 6, 6): spatial inertia of the subtree rooted at each body, in its frame (Alg 9.2)."""
    check_shapes(model, q=q)
    X = joint_poses(model, q)
    return up(model.topology, _composite_step, jnp.zeros((6, 6), X.p.dtype), X, body_inertias(model))


def _poses_in_root_frames(model, X):
    """Pose of every body in the frame of its tree's root body, (nb) (`root_joints_left_out`)."""
    I = Transform.identity(X.p.dtype)
    return down(model.topology, compose, I, root_joints_left_out(model, X))


def _composite_in_root_frames(model, T):
    """``R(k)`` of every subtree in its root's frame, about the root's origin, as (m (nb,), h = m c (nb, 3),
    J (nb, 3, 3)): ``R = [[J, h~], [-h~, m 1]]`` (2.11). In one frame the congruences of (9.16) are identities,
    and ``R(k)`` is the plain sum of its bodies' inertias."""
    m = model.mass
    c = transform_point(T, model.com)  # centres of mass
    cx = skew(c)
    J = mm(mm(T.R, rotational_inertias(model)), swap(T.R)) - m[:, None, None] * mm(cx, cx)  # about the root's origin (2.11)
    zero = (jnp.zeros((), m.dtype), jnp.zeros(3, m.dtype), jnp.zeros((3, 3), m.dtype))
    return subtree_sums(model.topology, zero, (m, m[:, None] * c, J))


def _mass_matrix(model, q):
    topo = model.topology
    T = _poses_in_root_frames(model, joint_poses(model, q))
    m, h, J = take_rows(_composite_in_root_frames(model, T), topo.dof_body)  # R(k) of each coordinate's body
    S = phi_star_inv(take_rows(T, topo.dof_body), hinge_map(model))  # H*(k) in the root's frame, (nv, 6)
    w, v = S[:, :3], S[:, 3:]
    F = jnp.concatenate([mv(J, w) + cross3(h, v), m[:, None] * v - cross3(h, w)], -1)  # R(k) H*(k), (nv, 6)
    # M(i, j) = H(i) phi(i, k) R(k) H*(k) (9.20) = S_i . F_j, for i an ancestor-or-self coordinate of j: each
    # level's rows against the columns at its depth and deeper, one dense block per level
    blocks = [mm(S[a:b], swap(F[a:])).reshape(-1) for a, b in topo.level_coordinates]
    entries = computed_once(jnp.concatenate(blocks + [jnp.zeros(1, F.dtype)]))  # not recomputed per mirrored entry
    return entries[topo.mass_matrix_index] + jnp.diag(model.armature)  # a gather, which XLA fuses; a scatter not


_mass_matrix_in_chunks = in_cpu_chunks(_mass_matrix)


@eager_jit
def mass_matrix(model, q):
    """The mass matrix ``M(q)`` (nv, nv) by composite rigid bodies (Alg 9.3), plus ``diag(armature)``.

    Computed in the frame of each tree's root body, where the composite inertia ``R(k)`` of (9.16) is the sum of
    its bodies' inertias and ``M(i, j) = S_i . R(k) S_j`` for the coordinates' hinge axes ``S = H*`` in that frame
    (i an ancestor-or-self coordinate of j, k the body of j): a `down` sweep of poses, an `up` sweep of sums, and
    one dense product per level, ``S[level] F[level:]*``, with no column walked up the tree. The root's frame
    rather than the world's keeps the lever arms the size of the robot wherever its base stands.

    Under ``jax.vmap`` on the CPU a batch is computed in chunks with the batch last, as `forward_dynamics` is
    (`jaxmb.batching.in_cpu_chunks`).
    """
    check_shapes(model, q=q)
    return _mass_matrix_in_chunks(model, q)
