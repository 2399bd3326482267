"""Hamiltonian dynamics of closed loops in the momenta of their independent coordinates, by constraint embedding
(Naudet and Lefeber, "General formulation of an efficient recursive algorithm based on canonical momenta for
forward dynamics of closed-loop multibody systems", ASME IDETC 2005, eqs. 29-77, made general on the cluster
tree of `jaxmb.loops`; book 15.1, Chignoli et al. 2023).

The paper derives the closed case for one chain whose tip is pinned to the ground, its dependent coordinates at
the tip, and names the general case too long to write out. Constraint embedding gives it for any loops: with
``qd = G yd`` (`jaxmb.loops.embedding`, ``G`` the book's ``X_S`` per loop cluster) the Lagrangian of the
independent coordinates is ``1/2 yd* G* M G yd - V_g``, and

    p_y  = G* p,                          p = M qd        the tree's momenta at the spanning velocity     (50)-(52)
    yd   = M_y^-1 p_y,                    M_y = G* M G                                                   (63)-(77)
    pd_y = tau_y + G* pd_tree + Gdot* p                                                                  (56)-(62)

``p_y`` of a loop cluster S is ``G_S* H_S P*_S``, the subtree momenta of its bodies projected on its independent
coordinates: the paper's ``p_K = E_K* P^c_K`` with ``P^c_K = P_K + sum_j T^F C_j* P^c_j`` (51), whose projectors
``C_j`` play the part of ``G_S`` on the bodies. ``yd = M_y^-1 p_y`` is the constraint-embedded articulated-body
algorithm without bias terms (`jaxmb.loops.articulated.mass_matrix_inverse_times`), as the paper's (63)-(77): the
factors of ``M_y`` by the up sweep of the articulated inertias alone, then their solve. ``pd_tree`` is the tree's
momentum rate without joint forces (`jaxmb.dynamics.hamiltonian.momentum_rates`, (26)-(27)); the constraint forces
``K* lambda`` drop out of ``G* pd`` because ``K G = 0``, and ``Gdot* p`` is the paper's ``Cdot*`` term of (58),
here by a forward-mode derivative of each cluster's ``G_S(q)`` along ``qd`` (the paper's Appendix hand-derives it
for its chain).

The configuration moves as in `jaxmb.loops.integrate`: the spanning ``q`` at ``G yd``, the dependent coordinates
projected onto ``phi(q) = 0``. The independent coordinates of a loop cluster are 1-dof joint angles, so
``(y, p_y)`` are canonical there and ``pd_y = -dH/dy + tau_y`` with ``H = 1/2 p_y* M_y^-1 p_y + V_g``.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import eager_jit, full_precision, place_rows, take_rows
from jaxmb.configuration import configuration_rate
from jaxmb.dynamics.energy import potential_energy
from jaxmb.dynamics.hamiltonian import momenta as tree_momenta
from jaxmb.dynamics.hamiltonian import momentum_rates as tree_momentum_rates
from jaxmb.loops.articulated import mass_matrix_inverse_times
from jaxmb.loops.embedding import embedding
from jaxmb.spatial import mv, swap


class LoopHamiltonianRates(NamedTuple):
    """``(yd, pd)``: the independent velocities ``yd = dH/dp_y`` (ny,) and the momentum rates ``pd`` (ny,)."""

    yd: jnp.ndarray
    pd: jnp.ndarray


def _check_momenta(lm, p):
    if jnp.shape(p) != (lm.ny,):
        raise ValueError(f"p must have shape ({lm.ny},) for model {lm.name!r} (ny={lm.ny}), got {jnp.shape(p)}; "
                         "batch with jax.vmap")


def project(lm, G, x, rate=False):
    """``G* x`` (ny,) for a spanning vector ``x`` (nv,) and the loop clusters' ``G_S`` (a tuple, as
    `jaxmb.loops.embedding.Embedding` holds them), without forming the whole ``G``: ``G_S* x_S`` for each loop
    cluster, and outside the loop clusters, where ``G`` is the identity, the independent rows of ``x``. With
    ``rate``, ``G`` holds the rates ``Gdot_S`` and the rows outside are zero (the identity's rate)."""
    inside = {v for c in lm.loop_clusters for v in c.v_index}
    outside = [(j, v) for j, v in enumerate(lm.y_v_index) if v not in inside]
    rows = take_rows(x, [v for _, v in outside])
    parts = [jnp.zeros_like(rows) if rate else rows]
    parts += [mv(swap(G_S), take_rows(x, c.v_index)) for c, G_S in zip(lm.loop_clusters, G)]
    at = [j for j, _ in outside] + [j for c in lm.loop_clusters for j in c.y_index]
    return place_rows(parts, np.asarray(at, int))


@eager_jit
@full_precision
def momenta(lm, q, yd):
    """The momenta of the independent coordinates ``p_y = G* M G yd`` (ny,) in O(N): the tree's momenta at the
    spanning velocity ``G yd`` (`jaxmb.dynamics.hamiltonian.momenta`), projected by each loop cluster's
    ``G_S*`` (50)-(52). Args: q (nq,) consistent spanning configuration, yd (ny,)."""
    emb = embedding(lm, q, yd)
    return project(lm, emb.G, tree_momenta(lm.tree, q, emb.qd))


@eager_jit
@full_precision
def velocities_from_momenta(lm, q, p):
    """The independent velocities ``yd = M_y^-1 p`` (ny,) by the constraint-embedded articulated-body algorithm
    without bias terms (`jaxmb.loops.articulated.mass_matrix_inverse_times`: the factors of ``M_y`` at ``q``, then
    their solve), the paper's (63)-(77) on any cluster tree. Args: q (nq,) consistent spanning configuration,
    p (ny,)."""
    _check_momenta(lm, p)
    return mass_matrix_inverse_times(lm, q, p)


@eager_jit
@full_precision
def hamiltonian_dynamics(lm, q, p, tau, f_ext=None) -> LoopHamiltonianRates:
    """Hamilton's equations of a closed-loop system in its independent coordinates, ``(yd, pd)``
    (`LoopHamiltonianRates`): ``yd = M_y^-1 p`` (`velocities_from_momenta`), and
    ``pd = tau + G* pd_tree + Gdot* M G yd`` (module docstring), ``pd_tree`` the tree's momentum rates at the
    spanning velocity with gravity and ``f_ext`` and no joint forces, ``Gdot`` the rate of each loop cluster's
    ``G_S(q)`` as ``q`` moves at ``G yd``. The spanning velocity ``G yd`` satisfies ``K qd = 0`` by construction.

    Args: q (nq,) consistent spanning configuration (`jaxmb.loops.solve_configuration`), p (ny,) momenta of the
    independent coordinates, tau (ny,) independent forces (``G* tau_tree``, `jaxmb.loops.generalized_force`),
    f_ext (nb, 6) or None (body coordinates, about the body origins)."""
    _check_momenta(lm, p)
    tree = lm.tree
    yd = velocities_from_momenta(lm, q, p)
    emb = embedding(lm, q, yd)
    qd = emb.qd
    pd_tree = tree_momentum_rates(tree, q, qd, jnp.zeros_like(qd), f_ext)  # (26)-(27), no joint forces
    p_tree = tree_momenta(tree, q, qd)
    G, G_dot = jax.jvp(lambda q: embedding(lm, q, yd).G, (q,), (configuration_rate(tree, q, qd),))
    return LoopHamiltonianRates(yd=yd, pd=tau + project(lm, G, pd_tree) + project(lm, G_dot, p_tree, rate=True))


@eager_jit
@full_precision
def hamiltonian(lm, q, p):
    """The total energy ``H = 1/2 p* M_y^-1 p + V_g(q)`` () of a closed-loop system in the momenta ``p`` (ny,)
    of its independent coordinates, at the consistent spanning configuration ``q`` (nq,)."""
    return 0.5 * jnp.dot(p, velocities_from_momenta(lm, q, p)) + potential_energy(lm.tree, q)
