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
    Y, nu = jnp.concatenate(Y), jnp.concatenate(nu)
    blocks = []
    for Y_rows, nu_rows in plan.pairs:  # Lambda_inv(i, j) = sum_a Y_i*(a) nu_j(a)
        Y_t, nu_t = take_rows(Y, Y_rows.reshape(-1)), take_rows(nu, nu_rows.reshape(-1))
        terms = Y_t.reshape(Y_rows.shape + (r, 1)) * nu_t.reshape(nu_rows.shape + (1, r))
        blocks.append(reduce(jnp.add, [terms[:, a] for a in range(terms.shape[1])]))  # slices: no reduce op
    blocks = jnp.concatenate(blocks) if blocks else jnp.zeros((0, r, r), d.dtype)
    every = jnp.concatenate([blocks, swap(blocks), jnp.zeros((1, r, r), d.dtype)])
    L = take_rows(every, plan.block.reshape(-1)).reshape(m, m, r, r)
    L = jnp.transpose(L, (0, 2, 1, 3)).reshape(m * r, m * r)
    nu = take_rows(jnp.concatenate([nu, jnp.zeros((1, r), d.dtype)]), plan.nu_row.reshape(-1))
    return 0.5 * (L + L.T), nu.reshape(model.nv, m * r)
