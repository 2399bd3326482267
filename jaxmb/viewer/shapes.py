"""What a viewer draws: shapes fixed on the bodies of a model (`Shape`, `Drawing`), and triangles for each.

A `Shape` sits on one jaxmb body (or on the world) at a fixed ``placement`` in that body's frame, so its world pose
at a configuration ``q`` is ``forward_kinematics(model, q)[body] placement``. Kinds and their ``size`` (3,), each in
the shape's own frame:

* ``"box"``: half sizes along x, y, z.
* ``"sphere"``: ``[r, 0, 0]``.
* ``"capsule"``: ``[r, h, 0]``, the points within ``r`` of the segment from ``(0, 0, -h)`` to ``(0, 0, h)`` (as
  `jaxmb.sim.geometry.capsule`).
* ``"cylinder"``: ``[r, h, 0]``, radius ``r``, from ``z = -h`` to ``z = h``.
* ``"ellipsoid"``: the three radii.
* ``"plane"``: ``[hx, hy, 0]``, the rectangle ``|x| <= hx, |y| <= hy`` of ``z = 0`` seen from ``+z``; zeros for an
  unbounded plane, which a viewer draws as far as the motion reaches.
* ``"mesh"``: a `TriangleMesh`; ``size`` is zero.

`Drawing` pairs the shapes with the model whose bodies they name. `drawing` makes one from a `jaxmb.Model` (its
skeleton, `skeleton_drawing`), a `jaxmb.sim.Scene` (its collision geoms, `scene_drawing`) or a `Drawing`;
`jaxmb.viewer.urdf.urdf_drawing` and `jaxmb.viewer.mjcf.mjcf_drawing` read the visual elements of a URDF file and of
a compiled MuJoCo model.
"""

from typing import NamedTuple

import numpy as np

from jaxmb.model import Model
from jaxmb.sim.scene import Scene
from jaxmb.spatial import Transform

KINDS = ("box", "sphere", "capsule", "cylinder", "ellipsoid", "plane", "mesh")

GREY = (0.7, 0.7, 0.7, 1.0)
"""The colour of a shape whose source gives none."""

GEOM_COLORS = {"plane": (0.85, 0.85, 0.82, 1.0), "sphere": (0.85, 0.45, 0.2, 1.0), "capsule": (0.25, 0.5, 0.8, 1.0),
               "box": (0.35, 0.65, 0.35, 1.0)}
"""Colours of the simulator's geoms by kind (`scene_drawing`)."""

SKELETON_COLOR = (0.3, 0.45, 0.7, 1.0)


class TriangleMesh(NamedTuple):
    """Triangles in a shape's frame: ``vertices`` (n, 3) float, ``faces`` (m, 3) int (counter-clockwise seen from
    outside), ``colors`` (n, 4) uint8 RGBA per vertex, or None where the shape's single colour applies."""

    vertices: np.ndarray
    faces: np.ndarray
    colors: np.ndarray | None = None


class Shape(NamedTuple):
    """A shape fixed on a body (module docstring).

    name        unique within its `Drawing`
    body        jaxmb body index (`Model.body_names`), -1 for the world
    placement   `Transform` of numpy arrays, R (3, 3), p (3,): the shape's frame in its body's frame
    kind        one of `KINDS`
    size (3,)   by kind (module docstring)
    color (4,)  RGBA in [0, 1]
    mesh        `TriangleMesh` for a ``"mesh"``, else None
    """

    name: str
    body: int
    placement: Transform
    kind: str
    size: np.ndarray
    color: np.ndarray
    mesh: TriangleMesh | None = None


class Drawing(NamedTuple):
    """The shapes (a tuple of `Shape`) on the bodies of ``model`` (a `jaxmb.Model`), what a viewer draws."""

    model: Model
    shapes: tuple

    def by_body(self) -> dict:
        """``{body index: [Shape, ...]}`` for every body of the model and ``-1`` (the world), in shape order."""
        out = {b: [] for b in range(-1, self.model.nb)}
        for s in self.shapes:
            out[s.body].append(s)
        return out


def make_shape(name, body, placement, kind, size=(0.0, 0.0, 0.0), color=GREY, mesh=None) -> Shape:
    """A `Shape` with its numbers as float numpy arrays; ``placement`` is a `Transform` or ``(R, p)``."""
    if kind not in KINDS:
        raise ValueError(f"shape {name!r}: unknown kind {kind!r}; kinds are {KINDS}")
    R, p = placement
    return Shape(name, int(body), Transform(np.asarray(R, float).reshape(3, 3), np.asarray(p, float).reshape(3)),
                 kind, np.asarray(size, float).reshape(3), np.asarray(color, float).reshape(4), mesh)


def model_of(what):
    """The tree a model, scene or drawing poses: a `jaxmb.Model`; a closed-loop model's (or scene's) spanning tree."""
    if isinstance(what, Drawing):
        return what.model
    tree = getattr(what, "tree", what)  # a Scene's and a LoopModel's spanning tree
    if not isinstance(tree, Model):
        raise TypeError(f"expected a jaxmb.Model, a jaxmb.sim.Scene, a closed-loop model or a "
                        f"jaxmb.viewer.Drawing, got {type(what).__name__}")
    return tree


def drawing(what) -> Drawing:
    """The `Drawing` of a `Drawing` (itself), a `jaxmb.sim.Scene` (`scene_drawing`) or a model, its skeleton
    (`skeleton_drawing`)."""
    if isinstance(what, Drawing):
        return what
    if isinstance(what, Scene):
        return scene_drawing(what)
    return skeleton_drawing(model_of(what))


def scene_drawing(scene) -> Drawing:
    """The collision geoms of a `jaxmb.sim.Scene` on its (spanning) tree, coloured by kind (`GEOM_COLORS`); a scene
    without geoms draws its tree's skeleton."""
    tree = scene.tree
    geo = scene.geometry
    if geo is None:
        return skeleton_drawing(tree)
    R, p, size = np.asarray(geo.placement.R, float), np.asarray(geo.placement.p, float), np.asarray(geo.size, float)
    shapes = []
    for i, (name, kind, body) in enumerate(zip(geo.names, geo.kind, geo.body)):
        s = np.zeros(3) if kind == "plane" else size[i]  # a simulator plane is unbounded
        shapes.append(make_shape(name, body, (R[i], p[i]), kind, s, GEOM_COLORS.get(kind, GREY)))
    return Drawing(tree, tuple(shapes))


def skeleton_drawing(model, radius=None) -> Drawing:
    """A stick figure of ``model``: a sphere at each body's origin and, on each body, a capsule from its origin to
    the joint frame of each child (``X_tree.p`` of the child, a point fixed in the parent's frame). ``radius``: of
    the capsules (the spheres are twice as wide); default 1/40 of the longest such link, at least 5 mm."""
    X = np.asarray(model.X_tree.p, float).reshape(-1, 3)
    parent = np.asarray(model.topology.parent)
    lengths = np.linalg.norm(X, axis=-1)
    if radius is None:
        radius = max(float(lengths.max(initial=0.0)) / 40.0, 0.005)
    shapes = []
    for k in range(model.nb):
        name = model.body_names[k]
        shapes.append(make_shape(f"{name}/origin", k, (np.eye(3), np.zeros(3)), "sphere", (2 * radius, 0, 0),
                                 SKELETON_COLOR))
        for c in np.flatnonzero(parent == k):
            if lengths[c] > 1e-9:
                shapes.append(make_shape(f"{name}/to_{model.body_names[c]}", k, segment_placement(X[c]), "capsule",
                                         (radius, 0.5 * lengths[c], 0.0), SKELETON_COLOR))
    return Drawing(model, tuple(shapes))


def segment_placement(d):
    """``(R, p)`` of a frame at the middle of the segment from the origin to ``d`` (3,) with its z axis along it."""
    z = d / np.linalg.norm(d)
    x = np.cross([0.0, 1.0, 0.0] if abs(z[0]) > 0.9 else [1.0, 0.0, 0.0], z)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z], 1), 0.5 * d
