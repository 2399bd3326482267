"""Closed-loop dynamics in independent coordinates from the spanning tree's recursions, and the two reference
solvers of book chapter 11 on the same spanning tree.

With ``qd = G yd`` and ``qdd = G ydd + g`` (`jaxmb.loops.embedding`), the embedded equations of motion are
(book 15.7-15.8, Chignoli et al. 2023, section IV)

    M_y ydd + C_y = tau_y,   M_y = G* M G,   C_y = G* (C + M g)

and the cluster RNEA ``tau_k = S_k* f_k`` (Chignoli et al., (62)-(65)) sums to ``G* ID(q, qd, qdd)``: the tree's O(N)
Newton-Euler sweep, then one small product per cluster. Forward dynamics by constraint embedding is in
`jaxmb.loops.articulated`; the references here are dense, for checking it and for comparison:

* Lagrange multipliers (book Alg 11.1/11.2): ``M qdd = tau - C + K* lambda``, ``K qdd = k`` (minus an optional
  Baumgarte term ``2 zeta omega K qd + omega^2 phi``), solved through the Schur complement ``K M^-1 K*``.
* Projection (book 11.3): ``ydd = (G* M G)^-1 G* (tau - C - M g)``.
"""

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_factor, cho_solve

from jaxmb.batching import eager_jit, full_precision
from jaxmb.dynamics.inverse import bias_forces as tree_bias_forces
from jaxmb.dynamics.inverse import body_forces as tree_body_forces
from jaxmb.dynamics.inverse import inverse_dynamics as tree_inverse_dynamics
from jaxmb.kinematics import forward_kinematics, frame_poses
from jaxmb.spatial import Transform, compose, cross3, inverse, phi, skew
from jaxmb.dynamics.mass import mass_matrix as tree_mass_matrix
from jaxmb.loops.embedding import (
    constraint_bias,
    constraint_jacobian,
    constraint_residual,
    dense_embedding,
    embedding,
    embedding_matrix,
    lift_acceleration,
)


@eager_jit
@full_precision
def inverse_dynamics(lm, q, yd, ydd, f_ext=None):
    """Independent forces ``tau_y = G* ID_tree(q, G yd, G ydd + g)`` (ny,): the cluster RNEA.

    Args: q (nq,) consistent spanning configuration, yd, ydd (ny,), f_ext (nb, 6) or None."""
    emb = embedding(lm, q, yd)
    tau = tree_inverse_dynamics(lm.tree, q, emb.qd, lift_acceleration(lm, emb, ydd), f_ext)
    return dense_embedding(lm, emb).T @ tau


@eager_jit
@full_precision
def mass_matrix(lm, q):
    """``M_y = G* M G`` (ny, ny), symmetric positive definite (15.8)."""
    G = embedding_matrix(lm, q)
    return G.T @ tree_mass_matrix(lm.tree, q) @ G


@eager_jit
@full_precision
def bias_forces(lm, q, yd, f_ext=None):
    """``C_y = G* (C + M g)`` (ny,): ``tau_y`` at ``ydd = 0``."""
    return inverse_dynamics(lm, q, yd, jnp.zeros_like(yd), f_ext)


@eager_jit
@full_precision
def lagrange_forward_dynamics(lm, q, qd, tau, f_ext=None, baumgarte=None):
    """Spanning accelerations and constraint forces ``(qdd (nv,), lambda (nc,))`` by Lagrange multipliers.

    Args: q (nq,), qd (nv,) spanning state (consistent, or nearly so with ``baumgarte``), tau (nv,) spanning
    joint forces, ``baumgarte = (zeta_omega2, omega2)``: the constraint rows become
    ``K qdd = k - 2 zeta omega K qd - omega^2 phi(q)`` with ``baumgarte = (2 zeta omega, omega^2)``.
    ``lambda`` are the forces of the residual rows: ``M qdd + C = tau + K* lambda``.
    """
    M = tree_mass_matrix(lm.tree, q)
    C = tree_bias_forces(lm.tree, q, qd, f_ext)
    K = constraint_jacobian(lm, q)
    k = constraint_bias(lm, q, qd)
    if baumgarte is not None:
        damping, stiffness = baumgarte
        k = k - damping * (K @ qd) - stiffness * constraint_residual(lm, q)
    chol = cho_factor(M)
    qdd_free = cho_solve(chol, tau - C)
    Minv_Kt = cho_solve(chol, K.T)
    lam = jnp.linalg.solve(K @ Minv_Kt, k - K @ qdd_free)  # (K M^-1 K*) lambda = k - K qdd_free   (11.8)
    return qdd_free + Minv_Kt @ lam, lam


@eager_jit
@full_precision
def projected_forward_dynamics(lm, q, yd, tau, f_ext=None):
    """Independent accelerations ``ydd`` (ny,) by projection onto the constraint manifold (book 11.3).

    Args: q (nq,) consistent spanning configuration, yd (ny,), tau (ny,) independent forces, f_ext (nb, 6)."""
    emb = embedding(lm, q, yd)
    G = dense_embedding(lm, emb)
    M = tree_mass_matrix(lm.tree, q)
    g = lift_acceleration(lm, emb, jnp.zeros_like(yd))
    rhs = tau - G.T @ (tree_bias_forces(lm.tree, q, emb.qd, f_ext) + M @ g)
    return jnp.linalg.solve(G.T @ M @ G, rhs)


@eager_jit
@full_precision
def constraint_forces(lm, q, qd, qdd, tau, f_ext=None):
    """The multipliers ``lambda`` (nc,) that make a constrained motion ``qdd`` (nv,) satisfy the tree's equations
    ``ID(q, qd, qdd) - tau = K* lambda``: the cut-joint (loop-closure) and coupling forces, by least squares.

    They are the multipliers of the dense KKT system ``M qdd - K* lambda = tau - C``, ``K qdd = k`` (book 11.8;
    `lagrange_forward_dynamics`), with ``K = constraint_jacobian(lm, q)`` the derivative of the residual
    ``phi = constraint_residual(lm, q)``. Their basis is that of ``phi``'s rows: the constraints in the order given
    to `close_loops`, each with its rows in this order (frame a and frame b are the closure's two frames, each its
    body frame composed with its ``placement``; ``d = R_a* (p_b - p_a)`` is b's origin in frame a's axes,
    ``R_ab = R_a* R_b``; ``(u1, u2) = orthonormal_pair(axis)`` of `jaxmb.loops.constraints`):

    * ``ball`` (3 rows ``d``): the force that body a exerts on body b, in frame a's axes, acting at frame a's origin
      (where frame b's origin is when the loop is closed); ``-lambda`` acts on a.
    * ``weld`` (6 rows ``d``, then ``vee((R_ab - R_ab*)/2)``): that force, then the moment on b in frame a's axes.
    * ``revolute`` (5 rows ``d``, then ``u1 . R_ab axis`` and ``u2 . R_ab axis``): that force, then the moment on
      b, ``lambda_4 (axis x u1) + lambda_5 (axis x u2) = lambda_4 u2 - lambda_5 u1`` in frame a's axes (at the
      closed pose, where ``R_ab axis = axis``).
    * ``planar`` (2 rows ``u1 . d``, ``u2 . d``): the force ``lambda_1 u1 + lambda_2 u2`` on b in frame a's axes.
    * a coupling ``q_J - r q_R - c`` (one row; `jaxmb.loops.coupling`): the joint force ``lambda`` on ``J`` and
      ``-r lambda`` on ``R``; a linear coupling, implicit or explicit constraint: ``K* lambda`` per joint.

    `cut_joint_forces` turns them into spatial forces on the bodies."""
    K = constraint_jacobian(lm, q)
    r = tree_inverse_dynamics(lm.tree, q, qd, qdd, f_ext) - tau
    return jnp.linalg.solve(K @ K.T, K @ r)


@eager_jit
@full_precision
def cut_joint_forces(lm, q, lam):
    """The constraint forces ``lambda`` (nc,) as what acts on the spanning tree: spatial forces ``f_cut``
    (nb, 6) on the bodies of each loop closure (body coordinates, about the body origins: ``+f`` on body b and
    ``-f`` on body a at the closure frame, ``f = A* lambda`` with ``A`` the rows' rates per relative spatial
    velocity of b in frame a), and joint forces ``tau_c`` (nv,) of the joint-level constraints (couplings,
    implicit and explicit maps), such that ``K* lambda = J* f_cut + tau_c``."""
    tree = lm.tree
    K = None
    T_body = forward_kinematics(tree, q)
    T_frame = frame_poses(tree, q)
    f_cut = jnp.zeros((tree.nb, 6), q.dtype)
    tau_c = jnp.zeros(tree.nv, q.dtype)
    row = 0
    for c, params in zip(lm.constraints, lm.params):
        lam_c = lam[row : row + c.size]
        if c.cut is None:
            K = constraint_jacobian(lm, q) if K is None else K
            tau_c = tau_c + K[row : row + c.size].T @ lam_c
        else:
            cut = c.cut
            ends = []
            for f, P in ((cut.frame_a, params[0]), (cut.frame_b, params[1])):
                placement = Transform(*P)
                ends.append(placement if f is None else compose(Transform(T_frame.R[f], T_frame.p[f]), placement))
            Ta, Tb = ends
            d, R_ab = Ta.R.T @ (Tb.p - Ta.p), Ta.R.T @ Tb.R

            def moved(twist):  # frame b displaced by the twist (w, v) given in frame a, to first order
                w, v = twist[:3], twist[3:]
                return cut.rows(d + v + cross3(w, d), (jnp.eye(3, dtype=q.dtype) + skew(w)) @ R_ab)

            A = jax.jacfwd(moved)(jnp.zeros(6, q.dtype))  # (rows, 6)
            f = A.T @ lam_c  # on b, frame-a coordinates about frame a's origin
            for body, sign in ((cut.body_b, 1.0), (cut.body_a, -1.0)):
                if body >= 0:
                    a_in_body = compose(inverse(Transform(T_body.R[body], T_body.p[body])), Ta)
                    f_cut = f_cut.at[body].add(sign * phi(a_in_body, f))
        row += c.size
    return f_cut, tau_c


@eager_jit
@full_precision
def body_forces(lm, q, qd, qdd, tau, f_ext=None):
    """Inter-body forces of the closed system ``(f (nb, 6), f_cut (nb, 6))``: the spatial force across each
    spanning-tree joint (`jaxmb.body_forces`, body coordinates) with the loop-closure forces ``f_cut`` applied
    (`cut_joint_forces`), for the spanning state ``q, qd, qdd`` of a constrained motion under spanning joint
    forces ``tau`` (nv,)."""
    lam = constraint_forces(lm, q, qd, qdd, tau, f_ext)
    f_cut, _ = cut_joint_forces(lm, q, lam)
    total = f_cut if f_ext is None else f_ext + f_cut
    return tree_body_forces(lm.tree, q, qd, qdd, total), f_cut
