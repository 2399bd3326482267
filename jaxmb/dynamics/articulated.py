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
gradient costs the forward call and three vector sweeps: 2.7-2.9x the forward call on talos, against 5-5.5x through
the sweeps (benchmarks/README.md).

Under `jax.vmap` on the CPU, a batch is computed in chunks of 128 states with the batch as the last axis
(`jaxmb.batching.vmap_in_cpu_chunks`): talos at batch 4096 in float32 runs at 7 us/state, against 12 through one
`vmap` in chunks of 1024. The tangent map and its transpose are chunked the same way
(`jaxmb.batching.linear_in_cpu_chunks`), so the gradients of a batch are as well. On a GPU, a batch of a model
whose joints below its roots are screw joints runs as the fused Pallas kernels of `jaxmb.dynamics.fused` (talos
with a fixed base 4.6x faster on an H200); derivatives keep the rule above.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

from jaxmb.batching import eager_jit, linear_in_cpu_chunks, live_tangents, of_live, vmap_in_cpu_chunks
from jaxmb.dynamics import fused
from jaxmb.dynamics.adjoint import newton_euler_vjp
from jaxmb.dynamics.inverse import joint_forces
from jaxmb.hinges import base_acceleration, body_inertias, hinge_map, hinge_motion, joint_poses
from jaxmb.kinematics import _velocity_step
from jaxmb.model import check_shapes
from jaxmb.spatial import cross_force, cross_motion, inverse3, mm, mv, phi, phi_congruence, phi_star, swap
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


def _ldl(D):
    """``D = L diag(d) L*`` of a small symmetric positive definite ``D`` (..., n, n), unrolled: ``L[i, j]`` (i > j)
    and ``d[j]`` as arrays (...). Elementwise operations only, so XLA vectorizes it over the batch, where a batched
    LAPACK call loops over it."""
    n = D.shape[-1]
    L, d = {}, []
    for j in range(n):
        d.append(D[..., j, j] - sum(L[j, k] * L[j, k] * d[k] for k in range(j)))
        for i in range(j + 1, n):
            L[i, j] = (D[..., i, j] - sum(L[i, k] * L[j, k] * d[k] for k in range(j))) / d[j]
    return L, d


def _solve_blocks(D, x):
    """`solve_log_det` for n = 6 by 3x3 blocks ``D = [[A, B], [B*, C]]``: the Schur complement ``S = A - B C^-1 B*``
    eliminates ``C`` (the translational block of an articulated inertia, well conditioned), and
    ``log det D = log det C + log det S``. Two 3x3 inverses and six small products in place of a 6x6 ``L D L*``,
    whose 27 dependent scalars XLA compiles as about 20 loops: the talos ABA compiles 0.5-0.7 s faster at the same
    speed and accuracy (benchmarks/README.md, "Compile time")."""
    A, B, C = D[..., :3, :3], D[..., :3, 3:], D[..., 3:, 3:]
    x1, x2 = x[..., :3, :], x[..., 3:, :]
    Ci, det_C = inverse3(C)
    BCi = mm(B, Ci)
    S = A - mm(BCi, swap(B))
    Si, det_S = inverse3(S)
    z1 = mm(Si, x1 - mm(BCi, x2))  # S z1 = x1 - B C^-1 x2
    z2 = mm(Ci, x2) - mm(swap(BCi), z1)  # z2 = C^-1 (x2 - B* z1), C symmetric
    return jnp.concatenate([z1, z2], -2), jnp.log(det_C) + jnp.log(det_S)


def solve_log_det(D, x):
    """``(D^-1 x, log det D)`` for a small symmetric positive definite ``D`` (n, n) and ``x`` (n, c), from one
    factorization: a division for the common n = 1, 3x3 blocks for a 6-dof joint (`_solve_blocks`), an unrolled
    ``L D L*`` solve otherwise."""
    n = D.shape[-1]
    if n == 1:
        return x / D, jnp.log(D[..., 0, 0])
    if n == 6:
        return _solve_blocks(D, x)
    L, d = _ldl(D)
    y = []
    for i in range(n):  # L y = x
        y.append(x[..., i, :] - sum(L[i, k][..., None] * y[k] for k in range(i)))
    z = [None] * n
    for i in reversed(range(n)):  # L* z = diag(d)^-1 y
        z[i] = y[i] / d[i][..., None] - sum(L[k, i][..., None] * z[k] for k in range(i + 1, n))
    return jnp.stack(z, -2), sum(jnp.log(dj) for dj in d)


def solve_small(D, x):
    """``D^-1 x`` for a small symmetric positive definite ``D`` (n, n) and ``x`` (n, c) (`solve_log_det`)."""
    return solve_log_det(D, x)[0]


def _gains(P, X_k, H_k, A_k, eps=None):
    """What pass 1 derives from a body's articulated inertia ``P(k)`` (6, 6): ``D(k)``, the gain ``G(k)``, ``P+``,
    ``tau_bar``, ``psi``, ``K`` and ``log det D``, and with the innovations ``eps`` (n,) also ``nu = D^-1 eps``,
    from the same factors of ``D``. Returns ``(G, nu, log_det_D, D_rows, P_plus, tau_bar, psi, K)``, ``nu`` None
    without ``eps``."""
    n = H_k.shape[0]
    PH = mm(P, H_k.T)  # P(k) H*(k)                                              (6, n)
    D = mm(H_k, PH) + jnp.diag(A_k)  # D(k) = H(k) P(k) H*(k) + diag(armature(k))  (6.13)
    rhs = PH.T if eps is None else jnp.concatenate([PH.T, eps[:, None]], 1)
    Dinv, log_det_D = solve_log_det(D, rhs)  # D^-1 [H P, eps], one factorization
    G = swap(Dinv[:, :6])  # G(k) = P(k) H*(k) D^-1(k), the Kalman gain  (6, n)
    nu = None if eps is None else Dinv[:, 6]  # nu(k) = D^-1(k) eps(k)
    tau_bar = jnp.eye(6, dtype=P.dtype) - mm(G, H_k)  # tau_bar(k) = I - G(k) H(k)            (6.16)
    P_plus = P - mm(G, PH.T)  # P+(k) = tau_bar(k) P(k) = P - G H P
    psi = swap(phi(X_k, swap(tau_bar)))  # psi(parent, k) = phi(parent, k) tau_bar(k)        (6.29)
    K = phi(X_k, G.T)  # K(parent, k) = phi(parent, k) G(k), by columns                         (6.36)
    D_rows = jnp.pad(D, ((0, 0), (0, 6 - n)))
    return G, nu, log_det_D, D_rows, P_plus, tau_bar, psi, K


def _articulated_step(children, X_k, M_k, a_k, b_k, H_k, T_k, A_k):
    P_children, z_children = children
    P = P_children + M_k  # P(k) = sum_j phi(k, j) P+(j) phi*(k, j) + M(k)          (6.28)
    z = z_children + mv(P, a_k) + b_k  # z(k) = sum_j phi(k, j) z+(j) + P a(k) + b(k)    (7.42)
    eps = T_k - mv(H_k, z)  # eps(k) = T(k) - H(k) z(k)
    G, nu, log_det_D, D_rows, P_plus, tau_bar, psi, K = _gains(P, X_k, H_k, A_k, eps)
    z_plus = z + mv(G, eps)  # z+(k) = z(k) + G(k) eps(k)
    to_parent = (phi_congruence(X_k, P_plus), phi(X_k, z_plus))
    return to_parent, (P, P_plus, tau_bar, psi, z, z_plus, log_det_D), (G.T, K, D_rows, eps, nu)


def _inertia_step(P_children, X_k, M_k, H_k, A_k):
    P = P_children + M_k  # (6.28)
    G, _, log_det_D, D_rows, P_plus, tau_bar, psi, K = _gains(P, X_k, H_k, A_k)
    return phi_congruence(X_k, P_plus), (P, P_plus, tau_bar, psi, log_det_D), (G.T, K, D_rows)


def velocity_terms(model, q, qd, f_ext=None):
    """Pass 0 of the forward dynamics: joint poses ``X``, hinge map ``H`` (nv, 6), body inertias ``M``
    (nb, 6, 6), body velocities ``V`` and the Coriolis and gyroscopic terms ``a``, ``b`` (nb, 6), ``b`` less
    ``f_ext``."""
    X = joint_poses(model, q)
    H = hinge_map(model)
    vJ = hinge_motion(model, H, qd)
    V = down(model.topology, _velocity_step, jnp.zeros(6, X.p.dtype), X, vJ)
    M = body_inertias(model)
    a = cross_motion(V, vJ)  # a(k) = V(k) x H*(k) qd(k)
    b = cross_force(V, mv(M, V))  # b(k) = V-bar(k) M(k) V(k)
    if f_ext is not None:
        b = b - f_ext
    return X, H, M, V, a, b


def _acceleration_step(alpha_parent, X_k, a_k, G_k, nu_k, H_k):
    alpha_plus = phi_star(X_k, alpha_parent)  # alpha+(k) = phi*(parent, k) alpha(parent)
    qdd = nu_k - mv(G_k, alpha_plus)  # qdd(k) = nu(k) - G*(k) alpha+(k)            (7.31)
    alpha = alpha_plus + mv(H_k.T, qdd) + a_k  # alpha(k) = alpha+(k) + H*(k) qdd(k) + a(k)
    return alpha, qdd


@eager_jit
def articulated_body(model, q, qd, tau, f_ext=None) -> ArticulatedBody:
    """All articulated-body quantities of the state ``(q, qd, tau)`` in three O(N) sweeps (Alg 7.2).

    Args: q (nq,), qd (nv,), tau (nv,), f_ext (nb, 6) or None (body coordinates, about the body origins).
    Under ``jit``, outputs that are not used are not computed.
    """
    check_shapes(model, q=q, qd=qd, tau=tau, f_ext=f_ext)
    topo = model.topology
    X, H, M, V, a, b = velocity_terms(model, q, qd, f_ext)  # pass 0
    zero = (jnp.zeros((6, 6), X.p.dtype), jnp.zeros(6, X.p.dtype))
    body, dof = up(topo, _articulated_step, zero, X, M, a, b, dofs=(H, tau, model.armature))  # pass 1
    P, P_plus, tau_bar, psi, z, z_plus, log_det_D = body
    G, K, D, eps, nu = dof
    alpha, qdd = down(topo, _acceleration_step, base_acceleration(model), X, a, dofs=(G, nu, H))  # pass 2
    alpha_plus = alpha - hinge_motion(model, H, qdd) - a
    return ArticulatedBody(P, P_plus, tau_bar, psi, z, z_plus, V, a, b, alpha, alpha_plus, log_det_D, G, K, D, eps, nu,
                           qdd)


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
    body, dof = up(model.topology, _inertia_step, jnp.zeros((6, 6), X.p.dtype), X, M,
                   dofs=(hinge_map(model), model.armature))
    return ArticulatedInertias(*body, *dof)


def _innovations_step(z_children, X_k, H_k, G_k, D_k, x_k):
    n = H_k.shape[0]
    eps = x_k - mv(H_k, z_children)  # eps(k) = x(k) - H(k) z(k), z(k) = sum_j phi(k, j) z+(j)
    nu = solve_small(D_k[:, :n], eps[:, None])[:, 0]  # nu(k) = D^-1(k) eps(k)
    z_plus = z_children + mv(G_k.T, eps)  # z+(k) = z(k) + G(k) eps(k)
    return phi(X_k, z_plus), z_plus, nu


def solve_factored(model, X, H, G, D, x):
    """``(M^-1 x, phi* H* M^-1 x)`` ((nv,), (nb, 6)) from the factors ``G, D`` (`ArticulatedInertias`) (7.18): an up
    sweep for ``nu = D^-1 [I - H psi K] x``, then pass 2 of Alg 7.2 with ``a = 0`` from a still world for
    ``y = [I - H psi K]* nu``, whose body accelerations are ``phi* H* y``. Vectors only; symmetric in ``x``, as
    ``M^-1`` is."""
    topo, zero = model.topology, jnp.zeros(6, x.dtype)
    _, nu = up(topo, _innovations_step, zero, X, dofs=(H, G, D, x))
    alpha, y = down(topo, _acceleration_step, zero, X, jnp.zeros((model.nb, 6), x.dtype), dofs=(G, nu, H))
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
