"""The innovations factorization of the mass matrix and what it gives: ``M = L D L*`` with ``L = I + H phi K``,
``L^-1 = I - H psi K`` (7.14, 7.17; Lemma 9.11), ``M^-1 = L^-* D^-1 L^-1`` (7.18), ``M^-1 x`` in O(N), and
``log det M = sum_k log det D(k)`` (9.53). ``M`` includes ``diag(armature)``: the armature is in ``D(k)``.

All are built from one articulated-body sweep at zero velocity (`articulated_body`): ``P, D, G, tau_bar`` depend
on ``q`` alone. ``L`` is unit upper triangular in jaxmb's base-first numbering (the book numbers tips first, and
its ``L`` is lower triangular): ``L(i, j) = H(i) phi(i, j) G(j)`` for i an ancestor of j, the identity on the
diagonal blocks, and zero between unrelated joints.
"""

import jax.numpy as jnp
import numpy as np

from jaxmb.batching import in_cpu_chunks
from jaxmb.compilation import eager_jit
from jaxmb.dynamics.articulated import articulated_body, forward_dynamics, solve_small
from jaxmb.hinges import hinge_map, joint_poses
from jaxmb.model import check_shapes
from jaxmb.precision import full_precision
from jaxmb.rows import take_rows
from jaxmb.sweeps import ancestor_walk


def block_diagonal(topology, rows):
    """The dense (nv, nv) block-diagonal matrix whose block k has the rows ``rows[v_offset[k] : ...][:, :nv_k]``
    (the per-coordinate row storage of `ArticulatedBody.D`)."""
    same_joint = topology.dof_body[:, None] == topology.dof_body[None, :]
    return jnp.where(same_joint, rows[:, topology.dof_local], 0.0)


def block_diagonal_inverse(topology, rows):
    """The inverse of `block_diagonal` ``(topology, rows)``, (nv, nv): each joint's block ``D(k)^-1`` by one small
    solve (`solve_small`), the joints of one size together, where a dense solve would factor all of ``D``."""
    values, index, start = [], np.full((topology.nv, topology.nv), -1), 0
    for n in np.unique(topology.nv_body[topology.nv_body > 0]):
        bodies = np.flatnonzero(topology.nv_body == n)
        dofs = topology.v_offset[bodies][:, None] + np.arange(n)  # (m, n)
        blocks = take_rows(rows, dofs.reshape(-1)).reshape(len(bodies), n, 6)[..., :n]
        values.append(solve_small(blocks, jnp.broadcast_to(jnp.eye(n, dtype=rows.dtype), blocks.shape)).reshape(-1))
        index[dofs[:, :, None], dofs[:, None, :]] = start + np.arange(len(bodies) * n * n).reshape(-1, n, n)
        start += len(bodies) * n * n
    index[index < 0] = start  # the zero between joints
    return jnp.concatenate(values + [jnp.zeros(1, rows.dtype)])[index]


def _at_rest(model, q):
    zero = jnp.zeros(model.nv, model.mass.dtype)
    return articulated_body(model, q, zero, zero)


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
    ab = _at_rest(model, q)
    values = ancestor_walk(model.topology, joint_poses(model, q), hinge_map(model), ab.G)  # H(i) phi(i, j) G(j)
    values[0] = _identity_entries(model, ab.G.dtype)  # H(k) G(k) = I                              (6.14)
    return _ancestor_matrix(model, values), block_diagonal(model.topology, ab.D)


@eager_jit
def innovations_factor_inverse(model, q):
    """``L^-1 = I - H psi K`` (nv, nv) (7.17), entries ``-H(i) psi(i, parent j) K(parent j, j)``, without a solve."""
    check_shapes(model, q=q)
    return _inverse_factor(model, q, _at_rest(model, q))


def _inverse_factor(model, q, ab):
    values = ancestor_walk(model.topology, joint_poses(model, q), hinge_map(model), ab.G, tau_bar=ab.tau_bar)
    return _ancestor_matrix(model, [_identity_entries(model, ab.G.dtype)] + [-v for v in values[1:]])


@full_precision
def _mass_matrix_inverse(model, q):
    return mass_matrix_inverse_from(model, q, _at_rest(model, q))


_mass_matrix_inverse_in_chunks = in_cpu_chunks(_mass_matrix_inverse)


@eager_jit
def mass_matrix_inverse(model, q):
    """``M(q)^-1`` (nv, nv) from the factors: ``[I - H psi K]* D^-1 [I - H psi K]`` (7.18). Under ``jax.vmap`` on
    the CPU a batch is computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`): talos at batch 4096
    in float32 in 30 against 61 us/state."""
    check_shapes(model, q=q)
    return _mass_matrix_inverse_in_chunks(model, q)


def mass_matrix_inverse_from(model, q, ab):
    """`mass_matrix_inverse` from the quantities ``ab`` of an articulated-body sweep at ``q`` (any ``qd``, ``tau``:
    ``G``, ``D`` and ``tau_bar`` depend on ``q`` alone)."""
    L_inv = _inverse_factor(model, q, ab)
    return L_inv.T @ (block_diagonal_inverse(model.topology, ab.D) @ L_inv)


@eager_jit
def mass_matrix_inverse_times(model, q, x):
    """``M(q)^-1 x`` (nv,) in O(N) without forming ``M``: the articulated-body sweeps with ``x`` as the joint
    forces, at zero velocity and without gravity (with `forward_dynamics`'s derivatives). Under ``vmap`` over ``x``
    the ``q``-only sweep runs once."""
    check_shapes(model, q=q, tau=x)
    still = model.replace(gravity=jnp.zeros_like(model.gravity))
    return forward_dynamics(still, q, jnp.zeros_like(x), x)


@eager_jit
def log_det_mass_matrix(model, q):
    """``log det M(q) = sum_k log det D(k)`` (9.53): ``det L = 1``. O(N), differentiable."""
    check_shapes(model, q=q)
    return jnp.sum(_at_rest(model, q).log_det_D)
