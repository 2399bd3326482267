"""A standalone HTML document that plays trajectories of a model in 3-D, with a timeline, drawn by viser.

viser (https://viser.studio, an optional dependency) records a scene and its updates, and
``StateSerializer.as_html`` writes them into one HTML file together with its client (the three.js viewer, bundled
and compressed into the file), so the document works offline, from disk or e-mail, without a server. Its playback
bar plays, pauses and scrubs the recording and sets the speed.

The document holds, per world of the batch, a frame per jaxmb body that carries shapes, those shapes as triangle
meshes in it (`jaxmb.viewer.tessellate.triangles`), and the frames' world poses in every frame of the trajectory
(`jaxmb.viewer.motion.body_motion`), ``dt`` apart. The worlds of a batch stand side by side along y
(`jaxmb.viewer.motion.world_offsets`); ``spacing=0`` overlays them. The camera starts looking at the middle of
everything the bodies sweep, from the front (+x), above and a little to the side, unless told otherwise.
"""

import contextlib
import io
import os
from pathlib import Path

import numpy as np

from jaxmb.viewer.motion import body_motion, bounds, reach, world_offsets
from jaxmb.viewer.shapes import drawing
from jaxmb.viewer.tessellate import triangles, trimesh_module

DRAWN = "[...document.querySelectorAll('canvas')].some((c) => c.style.opacity === '1')"
"""A JavaScript expression that turns true once viser's canvas is shown in full: the client keeps it nearly
transparent while it loads the scene and its lighting, then fades it in (`jaxmb.viewer.screenshot`'s ``ready``)."""

GRID_LIFT = 2e-3
"""The grid is drawn this far above ``z = 0`` (m), so that a ground plane there does not flicker through it."""

CAMERA_DIRECTION = np.array([1.0, 0.35, 0.45]) / np.linalg.norm([1.0, 0.35, 0.45])
"""From the middle of the scene towards the initial camera."""

CAMERA_FOV = np.deg2rad(50.0)
"""The camera's vertical field of view (radians)."""


def viser_module():
    """The ``viser`` module, or an ImportError that says how to install it (an optional dependency)."""
    try:
        import viser
    except ImportError as e:
        raise ImportError("jaxmb.viewer writes HTML with viser, an optional dependency: install the viewer extra, "
                          "`pip install 'jaxmb[viewer]'`, or the packages themselves, "
                          "`pip install viser trimesh pycollada`") from e
    return viser


def save_html(path, what, qs, dt=1.0 / 30.0, **options) -> Path:
    """Write the `html_document` of ``what`` along ``qs`` to ``path`` (parent folders are made); returns the path."""
    path = Path(os.fspath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html_document(what, qs, dt, **options), encoding="utf-8")
    return path


def html_document(what, qs, dt=1.0 / 30.0, *, spacing=None, camera=None, grid=True, dark_mode=False,
                  title=None) -> str:
    """A standalone HTML document (module docstring) that plays ``what`` along ``qs``.

    what: a `jaxmb.viewer.Drawing` (`jaxmb.viewer.urdf_drawing`, `jaxmb.viewer.mjcf_drawing`), a `jaxmb.sim.Scene`
        (its geoms) or a model (its skeleton), `jaxmb.viewer.drawing`.
    qs: (nq,) one configuration, (T, nq) a trajectory, (B, T, nq) B trajectories shown side by side.
    dt: seconds between frames (the recording plays in real time at speed 1).
    spacing: distance between the worlds of a batch along y (m); None picks one so that they do not overlap, 0
        overlays them.
    camera: ``(position, look_at)``, the initial camera's position and the point it looks at (3,) each; None
        looks at the middle of everything the bodies sweep from the front (+x), above and a little to the side.
    grid: draw a grid on the ground plane ``z = 0`` (`GRID_LIFT` above it).
    dark_mode: viser's dark colour scheme. title: the label of the viewer's panel (default: the model's name).
    """
    if not dt > 0:
        raise ValueError(f"dt must be positive, got {dt!r}")
    viser = viser_module()
    d = drawing(what)
    motion = body_motion(d.model, qs)
    margin = reach(d)
    offsets = world_offsets(motion, margin, spacing)
    box = bounds(motion, offsets, margin)
    if camera is None:
        camera = (box.center + CAMERA_DIRECTION * max(box.radius / np.sin(0.5 * CAMERA_FOV), 0.5), box.center)
    with contextlib.redirect_stdout(io.StringIO()), quiet_rich():  # viser announces its server and its stop
        server = viser.ViserServer(host="127.0.0.1", port=0, label=title or d.model.name, verbose=False)
        try:
            server.scene.set_up_direction("+z")
            frames = add_worlds(viser, server.scene, d, motion, offsets, box, grid)
            server.initial_camera.position = np.asarray(camera[0], float)
            server.initial_camera.look_at = np.asarray(camera[1], float)
            server.initial_camera.fov = float(CAMERA_FOV)
            serializer = server.get_scene_serializer()
            wxyz = viser.transforms.SO3.from_matrix(motion.R).wxyz
            T = motion.p.shape[1]
            for t in range(T if T > 1 else 0):  # one configuration: a still scene, no timeline
                for (w, body), handle in frames.items():
                    handle.wxyz = wxyz[w, t, body]
                    handle.position = motion.p[w, t, body] + offsets[w]
                serializer.insert_sleep(float(dt))
            return serializer.as_html(dark_mode=dark_mode)
        finally:
            server.stop()


@contextlib.contextmanager
def quiet_rich():
    """Silence the ``rich`` library's console meanwhile, in every thread (viser prints through it from its server's
    thread; in Jupyter ``rich`` displays its output as HTML, which no redirection of stdout reaches)."""
    try:
        import rich
    except ImportError:
        yield
        return
    console = rich.get_console()
    quiet, console.quiet = console.quiet, True
    try:
        yield
    finally:
        console.quiet = quiet


def add_worlds(viser, scene, d, motion, offsets, box, grid) -> dict:
    """Add the grid, the ground and, per world, a frame for the world and each body with shapes, posed at the first
    frame, with their shapes. Unbounded world planes whose normal is across y are the same plane in every world
    (a shift along y leaves them in place): they are drawn once, centred under the middle of the scene, and only
    other world shapes once per world. Returns ``{(world, body): frame handle}`` of the bodies."""
    plane_half = max(box.radius, 1.0)
    if grid:
        cell = 10.0 ** np.floor(np.log10(plane_half / 2.0))  # a decimal step, about 20 to 200 cells across
        scene.add_grid("/grid", width=2 * plane_half, height=2 * plane_half, plane="xy", cell_size=cell,
                       section_size=10 * cell, position=(box.center[0], box.center[1], GRID_LIFT))
    by_body = d.by_body()
    ground = [s for s in by_body.pop(-1) if shared_plane(s)]
    by_body[-1] = [s for s in d.shapes if s.body < 0 and not shared_plane(s)]
    for j, s in enumerate(ground):
        n, p = s.placement.R[:, 2], s.placement.p
        centred = s._replace(placement=s.placement._replace(p=box.center - np.dot(box.center - p, n) * n))
        add_shape(viser, scene, f"/ground/{j}_{safe(s.name)}", centred, plane_half)
    wxyz = viser.transforms.SO3.from_matrix(motion.R[:, 0]).wxyz
    frames = {}
    for w, offset in enumerate(offsets):
        for body, group in by_body.items():
            if not group:
                continue
            path = f"/world{w}/" + safe("world" if body < 0 else f"{body}_{d.model.body_names[body]}")
            if body < 0:
                scene.add_frame(path, show_axes=False, position=offset)
            else:
                frames[w, body] = scene.add_frame(path, show_axes=False, wxyz=wxyz[w, body],
                                                  position=motion.p[w, 0, body] + offset)
            for j, s in enumerate(group):
                add_shape(viser, scene, f"{path}/{j}_{safe(s.name)}", s, plane_half)
    return frames


def shared_plane(shape) -> bool:
    """Whether ``shape`` is an unbounded plane fixed to the world with its normal across y."""
    return shape.body < 0 and shape.kind == "plane" and not np.all(shape.size[:2] > 0) and abs(
        shape.placement.R[1, 2]) < 1e-9


def safe(name) -> str:
    """``name`` as one element of a viser scene path (which ``/`` separates)."""
    return str(name).replace("/", "_")


def add_shape(viser, scene, path, shape, plane_half):
    """Add ``shape`` as a mesh at ``path`` under its body's frame, placed by its placement."""
    tri = triangles(shape, plane_half)
    wxyz = viser.transforms.SO3.from_matrix(shape.placement.R).wxyz
    position = shape.placement.p
    vertices, faces = np.asarray(tri.vertices, np.float32), np.asarray(tri.faces, np.uint32)
    if tri.colors is None:
        rgb = tuple(int(c) for c in np.round(255 * np.clip(shape.color[:3], 0, 1)))
        alpha = float(shape.color[3])
        scene.add_mesh_simple(path, vertices, faces, color=rgb, opacity=alpha if alpha < 1 else None,
                              flat_shading=shape.kind in ("box", "plane"), wxyz=wxyz, position=position)
    else:
        mesh = trimesh_module().Trimesh(vertices, faces, vertex_colors=tri.colors, process=False)
        scene.add_mesh_trimesh(path, mesh, wxyz=wxyz, position=position)
