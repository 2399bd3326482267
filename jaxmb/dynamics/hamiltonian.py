"""Hamiltonian dynamics of a tree in its canonical momenta, by O(N) sweeps (Naudet and Lefeber, "General
formulation of an efficient recursive algorithm based on canonical momenta for forward dynamics of closed-loop
multibody systems", ASME IDETC 2005, eqs. 17-28).

The state is ``(q, p)`` with ``p = dT/dqd = M(q) qd`` (nv,), the momenta conjugate to the joint velocities ``qd``
(``M`` including ``diag(armature)``). For a quaternion joint (spherical, free) and a planar joint, ``qd`` is the
body-frame velocity of the joint (`jaxmb.joints`), so ``p`` is conjugate to that quasi-velocity: the body-frame
angular momentum of the subtree for a spherical joint, its body-frame spatial momentum for a free joint.

Three sweeps give ``(qd, pd)`` from ``(q, p, tau)``:

1. up (20)-(24): the articulated-body filter on ``M qd = p`` without bias terms. In Jain's symbols the paper's
   ``M*`` is the articulated inertia ``P(k)``, ``M_j = E* M* E`` is ``D(k)``, ``M*`` after the joint (``M'``) is
   ``P+(k)``, and its ``D``, ``D'`` are the residual momenta ``z(k)``, ``z+(k)``:
   ``P(k) = M(k) + sum_j phi(k, j) P+(j) phi*(k, j)``, ``z(k) = sum_j phi(k, j) z+(j)``,
   ``eps(k) = p(k) - H(k) z(k)``, ``nu = D^-1 eps``, ``z+ = z + G eps``, ``P+ = P - G H P``.
2. down (28), (15): ``qd(k) = nu(k) - G*(k) phi*(parent, k) V(parent)`` and
   ``V(k) = phi*(parent, k) V(parent) + H*(k) qd(k)``. The paper prints (28) with ``E*`` outside the bracket; the
   form here is the one its closed-loop (77) and a re-derivation give. The same sweep moves the world's
   pseudo-acceleration ``[0; -g]`` into every body, for the gravity forces of step 3.
3. up (18), (26), (27): the subtree momentum ``P*(k) = M(k) V(k) + sum_j phi(k, j) P*(j)`` and the applied forces
   on the subtree ``T*(k) = f_g(k) + f_ext(k) + sum_j phi(k, j) T*(j)``, ``f_g(k) = M(k) [0; g]`` in body
   coordinates; then ``pd(k) = tau(k) + H(k) (T*(k) - V(k) x* P*(k))``. Every hinge map is constant in its
   child frame, so the paper's ``Edot* P*`` is zero; its (27) omits the joint forces ``tau``, which are added
   here (the joint's constraint force is orthogonal to ``H*``, its actuation ``H f = tau - armature qdd``, and the
   rotor's ``armature qdd`` is the rate of its own momentum ``armature qd``: ``pd`` holds no armature term).

Velocity-product terms appear only in step 3 (``V x* P*``); the filter of step 1 depends on ``q`` and ``p``
alone. With ``H = 1/2 p* M^-1 p + V_g``, a joint with canonical coordinates (a screw joint) has
``pd = -dH/dq + tau``; a joint whose ``qd`` is a body-frame velocity on its group (spherical, planar, free) has
Hamel's form ``pd = -d_L H + tau - H(k) ((H*(k) qd(k)) x* (H*(k) (p(k) - armature(k) qd(k))))``, ``d_L H`` the
derivative of ``H`` along ``q`` moved on the joint's manifold by a unit body-frame velocity (`jaxmb.integrate`)
and the last term the coadjoint action of the joint's group on the bodies' momentum (the rows ``H(k)`` are
orthonormal; the armature, a joint-space inertia, adds no gyroscopic term, as in `jaxmb.forward_dynamics`).
Along any motion ``pd = M qdd + Mdot qd``.

Derivatives are taken through the sweeps. Under `jax.vmap` on the CPU a batch is computed in chunks with the batch
last (`jaxmb.batching.in_cpu_chunks`), as the other recursions are.
"""

from typing import NamedTuple

import jax.numpy as jnp

from jaxmb.batching import eager_jit, in_cpu_chunks
from jaxmb.dynamics.ab_steps import ToParent, gains
from jaxmb.dynamics.energy import potential_energy
from jaxmb.hinges import base_acceleration, body_inertias, hinge_map, hinge_motion, hinge_project, joint_poses
from jaxmb.kinematics import velocity_step
from jaxmb.model import check_shapes
from jaxmb.spatial import Transform, cross_force, mv, phi, phi_congruence, phi_star
from jaxmb.sweeps import down, up


class HamiltonianRates(NamedTuple):
    """``(qd, pd)``: the joint velocities ``qd = dH/dp`` (nv,) and the momentum rates ``pd`` (nv,)."""

    qd: jnp.ndarray
    pd: jnp.ndarray


def _check_momenta(model, p):
    if jnp.shape(p) != (model.nv,):
        raise ValueError(f"p must have shape ({model.nv},) for model {model.name!r} (nv={model.nv}), got "
                         f"{jnp.shape(p)}; batch with jax.vmap")


# -- step 1 (up): the bias-free articulated-body filter, (20)-(24) ---------------------------------------------------


class FilterGains(NamedTuple):
    """What the filter keeps per coordinate for the down sweep, a row each: ``G`` (n, 6) and ``nu`` (n,)."""

    G: jnp.ndarray
    nu: jnp.ndarray


def momentum_filter_step(children, X_k: Transform, M_k, H_k, p_k, A_k):
    """The up sweep (20)-(24) at body k, from its children's sums ``children`` (`ToParent`: ``P``, ``z``), its
    inertia ``M_k``, its joint's hinge map ``H_k`` (n, 6), momenta ``p_k`` (n,) and armature ``A_k`` (n,)."""
    P = children.P + M_k  # M*_K = M_K + sum_j T^F M'_j T^V                        (20)
    z = children.z  # D_K = sum_j T^F D'_j                                          (21)
    eps = p_k - mv(H_k, z)  # p_K - E* D_K
    g = gains(P, X_k, H_k, A_k, eps)  # M_jK = E* M* E (23), M' = M* - M* E M_j^-1 E* M* (22)
    z_plus = z + mv(g.G, eps)  # D'_K = M* E M_j^-1 (p_K - E* D_K) + D_K          (24)
    return ToParent(P=phi_congruence(X_k, g.P_plus), z=phi(X_k, z_plus)), (), FilterGains(G=g.G.T, nu=g.nu)


# -- step 2 (down): velocities, (28) and (15) ----------------------------------------------------------------------


class BodyMotion(NamedTuple):
    """What the down sweep hands a body's children: its velocity ``V`` (6,) and the world's pseudo-acceleration
    ``[0; -g]`` in its coordinates, ``alpha_g`` (6,) (book 5.39)."""

    V: jnp.ndarray
    alpha_g: jnp.ndarray


def momentum_smoother_step(parent: BodyMotion, X_k: Transform, G_k, nu_k, H_k):
    """The down sweep (28), (15) at body k, from its parent's `BodyMotion` and its joint's ``G_k`` (n, 6),
    ``nu_k`` (n,), ``H_k`` (n, 6): its own `BodyMotion` and its joint velocities ``qd_k`` (n,)."""
    V_plus = phi_star(X_k, parent.V)  # ^K T^V_{K-1} Omega_{K-1}
    qd = nu_k - mv(G_k, V_plus)  # qd_K = M_j^-1 [p_K - E* D_K - E* M* T^V Omega_{K-1}]   (28)
    V = V_plus + mv(H_k.T, qd)  # Omega_K = T^V Omega_{K-1} + E_K qd_K                     (15)
    return BodyMotion(V=V, alpha_g=phi_star(X_k, parent.alpha_g)), qd


# -- step 3 (up): momentum rates, (18), (26), (27) -----------------------------------------------------------------


class SubtreeSums(NamedTuple):
    """What the rate sweep hands a body's parent, in the parent's coordinates: the subtree's momentum ``P_star``
    (6,) and the applied forces on the subtree ``T_star`` (6,), gravity and external forces."""

    P_star: jnp.ndarray
    T_star: jnp.ndarray


def momentum_rate_step(children: SubtreeSums, X_k: Transform, M_k, V_k, alpha_g_k, f_ext_k, H_k, tau_k):
    """The up sweep (18), (26), (27) at body k: its subtree's `SubtreeSums` (to the parent), the sums themselves,
    and its joint's momentum rates ``pd_k`` (n,) under the joint forces ``tau_k`` (n,)."""
    P_star = children.P_star + mv(M_k, V_k)  # P*_K = M_K Omega_K + sum_j T^F P*_j         (18)
    T_star = children.T_star - mv(M_k, alpha_g_k)  # gravity M(k) [0; g] on body k, plus the children's
    if f_ext_k is not None:
        T_star = T_star + f_ext_k
    pd = tau_k + mv(H_k, T_star - cross_force(V_k, P_star))  # p_K' = E* (T*_K - Omega_K x* P*_K) + tau_K  (26, 27)
    sums = SubtreeSums(P_star=P_star, T_star=T_star)
    return SubtreeSums(P_star=phi(X_k, P_star), T_star=phi(X_k, T_star)), sums, pd


def _zero_sums(dtype):
    zero = jnp.zeros(6, dtype)
    return SubtreeSums(P_star=zero, T_star=zero)


def _rates(model, X, H, M, motion: BodyMotion, tau, f_ext):
    """``pd`` (nv,) from the bodies' `BodyMotion` (step 3)."""
    return up(model.topology, momentum_rate_step, _zero_sums(X.p.dtype), X, M, motion.V, motion.alpha_g, f_ext,
              dofs=(H, tau))[1]


def _velocities(model, X, H, M, p) -> tuple:
    """Steps 1 and 2: ``(BodyMotion, qd)`` from the momenta ``p``."""
    topo = model.topology
    _, filtered = up(topo, momentum_filter_step, ToParent.zero(X.p.dtype), X, M, dofs=(H, p, model.armature))
    root = BodyMotion(V=jnp.zeros(6, X.p.dtype), alpha_g=base_acceleration(model))
    return down(topo, momentum_smoother_step, root, X, dofs=(filtered.G, filtered.nu, H))


def _hamiltonian_dynamics(model, q, p, tau, f_ext):
    X, H, M = joint_poses(model, q), hinge_map(model), body_inertias(model)
    motion, qd = _velocities(model, X, H, M, p)
    return HamiltonianRates(qd=qd, pd=_rates(model, X, H, M, motion, tau, f_ext))


def _velocities_from_momenta(model, q, p):
    X, H, M = joint_poses(model, q), hinge_map(model), body_inertias(model)
    return _velocities(model, X, H, M, p)[1]


def _momenta(model, q, qd):
    X, H, M = joint_poses(model, q), hinge_map(model), body_inertias(model)
    V = down(model.topology, velocity_step, jnp.zeros(6, X.p.dtype), X, hinge_motion(model, H, qd))
    P_star = up(model.topology, lambda P_children, X_k, h_k: (phi(X_k, P_children + h_k), P_children + h_k),
                jnp.zeros(6, X.p.dtype), X, mv(M, V))  # P*_K = M_K Omega_K + sum_j T^F P*_j   (18)
    return hinge_project(model, H, P_star) + model.armature * qd  # p_K = E* P*_K (25), plus the rotors'


def _momentum_rates(model, q, qd, tau, f_ext):
    X, H, M = joint_poses(model, q), hinge_map(model), body_inertias(model)
    root = BodyMotion(V=jnp.zeros(6, X.p.dtype), alpha_g=base_acceleration(model))

    def step(parent, X_k, vJ_k):
        return BodyMotion(V=velocity_step(parent.V, X_k, vJ_k), alpha_g=phi_star(X_k, parent.alpha_g))

    motion = down(model.topology, step, root, X, hinge_motion(model, H, qd))
    return _rates(model, X, H, M, motion, tau, f_ext)


_hamiltonian_dynamics_in_chunks = in_cpu_chunks(_hamiltonian_dynamics)
_velocities_in_chunks = in_cpu_chunks(_velocities_from_momenta)
_momenta_in_chunks = in_cpu_chunks(_momenta)
_momentum_rates_in_chunks = in_cpu_chunks(_momentum_rates)


@eager_jit
def momenta(model, q, qd):
    """The canonical momenta ``p = M(q) qd`` (nv,) in two O(N) sweeps, without forming ``M``: the body velocities
    ``V(k)`` (15) down, the subtree momenta ``P*(k)`` (18) up, then ``p(k) = H(k) P*(k) + armature(k) qd(k)``
    (25). Args: q (nq,), qd (nv,)."""
    check_shapes(model, q=q, qd=qd)
    return _momenta_in_chunks(model, q, qd)


@eager_jit
def velocities_from_momenta(model, q, p):
    """The joint velocities ``qd = M(q)^-1 p`` (nv,) from the momenta ``p`` (nv,): the articulated-body filter
    without bias terms (20)-(24) up and (28) down (module docstring, steps 1 and 2). Args: q (nq,), p (nv,)."""
    check_shapes(model, q=q)
    _check_momenta(model, p)
    return _velocities_in_chunks(model, q, p)


@eager_jit
def momentum_rates(model, q, qd, tau, f_ext=None):
    """The momentum rates ``pd = M qdd + Mdot qd`` (nv,) at the velocities ``qd`` under the joint forces ``tau``:
    the body velocities down, then (18), (26), (27) up (module docstring, step 3). The same as the ``pd`` of
    `hamiltonian_dynamics` at ``p = M qd``; the closed loops take it at their spanning velocities.

    Args: q (nq,), qd (nv,), tau (nv,), f_ext (nb, 6) or None (body coordinates, about the body origins)."""
    check_shapes(model, q=q, qd=qd, tau=tau, f_ext=f_ext)
    return _momentum_rates_in_chunks(model, q, qd, tau, f_ext)


@eager_jit
def hamiltonian_dynamics(model, q, p, tau, f_ext=None) -> HamiltonianRates:
    """Hamilton's equations of a tree, ``(qd, pd)`` (`HamiltonianRates`), in three O(N) sweeps (module
    docstring): ``qd = M^-1 p`` by the bias-free articulated-body filter (20)-(24), (28), and
    ``pd = tau + H (T* - V x* P*)`` (26), (27) with the joint forces. ``q`` moves at ``qd`` on each joint's
    manifold (`jaxmb.configuration_rate`, `jaxmb.integrate`).

    Args: q (nq,), p (nv,) momenta conjugate to ``qd``, tau (nv,) joint forces, f_ext (nb, 6) or None (body
    coordinates, about the body origins)."""
    check_shapes(model, q=q, tau=tau, f_ext=f_ext)
    _check_momenta(model, p)
    return _hamiltonian_dynamics_in_chunks(model, q, p, tau, f_ext)


@eager_jit
def hamiltonian(model, q, p):
    """The total energy ``H = 1/2 p* M(q)^-1 p + V_g(q)`` () in the momenta ``p`` (nv,): the kinetic energy by the
    filter of `velocities_from_momenta`, ``1/2 p* qd``, and the gravitational potential
    (`jaxmb.potential_energy`)."""
    check_shapes(model, q=q)
    _check_momenta(model, p)
    return 0.5 * jnp.dot(p, _velocities_in_chunks(model, q, p)) + potential_energy(model, q)
