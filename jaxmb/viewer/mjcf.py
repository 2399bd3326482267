"""The geoms of a compiled MuJoCo model as a `jaxmb.viewer.Drawing` on the jaxmb model loaded from it.

Each geom's pose in its MuJoCo body (``geom_pos``, ``geom_quat``) is moved onto the jaxmb body that carries that
MuJoCo body by `jaxmb.io.mujoco.MujocoMap.pose_on_body` (bodies welded to their parent land on the parent's jaxmb
body, geoms of the world body on the world). Kinds: plane, sphere, capsule, ellipsoid, cylinder, box from
``geom_type`` and ``geom_size`` (MuJoCo's half sizes and half lengths are the `jaxmb.viewer.shapes` sizes; a plane's
zero half size is unbounded), and meshes from ``mesh_vert`` / ``mesh_face``. Height fields and SDF geoms are
skipped with a warning.

Colours follow MuJoCo's rule: a geom's ``rgba`` where it differs from the default, else its material's, else the
default grey. Geoms that are fully transparent, and geoms outside ``groups`` (MuJoCo's viewer shows groups 0, 1 and 2
by default; many models put their collision geoms in group 3) are left out.

Geoms are named by their MuJoCo name, else ``"<body>/geom<i>"`` (i the geom's index in the MuJoCo model).
"""

import warnings

import numpy as np

from jaxmb.io.mjcf import mujoco_module, mujoco_names
from jaxmb.io.mujoco import mujoco_map
from jaxmb.viewer.shapes import Drawing, TriangleMesh, make_shape

DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)
"""MuJoCo's default geom colour: a geom with this ``rgba`` and a material takes the material's."""

KINDS = {"mjGEOM_PLANE": "plane", "mjGEOM_SPHERE": "sphere", "mjGEOM_CAPSULE": "capsule",
         "mjGEOM_ELLIPSOID": "ellipsoid", "mjGEOM_CYLINDER": "cylinder", "mjGEOM_BOX": "box", "mjGEOM_MESH": "mesh"}


def mjcf_drawing(model, mj, *, groups=(0, 1, 2), joint_names=None) -> Drawing:
    """The `Drawing` of the geoms of the compiled MuJoCo model ``mj`` on ``model``, the jaxmb model of it
    (`jaxmb.io.mjcf.load_mjcf`, or `jaxmb.load_urdf` of a URDF that MuJoCo compiled); ``joint_names`` as for
    `jaxmb.io.mujoco.mujoco_map`, which matches the two models and raises `jaxmb.ModelError` where they differ.
    ``groups``: the geom groups drawn (module docstring)."""
    mujoco = mujoco_module()
    bodies = mujoco_names(mj).bodies
    mapping = mujoco_map(model, mj, joint_names)
    shapes, skipped = [], []
    for g in range(mj.ngeom):
        b = int(mj.geom_bodyid[g])
        name = mj.geom(g).name or f"{bodies[b]}/geom{g}"
        kind = KINDS.get(mujoco.mjtGeom(int(mj.geom_type[g])).name)
        color = geom_color(mj, g)
        if int(mj.geom_group[g]) not in groups or color[3] == 0:
            continue
        if kind is None:
            skipped.append(f"{name!r} ({mujoco.mjtGeom(int(mj.geom_type[g])).name})")
            continue
        body, placement = mapping.pose_on_body(b, mj.geom_pos[g], mj.geom_quat[g])
        size = np.asarray(mj.geom_size[g], float)
        if kind == "plane":
            size = np.array([size[0], size[1], 0.0])
        elif kind == "sphere":
            size = np.array([size[0], 0.0, 0.0])
        elif kind in ("capsule", "cylinder"):
            size = np.array([size[0], size[1], 0.0])
        mesh = mesh_triangles(mj, int(mj.geom_dataid[g])) if kind == "mesh" else None
        shapes.append(make_shape(name, body, placement, kind, np.zeros(3) if mesh is not None else size, color, mesh))
    if skipped:
        warnings.warn(f"MuJoCo model: geoms of kinds the viewer does not draw are skipped: {', '.join(skipped)}",
                      stacklevel=2)
    return Drawing(model, tuple(shapes))


def geom_color(mj, g) -> np.ndarray:
    """RGBA (4,) of geom ``g`` by MuJoCo's rule (module docstring)."""
    rgba = np.asarray(mj.geom_rgba[g], float)
    m = int(mj.geom_matid[g])
    if m >= 0 and np.allclose(rgba, DEFAULT_RGBA):
        return np.asarray(mj.mat_rgba[m], float)
    return rgba


def mesh_triangles(mj, m) -> TriangleMesh:
    """The `TriangleMesh` of MuJoCo mesh ``m`` in its geom's frame (MuJoCo stores mesh vertices there)."""
    v0, nv = int(mj.mesh_vertadr[m]), int(mj.mesh_vertnum[m])
    f0, nf = int(mj.mesh_faceadr[m]), int(mj.mesh_facenum[m])
    return TriangleMesh(np.asarray(mj.mesh_vert[v0:v0 + nv], float), np.asarray(mj.mesh_face[f0:f0 + nf], np.int64))
