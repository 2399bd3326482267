"""`jaxmb.sim.mjcf.load_mjcf_scene`: the simulator scene of an MJCF model, with MuJoCo itself as the oracle.

* MJX's shipped models (humanoid, Barkour quadruped, Shadow hand): every scene geom sits where MuJoCo puts it (world
  poses at a keyframe or a random state, to 1e-9) with its size and friction; the actuators' and dampers' forces at
  random states and controls (beyond the control ranges) equal MuJoCo's ``qfrc_actuator`` and ``qfrc_damper`` (with
  the humanoid's hinge springs, ``qfrc_spring``) through the converters (to 1e-9); the keyframes round-trip to
  MuJoCo's ``key_qpos``, ``key_qvel`` and ``key_ctrl``; each is refused until ``drop`` names what it needs, and
  then warns of it.
* Which pairs collide: MuJoCo's own collision pass with every geom's margin made large reports every pair it
  checks; the scene's pairs are those (bitmasks, explicit pairs, exclusions, weld bodies, parent and child, with and
  without ``filterparent``).
* Without contact: a chain of a slide and three hinges (two on one body, one with a reference position) driven by a
  motor, a position servo and a velocity servo with gears, control and force ranges, with joint damping: jaxmb's RK4
  steps equal MuJoCo's RK4 ``mj_step`` to 1e-8 over 200 steps.
* With contact: a sphere, a box and a capsule dropped on a plane rest at MuJoCo's heights to 1e-5. MuJoCo's contacts
  are soft: a resting body sinks until the constraint's impedance balances its weight, about ``(1 - d) g / (d k)``
  for the impedance ``d`` and stiffness ``k`` of ``solimp``, ``solref``, 0.4 mm at MuJoCo's defaults; the model
  here makes MuJoCo's contact stiff (``solref = 0.004``, ``solimp = 0.99 0.999``: about 2e-6), so that both rest
  within 1e-5 of the surface. Barkour (its height field replaced by a plane) stepped as a batch from its keyframe,
  one world with the keyframe's controls and one with zero controls: the first stands and comes to rest, the
  second folds and falls; neither diverges.
* Equality constraints: a four-bar (``connect``, a planar loop) and a gear pair (``joint`` with a polynomial), and a
  seven-hinge arm welded to the world: the loop constraints' residuals at random configurations equal MuJoCo's
  ``efc_pos`` (in norm for the closures, whose rows MuJoCo takes in other axes); the four-bar and gears stepped
  from the file's pose follow MuJoCo's stiff soft constraints to 1e-3 rad over 0.3 s (MuJoCo's equality rows hold
  to 1e-5 there) and close to 1e-9.

* Initial states and options: a free box starts at the file's ``qpos0`` and comes to rest on the floor; a keyframe
  resets as ``mj_resetDataKeyframe``; the file's solver, cone, tolerance and iterations map; what the scene cannot
  build (a spatial tendon, fluid forces under implicitfast, every category of one file) is refused by category until ``drop`` names it.

The programs: six rollouts (the chain, the lags, the drops, the box, Barkour's batch, the loops), each compiled once
by `fast_jit`.
"""

import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from checks import assert_close, fast_jit  # noqa: E402
from jaxmb import loops, sim  # noqa: E402
from jaxmb.errors import ModelError  # noqa: E402
from jaxmb.kinematics import forward_kinematics  # noqa: E402
from jaxmb.sim.actuators import actuator_forces, passive_forces  # noqa: E402
from jaxmb.sim.geometry import geom_poses  # noqa: E402
from jaxmb.sim.mjcf import GEOM_TYPES, INERT, load_mjcf_scene  # noqa: E402

TOL = 1e-9
MJX_MODELS = Path(mujoco.__file__).parent / "mjx" / "test_data"
SHIPPED = {"humanoid": MJX_MODELS / "humanoid" / "humanoid.xml",
           "barkour": MJX_MODELS / "barkour_v0" / "assets" / "barkour_v0_mjx.xml",
           "shadow_hand": MJX_MODELS / "shadow_hand" / "right_hand.xml"}
DROP = {"humanoid": (), "barkour": "height fields", "shadow_hand": "meshes"}  # what each needs dropped


def quietly(source, **options):
    """`load_mjcf_scene` and the messages of the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = load_mjcf_scene(source, **options)
    return s, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


@pytest.fixture(scope="module")
def shipped():
    return {name: quietly(path, drop=DROP[name]) for name, path in SHIPPED.items()}


def random_state(mj, rng):
    """MuJoCo ``(qpos, qvel)``: hinges and slides within their ranges (or within 1), quaternions random."""
    qpos, qvel = np.array(mj.qpos0, float), rng.uniform(-1.0, 1.0, mj.nv)
    for j in range(mj.njnt):
        a = int(mj.jnt_qposadr[j])
        kind = int(mj.jnt_type[j])
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            qpos[a:a + 3] += rng.uniform(-0.2, 0.2, 3)
            qpos[a + 3:a + 7] = rng.normal(size=4)
        elif kind == mujoco.mjtJoint.mjJNT_BALL:
            qpos[a:a + 4] = rng.normal(size=4)
        else:
            lo, hi = mj.jnt_range[j] if mj.jnt_limited[j] else (-1.0, 1.0)
            qpos[a] = rng.uniform(lo, hi)
    mujoco.mj_normalizeQuat(mj, qpos)
    return qpos, qvel


# -- MJX's shipped models ------------------------------------------------------------------------------------------


def expected_size(mj, g):
    """The jaxmb size (3,) of MuJoCo geom ``g`` (`jaxmb.sim.geometry`)."""
    kind, size = GEOM_TYPES[int(mj.geom_type[g])], np.asarray(mj.geom_size[g], float)
    return {"plane": np.zeros(3), "sphere": [size[0], 0, 0], "ellipsoid": [size.max(), 0, 0],
            "capsule": [size[0], size[1], 0], "cylinder": [size[0], max(size[1] - size[0], 0.0), 0],
            "box": size, "mesh": np.maximum(mj.geom_aabb[g, 3:], 1e-6)}[kind]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_geoms_sit_where_mujoco_puts_them(shipped, name):
    """Each scene geom is a MuJoCo geom that can collide (its bitmasks or a pair), named as in MuJoCo, with MuJoCo's
    size and friction; at a random state its world pose is MuJoCo's ``geom_xpos, geom_xmat`` (a mesh's box centred
    on its bounding box, a plane's normal its z axis) to 1e-9."""
    s, _ = shipped[name]
    mj, geo = s.mj, s.scene.geometry
    paired = set(mj.pair_geom1) | set(mj.pair_geom2)
    collide = [g for g in range(mj.ngeom) if (mj.geom_contype[g] or mj.geom_conaffinity[g] or g in paired)
               and GEOM_TYPES[int(mj.geom_type[g])] not in ("hfield", "sdf")]
    assert list(s.geom_ids) == collide
    assert all(geo.names[i] == (mj.geom(g).name or f"geom{g}") for i, g in enumerate(s.geom_ids))
    ids = np.asarray(s.geom_ids)
    friction = np.where(mj.geom_condim[ids] == 1, 0.0, mj.geom_friction[ids, 0])
    np.testing.assert_array_equal(np.asarray(geo.friction), friction)
    np.testing.assert_allclose(np.asarray(geo.size), [expected_size(mj, g) for g in ids], rtol=0, atol=1e-15)
    qpos, _ = random_state(mj, np.random.default_rng(3))
    data = mujoco.MjData(mj)
    data.qpos[:] = qpos
    mujoco.mj_kinematics(mj, data)
    T = geom_poses(geo, forward_kinematics(s.scene.tree, jnp.asarray(s.mujoco_map.qpos_to_q(qpos))))
    R_mj = data.geom_xmat[ids].reshape(-1, 3, 3)
    p_mj = data.geom_xpos[ids] + np.einsum("gij,gj->gi", R_mj, np.where(
        (mj.geom_type[ids] == mujoco.mjtGeom.mjGEOM_MESH)[:, None], mj.geom_aabb[ids, :3], 0.0))
    R, p = np.asarray(T.R), np.asarray(T.p)
    assert_close(p, p_mj, TOL)
    assert_close(R[:, :, 2], R_mj[:, :, 2], TOL)
    solid = np.asarray([k != "plane" for k in geo.kind])
    assert_close(R[solid], R_mj[solid], TOL)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_actuators_and_dampers_give_mujocos_forces(shipped, name):
    """The scene takes every actuator of the three models (motors with gears, position servos from ``general``
    affine actuators and from ``position``), named as in MuJoCo; at random states and controls up to 1.5 times the
    control ranges, the actuator forces and the passive forces equal MuJoCo's ``qfrc_actuator`` and ``qfrc_damper +
    qfrc_spring`` (the humanoid's hinges have springs) through the converters to 1e-9."""
    s, _ = shipped[name]
    mj, m = s.mj, s.mujoco_map
    assert s.actuator_ids == tuple(range(mj.nu))
    assert s.scene.actuators.names == tuple(mj.actuator(a).name for a in range(mj.nu))
    rng = np.random.default_rng(4)
    data = mujoco.MjData(mj)
    for _ in range(2):
        qpos, qvel = random_state(mj, rng)
        lo, hi = mj.actuator_ctrlrange.T
        ctrl = 0.5 * (lo + hi) + 1.5 * (hi - lo) * rng.uniform(-0.5, 0.5, mj.nu)
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, ctrl
        mujoco.mj_forward(mj, data)
        q = m.qpos_to_q(qpos)
        qd = m.qvel_to_qd(q, qvel)
        tau = actuator_forces(s.scene.actuators, jnp.asarray(q), jnp.asarray(qd), jnp.asarray(ctrl))
        assert_close(tau, m.qfrc_to_tau(q, data.qfrc_actuator), TOL)
        passive = passive_forces(s.scene.joints, jnp.asarray(q), jnp.asarray(qd), False)
        assert_close(passive, m.qfrc_to_tau(q, data.qfrc_damper + data.qfrc_spring), TOL)


def test_shipped_keyframes_round_trip_to_mujocos(shipped):
    """The humanoid's three keyframes and Barkour's one, by MuJoCo's names: ``q`` and ``qd`` converted back are
    MuJoCo's ``key_qpos`` (quaternions normalized) and ``key_qvel``, ``ctrl`` its ``key_ctrl``; the Shadow hand
    has none."""
    for name in SHIPPED:
        s, _ = shipped[name]
        mj = s.mj
        assert list(s.keyframes) == [mj.key(k).name for k in range(mj.nkey)]
        for k, key in enumerate(s.keyframes.values()):
            qpos = np.array(mj.key_qpos[k])
            mujoco.mj_normalizeQuat(mj, qpos)
            assert_close(s.mujoco_map.q_to_qpos(key.q), qpos, 1e-15)
            assert_close(s.mujoco_map.qd_to_qvel(key.q, key.qd), mj.key_qvel[k], 1e-15)
            np.testing.assert_array_equal(key.ctrl, mj.key_ctrl[k])
    assert len(shipped["humanoid"][0].keyframes) == 3 and not shipped["shadow_hand"][0].keyframes


def test_shipped_models_refuse_what_they_need_dropped_and_warn_of_it(shipped):
    """Without ``drop`` Barkour and the Shadow hand are refused, naming their category (Barkour's height field, the
    hand's collision meshes replaced by their bounding boxes); with it, one warning each names them, and
    ``left_out`` lists them with Barkour's sensors, cameras, lights and custom data (which change no motion, and
    are not warned of). The humanoid builds as it is, its hinge springs in the scene (MuJoCo's stiffness on the
    knee), and warns of nothing (its cameras and lights change no motion); its contact pairs are its four explicit
    foot-floor pairs (its body geoms have no bitmask)."""
    for name, path in SHIPPED.items():
        if DROP[name]:
            with pytest.raises(ModelError, match=f"drop {DROP[name]!r}"):
                load_mjcf_scene(path)
    (humanoid, hw), (barkour, bw), (hand, sw) = (shipped[n] for n in SHIPPED)
    assert len(hw) == 0 and len(bw) == len(sw) == 1
    assert {e.category for e in humanoid.left_out} == {"cameras", "lights"}
    knee = humanoid.mj.joint("knee_right")
    assert knee.stiffness[0] > 0
    assert humanoid.scene.joints.spring_stiffness[humanoid.scene.tree.v_index("knee_right")] == knee.stiffness[0]
    assert "'hfield_floor'" in bw[0] and "sensors" not in bw[0] and barkour.scene.pairs is None
    assert {e.category for e in barkour.left_out} == {"height fields", "hfield assets", "sensors", "cameras",
                                                      "lights", "custom data"}
    assert "meshes replaced by their bounding boxes" in sw[0]
    geo, P = humanoid.scene.geometry, humanoid.scene.pairs
    assert {frozenset((geo.names[a], geo.names[b])) for a, b in zip(P.a, P.b)} == {
        frozenset(("floor", f"foot{i}_{side}")) for i in (1, 2) for side in ("left", "right")}


# -- which pairs collide -------------------------------------------------------------------------------------------

FILTERS = """<mujoco model="filters">
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <geom name="post" type="capsule" fromto="2 0 0 2 0 1" size="0.05"/>
    <body name="static" pos="3 0 0"><geom name="static" type="sphere" size="0.1"/></body>
    <body name="a" pos="0 0 1">
      <freejoint/>
      <geom name="a" type="sphere" size="0.1"/>
      <geom name="a_visual" type="sphere" size="0.12" contype="0" conaffinity="0"/>
      <body name="b" pos="0 0 -0.3">
        <joint name="hb" axis="0 1 0"/>
        <geom name="b" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.04"/>
        <body name="b_welded" pos="0 0 -0.25"><geom name="b_welded" type="sphere" size="0.05"/></body>
        <body name="c" pos="0 0 -0.3">
          <joint name="hc" axis="0 1 0"/>
          <geom name="c" type="sphere" size="0.05" contype="2" conaffinity="2"/>
        </body>
      </body>
      <body name="d" pos="0.3 0 0">
        <joint name="hd" axis="1 0 0"/>
        <geom name="d" type="sphere" size="0.05" contype="2" conaffinity="1"/>
      </body>
    </body>
    <body name="e" pos="1 0 1"><freejoint/><geom name="e" type="sphere" size="0.1" contype="0" conaffinity="0"/></body>
  </worldbody>
  <contact>
    <pair geom1="e" geom2="floor"/>
    <exclude body1="b" body2="d"/>
  </contact>
</mujoco>"""


def mujoco_checked_pairs(mj):
    """The geom name pairs MuJoCo's collision pass checks: with every margin 10 m, each reports a contact."""
    far = mujoco.MjModel.from_xml_string(FILTERS)
    far.opt.disableflags = mj.opt.disableflags
    far.geom_margin[:] = 10.0
    far.pair_margin[:] = 10.0
    data = mujoco.MjData(far)
    mujoco.mj_forward(far, data)
    return {frozenset((far.geom(c.geom1).name, far.geom(c.geom2).name)) for c in data.contact[:data.ncon]}


@pytest.mark.parametrize("filterparent", [True, False])
def test_pairs_are_those_mujoco_checks(filterparent):
    """Bitmasks that meet or not, a visual geom kept by an explicit pair and one dropped, an exclusion (which spares
    a body welded to the excluded one), geoms on one weld body, world and static geoms, parent and child with
    ``filterparent`` on and off: the scene's pairs are the ones MuJoCo's collision pass checks."""
    mj = mujoco.MjModel.from_xml_string(FILTERS)
    if not filterparent:
        mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FILTERPARENT
    s, caught = quietly(mj)
    geo, P = s.scene.geometry, s.scene.pairs
    assert not caught and "a_visual" not in geo.names and "e" in geo.names
    assert {frozenset((geo.names[a], geo.names[b])) for a, b in zip(P.a, P.b)} == mujoco_checked_pairs(mj)


# -- what is left out, and bad input -------------------------------------------------------------------------------

LEFT_OUT = """<mujoco model="left_out">
  <compiler angle="radian"/>
  <asset>
    <mesh name="tetra" vertex="0 0 0  0.1 0 0  0 0.1 0  0 0 0.1"/>
    <hfield name="bumps" nrow="3" ncol="3" size="1 1 0.1 0.1"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1" margin="0.01"/>
    <geom name="ground" type="hfield" hfield="bumps" pos="5 0 0"/>
    <body name="base" pos="0 0 1">
      <freejoint/>
      <geom name="can" type="cylinder" size="0.1 0.2"/>
      <geom name="egg" type="ellipsoid" size="0.05 0.08 0.1" pos="0.3 0 0" condim="6"/>
      <geom name="rock" type="mesh" mesh="tetra" pos="-0.3 0 0"/>
      <site name="tip"/>
      <body name="arm" pos="0 0 -0.3">
        <joint name="elbow" axis="0 1 0" ref="0.3"/>
        <joint name="wrist" type="ball"/>
        <geom name="arm" type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
        <body name="hand" pos="0 0 -0.3">
          <joint name="finger" axis="1 0 0"/>
          <geom name="hand" type="sphere" size="0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
  <contact><pair name="slippery" geom1="floor" geom2="arm" friction="0.3 0.3 0.005 0.0001 0.0001"/></contact>
  <tendon><fixed name="cable" actuatorfrcrange="-1 1"><joint joint="elbow" coef="1"/></fixed></tendon>
  <equality>
    <joint name="lock" joint1="finger"/>
    <connect name="later" body1="hand" body2="base" anchor="0 0 0" active="false"/>
  </equality>
  <actuator>
    <velocity name="spin" joint="finger" kv="2"/>
    <position name="servo_ref" joint="elbow" kp="10"/>
    <motor name="ball_motor" joint="wrist" gear="1 0 0 0 0 0"/>
    <general name="filtered" joint="finger" dyntype="filter" dynprm="0.1" actearly="true"/>
    <general name="affine" joint="finger" biastype="affine" gainprm="3" biasprm="1 -3 0"/>
    <motor name="lopsided" joint="finger" forcerange="-1 2"/>
    <motor name="site_motor" site="tip" gear="0 0 1 0 0 0"/>
    <damper name="damped" joint="finger" kv="1" ctrlrange="0 1"/>
  </actuator>
</mujoco>"""


REFUSED = ("tendons", "cylinders", "ellipsoids", "meshes", "height fields", "condim", "margins", "pair friction",
           "actuators", "equalities")  # the categories of LEFT_OUT, in the order the refusal names them


def test_everything_left_out_is_refused_by_category_until_dropped():
    """Without ``drop``, one `ModelError` names the source, each geom replaced or left out (cylinder, ellipsoid,
    mesh, height field, torsional friction, margin), the explicit pair whose friction the scene cannot give, each
    actuator left out with why (a position servo on a joint with a reference position, a ball joint's motor,
    activation dynamics, an affine bias that is no servo, an asymmetric force range, a site transmission, an affine
    gain), each equality left out (one that fixes a joint, an inactive one) and the tendon with an actuator force
    range, each with the category that drops it; dropping all but one category still refuses that one's elements,
    and only those. With ``drop="all"`` the scene builds: one warning names each, ``left_out`` lists them by
    category, and the one servo that maps stays, by its name. The margin is refused under jaxmb's softness rule
    (``impedance=None``); MuJoCo's soft constraints, the default, build it."""
    names = ("can", "egg", "rock", "'ground'", "floor", "slippery", "servo_ref", "ball_motor", "filtered", "affine",
             "lopsided", "site_motor", "damped", "lock", "later", "cable")
    with pytest.raises(ModelError) as refused:
        load_mjcf_scene(LEFT_OUT, impedance=None)
    message = str(refused.value)
    assert message.startswith("<mjcf string>: the simulator scene cannot build")
    for name in names:
        assert name in message, name
    for category in REFUSED:
        assert f"drop {category!r}" in message, category
    assert f"drop={REFUSED!r}" in message  # the option that builds it
    with pytest.raises(ModelError, match=r"tendons 'cable' \(actuatorfrcrange\) \(drop 'tendons'\)\. Pass") as one:
        load_mjcf_scene(LEFT_OUT, drop=REFUSED[1:], impedance=None)
    assert "'can'" not in str(one.value)
    s, caught = quietly(LEFT_OUT, drop="all", impedance=None)
    assert len(caught) == 1 and caught[0].startswith("<mjcf string>: dropped from the simulator scene")
    for name in names:
        assert name in caught[0], name
    assert "site transmission" in caught[0] and "activation dynamics that act early" in caught[0]
    assert "inactive at the start" in caught[0] and "asymmetric force range" in caught[0]
    assert s.scene.actuators.names == ("spin",) and s.actuator_ids == (0,)
    assert {e.category for e in s.left_out} - INERT == set(REFUSED)
    assert all(e.what in caught[0] for e in s.left_out if e.category not in INERT)
    assert s.scene.model is s.scene.tree  # no loop constraint maps
    assert quietly(LEFT_OUT, drop=REFUSED, impedance=None)[0].left_out == s.left_out
    with pytest.raises(ModelError) as soft:  # MuJoCo's soft constraints (the default) take the margin
        load_mjcf_scene(LEFT_OUT)
    assert "'floor'" not in str(soft.value) and "drop 'margins'" not in str(soft.value)


def test_drop_names_only_known_categories():
    """A ``drop`` that names no category is a `ModelError` that lists them."""
    with pytest.raises(ModelError, match=r"<mjcf string>: drop names no category \['tendon'\].*'tendons'"):
        load_mjcf_scene(LEFT_OUT, drop=("tendon",))


def test_bad_input_names_the_source_and_the_geom_or_actuator():
    """A servo of negative gain names the source and the actuator; a sphere of negative radius (an edited compiled
    model) names the geom."""
    bad_servo = LEFT_OUT.replace('kv="2"/>', 'kv="2"/>\n    <position name="backwards" joint="finger" kp="-5"/>')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ModelError, match=r"<mjcf string>: actuator 'backwards' .*non-negative"):
            load_mjcf_scene(bad_servo, drop="all")
        mj = mujoco.MjModel.from_xml_string(LEFT_OUT)
        mj.geom_size[mj.geom("hand").id, 0] = -0.03
        with pytest.raises(ModelError, match=r"<MjModel 'left_out'>: geom 'hand'.*radius"):
            load_mjcf_scene(mj, drop="all")


# -- without contact: MuJoCo's RK4 steps --------------------------------------------------------------------------

SERVOS = """<mujoco model="servos">
  <compiler angle="radian"/>
  <option timestep="0.002" integrator="RK4"><flag contact="disable"/></option>
  <default><joint damping="0.3" armature="0.01"/></default>
  <worldbody>
    <body name="base" pos="0 0 1">
      <joint name="slide" type="slide" axis="1 0 0.2" damping="2"/>
      <geom type="box" size=".1 .1 .1" mass="2"/>
      <body name="upper" pos="0 0 -.1" euler="0.2 0 0.1">
        <joint name="shoulder" axis="0 1 0" pos="0 0 0.02" range="-2 2"/>
        <joint name="twist" axis="1 0 0.3"/>
        <geom type="capsule" fromto="0 0 0 0.05 0 -.4" size=".04"/>
        <body name="lower" pos="0.05 0 -.4">
          <joint name="elbow" axis="0.1 1 0" ref="0.2" damping="0.05"/>
          <geom type="capsule" fromto="0 0 0 0 0.02 -.3" size=".03"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="push" joint="slide" gear="3" ctrlrange="-2 2"/>
    <position name="servo" joint="shoulder" kp="40" kv="2" gear="1.5" forcerange="-30 30"/>
    <velocity name="spin" joint="twist" kv="5" gear="-2"/>
    <motor name="bend" joint="elbow" gear="2" forcerange="-1 1"/>
  </actuator>
  <keyframe><key name="moving" qpos="0.1 0.3 -0.2 0.5" qvel="0.5 -1 2 0.3" ctrl="2.5 0.4 0.8 -0.7"/></keyframe>
</mujoco>"""


def from_keyframe(s, name, steps, fields=("qpos", "qvel")):
    """MuJoCo's ``mj_step`` and the scene's rollout, ``steps`` of each from keyframe ``name`` under its controls:
    ``(recorded, states)``, ``recorded`` {field: (steps, ...)} of MuJoCo's data after each step, ``states`` the
    scene's."""
    key = s.keyframes[name]
    data = mujoco.MjData(s.mj)
    mujoco.mj_resetDataKeyframe(s.mj, data, list(s.keyframes).index(name))
    recorded = {f: [] for f in fields}
    for _ in range(steps):
        mujoco.mj_step(s.mj, data)
        for f in fields:
            recorded[f].append(getattr(data, f).copy())
    run = fast_jit(lambda state: sim.rollout(s.scene, state, s.dt, ctrls=jnp.tile(key.ctrl, (steps, 1)))[1])
    return {f: np.asarray(x) for f, x in recorded.items()}, run(sim.init_state(s.scene, key.q, key.qd, key.act))


def test_contact_free_rk4_steps_match_mujoco_to_1e8():
    """A slide and three hinges (two on one body, one with a reference position) under a geared motor with a
    control range (its control beyond it), a geared position servo with a force range, a velocity servo of negative
    gear and a motor held at its force range, with joint damping and armature: from the keyframe, 200 RK4 steps
    of the scene read from the file equal MuJoCo's to 1e-8 in ``qpos`` and ``qvel``."""
    s, caught = quietly(SERVOS)
    assert not caught and s.scene.options.integrator == "rk4" and s.scene.pairs is None
    mj, states = from_keyframe(s, "moving", 200)
    q = np.asarray(states.q)
    assert np.abs(mj["qpos"] - s.mujoco_map.q_to_qpos(s.keyframes["moving"].q)).max() > 0.5  # the chain moves
    assert_close(s.mujoco_map.q_to_qpos(q), mj["qpos"], 1e-8)
    assert_close(s.mujoco_map.qd_to_qvel(q, np.asarray(states.qd)), mj["qvel"], 1e-8)


LAGGED = """<mujoco model="lagged">
  <option timestep="0.002" integrator="{integrator}"/>
  <worldbody>
    <body name="a">
      <joint name="ja" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02" mass="0.4"/>
      <body name="b" pos="0 0 -0.3">
        <joint name="jb" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.02" mass="0.3"/>
        <body name="c" pos="0 0 -0.25">
          <joint name="jc" type="slide" axis="0 0 1"/><geom type="sphere" size="0.03" mass="0.2"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <intvelocity name="iv" joint="ja" kp="30" kv="1" actrange="-0.5 0.5" ctrlrange="-2 2"/>
    <position name="lagged" joint="jb" kp="20" kv="0.5" timeconst="0.05"/>
    <general name="filtered" joint="jc" dyntype="filter" dynprm="0.03" gainprm="5"/>
  </actuator>
  <keyframe><key name="k" qpos="0.1 -0.2 0.01" act="0.05 -0.1 0.2" ctrl="1.5 0.4 -0.3"/></keyframe>
</mujoco>"""


@pytest.mark.parametrize("integrator", ["Euler", "implicitfast"])
def test_activation_dynamics_follow_mujocos_steps(integrator):
    """An integrated-velocity servo (its target clipped to its activation range within the run), a position servo
    with a time constant (the exact first-order lag) and a filtered motor (the Euler lag), from a keyframe with
    activations: 400 steps of the scene read from the file equal MuJoCo's in ``qpos`` and ``act`` to 1e-12, with
    the semi-implicit and the implicit-in-velocity step (the servos' kv = 1 and 0.5 taken implicitly)."""
    s, caught = quietly(LAGGED.format(integrator=integrator))
    assert not caught and s.scene.actuators.dyn == ("integrator", "filterexact", "filter")
    np.testing.assert_array_equal(s.keyframes["k"].act, [0.05, -0.1, 0.2])
    mj, states = from_keyframe(s, "k", 400, ("qpos", "act"))
    assert np.max(mj["act"][:, 0]) == 0.5  # the integrated target reaches its range
    assert_close(np.asarray(states.act), mj["act"], 1e-12)
    assert_close(s.mujoco_map.q_to_qpos(np.asarray(states.q)), mj["qpos"], 1e-12)


# -- with contact -------------------------------------------------------------------------------------------------

DROPS = """<mujoco model="drops">
  <option timestep="0.002" integrator="implicitfast"/>
  <default><geom solref="0.004 1" solimp="0.99 0.999 0.0001"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1" friction="0.8"/>
    <body name="ball" pos="0 0 0.2"><freejoint/><geom name="ball" type="sphere" size="0.05" mass="0.5"/></body>
    <body name="brick" pos="1 0 0.2" euler="0 0 30">
      <freejoint/><geom name="brick" type="box" size="0.1 0.06 0.04" mass="1.2"/>
    </body>
    <body name="rod" pos="2 0 0.2" euler="90 0 0">
      <freejoint/><geom name="rod" type="capsule" size="0.03 0.15" mass="0.7"/>
    </body>
  </worldbody>
</mujoco>"""


def test_dropped_bodies_rest_at_mujocos_height():
    """A sphere, a box and a capsule (lying) dropped on a plane, 1 s of implicit steps from the file's pose (the
    scene's default start): they come to rest on the surface (heights 0.05, 0.04, 0.03 to 1e-6), and their poses
    equal MuJoCo's to 1e-5, MuJoCo's stiff soft contact's sinking (module docstring). The scene steps with
    ``solver="pgs"``: its hard contact rests within 1e-6 of the surface, where the Newton solver's rows are as soft
    as its regularization (the next test)."""
    s, _ = quietly(DROPS, solver="pgs")
    assert s.scene.options.integrator == "implicitfast" and s.scene.options.iterations == s.mj.opt.iterations
    steps = 500
    final = fast_jit(lambda state: sim.rollout(s.scene, state, s.dt, steps=steps)[0])(s.init_state())
    data = mujoco.MjData(s.mj)
    for _ in range(steps):
        mujoco.mj_step(s.mj, data)
    qpos = s.mujoco_map.q_to_qpos(np.asarray(final.q))
    heights = [s.mj.jnt_qposadr[s.mj.body(b).jntadr[0]] + 2 for b in ("ball", "brick", "rod")]
    assert_close(qpos[heights], [0.05, 0.04, 0.03], 1e-6)
    assert np.abs(np.asarray(final.qd)).max() < 1e-5
    assert_close(qpos, data.qpos, 1e-5)


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_newton_solver_takes_the_files_friction_cone(cone):
    """By default (the Newton solver) the scene takes the file's ``cone``, a keyword's overrides it, and the bodies
    dropped on the plane come to rest on it (heights 0.05, 0.04, 0.03 to 1e-3: the Newton rows are softer) with the
    weights carried to 1e-6; ``solver="pgs"`` solves Coulomb's elliptic cone whatever the file says."""
    source = DROPS.replace('integrator="implicitfast"', f'integrator="implicitfast" cone="{cone}"')
    s, _ = quietly(source)
    assert s.scene.options.solver == "newton"
    assert s.scene.options.cone == cone and s.scene.rows == (3 if cone == "elliptic" else 4) * s.scene.nc
    other = "pyramidal" if cone == "elliptic" else "elliptic"
    assert quietly(source, cone=other)[0].scene.options.cone == other
    assert quietly(source, solver="pgs")[0].scene.options.cone == "elliptic"
    final = fast_jit(lambda state: sim.rollout(s.scene, state, s.dt, steps=500)[0])(s.init_state())
    qpos = s.mujoco_map.q_to_qpos(np.asarray(final.q))
    heights = [s.mj.jnt_qposadr[s.mj.body(b).jntadr[0]] + 2 for b in ("ball", "brick", "rod")]
    assert_close(qpos[heights], [0.05, 0.04, 0.03], 1e-3)
    weight = sum(float(s.mj.body(b).mass[0]) for b in ("ball", "brick", "rod")) * 9.81
    assert abs(float(jnp.sum(final.contact.force[:, 0])) / weight - 1) < 1e-6


def test_barkour_batch_from_keyframe_stands_or_falls_without_diverging():
    """Barkour with a plane in place of its height field (added to the MJCF spec), as a batch of two worlds from
    its keyframe over 2 s: with the keyframe's servo targets it lands and stands (chassis between 0.15 and 0.21 m),
    its chassis at the end within 1e-3 of MuJoCo's from the same keyframe, settling as slowly as MuJoCo's (its
    largest joint velocity within 1e-2 of MuJoCo's); with zero controls the servos straighten the legs, it folds and
    falls (chassis below 0.05 m)."""
    spec = mujoco.MjSpec.from_file(str(SHIPPED["barkour"]))
    field = spec.geom("hfield_floor")
    field.contype = field.conaffinity = 0
    spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], contype=1,
                            conaffinity=1)
    s, _ = quietly(spec)
    key, steps = s.keyframes["standing"], 1000
    state = sim.init_state(s.scene, key.q, key.qd)
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), state)
    ctrls = jnp.stack([jnp.tile(key.ctrl, (steps, 1)), jnp.zeros((steps, s.scene.nu))])
    run = fast_jit(jax.vmap(lambda state, ctrls: sim.rollout(s.scene, state, s.dt, ctrls=ctrls)[1]))
    states = run(batch, ctrls)
    z, qd = np.asarray(states.q[:, :, 2]), np.asarray(states.qd)
    assert not np.asarray(states.diverged).any() and np.isfinite(z).all()
    data = mujoco.MjData(s.mj)
    mujoco.mj_resetDataKeyframe(s.mj, data, 0)
    for _ in range(steps):
        mujoco.mj_step(s.mj, data)
    assert 0.15 < z[0, -250:].min() and z[0, -250:].max() < 0.21 and abs(z[0, -1] - data.qpos[2]) < 1e-3
    assert abs(np.abs(qd[0, -1]).max() - np.abs(data.qvel).max()) < 1e-2
    assert z[1, -1] < 0.05


# -- equality constraints ------------------------------------------------------------------------------------------

LINKAGES = """<mujoco model="linkages">
  <compiler angle="radian"/>
  <option timestep="0.001"><flag contact="disable"/></option>
  <default><equality solref="0.002 1" solimp="0.99 0.999 0.001"/></default>
  <worldbody>
    <body name="crank" pos="0 0 1">
      <joint name="crank" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
      <body name="coupler" pos="0.2 0 0">
        <joint name="coupler" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0.3" size="0.02"/>
      </body>
    </body>
    <body name="rocker" pos="0.4 0 1">
      <joint name="rocker" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.1 0 0.3" size="0.02"/>
    </body>
    <body name="gear_a" pos="1 0 1">
      <joint name="a" axis="0 1 0"/><geom type="box" size=".1 .02 .02" pos=".1 0 0"/>
    </body>
    <body name="gear_b" pos="1.5 0 1">
      <joint name="b" axis="0 1 0"/><geom type="box" size=".1 .02 .02" pos=".1 0 0"/>
    </body>
  </worldbody>
  <equality>
    <connect name="close" body1="coupler" body2="rocker" anchor="0.3 0 0.3"/>
    <joint name="mesh" joint1="b" joint2="a" polycoef="0.1 -2 0.3 0 0"/>
  </equality>
  <keyframe><key name="swing" qvel="1 -2 3 0.5 -0.4"/></keyframe>
</mujoco>"""

ARM = "".join(f'<body name="l{i}" pos="0.04 0.03 .15" euler="0.3 -0.2 0.5"><joint name="j{i}" axis="{axis}"/>'
              '<geom type="capsule" fromto="0 0 0 0 0 .15" size=".02"/>'
              for i, axis in enumerate(["0 0 1", "0 1 0", "1 0 0", "0 1 0.3", "1 0.2 0", "0 1 0", "0.3 0 1"]))
WELDS = f"""<mujoco model="welds">
  <compiler angle="radian"/>
  <option><flag contact="disable"/></option>
  <worldbody>
    <body name="arm" pos="3 0 0">{ARM}{"</body>" * 7}</body>
    <site name="float_anchor" pos="4 0 1.1"/>
    <body name="float" pos="4 0 1"><freejoint/><geom type="sphere" size=".1"/><site name="top" pos="0 0 .1"/></body>
  </worldbody>
  <equality>
    <weld name="tip" body1="l6"/>
    <connect name="hold" site1="top" site2="float_anchor"/>
  </equality>
</mujoco>"""


def residuals_match_mujoco(s, rng, trials=3):
    """At random configurations (the loops open), each loop constraint's residual equals MuJoCo's ``efc_pos`` of its
    equality: a joint coupling's exactly, a closure's position rows in norm (MuJoCo takes them in world axes) and
    its rotation by its angle ``t`` (MuJoCo's rows are a quaternion's vector part ``sin(t/2) n``, jaxmb's
    ``sin(t) n``)."""
    mj, lm = s.mj, s.scene.model
    data = mujoco.MjData(mj)
    for _ in range(trials):
        data.qpos[:] = random_state(mj, rng)[0]
        mujoco.mj_forward(mj, data)
        residual = np.asarray(loops.constraint_residual(lm, jnp.asarray(s.mujoco_map.qpos_to_q(data.qpos))))
        row = 0
        for e, c in zip(s.equality_ids, lm.constraints):
            mine, theirs = residual[row:row + c.size], data.efc_pos[(data.efc_type == 0) & (data.efc_id == e)]
            row += c.size
            if c.kind != "closure":
                assert_close(mine, theirs, TOL)
                continue
            assert_close(np.linalg.norm(mine[:min(3, c.size)]), np.linalg.norm(theirs[:3]), TOL)
            if c.size == 6:
                angle = 2 * np.arcsin(np.linalg.norm(theirs[3:]))
                assert_close(np.linalg.norm(mine[3:]), np.sin(angle), TOL)
            assert np.linalg.norm(theirs) > 1e-3  # the loops are open: the check is not of zeros


def test_welded_arm_maps_and_a_loop_through_a_free_joint_is_left_out():
    """A seven-hinge arm welded to the world at its tip becomes one loop of six rows whose residual is MuJoCo's;
    a ``connect`` of two sites that closes a loop through a free joint is refused, and with ``drop="equalities"``
    left out, with why."""
    with pytest.raises(ModelError, match=r"'hold' \(.*free joint.*\(drop 'equalities'\)"):
        load_mjcf_scene(WELDS, equalities="embedded")
    s, caught = quietly(WELDS, drop="equalities", equalities="embedded")
    assert s.equality_ids == (0,) and [c.kind for c in s.scene.model.constraints] == ["closure"]
    assert s.scene.model.ny == 1 + 6
    assert len(caught) == 1 and "'hold'" in caught[0] and "free joint" in caught[0]
    residuals_match_mujoco(s, np.random.default_rng(5))


@pytest.fixture(scope="module")
def linkages():
    return quietly(LINKAGES, equalities="embedded")[0]


def test_connect_and_joint_equalities_map_to_loop_constraints(linkages):
    """The four-bar's ``connect`` is a planar closure (two rows: the loop is planar) and the polynomial gear an
    explicit map; their residuals are MuJoCo's at random configurations; a keyframe's ``qd`` holds the independent
    velocities."""
    lm = linkages.scene.model
    assert linkages.equality_ids == (0, 1) and [c.kind for c in lm.constraints] == ["closure", "explicit"]
    assert [c.size for c in lm.constraints] == [2, 1] and lm.ny == 2
    residuals_match_mujoco(linkages, np.random.default_rng(6))
    key = linkages.keyframes["swing"]  # the velocities of the independent coordinates
    qd = linkages.mujoco_map.qvel_to_qd(key.q, linkages.mj.key_qvel[0])
    np.testing.assert_array_equal(key.qd, qd[np.asarray(lm.y_v_index)])


def test_closed_loop_scene_follows_mujocos_stiff_equalities(linkages):
    """From the file's pose projected onto the loops (MuJoCo started there too), 300 Euler steps of the four-bar
    and the gears under gravity follow MuJoCo's to 1e-3 rad (its soft constraints hold to 1e-5; the joints travel
    up to a radian), and the loops stay closed to 1e-9."""
    s = linkages
    state = sim.init_state(s.scene, s.mujoco_map.qpos_to_q(s.mj.qpos0))
    steps = 300
    data = mujoco.MjData(s.mj)
    data.qpos[:] = qpos0 = s.mujoco_map.q_to_qpos(np.asarray(state.q))
    qpos = []
    for _ in range(steps):
        mujoco.mj_step(s.mj, data)
        qpos.append(data.qpos.copy())
    states = fast_jit(lambda state: sim.rollout(s.scene, state, s.dt, steps=steps)[1])(state)
    assert not np.asarray(states.diverged).any()
    assert np.abs(np.asarray(qpos) - qpos0).max() > 0.5
    assert_close(s.mujoco_map.q_to_qpos(np.asarray(states.q)), np.asarray(qpos), 1e-3)
    closure = jax.vmap(lambda q: loops.constraint_residual(s.scene.model, q))(states.q)
    assert np.abs(np.asarray(closure)).max() < 1e-9


def test_closed_loop_scene_starts_on_its_loops(linkages):
    """The scene's ``q0`` is the file's ``qpos0`` projected onto the loops (the gear's polynomial has a constant
    term, so ``qpos0`` is off its loop by 0.1): its residual is below 1e-9, its independent coordinates are
    ``qpos0``'s, and the state at rest starts there; the scene steps with ``solver="pgs"`` and says why."""
    s = linkages
    q0 = np.asarray(s.scene.q0)
    qpos0 = s.mujoco_map.qpos_to_q(s.mj.qpos0)
    assert np.abs(np.asarray(loops.constraint_residual(s.scene.model, jnp.asarray(qpos0)))).max() > 0.05
    assert np.abs(np.asarray(loops.constraint_residual(s.scene.model, s.scene.q0))).max() < 1e-9
    y = np.asarray(s.scene.model.y_q_index)
    np.testing.assert_array_equal(q0[y], qpos0[y])
    assert_close(s.init_state().q, q0, 1e-12)
    assert s.scene.options.solver == "newton" and "loops embedded exactly" in s.solver


# -- initial states, keyframes and the file's options --------------------------------------------------------------

BOX = """<mujoco model="box">
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <body name="box" pos="0.3 -0.2 0.25" euler="0 0 20"><freejoint/><geom type="box" size="0.1 0.08 0.05"/></body>
  </worldbody>
</mujoco>"""


@pytest.fixture(scope="module")
def box_rest():
    """The box's scene, its state at rest, and its state after 1 s of steps."""
    s, caught = quietly(BOX)
    assert not caught
    state = sim.init_state(s.scene)
    return s, state, fast_jit(lambda state: sim.rollout(s.scene, state, s.dt, steps=500)[0])(state)


def test_free_box_starts_at_qpos0_and_comes_to_rest_on_the_floor(box_rest):
    """A box drawn 0.2 m above the floor under MuJoCo's default options (Newton's problem on a pyramid, MuJoCo's
    soft constraints): the state at rest is at the file's pose (``qpos0``, to 1e-15), and after 1 s of steps the box
    rests on the floor where MuJoCo's does (to 1e-8: its soft contact sinks about 0.1 mm), where it was drawn in x
    and y to 1e-9, not moving along them to 1e-9."""
    s, state, final = box_rest
    assert_close(s.mujoco_map.q_to_qpos(state.q), s.mj.qpos0, 1e-15)
    qpos = s.mujoco_map.q_to_qpos(np.asarray(final.q))
    data = mujoco.MjData(s.mj)
    for _ in range(500):
        mujoco.mj_step(s.mj, data)
    assert_close(qpos, data.qpos, 1e-8)
    assert 0.05 - qpos[2] > 5e-5
    assert_close(qpos[:2], s.mj.qpos0[:2], 1e-9)
    assert np.abs(np.asarray(final.qd)[3:]).max() < 1e-9 and not int(final.diverged)  # qd = [w; v]


def test_box_resting_on_the_pyramid_keeps_its_heading(box_rest):
    """The resting box of the previous test keeps the heading it was drawn with (to 1e-6) and does not turn (to
    1e-6 rad/s), as MuJoCo's does (jaxmb's own softness rule on the pyramid turned it about the normal)."""
    s, _, final = box_rest
    assert_close(s.mujoco_map.q_to_qpos(np.asarray(final.q))[3:], s.mj.qpos0[3:], 1e-6)
    assert np.abs(np.asarray(final.qd)[:3]).max() < 1e-6


def test_keyframe_reset_is_mujocos():
    """`MjcfScene.init_state` and `init_ctrl` of a keyframe by name (with positions, velocities, activations,
    controls and a time) are MuJoCo's ``mj_resetDataKeyframe``: ``qpos``, ``qvel``, ``act``, ``ctrl`` and ``time``
    to 1e-15; without a keyframe, ``mj_resetData``'s; a name that is no keyframe is a KeyError naming those there
    are."""
    source = LAGGED.format(integrator="Euler").replace('<key name="k"', '<key name="k" time="0.7" qvel="0.3 -0.5 0.1"')
    s, _ = quietly(source)
    data = mujoco.MjData(s.mj)
    for key in ("k", None):
        if key is None:
            mujoco.mj_resetData(s.mj, data)
        else:
            mujoco.mj_resetDataKeyframe(s.mj, data, 0)
        state = s.init_state(key)
        assert_close(s.mujoco_map.q_to_qpos(state.q), data.qpos, 1e-15)
        assert_close(s.mujoco_map.qd_to_qvel(state.q, state.qd), data.qvel, 1e-15)
        assert_close(state.act, data.act, 1e-15)
        assert_close(s.init_ctrl(key), data.ctrl, 1e-15)
        assert float(state.t) == data.time
    assert data.time == 0 and abs(s.init_state("k").t - 0.7) == 0 and np.abs(s.init_ctrl("k")).max() > 0
    with pytest.raises(KeyError, match=r"no keyframe 'standing'.*\['k'\]"):
        s.init_state("standing")


OPTIONS = """<mujoco model="options">
  <option {option}/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <body pos="0 0 0.2"><freejoint/><geom type="sphere" size="0.05"/></body>
  </worldbody>
</mujoco>"""


@pytest.mark.parametrize("option, cone, tolerance, iterations", [
    ("", "pyramidal", 1e-8, 100),  # MuJoCo's defaults: Newton, a pyramid
    ('solver="PGS" cone="elliptic" tolerance="1e-6" iterations="7"', "elliptic", 1e-6, 7),
    ('solver="CG" tolerance="0" iterations="3"', "pyramidal", 0.0, 3),
    ('solver="Newton" cone="elliptic" tolerance="1e-12"', "elliptic", 1e-12, 100)])
def test_files_solver_tolerance_and_cone_map(option, cone, tolerance, iterations):
    """Whichever of MuJoCo's solvers the file names, the tree's scene solves MuJoCo's convex problem with
    ``solver="newton"`` on the file's cone, with its tolerance and iterations, and says so; explicit keywords
    override each."""
    s, _ = quietly(OPTIONS.format(option=option))
    o = s.scene.options
    assert (o.solver, o.cone, o.tolerance, o.iterations) == ("newton", cone, tolerance, iterations)
    assert s.solver.startswith("'newton'") and cone in s.solver
    s, _ = quietly(OPTIONS.format(option=option), solver="pgs", tolerance=1e-9, iterations=2)
    o = s.scene.options
    assert (o.solver, o.cone, o.tolerance, o.iterations) == ("pgs", "elliptic", 1e-9, 2) and "passed" in s.solver


PARTS = {"spatial tendons": (('<worldbody><site name="s0"/><geom name="peg" type="sphere" size="0.02" '
                             'pos="0.1 0 -0.1" contype="0" conaffinity="0"/></worldbody><tendon><spatial '
                             'name="cable"><site site="s0"/><geom geom="peg"/><site site="s1"/></spatial></tendon>'),
                            "'cable'"),
         "integrator": ('<option density="1.2" integrator="implicitfast"/>', "derivative of the fluid forces")}


@pytest.mark.parametrize("category", PARTS)
def test_a_spatial_tendon_or_implicit_fluid_forces_are_refused_unless_dropped(category):
    """A file with a spatial tendon that wraps a geom (with fluid forces under implicitfast, which differentiates
    them) is a `ModelError` naming the source, the tendon (the fluid's derivative) and the option that drops it;
    with that option the scene builds, warns once and lists it in ``left_out``."""
    part, element = PARTS[category]
    source = ('<mujoco model="part">' + part + '<worldbody><body><joint name="a" axis="0 1 0"/>'
              '<site name="s1" pos="0 0 -0.3"/><geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02"/></body>'
              '</worldbody></mujoco>')
    with pytest.raises(ModelError, match=rf"^<mjcf string>: .*{element}.*\(drop '{category}'\)\. Pass "
                                         rf"load_mjcf_scene\(\.\.\., drop=\('{category}',\)\)"):
        load_mjcf_scene(source)
    s, caught = quietly(source, drop=category)
    assert [e.category for e in s.left_out] == [category] and element in s.left_out[0].what
    assert len(caught) == 1 and element in caught[0]
    assert s.scene.model.nv == 1
