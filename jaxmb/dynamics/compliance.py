"""The operational-space compliance ``Lambda_inv = J M^-1 J*`` by walking each frame's task columns up the path
from its body to the root, and nowhere else.

With ``B`` the task columns placed at their bodies (`jaxmb.dynamics.opspace`) and ``X = psi B`` (the up sweep of
the column sweeps), (10.12) reads

    Lambda_inv = B* psi* H* D^-1 H psi B = sum_k Y*(k) D^-1(k) Y(k),     Y(k) = H(k) X(k)   (n_k, c)

so the down sweep of the column sweeps is not needed for the compliance. And ``X(k)`` is nonzero only in the columns
of the frames below ``k``: frame i's columns reach body ``k`` as ``psi(k, b_i) B_i`` if ``k`` is an ancestor of its
body ``b_i``, and not at all otherwise. So each frame's r columns walk up its own path,

    F_i <- phi(parent a, a) tau_bar(a) F_i = phi(parent a, a) [F_i - G(a) H(a) F_i]      (6.16, 6.29)

recording ``Y_i(a) = H(a) F_i`` and ``nu_i(a) = D^-1(a) Y_i(a)`` at every ancestor ``a``, and a block of the
compliance sums over the ancestors two frames have in common:

    Lambda_inv(i, j) = sum_{a common to both paths} Y_i*(a) nu_j(a)                    (r, r)

Pinocchio's Delassus matrix works along the same paths. For one talos hand the walk visits 10 of 45 bodies with
6 columns where the column sweeps visit all 45 with 6, twice; for both hands and feet 34 body visits with 6
columns against 2 x 45 with 24. The articulated-body quantities ``P, D, G`` still come from the sweep over every body.

The same walk serves any generalized-force column ``x``: recorded by coordinate, ``Y = [I - H psi K] x`` and
``nu = D^-1 Y`` (`Columns`) give ``x_1* M^-1 x_2 = Y_1* nu_2`` (7.18), a dense product of two (nv, c) arrays where
many rows share paths. A unit force ``e_v`` on coordinate v enters at its own joint and walks up from the joint's
parent (`unit_forces`): a joint limit's row costs its depth, not a sweep of the tree.
"""

from functools import cache, reduce
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.dynamics.ab_steps import solve_small
from jaxmb.hinges import hinge_map, joint_poses
from jaxmb.batching import place_rows, take_rows
from jaxmb.spatial import Transform, mm, phi, swap


class WalkGroup(NamedTuple):
    """The frames of one walk step whose current bodies have ``n`` coordinates: ``pos`` (k,) their rows among the
    step's frames (ascending), ``body`` (k,) those bodies, ``dofs`` (k, n) their coordinates; the first ``up`` of
    them move on to the parent."""

    pos: np.ndarray
    body: np.ndarray
    dofs: np.ndarray
    up: int


class WalkStep(NamedTuple):
    """Step s: the first ``frames`` walking frames (deepest first) sit at their s-th ancestor, in ``groups``; the
    frames that move on are reassembled in order by ``place`` (`jaxmb.batching.rows.place_rows`)."""

    frames: int
    groups: tuple
    place: np.ndarray


class Walk(NamedTuple):
    """The static walk of a task's frames (`walk`).

    order (w,): the walking frames (on a body, not the world), deepest first.   steps: `WalkStep` per step.
    pairs: per group of frame pairs (i <= j) with ``t > 0`` common ancestor coordinates, ``(Y_rows, nu_rows)``,
    both (pairs, t): the rows of the recorded ``Y`` of frame i and ``nu`` of frame j at those coordinates.
    block (m, m): where block (i, j) sits among the pairs' blocks, their transposes, and a zero block (frames
    fixed to the world, and frames on two trees of a fixed base).
    nu_row (nv, m): the row of the recorded ``nu`` of frame i at coordinate v, or a zero row past them all where v
    is not on frame i's path.
    """

    order: np.ndarray
    steps: tuple
    pairs: tuple
    block: np.ndarray
    nu_row: np.ndarray


@cache
def walk(topology, body) -> Walk:
    """The `Walk` of frames on ``body`` (m,) (tuple; -1 for a frame fixed to the world). Once per topology and
    frame bodies."""
    body = np.asarray(body, int)
    m = len(body)
    order = np.array(sorted(np.flatnonzero(body >= 0), key=lambda i: -topology.depth[body[i]]), int)
    paths = [topology.ancestors(body[i]) for i in order]  # from the frame's body to the root
    steps, row, n_rows = [], {}, 0  # row[(frame, coordinate)]: its row among the recorded Y and nu
    for s in range(len(paths[0]) if len(order) else 0):
        frames = sum(len(p) > s for p in paths)
        moving = sum(len(p) > s + 1 for p in paths)
        at = np.array([p[s] for p in paths[:frames]], int)
        groups = []
        for n in np.unique(topology.nv_body[at]):
            pos = np.flatnonzero(topology.nv_body[at] == n)
            dofs = topology.v_offset[at[pos]][:, None] + np.arange(n)
            for f, v in zip(order[pos], dofs):
                for k, coordinate in enumerate(v):
                    row[f, coordinate] = n_rows + k
                n_rows += n
            groups.append(WalkGroup(pos, at[pos], dofs, int((pos < moving).sum())))
        place = np.concatenate([g.pos[: g.up] for g in groups])
        steps.append(WalkStep(frames, tuple(groups), place))
    by_count, position = {}, np.full((m, m), -1)
    for i in sorted(order):
        for j in sorted(order):
            common = np.flatnonzero(topology.support[body[i]] & topology.support[body[j]])  # shared path coordinates
            if i <= j and len(common):
                by_count.setdefault(len(common), []).append((i, j, [row[i, v] for v in common],
                                                             [row[j, v] for v in common]))
    pairs, n_pairs = [], 0
    for t in sorted(by_count):
        group = by_count[t]
        pairs.append((np.array([g[2] for g in group], int).reshape(len(group), t),
                      np.array([g[3] for g in group], int).reshape(len(group), t)))
        for i, j, _, _ in group:
            position[i, j], n_pairs = n_pairs, n_pairs + 1
    block, upper = np.full((m, m), 2 * n_pairs), position >= 0
    block.T[upper] = position[upper] + n_pairs  # block (j, i) = block (i, j)*
    block[upper] = position[upper]
    nu_row = np.full((topology.nv, m), n_rows)
    for (f, coordinate), k in row.items():
        nu_row[coordinate, f] = k
    return Walk(order, tuple(steps), tuple(pairs), block, nu_row)


def _over_rows(X):
    """Transforms (k,) applied to rows: (k, 1)."""
    return Transform(X.R[:, None], X.p[:, None])


def compliance(model, q, d, placement, body, ab):
    """``Lambda_inv`` (m r, m r) of the task rows ``d`` (m, r, 6) at frames ``placement`` (Transform, m) on
    ``body`` (tuple, m), from the articulated-body quantities ``ab`` at ``q`` (module docstring)."""
    return walk_task_columns(model, q, d, placement, body, ab)[0]


def walk_task_columns(model, q, d, placement, body, ab):
    """``(Lambda_inv, nu)``: the compliance (m r, m r) as `compliance`, and ``nu = D^-1 H psi B`` (nv, m r) by
    coordinate, the up sweep's part of ``M^-1 J*`` (7.18), zero off the frames' paths."""
    plan = walk(model.topology, tuple(body))
    m, r = d.shape[0], d.shape[1]
    if not len(plan.order):
        return jnp.zeros((m * r, m * r), d.dtype), jnp.zeros((model.nv, m * r), d.dtype)
    Y, nu = _recorded(model, q, d, placement, plan, ab)
    blocks = []
    for Y_rows, nu_rows in plan.pairs:  # Lambda_inv(i, j) = sum_a Y_i*(a) nu_j(a)
        Y_t, nu_t = take_rows(Y, Y_rows.reshape(-1)), take_rows(nu, nu_rows.reshape(-1))
        terms = Y_t.reshape(Y_rows.shape + (r, 1)) * nu_t.reshape(nu_rows.shape + (1, r))
        blocks.append(reduce(jnp.add, [terms[:, a] for a in range(terms.shape[1])]))  # slices: no reduce op
    blocks = jnp.concatenate(blocks) if blocks else jnp.zeros((0, r, r), d.dtype)
    every = jnp.concatenate([blocks, swap(blocks), jnp.zeros((1, r, r), d.dtype)])
    L = take_rows(every, plan.block.reshape(-1)).reshape(m, m, r, r)
    L = jnp.transpose(L, (0, 2, 1, 3)).reshape(m * r, m * r)
    return 0.5 * (L + L.T), _by_coordinate(model, plan, nu)


def _recorded(model, q, d, placement, plan, ab):
    """``(Y, nu)``: the rows ``Y_i(a) = H(a) F_i`` and ``nu_i(a) = D^-1(a) Y_i(a)`` (rows, r) of every frame at
    every coordinate of its path, in the order of the `Walk`'s rows."""
    r = d.shape[1]
    X, H = joint_poses(model, q), hinge_map(model)
    columns = phi(_over_rows(placement), d)  # phi(b_i, O_i) d_i*                                   (m, r, 6)
    F = take_rows(columns, plan.order)
    Y, nu = [], []
    for step in plan.steps:
        F = F[: step.frames]  # frames that passed the root are done
        moved = []
        for g in step.groups:
            k, n = g.dofs.shape
            dofs = g.dofs.reshape(-1)
            F_g = take_rows(F, g.pos)
            H_g = take_rows(H, dofs).reshape(k, n, 6)
            Y_g = mm(H_g, swap(F_g))  # Y_i(a) = H(a) F_i                                            (k, n, r)
            D_g = take_rows(ab.D, dofs).reshape(k, n, 6)[..., :n]
            Y.append(Y_g.reshape(k * n, r))
            nu.append(jax.vmap(solve_small)(D_g, Y_g).reshape(k * n, r))  # nu_i(a) = D^-1(a) Y_i(a)
            if g.up:
                G_g = take_rows(ab.G, dofs).reshape(k, n, 6)[: g.up]
                tau_bar_F = F_g[: g.up] - mm(swap(Y_g[: g.up]), G_g)  # tau_bar(a) F_i = F_i - G(a) H(a) F_i
                X_g = take_rows(X, g.body[: g.up])
                moved.append(phi(_over_rows(X_g), tau_bar_F))  # to the parent
        if len(step.place):
            F = place_rows(moved, step.place)
    return jnp.concatenate(Y), jnp.concatenate(nu)


def _by_coordinate(model, plan, Z):
    """The recorded rows ``Z`` (rows, r) of the frames (m) by coordinate (nv, m r), zero off each frame's path."""
    r = Z.shape[1]
    Z = take_rows(jnp.concatenate([Z, jnp.zeros((1, r), Z.dtype)]), plan.nu_row.reshape(-1))
    return Z.reshape(model.nv, -1)


class Columns(NamedTuple):
    """Generalized-force columns ``x`` (nv, c) recorded by coordinate: ``Y = [I - H psi K] x`` (the innovations of
    (7.18)) and ``nu = D^-1 Y``, both (nv, c), zero off the columns' paths. For any two sets of columns,
    ``x_1* M^-1 x_2 = Y_1* nu_2``; for task columns ``x = J*``, ``Y = H psi B``."""

    Y: jnp.ndarray
    nu: jnp.ndarray


def walk_columns(model, q, d, placement, body, ab) -> Columns:
    """The `Columns` of the task rows ``d`` (m, r, 6) at frames ``placement`` (Transform, m) on ``body`` (tuple,
    m) (module docstring): (nv, m r), column ``i r + j`` row j of frame i."""
    plan = walk(model.topology, tuple(body))
    m, r = d.shape[0], d.shape[1]
    if not len(plan.order):
        zero = jnp.zeros((model.nv, m * r), d.dtype)
        return Columns(zero, zero)
    return Columns(*(_by_coordinate(model, plan, Z) for Z in _recorded(model, q, d, placement, plan, ab)))


class UnitForces(NamedTuple):
    """The unit generalized forces ``e_v`` of velocity coordinates (k,) split for the walk (`unit_forces`): the
    task columns ``d`` (k, 1, 6) at the frames ``placement`` (Transform, k) on the bodies ``body`` (tuple, k) that
    they enter above their joints, and ``own`` the `Columns` (nv, k) of their joints' own coordinates."""

    d: jnp.ndarray
    placement: Transform
    body: tuple
    own: Columns


def unit_forces(model, q, coordinates, ab) -> UnitForces:
    """`UnitForces` of ``e_v`` for the velocity ``coordinates`` (k,). The up sweep of (7.18) under ``x = e_v``
    has ``eps = e_v`` at the joint of ``v`` (body k), so ``Y = e_v`` and ``nu = D^-1(k) e_v`` there, and hands the
    parent ``K(parent, k) e_v = phi(parent, k) G(k) e_v``, which goes up from there as the task column
    ``-phi(parent, k) G(k) e_v`` goes (``eps(a) = -H(a) z(a)``, ``z+ = tau_bar z``): the `Columns` of ``e_v`` are
    ``own`` plus `walk_columns` of ``(d, placement, body)``. No other body sees ``e_v``."""
    topo = model.topology
    v = np.asarray(coordinates, int)
    k = topo.dof_body[v]
    X = joint_poses(model, q)
    own, at = [], np.full((topo.nv, len(v)), -1)  # nu = D^-1(k) e_v at the joint's coordinates
    for n in np.unique(topo.nv_body[k]):
        cols = np.flatnonzero(topo.nv_body[k] == n)
        dofs = topo.v_offset[k[cols]][:, None] + np.arange(n)  # (c, n)
        D = take_rows(ab.D, dofs.reshape(-1)).reshape(len(cols), n, 6)[..., :n]
        e = np.eye(n)[v[cols] - topo.v_offset[k[cols]]]
        at[dofs, cols[:, None]] = sum(x.size for x in own) + np.arange(len(cols) * n).reshape(len(cols), n)
        own.append(jax.vmap(solve_small)(D, jnp.asarray(e[..., None], D.dtype))[..., 0].reshape(-1))
    own = jnp.concatenate(own + [jnp.zeros(1, ab.D.dtype)])
    nu = take_rows(own, np.where(at < 0, own.shape[0] - 1, at).reshape(-1)).reshape(topo.nv, len(v))
    return UnitForces(d=-take_rows(ab.G, v)[:, None, :], placement=Transform(take_rows(X.R, k), take_rows(X.p, k)),
                      body=tuple(int(b) for b in topo.parent[k]),
                      own=Columns(jnp.asarray(np.eye(topo.nv)[:, v], ab.D.dtype), nu))
