"""`jaxmb.viewer`: shapes land on the bodies that carry them, the HTML document fetches nothing, the matplotlib
skeleton is drawn at `forward_kinematics`' origins, and headless Chromium draws the Panda from the HTML file.

The Panda of example-robot-data (DAE visual meshes, STL collision meshes, links merged by fixed joints) is the URDF
robot; a small MJCF written here (a free base, two joints on one body, a welded offset, a mesh, a hidden group) is
checked against MuJoCo's own geom poses.
"""

import html
import os
import re
import warnings

import jax
import numpy as np
import pytest

import jaxmb
from jaxmb import viewer
from jaxmb.testing import random_model
from pinocchio_bridge import load_jaxmb, robots_dir, urdf_path

pytest.importorskip("trimesh")

CHROMIUM = "/usr/bin/chromium"
Q_PANDA = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8, 0.02, 0.02])
# the body that carries each link with a <visual>: link0 is fixed to the world, the hand welded to link7
PANDA_BODIES = {"panda_link0": None, **{f"panda_link{i}": f"panda_link{i}" for i in range(1, 8)},
                "panda_hand": "panda_link7", "panda_leftfinger": "panda_leftfinger",
                "panda_rightfinger": "panda_rightfinger"}

MJCF = """
<mujoco model="shapes">
  <asset><mesh name="tetrahedron" vertex="0 0 0  0.1 0 0  0 0.1 0  0 0 0.1"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="base" pos="0 0 0.5">
      <freejoint/>
      <geom name="torso" type="box" size="0.1 0.2 0.05" pos="0.05 0 0" euler="0 0 30"/>
      <body name="arm" pos="0.2 0 0">
        <joint name="shoulder" type="hinge" axis="0 1 0" pos="0.03 0 0"/>
        <joint name="twist" type="hinge" axis="1 0 0"/>
        <geom name="upper" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="hand" pos="0.3 0 0" euler="0 20 0">
          <geom name="palm" type="cylinder" size="0.04 0.02" pos="0.02 0 0"/>
          <geom type="mesh" mesh="tetrahedron" pos="0.05 0.01 0"/>
          <geom name="hidden" type="sphere" size="0.05" group="3"/>
          <geom name="egg" type="ellipsoid" size="0.02 0.03 0.04" pos="0 0.05 0"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="module")
def panda():
    """The Panda's model and the drawing of its visual elements."""
    pytest.importorskip("collada")  # trimesh reads DAE with pycollada
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*mimic.*", category=UserWarning)
        model = load_jaxmb("panda")
    return model, viewer.urdf_drawing(urdf_path("panda"), model)


def world_poses(drawing, q):
    """World rotation and position of every shape of ``drawing`` at ``q``."""
    T = jaxmb.forward_kinematics(drawing.model, q)
    out = []
    for s in drawing.shapes:
        if s.body < 0:
            out.append((s.placement.R, s.placement.p))
        else:
            R, p = np.asarray(T.R[s.body]), np.asarray(T.p[s.body])
            out.append((R @ s.placement.R, p + R @ s.placement.p))
    return out


def test_panda_visual_meshes_lie_on_their_links_where_pinocchio_puts_them(panda):
    pin = pytest.importorskip("pinocchio")
    from jaxmb.io.pinocchio import PinocchioMap

    model, d = panda
    links = [s.name.split("/")[0] for s in d.shapes]
    assert len(d.shapes) == len(PANDA_BODIES)
    assert {link: model.body_names[s.body] if s.body >= 0 else None for link, s in zip(links, d.shapes)} == \
        PANDA_BODIES
    assert all(s.kind == "mesh" and len(s.mesh.faces) > 100 and s.mesh.colors is not None for s in d.shapes)
    # at a random configuration each shape's world pose is Pinocchio's pose of the same <visual> (named <link>_<i>)
    path = str(urdf_path("panda"))
    pm = pin.buildModelFromUrdf(path)
    geoms = pin.buildGeomFromUrdf(pm, path, pin.GeometryType.VISUAL, package_dirs=[str(robots_dir().parents[1])])
    q = np.asarray(jaxmb.random_configuration(model, jax.random.PRNGKey(3)))
    data, geom_data = pm.createData(), geoms.createData()
    pin.forwardKinematics(pm, data, PinocchioMap(model, pm).q_to_pin(q))
    pin.updateGeometryPlacements(pm, data, geoms, geom_data)
    for s, (R, p) in zip(d.shapes, world_poses(d, q)):
        oMg = geom_data.oMg[geoms.getGeometryId(s.name.replace("/visual", "_"))]
        np.testing.assert_allclose(R, oMg.rotation, atol=1e-12)
        np.testing.assert_allclose(p, oMg.translation, atol=1e-12)
    # the DAE meshes are read in metres, z up, every part of each file: their boxes are the boxes of the links'
    # collision STL meshes
    collision = {s.name.split("/")[0]: s for s in viewer.urdf_drawing(path, model, element="collision").shapes
                 if s.kind == "mesh"}
    compared = 0
    for link, v in zip(links, d.shapes):
        if link in collision:
            for reduce in (np.min, np.max):
                np.testing.assert_allclose(reduce(v.mesh.vertices, 0), reduce(collision[link].mesh.vertices, 0),
                                           atol=7e-3)
            compared += 1
    assert compared >= 8


def test_mjcf_geoms_are_drawn_where_mujoco_puts_them():
    mujoco = pytest.importorskip("mujoco")
    from jaxmb.io.mjcf import load_mjcf
    from jaxmb.io.mujoco import mujoco_map

    mj = mujoco.MjModel.from_xml_string(MJCF)
    model = load_mjcf(mj)
    d = viewer.mjcf_drawing(model, mj)
    assert [(s.name, s.kind) for s in d.shapes] == [
        ("floor", "plane"), ("torso", "box"), ("upper", "capsule"), ("palm", "cylinder"), ("hand/geom4", "mesh"),
        ("egg", "ellipsoid")]
    q = np.asarray(jaxmb.random_configuration(model, jax.random.PRNGKey(0)))
    data = mujoco.MjData(mj)
    data.qpos[:] = mujoco_map(model, mj).q_to_qpos(q)
    mujoco.mj_kinematics(mj, data)
    geoms = [0, 1, 2, 3, 4, 6]
    for g, (R, p) in zip(geoms, world_poses(d, q)):
        np.testing.assert_allclose(p, data.geom_xpos[g], atol=1e-12)
        np.testing.assert_allclose(R, data.geom_xmat[g].reshape(3, 3), atol=1e-12)
    np.testing.assert_array_equal(d.shapes[4].mesh.vertices, mj.mesh_vert)


def urls(document):
    return set(re.findall(r"https?://[^\s\"'<>)\\]+", document))


def test_html_document_fetches_nothing(panda, tmp_path):
    pytest.importorskip("viser")
    model, d = panda
    qs = Q_PANDA * np.linspace(0.0, 1.0, 5)[:, None]
    document = viewer.save_html(tmp_path / "panda.html", d, np.stack([qs, qs[::-1]]), 0.1).read_text()
    # the SVG namespace names an XML vocabulary, it is never fetched; every src/href is inline (data:)
    assert urls(document) <= {"http://www.w3.org/2000/svg"}
    assert not re.findall(r"\b(?:src|href)\s*=\s*[\"']?(?!data:)\w", document)
    assert len(document) > 1_000_000  # the Panda's meshes are inside
    shown = viewer.show(model, qs, 0.1).data
    srcdoc = re.fullmatch(r'<div><iframe srcdoc="([^"]*)".*', shown, re.S)
    assert srcdoc and urls(html.unescape(srcdoc.group(1))) <= {"http://www.w3.org/2000/svg"}


def test_skeleton_is_drawn_at_forward_kinematics_origins():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = random_model(5, n_bodies=7, floating_base=True)
    q = np.asarray(jaxmb.random_configuration(model, jax.random.PRNGKey(2)))
    T = jaxmb.forward_kinematics(model, q)
    p, R = np.asarray(T.p), np.asarray(T.R)
    ax = viewer.plot_skeleton(model, q, axes=0.1)
    parent = np.asarray(model.topology.parent)
    children = [k for k in range(model.nb) if parent[k] >= 0]
    links, frame_axes = ax.lines[:len(children)], ax.lines[len(children):]
    for k, line in zip(children, links):
        np.testing.assert_allclose(np.stack(line.get_data_3d(), 1), p[[parent[k], k]], atol=1e-12)
    assert len(frame_axes) == 3 * model.nb
    for n, line in enumerate(frame_axes):
        i, k = divmod(n, model.nb)
        np.testing.assert_allclose(np.stack(line.get_data_3d(), 1), [p[k], p[k] + 0.1 * R[k][:, i]], atol=1e-12)
    dots = np.stack(ax.collections[0]._offsets3d, 1)
    np.testing.assert_allclose(dots, p, atol=1e-12)
    plt.close(ax.figure)


def pixels(point, camera, size, fov):
    """Pixel (column, row) of the world ``point`` seen by a camera at ``camera[0]`` looking at ``camera[1]``, z up,
    vertical field of view ``fov``, in an image of ``size`` (width, height)."""
    position, target = (np.asarray(c, float) for c in camera)
    forward = (target - position) / np.linalg.norm(target - position)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    d = np.asarray(point) - position
    focal = 0.5 * size[1] / np.tan(0.5 * fov)
    depth = d @ forward
    return np.stack([0.5 * size[0] + focal * (d @ right) / depth, 0.5 * size[1] - focal * (d @ up) / depth], -1)


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no {CHROMIUM}: the headless-browser check of the HTML "
                    "viewer needs Debian's chromium (`apt-get install -y chromium`)")
def test_chromium_draws_the_panda(panda, tmp_path):
    pytest.importorskip("viser")
    import matplotlib.pyplot as plt

    from jaxmb.viewer.html import CAMERA_FOV, DRAWN

    model, d = panda
    camera, size = ((1.6, 0.6, 0.9), (0.1, 0.0, 0.4)), (640, 480)
    images = []
    for name, drawing in (("panda", d), ("empty", viewer.Drawing(model, ()))):
        path = viewer.save_html(tmp_path / f"{name}.html", drawing, Q_PANDA, camera=camera, grid=False)
        shot = viewer.screenshot(path, tmp_path / f"{name}.png", size=size, ready=DRAWN, wait=2.0, chromium=CHROMIUM)
        assert {url.split(":")[0] for url in shot.requests} <= {"file", "data", "blob"}, shot.requests
        images.append(plt.imread(shot.png)[..., :3])
    changed = np.abs(images[0] - images[1]).max(-1) > 0.1
    rows, columns = np.nonzero(changed)
    # the robot is where the camera sees its link frames: the changed pixels fill their box (grown for the
    # links' girth) and lie inside it
    seen = pixels(jaxmb.frame_poses(model, Q_PANDA).p, camera, size, CAMERA_FOV)
    lower, upper = seen.min(0) - 40, seen.max(0) + 40
    inside = (columns >= lower[0]) & (columns <= upper[0]) & (rows >= lower[1]) & (rows <= upper[1])
    assert changed.mean() > 0.02
    assert inside.mean() > 0.97
    assert inside.sum() > 0.2 * np.prod(upper - lower)
