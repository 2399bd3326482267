"""The static tree: parent array, level schedule, coordinate offsets. numpy only; hashable; never traced.

Bodies are numbered breadth first, so that ``parent[i] < i`` and every depth level is a contiguous slice of
bodies. Inside a level, bodies are sorted by their number of velocity coordinates (then by parent), so that each
(level, nv) *group* is a contiguous slice of bodies and of velocity coordinates. ``q`` and ``qd`` follow this body
order, joint by joint. Parent -1 is the world (the virtual root row of the sweeps).
"""

from typing import NamedTuple

import numpy as np

from jaxmb.joints import KINDS


SEGMENT_COST = 8
"""What one more `Segment` costs, in padded body slots: its step is traced and compiled once more."""


class Group(NamedTuple):
    """Bodies ``start:stop`` of one level with ``nv`` velocity coordinates each, at coordinates ``v_start:v_stop``."""

    start: int
    stop: int
    nv: int
    v_start: int
    v_stop: int


class Level(NamedTuple):
    """Bodies ``start:stop`` at one depth; ``parent`` indexes the previous level (None for the first level)."""

    start: int
    stop: int
    parent: np.ndarray | None
    groups: tuple


class Segment(NamedTuple):
    """Levels ``first:last`` swept together. One level is swept as it is (`Level`); a run of levels whose bodies
    each have at most one child in the next level, all with ``nv`` coordinates, is a *chain segment*, swept as
    one `jax.lax.scan` over its levels: its W = (bodies of level ``first``) chains sit in fixed *slots*, the child
    in its parent's slot, so that a level hands its values to the next without a gather. A chain that ends
    leaves a *pad* in its slot: a copy of a real body of the level, whose results are dropped.

    A one-level segment has no slots (its fields from ``nv`` on are None).
    body (L, W): the body in each slot.   real (L, W): not a pad.   dofs (L, W, nv): their coordinates.
    body_slot (nb_seg,): flat slot ``l * W + s`` of each body of the segment, in body order.
    dof_slot (nv_seg,): the same for each coordinate, among the (L * W * nv) coordinate slots.
    """

    first: int
    last: int
    nv: int
    body: np.ndarray
    real: np.ndarray
    dofs: np.ndarray
    body_slot: np.ndarray
    dof_slot: np.ndarray


class KindBlock(NamedTuple):
    """All bodies of one joint kind, with the (n, nq) and (n, nv) indices of their coordinates."""

    kind: str
    bodies: np.ndarray
    q_index: np.ndarray
    v_index: np.ndarray


def breadth_first_order(parent, nv):
    """Permutation ``order`` (new -> old) numbering a tree given by ``parent`` (old indices, -1 = world)
    breadth first; inside a level, by (nv, new parent index, old index)."""
    parent = np.asarray(parent)
    new_of_old = {-1: -1}
    order, level = [], [i for i in range(len(parent)) if parent[i] == -1]
    while level:
        level.sort(key=lambda i: (nv[i], new_of_old[parent[i]], i))
        for i in level:
            new_of_old[i] = len(order)
            order.append(i)
        level = [i for i in range(len(parent)) if parent[i] in set(level)]
    if len(order) != len(parent):
        raise ValueError("the parent array does not describe a tree rooted at the world (a cycle?)")
    return np.array(order, int)


class WalkStep(NamedTuple):
    """Step s of the column walk up the tree (`jaxmb.sweeps.ancestor_walk`, the innovations factors' entries):
    columns ``start:nv`` (bodies at depth >= s) sit at their s-th ancestor. ``keep`` drops the columns that
    reached the root; ``moved`` (columns,) is the body whose joint moves each column up at this step;
    ``(rows, cols)`` are the entries ``(i, j)`` it fills."""

    start: int
    keep: int
    moved: np.ndarray
    rows: np.ndarray
    cols: np.ndarray


class Topology:
    """Static structure of a model. Build with `Topology(parent, kinds)` in breadth-first order.

    Attributes (all numpy or tuples):
        parent (nb,): parent body, -1 for the world; ``parent[i] < i``.
        kinds (nb,): joint kind names (`jaxmb.joints.KINDS`).
        depth (nb,), nq, nv: sizes; q_offset (nb,), v_offset (nb,): first coordinate of each joint.
        levels: `Level` per depth.   kind_blocks: `KindBlock` per joint kind present.
        dof_body (nv,): body of each velocity coordinate.   support (nb, nv): coordinate j moves body i.
        level_coordinates: (a, b) per level, its velocity coordinates a:b.
    """

    def __init__(self, parent, kinds):
        self.parent = np.asarray(parent, dtype=int)
        self.kinds = tuple(kinds)
        nb = len(self.parent)
        if np.any(self.parent >= np.arange(nb)):
            raise ValueError("bodies must be numbered so that parent[i] < i")
        unknown = sorted({k for k in self.kinds if k not in KINDS})
        if unknown:
            raise ValueError(f"unknown joint kind(s) {unknown}; jaxmb.joints.KINDS has {sorted(KINDS)}")
        self.nb = nb
        nq_b = np.array([KINDS[k].nq for k in self.kinds], int)
        nv_b = np.array([KINDS[k].nv for k in self.kinds], int)
        self.q_offset = np.concatenate([[0], np.cumsum(nq_b)[:-1]]).astype(int) if nb else np.zeros(0, int)
        self.v_offset = np.concatenate([[0], np.cumsum(nv_b)[:-1]]).astype(int) if nb else np.zeros(0, int)
        self.nq_body, self.nv_body = nq_b, nv_b
        self.nq, self.nv = int(nq_b.sum()), int(nv_b.sum())

        depth = np.zeros(nb, int)
        for i in range(nb):
            depth[i] = 0 if self.parent[i] < 0 else depth[self.parent[i]] + 1
        self.depth = depth
        self.levels = self._levels()
        self.dof_body = np.repeat(np.arange(nb), nv_b)
        self.support = self._support()
        self.kind_blocks = tuple(
            KindBlock(
                k,
                np.flatnonzero(np.array(self.kinds) == k),
                np.stack([self.q_offset[i] + np.arange(KINDS[k].nq) for i in np.flatnonzero(np.array(self.kinds) == k)]),
                np.stack([self.v_offset[i] + np.arange(KINDS[k].nv) for i in np.flatnonzero(np.array(self.kinds) == k)]),
            )
            for k in sorted(set(self.kinds))
        )
        self.segments = self._segments()
        self.ancestor_walk = self._ancestor_walk()
        rows = np.concatenate([w.rows for w in self.ancestor_walk])
        cols = np.concatenate([w.cols for w in self.ancestor_walk])
        # A(i, j) = values[ancestor_index[i, j]] for the walk's entries (`sweeps.ancestor_walk`), i an
        # ancestor-or-self coordinate of j; past them (a zero) otherwise
        index = np.full((self.nv, self.nv), len(rows))
        index[rows, cols] = np.arange(len(rows))
        self.ancestor_index = index
        self.level_coordinates = tuple((int(self.v_offset[lvl.start]), lvl.groups[-1].v_stop) for lvl in self.levels)
        self.mass_matrix_index = self._mass_matrix_index()
        # position of each coordinate inside its joint
        self.dof_local = np.arange(self.nv) - self.v_offset[self.dof_body]
        self._key = (self.parent.tobytes(), self.kinds)

    def _ancestor_walk(self):
        if not self.nb:  # a model with no movable joint: step 0 alone, with no columns
            return (WalkStep(0, 0, np.zeros(0, int), np.zeros(0, int), np.zeros(0, int)),)
        steps, at, prev_start = [], None, 0
        for lvl in self.levels:
            start = int(self.v_offset[lvl.start])
            cols = np.arange(start, self.nv)
            if at is None:
                moved, at = np.zeros(0, int), self.dof_body[cols]
            else:
                moved = at[start - prev_start :]
                at = self.parent[moved]
            rows = [self.v_offset[a] + np.arange(self.nv_body[a]) for a in at]
            pair_cols = np.repeat(cols, [len(r) for r in rows])
            steps.append(WalkStep(start, start - prev_start, moved, np.concatenate(rows), pair_cols))
            prev_start = start
        return tuple(steps)

    def _mass_matrix_index(self):
        """M(i, j) = blocks[index[i, j]] for the level blocks of `jaxmb.dynamics.mass` (level coordinates a:b against
        a:nv, flattened in turn): the entry in the row of the ancestor-or-self coordinate, and past the blocks (a
        zero) for coordinates on different paths."""
        nv, index, size = self.nv, np.zeros((self.nv, self.nv), int), 0
        for a, b in self.level_coordinates:
            index[a:b, a:] = size + np.arange((b - a) * (nv - a)).reshape(b - a, nv - a)
            size += (b - a) * (nv - a)
        above = self.support[self.dof_body].T  # coordinate i moves the body of coordinate j
        return np.where(above, index, np.where(above.T, index.T, size))

    def _levels(self):
        levels = []
        for d in range(int(self.depth.max()) + 1 if self.nb else 0):
            idx = np.flatnonzero(self.depth == d)
            start, stop = int(idx[0]), int(idx[-1]) + 1
            if not np.array_equal(idx, np.arange(start, stop)):
                raise ValueError("each depth level must be a contiguous slice of bodies (use breadth_first_order)")
            groups, s = [], start
            while s < stop:
                e = s
                while e < stop and self.nv_body[e] == self.nv_body[s]:
                    e += 1
                v0 = int(self.v_offset[s])
                groups.append(Group(s, e, int(self.nv_body[s]), v0, v0 + int(self.nv_body[s:e].sum())))
                s = e
            parent = None if d == 0 else self.parent[start:stop] - levels[-1].start
            levels.append(Level(start, stop, parent, tuple(groups)))
        return tuple(levels)

    def _segments(self):
        """Split the levels into `Segment` runs, minimizing padded slots plus `SEGMENT_COST` per run."""
        n = len(self.levels)
        widths = [lvl.stop - lvl.start for lvl in self.levels]
        best, cut = [0.0] + [np.inf] * n, [0] * (n + 1)
        for j in range(1, n + 1):
            for i in range(j - 1, -1, -1):
                if i < j - 1 and not self._chain_continues(i):
                    break
                cost = best[i] + widths[i] * (j - i) + SEGMENT_COST
                if cost < best[j]:
                    best[j], cut[j] = cost, i
        bounds, j = [], n
        while j > 0:
            bounds.insert(0, (cut[j], j))
            j = cut[j]
        return tuple(self._segment(i, j) for i, j in bounds)

    def _chain_continues(self, d):
        """Whether level ``d + 1`` continues level ``d`` in a chain segment (`Segment`): one coordinate count
        for both, and at most one child per body."""
        lvl, nxt = self.levels[d], self.levels[d + 1]
        parents = self.parent[nxt.start : nxt.stop]
        return (len(lvl.groups) == len(nxt.groups) == 1 and len(set(parents)) == len(parents)
                and self.nv_body[lvl.start] == self.nv_body[nxt.start])

    def _segment(self, first, last):
        if last - first == 1:
            return Segment(first, last, *[None] * 6)
        levels = self.levels[first:last]
        L, W, nv = len(levels), levels[0].stop - levels[0].start, int(self.nv_body[levels[0].start])
        body = np.zeros((L, W), int)
        real = np.zeros((L, W), bool)
        body[0], real[0] = np.arange(levels[0].start, levels[0].stop), True
        for li, lvl in enumerate(levels[1:], 1):
            body[li] = lvl.start  # pads
            for b in range(lvl.start, lvl.stop):
                k = int(np.flatnonzero(real[li - 1] & (body[li - 1] == self.parent[b]))[0])
                body[li, k], real[li, k] = b, True
        order = np.argsort(np.where(real, body, self.nb).reshape(-1), kind="stable")[: real.sum()]
        dof_slot = (order[:, None] * nv + np.arange(nv)).reshape(-1)
        return Segment(first, last, nv, body, real, self.v_offset[body][..., None] + np.arange(nv), order, dof_slot)

    def _support(self):
        S = np.zeros((self.nb, self.nv), bool)
        for i in range(self.nb):
            j = i
            while j >= 0:
                S[i, self.v_offset[j] : self.v_offset[j] + self.nv_body[j]] = True
                j = self.parent[j]
        return S

    def ancestors(self, i):
        """Bodies from ``i`` up to its root, ``i`` included."""
        out = []
        while i >= 0:
            out.append(int(i))
            i = self.parent[i]
        return out

    def subtree(self, i):
        """Bodies of the subtree rooted at ``i``, ``i`` included."""
        return [j for j in range(self.nb) if i in self.ancestors(j)]

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, Topology) and self._key == other._key

    def __repr__(self):
        return f"Topology(nb={self.nb}, nq={self.nq}, nv={self.nv}, depth={len(self.levels)})"
