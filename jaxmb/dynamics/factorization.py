"""The innovations factorization of the mass matrix and what it gives: ``M = L D L*`` with ``L = I + H phi K``,
``L^-1 = I - H psi K`` (7.14, 7.17; Lemma 9.11), ``M^-1 = L^-* D^-1 L^-1`` (7.18), ``M^-1 x`` in O(N), and
``log det M = sum_k log det D(k)`` (9.53). ``M`` includes ``diag(armature)``: the armature is in ``D(k)``.

All are built from the articulated inertias and gains ``P, D, G``, which depend on ``q`` alone
(`articulated_inertias`: pass 1 of the articulated-body algorithm without its residual forces). ``L`` is unit
upper triangular in jaxmb's base-first numbering (the book numbers tips first, and its ``L`` is lower triangular):
``L(i, j) = H(i) phi(i, j) G(j)`` for i an ancestor of j, the identity on the diagonal blocks, and zero between
unrelated joints.
"""

from functools import cache, reduce

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import (
    eager_jit,
    full_precision,
    in_cpu_chunks,
    live_tangents,
    of_live,
    take_rows,
    vmap_in_cpu_chunks,
)
from jaxmb.dynamics.ab_steps import solve_small
from jaxmb.dynamics.articulated import articulated_inertias, forward_dynamics, solve_factored
from jaxmb.hinges import hinge_map, joint_poses
from jaxmb.model import check_shapes
from jaxmb.sweeps import ancestor_walk


def block_diagonal(topology, rows):
    """The dense (nv, nv) block-diagonal matrix whose block k has the rows ``rows[v_offset[k] : ...][:, :nv_k]``
    (the per-coordinate row storage of `ArticulatedBody.D`)."""
    same_joint = topology.dof_body[:, None] == topology.dof_body[None, :]
    return jnp.where(same_joint, rows[:, topology.dof_local], 0.0)


def _ancestor_matrix(model, values):
    """Assemble walk entries (diagonal-block step first) as a dense (nv, nv) matrix, zero between unrelated joints."""
    return jnp.concatenate(values + [jnp.zeros(1, values[0].dtype)])[model.topology.ancestor_index]


def _identity_entries(model, dtype):
    w = model.topology.ancestor_walk[0]
    return jnp.asarray(w.rows == w.cols, dtype)


@eager_jit
def innovations_factors(model, q):
    """``(L, D)``, both (nv, nv), with ``M(q) = L D L*``: ``L = I + H phi K`` (7.14) and
    ``D = diag{H P H* + diag(armature)}``."""
    check_shapes(model, q=q)
    ab = articulated_inertias(model, q)
    values = ancestor_walk(model.topology, joint_poses(model, q), hinge_map(model), ab.G)  # H(i) phi(i, j) G(j)
    values[0] = _identity_entries(model, ab.G.dtype)  # H(k) G(k) = I                              (6.14)
    return _ancestor_matrix(model, values), block_diagonal(model.topology, ab.D)


@eager_jit
def innovations_factor_inverse(model, q):
    """``L^-1 = I - H psi K`` (nv, nv) (7.17), entries ``-H(i) psi(i, parent j) K(parent j, j)``, without a solve."""
    check_shapes(model, q=q)
    return _inverse_factor(model, q, articulated_inertias(model, q))


def _inverse_factor(model, q, ab):
    values = ancestor_walk(model.topology, joint_poses(model, q), hinge_map(model), ab.G, G=ab.G)
    return _ancestor_matrix(model, [_identity_entries(model, ab.G.dtype)] + [-v for v in values[1:]])


@full_precision
def _mass_matrix_inverse(model, q):
    return mass_matrix_inverse_from(model, q, articulated_inertias(model, q))


_mass_matrix_inverse_in_chunks = in_cpu_chunks(_mass_matrix_inverse)


@eager_jit
def mass_matrix_inverse(model, q):
    """``M(q)^-1`` (nv, nv) from the factors: ``[I - H psi K]* D^-1 [I - H psi K]`` (7.18). Under ``jax.vmap`` on
    the CPU a batch is computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`; benchmarks/findings.md,
    "Batch last")."""
    check_shapes(model, q=q)
    return _mass_matrix_inverse_in_chunks(model, q)


def mass_matrix_inverse_from(model, q, ab):
    """`mass_matrix_inverse` from the quantities ``ab`` of an articulated-body sweep at ``q`` (any ``qd``, ``tau``:
    ``G`` and ``D`` depend on ``q`` alone)."""
    L_inv = _inverse_factor(model, q, ab)
    return _common_ancestor_product(model.topology, L_inv, _block_rows_solve(model.topology, ab.D, L_inv))


def _block_rows_solve(topology, rows, A):
    """``D^-1 A`` (nv, c) for the block-diagonal ``D`` stored as `block_diagonal`'s ``rows``: each joint's rows
    of ``A`` solved with its block (`solve_small`), the joints of one size together."""
    parts, order = [], []
    for n in np.unique(topology.nv_body[topology.nv_body > 0]):
        bodies = np.flatnonzero(topology.nv_body == n)
        dofs = (topology.v_offset[bodies][:, None] + np.arange(n)).reshape(-1)
        blocks = take_rows(rows, dofs).reshape(len(bodies), n, 6)[..., :n]
        parts.append(solve_small(blocks, take_rows(A, dofs).reshape(len(bodies), n, -1)).reshape(len(dofs), -1))
        order.append(dofs)
    if not parts:  # no coordinates
        return A
    return take_rows(jnp.concatenate(parts), np.argsort(np.concatenate(order)))


def _common_ancestor_product(topology, A, B):
    """``A* B`` (nv, nv) for ``A``, ``B`` (nv, nv) zero outside the pattern of ``L^-1`` (row i nonzero only in the
    columns of i's joint and its descendants), when ``A* B`` is symmetric.

    Entry (a, b) sums ``A(k, a) B(k, b)`` over the coordinates k common to the ancestors-or-self of a and b (none
    for two limbs of a fixed base): on a tree with many limbs, such as talos, far fewer products than the dense
    ``nv^3``, whose batch of nv x nv products costs XLA's CPU as much as the rest of ``M^-1``. The upper entries
    with the same number of terms form a group: a gather of their terms and a sum of slices; the groups' values
    are then mirrored into the matrix. Fewer, padded groups ran slower. Gathers cost more than the products they
    save on small trees and chains, which take the dense product (`SPARSITY`), and so does every backend but the
    CPU: a GPU runs batched small products well and gathers badly (benchmarks/findings.md, "The mass-matrix inverse
    over common ancestors")."""
    terms = _common_ancestor_terms(topology)
    if terms is None or jax.default_backend() != "cpu":
        return A.T @ B
    groups, index = terms
    A, B = A.reshape(-1), B.reshape(-1)
    values = []
    for ka, kb in groups:
        products = take_rows(A, ka.reshape(-1)).reshape(ka.shape) * take_rows(B, kb.reshape(-1)).reshape(kb.shape)
        sums = [products[:, t] for t in range(ka.shape[1])]
        values.append(reduce(jnp.add, sums) if sums else jnp.zeros(len(ka), A.dtype))  # 0: unrelated
    return jnp.concatenate(values)[index]


SPARSITY = 8
"""`_common_ancestor_product` gathers its terms where they are fewer than ``nv^3 / SPARSITY``, the dense product's
(a tree of many limbs such as talos gathers; a chain, whose terms are about a sixth of ``nv^3``, and small
trees such as panda and go1 take the dense product)."""


@cache
def _common_ancestor_terms(topology):
    """The static terms of `_common_ancestor_product`: ``groups``, per group of upper entries (a <= b) with ``c``
    terms ``(ka, kb)``, the flat indices ``k nv + a`` and ``k nv + b`` of their terms, both (entries, c); and
    ``index`` (nv, nv), where entry (a, b) and its mirror sit in the groups' concatenated values. None where the
    terms are too many (`SPARSITY`). Once per topology."""
    nv = topology.nv
    ancestors = topology.support[topology.dof_body]  # (nv, nv): coordinate k moves coordinate a's body
    a, b = np.triu_indices(nv)
    common = ancestors[a] & ancestors[b]
    counts = common.sum(1)
    if not nv or SPARSITY * counts.sum() > nv**3:
        return None
    groups, position = [], []
    for c in np.unique(counts):
        entries = np.flatnonzero(counts == c)
        k = np.stack([np.flatnonzero(common[e]) for e in entries])
        groups.append((k * nv + a[entries, None], k * nv + b[entries, None]))
        position.append(entries)
    index = np.empty((nv, nv), int)
    index[a, b] = index[b, a] = np.argsort(np.concatenate(position))
    return groups, index


def _inverse_times_by_factors(model, q, x):
    ab = articulated_inertias(model, q)
    return solve_factored(model, joint_poses(model, q), hinge_map(model), ab.G, ab.D, x)[0]


_inverse_times_batched = vmap_in_cpu_chunks(_inverse_times_by_factors)


@jax.custom_jvp
def _inverse_times(model, q, x):
    return _inverse_times_batched(model, q, x)


def _at_rest_without_gravity(model, q, x):
    """`forward_dynamics` at rest without gravity: its ``qdd`` is ``M^-1 x``."""
    still = model.replace(gravity=jnp.zeros_like(model.gravity))
    return forward_dynamics(still, q, jnp.zeros_like(x), x)


def _inverse_times_jvp(primals, tangents):
    """The derivatives of `_at_rest_without_gravity`, by the implicit function theorem on Newton-Euler; autodiff
    through the factors' sweeps is slower (benchmarks/findings.md, "Gradients by the implicit function theorem")."""
    live, dots = live_tangents(primals, tangents)
    if not live:
        y = _inverse_times(*primals)
        return y, jnp.zeros_like(y)
    return jax.jvp(*of_live(_at_rest_without_gravity, primals, live), dots)


_inverse_times.defjvp(_inverse_times_jvp, symbolic_zeros=True)


@eager_jit
def mass_matrix_inverse_times(model, q, x):
    """``M(q)^-1 x`` (nv,) in O(N) without forming ``M``: the factors ``G, D`` of ``q`` (`articulated_inertias`),
    then ``[I - H psi K]* D^-1 [I - H psi K] x`` (7.18) by an up and a down sweep of vectors (`solve_factored`);
    its derivatives are `forward_dynamics`'s at rest. Under ``vmap`` over ``x`` the ``q``-only sweep runs once;
    on the CPU a batch is computed in chunks with the batch last (`jaxmb.batching.vmap_in_cpu_chunks`)."""
    check_shapes(model, q=q, tau=x)
    return _inverse_times(model, q, x)


_log_det_in_chunks = in_cpu_chunks(lambda model, q: jnp.sum(articulated_inertias(model, q).log_det_D))


@eager_jit
def log_det_mass_matrix(model, q):
    """``log det M(q) = sum_k log det D(k)`` (9.53): ``det L = 1``. O(N), differentiable. Under ``jax.vmap`` on the
    CPU a batch is computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`)."""
    check_shapes(model, q=q)
    return _log_det_in_chunks(model, q)
