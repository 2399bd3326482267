"""Articulated-body quantities: the Riccati sweep and the AB forward dynamics (book Alg 7.2 on trees, (9.33),
Lemma 9.12; Table 7.1), returned whole so that the factorization, inter-body forces and hybrid dynamics reuse
one sweep.

Pass 0 (down) finds V(k) and the Coriolis and gyroscopic terms a(k), b(k); pass 1 (up) the articulated-body
inertias P(k), residual forces z(k) and innovations eps(k); pass 2 (down) the accelerations. Gravity enters as
the world's acceleration ``alpha(world) = [0; -g]``, so pass 2 uses ``nu`` rather than ``nu_bar`` (Alg 7.2).

Armature (`Model.armature`, reflected rotor inertia) adds ``diag(armature_k)`` to ``D(k)``; the gain
``G = P H* D^-1`` and ``P+ = P - G H P`` keep their formulas, and the sweeps then invert ``M(q) + diag(armature)``.

Derivatives of `forward_dynamics` (any mode, any order) are not taken through the three sweeps but by the implicit
function theorem on ``ID(q, qd, FD(q, qd, tau)) = tau``: ``d qdd = M^-1 (d tau - d ID)``, with ``d ID`` the
derivative of Newton-Euler at the fixed ``qdd`` (in ``q``, ``qd``, ``f_ext`` and every model parameter) and
``M^-1`` applied with the factors the forward sweep already has, ``M^-1 = [I - H psi K]* D^-1 [I - H psi K]``
(7.18). Its transpose is ``M^-1`` (symmetric) followed by Newton-Euler's adjoint (`jaxmb.dynamics.adjoint`), which
takes the body velocities and accelerations from the forward sweep and its down sweep from the solve's, so a
gradient costs the forward call and three vector sweeps rather than a transpose of the three sweeps
(benchmarks/findings.md, "Gradients by the implicit function theorem").

The per-body steps of the three passes are in `jaxmb.dynamics.ab_steps`; this module runs them as sweeps. Under
`jax.vmap` on the CPU, a batch is computed in chunks of states with the batch as the last axis
(`jaxmb.batching.vmap_in_cpu_chunks`; benchmarks/findings.md, "Batch last"). The tangent map and its transpose are
chunked the same way (`jaxmb.batching.linear_in_cpu_chunks`), so the gradients of a batch are as well. On a GPU, a
batch of a model whose joints below its roots are screw joints runs as the fused Pallas kernels of
`jaxmb.dynamics.fused` (benchmarks/findings.md, "Results: GPU"); derivatives keep the rule above.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

from jaxmb.batching import eager_jit, linear_in_cpu_chunks, live_tangents, of_live, vmap_in_cpu_chunks
from jaxmb.dynamics import fused
from jaxmb.dynamics.ab_steps import (
    ToParent,
    VelocityTerms,
    acceleration_step,
    articulated_step,
    inertia_step,
    innovations_step,
)
from jaxmb.dynamics.adjoint import newton_euler_vjp
from jaxmb.dynamics.inverse import joint_forces
from jaxmb.hinges import base_acceleration, body_inertias, hinge_map, hinge_motion, joint_poses
from jaxmb.kinematics import velocity_step
from jaxmb.model import check_shapes
from jaxmb.spatial import cross_force, cross_motion, mv
from jaxmb.sweeps import down, up


class ArticulatedBody(NamedTuple):
    """The articulated-body quantities of one state. Per body (nb, ...) in ``model.body_names`` order, in body
    coordinates; per coordinate (nv, ...) in ``q`` order, row j belonging to the joint of ``dof_body[j]``.

    P, P_plus (nb, 6, 6)    articulated inertia before and after the joint, ``P+ = tau_bar P`` (6.28, 6.16)
    tau_bar (nb, 6, 6)      ``I - G(k) H(k)`` (6.16)
    psi (nb, 6, 6)          ``psi(parent k, k) = phi(parent k, k) tau_bar(k)``, in parent coordinates (6.29)
    z, z_plus (nb, 6)       residual forces before and after the joint (7.42)
    V (nb, 6)               body velocity
    a, b (nb, 6)            Coriolis acceleration and gyroscopic force (``b`` includes ``-f_ext``)
    alpha, alpha_plus (nb, 6)  body acceleration and the parent's acceleration moved to the body
    log_det_D (nb,)         ``log det D(k)``, the armature included
    G (nv, 6)               row j: the column of the Kalman gain ``G(k) = P H* D^-1`` for coordinate j
    K (nv, 6)               row j: the column of ``K(parent k, k) = phi(parent k, k) G(k)`` (6.36), parent coords
    D (nv, 6)               row j: the row of ``D(k) = H P H* + diag(armature_k)`` for coordinate j, in its first
                            nv_k entries
    eps, nu, qdd (nv,)      innovations ``T - H z``, ``D^-1 eps``, joint accelerations (7.31)
    """

    P: jnp.ndarray
    P_plus: jnp.ndarray
    tau_bar: jnp.ndarray
    psi: jnp.ndarray
    z: jnp.ndarray
    z_plus: jnp.ndarray
    V: jnp.ndarray
    a: jnp.ndarray
    b: jnp.ndarray
    alpha: jnp.ndarray
    alpha_plus: jnp.ndarray
    log_det_D: jnp.ndarray
    G: jnp.ndarray
    K: jnp.ndarray
    D: jnp.ndarray
    eps: jnp.ndarray
    nu: jnp.ndarray
    qdd: jnp.ndarray


def velocity_terms(model, q, qd, f_ext=None) -> VelocityTerms:
    """Pass 0 of the forward dynamics (Alg 7.2): ``V(k) = phi*(parent, k) V(parent) + H*(k) qd(k)`` by a down sweep
    (`jaxmb.kinematics.velocity_step`), ``a(k) = V(k) x H*(k) qd(k)`` and ``b(k) = V-bar(k) M(k) V(k) - f_ext(k)``
    (2.28), as `VelocityTerms`."""
    X = joint_poses(model, q)
    H = hinge_map(model)
    vJ = hinge_motion(model, H, qd)
    V = down(model.topology, velocity_step, jnp.zeros(6, X.p.dtype), X, vJ)
    M = body_inertias(model)
    a = cross_motion(V, vJ)  # a(k) = V(k) x H*(k) qd(k)
    b = cross_force(V, mv(M, V))  # b(k) = V-bar(k) M(k) V(k)
    if f_ext is not None:
        b = b - f_ext
    return VelocityTerms(X=X, H=H, M=M, V=V, a=a, b=b)


@eager_jit
def articulated_body(model, q, qd, tau, f_ext=None) -> ArticulatedBody:
    """All articulated-body quantities of the state ``(q, qd, tau)`` in three O(N) sweeps (Alg 7.2).

    Args: q (nq,), qd (nv,), tau (nv,), f_ext (nb, 6) or None (body coordinates, about the body origins).
    Under ``jit``, outputs that are not used are not computed.
    """
    check_shapes(model, q=q, qd=qd, tau=tau, f_ext=f_ext)
    topo = model.topology
    X, H, M, V, a, b = velocity_terms(model, q, qd, f_ext)  # pass 0
    body, dof = up(topo, articulated_step, ToParent.zero(X.p.dtype), X, M, a, b,
                   dofs=(H, tau, model.armature))  # pass 1
    alpha, qdd = down(topo, acceleration_step, base_acceleration(model), X, a, dofs=(dof.G, dof.nu, H))  # pass 2
    alpha_plus = alpha - hinge_motion(model, H, qdd) - a
    return ArticulatedBody(P=body.P, P_plus=body.P_plus, tau_bar=body.tau_bar, psi=body.psi, z=body.z,
                           z_plus=body.z_plus, V=V, a=a, b=b, alpha=alpha, alpha_plus=alpha_plus,
                           log_det_D=body.log_det_D, G=dof.G, K=dof.K, D=dof.D, eps=dof.eps, nu=dof.nu, qdd=qdd)


class ArticulatedInertias(NamedTuple):
    """The articulated-body quantities that depend on ``q`` alone, as in `ArticulatedBody`: P, P_plus, tau_bar, psi
    (nb, 6, 6), log_det_D (nb,), G, K, D (nv, 6)."""

    P: jnp.ndarray
    P_plus: jnp.ndarray
    tau_bar: jnp.ndarray
    psi: jnp.ndarray
    log_det_D: jnp.ndarray
    G: jnp.ndarray
    K: jnp.ndarray
    D: jnp.ndarray


@eager_jit
def articulated_inertias(model, q) -> ArticulatedInertias:
    """Pass 1 of Alg 7.2 without the residual forces: the articulated inertias and gains of ``q`` (nq,), what the
    mass matrix's factors and inverse and the operational-space compliances take (`jaxmb.dynamics.factorization`,
    `jaxmb.dynamics.opspace`). The same values as `articulated_body` at any velocity and forces, without its
    velocity sweep and residual forces, which XLA would compute on zeros at rest."""
    check_shapes(model, q=q)
    X, M = joint_poses(model, q), body_inertias(model)
    body, dof = up(model.topology, inertia_step, jnp.zeros((6, 6), X.p.dtype), X, M,
                   dofs=(hinge_map(model), model.armature))
    return ArticulatedInertias(P=body.P, P_plus=body.P_plus, tau_bar=body.tau_bar, psi=body.psi,
                               log_det_D=body.log_det_D, G=dof.G, K=dof.K, D=dof.D)


def solve_factored(model, X, H, G, D, x):
    """``(M^-1 x, phi* H* M^-1 x)`` ((nv,), (nb, 6)) from the factors ``G, D`` (`ArticulatedInertias`) (7.18): an up
    sweep for ``nu = D^-1 [I - H psi K] x``, then pass 2 of Alg 7.2 with ``a = 0`` from a still world for
    ``y = [I - H psi K]* nu``, whose body accelerations are ``phi* H* y``. Vectors only; symmetric in ``x``, as
    ``M^-1`` is."""
    topo, zero = model.topology, jnp.zeros(6, x.dtype)
    _, nu = up(topo, innovations_step, zero, X, dofs=(H, G, D, x))
    alpha, y = down(topo, acceleration_step, zero, X, jnp.zeros((model.nb, 6), x.dtype), dofs=(G, nu, H))
    return y, alpha


_accelerations_batched = vmap_in_cpu_chunks(
    lambda model, q, qd, tau, f_ext: articulated_body(model, q, qd, tau, f_ext).qdd, batched=fused.batched_rule)


def _factors(model, q, qd, tau, f_ext):
    """``qdd``, the factors ``G, D`` that the derivative rule's ``M^-1`` needs, and the body velocities and
    accelerations that Newton-Euler's adjoint needs."""
    ab = articulated_body(model, q, qd, tau, f_ext)
    return ab.qdd, ab.G, ab.D, ab.V, ab.alpha


_factors_batched = vmap_in_cpu_chunks(_factors)


@jax.custom_jvp
def _accelerations(model, q, qd, tau, f_ext):
    return _accelerations_batched(model, q, qd, tau, f_ext)


def _accelerations_jvp(primals, tangents):
    """``d qdd = M^-1 (d tau - d ID)``: ``d ID`` the derivative of Newton-Euler at the fixed ``qdd`` along the
    tangents of ``(model, q, qd, f_ext)`` that are not symbolic zeros, ``M^-1`` by the factors ``G, D``
    (`solve_factored`). Its transpose is ``lambda = M^-1 ct`` (symmetric) followed by Newton-Euler's adjoint at
    ``-lambda``, whose force cotangents ``u = -phi* H* lambda`` the solve's down sweep computes on the way."""
    model, q, qd, tau, f_ext = primals
    qdd, G, D, V, alpha = _factors_batched(model, q, qd, tau, f_ext)
    live, dots = live_tangents((model, q, qd, f_ext), tangents[:3] + tangents[4:])
    tau_dot = None if isinstance(tangents[3], SymbolicZero) else tangents[3]
    has_tau_dot = tau_dot is not None  # static: the transpose returns a cotangent for tau only then
    n_state = len(jax.tree.leaves((model, q, qd)))
    live_id = [i if i < n_state else i + 1 for i in live]  # in (model, q, qd, qdd, f_ext), Newton-Euler's order
    if not live and not has_tau_dot:
        return qdd, jnp.zeros_like(qdd)

    def newton_euler(res):  # Newton-Euler as a function of the live leaves of (model, q, qd, f_ext), at qdd
        model, q, qd, f_ext, qdd = res[:5]
        return of_live(lambda *args: joint_forces(*args[:3], qdd, args[3]), (model, q, qd, f_ext), live)

    def solve(res, x):
        model, q = res[:2]
        return solve_factored(model, joint_poses(model, q), hinge_map(model), res[5], res[6], x)

    def tangent(res, lin):
        id_dots, d_tau = lin
        r = -jax.jvp(*newton_euler(res), id_dots)[1] if live else 0
        return solve(res, r if d_tau is None else d_tau + r)[0]

    def transpose(res, ct):
        lam, phi_H_lam = solve(res, ct)  # M^-1 ct, and phi* H* M^-1 ct
        if not live:
            return [], lam
        model, q, qd, f_ext, qdd, _, _, V, alpha = res
        ct_id = newton_euler_vjp((model, q, qd, qdd, f_ext), live_id, -lam, motion=(V, alpha, -phi_H_lam))
        return ct_id, lam if has_tau_dot else None

    res = (model, q, qd, f_ext, qdd, G, D, V, alpha)
    return qdd, linear_in_cpu_chunks(tangent, transpose, res, (dots, tau_dot))


_accelerations.defjvp(_accelerations_jvp, symbolic_zeros=True)


@eager_jit
def forward_dynamics(model, q, qd, tau, f_ext=None):
    """Joint accelerations ``qdd = M^-1 (tau - C(q, qd) + J* f_ext)`` (nv,) by the articulated-body algorithm,
    ``M`` including the armature. Differentiable in every argument and model parameter, in forward and reverse
    mode, by the implicit function theorem on Newton-Euler (module docstring).

    Args: q (nq,), qd (nv,), tau (nv,), f_ext (nb, 6) or None (body coordinates, about the body origins).
    """
    return _accelerations(model, q, qd, tau, f_ext)
