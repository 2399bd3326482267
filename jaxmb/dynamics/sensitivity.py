"""Sensitivities of the articulated-body quantities (book ch. 18): the rates of the articulated inertias along a
motion (Alg 18.1) and the gradient of ``log det M(q)`` in O(N) as the derivative rule of `log_det_mass_matrix`.

Rates (Alg 18.1, (18.42)-(18.49), as corrected in the digest of the book). With the hinge motion
``Delta(k) = H*(k) qd(k) = [Delta_w; Delta_v]``, ``Delta^w = [Delta_w; 0]``, ``Delta^v = [0; Delta_v]``, the motion
cross matrix ``x~`` (`motion_cross_matrix`) and the force cross matrix ``x-bar = -(x~)*`` (`force_cross_matrix`),
one up sweep after the articulated-body sweep gives::

    P_check(k)      = sum_children phi(k, j) P_check_plus(j) phi*(k, j)
    lambda_check(k) = P_check(k) + Delta^w~(k) P(k) - P(k) Delta^w~(k)             (18.42)
    P_check_plus(k) = tau_bar P_check tau_bar* + Delta-bar(k) P+(k) + P+(k) Delta-bar*(k)
    D_dot(k)        = H(k) P_check(k) H*(k)

``P_check(k)`` is the rate of ``P(k)`` in body coordinates (``M(k)`` is constant there) and ``P_check_plus`` that of
``P+(k)`` moved across the moving joint; for screw joints without armature it equals the book's
``tau_bar lambda_check tau_bar* + Delta^v-bar P+ - P+ Delta^v~``, and it holds for every joint kind and with armature.
``D_dot`` is the time derivative of ``D(k)``; ``lambda_check(k)`` is the rate seen from the parent's side of hinge
k, and for a screw joint ``H lambda_check H* = H P_check H*``, the book's form (the hinge motion's cross terms vanish
on ``H*``).
With ``qd = e_i`` it is the sensitivity ``lambda_check_theta_i`` of (18.54)-(18.55), and for screw joints
``d log det M / d q_i = sum_k Tr{D^-1(k) H(k) lambda_check_theta_i(k) H*(k)}`` (18.66), one sweep per coordinate.

The gradient of ``log det M`` in one up and one down sweep. ``log det M = sum_k log det D(k)`` (9.53) is a function
of the articulated inertias ``P(k)``; its adjoint with respect to ``P(k)``, carried from the root down through
``P(parent) = M(parent) + sum_k phi P+(k) phi*`` and ``P+ = tau_bar P tau_bar* + ...`` (whose derivative in ``P`` is
``tau_bar dP tau_bar*``), obeys ``W(k) = H* D^-1 H + psi*(parent, k) W(parent) psi(parent, k)``: the recursion of
``Upsilon(k)`` (10.16), so ``W = Upsilon`` (`jaxmb.dynamics.opspace.upsilon`). Each parameter then enters where it
acts on the tree, with ``Upsilon+(k) = phi*(parent, k) Upsilon(parent) phi(parent, k)`` (zero at a root)::

    d log det M = sum_k  2 Tr{Upsilon(parent) d phi(parent, k) P+(k) phi*(parent, k)}     joint poses X(q)
                       +   Tr{Upsilon(k) dM(k)}                                          body inertias
                       + 2 Tr{dH(k) [I - P tau_bar* Upsilon+](k) G(k)}                   hinge maps
                       +   sum_j darmature_j [D^-1 + G* Upsilon+ G](k)_jj                 armature

One down sweep of ``Upsilon`` (`adjoint_step`) gives all four adjoints, body by body. The derivative rule of
`log_det_mass_matrix` computes them with the value and pulls them back through the joint poses, body inertias,
hinge maps and armature as functions of ``(model, q)`` (no sweep): the gradient in every live argument, which it
contracts with the tangents. The adjoint of the joint pose is exact for any ``R``, so the rule's own derivatives
(Hessians, in any direction of ``q``, unit quaternions or not) are those of the sweep.

For a motion of joint k along its hinge, ``d phi(parent, k) = phi(parent, k) h-bar`` with ``h = H*(k) e_j``, so
``d log det M / d theta_j = 2 Tr{Upsilon+(k) h-bar P+(k)} = h . f(k)``, ``f = [axial(S_11 + S_22); axial(S_12)]``
of ``S = 2 Upsilon+ P+`` in 3x3 blocks (`log_det_mass_matrix_gradient`): the (18.68) of the book with ``P+`` and
``Upsilon+`` taken on the parent's side of the hinge, which holds for every joint kind, in the tangent coordinates
of `jaxmb.integrate`. The gradient of the Fixman potential ``1/2 log det M`` is half of it.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxmb.batching import eager_jit, in_cpu_chunks, live_tangents, of_live, take_rows, vmap_in_cpu_chunks
from jaxmb.dynamics.ab_steps import solve_small
from jaxmb.dynamics.articulated import articulated_inertias
from jaxmb.hinges import body_inertias, hinge_map, hinge_motion, joint_poses
from jaxmb.model import check_shapes
from jaxmb.spatial import Transform, dot, mm, phi_congruence, skew, swap
from jaxmb.sweeps import down, up


def motion_cross_matrix(x):
    """``x~ = [[w~, 0], [v~, w~]]`` (6, 6) of a motion vector ``x = [w; v]`` (6,): ``x~ m = x x m`` (1.23)."""
    w, v = skew(x[..., :3]), skew(x[..., 3:])
    return jnp.concatenate([jnp.concatenate([w, jnp.zeros_like(w)], -1), jnp.concatenate([v, w], -1)], -2)


def force_cross_matrix(x):
    """``x-bar = -(x~)* = [[w~, v~], [0, w~]]`` (6, 6) of ``x = [w; v]`` (6,): ``x-bar f = x x* f`` (1.25)."""
    w, v = skew(x[..., :3]), skew(x[..., 3:])
    return jnp.concatenate([jnp.concatenate([w, v], -1), jnp.concatenate([jnp.zeros_like(w), w], -1)], -2)


def angular_part(x):
    """``[w; 0]`` of ``x = [w; v]``."""
    return jnp.concatenate([x[..., :3], jnp.zeros_like(x[..., 3:])], -1)


def linear_part(x):
    """``[0; v]`` of ``x = [w; v]``."""
    return jnp.concatenate([jnp.zeros_like(x[..., :3]), x[..., 3:]], -1)


# -- Alg 18.1: rates of the articulated inertias --------------------------------------------------------------------


class BodyRates(NamedTuple):
    """Alg 18.1's quantities of one body: ``P_check``, ``lambda_check`` and ``P_check_plus`` (6, 6), body
    coordinates."""

    P_check: jnp.ndarray
    lambda_check: jnp.ndarray
    P_check_plus: jnp.ndarray


class RateStep(NamedTuple):
    """`inertia_rate_step`'s result, as `jaxmb.sweeps.up` takes it: ``phi P_check_plus phi*`` (6, 6) to the parent,
    `BodyRates`, and the rows of ``D_dot(k) = H P_check H*`` (n, 6), padded with zero columns to 6."""

    to_parent: jnp.ndarray
    body: BodyRates
    D_dot: jnp.ndarray


def inertia_rate_step(P_check, X_k, P_k, P_plus_k, tau_bar_k, Delta_k, H_k) -> RateStep:
    """Alg 18.1 at body k, from its children's sum ``P_check`` (6, 6), its articulated inertias ``P_k``,
    ``P_plus_k``, ``tau_bar_k`` (6, 6) and its hinge motion ``Delta_k = H*(k) qd(k)`` (6,)."""
    Dw = motion_cross_matrix(angular_part(Delta_k))
    lam = P_check + mm(Dw, P_k) - mm(P_k, Dw)  # lambda_check = P_check + Delta^w~ P - P Delta^w~        (18.42)
    Delta_bar = force_cross_matrix(Delta_k)
    # P_check_plus = tau_bar P_check tau_bar* + Delta-bar P+ + P+ Delta-bar*: the rate of P+ moved across the joint
    P_check_plus = (mm(mm(tau_bar_k, P_check), swap(tau_bar_k))
                    + mm(Delta_bar, P_plus_k) + mm(P_plus_k, swap(Delta_bar)))
    D_dot = mm(mm(H_k, P_check), H_k.T)  # D_dot(k) = H P_check H*
    return RateStep(to_parent=phi_congruence(X_k, P_check_plus), body=BodyRates(P_check, lam, P_check_plus),
                    D_dot=jnp.pad(D_dot, ((0, 0), (0, 6 - H_k.shape[0]))))


class InertiaRates(NamedTuple):
    """Alg 18.1 at one state: ``P_check``, ``lambda_check``, ``P_check_plus`` (nb, 6, 6) and ``D_dot`` (nv, 6), row
    j the row of ``D_dot(k)`` for coordinate j in its first nv_k entries (as `ArticulatedBody.D`)."""

    P_check: jnp.ndarray
    lambda_check: jnp.ndarray
    P_check_plus: jnp.ndarray
    D_dot: jnp.ndarray


@eager_jit
def articulated_inertia_rates(model, q, qd) -> InertiaRates:
    """The rates of the articulated inertias along the motion ``qd`` (nv,) at ``q`` (nq,) (Alg 18.1): the
    articulated-body sweep, then one up sweep. Linear in ``qd``; ``D_dot`` is ``d D(k) / dt``."""
    check_shapes(model, q=q, qd=qd)
    ab = articulated_inertias(model, q)
    X, H = joint_poses(model, q), hinge_map(model)
    Delta = hinge_motion(model, H, qd)
    (P_check, lam, P_check_plus), D_dot = up(model.topology, inertia_rate_step, jnp.zeros((6, 6), X.p.dtype), X, ab.P,
                                    ab.P_plus, ab.tau_bar, Delta, dofs=(H,))
    return InertiaRates(P_check=P_check, lambda_check=lam, P_check_plus=P_check_plus, D_dot=D_dot)


# -- d log det M / dq in O(N) ---------------------------------------------------------------------------------------


def _axial(A):
    """The vector ``a`` (3,) with ``<A, x~> = a . x`` for every ``x`` (3,), ``<A, B> = Tr(A* B)``: the axial vector
    of ``A - A*``."""
    return jnp.stack([A[2, 1] - A[1, 2], A[0, 2] - A[2, 0], A[1, 0] - A[0, 1]])


class Adjoints(NamedTuple):
    """`adjoint_step`'s result at one body, the down sweep's value: ``Upsilon`` (6, 6), the derivative of
    ``log det M`` in the joint pose ``X = (R, p)`` (Transform), and the force ``f`` (6,) with
    ``<f, x> = 2 Tr{Upsilon+ x-bar P+}`` for a motion ``x`` of the joint (module docstring)."""

    Y: jnp.ndarray
    pose: Transform
    f: jnp.ndarray


def _top_and_diagonal(A11, A12, A21, A22, P):
    """The blocks 11, 12 and 22 of ``[[A11, A12], [A21, A22]] P`` for a symmetric ``P`` (6, 6), in 3x3 blocks."""
    Pa, Pb, Pc = P[:3, :3], P[:3, 3:], P[3:, 3:]
    return mm(A11, Pa) + mm(A12, swap(Pb)), mm(A11, Pb) + mm(A12, Pc), mm(A21, Pb) + mm(A22, Pc)


def adjoint_step(parent, X_k, P_k, P_plus_k, tau_bar_k, H_k, G_k, D_k):
    """One step of the adjoint sweep of ``log det M`` at body k (module docstring): ``Upsilon(k)`` from
    ``Upsilon(parent)`` (Alg 10.3, (10.16)), and the derivatives of ``log det M`` in the joint's pose, its hinge
    map and its armature. Returns `Adjoints` and, per coordinate, the rows of ``2 [I - P tau_bar* Upsilon+] G``
    (n, 6) and ``[D^-1 + G* Upsilon+ G]_jj`` (n,).

    In 3x3 blocks, with ``phi(parent, k) = [[R, p~ R], [0, R]]`` (1.31): ``T = Upsilon(parent) phi``,
    ``Upsilon+ = phi* T`` and ``C = 2 T P+``, the derivative of ``sum Tr{Upsilon(parent) phi P+ phi*}`` in
    ``phi``, whence ``d/dR = C_11 + C_22 - p~ C_12`` and ``d/dp = axial(C_12 R*)``, for any ``R``."""
    n = H_k.shape[0]
    R, pt, Y = X_k.R, skew(X_k.p), parent.Y
    Ya, Yb, Yc = Y[:3, :3], Y[:3, 3:], Y[3:, 3:]
    T11, T12 = mm(Ya, R), mm(mm(Ya, pt) + Yb, R)
    T21, T22 = mm(swap(Yb), R), mm(mm(swap(Yb), pt) + Yc, R)
    Y12 = mm(swap(R), T12)
    Y11, Y22 = mm(swap(R), T11), mm(swap(R), T22 - mm(pt, T12))
    Y_plus = jnp.concatenate([jnp.concatenate([Y11, Y12], -1), jnp.concatenate([swap(Y12), Y22], -1)], -2)
    Z = mm(Y_plus, G_k.T)  # Upsilon+ G                                                                   (6, n)
    L = solve_small(D_k[:, :n], jnp.eye(n, dtype=Z.dtype)) + mm(G_k, Z)  # D^-1 + G* Upsilon+ G         (n, n)
    U = mm(L, H_k) - Z.T
    Y = Y_plus + mm(H_k.T, U) - mm(Z, H_k)  # Upsilon(k) = psi* Upsilon(parent) psi + H* D^-1 H       (10.16)
    C11, C12, C22 = (2.0 * c for c in _top_and_diagonal(T11, T12, T21, T22, P_plus_k))
    pose = Transform(R=C11 + C22 - mm(pt, C12), p=_axial(mm(C12, swap(R))))
    S11, S12, S22 = (2.0 * c for c in _top_and_diagonal(Y11, Y12, swap(Y12), Y22, P_plus_k))  # 2 Upsilon+ P+
    f = jnp.concatenate([_axial(S11 + S22), _axial(S12)])  # <S, x-bar>, x-bar = [[w~, v~], [0, w~]]
    hinge = 2.0 * (G_k - mm(mm(Z.T, tau_bar_k), P_k))  # rows of 2 [I - P tau_bar* Upsilon+] G
    return Adjoints(Y, pose, f), (hinge, jnp.diagonal(L))


def _adjoint_sweep(model, X, H, ab):
    """`adjoint_step` from the base to the tips, on the articulated-body quantities ``ab`` of ``X, H``: `Adjoints`
    (nb, ...), the hinge rows (nv, 6) and the armature's (nv,)."""
    dt = ab.P.dtype
    zero = Adjoints(jnp.zeros((6, 6), dt), Transform(jnp.zeros((3, 3), dt), jnp.zeros(3, dt)), jnp.zeros(6, dt))
    return down(model.topology, adjoint_step, zero, X, ab.P, ab.P_plus, ab.tau_bar, dofs=(H, ab.G, ab.D))


@eager_jit
def log_det_mass_matrix_gradient(model, q):
    """``d log det M / d theta`` (nv,) in O(N): ``2 Tr{Upsilon+(k) h_j-bar P+(k)} = h_j . f(k)`` for coordinate j
    of joint k, ``h_j = H*(k) e_j`` (module docstring). Tangent coordinates, as
    `jaxmb.integrate` moves: component j is ``d/ds log det M(integrate(q, e_j, s))`` at ``s = 0`` (``d / d q_j``
    for screw joints). ``M`` includes the armature; the gradient of a free base is zero (``M`` does not depend on
    the base's pose). Under ``jax.vmap`` on the CPU a batch is computed in chunks with the batch last
    (`jaxmb.batching.in_cpu_chunks`)."""
    check_shapes(model, q=q)
    return _gradient_in_chunks(model, q)


def _gradient(model, q):
    X, H = joint_poses(model, q), hinge_map(model)
    adj, _ = _adjoint_sweep(model, X, H, articulated_inertias(model, q))
    return dot(H, take_rows(adj.f, model.topology.dof_body))


_gradient_in_chunks = in_cpu_chunks(_gradient)


def _per_body(model, q):
    """What ``log det M`` depends on, the tree's sweeps aside: the joint poses ``X`` (Transform, nb), the body
    inertias ``M(k)`` (nb, 6, 6), the hinge maps ``H`` (nv, 6) and the armature (nv,)."""
    return joint_poses(model, q), body_inertias(model), hinge_map(model), model.armature


def _log_det_and_gradient(model, q, live):
    """``log det M`` and its gradient in the leaves ``live`` of the flattened ``(model, q)``: the two sweeps give
    its derivatives in each of `_per_body`'s quantities (module docstring), which are pulled back through
    `_per_body`, no sweep."""
    X, _, H, _ = _per_body(model, q)
    ab = articulated_inertias(model, q)
    adj, (hinge, armature_adjoint) = _adjoint_sweep(model, X, H, ab)
    fun, args = of_live(_per_body, (model, q), live)
    return jnp.sum(ab.log_det_D), jax.vjp(fun, *args)[1]((adj.pose, adj.Y, hinge, armature_adjoint))


_log_det_in_chunks = vmap_in_cpu_chunks(lambda model, q: jnp.sum(articulated_inertias(model, q).log_det_D))


@jax.custom_jvp
def _log_det(model, q):
    return _log_det_in_chunks(model, q)


def _log_det_jvp(primals, tangents):
    """The tangent of ``log det M`` along the live tangents of ``(model, q)``: the gradient in those leaves
    (`_log_det_and_gradient`, two sweeps, batched in chunks), contracted with the tangents. Linear in them, so
    reverse mode transposes it."""
    model, q = primals
    live, dots = live_tangents(primals, tangents)
    if not live:
        value = _log_det_in_chunks(model, q)
        return value, jnp.zeros_like(value)
    value, grads = in_cpu_chunks(functools.partial(_log_det_and_gradient, live=tuple(live)))(model, q)
    return value, sum(jnp.sum(g * d) for g, d in zip(grads, dots))


_log_det.defjvp(_log_det_jvp, symbolic_zeros=True)


@eager_jit
def log_det_mass_matrix(model, q):
    """``log det M(q) = sum_k log det D(k)`` (9.53), ``M`` including the armature, whose derivatives in ``q`` and
    in every model parameter take one up and one down sweep, O(N), in any mode (module docstring), rather than
    automatic differentiation through the articulated-body sweep. The value is that of
    `jaxmb.dynamics.factorization.log_det_mass_matrix`."""
    check_shapes(model, q=q)
    return _log_det(model, q)
