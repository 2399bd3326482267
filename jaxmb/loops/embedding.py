"""The constraint Jacobian and the embedding maps (book 15.1, 15.24-15.27; seed 001 (2)-(4)).

With ``K = dphi/dq`` and ``k = -Kdot qd`` (so that ``K qdd = k``), a loop cluster splits its coordinates into
independent ones ``i`` and dependent ones ``d`` and embeds them as

    qd_S = G_S yd_S,   qdd_S = G_S ydd_S + g_S,   G_S = P [1; -K_d^-1 K_i],   g_S = P [0; K_d^-1 k_S]

(``P`` puts the rows back in coordinate order); ``K G = 0`` and ``K g = k``. ``G_S`` is the book's ``X_S`` and
``g_S`` its ``Xdot_S theta_dot_RS``. ``K`` comes from ``jax.jacfwd`` of the residual over the constrained
coordinates only, ``k`` from a nested ``jax.jvp`` (``qd* d2phi/dq2 qd``).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.compilation import eager_jit
from jaxmb.precision import full_precision


@eager_jit
@full_precision
def constraint_residual(lm, q):
    """``phi(q)`` (nc,): every constraint's residual, stacked in the order they were given."""
    if not lm.constraints:
        return jnp.zeros(0, q.dtype)
    return jnp.concatenate([c.residual(lm.tree, p, q) for c, p in zip(lm.constraints, lm.params)])


def _on_constrained(lm, q):
    """``x -> phi(q with its constrained coordinates set to x)``, and ``q``'s constrained coordinates."""
    idx = jnp.asarray(lm.c_q_index, int)
    q = jnp.asarray(q)
    return (lambda x: constraint_residual(lm, q.at[idx].set(x))), q[idx]


@full_precision
def constrained_jacobian(lm, q):
    """``K`` restricted to the constrained coordinates `LoopModel.c_index`, (nc, len(c_index))."""
    f, x = _on_constrained(lm, q)
    return jax.jacfwd(f)(x)


@eager_jit
@full_precision
def constraint_jacobian(lm, q):
    """``K = dphi/dq`` (nc, nv); zero outside the loop clusters' coordinates."""
    K_c = constrained_jacobian(lm, q)
    return jnp.zeros((lm.nc, lm.nv), q.dtype).at[:, jnp.asarray(lm.c_index, int)].set(K_c)


@eager_jit
@full_precision
def constraint_bias(lm, q, qd):
    """``k = -Kdot qd`` (nc,), the right side of ``K qdd = k``."""
    f, x = _on_constrained(lm, q)
    xd = qd[jnp.asarray(lm.c_index, int)]
    velocity = lambda x: jax.jvp(f, (x,), (xd,))[1]  # K(x) xd
    return -jax.jvp(velocity, (x,), (xd,))[1]


class Embedding(NamedTuple):
    """Per loop cluster (in `LoopModel.loop_clusters` order): ``G`` (n_S, ny_S) and ``g`` (n_S,); and the
    spanning velocity ``qd`` (nv,) they give."""

    G: tuple
    g: tuple
    qd: jnp.ndarray


def _split(cluster, K_c):
    K_S = K_c[np.ix_(cluster.rows, cluster.c_cols)]
    return K_S[:, list(cluster.dependent)], K_S[:, list(cluster.independent)]


def _cluster_G(cluster, K_d, K_i):
    n = len(cluster.v_index)
    G = jnp.zeros((n, cluster.ny), K_d.dtype)
    G = G.at[np.asarray(cluster.independent), np.arange(cluster.ny)].set(1.0)
    return G.at[np.asarray(cluster.dependent)].set(-jnp.linalg.solve(K_d, K_i))  # X_S = [-Y1^-1 Y2; 1]  (15.26)


def _cluster_maps(lm, q):
    """``(G_S, K_d)`` of every loop cluster at ``q``, from one evaluation of ``K``."""
    K_c = constrained_jacobian(lm, q)
    maps = []
    for c in lm.loop_clusters:
        K_d, K_i = _split(c, K_c)
        maps.append((_cluster_G(c, K_d, K_i), K_d))
    return maps


@eager_jit
@full_precision
def embedding(lm, q, yd) -> Embedding:
    """``G_S``, ``g_S`` of every loop cluster at configuration ``q`` (nq,) and independent velocity ``yd`` (ny,),
    and the spanning velocity ``qd = G yd``: the one evaluation of ``K`` and ``k`` that the functions taking an
    `Embedding` share."""
    yd = jnp.asarray(yd)
    qd = jnp.zeros(lm.nv, yd.dtype).at[jnp.asarray(lm.y_v_index, int)].set(yd)
    if not lm.constraints:
        return Embedding((), (), qd)
    maps = _cluster_maps(lm, q)
    for c, (G, _) in zip(lm.loop_clusters, maps):
        qd = qd.at[np.asarray(c.v_index)].set(G @ yd[np.asarray(c.y_index)])
    k = constraint_bias(lm, q, qd)
    gs = []
    for c, (_, K_d) in zip(lm.loop_clusters, maps):
        g = jnp.zeros(len(c.v_index), qd.dtype)
        gs.append(g.at[np.asarray(c.dependent)].set(jnp.linalg.solve(K_d, k[np.asarray(c.rows)])))  # (15.27)
    return Embedding(tuple(G for G, _ in maps), tuple(gs), qd)


@eager_jit
def dense_embedding(lm, emb: Embedding):
    """The whole ``G`` (nv, ny) of an `Embedding` (identity columns outside the loop clusters)."""
    G = jnp.zeros((lm.nv, lm.ny), emb.qd.dtype)
    outside = [v for v in lm.y_v_index if v not in set(lm.c_index)]
    G = G.at[np.asarray(outside, int), np.asarray([lm.y_v_index.index(v) for v in outside], int)].set(1.0)
    for c, G_S in zip(lm.loop_clusters, emb.G):
        G = G.at[np.ix_(c.v_index, c.y_index)].set(G_S)
    return G


@eager_jit
@full_precision
def lift_acceleration(lm, emb: Embedding, ydd):
    """``qdd = G ydd + g`` (nv,) of an `Embedding`."""
    ydd = jnp.asarray(ydd)
    qdd = jnp.zeros(lm.nv, ydd.dtype).at[jnp.asarray(lm.y_v_index, int)].set(ydd)
    for c, G, g in zip(lm.loop_clusters, emb.G, emb.g):
        qdd = qdd.at[np.asarray(c.v_index)].set(G @ ydd[np.asarray(c.y_index)] + g)
    return qdd


@eager_jit
@full_precision
def embedding_matrix(lm, q):
    """The whole ``G`` (nv, ny): ``qd = G yd`` (no velocity needed)."""
    maps = _cluster_maps(lm, q) if lm.constraints else []
    zero = jnp.zeros(lm.ny, lm.tree.mass.dtype)
    return dense_embedding(lm, Embedding(tuple(G for G, _ in maps), (), zero))


@eager_jit
@full_precision
def spanning_velocity(lm, q, yd):
    """``qd = G yd`` (nv,)."""
    return embedding(lm, q, yd).qd


@eager_jit
@full_precision
def spanning_acceleration(lm, q, yd, ydd):
    """``qdd = G ydd + g`` (nv,)."""
    return lift_acceleration(lm, embedding(lm, q, yd), ydd)


@eager_jit
def independent_velocity(lm, qd):
    """``yd = qd[y_v_index]`` (ny,) from a spanning velocity."""
    return qd[jnp.asarray(lm.y_v_index, int)]


@eager_jit
def independent_configuration(lm, q):
    """``y = q[y_q_index]`` from a spanning configuration."""
    return q[jnp.asarray(lm.y_q_index, int)]


@eager_jit
@full_precision
def generalized_force(lm, q, tau):
    """``G* tau`` (ny,): the independent coordinates' forces from spanning-tree joint forces ``tau`` (nv,)
    (book 15.12; actuators on dependent joints act through ``G*``)."""
    return embedding_matrix(lm, q).T @ tau
