"""The constraint-embedded articulated-body algorithm on the cluster tree (book 15.16-15.23, seed 001 Alg. 1).

A cluster node S with bodies ``1..n`` hanging from the anchor body Lambda of its parent node has, stacked over
its bodies (6n rows, body coordinates):

    B       = [phi*(Lambda, i)]_i              (6n, 6)   the parent's motion seen by each body (seed 001 (35))
    Phi_S   = [phi*(j, i)]_{i, j in S}         (6n, 6n)  lower block-triangular within S (book A_S*, seed (13))
    S       = Phi_S diag(H*(j)) G_S            (6n, ny)  the cluster's motion subspace (seed (15), book H_RS*)
    Sd yd   = Phi_S (diag(H*(j)) g_S + a_S)    (6n,)     its bias acceleration (seed (19)); a(j) = V(j) x H* qd(j)

and the articulated-body recursion reads as for a body, with ``S`` for ``H*`` (seed (57)-(61)):

    up:    I_A = diag(P(i)),  p_A = [z(i)],  U = I_A S,  D = S* U + G_S* diag(armature) G_S
           u = tau_S - S* p_A - G_S* armature g_S,   I_a = I_A - U D^-1 U*,   p_a = p_A + I_a Sd yd + U D^-1 u
           P(Lambda) += B* I_a B,   z(Lambda) += B* p_a
    down:  a' = B alpha(Lambda) + Sd yd,   ydd_S = D^-1 (u - U* a'),   alpha_S = a' + S ydd_S

``P(i)`` and ``z(i)`` accumulate per body (``M(i)`` and ``b(i)`` to start with), so a parent node's ``I_A``
stays block diagonal: a child node adds only to its anchor's block (seed 001 section IV-D). A one-body node with
``G = 1`` is the ordinary AB step, so the recursion covers the whole tree; nodes are swept per depth of the
cluster tree, one batched step per group of equal shape.
"""

import jax.numpy as jnp
import numpy as np

from jaxmb.dynamics.articulated import solve_small, velocity_terms
from jaxmb.hinges import base_acceleration
from jaxmb.loops.embedding import embedding
from jaxmb.precision import full_precision
from jaxmb.spatial import Transform, compose, inverse, phi_matrix
from jaxmb.sweeps import down


def _motion_matrix(A: Transform):
    """``phi*(P, k)`` (..., 6, 6) for the pose ``A`` of frame k in frame P (motion from P to k coordinates)."""
    return jnp.swapaxes(phi_matrix(A), -1, -2)


def _take(T: Transform, idx):
    return Transform(T.R[idx], T.p[idx])


class _Node:
    """The static index arrays of one group of clusters (g clusters of n bodies, ny coordinates each)."""

    def __init__(self, lm, ids):
        topo = lm.tree.topology
        cs = [lm.clusters[k] for k in ids]
        self.ids = ids
        self.loop = cs[0].loop
        self.bodies = np.array([c.bodies for c in cs])  # (g, n)
        self.anchor = np.array([c.anchor if c.anchor >= 0 else topo.nb for c in cs])  # world -> row nb
        self.v_index = np.array([c.v_index for c in cs])  # (g, n_S)
        self.y_index = np.array([c.y_index for c in cs])  # (g, ny)
        # Phi_S has a block (i, j) where j is an ancestor-or-self of i inside the cluster
        self.pairs = []
        for i in range(len(cs[0].bodies)):
            j = i
            while j >= 0:
                self.pairs.append((i, j))
                j = cs[0].local_parent[j]


def _blocks(g, n, entries, dtype):
    """A (g, 6n, 6n) matrix from {(i, j): (g, 6, 6)} blocks."""
    out = jnp.zeros((g, n, n, 6, 6), dtype)
    for (i, j), blk in entries.items():
        out = out.at[:, i, j].set(blk)
    return jnp.swapaxes(out, 2, 3).reshape(g, 6 * n, 6 * n)


def _node_terms(node, T_world, H, a, G, g):
    """``B``, ``S`` and ``Sd yd`` of a group (module docstring)."""
    gs, n = node.bodies.shape
    T_anchor = _take(T_world, node.anchor)
    T_i = [_take(T_world, node.bodies[:, i]) for i in range(n)]
    B = jnp.concatenate([_motion_matrix(compose(inverse(T_anchor), T_i[i])) for i in range(n)], 1)  # (g, 6n, 6)
    Hs = H[node.v_index]  # (g, n_S, 6): rows of H*(j), body by body
    dtype = Hs.dtype
    a_S = a[node.bodies].reshape(gs, 6 * n)
    if not node.loop:  # one body, G = 1, g = 0: S = H*, Sd yd = a
        return B, jnp.swapaxes(Hs, 1, 2), a_S
    eye = jnp.broadcast_to(jnp.eye(6, dtype=dtype), (gs, 6, 6))
    Phi = _blocks(gs, n, {(i, j): eye if i == j else _motion_matrix(compose(inverse(T_i[j]), T_i[i]))
                          for i, j in node.pairs}, dtype)
    # diag(H*(j)): body j's column block holds its rows of H*, one coordinate per body inside a loop cluster
    H_diag = jnp.zeros((gs, n, 6, n), dtype)
    for j in range(n):
        H_diag = H_diag.at[:, j, :, j].set(Hs[:, j])
    S_span = Phi @ H_diag.reshape(gs, 6 * n, n)  # Phi_S diag(H*)  (6n, n_S)
    S = S_span @ G  # (15)
    Sd_yd = (S_span @ g[..., None])[..., 0] + (Phi @ a_S[..., None])[..., 0]  # (19)
    return B, S, Sd_yd


def _group_maps(lm, node, emb):
    """Stacked ``G_S`` (g, n_S, ny) and ``g_S`` (g, n_S) of a loop group."""
    where = {k: i for i, k in enumerate(k for k, c in enumerate(lm.clusters) if c.loop)}
    G = jnp.stack([emb.G[where[k]] for k in node.ids])
    g = jnp.stack([emb.g[where[k]] for k in node.ids])
    return G, g


@full_precision
def forward_dynamics(lm, q, yd, tau, f_ext=None):
    """Independent accelerations ``ydd`` (ny,) by the constraint-embedded AB algorithm, O(N) for bounded
    clusters.

    Args: q (nq,) spanning configuration satisfying the constraints (`jaxmb.loops.solve_configuration`);
    yd (ny,) independent velocities; tau (ny,) independent forces (``G* tau_tree`` for spanning-tree joint forces,
    `jaxmb.loops.generalized_force`); f_ext (nb, 6) or None, body coordinates about the body origins.
    """
    tree = lm.tree
    topo = tree.topology
    emb = embedding(lm, q, yd)
    X, H, M, _, a, b = velocity_terms(tree, q, emb.qd, f_ext)
    T_world = down(topo, compose, Transform.identity(X.p.dtype), X)
    T_world = Transform(jnp.concatenate([T_world.R, jnp.eye(3, dtype=X.p.dtype)[None]]),
                        jnp.concatenate([T_world.p, jnp.zeros((1, 3), X.p.dtype)]))  # row nb: the world
    arm = tree.armature
    P = jnp.concatenate([M, jnp.zeros((1, 6, 6), M.dtype)])  # per body, row nb collects what goes to the world
    z = jnp.concatenate([b, jnp.zeros((1, 6), b.dtype)])
    nodes = [[_Node(lm, ids) for ids in level] for level in lm.schedule]
    saved = {}
    for level in reversed(nodes):  # up: tips to base
        for node in level:
            gs, n = node.bodies.shape
            G, g = _group_maps(lm, node, emb) if node.loop else (None, None)
            B, S, Sd_yd = _node_terms(node, T_world, H, a, G, g)
            I_A = _blocks(gs, n, {(i, i): P[node.bodies[:, i]] for i in range(n)}, P.dtype)
            p_A = z[node.bodies].reshape(gs, 6 * n)
            U = I_A @ S  # (g, 6n, ny)
            St = jnp.swapaxes(S, 1, 2)
            D = St @ U
            u = tau[node.y_index] - (St @ p_A[..., None])[..., 0]
            arm_S = arm[node.v_index]
            if node.loop:
                Gt = jnp.swapaxes(G, 1, 2)
                D = D + Gt @ (arm_S[..., None] * G)
                u = u - (Gt @ (arm_S * g)[..., None])[..., 0]
            else:
                D = D + arm_S[..., None] * jnp.eye(D.shape[-1], dtype=D.dtype)
            Dinv = solve_small(D, jnp.concatenate([jnp.swapaxes(U, 1, 2), u[..., None]], -1))  # D^-1 [U*, u]
            Dinv_Ut, Dinv_u = Dinv[..., :-1], Dinv[..., -1]
            I_a = I_A - U @ Dinv_Ut
            p_a = p_A + (I_a @ Sd_yd[..., None])[..., 0] + (U @ Dinv_u[..., None])[..., 0]
            Bt = jnp.swapaxes(B, 1, 2)
            P = P.at[node.anchor].add(Bt @ I_a @ B)  # (59)
            z = z.at[node.anchor].add((Bt @ p_a[..., None])[..., 0])  # (60)
            saved[node.ids] = (B, S, Sd_yd, Dinv_Ut, Dinv_u)
    alpha = jnp.concatenate([jnp.zeros((topo.nb, 6), X.p.dtype), base_acceleration(tree)[None]])
    ydd = jnp.zeros(lm.ny, yd.dtype)
    for level in nodes:  # down: base to tips
        for node in level:
            B, S, Sd_yd, Dinv_Ut, Dinv_u = saved[node.ids]
            a_prime = (B @ alpha[node.anchor][..., None])[..., 0] + Sd_yd  # a' = B alpha(Lambda) + Sd yd
            ydd_S = Dinv_u - (Dinv_Ut @ a_prime[..., None])[..., 0]  # (53)
            alpha_S = a_prime + (S @ ydd_S[..., None])[..., 0]  # (61)
            alpha = alpha.at[node.bodies].set(alpha_S.reshape(node.bodies.shape + (6,)))
            ydd = ydd.at[node.y_index].set(ydd_S)
    return ydd
