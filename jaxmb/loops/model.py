"""`LoopModel`: a spanning tree, its constraints, and the tree of cluster nodes that embeds them (book 15.1,
Chignoli et al. 2023, section III).

Aggregation (book ch. 15): for each constraint, the aggregation set is the set of bodies on the paths from the
bodies it involves up to their closest common ancestor, that ancestor excluded; overlapping sets are merged. Each
merged set is one *cluster*: a node of the cluster tree whose base bodies all hang from one body of the parent node,
the *anchor* (the output body Lambda of Chignoli et al.). Every other body is a cluster of its own. Cluster nodes
sit in a level schedule like bodies: per depth of the cluster tree, grouped by their shape, so that one group is one
batched step (`jaxmb.loops.articulated`).

Coordinates: the state is the spanning configuration ``q`` (tree.nq,) that satisfies the constraints, and the
independent velocities ``yd`` (ny,), the entries ``qd[y_v_index]`` of the spanning velocity. The independent
positions are ``y = q[y_q_index]``; `jaxmb.loops.position` recovers ``q`` from them. Both keep the spanning tree's
coordinate order, so a tree coordinate without constraints keeps its place relative to the others.
"""

import dataclasses
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.configuration import neutral_configuration
from jaxmb.errors import ModelError
from jaxmb.joints import KINDS
from jaxmb.model import Model
from jaxmb.loops.constraints import common_ancestor, stacked_jacobian, tree_path


@dataclass(frozen=True)
class Cluster:
    """A node of the cluster tree (static).

    bodies: body indices, ascending.   anchor: the body of the parent node its base bodies hang from (-1: world).
    local_parent: per body, the position in ``bodies`` of its parent, -1 for a base body.
    v_index: the velocity coordinates of its joints, ascending (for a loop cluster equal to its q coordinates).
    independent, dependent: positions in ``v_index``.   rows: its rows of the stacked constraint residual.
    c_cols: for a loop cluster, the positions of ``v_index`` in `LoopModel.c_index`.
    y_index: positions in ``yd`` of its independent coordinates.   depth: depth in the cluster tree.
    """

    bodies: tuple
    anchor: int
    local_parent: tuple
    v_index: tuple
    independent: tuple
    dependent: tuple
    rows: tuple
    c_cols: tuple
    y_index: tuple
    depth: int

    @property
    def loop(self) -> bool:
        return len(self.rows) > 0

    @property
    def ny(self) -> int:
        return len(self.independent)

    def signature(self, nv_body):
        """What shapes the cluster's batched step: clusters with equal signatures share one."""
        return (self.loop, self.local_parent, tuple(int(nv_body[b]) for b in self.bodies), self.ny)


@dataclass(frozen=True)
class LoopModel:
    """A tree ``tree`` closed by ``constraints`` and embedded as a tree of `Cluster` nodes.

    Leaves: ``tree`` (a `jaxmb.Model`) and ``params`` (one tuple of arrays per constraint).
    Static: ``constraints`` (`Bound`), ``clusters``, ``schedule`` (per cluster-tree depth, groups of cluster
    indices with one signature), ``c_index`` / ``c_q_index`` (the constrained coordinates, those of loop
    clusters, ascending, in ``qd`` and in ``q``), ``y_q_index`` / ``y_v_index`` (independent position and
    velocity coordinates in ``q`` and ``qd``).
    """

    tree: Model
    params: tuple
    constraints: tuple = field(metadata=dict(static=True))
    clusters: tuple = field(metadata=dict(static=True))
    schedule: tuple = field(metadata=dict(static=True))
    c_index: tuple = field(metadata=dict(static=True))
    c_q_index: tuple = field(metadata=dict(static=True))
    y_q_index: tuple = field(metadata=dict(static=True))
    y_v_index: tuple = field(metadata=dict(static=True))
    name: str = field(default="loops", metadata=dict(static=True))

    @property
    def nq(self) -> int:
        return self.tree.nq

    @property
    def nv(self) -> int:
        return self.tree.nv

    @property
    def ny(self) -> int:
        """Number of independent velocity coordinates (degrees of freedom)."""
        return len(self.y_v_index)

    @property
    def nc(self) -> int:
        """Number of constraint rows."""
        return sum(c.size for c in self.constraints)

    @property
    def independent_joints(self) -> tuple:
        """Names of the joints whose coordinates are independent, in ``yd`` order (a free base counts once)."""
        topo = self.tree.topology
        bodies = dict.fromkeys(int(topo.dof_body[v]) for v in self.y_v_index)
        return tuple(self.tree.joint_names[b] for b in bodies)

    @property
    def loop_clusters(self) -> tuple:
        return tuple(c for c in self.clusters if c.loop)

    def cast(self, dtype) -> "LoopModel":
        return jax.tree.map(lambda x: jnp.asarray(x, dtype), self)

    def replace(self, **changes) -> "LoopModel":
        return dataclasses.replace(self, **changes)

    def __repr__(self):
        n_loop = len(self.loop_clusters)
        return (f"LoopModel({self.name!r}, nb={self.tree.nb}, nq={self.nq}, nv={self.nv}, ny={self.ny}, "
                f"constraints={self.nc}, loop clusters={n_loop}, depth={len(self.schedule)})")


_STATIC = [f.name for f in dataclasses.fields(LoopModel) if f.metadata.get("static")]
jax.tree_util.register_dataclass(LoopModel, data_fields=["tree", "params"], meta_fields=_STATIC)


def aggregation_sets(topology, bound):
    """The loop clusters of bound constraints ``bound`` (`Bound`) on a tree: one body set per constraint (the
    paths from its bodies up to their closest common ancestor, that ancestor excluded), merged where they overlap,
    as a list of (sorted body indices, sorted indices into ``bound`` of the constraints each holds)."""
    sets = []
    for i, c in enumerate(bound):
        top = common_ancestor(topology, c.bodies)
        if top in c.bodies:  # a coupling of a joint with an ancestor joint: both joints are inside
            top = int(topology.parent[top])
        bodies = set()
        for b in c.bodies:
            bodies |= set(tree_path(topology, top, b))
        sets.append((bodies, {i}))
    merged = True
    while merged:
        merged = False
        for i in range(len(sets)):
            for j in range(i + 1, len(sets)):
                if sets[i][0] & sets[j][0]:
                    sets[i] = (sets[i][0] | sets[j][0], sets[i][1] | sets[j][1])
                    del sets[j]
                    merged = True
                    break
            if merged:
                break
    return [(sorted(b), sorted(c)) for b, c in sets]


def _check_rank(K, what, names, neutral):
    """Raise `ModelError` where the cluster's constraint Jacobian ``K`` (m, n) has rank below its m rows at the
    reference configuration: the pose itself is singular there (a four-bar at a dead centre, a linkage stretched
    flat), so no choice of m dependent coordinates has a regular ``K_d``."""
    m = K.shape[0]
    s = np.linalg.svd(K, compute_uv=False)
    rank = int(np.sum(s > 1e-9 * max(s.max(initial=0.0), 1e-300)))
    if rank < m:
        at = "the neutral configuration (the default q_reference)" if neutral else "the given q_reference"
        raise ModelError(f"{what}: the constraint rows are not independent at {at}: the constraint Jacobian of the "
                         f"coordinates {names} has rank {rank}, below its {m} constraint rows, so no choice of "
                         "dependent coordinates can be solved for there. Either the reference pose is singular (a "
                         "dead centre, a linkage stretched flat): pass q_reference, a non-singular configuration "
                         "near the motion (it need not close the loops exactly); or a constraint repeats others: "
                         "remove it")


def _choose_dependent(K, m, prefer, names, where):
    """Positions of ``m`` dependent columns of ``K`` (m, n): a greedy pivoted QR that takes the ``prefer``red
    columns first where they keep ``K_d`` well conditioned, then the largest remaining column each time."""
    chosen, R = [], K.copy()
    scale = np.abs(K).max()
    order = list(prefer) + [j for j in range(K.shape[1]) if j not in prefer]
    for _ in range(m):
        norms = np.linalg.norm(R, axis=0)
        norms[chosen] = -1
        best = int(np.argmax(norms))
        pick = next((j for j in order if j not in chosen and j in prefer and norms[j] > 1e-3 * norms[best]), best)
        if norms[pick] <= 1e-9 * scale:
            raise ModelError(f"{where}: the constraints are not independent at the reference configuration "
                             f"(coordinates {names}); remove a redundant one or pass q_reference")
        chosen.append(pick)
        u = R[:, pick] / norms[pick]
        R = R - np.outer(u, u @ R)
    return sorted(chosen)


def close_loops(tree: Model, constraints, independent=None, q_reference=None, name=None) -> LoopModel:
    """Bind ``constraints`` (`jaxmb.loops.constraints`) to ``tree``, aggregate the loops into clusters and fix
    the independent coordinates.

    ``independent``: names of the joints whose coordinates stay independent in each loop cluster (exactly as
    many per cluster as it has degrees of freedom); by default they are chosen automatically, with ``K_d``
    best conditioned at ``q_reference`` (default: the neutral configuration), the follower of a coupling and
    the outputs of an explicit map made dependent first. Raises `ModelError` for constraints that name missing
    or multi-dof joints, that leave a cluster no freedom, or that are dependent at the reference configuration.
    """
    where = f"model {tree.name!r}"
    topo = tree.topology
    bound = [c.bind(tree) for c in constraints]
    params = tuple(b.params for b in bound)
    sets = aggregation_sets(topo, bound)
    for bodies, _ in sets:
        for b in bodies:
            if KINDS[topo.kinds[b]].nq != 1:
                raise ModelError(f"{where}: joint {tree.joint_names[b]!r} ({tree.joint_types[b]}) lies inside a loop; "
                                 "loop clusters are made of 1-dof joints")
    row0 = np.concatenate([[0], np.cumsum([c.size for c in bound])]).astype(int)
    c_bodies = sorted(b for bodies, _ in sets for b in bodies)
    c_index = [int(topo.v_offset[b]) for b in c_bodies]
    c_q_index = [int(topo.q_offset[b]) for b in c_bodies]
    q_ref = neutral_configuration(tree) if q_reference is None else jnp.asarray(q_reference, float)
    if bound:
        K_all = np.asarray(stacked_jacobian(tree, bound, params, q_ref.astype(tree.mass.dtype), tuple(c_q_index)))
    wanted = None if independent is None else set(independent)
    if wanted is not None:
        unknown = wanted - set(tree.joint_names)
        if unknown:
            raise ModelError(f"{where}: independent coordinates name unknown joints {sorted(unknown)}")

    in_loop = {b: k for k, (bodies, _) in enumerate(sets) for b in bodies}
    raw = []  # (bodies, anchor, v_index, independent, dependent, rows, c_cols)
    for bodies, cons in sets:
        anchors = {int(topo.parent[b]) for b in bodies if topo.parent[b] not in bodies}
        if len(anchors) != 1:
            raise ModelError(f"{where}: a loop cluster {[tree.body_names[b] for b in bodies]} hangs from several "
                             "bodies; it cannot be embedded as one node")
        v_index = [int(topo.v_offset[b]) for b in bodies]
        rows = [r for c in cons for r in range(row0[c], row0[c + 1])]
        names = [tree.joint_names[b] for b in bodies]
        what = f"{where}: loop cluster of joints {names}"
        n, m = len(bodies), len(rows)
        if m >= n:
            raise ModelError(f"{what}: {m} constraint rows leave no degree of freedom to its {n} coordinates")
        c_cols = [c_index.index(v) for v in v_index]
        K_S = K_all[np.ix_(rows, c_cols)]
        if wanted is not None:
            ind = [i for i, nm in enumerate(names) if nm in wanted]
            if len(ind) != n - m:
                raise ModelError(f"{what}: needs {n - m} independent coordinates, got {[names[i] for i in ind]}")
            dep = [i for i in range(n) if i not in ind]
            _check_rank(K_S, what, names, q_reference is None)
            if np.linalg.cond(K_S[:, dep]) > 1e10:
                raise ModelError(f"{what}: the dependent coordinates {[names[i] for i in dep]} cannot be solved "
                                 "for at the reference configuration (K_d is singular); choose others")
        else:
            _check_rank(K_S, what, names, q_reference is None)
            prefer = []
            for c in cons:
                for p in bound[c].prefer_dependent:
                    b = int(np.flatnonzero(topo.q_offset == bound[c].q_index[p])[0])
                    if bodies.index(b) not in prefer:
                        prefer.append(bodies.index(b))
            dep = _choose_dependent(K_S, m, prefer, names, what)
            ind = [i for i in range(n) if i not in dep]
        anchor = anchors.pop()
        raw.append((bodies, anchor, v_index, ind, dep, rows, c_cols))
    if wanted is not None:
        loose = wanted - {tree.joint_names[b] for bodies, _ in sets for b in bodies}
        if loose:
            raise ModelError(f"{where}: joints {sorted(loose)} are in no loop; their coordinates are independent "
                             "anyway, leave them out of `independent`")
    for b in range(topo.nb):
        if b not in in_loop:
            nv = int(topo.nv_body[b])
            v0 = int(topo.v_offset[b])
            raw.append(([b], int(topo.parent[b]), list(range(v0, v0 + nv)), list(range(nv)), [], [], []))
    raw.sort(key=lambda r: r[0][0])

    y_v = sorted(r[2][i] for r in raw for i in r[3])
    y_q = []
    for r in raw:
        if r[5]:
            y_q += [int(topo.q_offset[r[0][i]]) for i in r[3]]
        else:
            b = r[0][0]
            y_q += list(range(int(topo.q_offset[b]), int(topo.q_offset[b] + topo.nq_body[b])))
    y_q.sort()
    owner = {b: k for k, r in enumerate(raw) for b in r[0]}
    depth = {}
    clusters = []
    for k, (bodies, anchor, v_index, ind, dep, rows, c_cols) in enumerate(raw):
        depth[k] = 0 if anchor < 0 else depth[owner[anchor]] + 1
        local_parent = tuple(bodies.index(int(topo.parent[b])) if topo.parent[b] in bodies else -1 for b in bodies)
        clusters.append(Cluster(tuple(bodies), anchor, local_parent, tuple(v_index), tuple(ind), tuple(dep),
                                tuple(rows), tuple(c_cols), tuple(y_v.index(v_index[i]) for i in ind), depth[k]))
    schedule = []
    for d in range(max(depth.values()) + 1):
        groups = {}
        for k, c in enumerate(clusters):
            if c.depth == d:
                groups.setdefault(c.signature(topo.nv_body), []).append(k)
        schedule.append(tuple(tuple(g) for g in groups.values()))
    return LoopModel(tree, params, tuple(bound), tuple(clusters), tuple(schedule), tuple(c_index), tuple(c_q_index),
                     tuple(y_q), tuple(y_v), name or tree.name)
