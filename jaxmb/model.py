"""`Model`: a static `Topology` plus parameters as JAX leaves; `ModelBuilder` for models made in code.

The parameters are leaves, so ``jax.vmap`` over a batch of models randomizes a domain and ``jax.grad`` with
respect to a model identifies its parameters. Everything static (the tree, joint kinds, names) lives in the
pytree's aux data and shapes the compiled program.
"""

import dataclasses
import functools
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.errors import ModelError
from jaxmb.joints import Joint, unit_axis
from jaxmb.spatial import Transform
from jaxmb.topology import Topology, breadth_first_order


def pytree_dataclass(cls):
    """Register the frozen dataclass ``cls`` as a JAX pytree (returns it: a class decorator): fields whose metadata
    says ``static=True`` are aux data (they shape the compiled program), the others leaves."""
    fields = dataclasses.fields(cls)
    static = [f.name for f in fields if f.metadata.get("static")]
    jax.tree_util.register_dataclass(cls, data_fields=[f.name for f in fields if f.name not in static],
                                     meta_fields=static)
    return cls


@pytree_dataclass
@dataclass(frozen=True)
class Model:
    """A tree of rigid bodies, numbered breadth first (`jaxmb.topology`).

    Leaves (nb bodies, nq/nv coordinates, nf frames):
        X_tree: Transform (nb, 3, 3), (nb, 3)   pose of each joint frame in its parent body frame
        axis (nb, 3), coef (nb, 2)               screw-joint parameters (`jaxmb.joints`); unused by other kinds
        mass (nb,), com (nb, 3), inertia (nb, 3, 3)  body inertias in the body frame, rotational inertia about the com
        gravity (3,)                             physical gravity in world coordinates
        q_lower, q_upper (nq,)                   position limits (+-inf where none)
        armature (nv,)                           reflected rotor inertia of each velocity coordinate (zeros where
                                                 none): the mass matrix is ``M(q) + diag(armature)`` in every
                                                 algorithm, as Pinocchio's ``model.armature``
        frame_placement: Transform (nf, ...)     pose of each frame in its body frame
    Static:
        topology, body_names (nb,), joint_names / joint_types (one per movable joint, in coordinate order),
        frame_names (nf,), frame_body (nf,) (-1: fixed to the world), notes (messages from the loader).

    Numbering: bodies, joints and coordinates are numbered breadth first (`jaxmb.topology.breadth_first_order`):
    by depth in the tree, whatever order the bodies were added in (`ModelBuilder`) or listed in a URDF file. Body
    ``i`` is moved by joint ``joint_names[i]``; find a joint's coordinates by its name rather than by the order of
    ``add_body`` calls: `q_index` and `v_index` (an int, or an int array for a joint with several coordinates),
    `joint_coordinates` (both as slices), `body_index`, `joint_index` and `frame_index`:

    >>> q = q.at[model.q_index("knee")].set(0.3)
    >>> knee_torque = tau[model.v_index("knee")]

    A model with no movable joint has nb = nq = nv = 0 and its frames fixed to the world.
    """

    X_tree: Transform
    axis: jnp.ndarray
    coef: jnp.ndarray
    mass: jnp.ndarray
    com: jnp.ndarray
    inertia: jnp.ndarray
    gravity: jnp.ndarray
    q_lower: jnp.ndarray
    q_upper: jnp.ndarray
    armature: jnp.ndarray
    frame_placement: Transform
    topology: Topology = field(metadata=dict(static=True))
    body_names: tuple = field(metadata=dict(static=True))
    joint_names: tuple = field(metadata=dict(static=True))
    joint_types: tuple = field(metadata=dict(static=True))
    frame_names: tuple = field(metadata=dict(static=True))
    frame_body: tuple = field(metadata=dict(static=True))
    name: str = field(default="model", metadata=dict(static=True))
    notes: tuple = field(default=(), metadata=dict(static=True))

    @property
    def nq(self) -> int:
        return self.topology.nq

    @property
    def nv(self) -> int:
        return self.topology.nv

    @property
    def nb(self) -> int:
        return self.topology.nb

    def body_index(self, name: str) -> int:
        try:
            return self.body_names.index(name)
        except ValueError:
            raise KeyError(f"model {self.name!r} has no body {name!r}") from None

    def joint_index(self, name: str) -> int:
        """Index of the movable joint ``name`` in ``joint_names`` (also the index of the body it moves)."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise KeyError(f"model {self.name!r} has no movable joint {name!r} (fixed joints are merged; "
                           f"its joints are {list(self.joint_names)})") from None

    def joint_coordinates(self, name: str) -> tuple[slice, slice]:
        """``(q slice, v slice)``: where joint ``name``'s position coordinates sit in ``q`` (nq,) and its velocity
        coordinates in ``qd``, ``qdd`` and ``tau`` (nv,). The model numbers coordinates breadth first, not in the
        order the joints were added, so this is the way to address a joint's coordinates."""
        i = self.joint_index(name)
        topo = self.topology
        q0, v0 = int(topo.q_offset[i]), int(topo.v_offset[i])
        return slice(q0, q0 + int(topo.nq_body[i])), slice(v0, v0 + int(topo.nv_body[i]))

    def q_index(self, name: str):
        """Where joint ``name``'s position coordinates sit in ``q`` (nq,): an int for a joint with one (revolute,
        prismatic, continuous), else an int array (nq_k,) (a free joint's 7, a spherical joint's 4), so that
        ``q[model.q_index("knee")]`` is the knee angle and ``q[model.q_index("root")]`` the root's (7,). The same
        coordinates as `joint_coordinates`' slice, as indices."""
        return _indices(self.joint_coordinates(name)[0])

    def v_index(self, name: str):
        """Where joint ``name``'s velocity coordinates sit in ``qd``, ``qdd`` and ``tau`` (nv,): an int for a joint
        with one, else an int array (nv_k,), as `q_index`."""
        return _indices(self.joint_coordinates(name)[1])

    def frame_index(self, name: str) -> int:
        try:
            return self.frame_names.index(name)
        except ValueError:
            raise KeyError(f"model {self.name!r} has no frame or body {name!r}") from None

    def cast(self, dtype) -> "Model":
        """The same model with floating-point leaves in ``dtype``."""
        return jax.tree.map(lambda x: jnp.asarray(x, dtype), self)

    def replace(self, **changes) -> "Model":
        return dataclasses.replace(self, **changes)

    def __repr__(self):
        return f"Model({self.name!r}, nb={self.nb}, nq={self.nq}, nv={self.nv}, depth={len(self.topology.levels)})"


def _indices(coordinates: slice):
    """The int of a one-coordinate slice, else its int array."""
    index = np.arange(coordinates.start, coordinates.stop)
    return int(index[0]) if len(index) == 1 else index


def check_shapes(model: Model, **arrays):
    """Raise ValueError unless each named state array has its shape for ``model`` (one state, no batch axis):
    ``q`` (nq,); ``qd``, ``qdd``, ``tau`` (nv,); ``f_ext`` (nb, 6). None is skipped. Runs at trace time."""
    expected = {"q": (model.nq,), "qd": (model.nv,), "qdd": (model.nv,), "tau": (model.nv,), "f_ext": (model.nb, 6)}
    for name, x in arrays.items():
        if x is not None and jnp.shape(x) != expected[name]:
            raise ValueError(
                f"{name} must have shape {expected[name]} for model {model.name!r} (nq={model.nq}, nv={model.nv}, "
                f"nb={model.nb}), got {jnp.shape(x)}; batch with jax.vmap"
            )


# -- building ------------------------------------------------------------------------------------------------


@dataclass
class _Body:
    name: str
    parent: str | None
    joint: Joint
    joint_name: str
    placement: tuple  # (R (3,3), p (3,)) numpy
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    armature: np.ndarray  # (nv of the joint,)


def _joint_armature(armature, joint: Joint, where):
    """The armature of a joint as (nv,) numpy, from None (zeros), a scalar (every coordinate) or one value per
    velocity coordinate; raises `ModelError` unless finite, non-negative and of the joint's length."""
    nv = 0 if joint.kind is None else joint.kind.nv
    if armature is None:
        return np.zeros(nv)
    try:
        a = np.asarray(armature, float)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: armature must be numbers, got {armature!r}") from None
    if not nv:
        raise ModelError(f"{where}: a fixed joint has no velocity coordinates, so no armature")
    if a.ndim == 0:
        a = np.full(nv, float(a))
    if a.shape != (nv,):
        raise ModelError(f"{where}: armature must be a scalar or a sequence of {nv}, one per velocity coordinate "
                         f"of its {joint.type} joint, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ModelError(f"{where}: armature must be finite and non-negative, got {a.tolist()}")
    return a


def _as_transform(placement):
    if placement is None:
        return np.eye(3), np.zeros(3)
    R, p = placement
    return np.asarray(R, float).reshape(3, 3), np.asarray(p, float).reshape(3)


def _compose(A, B):
    return A[0] @ B[0], A[1] + A[0] @ B[1]


INERTIA_OPTIONS = ("strict", "warn", "repair")
"""What `ModelBuilder` and the loaders do with a physically impossible inertia (``inertia=``; docs/inertia.md):

* ``"strict"``: raise `ModelError` for every one, naming the option that loads it.
* ``"warn"`` (the default): load what keeps the dynamics defined, with a `UserWarning` and a note in
  ``Model.notes``; raise, naming ``inertia="repair"``, for what would leave them undefined (a body whose
  inertia is not positive semi-definite, a joint with a singular ``D(k)``).
* ``"repair"``: load every model, each impossible inertia replaced by the nearest physical one
  (`nearest_physical_inertia`) and each joint that would move nothing given the armature `REPAIR_ARMATURE`, with
  a warning and a note for each.
"""

REPAIR_ARMATURE = 1e-6
"""The least armature (kg m^2 for a rotation, kg for a translation) that ``inertia="repair"`` gives each velocity
coordinate of a joint whose articulated inertia ``D(k) = H R H* + diag(armature)`` (9.2) would be singular: a
joint carrying only massless links (romeo's fingers), or mass on its own axis. A rotor inertia rather than a bound
on the bodies' masses, because it adds nothing to any body: the robot's mass, centre of mass, gravity torques,
momentum and contact behaviour stay those of its file, and where the joint carries no mass at all its coordinate
is a lone rotor, coupled to no other, so every other coordinate's dynamics are exactly those of the file. The
value is small against a motor's rotor inertia, and a million times the threshold below which `ModelBuilder`
counts ``D(k)`` as singular (1e-12, relative to the carried bodies' inertia)."""


class InertiaDefect(NamedTuple):
    """A rotational inertia that no mass distribution has (found by `check_inertia`)."""

    message: str
    """Names the body, its principal moments and what is wrong."""
    positive_semidefinite: bool
    """True where only the triangle inequality breaks: the spatial inertia is still positive semi-definite and
    the dynamics defined. False where it is not: the kinetic energy could be negative."""


def check_inertia(mass, inertia, where, tol=1e-9) -> InertiaDefect | None:
    """Check that (mass, rotational inertia about the com) is physically valid; ``where`` names the body.

    Raises `ModelError` for malformed input, whatever the ``inertia=`` option: a negative or non-finite mass, an
    inertia matrix that is not a finite symmetric 3x3 matrix. The checks allow ``tol`` relative to the largest
    entry, and 1e-12 kg m^2 absolute, since published files round zero inertias to -5e-20.
    Returns an `InertiaDefect` (else None) where the inertia is physically impossible: principal moments that are
    not all non-negative (not positive semi-definite), or that break the triangle inequality I1 + I2 >= I3 (no
    mass distribution has them, yet the dynamics stay well defined, and many published URDFs contain one: go1,
    anymal, allegro, pr2). Sorted moments that satisfy the triangle inequality are non-negative.
    """
    I = np.asarray(inertia, float)
    if not np.isfinite(mass) or mass < 0:
        raise ModelError(f"{where}: mass must be finite and non-negative, got {mass}")
    if I.shape != (3, 3) or not np.all(np.isfinite(I)):
        raise ModelError(f"{where}: inertia must be a finite 3x3 matrix")
    slack = tol * np.abs(I).max() + 1e-12
    if np.abs(I - I.T).max() > slack:
        raise ModelError(f"{where}: inertia matrix is not symmetric")
    e = np.linalg.eigvalsh(I)
    if e[0] < -slack:
        return InertiaDefect(f"{where}: inertia is not positive semi-definite (principal moments {e})", False)
    if e[0] + e[1] < e[2] * (1 - 1e-6) - slack:
        return InertiaDefect(f"{where}: principal moments {e} break the triangle inequality I1 + I2 >= I3 "
                             "(physically invalid)", True)
    return None


def _triangle_projection(e):
    """The point of the cone ``{x in R^3: x_i + x_j >= x_k for all distinct i, j, k}`` nearest to ``e`` (3,)
    (Euclidean): among the projections of ``e`` onto the faces ``a_k . x = 0`` (``a_k = 1 - 2 u_k``) of every
    subset of the three constraints, the nearest one in the cone. The cone is convex, so its nearest point is one
    of them, and the nearest feasible one."""
    A = np.ones((3, 3)) - 2 * np.eye(3)  # row k: x_i + x_j - x_k
    best, dist = None, np.inf
    for subset in range(8):
        rows = A[[k for k in range(3) if subset >> k & 1]]
        x = e - rows.T @ np.linalg.solve(rows @ rows.T, rows @ e) if len(rows) else e
        if np.all(A @ x >= -1e-12 * np.abs(e).max()) and np.linalg.norm(x - e) < dist:
            best, dist = x, np.linalg.norm(x - e)
    return best


def nearest_physical_inertia(inertia):
    """The physical rotational inertia (3, 3) nearest to the symmetric ``inertia`` (3, 3) in the Frobenius norm.

    Physical: principal moments ``e`` with ``e_i + e_j >= e_k`` (the triangle inequality, which implies
    ``e >= 0``). The principal axes are kept and the principal moments moved to the nearest point of that cone in
    R^3. No physical inertia is nearer: by the Hoffman-Wielandt inequality, ``||I - J||_F`` is at least the
    distance between the sorted moments of ``I`` and ``J``, and the moments of ``J`` lie in the cone. A physical
    inertia is returned as it is.
    """
    I = np.asarray(inertia, float)
    e, Q = np.linalg.eigh((I + I.T) / 2)
    moments = _triangle_projection(e)
    if np.array_equal(moments, e):
        return I
    P = (Q * moments) @ Q.T
    return (P + P.T) / 2


def _merge_inertia(parts):
    """Sum of (mass, com, I_c) parts given in one frame, as one (mass, com, I_c)."""
    m = sum(p[0] for p in parts)
    if m <= 0:
        return 0.0, np.zeros(3), sum((p[2] for p in parts), np.zeros((3, 3)))
    c = sum(p[0] * p[1] for p in parts) / m
    I = np.zeros((3, 3))
    for mi, ci, Ii in parts:
        d = ci - c
        I += Ii + mi * (d @ d * np.eye(3) - np.outer(d, d))
    return m, c, I


class ModelBuilder:
    """Builds a `Model` body by body. Fixed joints are merged into their parent body at `build` time; the merged
    bodies stay addressable as frames.

    `build` numbers the bodies and their coordinates breadth first (by depth in the tree), whatever the order of
    the `add_body` calls, so that each tree level is one batched step: a body added second need not own
    ``q[1]``. Address coordinates by joint name with `Model.joint_coordinates`.

    >>> b = ModelBuilder("pendulum")
    >>> b.add_body("link", None, joints.revolute((0, 1, 0)), mass=1.0, com=(0, 0, -0.5),
    ...            inertia=np.diag([0.1, 0.1, 0.01]))
    >>> model = b.build()
    """

    def __init__(self, name="model", gravity=(0.0, 0.0, -9.81), source=None, inertia="warn"):
        """``inertia``: what to do with physically impossible inertias, one of `INERTIA_OPTIONS` (``"strict"``,
        ``"warn"``, ``"repair"``; docs/inertia.md). ``source`` (default ``name``) names the model in errors."""
        if inertia not in INERTIA_OPTIONS:
            raise ValueError(f"inertia must be one of {INERTIA_OPTIONS}, got {inertia!r}")
        self.name = name
        self.inertia_option = inertia
        self.gravity = np.asarray(gravity, float)
        self.source = source or name
        self._bodies: dict[str, _Body] = {}
        self._frames: list = []
        self._notes: list = []
        self._indefinite: dict[str, str] = {}  # "warn": bodies not positive semi-definite, judged at build

    def add_body(self, name, parent, joint: Joint, *, joint_name=None, placement=None, mass=0.0,
                 com=(0.0, 0.0, 0.0), inertia=None, armature=None):
        """Add body ``name`` attached to ``parent`` (a body name, or None for the world) by ``joint``.

        ``placement`` (R, p) is the joint frame in the parent body frame; the body frame is the joint frame
        moved by the joint. ``com`` and ``inertia`` (3, 3) (about the com) are in the body frame. ``armature``:
        the reflected rotor inertia ``N^2 J_rotor`` of the joint's velocity coordinates, a scalar or one value per
        coordinate (None: zeros; a fixed joint has none). A physically impossible inertia is raised, kept or
        repaired as the builder's ``inertia`` option says (`check_inertia`). A screw joint's axis and a planar
        joint's plane normal are scaled to unit length; a zero one is a ``ValueError`` naming the joint.
        """
        if name in self._bodies:
            raise ModelError(f"{self.source}: duplicate body {name!r}")
        joint = _with_unit_axis(joint, f"{self.source}: body {name!r}: the {joint.type} joint {joint_name or name!r}")
        inertia = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, float)
        armature = _joint_armature(armature, joint, f"{self.source}: body {name!r}")
        defect = check_inertia(float(mass), inertia, f"{self.source}: body {name!r}")
        if defect is not None:
            inertia = self._impossible_inertia(name, inertia, defect)
        self._bodies[name] = _Body(name, parent, joint, joint_name or name, _as_transform(placement), float(mass),
                                   np.asarray(com, float), inertia, armature)
        return name

    def _impossible_inertia(self, name, inertia, defect: InertiaDefect):
        """The inertia that body ``name`` keeps, under the builder's ``inertia`` option, in place of ``inertia``
        with its `InertiaDefect`; raises under ``"strict"``. Under ``"warn"``, a body that is not positive
        semi-definite is judged at `build`, where the bodies it is merged with are known."""
        if self.inertia_option == "strict":
            keep = ("loads it as it is" if defect.positive_semidefinite else
                    "keeps it where the link is fixed to the world or merged into a positive semi-definite body")
            raise ModelError(f"{defect.message}; inertia=\"warn\" {keep}, inertia=\"repair\" loads the nearest "
                             "physical inertia")
        if self.inertia_option == "repair":
            repaired = nearest_physical_inertia(inertia)
            before, after = np.linalg.eigvalsh(inertia), np.linalg.eigvalsh(repaired)
            self._warn(f"{defect.message}; repaired (inertia=\"repair\") to the nearest physical inertia, "
                       f"principal axes kept: principal moments {after}, largest change "
                       f"{np.abs(after - before).max():.3g} kg m^2", stacklevel=4)
            return repaired
        if defect.positive_semidefinite:
            self._warn(defect.message, stacklevel=4)
        else:
            self._indefinite[name] = defect.message
        return inertia

    def _warn(self, message, stacklevel):
        warnings.warn(message, UserWarning, stacklevel=stacklevel)
        self._notes.append(message)

    def add_frame(self, name, body, placement=None):
        """An operational frame: a pose fixed on ``body`` (a body name, or None for the world)."""
        self._frames.append((name, body, _as_transform(placement)))
        return name

    def note(self, text):
        self._notes.append(text)

    # -- build --------------------------------------------------------------------------------------------

    def _check_tree(self):
        for b in self._bodies.values():
            if b.parent is not None and b.parent not in self._bodies:
                raise ModelError(f"{self.source}: body {b.name!r} has a missing parent {b.parent!r}")
        for b in self._bodies.values():
            seen, p = {b.name}, b.parent
            while p is not None:
                if p in seen:
                    raise ModelError(f"{self.source}: the kinematic graph has a loop through body {p!r}; "
                                     "a model is a tree (closed loops need constraint embedding)")
                seen.add(p)
                p = self._bodies[p].parent
        names = [b.joint_name for b in self._bodies.values() if b.joint.kind is not None]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ModelError(f"{self.source}: duplicate joint names {sorted(dup)}")

    def build(self) -> Model:
        """The `Model`: fixed joints merged, bodies numbered breadth first. A builder without a movable joint
        gives a model with ``nb = nq = nv = 0`` whose frames are all fixed to the world (as Pinocchio loads
        one). Raises `ModelError`, or warns, or repairs, for the bodies and joints that would leave the dynamics
        undefined, as the ``inertia`` option says (`_judge_indefinite`, `_singular_joints`)."""
        self._check_tree()
        bodies = self._bodies
        # nearest movable ancestor-or-self (None = world) and the pose relative to it
        anchor, rel = {}, {}

        def resolve(name):
            if name in anchor:
                return
            b = bodies[name]
            if b.joint.kind is not None:
                anchor[name], rel[name] = name, (np.eye(3), np.zeros(3))
                return
            if b.parent is None:
                anchor[name], rel[name] = None, b.placement
                return
            resolve(b.parent)
            anchor[name], rel[name] = anchor[b.parent], _compose(rel[b.parent], b.placement)

        for n in bodies:
            resolve(n)
        movable = [n for n in bodies if bodies[n].joint.kind is not None]

        parts = {n: [] for n in movable}
        for n, b in bodies.items():
            if anchor[n] is not None:
                R, p = rel[n]
                parts[anchor[n]].append((b.mass, R @ b.com + p, R @ b.inertia @ R.T))
        inertias = {n: _merge_inertia(parts[n]) for n in movable}
        notes = list(self._notes)
        notes += self._judge_indefinite(anchor, inertias)

        def parent_of(n):
            p = bodies[n].parent
            return None if p is None else anchor[p]

        def joint_placement(n):
            p = bodies[n].parent
            return bodies[n].placement if p is None else _compose(rel[p], bodies[n].placement)

        armature = {n: bodies[n].armature for n in movable}
        singular = _singular_joints(movable, parent_of, joint_placement, inertias, bodies)
        if singular and self.inertia_option != "repair":
            others = f" (and {len(singular) - 1} more: {[bodies[n].joint_name for n, _ in singular[1:]]})"
            raise ModelError(f"{self.source}: {singular[0][1]}{others if len(singular) > 1 else ''}; "
                             f"inertia=\"repair\" gives such a joint the armature {REPAIR_ARMATURE:g}, or give "
                             "it one (ModelBuilder.add_body's armature)")
        for n, _ in singular:
            armature[n] = np.maximum(armature[n], REPAIR_ARMATURE)
        if singular:
            names = [bodies[n].joint_name for n, _ in singular]
            warnings.warn(f"{self.source}: the joints {names} would move no mass or inertia (a singular D(k)): "
                          f"repaired (inertia=\"repair\") with the armature {REPAIR_ARMATURE:g} on each of their "
                          "coordinates", UserWarning, stacklevel=2)
            notes += [f"{self.source}: {message}; repaired (inertia=\"repair\") with the armature "
                      f"{REPAIR_ARMATURE:g} on each of its coordinates" for _, message in singular]

        idx = {n: i for i, n in enumerate(movable)}
        parent_old = np.array([-1 if parent_of(n) is None else idx[parent_of(n)] for n in movable], int)
        nv_old = [bodies[n].joint.kind.nv for n in movable]
        order = breadth_first_order(parent_old, nv_old)
        new_of_old = np.argsort(order)
        names = [movable[o] for o in order]
        parent = np.array([-1 if parent_old[o] < 0 else new_of_old[parent_old[o]] for o in order], int)
        topo = Topology(parent, [bodies[n].joint.kind.name for n in names])

        X = [joint_placement(n) for n in names]
        lower, upper = [], []
        for n in names:
            j = bodies[n].joint
            nq = j.kind.nq
            lower += list(j.lower) if j.lower is not None else [-np.inf] * nq
            upper += list(j.upper) if j.upper is not None else [np.inf] * nq

        frames = [(n, anchor[n], rel[n]) for n in bodies]
        for fname, body, placement in self._frames:
            if body is not None and body not in bodies:
                raise ModelError(f"{self.source}: frame {fname!r} is attached to a missing body {body!r}")
            if body is None:
                frames.append((fname, None, placement))
            else:
                frames.append((fname, anchor[body], _compose(rel[body], placement)))
        frame_names = [f[0] for f in frames]
        if len(set(frame_names)) != len(frame_names):
            raise ModelError(f"{self.source}: duplicate frame names")

        def arr(xs, *shape):  # (n, *shape), also where n = 0 (a model with no movable joint, or no frame)
            return jnp.asarray(np.asarray(xs, float).reshape((-1,) + shape))

        return Model(
            X_tree=Transform(arr([x[0] for x in X], 3, 3), arr([x[1] for x in X], 3)),
            axis=arr([bodies[n].joint.axis for n in names], 3),
            coef=arr([bodies[n].joint.coef for n in names], 2),
            mass=arr([inertias[n][0] for n in names]),
            com=arr([inertias[n][1] for n in names], 3),
            inertia=arr([inertias[n][2] for n in names], 3, 3),
            gravity=arr(self.gravity, 3)[0],
            q_lower=arr(lower),
            q_upper=arr(upper),
            armature=arr([a for n in names for a in armature[n]]),
            frame_placement=Transform(arr([f[2][0] for f in frames], 3, 3), arr([f[2][1] for f in frames], 3)),
            topology=topo,
            body_names=tuple(names),
            joint_names=tuple(bodies[n].joint_name for n in names),
            joint_types=tuple(bodies[n].joint.type for n in names),
            frame_names=tuple(frame_names),
            frame_body=tuple(-1 if f[1] is None else names.index(f[1]) for f in frames),
            name=self.name,
            notes=tuple(notes),
        )

    def _judge_indefinite(self, anchor, inertias):
        """Under ``inertia="warn"``, the notes (each also a warning) for the bodies whose inertia is not positive
        semi-definite but leaves the dynamics defined: a link fixed to the world (its inertia is never used), or
        one merged by fixed joints into a body (``anchor``) whose merged inertia (``inertias``) is positive
        semi-definite. Raises `ModelError` for the others."""
        notes = []
        for name, message in self._indefinite.items():
            body = anchor[name]
            if body is None:
                notes.append(f"{message}; unused: the link is fixed to the world")
            else:
                mass, _, I = inertias[body]
                merged = check_inertia(mass, I, f"{self.source}: body {body!r}")
                if merged is not None and not merged.positive_semidefinite:
                    raise ModelError(f"{message}, and so is body {body!r} with the links fixed to it: the dynamics "
                                     "would be undefined; inertia=\"repair\" loads the nearest physical inertia")
                notes.append(f"{message}; body {body!r}, with the links fixed to it, is positive semi-definite, so "
                             "the dynamics are defined")
        for note in notes:
            warnings.warn(note, UserWarning, stacklevel=3)
        return notes


def _with_unit_axis(joint, where):
    """``joint`` with its axis (a screw joint's) or plane normal (a planar joint's) scaled to unit length, as the
    helpers of `jaxmb.joints` give it: a `Joint` built by hand may carry any vector (`jaxmb.joints.unit_axis`; a
    ``ValueError`` naming ``where`` for a zero one). Other kinds have no axis."""
    if joint.kind is None or joint.kind.name not in ("screw", "planar"):
        return joint
    what = "plane normal" if joint.kind.name == "planar" else "axis"
    return dataclasses.replace(joint, axis=unit_axis(joint.axis, f"{where}'s {what}"))


@functools.cache
def _hinge_map_program(kind):
    """``kind.hinge_map`` compiled once per joint kind: a model build evaluates it for every joint, and one call of
    a compiled program costs less than the dispatch of its operations one by one."""
    return jax.jit(kind.hinge_map)


def _singular_joints(movable, parent_of, joint_placement, inertias, bodies):
    """The joints that would have a singular articulated inertia ``D(k) = H R H* + diag(armature)`` (9.2) at the
    neutral configuration, ``R`` the composite inertia of the bodies they carry: a massless subtree behind any
    joint, a subtree with inertia but no mass behind a prismatic joint, mass on the axis of a revolute joint, each
    without armature. A list of (body moved, message naming the joint and the body)."""
    pose = {}  # pose of each movable body in the frame of the root joint, at the neutral configuration

    def pose_of(n):
        if n not in pose:
            p = parent_of(n)
            pose[n] = joint_placement(n) if p is None else _compose(pose_of(p), joint_placement(n))
        return pose[n]

    carried = {n: [] for n in movable}
    for m in movable:
        n = m
        while n is not None:
            carried[n].append(m)
            n = parent_of(n)
    singular = []
    for n in movable:
        R0, p0 = pose_of(n)
        parts = []
        for m in carried[n]:
            R, p = _compose((R0.T, -R0.T @ p0), pose_of(m))
            mass, c, I = inertias[m]
            parts.append((mass, R @ c + p, R @ I @ R.T))
        mass, c, I = _merge_inertia(parts)
        cx = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
        spatial = np.block([[I - mass * cx @ cx, mass * cx], [-mass * cx, mass * np.eye(3)]])  # (2.11)
        joint = bodies[n].joint
        H = np.asarray(_hinge_map_program(joint.kind)(np.asarray(joint.axis), np.asarray(joint.coef)), float)
        D = H @ spatial @ H.T + np.diag(bodies[n].armature)
        scale = max(1.0, mass, np.abs(I).max())
        if np.linalg.eigvalsh(D).min() <= 1e-12 * scale:
            singular.append((n, f"joint {bodies[n].joint_name!r} would have a singular articulated inertia "
                                f"D(k) = H R H* + diag(armature) (9.2): body {n!r} and the bodies it carries have "
                                f"no mass or inertia that the joint can move and it has no armature (mass {mass:g}, "
                                f"rotational inertia {np.diag(I).tolist()})"))
    return singular
