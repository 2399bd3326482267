"""Collision geometry: shapes fixed on bodies (`Geom`), their pytree (`Geometry`) and the pairs that collide (`Pairs`).

A `Geom` is a static description made in plain Python (`plane`, `sphere`, `capsule`, `box`); `geometry` checks a
list of them against a model and packs their numbers as JAX leaves (sizes, placements, frictions), so that they can
be batched and differentiated like the model's parameters, while the kinds, bodies and names are static and shape
the compiled program. `pairs` picks the geom pairs that collide, once, at build time; `jaxmb.sim.collision.collide`
computes their contacts from the geoms' world poses (`geom_poses`).

Shapes, each in its own frame (its pose in its body frame is its ``placement``):

* plane: the half space ``z <= 0``; its ``z`` axis is the outward normal. Planes collide with every other kind but
  not with planes.
* sphere: radius ``r`` about the origin; ``size = [r, 0, 0]``.
* capsule: the points within ``r`` of the segment from ``(0, 0, -h)`` to ``(0, 0, h)``; ``size = [r, h, 0]``. A
  capsule with ``h = 0`` is a sphere.
* box: ``|x| <= hx, |y| <= hy, |z| <= hz``; ``size`` = the half sizes.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxmb.errors import ModelError
from jaxmb.model import pytree_dataclass
from jaxmb.spatial import Transform, compose

KINDS = ("plane", "sphere", "capsule", "box")
"""Geom kinds, in the canonical order of a pair: the geom of the lower kind comes first (``a``)."""

DEFAULT_FRICTION = 1.0
UNSET = -1.0  # the stored friction of a geom that leaves it to the other geom of each pair


@dataclass(frozen=True)
class Geom:
    """A shape fixed on a body: what the constructors `plane`, `sphere`, `capsule` and `box` return, unchecked
    (`geometry` checks it against a model). ``body``: a body or frame name, None for the world. ``size``, ``pos``,
    ``rot``: as given (``rot`` None is the identity); ``friction`` None leaves it to the other geom of a pair
    (stored as `UNSET`; `jaxmb.sim.contact_frames.friction`), and `DEFAULT_FRICTION` where neither sets it."""

    kind: str
    body: str | None
    size: tuple
    pos: tuple
    rot: tuple | None = None
    name: str | None = None
    friction: float | None = None


def _tup(x):
    try:
        return tuple(np.asarray(x, float).ravel().tolist())
    except (TypeError, ValueError):
        return x  # kept as given; `geometry` names the geom that has it


def _rot(rot):
    return None if rot is None else _tup(rot)


def plane(body=None, normal=(0.0, 0.0, 1.0), point=(0.0, 0.0, 0.0), *, name=None, friction=None) -> Geom:
    """The half space below the plane through ``point`` with the outward unit normal ``normal`` (any length but
    zero), both in ``body``'s frame (None: the world)."""
    return Geom("plane", body, _tup(normal), _tup(point), None, name, friction)


def sphere(body, radius, pos=(0.0, 0.0, 0.0), *, name=None, friction=None) -> Geom:
    """A sphere of ``radius`` centred at ``pos`` in ``body``'s frame."""
    return Geom("sphere", body, (radius, 0.0, 0.0), _tup(pos), None, name, friction)


def capsule(body, radius, half_length, pos=(0.0, 0.0, 0.0), rot=None, *, name=None, friction=None) -> Geom:
    """A capsule: the points within ``radius`` of the segment from ``-half_length`` to ``+half_length`` along the
    local z axis; its frame is at ``pos`` rotated by ``rot`` (3, 3) in ``body``'s frame."""
    return Geom("capsule", body, (radius, half_length, 0.0), _tup(pos), _rot(rot), name, friction)


def box(body, half_sizes, pos=(0.0, 0.0, 0.0), rot=None, *, name=None, friction=None) -> Geom:
    """A box of ``half_sizes`` (3,) along its local axes; its frame is at ``pos`` rotated by ``rot`` (3, 3)."""
    return Geom("box", body, _tup(half_sizes), _tup(pos), _rot(rot), name, friction)


@pytree_dataclass
@dataclass(frozen=True)
class Geometry:
    """The geoms of a scene as a pytree (ng geoms).

    Leaves:
        size (ng, 3)              sphere ``[r, 0, 0]``, capsule ``[r, h, 0]``, box half sizes, plane zeros
        placement: Transform (ng) pose of each geom in its body frame (the world frame for world geoms)
        friction (ng,)            friction coefficient of each geom (`UNSET` where the geom leaves it to the other)
    Static:
        kind (ng,)   kind names (`KINDS`)
        body (ng,)   body indices (``-1``: fixed to the world)
        names (ng,)  geom names
    """

    size: jnp.ndarray
    placement: Transform
    friction: jnp.ndarray
    kind: tuple = field(metadata=dict(static=True))
    body: tuple = field(metadata=dict(static=True))
    names: tuple = field(metadata=dict(static=True))

    @property
    def ng(self) -> int:
        return len(self.kind)

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no geom {name!r}; geoms are {list(self.names)}") from None

    def replace(self, **changes) -> "Geometry":
        return dataclasses.replace(self, **changes)




# -- building ------------------------------------------------------------------------------------------------


def _few(names, k=8):
    names = list(names)
    return ", ".join(repr(n) for n in names[:k]) + (", ..." if len(names) > k else "")


def _numbers(value, n, where, what):
    try:
        x = np.asarray(value, float).ravel()
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {what} must be {n} numbers, got {value!r}") from None
    if x.shape != (n,):
        raise ModelError(f"{where}: {what} must be {n} numbers, got {value!r}")
    if not np.all(np.isfinite(x)):
        raise ModelError(f"{where}: {what} must be finite, got {x.tolist()}")
    return x


def _attachment(model, body, where):
    """(body index, R, p): the body that ``body`` (a body or frame name, or None) is fixed on, and the pose of
    that frame in the body frame."""
    if body is None:
        return -1, np.eye(3), np.zeros(3)
    if body in model.body_names:
        return model.body_names.index(body), np.eye(3), np.zeros(3)
    if body in model.frame_names:
        f = model.frame_names.index(body)
        return (int(model.frame_body[f]), np.asarray(model.frame_placement.R[f], float),
                np.asarray(model.frame_placement.p[f], float))
    raise ModelError(f"{where}: model {model.name!r} has no body or frame {body!r}; its bodies are "
                     f"{_few(model.body_names)} (frames of merged links are accepted too)")


def _plane_rotation(normal):
    """A rotation whose z column is the unit ``normal``."""
    z = normal / np.linalg.norm(normal)
    x = np.cross([0.0, 1.0, 0.0] if abs(z[0]) > 0.9 else [1.0, 0.0, 0.0], z)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z], 1)


def _check_geom(g: Geom, where):
    """(size (3,), R, p, friction) of the geom in its attachment frame; `ModelError` naming ``where``."""
    if not isinstance(g, Geom):
        raise ModelError(f"{where}: expected a Geom (jaxmb.sim.geometry.plane/sphere/capsule/box), got {g!r}")
    if g.kind not in KINDS:
        raise ModelError(f"{where}: unknown kind {g.kind!r}; kinds are {KINDS}")
    if g.friction is None:
        friction = UNSET
    else:
        try:
            friction = float(g.friction)
        except (TypeError, ValueError):
            raise ModelError(f"{where}: friction must be a number, got {g.friction!r}") from None
        if not np.isfinite(friction) or friction < 0:
            raise ModelError(f"{where}: friction must be finite and non-negative, got {friction}")
    if g.kind == "plane":
        normal = _numbers(g.size, 3, where, "the normal")
        if np.linalg.norm(normal) < 1e-12:
            raise ModelError(f"{where}: the plane's normal is zero")
        return np.zeros(3), _plane_rotation(normal), _numbers(g.pos, 3, where, "the point"), friction
    size = _numbers(g.size, 3, where, "the size")
    if g.kind == "sphere" and not size[0] > 0:
        raise ModelError(f"{where}: the radius must be positive, got {size[0]}")
    if g.kind == "capsule":
        if not size[0] > 0:
            raise ModelError(f"{where}: the radius must be positive, got {size[0]}")
        if not size[1] >= 0:
            raise ModelError(f"{where}: the half_length must be non-negative, got {size[1]}")
    if g.kind == "box" and not np.all(size > 0):
        raise ModelError(f"{where}: the half sizes must be positive, got {size.tolist()}")
    R = np.eye(3) if g.rot is None else _numbers(g.rot, 9, where, "rot (a 3x3 rotation)").reshape(3, 3)
    if np.abs(R.T @ R - np.eye(3)).max() > 1e-6 or np.linalg.det(R) < 0:
        raise ModelError(f"{where}: rot is not a rotation matrix (R^T R = 1, det R = +1): {R.tolist()}")
    return size, R, _numbers(g.pos, 3, where, "pos"), friction


def geometry(model, geoms) -> Geometry:
    """Check ``geoms`` (a sequence of `Geom`) against ``model`` and pack them as a `Geometry` in the model's dtype.

    A geom on a frame (a link merged by a fixed joint) is fixed on that frame's body, its placement composed with
    the frame's. Unnamed geoms are named by kind and index (``"sphere3"``). Raises `ModelError` naming the geom for
    an unknown body or frame, a non-positive radius or half size (a capsule's half length may be zero), numbers
    that are not finite, a ``rot`` that is not a rotation, a negative friction, and duplicate names.
    """
    geoms = list(geoms)
    names = [g.name if isinstance(g, Geom) and g.name is not None else f"{getattr(g, 'kind', 'geom')}{i}"
             for i, g in enumerate(geoms)]
    seen = set()
    for n in names:
        if not isinstance(n, str):
            raise ModelError(f"geom name {n!r} is not a string")
        if n in seen:
            raise ModelError(f"duplicate geom name {n!r}")
        seen.add(n)
    sizes, Rs, ps, frictions, kinds, bodies = [], [], [], [], [], []
    for g, n in zip(geoms, names):
        where = f"geom {n!r}"
        size, R, p, friction = _check_geom(g, where)
        b, Rf, pf = _attachment(model, g.body, where + f" (on {g.body!r})" if g.body else where)
        sizes.append(size), Rs.append(Rf @ R), ps.append(pf + Rf @ p), frictions.append(friction)
        kinds.append(g.kind), bodies.append(b)
    dtype = model.mass.dtype
    arr = lambda xs, shape: jnp.asarray(np.asarray(xs, float).reshape(shape), dtype)
    ng = len(geoms)
    return Geometry(size=arr(sizes, (ng, 3)), placement=Transform(arr(Rs, (ng, 3, 3)), arr(ps, (ng, 3))),
                    friction=arr(frictions, (ng,)), kind=tuple(kinds), body=tuple(bodies), names=tuple(names))


def geom_poses(geometry: Geometry, T: Transform) -> Transform:
    """World pose of every geom, (ng, 3, 3), (ng, 3), from the body world poses ``T`` (nb) (from
    `jaxmb.kinematics.forward_kinematics`): ``T(body) placement``, or the placement for world geoms."""
    body = np.asarray(geometry.body, int).reshape(-1)
    if np.all(body < 0):
        return geometry.placement
    on_body = Transform(T.R[np.maximum(body, 0)], T.p[np.maximum(body, 0)])
    moved = compose(on_body, geometry.placement)
    world = jnp.asarray(body < 0)
    return Transform(jnp.where(world[:, None, None], geometry.placement.R, moved.R),
                     jnp.where(world[:, None], geometry.placement.p, moved.p))


# -- pairs ---------------------------------------------------------------------------------------------------


class Pairs(NamedTuple):
    """The geom pairs that collide, static (tuples of ints, hashable), np pairs and nc contacts.

    a, b (np,)             geom indices of each pair, ``KINDS.index(kind[a]) <= KINDS.index(kind[b])``
    count (np,)            contacts of each pair (`jaxmb.sim.collision.CONTACTS` of its kinds)
    offset (np,)           index of each pair's first contact
    contact_pair (nc,)     pair of each contact
    contact_a, contact_b (nc,)  geoms of each contact
    """

    a: tuple
    b: tuple
    count: tuple
    offset: tuple
    contact_pair: tuple
    contact_a: tuple
    contact_b: tuple

    @property
    def nc(self) -> int:
        return len(self.contact_pair)

    @property
    def npairs(self) -> int:
        return len(self.a)


WORLD = "world"
"""In `pairs`' include/exclude lists, the geoms fixed to the world, unless a geom or body has this name."""


def _resolve(model, geo: Geometry, name, where):
    """Geom indices that ``name`` stands for: a geom name, else a body name (its geoms), else `WORLD`."""
    if name in geo.names:
        return [geo.names.index(name)], f"geom {name!r}"
    if name in model.body_names:
        b = model.body_names.index(name)
        idx = [i for i, bi in enumerate(geo.body) if bi == b]
        if not idx:
            raise ModelError(f"{where}: body {name!r} has no geoms")
        return idx, f"body {name!r}"
    if name == WORLD:
        idx = [i for i, bi in enumerate(geo.body) if bi < 0]
        if not idx:
            raise ModelError(f"{where}: no geom is fixed to the world")
        return idx, "the world"
    raise ModelError(f"{where}: {name!r} is neither a geom nor a body; geoms are {_few(geo.names)}, bodies "
                     f"{_few(model.body_names)}")


def _expand(model, geo, pair_list, what):
    """Set of unordered geom index pairs named by ``pair_list``; `ModelError` for a malformed entry."""
    out = []
    for entry in pair_list:
        try:
            n1, n2 = entry
        except (TypeError, ValueError):
            raise ModelError(f"{what}: each entry must be a (name, name) pair, got {entry!r}") from None
        where = f"{what} pair ({n1!r}, {n2!r})"
        (g1, d1), (g2, _) = _resolve(model, geo, n1, where), _resolve(model, geo, n2, where)
        if n1 == n2:
            raise ModelError(f"{where}: a pair names {d1} twice")
        explicit = len(g1) == 1 and len(g2) == 1 and n1 in geo.names and n2 in geo.names
        for i in g1:
            for j in g2:
                if i == j:
                    continue
                problem = _cannot_collide(geo, i, j)
                if problem and explicit:
                    raise ModelError(f"{where}: {problem}")
                if not problem:
                    out.append((min(i, j), max(i, j)))
    return out


def _cannot_collide(geo, i, j):
    """Why geoms i and j cannot collide, or None."""
    gi, gj = f"geom {geo.names[i]!r}", f"geom {geo.names[j]!r}"
    if geo.kind[i] == "plane" and geo.kind[j] == "plane":
        return f"{gi} and {gj} are both planes (planes do not collide with planes)"
    if geo.body[i] < 0 and geo.body[j] < 0:
        return f"{gi} and {gj} are both fixed to the world"
    if geo.body[i] == geo.body[j]:
        return f"{gi} and {gj} are on the same body"
    return None


def pairs(model, geometry: Geometry, include=None, exclude=(), exclude_parent_child=True) -> Pairs:
    """The pairs of geoms that collide, in a fixed order, with their contact slots.

    ``include``: None for every pair that can collide (not on one body, not both fixed to the world, not two
    planes, and with ``exclude_parent_child`` not on a body and its parent; a root body's parent, the world, is
    not excluded); else a sequence of ``(name, name)``, each a geom name, a body name (all its geoms) or
    ``"world"`` (the world's geoms). ``exclude``: pairs in the same form, dropped. An explicit include list is
    taken as given (parent-child pairs are kept). Raises `ModelError` for an unknown name, a pair naming one geom
    or body twice, and, where both names are geoms, a pair that cannot collide. Pairs keep the order of
    ``include`` (else of the geom indices); in each, the geom of the lower kind (`KINDS`) comes first.
    """
    from jaxmb.sim.collision import CONTACTS

    geo = geometry
    if include is None:
        parent = np.asarray(model.topology.parent)
        candidates = []
        for i in range(geo.ng):
            for j in range(i + 1, geo.ng):
                if _cannot_collide(geo, i, j):
                    continue
                bi, bj = geo.body[i], geo.body[j]
                if exclude_parent_child and bi >= 0 and bj >= 0 and (parent[bi] == bj or parent[bj] == bi):
                    continue
                candidates.append((i, j))
    else:
        candidates = _expand(model, geo, include, "include")
    dropped = set(_expand(model, geo, exclude, "exclude"))
    chosen, seen = [], set()
    for i, j in candidates:
        key = (min(i, j), max(i, j))
        if key in dropped or key in seen:
            continue
        seen.add(key)
        ki, kj = KINDS.index(geo.kind[i]), KINDS.index(geo.kind[j])
        chosen.append((i, j) if (ki, i) <= (kj, j) else (j, i))
    a = tuple(int(i) for i, _ in chosen)
    b = tuple(int(j) for _, j in chosen)
    count = tuple(CONTACTS[(geo.kind[i], geo.kind[j])] for i, j in chosen)
    offset = tuple(int(x) for x in np.concatenate([[0], np.cumsum(count)[:-1]])) if chosen else ()
    contact_pair = tuple(k for k, c in enumerate(count) for _ in range(c))
    return Pairs(a=a, b=b, count=count, offset=offset, contact_pair=contact_pair,
                 contact_a=tuple(a[k] for k in contact_pair), contact_b=tuple(b[k] for k in contact_pair))
