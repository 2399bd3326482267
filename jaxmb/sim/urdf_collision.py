"""Collision geoms from the ``<collision>`` elements of a URDF file.

* ``<box size>`` -> `box` (half sizes); ``<sphere radius>`` -> `sphere`.
* ``<cylinder radius length>`` -> `capsule` of the same radius and the same overall length (``half_length =
  max(length / 2 - radius, 0)``), so that it does not reach past the cylinder's end faces; its rounded ends miss
  the rims. A `UserWarning` lists the replaced cylinders, once per call.
* ``<mesh filename scale>`` -> the `box` bounding the mesh's vertices (binary or ASCII STL, OBJ), scaled; a warning
  names the link and the file. ``package://pkg/path`` is looked up as ``pkg/path`` and ``path`` in the URDF's
  folder and each folder above it (and as ``path`` in a folder named ``pkg``); other paths are relative to the
  URDF's folder. A mesh that cannot be found or read is skipped, with a warning.
* ``<origin>`` places the shape in its link's frame. Links are bodies or frames of the model (links merged by
  fixed joints are frames); `jaxmb.sim.geometry.geometry` checks them.

Geoms are named by the ``<collision name>`` attribute, else ``"<link>/<i>"`` (i counts the link's ``<collision>``
elements from 0).
"""

import os
import struct
import warnings

import numpy as np

from jaxmb.io.urdf import Reader, parse_robot, read_text
from jaxmb.sim.geometry import box, capsule, sphere

_THINNEST = 1e-6  # half size given to a flat mesh's bounding box along its flat direction


def urdf_geometry(source, model, *, string=False, base_dir=None) -> list:
    """The geoms of the ``<collision>`` elements of a URDF file ``source`` (or, with ``string``, a URDF document),
    as a list of `jaxmb.sim.geometry.Geom` for `jaxmb.sim.geometry.geometry` (module docstring).

    ``model``: the model loaded from the same file, whose bodies and frames the links name. ``base_dir``: the
    folder that mesh paths are relative to (default: the file's folder; for a string, the working directory).
    Malformed numbers raise `jaxmb.ModelError` naming the file and the element."""
    if string:
        text, name = source, "<urdf string>"
        folder = os.getcwd() if base_dir is None else os.fspath(base_dir)
    else:
        name = os.fspath(source)
        text = read_text(name)
        folder = os.path.dirname(os.path.abspath(name)) if base_dir is None else os.fspath(base_dir)
    reader = Reader(parse_robot(text, name), name)
    geoms, cylinders = [], []
    for link in reader.robot.findall("link"):
        link_name = link.get("name")
        for i, col in enumerate(link.findall("collision")):
            geom_name = col.get("name") or f"{link_name}/{i}"
            R, p = reader.origin(col, link)
            shape = col.find("geometry")
            shape = None if shape is None or len(shape) == 0 else shape[0]
            if shape is None:
                warnings.warn(f"{name}: link {link_name!r}: <collision> {geom_name!r} has no geometry; skipped",
                              stacklevel=2)
            elif shape.tag == "box":
                half = 0.5 * reader.floats(shape, "size", 3, owner=link)
                geoms.append(box(link_name, half, p, R, name=geom_name))
            elif shape.tag == "sphere":
                r = float(reader.floats(shape, "radius", 1, owner=link)[0])
                geoms.append(sphere(link_name, r, p, name=geom_name))
            elif shape.tag == "cylinder":
                r = float(reader.floats(shape, "radius", 1, owner=link)[0])
                length = float(reader.floats(shape, "length", 1, owner=link)[0])
                geoms.append(capsule(link_name, r, max(0.5 * length - r, 0.0), p, R, name=geom_name))
                cylinders.append(geom_name)
            elif shape.tag == "mesh":
                g = _mesh_box(reader, shape, link, geom_name, R, p, folder, name)
                if g is not None:
                    geoms.append(g)
            else:
                warnings.warn(f"{name}: link {link_name!r}: unsupported collision shape <{shape.tag}>; skipped",
                              stacklevel=2)
    if cylinders:
        warnings.warn(f"{name}: cylinders are replaced by capsules of the same radius and overall length: "
                      f"{cylinders}", stacklevel=2)
    return geoms


def _mesh_box(reader, shape, link, geom_name, R, p, folder, source):
    """The box bounding the mesh's scaled vertices, placed by the origin (R, p); None (and a warning) where the
    file cannot be found or read."""
    filename = shape.get("filename")
    link_name = link.get("name")
    where = f"{source}: link {link_name!r}: mesh {filename!r}"
    scale = reader.floats(shape, "scale", 3, (1.0, 1.0, 1.0), owner=link)
    path = resolve_mesh_path(filename or "", folder)
    if path is None:
        warnings.warn(f"{where} not found; the collision geom {geom_name!r} is skipped", stacklevel=3)
        return None
    try:
        vertices = read_mesh_vertices(path)
    except (OSError, ValueError) as e:
        warnings.warn(f"{where} ({path}) cannot be read ({e}); the collision geom {geom_name!r} is skipped",
                      stacklevel=3)
        return None
    v = vertices * scale
    lo, hi = v.min(0), v.max(0)
    half = np.maximum(0.5 * (hi - lo), _THINNEST)
    warnings.warn(f"{where} is replaced by its bounding box (half sizes {np.round(half, 6).tolist()})",
                  stacklevel=3)
    return box(link_name, half, p + R @ (0.5 * (lo + hi)), R, name=geom_name)


def resolve_mesh_path(filename, folder):
    """The file that a URDF mesh ``filename`` names, relative to ``folder`` (module docstring); None if none."""
    if filename.startswith("file://"):
        filename = filename[len("file://"):]
    if filename.startswith("package://"):
        package, _, rest = filename[len("package://"):].partition("/")
        candidates = []
        d = os.path.abspath(folder)
        while True:
            candidates += [os.path.join(d, package, rest), os.path.join(d, rest)]
            if os.path.basename(d) == package:
                candidates.append(os.path.join(d, rest))
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    else:
        candidates = [filename if os.path.isabs(filename) else os.path.join(folder, filename)]
    return next((c for c in candidates if os.path.isfile(c)), None)


def read_mesh_vertices(path) -> np.ndarray:
    """The vertices (n, 3) of an STL (binary or ASCII) or OBJ file; ValueError for another format or no
    vertices."""
    ext = os.path.splitext(path)[1].lower()
    with open(path, "rb") as f:
        data = f.read()
    if ext == ".stl":
        v = _stl_vertices(data)
    elif ext == ".obj":
        v = [line.split()[1:4] for line in data.decode("utf-8", "replace").splitlines()
             if line.startswith("v ")]
        v = np.asarray(v, float).reshape(-1, 3)
    else:
        raise ValueError(f"unsupported mesh format {ext!r} (STL and OBJ are read)")
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError("no finite vertices")
    return v


def _stl_vertices(data: bytes) -> np.ndarray:
    if len(data) >= 84:
        n = struct.unpack("<I", data[80:84])[0]
        if len(data) == 84 + 50 * n:  # binary: normal and three vertices (12 float32) and 2 bytes per facet
            rec = np.frombuffer(data[84:], dtype=np.dtype([("f", "<f4", (12,)), ("attr", "<u2")]), count=n)
            return rec["f"][:, 3:].reshape(-1, 3).astype(float)
    text = data.decode("utf-8", "replace")
    v = [line.split()[1:4] for line in text.splitlines() if line.strip().startswith("vertex")]
    return np.asarray(v, float).reshape(-1, 3)
