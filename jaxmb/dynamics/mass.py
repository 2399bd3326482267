"""Composite rigid bodies and the mass matrix (book Alg 9.2 / 9.3, (9.16)-(9.17))."""

import jax.numpy as jnp

from jaxmb.batching import in_cpu_chunks
from jaxmb.compilation import eager_jit
from jaxmb.hinges import body_inertias, hinge_map, joint_poses
from jaxmb.model import check_shapes
from jaxmb.spatial import mv, phi_congruence
from jaxmb.sweeps import ancestor_walk, up


def _composite_step(R_children, X_k, M_k):
    R = R_children + M_k  # R(k) = sum_children phi(k, j) R(j) phi*(k, j) + M(k)   (9.16)
    return phi_congruence(X_k, R), R


def _column_step(R_children, X_k, M_k, H_k):
    to_parent, R = _composite_step(R_children, X_k, M_k)
    return to_parent, (), mv(R, H_k)  # the columns R(k) H*(k) of body k's coordinates, (nv_k, 6)


@eager_jit
def composite_inertias(model, q):
    """``R(k)`` (nb, 6, 6): spatial inertia of the subtree rooted at each body, in its frame (Alg 9.2)."""
    check_shapes(model, q=q)
    X = joint_poses(model, q)
    return up(model.topology, _composite_step, jnp.zeros((6, 6), X.p.dtype), X, body_inertias(model))


def _mass_matrix(model, q):
    X = joint_poses(model, q)
    H = hinge_map(model)
    zero = jnp.zeros((6, 6), X.p.dtype)
    _, F = up(model.topology, _column_step, zero, X, body_inertias(model), dofs=(H,))  # R(k) H*(k), (nv, 6)
    values = ancestor_walk(model.topology, X, H, F)  # M(i, j) = H(i) phi(i, k) R(k) H*(k)         (9.20)
    off_diagonal = values[1:]
    v = jnp.concatenate(values + off_diagonal + [jnp.zeros(1, F.dtype)])
    M = v[model.topology.mass_matrix_index]  # a gather: XLA fuses it, where a scatter would not
    return M + jnp.diag(model.armature)


_mass_matrix_in_chunks = in_cpu_chunks(_mass_matrix)


@eager_jit
def mass_matrix(model, q):
    """The mass matrix ``M(q)`` (nv, nv) by composite rigid bodies (Alg 9.3), plus ``diag(armature)``.

    Column j starts as ``F = R(k) H*_j`` at its body k (``M(k, k) = H(k) F``) and walks to the root, one level
    per step for all columns at once: ``F <- phi(parent, k) F``, ``M(i, j) = H(i) F`` at each ancestor i. The
    composite sweep's step forms its body's columns, so the (nb, 6, 6) array of all ``R(k)`` is never kept.

    Under ``jax.vmap`` on the CPU a batch is computed in chunks with the batch last, as `forward_dynamics` is
    (`jaxmb.batching.in_cpu_chunks`): talos at batch 4096 in float32 in 11 against 27.5 us/state.
    """
    check_shapes(model, q=q)
    return _mass_matrix_in_chunks(model, q)
