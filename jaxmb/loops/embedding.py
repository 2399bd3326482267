"""The constraint Jacobian and the embedding maps (book 15.1, 15.24-15.27; Chignoli et al. 2023, (2)-(4)).

With ``K = dphi/dq`` and ``k = -Kdot qd`` (so that ``K qdd = k``), a loop cluster splits its coordinates into
independent ones ``i`` and dependent ones ``d`` and embeds them as

    qd_S = G_S yd_S,   qdd_S = G_S ydd_S + g_S,   G_S = P [1; -K_d^-1 K_i],   g_S = P [0; K_d^-1 k_S]

(``P`` puts the rows back in coordinate order); ``K G = 0`` and ``K g = k``. ``G_S`` is the book's ``X_S`` and
``g_S`` its ``Xdot_S theta_dot_RS``. Each constraint gives its block of ``K`` and its rows of ``k`` over its own
coordinates (`jaxmb.loops.constraints.Bound`): a loop closure in closed form, the others by autodiff.
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxmb.batching import eager_jit, full_precision, place_rows, put_rows, take_rows
from jaxmb.loops.constraints import stacked_jacobian
from jaxmb.spatial import inverse3, mm, mv, swap


@eager_jit
@full_precision
def constraint_residual(lm, q):
    """``phi(q)`` (nc,): every constraint's residual, stacked in the order they were given."""
    if not lm.constraints:
        return jnp.zeros(0, q.dtype)
    return jnp.concatenate([c.residual(lm.tree, p, q) for c, p in zip(lm.constraints, lm.params)])


@full_precision
def constrained_jacobian(lm, q):
    """``K`` restricted to the constrained coordinates `LoopModel.c_index`, (nc, len(c_index))."""
    return stacked_jacobian(lm.tree, lm.constraints, lm.params, q, lm.c_q_index)


@eager_jit
@full_precision
def constraint_jacobian(lm, q):
    """``K = dphi/dq`` (nc, nv); zero outside the loop clusters' coordinates."""
    K_c = constrained_jacobian(lm, q)
    return swap(put_rows(jnp.zeros((lm.nv, lm.nc), K_c.dtype), lm.c_index, swap(K_c)))


@eager_jit
@full_precision
def constraint_bias(lm, q, qd):
    """``k = -Kdot qd`` (nc,), the right side of ``K qdd = k``: each constraint's rows (`Bound.bias`)."""
    if not lm.constraints:
        return jnp.zeros(0, q.dtype)
    qd_c = take_rows(qd, lm.c_index)
    return jnp.concatenate([c.bias(lm.tree, p, q, take_rows(qd_c, c.columns(lm.c_q_index)))
                            for c, p in zip(lm.constraints, lm.params)])


class Embedding(NamedTuple):
    """Per loop cluster (in `LoopModel.loop_clusters` order): ``G`` (n_S, ny_S) and ``g`` (n_S,); and the
    spanning velocity ``qd`` (nv,) they give."""

    G: tuple
    g: tuple
    qd: jnp.ndarray


def _split(cluster, K_c):
    K_S = K_c[np.ix_(cluster.rows, cluster.c_cols)]
    return K_S[:, list(cluster.dependent)], K_S[:, list(cluster.independent)]


def _solve(A, B):
    """``A^-1 B`` for a small square ``A`` (m, m) and ``B`` (m, c): by the inverse from cross products (`inverse3`)
    up to m = 3, as the loops of robots have, else by LU. XLA's CPU backend runs the LU factorization with a
    loop over the batch for its pivots; this is a few vector operations."""
    m = A.shape[-1]
    if m > 3:
        return jnp.linalg.solve(A, B)
    if m == 1:
        return B / A
    if m == 2:
        (a, b), (c, d) = A[0], A[1]
        return mm(jnp.stack([jnp.stack([d, -b]), jnp.stack([-c, a])]), B) / (a * d - b * c)
    A_inv, _ = inverse3(A)
    return mm(A_inv, B)


def _in_cluster_order(cluster, independent, dependent):
    """A cluster's rows in ``v_index`` order from its ``independent`` rows (ny_S, ...) and its ``dependent`` rows
    (m, ...)."""
    return place_rows([independent, dependent], np.concatenate([cluster.independent, cluster.dependent]))


def _cluster_G(cluster, K_d, K_i):
    eye = jnp.eye(cluster.ny, dtype=K_d.dtype)
    return _in_cluster_order(cluster, eye, -_solve(K_d, K_i))  # X_S = [-Y1^-1 Y2; 1]  (15.26)


def _spanning(lm, y, cluster_rows):
    """A spanning vector (nv, ...) from the independent ``y`` (ny, ...), whose rows it takes outside the loop
    clusters, and each loop cluster's rows (n_S, ...) in ``cluster_rows``; zero elsewhere."""
    inside = {v for c in lm.loop_clusters for v in c.v_index}
    outside = [(v, i) for i, v in enumerate(lm.y_v_index) if v not in inside]
    at = [v for v, _ in outside] + [v for c in lm.loop_clusters for v in c.v_index]
    rows = jnp.concatenate([take_rows(y, [i for _, i in outside]), *cluster_rows])
    if len(at) == lm.nv:
        return place_rows([rows], at)
    return put_rows(jnp.zeros((lm.nv,) + y.shape[1:], y.dtype), at, rows)


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
    if not lm.constraints:
        return Embedding((), (), _spanning(lm, yd, []))
    maps = _cluster_maps(lm, q)
    qd = _spanning(lm, yd, [mv(G, take_rows(yd, c.y_index)) for c, (G, _) in zip(lm.loop_clusters, maps)])
    k = constraint_bias(lm, q, qd)
    gs = []
    for c, (_, K_d) in zip(lm.loop_clusters, maps):
        g_d = _solve(K_d, take_rows(k, c.rows)[:, None])[:, 0]
        gs.append(_in_cluster_order(c, jnp.zeros(c.ny, g_d.dtype), g_d))  # g_S = [K_d^-1 k_S; 0]  (15.27)
    return Embedding(tuple(G for G, _ in maps), tuple(gs), qd)


@eager_jit
def dense_embedding(lm, emb: Embedding):
    """The whole ``G`` (nv, ny) of an `Embedding` (identity columns outside the loop clusters)."""
    eye = jnp.eye(lm.ny, dtype=emb.qd.dtype)
    blocks = [swap(put_rows(jnp.zeros((lm.ny, len(c.v_index)), G_S.dtype), c.y_index, swap(G_S)))
              for c, G_S in zip(lm.loop_clusters, emb.G)]  # G_S's columns at its y_index
    return _spanning(lm, eye, blocks)


@eager_jit
@full_precision
def lift_acceleration(lm, emb: Embedding, ydd):
    """``qdd = G ydd + g`` (nv,) of an `Embedding`."""
    ydd = jnp.asarray(ydd)
    return _spanning(lm, ydd, [mv(G, take_rows(ydd, c.y_index)) + g
                               for c, G, g in zip(lm.loop_clusters, emb.G, emb.g)])


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
    return mv(swap(embedding_matrix(lm, q)), tau)
