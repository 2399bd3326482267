"""The constraint-embedded articulated-body algorithm on the cluster tree (book 15.16-15.23;
Chignoli et al. 2023, Alg. 1).

A cluster node S with bodies ``1..n`` hanging from the anchor body Lambda of its parent node has, stacked over
its bodies (6n rows, body coordinates):

    B       = [phi*(Lambda, i)]_i              (6n, 6)   the parent's motion seen by each body (Chignoli (35))
    Phi_S   = [phi*(j, i)]_{i, j in S}         (6n, 6n)  lower block-triangular within S (book A_S*, seed (13))
    S       = Phi_S diag(H*(j)) G_S            (6n, ny)  the cluster's motion subspace (seed (15), book H_RS*)
    Sd yd   = Phi_S (diag(H*(j)) g_S + a_S)    (6n,)     its bias acceleration (seed (19)); a(j) = V(j) x H* qd(j)

and the articulated-body recursion reads as for a body, with ``S`` for ``H*`` (seed (57)-(61)):

    up:    I_A = diag(P(i)),  p_A = [z(i)],  U = I_A S,  D = S* U + G_S* diag(armature) G_S
           u = tau_S - S* p_A - G_S* armature g_S,   I_a = I_A - U D^-1 U*,   p_a = p_A + I_a Sd yd + U D^-1 u
           P(Lambda) += B* I_a B,   z(Lambda) += B* p_a
    down:  a' = B alpha(Lambda) + Sd yd,   ydd_S = D^-1 (u - U* a'),   alpha_S = a' + S ydd_S

``P(i)`` and ``z(i)`` accumulate per body (``M(i)`` and ``b(i)`` to start with), so a parent node's ``I_A``
stays block diagonal: a child node adds only to its anchor's block (Chignoli et al.
2023, section IV-D). A one-body node with
``G = 1`` is the ordinary AB step, so the recursion covers the whole tree; nodes are swept per depth of the
cluster tree, one batched step per group of equal shape.

Derivatives are not taken through these sweeps but, as for the tree (`jaxmb.dynamics.articulated`), by the implicit
function theorem on the cluster RNEA ``ID_y(q, yd, FD_y(q, yd, tau)) = tau``: ``d ydd = M_y^-1 (d tau - d ID_y)``,
``M_y^-1`` applied with the factors ``B, S, D, D^-1 U*`` that the up sweep leaves (`solve_factored`), ``d ID_y``
through the tree's Newton-Euler, whose reverse mode is its adjoint (`jaxmb.dynamics.adjoint`). The identity holds
at any ``q``, closed or not, since both sides embed at ``q``. The sweeps run once, in the primal call, whose factors
the derivative map and its transpose take as residuals: the gradient's program traces them once, not three times,
which shortens its compilation without changing its run time (benchmarks/findings.md, "Closed loops' derivatives").

``M_y^-1 x`` alone (`mass_matrix_inverse_times`; the velocities of the momenta, `jaxmb.loops.hamiltonian`) is the
up sweep without bias terms, whose ``P, D, D^-1 U*`` depend on ``q`` alone (`mass_matrix_factors`), then the sweeps
of the factored solve (`solve_factored`), and differentiates as the forward dynamics at rest without gravity.

Under `jax.vmap` on the CPU a batch is computed `jaxmb.batching.chunks.CHUNK_STATES_VMAP` states at a time
(`jaxmb.batching.vmap_in_cpu_chunks`, and `linear_in_cpu_chunks` for the derivatives), each chunk by `jax.vmap`: the
dense cluster steps keep their batched products, and a chunk's arrays stay in the caches, where one `vmap` over a
large batch made the run time depend on the program's gathers; the batch-last interpreter of the tree's sweeps runs
these steps slower (benchmarks/findings.md, "Closed loops in chunks"). The sweeps gather and sum rows
(`jaxmb.batching.rows`) where a scatter would be a loop over the batch."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from jaxmb.batching import (
    eager_jit,
    full_precision,
    linear_in_cpu_chunks,
    live_tangents,
    of_live,
    put_rows,
    sum_rows,
    vmap_in_cpu_chunks,
)
from jaxmb.dynamics.ab_steps import solve_small
from jaxmb.dynamics.articulated import velocity_terms
from jaxmb.hinges import base_acceleration, body_inertias, hinge_map, joint_poses
from jaxmb.loops.dynamics import inverse_dynamics
from jaxmb.loops.embedding import embedding
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
    zero = jnp.zeros((g, 6, 6), dtype)
    return jnp.concatenate([jnp.concatenate([entries.get((i, j), zero) for j in range(n)], 2) for i in range(n)], 1)


def _node_terms(node, T_world, H, G, a=None, g=None):
    """``B``, ``S`` and, given the Coriolis terms ``a`` and the bias ``g`` of ``G`` (None inside a one-body
    group), ``Sd yd`` of a group (module docstring); without ``a`` only ``B`` and ``S``, which ``q`` alone fixes."""
    gs, n = node.bodies.shape
    T_anchor = _take(T_world, node.anchor)
    T_i = [_take(T_world, node.bodies[:, i]) for i in range(n)]
    B = jnp.concatenate([_motion_matrix(compose(inverse(T_anchor), T_i[i])) for i in range(n)], 1)  # (g, 6n, 6)
    Hs = H[node.v_index]  # (g, n_S, 6): rows of H*(j), body by body
    dtype = Hs.dtype
    a_S = None if a is None else a[node.bodies].reshape(gs, 6 * n)
    if not node.loop:  # one body, G = 1, g = 0: S = H*, Sd yd = a
        return B, jnp.swapaxes(Hs, 1, 2), a_S
    eye = jnp.broadcast_to(jnp.eye(6, dtype=dtype), (gs, 6, 6))
    Phi = _blocks(gs, n, {(i, j): eye if i == j else _motion_matrix(compose(inverse(T_i[j]), T_i[i]))
                          for i, j in node.pairs}, dtype)
    # diag(H*(j)): body j's column block holds its rows of H*, one coordinate per body inside a loop cluster
    zero = jnp.zeros((gs, 6), dtype)
    H_diag = jnp.stack([jnp.stack([Hs[:, j] if i == j else zero for i in range(n)], -1) for j in range(n)], 1)
    S_span = Phi @ H_diag.reshape(gs, 6 * n, n)  # Phi_S diag(H*)  (6n, n_S)
    S = S_span @ G  # (15)
    if a is None:
        return B, S, None
    Sd_yd = (S_span @ g[..., None])[..., 0] + (Phi @ a_S[..., None])[..., 0]  # (19)
    return B, S, Sd_yd


def _group_maps(lm, node, emb):
    """Stacked ``G_S`` (g, n_S, ny) and ``g_S`` (g, n_S) of a loop group."""
    where = {k: i for i, k in enumerate(k for k, c in enumerate(lm.clusters) if c.loop)}
    G = jnp.stack([emb.G[where[k]] for k in node.ids])
    g = jnp.stack([emb.g[where[k]] for k in node.ids])
    return G, g


def _nodes(lm):
    """The groups of `_Node` per depth of the cluster tree, base first."""
    return [[_Node(lm, ids) for ids in level] for level in lm.schedule]


def _world_poses(tree, X):
    """The bodies' poses in the world (nb + 1): the joint poses ``X`` composed down the tree, and the world itself
    at row nb, where the anchor of a base cluster points."""
    T_world = down(tree.topology, compose, Transform.identity(X.p.dtype), X)
    return Transform(jnp.concatenate([T_world.R, jnp.eye(3, dtype=X.p.dtype)[None]]),
                     jnp.concatenate([T_world.p, jnp.zeros((1, 3), X.p.dtype)]))


def _group_inertia(node, P, S, G, armature):
    """``I_A = diag(P(i))``, ``U = I_A S`` and ``D = S* U + G_S* diag(armature) G_S`` of a group (module
    docstring, up), from the articulated inertias ``P`` accumulated per body."""
    gs, n = node.bodies.shape
    I_A = _blocks(gs, n, {(i, i): P[node.bodies[:, i]] for i in range(n)}, P.dtype)
    U = I_A @ S  # (g, 6n, ny)
    D = jnp.swapaxes(S, 1, 2) @ U
    arm_S = armature[node.v_index]
    if node.loop:
        D = D + jnp.swapaxes(G, 1, 2) @ (arm_S[..., None] * G)
    else:
        D = D + arm_S[..., None] * jnp.eye(D.shape[-1], dtype=D.dtype)
    return I_A, U, D


def _pass_inertia(node, P, B, I_a):
    """``P(Lambda) += B* I_a B`` (59): a group's articulated inertia passed to its anchors' rows of ``P``."""
    return P + sum_rows(jnp.swapaxes(B, 1, 2) @ I_a @ B, node.anchor, P.shape[0])


class NodeFactors(NamedTuple):
    """The factors of ``M_y`` that the up sweep leaves for one group of cluster nodes (module docstring): ``B``
    (g, 6n, 6), ``S`` (g, 6n, ny), ``D`` (g, ny, ny) and ``Dinv_Ut = D^-1 U*`` (g, ny, 6n)."""

    B: jnp.ndarray
    S: jnp.ndarray
    D: jnp.ndarray
    Dinv_Ut: jnp.ndarray


def _factor(lm, q, yd, tau, f_ext):
    """``ydd`` (ny,) by the up and down sweeps of the module docstring, and the factors of ``M_y`` that
    `solve_factored` needs: per group a `NodeFactors`, keyed by its cluster ids."""
    tree = lm.tree
    emb = embedding(lm, q, yd)
    X, H, M, _, a, b = velocity_terms(tree, q, emb.qd, f_ext)
    T_world = _world_poses(tree, X)
    arm = tree.armature
    P = jnp.concatenate([M, jnp.zeros((1, 6, 6), M.dtype)])  # per body, row nb collects what goes to the world
    z = jnp.concatenate([b, jnp.zeros((1, 6), b.dtype)])
    nodes = _nodes(lm)
    factors, biases = {}, {}
    for level in reversed(nodes):  # up: tips to base
        for node in level:
            gs, n = node.bodies.shape
            G, g = _group_maps(lm, node, emb) if node.loop else (None, None)
            B, S, Sd_yd = _node_terms(node, T_world, H, G, a, g)
            I_A, U, D = _group_inertia(node, P, S, G, arm)
            p_A = z[node.bodies].reshape(gs, 6 * n)
            u = tau[node.y_index] - (jnp.swapaxes(S, 1, 2) @ p_A[..., None])[..., 0]
            if node.loop:
                u = u - (jnp.swapaxes(G, 1, 2) @ (arm[node.v_index] * g)[..., None])[..., 0]
            Dinv = solve_small(D, jnp.concatenate([jnp.swapaxes(U, 1, 2), u[..., None]], -1))  # D^-1 [U*, u]
            Dinv_Ut, Dinv_u = Dinv[..., :-1], Dinv[..., -1]
            I_a = I_A - U @ Dinv_Ut
            p_a = p_A + (I_a @ Sd_yd[..., None])[..., 0] + (U @ Dinv_u[..., None])[..., 0]
            P = _pass_inertia(node, P, B, I_a)
            z = z + sum_rows((jnp.swapaxes(B, 1, 2) @ p_a[..., None])[..., 0], node.anchor, z.shape[0])  # (60)
            factors[node.ids] = NodeFactors(B=B, S=S, D=D, Dinv_Ut=Dinv_Ut)
            biases[node.ids] = (Sd_yd, Dinv_u)
    alpha = jnp.concatenate([jnp.zeros((tree.nb, 6), X.p.dtype), base_acceleration(tree)[None]])
    return _accelerations_down(lm, nodes, factors, biases, alpha), factors


def mass_matrix_factors(lm, q):
    """The factors of ``M_y = G* M G`` at the spanning configuration ``q`` (nq,): per group of cluster nodes a
    `NodeFactors` (keyed by its cluster ids), from the up sweep of the module docstring without its bias terms:
    the articulated inertias ``P``, ``D`` and ``D^-1 U*`` depend on ``q`` alone (15.16-15.23 at rest), so no
    velocity sweep, Coriolis terms, constraint bias ``g`` or residual forces are computed. The same factors as
    `forward_dynamics`'s sweep leaves at any velocity and forces."""
    tree = lm.tree
    emb = embedding(lm, q, jnp.zeros(lm.ny, tree.mass.dtype))  # its G_S depend on q alone; g_S = 0 is not used
    X, H, M = joint_poses(tree, q), hinge_map(tree), body_inertias(tree)
    T_world = _world_poses(tree, X)
    P = jnp.concatenate([M, jnp.zeros((1, 6, 6), M.dtype)])
    factors = {}
    for level in reversed(_nodes(lm)):  # up: tips to base
        for node in level:
            G = _group_maps(lm, node, emb)[0] if node.loop else None
            B, S, _ = _node_terms(node, T_world, H, G)
            I_A, U, D = _group_inertia(node, P, S, G, tree.armature)
            Dinv_Ut = solve_small(D, jnp.swapaxes(U, 1, 2))
            P = _pass_inertia(node, P, B, I_A - U @ Dinv_Ut)
            factors[node.ids] = NodeFactors(B=B, S=S, D=D, Dinv_Ut=Dinv_Ut)
    return factors


def _accelerations_down(lm, nodes, factors, biases, alpha):
    """The down sweep: ``ydd`` (ny,) from the world's acceleration ``alpha`` (row nb of (nb + 1, 6)), each group's
    ``(Sd yd, D^-1 u)`` in ``biases``."""
    ydd = jnp.zeros(lm.ny, alpha.dtype)
    for level in nodes:  # base to tips
        for node in level:
            f = factors[node.ids]
            B, S, Dinv_Ut = f.B, f.S, f.Dinv_Ut
            Sd_yd, Dinv_u = biases[node.ids]
            a_prime = (B @ alpha[node.anchor][..., None])[..., 0] + Sd_yd  # a' = B alpha(Lambda) + Sd yd
            ydd_S = Dinv_u - (Dinv_Ut @ a_prime[..., None])[..., 0]  # (53)
            alpha_S = a_prime + (S @ ydd_S[..., None])[..., 0]  # (61)
            alpha = put_rows(alpha, node.bodies.reshape(-1), alpha_S.reshape(-1, 6))
            ydd = put_rows(ydd, node.y_index.reshape(-1), ydd_S.reshape(-1))
    return ydd


def solve_factored(lm, factors, x):
    """``M_y^-1 x`` (ny,) for ``x`` (ny,) from the factors of ``M_y`` (`mass_matrix_factors`, or those that
    `forward_dynamics`'s sweep leaves): the up and down sweeps of the module docstring with no bias terms (a still
    system, world at rest), ``p_A`` only what the children pass up. ``U D^-1 u = (D^-1 U*)* u``, ``D`` being
    symmetric. Linear in ``x``, and symmetric as ``M_y^-1`` is."""
    nb = lm.tree.nb
    nodes = _nodes(lm)
    z = jnp.zeros((nb + 1, 6), x.dtype)
    biases = {}
    for level in reversed(nodes):  # up
        for node in level:
            gs, n = node.bodies.shape
            f = factors[node.ids]
            B, S, D, Dinv_Ut = f.B, f.S, f.D, f.Dinv_Ut
            p_A = z[node.bodies].reshape(gs, 6 * n)
            u = x[node.y_index] - (jnp.swapaxes(S, 1, 2) @ p_A[..., None])[..., 0]
            p_a = p_A + (jnp.swapaxes(Dinv_Ut, 1, 2) @ u[..., None])[..., 0]
            z = z + sum_rows((jnp.swapaxes(B, 1, 2) @ p_a[..., None])[..., 0], node.anchor, nb + 1)
            biases[node.ids] = (jnp.zeros_like(p_A), solve_small(D, u[..., None])[..., 0])
    return _accelerations_down(lm, nodes, factors, biases, jnp.zeros((nb + 1, 6), x.dtype))


_accelerations_in_chunks = vmap_in_cpu_chunks(lambda lm, q, yd, tau, f_ext: _factor(lm, q, yd, tau, f_ext)[0],
                                              batch_last=False)
_factor_in_chunks = vmap_in_cpu_chunks(_factor, batch_last=False)


@jax.custom_jvp
def _accelerations(lm, q, yd, tau, f_ext):
    return _accelerations_in_chunks(lm, q, yd, tau, f_ext)


@full_precision
def _accelerations_jvp(primals, tangents):
    """``d ydd = M_y^-1 (d tau - d ID_y)``, the implicit function theorem on ``ID_y(q, yd, FD_y(q, yd, tau)) = tau``:
    ``d ID_y`` the derivative of the cluster RNEA (`jaxmb.loops.inverse_dynamics`) at the fixed ``ydd`` along the
    tangents of ``(lm, q, yd, f_ext)`` that are not symbolic zeros, ``M_y^-1`` by the factors that the forward
    sweep leaves (`solve_factored`). Its transpose is ``lambda = M_y^-1 ct`` (symmetric) followed by the cluster
    RNEA's reverse mode at ``-lambda``, whose tree part is Newton-Euler's adjoint (`jaxmb.dynamics.adjoint`). The
    sweeps run once, in the primal call; the tangent map and its transpose reuse their factors."""
    lm, q, yd, tau, f_ext = primals
    ydd, factors = _factor_in_chunks(lm, q, yd, tau, f_ext)
    live, dots = live_tangents((lm, q, yd, f_ext), tangents[:3] + tangents[4:])
    tau_dot = None if isinstance(tangents[3], SymbolicZero) else tangents[3]
    has_tau_dot = tau_dot is not None  # static: the transpose returns a cotangent for tau only then
    if not live and not has_tau_dot:
        return ydd, jnp.zeros_like(ydd)

    def cluster_rnea(res):  # the cluster RNEA as a function of the live leaves of (lm, q, yd, f_ext), at ydd
        lm, q, yd, f_ext, ydd, _ = res
        return of_live(lambda lm, q, yd, f_ext: inverse_dynamics(lm, q, yd, ydd, f_ext), (lm, q, yd, f_ext), live)

    @full_precision  # traced when it is transposed or batched, outside this rule
    def tangent(res, lin):
        id_dots, d_tau = lin
        r = -jax.jvp(*cluster_rnea(res), id_dots)[1] if live else 0
        return solve_factored(res[0], res[5], r if d_tau is None else d_tau + r)

    @full_precision
    def transpose(res, ct):
        lam = solve_factored(res[0], res[5], ct)  # M_y^-1 ct
        if not live:
            return [], lam
        f, at = cluster_rnea(res)
        return list(jax.vjp(f, *at)[1](-lam)), lam if has_tau_dot else None

    res = (lm, q, yd, f_ext, ydd, factors)
    return ydd, linear_in_cpu_chunks(tangent, transpose, res, (dots, tau_dot), batch_last=False)


_accelerations.defjvp(_accelerations_jvp, symbolic_zeros=True)


@eager_jit
@full_precision
def forward_dynamics(lm, q, yd, tau, f_ext=None):
    """Independent accelerations ``ydd`` (ny,) by the constraint-embedded AB algorithm, O(N) for bounded
    clusters. Differentiable in every argument and parameter, in forward and reverse mode, by the implicit function
    theorem on the cluster RNEA (`_accelerations_jvp`).

    Args: q (nq,) spanning configuration satisfying the constraints (`jaxmb.loops.solve_configuration`);
    yd (ny,) independent velocities; tau (ny,) independent forces (``G* tau_tree`` for spanning-tree joint forces,
    `jaxmb.loops.generalized_force`); f_ext (nb, 6) or None, body coordinates about the body origins.
    """
    return _accelerations(lm, q, yd, tau, f_ext)



_inverse_times_in_chunks = vmap_in_cpu_chunks(lambda lm, q, x: solve_factored(lm, mass_matrix_factors(lm, q), x),
                                              batch_last=False)


@jax.custom_jvp
def _inverse_times(lm, q, x):
    return _inverse_times_in_chunks(lm, q, x)


def _at_rest_without_gravity(lm, q, x):
    """The constraint-embedded forward dynamics at rest without gravity: its ``ydd`` is ``M_y^-1 x``."""
    still = lm.replace(tree=lm.tree.replace(gravity=jnp.zeros_like(lm.tree.gravity)))
    return _accelerations(still, q, jnp.zeros_like(x), x, None)


def _inverse_times_jvp(primals, tangents):
    """The derivatives of `_at_rest_without_gravity`, by the implicit function theorem on the cluster RNEA
    (`_accelerations_jvp`); reverse mode through the bias-free sweeps themselves runs slower on the N-bar chains."""
    live, dots = live_tangents(primals, tangents)
    if not live:
        y = _inverse_times(*primals)
        return y, jnp.zeros_like(y)
    return jax.jvp(*of_live(_at_rest_without_gravity, primals, live), dots)


_inverse_times.defjvp(_inverse_times_jvp, symbolic_zeros=True)


@eager_jit
@full_precision
def mass_matrix_inverse_times(lm, q, x):
    """``M_y(q)^-1 x`` (ny,) in O(N) for bounded clusters, without forming ``M_y``: the factors of ``q``
    (`mass_matrix_factors`), then `solve_factored`; the constraint-embedded articulated-body algorithm of a still
    system without gravity under the forces ``x``, without computing its bias terms, which are zero there. Its
    derivatives, in every argument and parameter, are `forward_dynamics`'s at rest; under `jax.vmap` on the CPU a
    batch is computed in chunks (`jaxmb.batching.vmap_in_cpu_chunks`), as are its derivatives.

    Args: q (nq,) spanning configuration satisfying the constraints (`jaxmb.loops.solve_configuration`), x (ny,).
    """
    if jnp.shape(x) != (lm.ny,):
        raise ValueError(f"x must have shape ({lm.ny},) for model {lm.name!r} (ny={lm.ny}), got {jnp.shape(x)}; "
                         "batch with jax.vmap")
    return _inverse_times(lm, q, x)
