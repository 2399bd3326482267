"""Diagonalized Lagrangian dynamics (book ch. 19): coordinates in which the mass matrix is the identity (``eta``)
or the block-diagonal ``D`` (``xi``), and their O(N) forward dynamics (Alg 19.3, in a form that holds with
armature).

The innovations factorization ``M = L D L*`` with ``L = I + H phi K`` (7.14) gives, with ``D(k) = C(k) C*(k)``
(Cholesky; ``C = D^(1/2)`` for a one-coordinate joint) and ``m = L C``, ``l = C^-1 L^-1``:

    M = m m*                                                                        (19.21)
    eta = m* qd,  zeta = l T:        eta_dot + C(q, eta) = zeta,  K_e = 1/2 eta* eta   (normalized)
    xi = L* qd = C^-* eta:           D xi_dot + C(q, xi) = [I - H psi K] T,  K_e = 1/2 xi* D xi

Per joint (Tables 19.1-19.2), with ``V+(k) = phi*(parent, k) V(parent)``::

    down:  xi(k) = qd(k) + G*(k) V+(k),   eta(k) = C*(k) xi(k),   qd(k) = C^-*(k) eta(k) - G*(k) V+(k)
    up:    z(k) = sum_children phi(k, j) z+(j),  eps = T - H z,  zeta(k) = C^-1(k) eps,  z+ = z + G eps

``xi(k) = G*(k) V(k)`` where the joint has no armature (``H G = I``). ``eta`` is a quasi-velocity; ``eta* C(q,
eta) = 0`` (19.18): the Coriolis term does no work, and without gravity ``d K_e / dt = eta* zeta``.

Forward dynamics (Alg 19.3) in one up sweep fused with the articulated-body sweep (pass 1 of Alg 7.2) and the rate
sweep (Alg 18.1, `jaxmb.dynamics.sensitivity`), after the velocity sweep. Table 19.1's ``xi(k) = qd(k) + G*(k)
V+(k)`` is differentiated in body coordinates, where ``H`` and the armature are constant: with ``qdd(k) = D^-1
eps - G* alpha+`` (7.31), ``d V+(k) / dt = alpha+(k) + a(k)``, ``D G* = H P`` and ``D G_dot* = H P_check - D_dot
G* = H P_check tau_bar*`` (``D_dot = H P_check H*``)::

    mu(k)      = z(k) - P(k) a(k) - P_check(k) tau_bar*(k) V+(k)
               = sum_children phi(k, j) z+(j) + b(k) - P_check(k) tau_bar*(k) V+(k)
    xi_dot(k)  = D^-1(k) (T(k) - H(k) mu(k))
    eta_dot(k) = C_dot*(k) xi(k) + C*(k) xi_dot(k),   C_dot = C Phi(C^-1 D_dot C^-*)

``z(k)``, ``z+(k)`` are the residual forces of the articulated-body algorithm (7.42), ``a(k)`` the Coriolis
acceleration and ``b(k) = V-bar M V - f_ext + M beta(k)`` the gyroscopic force, the external force and gravity, with
``beta(k)`` the world's pseudo-acceleration ``[0; -g]`` in body coordinates (gravity as a force on every body, so
``alpha`` is the bodies' acceleration); ``Phi`` keeps the lower triangle and halves the diagonal (the derivative
of a Cholesky factor). It holds for every joint kind and with armature.

The book's Alg 19.3 differentiates ``xi(k) = G*(k) V(k)`` instead. With ``Delta(k) = H*(k) qd(k)``, ``Delta^w``,
``Delta^v`` its angular and linear parts and ``x~``, ``x-bar`` the motion and force cross matrices, it recurses on::

    gamma(k) = sum_children [K(k, j) T(j) - phi(k, j) Delta^v-bar(j) P+(j) V(j)]
               + [lambda_check(k) + P(k) Delta^w~(k)] H*(k) xi(k) - Delta^w~(k) P(k) V(k) + b(k)
    mu_19.3(k) = sum_children psi(k, j) mu_19.3(j) + gamma(k),    xi_dot(k) = D^-1(k) (T(k) - H(k) mu_19.3(k))

(for a screw joint ``Delta^w~ H* = 0`` and the bracket is the book's ``lambda_check(k) H*(k) xi(k)``; the term ``P
Delta^w~ H* xi`` extends it to joints of several coordinates; the book omits the prismatic term ``phi Delta^v-bar
P+ V``). Without armature ``H G = I``, ``xi = G* V``, and ``H mu_19.3 = H mu``: the two sweeps give the same
``xi_dot``. With armature ``H G = I - diag(armature) D^-1``, so ``xi`` is not ``G* V`` and ``H tau_bar`` is not
zero, and ``gamma`` no longer gives the rate of ``xi``; the sweep above uses only Table 19.1 and (7.31), which hold
with armature. The structure is the value of these coordinates (a diagonal mass matrix, decoupled control), not
speed: the sweep is the articulated-body algorithm's pass 1 with Alg 18.1 fused in.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxmb.batching import eager_jit, in_cpu_chunks
from jaxmb.dynamics import ab_steps
from jaxmb.dynamics.ab_steps import solve_small
from jaxmb.dynamics.articulated import articulated_inertias, velocity_terms
from jaxmb.dynamics.sensitivity import inertia_rate_step
from jaxmb.hinges import base_acceleration, hinge_map, hinge_motion, joint_poses
from jaxmb.model import check_shapes
from jaxmb.spatial import mm, mv, phi, phi_star, swap
from jaxmb.sweeps import down, up


def _cholesky(D_rows, n):
    """``C`` (n, n), lower triangular, with ``D(k) = C C*``, from a joint's rows of `ArticulatedBody.D`."""
    return jnp.linalg.cholesky(D_rows[:, :n])


def _solve_lower(C, x, transpose=False):
    """``C^-1 x`` (or ``C^-* x``) of a lower triangular ``C`` (n, n) and ``x`` (n,)."""
    return jax.scipy.linalg.solve_triangular(C, x, lower=True, trans=1 if transpose else 0)


# -- Tables 19.1 and 19.2 ---------------------------------------------------------------------------------------


class DiagonalizedVelocities(NamedTuple):
    """``xi = L* qd`` and ``eta = C* xi = m* qd``, both (nv,) (Table 19.1)."""

    xi: jnp.ndarray
    eta: jnp.ndarray


def _xi_step(V_parent, X_k, H_k, G_k, D_k, qd_k):
    V_plus = phi_star(X_k, V_parent)  # V+(k) = phi*(parent, k) V(parent)
    xi = qd_k + mv(G_k, V_plus)  # xi(k) = qd(k) + G*(k) V+(k)                          (Table 19.1)
    eta = mv(_cholesky(D_k, H_k.shape[0]).T, xi)  # eta(k) = C*(k) xi(k)
    return V_plus + mv(H_k.T, qd_k), DiagonalizedVelocities(xi, eta)


@eager_jit
def diagonalized_velocities(model, q, qd) -> DiagonalizedVelocities:
    """``xi`` and ``eta`` (nv,) of the joint velocities ``qd`` (nv,) at ``q`` (nq,) (Table 19.1): the
    articulated-body sweep for ``G`` and ``D``, then one down sweep. ``eta* eta = xi* D xi = qd* M qd``."""
    check_shapes(model, q=q, qd=qd)
    ab = articulated_inertias(model, q)
    X = joint_poses(model, q)
    return down(model.topology, _xi_step, jnp.zeros(6, X.p.dtype), X, dofs=(hinge_map(model), ab.G, ab.D, qd))[1]


def _qd_step(V_parent, X_k, H_k, G_k, D_k, x_k, normalized):
    V_plus = phi_star(X_k, V_parent)
    xi = _solve_lower(_cholesky(D_k, H_k.shape[0]), x_k, transpose=True) if normalized else x_k  # C^-* eta
    qd = xi - mv(G_k, V_plus)  # qd(k) = xi(k) - G*(k) V+(k)                              (Table 19.1)
    return V_plus + mv(H_k.T, qd), qd


def _joint_velocities(model, q, x, normalized):
    ab = articulated_inertias(model, q)
    X = joint_poses(model, q)
    step = lambda *args: _qd_step(*args, normalized=normalized)  # noqa: E731
    return down(model.topology, step, jnp.zeros(6, X.p.dtype), X, dofs=(hinge_map(model), ab.G, ab.D, x))[1]


@eager_jit
def velocities_from_xi(model, q, xi):
    """The joint velocities ``qd = L^-* xi`` (nv,) of ``xi`` (nv,) at ``q`` (Table 19.1, inverted): one down
    sweep after the articulated-body sweep."""
    check_shapes(model, q=q, qd=xi)
    return _joint_velocities(model, q, xi, False)


@eager_jit
def velocities_from_eta(model, q, eta):
    """The joint velocities ``qd = m^-* eta`` (nv,) of ``eta`` (nv,) at ``q`` (Table 19.1, inverted)."""
    check_shapes(model, q=q, qd=eta)
    return _joint_velocities(model, q, eta, True)


def _zeta_step(z_children, X_k, H_k, G_k, D_k, T_k):
    eps = T_k - mv(H_k, z_children)  # eps(k) = T(k) - H(k) z(k)
    zeta = _solve_lower(_cholesky(D_k, H_k.shape[0]), eps)  # zeta(k) = C^-1(k) eps(k)        (Table 19.2)
    return phi(X_k, z_children + mv(G_k.T, eps)), (), zeta  # z+(k) = z(k) + G(k) C(k) zeta(k)


@eager_jit
def normalized_forces(model, q, tau):
    """``zeta = l T = C^-1 [I - H psi K] T`` (nv,) of the joint forces ``tau`` (nv,) at ``q`` (Table 19.2): the
    articulated-body sweep, then one up sweep. ``eta* zeta = qd* tau``: the power of the forces."""
    check_shapes(model, q=q, tau=tau)
    ab = articulated_inertias(model, q)
    X = joint_poses(model, q)
    return up(model.topology, _zeta_step, jnp.zeros(6, X.p.dtype), X, dofs=(hinge_map(model), ab.G, ab.D, tau))[1]


# -- Alg 19.3 ---------------------------------------------------------------------------------------------------


class ToParent(NamedTuple):
    """What the up sweep of `diagonalized_dynamics` hands a body's parent, in the parent's coordinates: the
    articulated-body algorithm's ``phi P+ phi*`` (6, 6) and ``phi z+`` (6,) (`jaxmb.dynamics.ab_steps.ToParent`),
    and Alg 18.1's ``phi P_check_plus phi*`` (6, 6)."""

    articulated: ab_steps.ToParent
    P_check: jnp.ndarray


class DiagonalizedDynamics(NamedTuple):
    """The diagonalized forward dynamics at one state, all (nv,): ``xi``, ``xi_dot``, ``eta``, ``eta_dot``."""

    xi: jnp.ndarray
    xi_dot: jnp.ndarray
    eta: jnp.ndarray
    eta_dot: jnp.ndarray


def _cholesky_rate(C, D_dot):
    """``C_dot`` of ``D = C C*`` along ``D_dot`` (n, n): ``C Phi(C^-1 D_dot C^-*)``."""
    A = _solve_lower(C, _solve_lower(C, D_dot).T)  # C^-1 D_dot C^-* (symmetric)
    return mm(C, jnp.tril(A) - 0.5 * jnp.diag(jnp.diagonal(A)))


def _dynamics_step(children, X_k, M_k, V_k, a_k, b_k, Delta_k, H_k, qd_k, T_k, A_k):
    """The sweep of `diagonalized_dynamics` at body k (module docstring): the articulated-body step (pass 1 of
    Alg 7.2) and Alg 18.1, fused."""
    n = H_k.shape[0]
    ab = ab_steps.articulated_step(children.articulated, X_k, M_k, a_k, b_k, H_k, T_k, A_k)  # P, z, G, D (7.42)
    body = ab.body
    rate = inertia_rate_step(children.P_check, X_k, body.P, body.P_plus, body.tau_bar, Delta_k, H_k)
    V_plus = V_k - Delta_k  # V+(k) = phi*(parent, k) V(parent)
    G_star = ab.coordinates.G  # G*(k) (n, 6)
    xi = qd_k + mv(G_star, V_plus)  # xi(k) = qd(k) + G*(k) V+(k)                          (Table 19.1)
    # mu(k) = z(k) - P(k) a(k) - P_check(k) tau_bar*(k) V+(k), z(k) - P(k) a(k) = sum_j phi(k, j) z+(j) + b(k)
    mu = children.articulated.z + b_k - mv(rate.body.P_check, mv(swap(body.tau_bar), V_plus))
    D = ab.coordinates.D[:, :n]
    xi_dot = solve_small(D, (T_k - mv(H_k, mu))[:, None])[:, 0]  # xi_dot(k) = D^-1(k) (T(k) - H(k) mu(k))
    C = _cholesky(D, n)
    eta_dot = mv(_cholesky_rate(C, rate.D_dot[:, :n]).T, xi) + mv(C.T, xi_dot)  # C_dot* xi + C* xi_dot
    to_parent = ToParent(articulated=ab.to_parent, P_check=rate.to_parent)
    return to_parent, (), DiagonalizedDynamics(xi=xi, xi_dot=xi_dot, eta=mv(C.T, xi), eta_dot=eta_dot)


def _gravity_step(beta_parent, X_k):
    return phi_star(X_k, beta_parent)  # beta(k) = phi*(parent, k) beta(parent)


def _dynamics(model, q, qd, tau, f_ext):
    topo = model.topology
    X, H, M, V, a, b = velocity_terms(model, q, qd, f_ext)
    beta = down(topo, _gravity_step, base_acceleration(model), X)
    b = b + mv(M, beta)  # gravity as the force M(k) beta(k) on every body
    zero = ToParent(articulated=ab_steps.ToParent.zero(X.p.dtype), P_check=jnp.zeros((6, 6), X.p.dtype))
    return up(topo, _dynamics_step, zero, X, M, V, a, b, hinge_motion(model, H, qd),
              dofs=(H, qd, tau, model.armature))[1]


_dynamics_in_chunks = in_cpu_chunks(_dynamics)


@eager_jit
def diagonalized_dynamics(model, q, qd, tau, f_ext=None) -> DiagonalizedDynamics:
    """The forward dynamics in the diagonalized coordinates (Alg 19.3 in the form of the module docstring):
    ``xi``, ``eta`` and their rates ``xi_dot``, ``eta_dot`` (nv,) at the state ``(q, qd)`` under the joint forces
    ``tau`` (nv,) and the external forces ``f_ext`` (nb, 6) or None (body coordinates), with gravity. The velocity
    sweep and one up sweep, O(N). ``xi_dot`` and ``eta_dot`` are the time derivatives of ``xi(q, qd)`` and
    ``eta(q, qd)`` along the motion the articulated-body algorithm gives, with or without armature (module
    docstring); without armature ``xi_dot`` is the book's Alg 19.3's. Under ``jax.vmap`` on the CPU a batch is
    computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`)."""
    check_shapes(model, q=q, qd=qd, tau=tau, f_ext=f_ext)
    return _dynamics_in_chunks(model, q, qd, tau, f_ext)
