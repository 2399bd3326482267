"""Partitioning a model's multi-dof joints into 1-dof sub-hinges joined by massless bodies, at build time.

Jain, "Partitioning of Recursive Multibody Dynamics" (2022): a joint k with n degrees of freedom becomes a chain of
n one-dof sub-hinges, the bodies between them massless and of zero extent, the last one body k itself (eq. 2). The
parent sees the chain through ``phi(k+1, k') phi(k', k) = phi_bar(k+1, k)`` and the sub-hinges' motion is
``H_bar(k) = [H(k'') ; H(k') phi(k', k)]`` (condition 5), so velocities, accelerations and inter-body forces of
the real bodies are those of the unpartitioned model (eq. 4) while every ``D(k)`` of the articulated-body sweep is
a scalar.

=================  ==============================================  =========================================
joint              sub-hinges (parent side first)                  partitioned coordinates
=================  ==============================================  =========================================
spherical          three revolutes about the axes of ``sequence``  the angles of `jaxmb.partitioning.sequences`
free               prismatic x, y, z, then the three revolutes     joint-frame position, then the angles
planar             prismatic along the plane's two directions,     ``[x, y, theta]``, the planar joint's own
                   revolute about its normal                       positions; rates ``[x_dot, y_dot, w]``
universal          two revolutes (`universal`)                     the two angles
gimbal             three revolutes (`gimbal`)                      the three angles
screw              unchanged                                       unchanged
=================  ==============================================  =========================================

A jaxmb `Model` has spherical, planar and free joints, which `partition_model` expands. It has no universal or
gimbal joint kind (their hinge map depends on the configuration, which `jaxmb.joints` does not allow), so those
are built partitioned from the start by `PartitionBuilder`, whose `PartitionMap` still groups their sub-hinges as
one joint. Every body of a partitioned model has one coordinate.

Rejected at build time with a `ModelError` naming the joint and body: a partitioned joint whose body carries no
mass or inertia, with all it carries (a massless leaf, or a massless chain without a massive descendant: its
sub-hinges' ``D(k)`` would vanish); armature on a partitioned joint (a diagonal armature in the joint's
coordinates is not diagonal in the sub-hinges'); a sequence that is not Tait-Bryan; a universal joint with parallel
axes; names that collide.
"""

from dataclasses import dataclass, field
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxmb import joints
from jaxmb.errors import ModelError
from jaxmb.joints import KINDS, plane_basis
from jaxmb.model import Model, ModelBuilder, pytree_dataclass
from jaxmb.partitioning.sequences import AXES, sequence_axes
from jaxmb.spatial import Transform
from jaxmb.topology import Topology, breadth_first_order

IDENTITY_TYPES = ("screw", "universal", "gimbal")
"""Joint types whose partitioned coordinates are the joint's own: the maps copy them."""


class HingeChain(NamedTuple):
    """A joint given as its 1-dof sub-hinges, for `PartitionBuilder.add_body`: ``joints`` (`jaxmb.joints.Joint`,
    parent side first), ``labels`` (one per sub-hinge: the suffix of its joint's and massless body's names)."""

    type: str
    joints: tuple
    labels: tuple


def universal(axis1=(1.0, 0.0, 0.0), axis2=(0.0, 1.0, 0.0)) -> HingeChain:
    """A universal (Cardan) joint: a rotation about ``axis1`` of the joint frame, then about ``axis2`` of the frame
    so turned. Its two axes must not be parallel (the joint would have one degree of freedom)."""
    a1, a2 = (np.asarray(joints.revolute(a).axis) for a in (axis1, axis2))
    if abs(a1 @ a2) > 1 - 1e-9:
        raise ModelError(f"a universal joint's axes must not be parallel, got {tuple(axis1)} and {tuple(axis2)}")
    return HingeChain("universal", (joints.revolute(a1), joints.revolute(a2)), ("r1", "r2"))


def gimbal(sequence="xyz") -> HingeChain:
    """A gimbal: three revolutes about the axes of ``sequence`` (`jaxmb.partitioning.sequences`), each turning
    the frame of the next. Locked where its middle angle is +-pi/2 (`jaxmb.partitioning.gimbal_lock`)."""
    axes, _ = sequence_axes(sequence)
    return HingeChain("gimbal", tuple(joints.revolute(np.eye(3)[a]) for a in axes), tuple("r" + AXES[a] for a in axes))


class Chain(NamedTuple):
    """Sub-hinges already in a model that form one joint: ``name``, ``type`` and the sub-hinges' joint names
    ``sub_joints``, parent side first (the bodies between them massless)."""

    name: str
    type: str
    sub_joints: tuple


class JointPartition(NamedTuple):
    """One joint of the unpartitioned model and its sub-hinges.

    name, type: the joint's name and type (`IDENTITY_TYPES`, ``spherical``, ``planar``, ``free``).
    body: the name of the body it moves (the same name in the partitioned model).
    sub_joints (n,): the sub-hinges' joint names in the partitioned model, parent side first.
    bodies (n,): the partitioned bodies they move, parent side first; the last is ``body``, the others massless.
    q, v: the joint's coordinate indices in the unpartitioned ``q`` (nq,) and ``qd`` (nv,).
    """

    name: str
    type: str
    body: str
    sub_joints: tuple
    bodies: tuple
    q: tuple
    v: tuple


class JointGroup(NamedTuple):
    """The joints of one type and number of sub-hinges n, whose maps run as one batched operation (m joints).

    joints (m,): indices into `PartitionMap.joints`.  bodies (m, n): partitioned bodies, parent side first.
    q (m, nq), v (m, nv): unpartitioned coordinates.   sub (m, n): partitioned coordinates (one per body).
    hinge (m, nv, 6): the unpartitioned joint's constant hinge map ``H`` by rows, in its body frame; None for
    `IDENTITY_TYPES`.
    """

    type: str
    joints: tuple
    bodies: tuple
    q: tuple
    v: tuple
    sub: tuple
    hinge: tuple | None


@dataclass(frozen=True)
class PartitionMap:
    """The static map between a partitioned model and its unpartitioned joints and bodies (hashable).

    sequence: the rotation sequence of the partitioned spherical and free joints.
    joints: `JointPartition` per unpartitioned joint, in the unpartitioned coordinate order.
    groups: `JointGroup`s covering every joint once.
    body (N,): the partitioned index of each unpartitioned body.   body_names (N,): their names.
    nq, nv: sizes of the unpartitioned coordinates, laid out breadth first as `jaxmb.model.ModelBuilder` lays out a
    model's (for a model without universal or gimbal joints, exactly that model's layout).
    """

    sequence: str
    joints: tuple
    groups: tuple
    body: tuple
    body_names: tuple
    nq: int
    nv: int

    def joint(self, name) -> JointPartition:
        for j in self.joints:
            if j.name == name:
                return j
        raise KeyError(f"no partitioned joint {name!r}; the joints are {[j.name for j in self.joints]}")


@pytree_dataclass
@dataclass(frozen=True)
class Partition:
    """A partitioned `Model` (a JAX pytree: vmap and grad over its parameters) and its static `PartitionMap`."""

    model: Model
    map: PartitionMap = field(metadata=dict(static=True))


# -- the sub-hinges of each joint kind ------------------------------------------------------------------------


class _SubHinge(NamedTuple):
    type: str  # "revolute" or "prismatic"
    axis: np.ndarray
    label: str
    q: int | None  # the joint's q coordinate whose limits it keeps, None for an angle


def _sub_hinges(kind, axis, sequence):
    """The sub-hinges of a spherical, free or planar joint, parent side first."""
    axes, _ = sequence_axes(sequence)
    rotations = [_SubHinge("revolute", np.eye(3)[a], "r" + AXES[a], None) for a in axes]
    if kind == "spherical":
        return rotations
    if kind == "free":
        return [_SubHinge("prismatic", np.eye(3)[a], "p" + AXES[a], a) for a in range(3)] + rotations
    B = np.asarray(plane_basis(jnp.asarray(axis)))
    return [_SubHinge("prismatic", B[:, 0], "x", 0), _SubHinge("prismatic", B[:, 1], "y", 1),
            _SubHinge("revolute", B[:, 2], "theta", 2)]


class _Entry(NamedTuple):
    """A body of the partitioned model before numbering."""

    parent: int  # entry index, -1 for the world
    source: int  # model body whose inertia it copies; -1 for a new massless body
    placement: int  # model body whose X_tree it takes; -1 for the identity
    name: str
    joint_name: str
    joint_type: str
    axis: np.ndarray
    coef: tuple
    limits: tuple
    armature: float


def _massless_subtree(topo, mass, inertia, i):
    return all(mass[j] == 0 and not np.any(inertia[j]) for j in topo.subtree(i))


def partition_model(model: Model, sequence="xyz", chains=()) -> Partition:
    """The model with every spherical, free and planar joint partitioned into 1-dof sub-hinges (Jain 2022, eq. 2),
    with its `PartitionMap`. Build time, in Python, on a concrete model.

    ``sequence``: the rotation sequence of spherical and free joints (`jaxmb.partitioning.sequences`).
    ``chains``: `Chain`s, sub-hinges already in the model that the map groups as one joint (`PartitionBuilder`
    gives them). Screw joints stay as they are. Raises `ModelError` for what the module docstring lists.
    """
    sequence_axes(sequence)
    topo = model.topology
    mass, inertia = np.asarray(model.mass), np.asarray(model.inertia)
    armature, lower, upper = np.asarray(model.armature), np.asarray(model.q_lower), np.asarray(model.q_upper)
    axis, coef = np.asarray(model.axis), np.asarray(model.coef)

    # the unpartitioned joints (nodes): a chain, or one model body
    chain_of = {}
    for chain in chains:
        idx = [model.joint_index(s) for s in chain.sub_joints]
        for a, b in zip(idx, idx[1:]):
            if topo.parent[b] != a:
                raise ModelError(f"{model.name}: the sub-hinges {chain.sub_joints} of joint {chain.name!r} are not "
                                 "a chain, each moving the body the next is attached to")
        for a in idx[:-1]:
            if mass[a] or np.any(inertia[a]) or list(np.flatnonzero(topo.parent == a)) != [idx[idx.index(a) + 1]]:
                raise ModelError(f"{model.name}: body {model.body_names[a]!r} between the sub-hinges of joint "
                                 f"{chain.name!r} must be massless (condition 5: M(k') = 0) and carry only the next "
                                 "sub-hinge")
        for a in idx:
            chain_of[a] = (chain, idx)
    nodes = [chain_of[i] if i in chain_of else (None, [i]) for i in range(model.nb)
             if i not in chain_of or chain_of[i][1][-1] == i]
    node_of = {i: n for n, (_, idx) in enumerate(nodes) for i in idx}

    entries, node_bodies, entry_of = [], [], {}
    for chain, idx in nodes:
        body = idx[-1]
        kind = topo.kinds[body]
        parent = -1 if topo.parent[idx[0]] < 0 else entry_of[topo.parent[idx[0]]]
        expand = chain is None and kind != "screw"
        if chain is not None or expand:
            name = chain.name if chain else model.joint_names[body]
            if _massless_subtree(topo, mass, inertia, body):
                raise ModelError(f"{model.name}: joint {name!r} moves body {model.body_names[body]!r}, which carries "
                                 "no mass or inertia, nor does any body beyond it: its sub-hinges would have "
                                 "D(k) = 0 (a massless leaf or a massless chain needs a massive descendant)")
        mine = []
        if not expand:
            for b in idx:
                q0 = topo.q_offset[b]
                entries.append(_Entry(parent, b, b, model.body_names[b], model.joint_names[b],
                                      model.joint_types[b], axis[b], tuple(coef[b]), (lower[q0], upper[q0]),
                                      float(armature[topo.v_offset[b]])))
                parent = entry_of[b] = len(entries) - 1
                mine.append(parent)
        else:
            v0 = topo.v_offset[body]
            if np.any(armature[v0:v0 + topo.nv_body[body]]):
                raise ModelError(f"{model.name}: joint {model.joint_names[body]!r} has armature, which its "
                                 "sub-hinges cannot carry (diagonal in its coordinates, not in theirs)")
            subs = _sub_hinges(kind, axis[body], sequence)
            for s, sub in enumerate(subs):
                q = topo.q_offset[body] + sub.q if sub.q is not None else None
                last = s == len(subs) - 1
                entries.append(_Entry(parent, body if last else -1, body if s == 0 else -1,
                                      model.body_names[body] if last else f"{model.body_names[body]}.{sub.label}",
                                      f"{model.joint_names[body]}.{sub.label}", sub.type, sub.axis,
                                      (1.0, 0.0) if sub.type == "revolute" else (0.0, 1.0),
                                      (-np.inf, np.inf) if q is None else (lower[q], upper[q]), 0.0))
                parent = len(entries) - 1
                mine.append(parent)
        entry_of[body] = mine[-1]
        node_bodies.append(mine)

    for what, names in (("body", [e.name for e in entries]), ("joint", [e.joint_name for e in entries])):
        dup = sorted({x for x in names if names.count(x) > 1})
        if dup:
            raise ModelError(f"{model.name}: the partitioned model would have duplicate {what} names {dup}")

    order = breadth_first_order([e.parent for e in entries], [1] * len(entries))
    new = np.argsort(order)
    E = [entries[o] for o in order]
    parent = np.array([-1 if e.parent < 0 else new[e.parent] for e in E], int)
    src = np.array([max(e.source, 0) for e in E])
    has_mass = np.array([e.source >= 0 for e in E])
    placed = np.array([e.placement >= 0 for e in E])
    at = np.array([max(e.placement, 0) for e in E])
    dtype = model.mass.dtype

    def leaf(x, mask=None, fill=0.0):
        x = np.asarray(x, float)
        if mask is not None:
            x = np.where(mask.reshape((-1,) + (1,) * (x.ndim - 1)), x, fill)
        return jnp.asarray(x, dtype)

    X = model.X_tree
    partitioned = Model(
        X_tree=Transform(leaf(np.asarray(X.R)[at], placed, np.eye(3)), leaf(np.asarray(X.p)[at], placed)),
        axis=leaf([e.axis for e in E]),
        coef=leaf([e.coef for e in E]),
        mass=leaf(mass[src], has_mass),
        com=leaf(np.asarray(model.com)[src], has_mass),
        inertia=leaf(inertia[src], has_mass),
        gravity=model.gravity,
        q_lower=leaf([e.limits[0] for e in E]),
        q_upper=leaf([e.limits[1] for e in E]),
        armature=leaf([e.armature for e in E]),
        frame_placement=model.frame_placement,
        topology=Topology(parent, ["screw"] * len(E)),
        body_names=tuple(e.name for e in E),
        joint_names=tuple(e.joint_name for e in E),
        joint_types=tuple(e.joint_type for e in E),
        frame_names=model.frame_names,
        frame_body=tuple(-1 if b < 0 else int(new[entry_of[b]]) for b in model.frame_body),
        name=model.name,
        notes=model.notes,
    )
    return Partition(partitioned, _partition_map(model, sequence, nodes, node_of,
                                                 [[int(new[e]) for e in m] for m in node_bodies], partitioned))


def _partition_map(model, sequence, nodes, node_of, node_bodies, partitioned) -> PartitionMap:
    """The `PartitionMap` of the nodes (unpartitioned joints) and their partitioned bodies."""
    topo = model.topology
    types = [chain.type if chain else topo.kinds[idx[-1]] for chain, idx in nodes]
    nv = [len(idx) if chain else KINDS[topo.kinds[idx[-1]]].nv for chain, idx in nodes]
    nq = [len(idx) if chain else KINDS[topo.kinds[idx[-1]]].nq for chain, idx in nodes]
    node_parent = [-1 if topo.parent[idx[0]] < 0 else node_of[topo.parent[idx[0]]] for _, idx in nodes]
    order = breadth_first_order(node_parent, nv)
    q0 = np.concatenate([[0], np.cumsum([nq[n] for n in order])])
    v0 = np.concatenate([[0], np.cumsum([nv[n] for n in order])])
    p_topo = partitioned.topology
    found = []
    for r, n in enumerate(order):
        chain, idx = nodes[n]
        found.append(JointPartition(
            chain.name if chain else model.joint_names[idx[-1]], types[n], model.body_names[idx[-1]],
            tuple(partitioned.joint_names[b] for b in node_bodies[n]), tuple(node_bodies[n]),
            tuple(range(int(q0[r]), int(q0[r + 1]))), tuple(range(int(v0[r]), int(v0[r + 1])))))
    groups = {}
    for r, (j, n) in enumerate(zip(found, order)):
        groups.setdefault((j.type, len(j.bodies)), []).append((r, n))
    axis = np.asarray(model.axis)
    built = []
    for (kind, _), members in groups.items():
        rows = [found[r] for r, _ in members]
        hinge = None if kind in IDENTITY_TYPES else tuple(
            tuple(map(tuple, np.asarray(KINDS[kind].hinge_map(jnp.asarray(axis[nodes[n][1][-1]]), None), float)))
            for _, n in members)
        built.append(JointGroup(kind, tuple(r for r, _ in members), tuple(j.bodies for j in rows),
                                tuple(j.q for j in rows), tuple(j.v for j in rows),
                                tuple(tuple(int(p_topo.v_offset[b]) for b in j.bodies) for j in rows), hinge))
    return PartitionMap(sequence, tuple(found), tuple(built), tuple(j.bodies[-1] for j in found),
                        tuple(j.body for j in found), int(q0[-1]), int(v0[-1]))


# -- building partitioned models in code ----------------------------------------------------------------------


class PartitionBuilder:
    """`jaxmb.model.ModelBuilder` whose `add_body` also takes a `HingeChain` (`universal`, `gimbal`) and whose
    `build` returns a `Partition`: chains are added as their sub-hinges, massless bodies named
    ``"<body>.<label>"`` and joints ``"<joint>.<label>"``, the last sub-hinge moving the body itself; spherical,
    free and planar joints are partitioned by `partition_model`.

    >>> b = PartitionBuilder("arm")
    >>> b.add_body("upper", None, universal(), mass=1.0, com=(0, 0, -0.3), inertia=np.diag([0.1, 0.1, 0.01]))
    >>> b.add_body("hand", "upper", joints.spherical(), placement=(np.eye(3), (0, 0, -0.6)), mass=0.5,
    ...            inertia=0.01 * np.eye(3))
    >>> partition = b.build(sequence="zyx")
    """

    def __init__(self, name="model", gravity=(0.0, 0.0, -9.81), source=None, inertia="warn"):
        self.builder = ModelBuilder(name, gravity, source, inertia)
        self.source = source or name
        self.chains = []
        self.bodies = {}  # name -> (parent, massless, joint name if partitioned else None)

    def add_body(self, name, parent, joint, *, joint_name=None, placement=None, mass=0.0, com=(0.0, 0.0, 0.0),
                 inertia=None, armature=None):
        """As `jaxmb.model.ModelBuilder.add_body`; ``joint`` may be a `HingeChain`, which takes no armature."""
        joint_name = joint_name or name
        massless = mass == 0 and (inertia is None or not np.any(inertia))
        if not isinstance(joint, HingeChain):
            self.builder.add_body(name, parent, joint, joint_name=joint_name, placement=placement, mass=mass,
                                  com=com, inertia=inertia, armature=armature)
            partitioned = joint.kind is not None and joint.kind.name != "screw"
            self.bodies[name] = (parent, massless, joint_name if partitioned else None)
            return name
        if armature is not None:
            raise ModelError(f"{self.source}: body {name!r}: a {joint.type} joint takes no armature")
        at, subs = parent, []
        for s, (sub, label) in enumerate(zip(joint.joints, joint.labels)):
            last = s == len(joint.joints) - 1
            subs.append(f"{joint_name}.{label}")
            at = self.builder.add_body(name if last else f"{name}.{label}", at, sub, joint_name=subs[-1],
                                       placement=placement if s == 0 else None,
                                       **(dict(mass=mass, com=com, inertia=inertia) if last else {}))
        self.chains.append(Chain(joint_name, joint.type, tuple(subs)))
        self.bodies[name] = (parent, massless, joint_name)
        return name

    def add_frame(self, name, body, placement=None):
        return self.builder.add_frame(name, body, placement)

    def build(self, sequence="xyz") -> Partition:
        """The `Partition` (`partition_model` of the built model, with the chains). Raises `ModelError` first for
        a partitioned joint whose body and everything attached beyond it, fixed links included, are massless."""
        for name, (_, massless, joint_name) in self.bodies.items():
            if joint_name is not None and massless and self._massless_beyond(name):
                raise ModelError(f"{self.source}: joint {joint_name!r} moves body {name!r}, which carries no mass "
                                 "or inertia, nor does any body beyond it: its sub-hinges would have D(k) = 0 "
                                 "(a massless leaf or a massless chain needs a massive descendant)")
        return partition_model(self.builder.build(), sequence, tuple(self.chains))

    def _massless_beyond(self, name):
        children = [c for c, (p, _, _) in self.bodies.items() if p == name]
        return all(self.bodies[c][1] and self._massless_beyond(c) for c in children)
