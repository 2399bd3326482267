"""Prescribed-motion (hybrid) dynamics in O(N) (book Alg 16.1-16.2 on trees; Jain 2018 on prescribed hinges).

Each velocity coordinate is either *prescribed* (its acceleration is given; its force is unknown) or *free* (its
force is given; its acceleration is unknown). The mask is a runtime array, so changing it does not recompile.
A joint may mix both kinds: with ``m`` the mask of its coordinates, the free part of its hinge map is
``H_f = diag(1 - m) H`` and the sweep inverts ``D_f = H_f P H_f* + diag((1 - m) armature + m)``, which is ``D``
on the free coordinates and the identity on the prescribed ones. All coordinates free gives the articulated-body
algorithm; all prescribed gives composite-body inverse dynamics (Alg 5.3).

Up sweep:   P(k) = sum_j phi P+(j) phi* + M(k);   z(k) = sum_j phi z+(j) + P a + b + P H* (m qdd_given)
            eps = (1 - m)(T - H z);   nu = D_f^-1 eps;   G_f = P H_f* D_f^-1;   P+ = P - G_f H_f P;   z+ = z + G_f eps
Down sweep: alpha+ = phi* alpha(parent);   qdd = m qdd_given + nu - G_f* alpha+;   alpha = alpha+ + H* qdd + a
Forces:     f(k) = P+ alpha+ + z+ (eq. 18);   T = H f + armature qdd on every coordinate.
"""

from typing import NamedTuple

import jax.numpy as jnp

from jaxmb.batching import eager_jit, in_cpu_chunks
from jaxmb.dynamics.ab_steps import Acceleration, ToParent, solve_small
from jaxmb.dynamics.articulated import velocity_terms
from jaxmb.hinges import base_acceleration, hinge_motion, hinge_project
from jaxmb.model import check_shapes
from jaxmb.spatial import mm, mv, phi, phi_congruence, phi_star
from jaxmb.sweeps import down, up


class HybridBody(NamedTuple):
    """What the hybrid up sweep keeps of a body for its forces: ``P+`` (6, 6) and ``z+`` (6,)."""

    P_plus: jnp.ndarray
    z_plus: jnp.ndarray


class HybridGains(NamedTuple):
    """What the hybrid up sweep keeps of a joint's n coordinates: the gain rows ``G`` (n, 6), zero for prescribed
    coordinates, and ``nu = D_f^-1 eps`` (n,)."""

    G: jnp.ndarray
    nu: jnp.ndarray


class HybridStep(NamedTuple):
    """`_hybrid_step`'s result: ``(to_parent, body, coordinates)``, as `jaxmb.sweeps.up` takes it."""

    to_parent: ToParent
    body: HybridBody
    coordinates: HybridGains


def _hybrid_step(children, X_k, M_k, a_k, b_k, H_k, u_k, m_k, A_k):
    """The up sweep (module docstring) at body k, from its children's sums `ToParent`."""
    P_children, z_children = children
    P = P_children + M_k  # (6.28)
    z = z_children + mv(P, a_k + mv(H_k.T, m_k * u_k)) + b_k  # prescribed accelerations enter z (Alg 16.2)
    H_f = (1.0 - m_k)[:, None] * H_k  # the free rows of H(k)
    PH = mm(P, H_f.T)
    D = mm(H_f, PH) + jnp.diag((1.0 - m_k) * A_k + m_k)  # D on the free coordinates, I on the prescribed ones
    eps = (1.0 - m_k) * (u_k - mv(H_k, z))
    Dinv = solve_small(D, jnp.concatenate([PH.T, eps[:, None]], 1))  # D^-1 [H P, eps], one factorization
    G = jnp.swapaxes(Dinv[:, :6], -1, -2)  # zero columns for prescribed coordinates
    nu = Dinv[:, 6]
    P_plus = P - mm(G, PH.T)
    z_plus = z + mv(G, eps)
    return HybridStep(to_parent=ToParent(P=phi_congruence(X_k, P_plus), z=phi(X_k, z_plus)),
                      body=HybridBody(P_plus=P_plus, z_plus=z_plus), coordinates=HybridGains(G=G.T, nu=nu))


def _hybrid_acceleration_step(alpha_parent, X_k, a_k, G_k, nu_k, H_k, u_k, m_k):
    """The down sweep (module docstring) at body k: `jaxmb.dynamics.ab_steps.Acceleration`."""
    alpha_plus = phi_star(X_k, alpha_parent)
    qdd = m_k * u_k + nu_k - mv(G_k, alpha_plus)  # prescribed: given; free: nu - G* alpha+  (7.31)
    alpha = alpha_plus + mv(H_k.T, qdd) + a_k
    return Acceleration(alpha=alpha, qdd=qdd)


def _hybrid(model, q, qd, u, m, f_ext):
    topo = model.topology
    X, H, M, _, a, b = velocity_terms(model, q, qd, f_ext)
    (P_plus, z_plus), (G, nu) = up(topo, _hybrid_step, ToParent.zero(X.p.dtype), X, M, a, b,
                                   dofs=(H, u, m, model.armature))
    alpha, qdd = down(topo, _hybrid_acceleration_step, base_acceleration(model), X, a, dofs=(G, nu, H, u, m))
    alpha_plus = alpha - hinge_motion(model, H, qdd) - a
    f = mv(P_plus, alpha_plus) + z_plus  # f(k) = P+(k) alpha+(k) + z+(k)   (eq. 18)
    return qdd, hinge_project(model, H, f) + model.armature * qdd  # T = H f + armature qdd


_hybrid_in_chunks = in_cpu_chunks(_hybrid)


@eager_jit
def hybrid_dynamics(model, q, qd, u, prescribed, f_ext=None):
    """Accelerations and forces when the coordinates where ``prescribed`` is true have given accelerations and
    the others given forces.

    Args:
        q (nq,), qd (nv,); u (nv,): the given acceleration of each prescribed coordinate, the given force of
        each free one; prescribed (nv,) bool; f_ext (nb, 6) or None.
    Returns:
        ``(qdd, tau)``, both (nv,): all accelerations (equal to ``u`` where prescribed) and all joint forces
        (equal to ``u`` where free).

    Under ``jax.vmap`` on the CPU a batch is computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`).
    """
    check_shapes(model, q=q, qd=qd, tau=u, f_ext=f_ext)
    if jnp.shape(prescribed) != (model.nv,):
        raise ValueError(f"prescribed: expected shape ({model.nv},), got {jnp.shape(prescribed)}")
    return _hybrid_in_chunks(model, q, qd, u, jnp.asarray(prescribed).astype(u.dtype), f_ext)
