"""Analytic derivatives of the dynamics: the whole Jacobians ``d tau/d q``, ``d tau/d qd`` of Newton-Euler and
``d qdd/d q``, ``d qdd/d qd``, ``d qdd/d tau`` of the forward dynamics, in one pass each instead of one tangent
sweep per column.

Derivatives in ``q`` are taken along the manifold, as `jaxmb.integrate` moves: column j is
``d/ds f(integrate(q, e_j, s))`` at ``s = 0``, an (nv, nv) matrix even where nq > nv (the free and spherical
joints' quaternions). That is Pinocchio's convention for ``computeRNEADerivatives`` and ``computeABADerivatives``.

The recursion (after Carpentier and Mansard's analytic RNEA derivatives, written for the level schedule) works in
one fixed frame for all bodies, where moving one joint moves its whole subtree rigidly. Each entry is a dot product
of a motion and a force, the same in any fixed frame. We take the frame in which each tree's root body is at ``q``,
about its origin (`jaxmb.hinges.root_joints_left_out`), not the world's. In the world's frame, float32 lost
everything 1 km from the origin: ``d qdd/d q`` was off by many times its own size for go1 and talos, because
lever arms of 1e3 m cancelled to the robot's size (benchmarks/findings.md, "Derivatives"). With ``S_j`` the hinge axis of coordinate j (6,), ``V``, ``A`` the velocity and
acceleration of a body (``A`` with the world's gravity pseudo-acceleration, as in Newton-Euler), all in that frame,
and ``p`` the parent of coordinate j's body (for a root, the world: ``V_p = 0``, ``A_p`` gravity's):

* a step ``s S_j`` of coordinate j turns the subtree by the screw ``s S_j``; every body-fixed quantity turns with it
  (motions by ``S_j x``, forces by ``S_j x*``, inertias by congruence). What does not turn rigidly is
  ``u_j = V_p x S_j`` in the subtree's velocities and ``w_j + u_j x V_k`` in its accelerations, with
  ``w_j = A_p x S_j + V_p x u_j``;
* a body's force ``f_k = I_k A_k + V_k x* I_k V_k - f_ext`` then changes, beyond the rigid turn, by
  ``I_k w_j + B_k u_j``, where ``B_k x = V_k x* I_k x - I_k (V_k x x) + x x* (I_k V_k)``;
* a change ``s`` of ``qd_j`` changes the subtree's velocities by ``S_j s`` and its accelerations by
  ``(dA_j - V_k x S_j) s``, with ``dA_j = (V_b + V_p) x S_j`` (b: j's own body), so forces by
  ``(I_k dA_j + B_k S_j) s``.

Summed over a subtree (composite ``Ic``, ``Bc``, ``Fc``, one `up` sweep with no change of frame), the entry of
row i (``tau_i = S_i . Fc_{body i}``) and column j is, for body i a strict ancestor of body j (the rigid turn of
the subtree's force counts, ``S_i`` does not turn)::

    d tau_i / d q_j  = S_i . (Ic_j w_j + Bc_j u_j + S_j x* Fc_j)
    d tau_i / d qd_j = S_i . (Ic_j dA_j + Bc_j S_j)

and for body i in the subtree of body j, itself included (``S_i`` turns with the force, the turns cancel)::

    d tau_i / d q_j  = (Ic_i S_i) . w_j + (Bc_i* S_i) . u_j
    d tau_i / d qd_j = (Ic_i S_i) . dA_j + (Bc_i* S_i) . S_j

Every entry is one dot product of 6-vectors gathered by a static map of (row, column) pairs, so nothing
walks the tree but the two sweeps. ``d tau/d qdd`` is the mass matrix (``S_i . Ic S_j``), armature included.
The forward dynamics follows from ``ID(q, qd, FD(q, qd, tau)) = tau``: ``d qdd = -M^-1 d ID``, ``d qdd/d tau =
M^-1``. `tests/test_derivatives.py` checks both against autodiff through `jaxmb.integrate` and against Pinocchio.
"""

import functools
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxmb.batching import eager_jit, full_precision, in_cpu_chunks, take_rows
from jaxmb.dynamics.articulated import articulated_body
from jaxmb.dynamics.factorization import mass_matrix_inverse_from
from jaxmb.dynamics.inverse import motion_step
from jaxmb.hinges import base_acceleration, body_inertias, hinge_map, joint_poses, root_joints_left_out
from jaxmb.model import check_shapes
from jaxmb.spatial import (
    Transform,
    compose,
    cross_force,
    cross_motion,
    dot,
    mv,
    phi,
    phi_congruence,
    phi_star,
    phi_star_inv,
    swap,
)
from jaxmb.sweeps import down, subtree_sums


class InverseDynamicsDerivatives(NamedTuple):
    """Newton-Euler and its Jacobians at one state: tau (nv,); dtau_dq, dtau_dqd, M (nv, nv), with
    ``M = d tau/d qdd`` the mass matrix (armature included). Columns in ``q`` are tangent directions."""

    tau: jnp.ndarray
    dtau_dq: jnp.ndarray
    dtau_dqd: jnp.ndarray
    M: jnp.ndarray


class ForwardDynamicsDerivatives(NamedTuple):
    """The forward dynamics and its Jacobians at one state: qdd (nv,); dqdd_dq, dqdd_dqd, dqdd_dtau (nv, nv), with
    ``dqdd_dtau = M^-1``. Columns in ``q`` are tangent directions."""

    qdd: jnp.ndarray
    dqdd_dq: jnp.ndarray
    dqdd_dqd: jnp.ndarray
    dqdd_dtau: jnp.ndarray


@functools.cache
def _pairs(topo):
    """The static (row, column) pairs of the nonzero entries and the (nv, nv) map into them: first the pairs whose
    row body is a strict ancestor of the column body, then those whose row body is in the column body's subtree
    (itself included); index ``len(pairs)`` is the zero of unrelated coordinates. Once per topology."""
    body = topo.dof_body
    r, c = np.meshgrid(np.arange(topo.nv), np.arange(topo.nv), indexing="ij")
    above = topo.support[body[c], r] & (body[r] != body[c])  # body(r) a strict ancestor of body(c)
    below = topo.support[body[r], c]  # body(c) an ancestor-or-self of body(r)
    rows = np.concatenate([r[above], r[below]])
    cols = np.concatenate([c[above], c[below]])
    index = np.full((topo.nv, topo.nv), len(rows))
    index[rows, cols] = np.arange(len(rows))
    return int(above.sum()), rows, cols, index


def _root_frame_step(parent, X_k, Xr_k, *args_k):
    """Newton-Euler's motion step (body-frame ``V``, ``alpha``, ``f``), with body k's pose in its root's frame
    (``Xr_k``: its joint pose, the identity at a root)."""
    motion, _ = motion_step(parent[1:], X_k, *args_k)
    return (compose(parent[0], Xr_k), *motion), ()


def _in_root_frames(T, M, V, alpha, f):
    """Body quantities in the frame of each tree's root body, about its origin, from the poses ``T`` in it (all
    bodies at once): ``I``, ``B`` (nb, 6, 6), ``V``, ``A``, ``f`` (nb, 6)."""
    I = phi_congruence(T, M)
    V = phi_star_inv(T, V)
    # B = V x* I - I V x + (. x* I V): with I symmetric, I (V x) = -(V x* I)*, and column c of the last term is
    # e_c x* (I V); the rows of cross_force(V, I) are the columns of V x* I
    VI = swap(cross_force(V[..., None, :], I))  # V x* I
    B = VI + swap(VI) + swap(cross_force(jnp.eye(6, dtype=V.dtype), mv(I, V)[..., None, :]))
    return I, B, V, phi_star_inv(T, alpha), phi(T, f)


PAIR_PIECE = 128
"""`_pair_dots` gathers this many (row, column) pairs at a time."""


def _pair_dots(a, rows, b, cols):
    """``dot(a[rows], b[cols])`` over the last axis, (pairs, ...), gathered `PAIR_PIECE` pairs at a time. XLA
    materializes the gathered rows: all of talos' pairs below the diagonal at once, in batch-last chunks of float32
    states, leave the cache, and Newton-Euler's derivatives ran slower than in pieces of `PAIR_PIECE`, whose rows
    stay in it (benchmarks/findings.md, "Derivatives")."""
    return jnp.concatenate([dot(take_rows(a, rows[s : s + PAIR_PIECE]), take_rows(b, cols[s : s + PAIR_PIECE]))
                            for s in range(0, max(len(rows), 1), PAIR_PIECE)])


@full_precision
def _inverse_dynamics_derivatives(model, q, qd, qdd, f_ext):
    topo = model.topology
    X = joint_poses(model, q)
    H = hinge_map(model)
    dtype = X.p.dtype
    zero6 = jnp.zeros(6, dtype)
    M_body = body_inertias(model)
    a0 = base_acceleration(model)
    root = (Transform.identity(dtype), zero6, a0, zero6)
    (T, V, alpha, f), _ = down(topo, _root_frame_step, root, X, root_joints_left_out(model, X), M_body, f_ext,
                               dofs=(H, qd, qdd))
    I, B, V, A, f = _in_root_frames(T, M_body, V, alpha, f)
    zero66 = jnp.zeros((6, 6), dtype)
    Ic, Bc, Fc = subtree_sums(topo, (zero66, zero66, zero6), (I, B, f))  # one frame per tree: no change of frame

    body = topo.dof_body
    S = phi_star_inv(take_rows(T, body), H)  # hinge axes (nv, 6)
    roots = np.flatnonzero(topo.parent < 0)
    world = np.full(topo.nb, -1)
    world[roots] = topo.nb + np.arange(len(roots))  # the world seen from root r is row nb + r
    parent = np.where(topo.parent[body] < 0, world[body], topo.parent[body])
    V_p = take_rows(jnp.concatenate([V, jnp.zeros((len(roots), 6), dtype)]), parent)
    A_p = take_rows(jnp.concatenate([A, phi_star(take_rows(X, roots), jnp.broadcast_to(a0, (len(roots), 6)))]), parent)
    Ic_j, Bc_j, Fc_j = take_rows((Ic, Bc, Fc), body)
    u = cross_motion(V_p, S)  # u_j = V_p x S_j
    w = cross_motion(A_p, S) + cross_motion(V_p, u)  # w_j = A_p x S_j + V_p x u_j
    dA = cross_motion(take_rows(V, body) + V_p, S)  # dA_j = (V_b + V_p) x S_j
    Y = mv(Ic_j, S)  # Ic S, the mass matrix's columns
    Z = mv(swap(Bc_j), S)  # Bc* S
    dF_q = mv(Ic_j, w) + mv(Bc_j, u) + cross_force(S, Fc_j)
    dF_qd = mv(Ic_j, dA) + mv(Bc_j, S)

    n_above, rows, cols, index = _pairs(topo)
    ra, ca, rb, cb = rows[:n_above], cols[:n_above], rows[n_above:], cols[n_above:]
    # row i, column j: S_i . [dF_q, dF_qd, Y]_j where body i is a strict ancestor of body j, and
    # [Y_i, Z_i] . [(w, u), (dA, S), (S, 0)]_j where it is in j's subtree
    above = _pair_dots(S[:, None], ra, jnp.stack([dF_q, dF_qd, Y], 1), ca)
    below = _pair_dots(jnp.concatenate([Y, Z], -1)[:, None], rb,
                       jnp.stack([jnp.concatenate(c, -1) for c in ((w, u), (dA, S), (S, jnp.zeros_like(S)))], 1), cb)
    values = jnp.concatenate([above, below, jnp.zeros((1, 3), dtype)])[index]  # (nv, nv, 3), as in `mass_matrix`
    dtau_dq, dtau_dqd, M = values[..., 0], values[..., 1], values[..., 2] + jnp.diag(model.armature)
    tau = dot(S, Fc_j) + model.armature * qdd
    return InverseDynamicsDerivatives(tau, dtau_dq, dtau_dqd, M)


@full_precision
def _forward_dynamics_derivatives(model, q, qd, tau, f_ext):
    ab = articulated_body(model, q, qd, tau, f_ext)
    d = _inverse_dynamics_derivatives(model, q, qd, ab.qdd, f_ext)
    Minv = mass_matrix_inverse_from(model, q, ab)  # the factors of the same sweep (7.18)
    return ForwardDynamicsDerivatives(ab.qdd, -Minv @ d.dtau_dq, -Minv @ d.dtau_dqd, Minv)


_inverse_dynamics_derivatives_in_chunks = in_cpu_chunks(_inverse_dynamics_derivatives)
_forward_dynamics_derivatives_in_chunks = in_cpu_chunks(_forward_dynamics_derivatives)


@eager_jit
def inverse_dynamics_derivatives(model, q, qd, qdd, f_ext=None) -> InverseDynamicsDerivatives:
    """Newton-Euler ``tau`` (nv,) and its Jacobians ``d tau/d q``, ``d tau/d qd``, ``d tau/d qdd = M`` (nv, nv)
    at one state, in one down and one up sweep (module docstring). Columns in ``q`` are tangent directions
    (`jaxmb.integrate`), as in Pinocchio's ``computeRNEADerivatives``. Under ``jax.vmap`` on the CPU a batch is
    computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`).

    Args: q (nq,), qd (nv,), qdd (nv,), f_ext (nb, 6) or None (body coordinates, about the body origins).
    """
    check_shapes(model, q=q, qd=qd, qdd=qdd, f_ext=f_ext)
    return _inverse_dynamics_derivatives_in_chunks(model, q, qd, qdd, f_ext)


@eager_jit
def forward_dynamics_derivatives(model, q, qd, tau, f_ext=None) -> ForwardDynamicsDerivatives:
    """The forward dynamics ``qdd`` (nv,) and its Jacobians ``d qdd/d q``, ``d qdd/d qd``, ``d qdd/d tau = M^-1``
    (nv, nv) at one state: ``d qdd = -M^-1 d ID`` at the computed ``qdd`` (module docstring). Columns in ``q`` are
    tangent directions (`jaxmb.integrate`), as in Pinocchio's ``computeABADerivatives``. Under ``jax.vmap`` on the
    CPU a batch is computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`).

    Args: q (nq,), qd (nv,), tau (nv,), f_ext (nb, 6) or None (body coordinates, about the body origins).
    """
    check_shapes(model, q=q, qd=qd, tau=tau, f_ext=f_ext)
    return _forward_dynamics_derivatives_in_chunks(model, q, qd, tau, f_ext)
