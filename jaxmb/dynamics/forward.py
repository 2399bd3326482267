"""Articulated-body forward dynamics in O(N) (book Alg 7.2 on trees, (9.33); Table 7.1).

Pass 0 (down) finds V(k) and the Coriolis and gyroscopic terms a(k), b(k); pass 1 (up) the articulated-body
inertias P(k), residual forces z(k) and innovations eps(k); pass 2 (down) the accelerations. Gravity enters as
the world's acceleration ``alpha(world) = [0; -g]``, so pass 2 uses ``nu`` rather than ``nu_bar`` (Alg 7.2).
"""

import jax.numpy as jnp

from jaxmb.hinges import base_acceleration, body_inertias, hinge_map, hinge_motion, joint_poses
from jaxmb.kinematics import _velocity_step
from jaxmb.model import check_shapes
from jaxmb.spatial import cross_force, cross_motion, mm, mv, phi, phi_congruence, phi_star
from jaxmb.sweeps import down, up


def _inverse(D):
    """``D^-1`` of a small symmetric positive definite matrix; a division for the common 1x1 case."""
    return 1.0 / D if D.shape[-1] == 1 else jnp.linalg.inv(D)


def _articulated_step(children, X_k, M_k, a_k, b_k, H_k, T_k):
    P_children, z_children = children
    P = P_children + M_k  # P(k) = sum_j phi(k, j) P+(j) phi*(k, j) + M(k)         (6.28)
    z = z_children + mv(P, a_k) + b_k  # z(k) = sum_j phi(k, j) z+(j) + P a(k) + b(k)   (7.42)
    PH = mm(P, H_k.T)  # P(k) H*(k)                                             (6, n)
    D = mm(H_k, PH)  # D(k) = H(k) P(k) H*(k)                                   (6.13)
    D_inv = _inverse(D)
    G = mm(PH, D_inv)  # G(k) = P(k) H*(k) D^-1(k), the Kalman gain            (6, n)
    eps = T_k - mv(H_k, z)  # eps(k) = T(k) - H(k) z(k)
    nu = mv(D_inv, eps)  # nu(k) = D^-1(k) eps(k)
    P_plus = P - mm(G, PH.T)  # P+(k) = tau_bar(k) P(k) = P - G H P              (6.16)
    z_plus = z + mv(G, eps)  # z+(k) = z(k) + G(k) eps(k)
    return (phi_congruence(X_k, P_plus), phi(X_k, z_plus)), (), (G.T, nu)


def _acceleration_step(alpha_parent, X_k, a_k, G_k, nu_k, H_k):
    alpha_plus = phi_star(X_k, alpha_parent)  # alpha+(k) = phi*(parent, k) alpha(parent)
    qdd = nu_k - mv(G_k, alpha_plus)  # qdd(k) = nu(k) - G*(k) alpha+(k)           (7.31)
    alpha = alpha_plus + mv(H_k.T, qdd) + a_k  # alpha(k) = alpha+(k) + H*(k) qdd(k) + a(k)
    return alpha, qdd


def forward_dynamics(model, q, qd, tau, f_ext=None):
    """Joint accelerations ``qdd = M^-1 (tau - C(q, qd) + J* f_ext)`` (nv,) by the articulated-body algorithm.

    Args: q (nq,), qd (nv,), tau (nv,), f_ext (nb, 6) or None (body coordinates, about the body origins).
    """
    check_shapes(model, q=q, qd=qd, tau=tau, f_ext=f_ext)
    topo = model.topology
    X = joint_poses(model, q)
    H = hinge_map(model)
    vJ = hinge_motion(model, H, qd)
    zero = jnp.zeros(6, X.p.dtype)
    V = down(topo, _velocity_step, zero, X, vJ)  # pass 0
    M = body_inertias(model)
    a = cross_motion(V, vJ)  # a(k) = V(k) x H*(k) qd(k)
    b = cross_force(V, mv(M, V))  # b(k) = V-bar(k) M(k) V(k)
    if f_ext is not None:
        b = b - f_ext
    _, (G, nu) = up(topo, _articulated_step, (jnp.zeros((6, 6), zero.dtype), zero), X, M, a, b, dofs=(H, tau))
    _, qdd = down(topo, _acceleration_step, base_acceleration(model), X, a, dofs=(G, nu, H))
    return qdd
