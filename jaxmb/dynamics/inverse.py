"""Newton-Euler inverse dynamics (book Alg 5.2 / 9.1, (9.10)) and the bias and gravity forces built on it.

The armature (`Model.armature`) is a joint-space inertia: it adds ``armature * qdd`` to the joint forces and
nothing to the body forces.
"""

from typing import NamedTuple

import jax.numpy as jnp

from jaxmb.batching import eager_jit, in_cpu_chunks
from jaxmb.dynamics.adjoint import newton_euler_vjp
from jaxmb.hinges import base_acceleration, body_inertias, hinge_map, joint_poses
from jaxmb.model import check_shapes
from jaxmb.spatial import cross_force, cross_motion, mv, phi, phi_star
from jaxmb.sweeps import down, up


class BodyMotion(NamedTuple):
    """What `motion_step` finds for a body and hands its children: its velocity ``V``, its acceleration ``alpha``
    (gravity included as the world's acceleration) and its force ``f = M alpha + b - f_ext`` (6,) each, in body
    coordinates. The children read ``V`` and ``alpha``."""

    V: jnp.ndarray
    alpha: jnp.ndarray
    f: jnp.ndarray


def motion_step(parent, X_k, M_k, f_ext_k, H_k, qd_k, qdd_k):
    """The down sweep of Newton-Euler (Alg 5.2, (9.10)) at body k, as `jaxmb.sweeps.down` takes it with ``dofs``:
    from its parent's `BodyMotion`, its joint pose ``X_k``, inertia ``M_k``, external force ``f_ext_k`` (or None)
    and its joint's ``H_k`` (n, 6), ``qd_k``, ``qdd_k`` (n,), its own `BodyMotion` and no coordinate output."""
    V_parent, alpha_parent, _ = parent  # the force rides along in the body's value; the children do not read it
    vJ = mv(H_k.T, qd_k)  # H*(k) qd(k)
    V = phi_star(X_k, V_parent) + vJ  # V(k) = phi*(parent, k) V(parent) + H*(k) qd(k)
    a = cross_motion(V, vJ)  # a(k) = V(k) x H*(k) qd(k)
    alpha = phi_star(X_k, alpha_parent) + mv(H_k.T, qdd_k) + a  # alpha(k) = phi* alpha(parent) + H* qdd + a(k)
    f = mv(M_k, alpha) + cross_force(V, mv(M_k, V))  # M(k) alpha(k) + b(k),  b = V-bar M V
    if f_ext_k is not None:
        f = f - f_ext_k
    return BodyMotion(V=V, alpha=alpha, f=f), ()


def _force_step(f_children, X_k, f_k, H_k):
    f = f_children + f_k  # f(k) = sum_children phi(k, j) f(j) + M(k) alpha(k) + b(k) - f_ext(k)
    return phi(X_k, f), f, mv(H_k, f)  # T(k) = H(k) f(k)


def _newton_euler(model, q, qd, qdd, f_ext):
    """Inter-body forces (nb, 6) and joint forces ``H f`` (nv,): the motion sweep computes each body's
    ``M alpha + b - f_ext`` where it computes ``alpha``, so that only that one (nb, 6) array is kept for the
    force sweep (benchmarks/findings.md, "Smaller scratch")."""
    check_shapes(model, q=q, qd=qd, qdd=qdd, f_ext=f_ext)
    X = joint_poses(model, q)
    H = hinge_map(model)
    M = body_inertias(model)
    zero = jnp.zeros(6, X.p.dtype)
    root = BodyMotion(V=zero, alpha=base_acceleration(model), f=zero)
    motion, _ = down(model.topology, motion_step, root, X, M, f_ext, dofs=(H, qd, qdd))
    f_body = motion.f
    return up(model.topology, _force_step, zero, X, f_body, dofs=(H,))


_body_forces = in_cpu_chunks(lambda model, q, qd, qdd, f_ext: _newton_euler(model, q, qd, qdd, f_ext)[0])


@eager_jit
def body_forces(model, q, qd, qdd, f_ext=None):
    """Inter-body forces ``f(k)`` (nb, 6): the spatial force that the parent exerts on body k across joint k,
    at the body origin in body coordinates, with gravity and external forces (5.42). Under `jax.vmap` on the CPU,
    a batch is computed in chunks (`jaxmb.batching.in_cpu_chunks`).

    ``f_ext`` (nb, 6): external spatial forces on each body, body coordinates, about the body origin.
    """
    return _body_forces(model, q, qd, qdd, f_ext)


def joint_forces(model, q, qd, qdd, f_ext):
    """`inverse_dynamics` of one state, without its batching rule: for the derivative rules of other algorithms."""
    return _newton_euler(model, q, qd, qdd, f_ext)[1] + model.armature * qdd


_joint_forces = in_cpu_chunks(joint_forces, vjp=newton_euler_vjp)


@eager_jit
def inverse_dynamics(model, q, qd, qdd, f_ext=None):
    """Joint forces ``tau = M(q) qdd + C(q, qd) - J* f_ext`` (nv,), by Newton-Euler in O(N):
    ``T(k) = H(k) f(k) + armature(k) qdd(k)``, ``M`` including ``diag(armature)``. Under `jax.vmap` on the CPU,
    a batch is computed in chunks (`jaxmb.batching.in_cpu_chunks`). Reverse mode runs Newton-Euler's adjoint
    (`jaxmb.dynamics.adjoint`), forward mode autodiff through the sweeps.

    Args: q (nq,), qd (nv,), qdd (nv,), f_ext (nb, 6) or None (body coordinates, about the body origins).
    """
    return _joint_forces(model, q, qd, qdd, f_ext)


@eager_jit
def bias_forces(model, q, qd, f_ext=None):
    """``C(q, qd)`` (nv,): Coriolis, centrifugal and gravity forces (and ``-J* f_ext``); ``tau`` at ``qdd = 0``."""
    return inverse_dynamics(model, q, qd, jnp.zeros_like(qd), f_ext)


@eager_jit
def gravity_forces(model, q):
    """Generalized gravity forces (nv,): ``tau`` at ``qd = qdd = 0``; equal to ``dV/dq`` of the potential."""
    zero = jnp.zeros(model.nv, q.dtype)
    return inverse_dynamics(model, q, zero, zero)
