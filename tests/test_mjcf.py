"""`jaxmb.io.mjcf.load_mjcf` and the converters of `jaxmb.io.mujoco`, with MuJoCo itself as the oracle.

Robots: the MJX test models shipped in the ``mujoco`` package (the humanoid: a free base, several joints on one
body, joint anchors off the body origins; the Barkour quadruped; the Shadow hand: a fixed base, a welded forearm, a
site), example-robot-data's Panda URDF compiled by MuJoCo, and a chain written here (hinge, slide and ball joints
on one body with anchors, reference positions, armature and actuator armature; a welded body; unnamed joints and
sites). Meshes are loaded from the files' paths, so that MuJoCo computes the inertias of mesh geoms as it does.

At random states (``qpos`` within the joint ranges, random ``qvel`` and ``qfrc_applied``), with MuJoCo's contacts,
limits, equality constraints, springs, dampers, friction loss and actuation disabled, jaxmb's mass matrix, bias
forces and forward dynamics equal MuJoCo's ``mj_fullM``, ``qfrc_bias`` and ``qacc_smooth`` to 1e-9 relative through
the `MujocoMap` converters, and the poses of bodies and sites equal MuJoCo's ``xpos, xmat`` and ``site_xpos,
site_xmat``. One program per robot computes jaxmb's side for all states.
"""

import functools
import re
import sys
import warnings
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

import jaxmb  # noqa: E402
from checks import assert_close, fast_jit  # noqa: E402
from jaxmb.io.mjcf import JOINT_TYPES, mujoco_module, load_mjcf, mujoco_names  # noqa: E402
from jaxmb.io.mujoco import mujoco_map  # noqa: E402
from pinocchio_bridge import urdf_path  # noqa: E402

TOL = 1e-9
STATES = 3
MJX_MODELS = Path(mujoco.__file__).parent / "mjx" / "test_data"

# Hinge, slide and ball joints on one body, each with its own anchor; references (ref) on the hinge and the slide;
# a body welded between two moving ones; a body with two unnamed hinges; unnamed sites; an actuator's armature.
CHAIN = """<mujoco model="chain">
  <compiler angle="radian"/>
  <worldbody>
    <body name="base" pos="0.1 -0.2 0.3" quat="0.9 0.1 -0.2 0.3">
      <freejoint/>
      <geom type="box" size=".1 .08 .05" mass="2"/>
      <site name="tip" pos="0.1 0.2 0.3" quat="0.5 0.5 0.5 -0.5"/>
      <body name="arm" pos="0.2 0 0.1" euler="0.3 -0.2 0.1">
        <joint name="h1" type="hinge" axis="0 1 0.3" pos="0.05 0.02 -0.03" ref="0.4" range="-1 1" armature="0.02"/>
        <joint name="s1" type="slide" axis="1 0.2 0" pos="0.1 0 0" ref="0.05" armature="0.1"/>
        <joint name="b1" type="ball" pos="0.01 0.03 0.02" armature="0.01"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.7"/>
        <site name="arm_site" pos="0.3 0 0"/>
        <body name="welded" pos="0.3 0.02 0" euler="0 0.5 0">
          <geom type="sphere" size="0.05" pos="0.02 0 0" mass="0.3"/>
          <body name="hand" pos="0.1 0 0">
            <joint type="hinge" axis="1 0 0" pos="0 0.02 0.01"/>
            <joint type="hinge" axis="0 0 1" pos="0.03 0 0"/>
            <geom type="box" size=".02 .03 .04" pos="0.03 0.01 0" mass="0.2"/>
            <site pos="0.05 0 0"/>
          </body>
        </body>
      </body>
      <body name="other" pos="-0.2 0 0">
        <joint name="h2" type="hinge" axis="0 0 1" pos="0.03 0 0"/>
        <joint name="s2" type="slide" axis="0 0 1" pos="0.03 0 0"/>
        <joint name="b2" type="ball" pos="0 0.02 0.01"/>
        <geom type="box" size=".05 .03 .04" pos="-0.05 0.01 0" mass="0.4"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="h1" gear="2" armature="0.3"/></actuator>
</mujoco>"""

# Keeps the inertias as written and the fixed links as bodies, as tests/test_sim_mujoco.py compiles URDFs.
URDF_COMPILER = '<mujoco><compiler discardvisual="true" fusestatic="false" balanceinertia="false"/></mujoco>'


def panda_urdf():
    """example-robot-data's Panda URDF without its meshes (``package://`` paths MuJoCo cannot open)."""
    text = urdf_path("panda").read_text()
    return re.sub(r"<visual\b.*?</visual>|<collision\b.*?</collision>", "", text, flags=re.S)


def compile_robot(name):
    """The MuJoCo model of a test robot, compiled from its file's path (meshes found beside it)."""
    if name == "chain":
        return mujoco.MjModel.from_xml_string(CHAIN)
    if name == "panda":
        return mujoco.MjModel.from_xml_string(panda_urdf().replace("</robot>", URDF_COMPILER + "</robot>"))
    files = {"humanoid": "humanoid/humanoid.xml", "barkour": "barkour_v0/assets/barkour_v0_mjx.xml",
             "shadow_hand": "shadow_hand/right_hand.xml"}
    return mujoco.MjModel.from_xml_path(str(MJX_MODELS / files[name]))


def load_quietly(source, **kwargs):
    """`load_mjcf` with its warning about what it leaves out silenced (tested on its own below)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not loaded.*", category=UserWarning)
        return load_mjcf(source, **kwargs)


def random_states(mj, rng, n):
    """``(qpos, qvel, qfrc_applied)`` (n, ...): hinges and slides uniform in their ranges (in [-pi, pi] where
    unlimited), uniform random quaternions, free-joint positions in [-1, 1]."""
    qpos = np.tile(mj.qpos0, (n, 1))
    for j in range(mj.njnt):
        a, kind = mj.jnt_qposadr[j], JOINT_TYPES[mj.jnt_type[j]]
        if kind in ("free", "ball"):
            k = a + 3 if kind == "free" else a
            qpos[:, a:k] = rng.uniform(-1.0, 1.0, (n, k - a))
            u = rng.normal(size=(n, 4))
            qpos[:, k:k + 4] = u / np.linalg.norm(u, axis=1, keepdims=True)
        else:
            lo, hi = mj.jnt_range[j] if mj.jnt_limited[j] else (-np.pi, np.pi)
            qpos[:, a] = rng.uniform(lo, hi, n)
    return qpos, rng.uniform(-2.0, 2.0, (n, mj.nv)), rng.normal(size=(n, mj.nv))


class Oracle(NamedTuple):
    """MuJoCo's quantities at each state (n, ...)."""

    M: np.ndarray
    qfrc_bias: np.ndarray
    qacc_smooth: np.ndarray
    xpos: np.ndarray
    xmat: np.ndarray
    site_xpos: np.ndarray
    site_xmat: np.ndarray


def mujoco_oracle(mj, qpos, qvel, qfrc):
    """`Oracle` of ``mj`` after ``mj_forward`` with contacts, limits, equality constraints, springs, dampers,
    friction loss and actuation disabled (``ctrl`` stays zero)."""
    off = mujoco.mjtDisableBit
    mj.opt.disableflags |= (off.mjDSBL_CONTACT | off.mjDSBL_EQUALITY | off.mjDSBL_LIMIT | off.mjDSBL_SPRING
                            | off.mjDSBL_DAMPER | off.mjDSBL_FRICTIONLOSS | off.mjDSBL_ACTUATION)
    data = mujoco.MjData(mj)
    rows = []
    for x, v, f in zip(qpos, qvel, qfrc):
        data.qpos[:], data.qvel[:], data.qfrc_applied[:] = x, v, f
        mujoco.mj_forward(mj, data)
        M = np.zeros((mj.nv, mj.nv))
        mujoco.mj_fullM(mj, data, M)
        rows.append((M, data.qfrc_bias.copy(), data.qacc_smooth.copy(), data.xpos.copy(),
                     data.xmat.reshape(-1, 3, 3).copy(), data.site_xpos.copy(),
                     data.site_xmat.reshape(-1, 3, 3).copy()))
    return Oracle(*(np.array(column) for column in zip(*rows)))


@fast_jit
def evaluate(model, q, qd, tau):
    """jaxmb's ``(M, bias forces, qdd, frame poses)`` at a batch of states (every body is a frame of its name)."""

    def one(q, qd, tau):
        return (jaxmb.mass_matrix(model, q), jaxmb.bias_forces(model, q, qd), jaxmb.forward_dynamics(model, q, qd, tau),
                jaxmb.frame_poses(model, q))

    return jax.vmap(one)(q, qd, tau)


class Case(NamedTuple):
    """One robot: the loaded model, MuJoCo's, the map, jaxmb's results in MuJoCo's coordinates, and MuJoCo's."""

    model: jaxmb.Model
    mj: object
    mjmap: object
    M: np.ndarray
    qfrc_bias: np.ndarray
    qacc: np.ndarray
    frame_poses: object
    oracle: Oracle


@functools.cache
def case(name) -> Case:
    mj = compile_robot(name)
    model = load_quietly(mj)
    mjmap = mujoco_map(model, mj)
    qpos, qvel, qfrc = random_states(mj, np.random.default_rng(7), STATES)
    q = mjmap.qpos_to_q(qpos)
    qd = mjmap.qvel_to_qd(q, qvel)
    M, bias, qdd, F = jax.tree.map(np.asarray, evaluate(model, q, qd, mjmap.qfrc_to_tau(q, qfrc)))
    return Case(model, mj, mjmap, mjmap.mass_matrix_to_mujoco(q, M), mjmap.bias_to_mujoco(q, qd, bias, M),
                mjmap.qdd_to_qacc(q, qd, qdd), F, mujoco_oracle(mj, qpos, qvel, qfrc))


ROBOTS = ["humanoid", "barkour", "shadow_hand", "panda", "chain"]


@pytest.mark.parametrize("name", ROBOTS)
def test_mass_matrix_equals_mujocos_full_mass_matrix(name):
    """``T^T M T = mj_fullM`` (armature and reflected actuator armature included) to 1e-9 relative."""
    c = case(name)
    for M, M_mj in zip(c.M, c.oracle.M):
        assert_close(M, M_mj, TOL)


@pytest.mark.parametrize("name", ROBOTS)
def test_bias_forces_equal_mujocos_qfrc_bias(name):
    """``T^T (C + M c) = qfrc_bias`` (Coriolis, centrifugal and gravity forces in MuJoCo's coordinates, the free
    joint's linear velocity in world axes) to 1e-9 relative."""
    c = case(name)
    for b, b_mj in zip(c.qfrc_bias, c.oracle.qfrc_bias):
        assert_close(b, b_mj, TOL)


@pytest.mark.parametrize("name", ROBOTS)
def test_forward_dynamics_equals_mujocos_qacc_smooth(name):
    """jaxmb's forward dynamics under MuJoCo's ``qfrc_applied`` (as ``tau = T qfrc``), in MuJoCo's coordinates
    (``qacc = T^T (qdd - c)``), equals ``qacc_smooth`` to 1e-9 relative."""
    c = case(name)
    for a, a_mj in zip(c.qacc, c.oracle.qacc_smooth):
        assert_close(a, a_mj, TOL)


@pytest.mark.parametrize("name", ROBOTS)
def test_body_and_site_poses_equal_mujocos(name):
    """Every MuJoCo body's pose (its jaxmb body's pose composed with `MujocoMap.body_placement`) equals ``xpos,
    xmat``, and every site's frame pose equals ``site_xpos, site_xmat``, to 1e-9: frames, anchors and chains sit
    where MuJoCo puts them. `MujocoMap.pose_on_body` of a site's ``site_pos, site_quat`` gives its frame's body and
    placement."""
    c = case(name)
    names = mujoco_names(c.mj)
    F, P = c.frame_poses, c.mjmap.body_placement
    for b in range(1, c.mj.nbody):
        i = c.mjmap.body_index[b]
        if i >= 0:
            f = c.model.frame_index(c.model.body_names[i])
            R, p = F.R[:, f], F.p[:, f]
        else:
            R, p = np.tile(np.eye(3), (STATES, 1, 1)), np.zeros((STATES, 3))
        assert_close(R @ P.R[b], c.oracle.xmat[:, b], TOL)
        assert_close(p + R @ P.p[b], c.oracle.xpos[:, b], TOL)
    for s in range(c.mj.nsite):
        f = c.model.frame_index(names.sites[s])
        assert_close(F.R[:, f], c.oracle.site_xmat[:, s], TOL)
        assert_close(F.p[:, f], c.oracle.site_xpos[:, s], TOL)
        i, X = c.mjmap.pose_on_body(c.mj.site_bodyid[s], c.mj.site_pos[s], c.mj.site_quat[s])
        assert i == c.model.frame_body[f]
        assert_close(X.R, np.asarray(c.model.frame_placement.R[f]), TOL)
        assert_close(X.p, np.asarray(c.model.frame_placement.p[f]), TOL)


def test_body_map_carries_mujocos_masses():
    """`MujocoMap.body_index` sends each MuJoCo body to the jaxmb body carrying its mass: the masses of the MuJoCo
    bodies sent to each jaxmb body add up to its mass (welded bodies merged, chain bodies massless)."""
    for name in ("humanoid", "shadow_hand", "chain"):
        c = case(name)
        mass = np.zeros(c.model.nb)
        moving = c.mjmap.body_index >= 0
        np.add.at(mass, c.mjmap.body_index[moving], c.mj.body_mass[moving])
        assert_close(mass, np.asarray(c.model.mass), 1e-12)


def test_several_joints_on_one_body_become_a_named_chain():
    """The chain's ``arm`` (hinge h1, slide s1, ball b1) is three jaxmb bodies ``arm/h1``, ``arm/s1`` (massless)
    and ``arm`` (moved by b1, carrying arm's mass and the welded body's); the two unnamed hinges of ``hand`` are
    ``hand_hinge`` and ``hand_hinge_2``, its unnamed site ``hand_site``; the unnamed free joint of ``base`` is
    ``base_free``. h1's range [-1, 1] is measured from its ref 0.4, and its armature adds the motor's reflected
    ``gear^2 * 0.3``."""
    model = case("chain").model
    for body, mass in (("arm/h1", 0.0), ("arm/s1", 0.0), ("arm", 1.0)):
        assert float(model.mass[model.body_index(body)]) == pytest.approx(mass, abs=1e-12)
    assert model.joint_names[model.body_index("arm")] == "b1"
    assert model.joint_names[model.body_index("arm/s1")] == "s1"
    assert {"hand_hinge", "hand_hinge_2", "base_free"} <= set(model.joint_names)
    assert model.body_names[model.frame_body[model.frame_index("hand_site")]] == "hand"
    assert model.body_names[model.frame_body[model.frame_index("welded")]] == "arm"
    qs, vs = model.joint_coordinates("h1")
    assert np.allclose([model.q_lower[qs][0], model.q_upper[qs][0]], [-1.4, 0.6], atol=1e-12)
    assert float(model.armature[vs][0]) == pytest.approx(0.02 + 4 * 0.3, abs=1e-12)
    assert any("'h1' has the reference position ref = 0.4" in n for n in model.notes)


def test_urdf_and_its_mujoco_compile_load_the_same_model():
    """`jaxmb.load_urdf` of the Panda's URDF and `load_mjcf` of MuJoCo's compile of the same text have the same
    bodies, joints, frames, placements, axes, limits and inertias (compared by name, to 1e-12).

    What MuJoCo compiles beyond the URDF is excluded: the second finger's ``<mimic>`` becomes an equality constraint
    in MuJoCo (`load_mjcf` names it in its warning; `jaxmb.load_urdf` loads the finger as an independent coordinate,
    with its own warning), and the joints' ``<dynamics damping>`` becomes MuJoCo's joint damping, which the
    simulator scene reads and neither dynamics model holds."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*mimic joints.*", category=UserWarning)
        urdf = jaxmb.load_urdf_string(panda_urdf())
    mjcf = case("panda").model
    assert set(urdf.body_names) == set(mjcf.body_names) and set(urdf.frame_names) == set(mjcf.frame_names)
    for body in urdf.body_names:
        i, k = urdf.body_index(body), mjcf.body_index(body)
        assert urdf.joint_names[i] == mjcf.joint_names[k] and urdf.joint_types[i] == mjcf.joint_types[k]
        for leaf in ("mass", "com", "inertia", "axis"):
            assert_close(getattr(mjcf, leaf)[k], getattr(urdf, leaf)[i], 1e-12)
        assert_close(mjcf.X_tree.R[k], urdf.X_tree.R[i], 1e-12)
        assert_close(mjcf.X_tree.p[k], urdf.X_tree.p[i], 1e-12)
        qs, qs2 = urdf.joint_coordinates(urdf.joint_names[i])[0], mjcf.joint_coordinates(urdf.joint_names[i])[0]
        for leaf in ("q_lower", "q_upper"):
            assert np.array_equal(np.asarray(getattr(urdf, leaf)[qs]), np.asarray(getattr(mjcf, leaf)[qs2]))
    for frame in urdf.frame_names:
        i, k = urdf.frame_index(frame), mjcf.frame_index(frame)
        assert urdf.body_names[urdf.frame_body[i]] == mjcf.body_names[mjcf.frame_body[k]]
        assert_close(mjcf.frame_placement.p[k], urdf.frame_placement.p[i], 1e-12)
        assert_close(mjcf.frame_placement.R[k], urdf.frame_placement.R[i], 1e-12)


def test_free_joints_named_differently_are_matched_by_joint_names():
    """A floating Panda loaded by `jaxmb.load_urdf` (free joint ``"root"``) meets MuJoCo's compile with an unnamed
    free joint on ``panda_link0`` (``"panda_link0_free"``) once ``joint_names`` pairs them: MuJoCo's free
    coordinates land on jaxmb's ``root``; without the pairing the map names the joint it cannot find."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*mimic joints.*", category=UserWarning)
        urdf = jaxmb.load_urdf_string(panda_urdf(), floating_base=True)
    spec = mujoco.MjSpec.from_string(panda_urdf().replace("</robot>", URDF_COMPILER + "</robot>"))
    spec.body("panda_link0").add_freejoint()
    mj = spec.compile()
    with pytest.raises(jaxmb.ModelError, match="panda_link0_free"):
        mujoco_map(urdf, mj)
    mjmap = mujoco_map(urdf, mj, joint_names={"panda_link0_free": "root"})
    qs, vs = urdf.joint_coordinates("root")
    free = mj.jnt_qposadr[mujoco_names(mj).joints.index("panda_link0_free")]
    assert list(mjmap.q_index[free:free + 7]) == list(range(qs.start, qs.stop))
    assert sorted(mjmap.v_index) == list(range(urdf.nv))


def test_converters_invert_each_other_over_batch_axes():
    """On the humanoid (a free joint): ``qpos -> q -> qpos`` and ``qvel -> qd -> qvel`` are identities, ``T(q)``
    is orthogonal and equals `qvel_to_qd` column by column, forces map by ``T`` and accelerations back and forth,
    for a (2, 3) batch of states."""
    c = case("humanoid")
    m = c.mjmap
    rng = np.random.default_rng(3)
    qpos, qvel, qfrc = random_states(c.mj, rng, 6)
    qpos, qvel, qfrc = (x.reshape(2, 3, -1) for x in (qpos, qvel, qfrc))
    q = m.qpos_to_q(qpos)
    qd = m.qvel_to_qd(q, qvel)
    T = m.velocity_map(q)
    assert T.shape == (2, 3, c.mj.nv, c.mj.nv)
    assert_close(m.q_to_qpos(q), qpos, 1e-15)
    assert_close(m.qd_to_qvel(q, qd), qvel, 1e-14)
    assert_close(np.swapaxes(T, -1, -2) @ T, np.broadcast_to(np.eye(c.mj.nv), T.shape), 1e-14)
    assert_close(np.einsum("...ij,...j->...i", T, qvel), qd, 1e-14)
    assert_close(m.qfrc_to_tau(q, qfrc), np.einsum("...ij,...j->...i", T, qfrc), 1e-14)
    assert_close(m.tau_to_qfrc(q, m.qfrc_to_tau(q, qfrc)), qfrc, 1e-14)
    assert_close(m.qdd_to_qacc(q, qd, m.qacc_to_qdd(q, qd, qfrc)), qfrc, 1e-14)
    assert not np.allclose(T, m.P)  # the free joint's rotation makes T depend on q


def test_floating_base_and_gravity_options():
    """``floating_base=False`` welds the humanoid's torso to the world (its free joint gone), ``True`` joins the
    Shadow hand's welded forearm to the world by the free joint ``rh_forearm_free``; ``gravity`` overrides
    MuJoCo's."""
    path = MJX_MODELS / "humanoid" / "humanoid.xml"
    fixed = load_quietly(path, floating_base=False, gravity=(0.0, 0.0, -1.0))
    assert "root" not in fixed.joint_names and fixed.nq == 21 and fixed.nv == 21
    assert np.array_equal(np.asarray(fixed.gravity), [0.0, 0.0, -1.0])
    hand = load_quietly(MJX_MODELS / "shadow_hand" / "right_hand.xml", floating_base=True)
    i = hand.joint_index("rh_forearm_free")
    assert hand.joint_types[i] == "free" and hand.body_names[i] == "rh_forearm" and hand.nv == 30


def test_bad_input_raises_model_error_naming_the_file(tmp_path):
    """A missing file, a file MuJoCo's parser rejects and a string its compiler rejects each raise
    `jaxmb.ModelError` naming the file (or the string) and MuJoCo's message."""
    missing = tmp_path / "missing.xml"
    with pytest.raises(jaxmb.ModelError, match=re.escape(str(missing))):
        load_mjcf(missing)
    bad = tmp_path / "bad.xml"
    bad.write_text('<mujoco><worldbody><body><joint type="bogus"/></body></worldbody></mujoco>')
    with pytest.raises(jaxmb.ModelError, match=re.escape(str(bad)) + ".*invalid keyword: 'bogus'"):
        load_mjcf(bad)
    nested_free = ('<mujoco><worldbody><body><freejoint/><geom size="1"/><body><freejoint/><geom size="1"/></body>'
                   '</body></worldbody></mujoco>')
    with pytest.raises(jaxmb.ModelError, match="<mjcf string>.*free joint can only be used on top level"):
        load_mjcf(nested_free)


UNMAPPED = """<mujoco model="unmapped">
  <worldbody>
    <body name="a" gravcomp="1">
      <joint name="spring" type="hinge" stiffness="3"/>
      <geom name="g" size=".1" mass="1"/>
      <body name="b" pos="0 0 -0.3">
        <joint name="limited_ball" type="ball" range="0 0.5" stiffness="2"/>
        <geom size=".1" mass="1"/>
        <site name="s"/>
      </body>
    </body>
  </worldbody>
  <tendon><fixed name="t"><joint joint="spring" coef="1"/></fixed></tendon>
  <equality><joint name="eq" joint1="spring"/></equality>
  <sensor><framepos name="probe" objtype="site" objname="s"/></sensor>
  <actuator><motor name="m" joint="spring"/></actuator>
</mujoco>"""


def test_one_warning_lists_everything_the_dynamics_model_leaves_out():
    """One `UserWarning` names the ball joint's spring and range, the gravity compensation, the tendon, the
    equality constraint and the sensor; ``Model.notes`` records it, and notes the geoms, the actuator and the hinge's
    spring as read by the simulator scene (they are not in the warning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_mjcf(UNMAPPED)
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 1
    for item in ("springs (stiffness) of ball and free joints 'limited_ball'", "ranges of ball joints 'limited_ball'",
                 "gravity compensation of bodies 'a'", "tendons 't'", "equality constraints 'eq'",
                 "sensors 'probe'"):
        assert item in messages[0], item
    assert "geoms" not in messages[0] and "actuators" not in messages[0] and "'spring'" not in messages[0]
    assert messages[0] in model.notes
    assert any(n.startswith("read by the simulator scene") and "geoms (2)" in n and "actuators (1)" in n
               and "hinge and slide joints with springs (1)" in n for n in model.notes)


def test_missing_mujoco_raises_an_import_error_naming_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(ImportError, match="pip install 'jaxmb\\[mujoco\\]'"):
        mujoco_module()
