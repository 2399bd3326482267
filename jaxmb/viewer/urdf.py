"""The ``<visual>`` (or ``<collision>``) elements of a URDF file as a `jaxmb.viewer.Drawing`.

* ``<box size>`` -> ``"box"`` (half sizes), ``<sphere radius>`` -> ``"sphere"``, ``<cylinder radius length>`` ->
  ``"cylinder"`` (half length), ``<capsule radius length>`` -> ``"capsule"`` (the length between the caps' centres,
  as the extension some tools write), ``<mesh filename scale>`` -> ``"mesh"``, read by trimesh (STL, OBJ, DAE, ...).
* Mesh paths are found as the simulator's collision reader finds them (`jaxmb.sim.urdf_collision.resolve_mesh_path`):
  ``package://pkg/path`` is looked up in the URDF's folder and each folder above it, so the meshes of
  example-robot-data's robots are found in its tree. A mesh that cannot be found or read is skipped with a warning
  that names the file, the link and the mesh.
* ``<origin>`` places the shape in its link's frame, and the link is a body or a frame of the model (a link merged by
  a fixed joint is a frame of its parent body), so each shape lands on the jaxmb body that carries its link.
* Colours: a mesh's own colours or materials (a DAE's), else the ``<material>``'s ``<color rgba>`` (given in the
  ``<visual>`` or by name at the top of the file), else `jaxmb.viewer.shapes.GREY`.

Shapes are named by the element's ``name`` attribute, else ``"<link>/visual<i>"`` (``"<link>/collision<i>"``), i
counting the link's elements from 0.
"""

import os
import warnings

import numpy as np

from jaxmb.errors import ModelError
from jaxmb.io.urdf import Reader, load_urdf, parse_robot, read_text
from jaxmb.sim.urdf_collision import resolve_mesh_path
from jaxmb.viewer.shapes import GREY, Drawing, make_shape
from jaxmb.viewer.tessellate import read_mesh

ELEMENTS = ("visual", "collision")


def urdf_drawing(path, model=None, *, element="visual", floating_base=False) -> Drawing:
    """The `Drawing` of the ``<visual>`` elements (``element="collision"``: the ``<collision>`` elements) of the URDF
    file ``path`` on ``model``, the model loaded from that file (default: `jaxmb.load_urdf` of it with
    ``floating_base``). Raises `jaxmb.ModelError` naming the file and the element for malformed numbers, a link
    that is neither a body nor a frame of ``model``, and an unknown ``element``."""
    path = os.fspath(path)
    if element not in ELEMENTS:
        raise ModelError(f"{path}: element must be one of {ELEMENTS}, got {element!r}")
    if model is None:
        model = load_urdf(path, floating_base=floating_base)
    reader = Reader(parse_robot(read_text(path), path), path)
    folder = os.path.dirname(os.path.abspath(path))
    materials = named_colors(reader)
    shapes = []
    for link in reader.robot.findall("link"):
        link_name = link.get("name")
        items = link.findall(element)
        if not items:
            continue
        body, R_link, p_link = attachment(model, link_name, path)
        for i, item in enumerate(items):
            name = item.get("name") or f"{link_name}/{element}{i}"
            R, p = reader.origin(item, link)
            placement = (R_link @ R, p_link + R_link @ p)
            color = material_color(reader, item, link, materials)
            geometry = item.find("geometry")
            shape = None if geometry is None or len(geometry) == 0 else geometry[0]
            if shape is None:
                warnings.warn(f"{path}: link {link_name!r}: <{element}> {name!r} has no geometry; skipped",
                              stacklevel=2)
                continue
            s = read_shape(reader, shape, link, name, body, placement, color, folder, path)
            if s is not None:
                shapes.append(s)
    return Drawing(model, tuple(shapes))


def attachment(model, link_name, source):
    """``(body index, R, p)``: the jaxmb body that carries link ``link_name`` and the link frame's pose in it."""
    try:
        f = model.frame_index(link_name)
    except KeyError:
        raise ModelError(f"{source}: link {link_name!r} is neither a body nor a frame of model {model.name!r}; "
                         "is the model loaded from this file?") from None
    return (int(model.frame_body[f]), np.asarray(model.frame_placement.R[f], float),
            np.asarray(model.frame_placement.p[f], float))


def named_colors(reader) -> dict:
    """``{material name: RGBA (4,)}`` of the ``<material>`` elements at the top of the file that have a colour."""
    out = {}
    for m in reader.robot.findall("material"):
        c = m.find("color")
        if m.get("name") and c is not None:
            out[m.get("name")] = reader.floats(c, "rgba", 4, owner=m)
    return out


def material_color(reader, item, link, materials):
    """The RGBA colour of a ``<visual>``: its material's ``<color>``, else the named material's, else `GREY`."""
    m = item.find("material")
    if m is None:
        return np.asarray(GREY)
    c = m.find("color")
    if c is not None:
        return reader.floats(c, "rgba", 4, owner=link)
    return materials.get(m.get("name"), np.asarray(GREY))


def read_shape(reader, shape, link, name, body, placement, color, folder, source):
    """The `Shape` of a ``<geometry>``'s child element; None (with a warning) for a mesh that cannot be found or
    read, or an unknown element."""
    link_name = link.get("name")
    number = lambda attr: float(reader.floats(shape, attr, 1, owner=link)[0])
    if shape.tag == "box":
        return make_shape(name, body, placement, "box", 0.5 * reader.floats(shape, "size", 3, owner=link), color)
    if shape.tag == "sphere":
        return make_shape(name, body, placement, "sphere", (number("radius"), 0, 0), color)
    if shape.tag in ("cylinder", "capsule"):
        return make_shape(name, body, placement, shape.tag, (number("radius"), 0.5 * number("length"), 0), color)
    if shape.tag == "mesh":
        filename = shape.get("filename") or ""
        where = f"{source}: link {link_name!r}: mesh {filename!r}"
        scale = reader.floats(shape, "scale", 3, (1.0, 1.0, 1.0), owner=link)
        found = resolve_mesh_path(filename, folder)
        if found is None:
            warnings.warn(f"{where} not found; shape {name!r} is skipped", stacklevel=3)
            return None
        try:
            mesh = read_mesh(found, scale, color)
        except ImportError:  # a reader trimesh lacks (pycollada for DAE): the environment's fault, not the file's
            raise
        except Exception as e:  # trimesh raises many kinds for a bad file; the warning names it and the error
            warnings.warn(f"{where} ({found}) cannot be read ({type(e).__name__}: {e}); shape {name!r} is skipped",
                          stacklevel=3)
            return None
        return make_shape(name, body, placement, "mesh", color=color, mesh=mesh)
    warnings.warn(f"{source}: link {link_name!r}: unsupported shape <{shape.tag}> in {name!r}; skipped", stacklevel=3)
    return None
