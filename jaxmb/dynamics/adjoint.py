"""The vector-Jacobian product of Newton-Euler by adjoint sweeps: the cotangents of ``L = w . ID(q, qd, qdd, f_ext)``
in the state, ``f_ext`` and every model parameter, in one down and one up sweep of vectors.

Newton-Euler (`jaxmb.dynamics.inverse`) is a down sweep and an up sweep (book Alg 5.2), with ``vJ = H* qd``::

    V(k)     = phi*(parent k, k) V(parent k) + vJ(k)
    alpha(k) = phi*(parent k, k) alpha(parent k) + H*(k) qdd(k) + V(k) x vJ(k)
    F(k)     = M(k) alpha(k) + V(k) x* M(k) V(k) - f_ext(k)
    f(k)     = sum_children phi(k, j) f(j) + F(k),        T(k) = H(k) f(k)

Its adjoint runs the sweeps the other way. The cotangent of the body forces ``f`` is a motion-like vector that a
down sweep carries from the base, as the velocities are carried with ``qd`` replaced by ``w`` (Lemma 9.2)::

    u(k) = phi*(parent k, k) u(parent k) + H*(k) w(k)

and the cotangents of ``alpha`` and ``V`` are force-like vectors that an up sweep gathers from the tips::

    alpha_bar(k) = sum_children phi(k, j) alpha_bar(j) + M(k) u(k)
    V_bar(k)     = sum_children phi(k, j) V_bar(j) - u(k) x* M(k) V(k) - M(k) (V(k) x u(k)) + vJ(k) x* alpha_bar(k)

using ``u . (x x* f) = -f . (x x u)`` and ``M = M*``. The down sweep computes ``u`` beside ``V`` and ``alpha``;
the inertia products ``F``, ``M u`` and the local part of ``V_bar`` are then formed for all bodies at once, outside
the sweeps, and the up sweep gathers ``alpha_bar, V_bar`` beside ``f``. The forward dynamics' derivative needs no
down sweep at all: its forward sweep has ``V`` and ``alpha``, and the sweep that solves ``M^-1`` has ``u``
(`jaxmb.dynamics.articulated`). What is left is local to each body and left to autodiff: the cotangents of the
joint poses from ``phi*(X) V(parent)``, ``phi*(X) alpha(parent)`` and ``phi(X) f`` (with cotangents ``V_bar``,
``alpha_bar`` and ``u(parent)``), of the inertias (``u alpha* - (V x u) V*``), of ``vJ`` (``V_bar - V x* alpha_bar``),
of ``H* qdd`` (``alpha_bar``), of ``H`` in ``T = H f`` (``w f*``) and of ``f_ext`` (``-u``), pulled back to ``q`` and
the model leaves through the joint poses, hinge map and inertias. The adjoint is differentiable itself, so second
derivatives differentiate it.

Reverse mode through the sweeps recomputes Newton-Euler, keeps its residuals and transposes every step; the
adjoint written out as one down and one up sweep gives both dynamics' gradients faster and with shorter compiles
(benchmarks/findings.md, "Newton-Euler's adjoint").
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import of_live, take_rows
from jaxmb.hinges import base_acceleration, body_inertias, hinge_map, hinge_motion, joint_poses
from jaxmb.spatial import cross_force, cross_motion, mv, phi, phi_star
from jaxmb.sweeps import down, up


def _motion_step(parent, X_k, vJ_k, aJ_k, wJ_k):
    V_parent, alpha_parent, u_parent = parent
    V = phi_star(X_k, V_parent) + vJ_k  # V(k) = phi*(parent, k) V(parent) + H*(k) qd(k)
    alpha = phi_star(X_k, alpha_parent) + aJ_k + cross_motion(V, vJ_k)  # + H*(k) qdd(k) + V(k) x vJ(k)
    u = phi_star(X_k, u_parent) + wJ_k  # u(k) = phi*(parent, k) u(parent) + H*(k) w(k), the cotangent of f(k)
    return V, alpha, u


def _adjoint_step(children, X_k, F_k, Mu_k, V_bar_k, vJ_k):
    f_children, alpha_bar_children, V_bar_children = children
    f = f_children + F_k  # f(k) = sum_j phi(k, j) f(j) + F(k)
    alpha_bar = alpha_bar_children + Mu_k  # the cotangent of alpha(k)
    V_bar = V_bar_children + V_bar_k + cross_force(vJ_k, alpha_bar)  # the cotangent of V(k)
    sums = (f, alpha_bar, V_bar)
    return tuple(phi(X_k, s) for s in sums), sums


def _local(model, q, qd, qdd, f_ext):
    """What Newton-Euler computes body by body, without a sweep: joint poses, hinge map, inertias, the world's
    acceleration, ``H* qd`` and ``H* qdd`` per body, ``f_ext`` and the armature's joint forces."""
    X, H = joint_poses(model, q), hinge_map(model)
    return (X, H, body_inertias(model), base_acceleration(model), hinge_motion(model, H, qd),
            hinge_motion(model, H, qdd), f_ext, model.armature * qdd)


def newton_euler_vjp(primals, live, w, motion=None):
    """The cotangents of ``w . joint_forces(*primals)`` (``primals = (model, q, qd, qdd, f_ext)``, ``w`` (nv,)) in
    the leaves ``live`` of the flattened ``primals``, as a list in that order (module docstring).

    ``motion``: the body velocities ``V``, accelerations ``alpha`` and force cotangents ``u = phi* H* w`` (nb, 6)
    where the caller has them (the forward dynamics' derivative: its forward sweep has ``V`` and ``alpha``, and
    the sweep that solves for ``w`` has ``u``); otherwise one down sweep computes them.
    """
    model, topo = primals[0], primals[0].topology
    local, at = of_live(_local, primals, live)
    (X, H, M, g, vJ, aJ, f_ext, _), pullback = jax.vjp(local, *at)
    zero = jnp.zeros(6, X.p.dtype)
    if motion is None:
        motion = down(topo, _motion_step, (zero, g, zero), X, vJ, aJ, hinge_motion(model, H, w))
    V, alpha, u = motion
    MV = mv(M, V)
    F = mv(M, alpha) + cross_force(V, MV)  # F(k) = M(k) alpha(k) + V(k) x* M(k) V(k) - f_ext(k)
    if f_ext is not None:
        F = F - f_ext
    V_bar_F = -cross_force(u, MV) - mv(M, cross_motion(V, u))  # the cotangent of V(k) from F(k)
    f, alpha_bar, V_bar = up(topo, _adjoint_step, (zero, zero, zero), X, F, mv(M, u), V_bar_F, vJ)

    parent = np.where(topo.parent < 0, topo.nb, topo.parent)  # the world is row nb

    def moved(X, g):  # what each joint pose moves between a body and its parent
        V_parent = take_rows(jnp.concatenate([V, zero[None]]), parent)
        alpha_parent = take_rows(jnp.concatenate([alpha, g[None]]), parent)
        return phi_star(X, V_parent), phi_star(X, alpha_parent), phi(X, f)

    u_parent = take_rows(jnp.concatenate([u, zero[None]]), parent)
    X_bar, g_bar = jax.vjp(moved, X, g)[1]((V_bar, alpha_bar, u_parent))
    M_bar = u[:, :, None] * alpha[:, None, :] - cross_motion(V, u)[:, :, None] * V[:, None, :]
    H_bar = w[:, None] * take_rows(f, topo.dof_body)  # T = H f
    vJ_bar = V_bar - cross_force(V, alpha_bar)
    f_ext_bar = None if f_ext is None else -u
    return list(pullback((X_bar, H_bar, M_bar, g_bar, vJ_bar, alpha_bar, f_ext_bar, w)))
