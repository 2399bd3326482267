"""Triangles of a `jaxmb.viewer.shapes.Shape` in its own frame, for viewers that draw triangle meshes."""

import numpy as np

from jaxmb.viewer.shapes import GREY, TriangleMesh

PLANE_THICKNESS = 1e-3
"""A plane is drawn as a slab this thick below ``z = 0``, so that its top face is the plane."""


def trimesh_module():
    """The ``trimesh`` module, or an ImportError that says how to install it (an optional dependency)."""
    try:
        import trimesh
    except ImportError as e:
        raise ImportError("jaxmb.viewer reads meshes and tessellates shapes with trimesh, an optional dependency: "
                          "`pip install trimesh` (the viewer extra installs it)") from e
    return trimesh


def triangles(shape, plane_half=1.0) -> TriangleMesh:
    """The `TriangleMesh` of ``shape`` in its frame: its mesh as given, or a tessellation of its primitive.
    ``plane_half``: the half extent of an unbounded plane (size zeros)."""
    if shape.kind == "mesh":
        return shape.mesh
    creation = trimesh_module().creation
    r, h, c = shape.size
    if shape.kind == "box":
        m = creation.box(extents=2.0 * shape.size)
    elif shape.kind == "sphere":
        m = creation.icosphere(subdivisions=3, radius=r)
    elif shape.kind == "ellipsoid":
        m = creation.icosphere(subdivisions=3, radius=1.0)
        m.vertices = m.vertices * shape.size
    elif shape.kind == "capsule":
        m = creation.capsule(height=2.0 * h, radius=r, count=[32, 16])
    elif shape.kind == "cylinder":
        m = creation.cylinder(radius=r, height=2.0 * h, sections=32)
    elif shape.kind == "plane":
        hx, hy = (r, h) if r > 0 and h > 0 else (plane_half, plane_half)
        m = creation.box(extents=(2.0 * hx, 2.0 * hy, PLANE_THICKNESS))
        m.vertices = m.vertices - [0.0, 0.0, 0.5 * PLANE_THICKNESS]
    else:
        raise ValueError(f"shape {shape.name!r}: no tessellation for kind {shape.kind!r}")
    return TriangleMesh(np.asarray(m.vertices, float), np.asarray(m.faces, np.int64))


def read_mesh(path, scale=(1.0, 1.0, 1.0), color=GREY) -> TriangleMesh:
    """The triangles of a mesh file (STL, OBJ, DAE, or any format trimesh reads), every part of a file that holds a
    scene placed by the file's own transforms, ``scale`` (3,) applied (a mirroring scale turns the faces over so
    that they still face outwards). Colours per vertex where the file gives colours or materials (textures are
    reduced to colours), ``color`` (RGBA in [0, 1]) on its parts without; None where no part has any. Raises
    ValueError where the file has no triangles, and trimesh's error where it cannot be read."""
    trimesh = trimesh_module()
    scene = trimesh.load(str(path), force="scene")
    plain = np.round(255 * np.asarray(color, float)).astype(np.uint8)
    vertices, faces, colors, count, coloured = [], [], [], 0, False
    for node in scene.graph.nodes_geometry:
        T, name = scene.graph[node]
        m = scene.geometry[name]
        if not hasattr(m, "faces") or len(m.faces) == 0:
            continue  # points or paths: nothing to draw
        v = np.asarray(m.vertices, float) @ T[:3, :3].T + T[:3, 3]
        vertices.append(v)
        faces.append(np.asarray(m.faces, np.int64) + count)
        count += len(v)
        visual = m.visual
        defined = visual is not None and (visual.kind == "texture" or getattr(visual, "defined", False))
        coloured |= defined
        rgba = np.asarray(visual.to_color().vertex_colors, np.uint8)[..., :4] if defined else plain
        colors.append(np.broadcast_to(rgba, (len(v), 4)))  # a material's colour comes as one RGBA
    if not vertices:
        raise ValueError("no triangles")
    scale = np.asarray(scale, float)
    faces = np.concatenate(faces)
    return TriangleMesh(np.concatenate(vertices) * scale, faces[:, ::-1] if np.prod(scale) < 0 else faces,
                        np.concatenate(colors) if coloured else None)
