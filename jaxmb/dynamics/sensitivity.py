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

For a motion of joint k along its hinge, ``d phi(parent, k) = phi(parent, k) h-bar`` with ``h = H*(k) e_j``, so
``d log det M / d theta_j = 2 Tr{Upsilon+(k) h-bar P+(k)}`` (`log_det_mass_matrix_gradient`): the (18.68) of the
book with ``P+`` and ``Upsilon+`` taken on the parent's side of the hinge, which holds for every joint kind, in the
tangent coordinates of `jaxmb.integrate`. The gradient of the Fixman potential ``1/2 log det M`` is half of it.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import eager_jit, in_cpu_chunks, live_tangents, of_live, take_rows
from jaxmb.dynamics.ab_steps import solve_small
from jaxmb.dynamics.articulated import articulated_inertias
from jaxmb.dynamics.opspace import upsilon
from jaxmb.hinges import body_inertias, hinge_map, hinge_motion, joint_poses
from jaxmb.model import check_shapes
from jaxmb.spatial import mm, phi_congruence, phi_matrix, phi_star_congruence, skew, swap
from jaxmb.sweeps import up


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


def upsilon_plus(model, X, Y):
    """``Upsilon+(k) = phi*(parent, k) Upsilon(parent) phi(parent, k)`` (nb, 6, 6) from ``Upsilon`` (nb, 6, 6);
    zero at a root, whose parent is the world."""
    return phi_star_congruence(X, _at_parents(model, Y))


def _at_parents(model, Y):
    """``Y(parent k)`` (nb, 6, 6), zero where the parent is the world."""
    parent = model.topology.parent
    padded = jnp.concatenate([Y, jnp.zeros((1, 6, 6), Y.dtype)])
    return take_rows(padded, np.where(parent < 0, model.nb, parent))


def _trace_product(A, B):
    """``Tr(A B)`` of (..., 6, 6) matrices, ``B`` symmetric."""
    return jnp.sum(A * B, axis=(-2, -1))


@eager_jit
def log_det_mass_matrix_gradient(model, q):
    """``d log det M / d theta`` (nv,) in O(N): ``2 Tr{Upsilon+(k) h_j-bar P+(k)}`` for coordinate j of joint k,
    ``h_j = H*(k) e_j`` (module docstring). Tangent coordinates, as `jaxmb.integrate` moves: component j is
    ``d/ds log det M(integrate(q, e_j, s))`` at ``s = 0`` (``d / d q_j`` for screw joints). ``M`` includes the
    armature; the gradient of a free base is zero (``M`` does not depend on the base's pose). Under ``jax.vmap``
    on the CPU a batch is computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`)."""
    check_shapes(model, q=q)
    return _gradient_in_chunks(model, q)


def _gradient(model, q):
    ab = articulated_inertias(model, q)
    X, H = joint_poses(model, q), hinge_map(model)
    Y_plus = take_rows(upsilon_plus(model, X, upsilon(model, q)), model.topology.dof_body)  # (nv, 6, 6)
    P_plus = take_rows(ab.P_plus, model.topology.dof_body)
    return 2.0 * _trace_product(mm(Y_plus, force_cross_matrix(H)), P_plus)  # 2 Tr{Upsilon+ h-bar P+}


_gradient_in_chunks = in_cpu_chunks(_gradient)


def _inverse_diagonal(topology, D_rows):
    """The diagonal of ``D(k)^-1`` by coordinate (nv,) from `ArticulatedBody.D`'s rows, the joints of one size
    solved together."""
    parts, order = [], []
    for n in np.unique(topology.nv_body[topology.nv_body > 0]):
        bodies = np.flatnonzero(topology.nv_body == n)
        dofs = (topology.v_offset[bodies][:, None] + np.arange(n)).reshape(-1)
        blocks = take_rows(D_rows, dofs).reshape(len(bodies), n, 6)[..., :n]
        inverse = solve_small(blocks, jnp.broadcast_to(jnp.eye(n, dtype=D_rows.dtype), blocks.shape))
        parts.append(jnp.diagonal(inverse, axis1=-2, axis2=-1).reshape(-1))
        order.append(dofs)
    return take_rows(jnp.concatenate(parts), np.argsort(np.concatenate(order)))


def _log_det_sweep(model, q):
    return jnp.sum(articulated_inertias(model, q).log_det_D)


@jax.custom_jvp
def _log_det(model, q):
    return _log_det_sweep(model, q)


def _per_body(model, q):
    """The quantities of ``(model, q)`` that ``log det M`` depends on, the tree's sweeps aside: joint poses, body
    inertias, hinge maps and armature."""
    return joint_poses(model, q), body_inertias(model), hinge_map(model), model.armature


def _log_det_jvp(primals, tangents):
    """The tangent of ``log det M`` along the live tangents of ``(model, q)`` (module docstring): the tangents of
    the joint poses, body inertias, hinge maps and armature (no sweep), contracted with ``Upsilon`` and the
    articulated-body quantities. Linear in them, so reverse mode transposes it."""
    model, q = primals
    ab = articulated_inertias(model, q)
    value = jnp.sum(ab.log_det_D)
    live, dots = live_tangents(primals, tangents)
    if not live:
        return value, jnp.zeros_like(value)
    Y = upsilon(model, q)
    fun, args = of_live(_per_body, primals, live)
    (X, _, H, _), (dX, dM, dH, dA) = jax.jvp(fun, args, dots)
    topo = model.topology
    Phi, dPhi = jax.jvp(phi_matrix, (X,), (dX,))
    Y_plus = upsilon_plus(model, X, Y)
    poses = 2.0 * jnp.sum(_trace_product(mm(mm(swap(Phi), _at_parents(model, Y)), dPhi), ab.P_plus))
    inertias = jnp.sum(_trace_product(Y, dM))
    B = jnp.eye(6, dtype=Y.dtype) - mm(mm(ab.P, swap(ab.tau_bar)), Y_plus)  # I - P tau_bar* Upsilon+   (nb, 6, 6)
    hinges = 2.0 * jnp.sum(dH * jnp.einsum("vij,vj->vi", take_rows(B, topo.dof_body), ab.G))
    GYG = jnp.einsum("vi,vij,vj->v", ab.G, take_rows(Y_plus, topo.dof_body), ab.G)
    armature = jnp.sum(dA * (_inverse_diagonal(topo, ab.D) + GYG))
    return value, poses + inertias + hinges + armature


_log_det.defjvp(_log_det_jvp, symbolic_zeros=True)


@eager_jit
def log_det_mass_matrix(model, q):
    """``log det M(q) = sum_k log det D(k)`` (9.53), ``M`` including the armature, whose derivatives in ``q`` and
    in every model parameter take one up and one down sweep, O(N), in any mode (module docstring), rather than
    automatic differentiation through the articulated-body sweep. The value is that of
    `jaxmb.dynamics.factorization.log_det_mass_matrix`."""
    check_shapes(model, q=q)
    return _log_det(model, q)
