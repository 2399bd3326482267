"""The robots `jaxmb.robots` knows by name: one `Robot` record per file of an installed package.

The catalog is data only: building it reads no file, so importing jaxmb stays cheap. It lists jaxmb's own
quadruped, the URDF robots of example-robot-data, the MJCF robots of mujoco-mjx and the domains of dm_control's
suite. The names of example-robot-data's robots are those of its own Python loaders
(``example_robot_data.robots_loader.ROBOTS``), with their base (free for legged robots, humanoids, flying and mobile
robots; fixed for arms and hands) and the ``inertia`` option each file needs (docs/inertia.md). MuJoCo Menagerie's
robots are found on disk, not listed here (`menagerie_robots`).
"""

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple, Optional

JAXMB = "jaxmb"
EXAMPLE_ROBOT_DATA = "example-robot-data"
MJX = "mujoco-mjx"
DM_CONTROL = "dm_control"
MENAGERIE = "menagerie"


class Robot(NamedTuple):
    """One robot of the zoo.

    name           the name `jaxmb.robots.load` takes
    source         the package (or collection) that ships the file: ``"jaxmb"`` (`jaxmb.assets`),
                   ``"example-robot-data"``, ``"mujoco-mjx"``, ``"dm_control"`` or ``"menagerie"``
    file           the file, relative to the source's directory (`jaxmb.robots.sources.source_dir`)
    floating_base  the loader's default ``floating_base``: True (a free base), False (fixed to the world), or None
                   for an MJCF model (its joints as the file has them)
    inertia        the ``inertia`` option of `jaxmb.load_urdf` the file needs (``"strict"``, ``"warn"`` or
                   ``"repair"``); None for an MJCF model
    note           what the robot is, and why it needs a permissive ``inertia`` option
    """

    name: str
    source: str
    file: str
    floating_base: Optional[bool]
    inertia: Optional[str]
    note: str = ""

    @property
    def is_urdf(self) -> bool:
        """Whether the file is a URDF (loaded by `jaxmb.load_urdf`; otherwise MJCF, by `jaxmb.io.mjcf.load_mjcf`)."""
        return self.file.endswith(".urdf")


FREE, FIXED = True, False
TRIANGLE = "links whose principal moments break the triangle inequality"
DUMMY = "a 1e-6 kg dummy link breaks the triangle inequality"


def _erd(name, file, floating_base, inertia="strict", note=""):
    return Robot(name, EXAMPLE_ROBOT_DATA, file, floating_base, inertia, note)


EXAMPLE_ROBOT_DATA_ROBOTS = (
    _erd("a1", "a1_description/urdf/a1.urdf", FREE, note="Unitree A1 quadruped"),
    _erd("alex_nub_hands", "alex_description/urdf/alex_nub_hands.urdf", FIXED, note="Alex upper body"),
    _erd("alex_psyonic_hands", "alex_description/urdf/alex_psyonic_hands.urdf", FIXED, "warn",
         f"Alex upper body with Psyonic hands; {TRIANGLE}, and a mimic of a joint the file lacks (loaded unenforced)"),
    _erd("alex_sake_hands", "alex_description/urdf/alex_sake_hands.urdf", FIXED, note="Alex upper body, Sake hands"),
    _erd("alexander", "alexander_description/urdf/alexander_v1.lowerBodyOnly.urdf", FREE,
         note="Alexander humanoid, lower body"),
    _erd("allegro_left_hand", "allegro_hand_description/urdf/allegro_left_hand.urdf", FIXED, "warn",
         f"Allegro hand; {TRIANGLE}"),
    _erd("allegro_right_hand", "allegro_hand_description/urdf/allegro_right_hand.urdf", FIXED, "warn",
         f"Allegro hand; {TRIANGLE}"),
    _erd("anymal", "anymal_b_simple_description/robots/anymal.urdf", FREE, "warn", f"ANYmal B quadruped; {DUMMY}"),
    _erd("anymal_c", "anymal_c_simple_description/urdf/anymal.urdf", FREE, "warn", f"ANYmal C quadruped; {TRIANGLE}"),
    _erd("anymal_kinova", "anymal_b_simple_description/robots/anymal-kinova.urdf", FREE, "warn",
         f"ANYmal B with a Kinova arm; {DUMMY}"),
    _erd("asr_twodof", "asr_twodof_description/urdf/TwoDofs.urdf", FIXED, note="two-joint arm"),
    _erd("b1", "b1_description/urdf/b1.urdf", FREE, "warn", f"Unitree B1 quadruped; {DUMMY}"),
    _erd("b1_z1", "b1_description/urdf/b1-z1.urdf", FREE, "warn", f"Unitree B1 with a Z1 arm; {DUMMY}"),
    _erd("baxter", "baxter_description/urdf/baxter.urdf", FIXED, note="Baxter, two arms"),
    _erd("bolt", "bolt_description/robots/bolt.urdf", FREE, note="Bolt biped"),
    _erd("borinot", "borinot_description/urdf/borinot_flying_arm_2.urdf", FREE, note="aerial robot with a 2-joint arm"),
    _erd("centauro", "centauro_description/urdf/centauro.urdf", FREE, note="Centauro, four legs on wheels, two arms"),
    _erd("double_pendulum", "double_pendulum_description/urdf/double_pendulum.urdf", FIXED),
    _erd("double_pendulum_continuous", "double_pendulum_description/urdf/double_pendulum_continuous.urdf", FIXED,
         note="continuous joints"),
    _erd("double_pendulum_simple", "double_pendulum_description/urdf/double_pendulum_simple.urdf", FIXED),
    _erd("finger_edu", "finger_edu_description/robots/finger_edu.urdf", FIXED, note="TriFinger-edu finger"),
    _erd("g1", "g1_description/urdf/g1_29dof_rev_1_0.urdf", FREE, note="Unitree G1 humanoid, 29 joints"),
    _erd("g1_with_hands", "g1_description/urdf/g1_29dof_with_hand_rev_1_0.urdf", FREE,
         note="Unitree G1 humanoid with hands"),
    _erd("go1", "go1_description/urdf/go1.urdf", FREE, "warn", f"Unitree Go1 quadruped; {DUMMY}"),
    _erd("go2", "go2_description/urdf/go2.urdf", FREE, note="Unitree Go2 quadruped"),
    _erd("hector", "hector_description/robots/quadrotor_base.urdf", FREE,
         note="Hector quadrotor, one rigid body (nv = 0 on a fixed base)"),
    _erd("hextilt", "hextilt_description/urdf/hextilt_flying_arm_5.urdf", FREE,
         note="tilted hexarotor with a 5-joint arm"),
    _erd("human", "human_description/robots/human.urdf", FREE, note="human body model"),
    _erd("hyq", "hyq_description/robots/hyq_no_sensors.urdf", FREE, "warn", f"HyQ quadruped; {TRIANGLE}"),
    _erd("icub", "icub_description/robots/icub.urdf", FREE, note="iCub humanoid"),
    _erd("icub_reduced", "icub_description/robots/icub_reduced.urdf", FREE, note="iCub humanoid, fewer joints"),
    _erd("iris", "iris_description/robots/iris_simple.urdf", FREE, note="Iris quadrotor, one rigid body"),
    _erd("iris_rotors", "iris_description/robots/iris.urdf", FREE, note="Iris quadrotor with its four rotor joints"),
    _erd("kinova", "kinova_description/robots/kinova.urdf", FIXED, note="Kinova arm, continuous joints"),
    _erd("laikago", "laikago_description/urdf/laikago.urdf", FREE, note="Unitree Laikago quadruped"),
    _erd("panda", "panda_description/urdf/panda.urdf", FIXED, note="Franka Emika Panda arm with its gripper"),
    _erd("panda_collision", "panda_description/urdf/panda_collision.urdf", FIXED,
         note="Panda, collision-geometry variant"),
    _erd("pr2", "pr2_description/urdf/pr2.urdf", FREE, "warn",
         f"PR2 mobile manipulator (a free base, as example-robot-data loads it); {TRIANGLE}; mimic joints"),
    _erd("quadruped", "quadruped_description/urdf/quadruped.urdf", FREE, note="quadruped"),
    _erd("romeo", "romeo_description/urdf/romeo.urdf", FREE, "repair",
         "Romeo humanoid; 24 finger joints carry only massless links: armature"),
    _erd("romeo_laas_small", "romeo_description/urdf/romeo_laas_small.urdf", FREE, "repair",
         "Romeo, reduced; 3 links not positive semi-definite, 2 gripper joints carry only massless links"),
    _erd("romeo_small", "romeo_description/urdf/romeo_small.urdf", FREE, "warn", f"Romeo, reduced; {TRIANGLE}"),
    _erd("simple_humanoid", "simple_humanoid_description/urdf/simple_humanoid.urdf", FREE),
    _erd("simple_humanoid_classical", "simple_humanoid_description/urdf/simple_humanoid_classical.urdf", FREE),
    _erd("so100", "so_arm_description/urdf/so100.urdf", FIXED,
         note="SO-100 arm (fixed here; example-robot-data's loader gives it a free base)"),
    _erd("so101", "so_arm_description/urdf/so101.urdf", FIXED,
         note="SO-101 arm (fixed here; example-robot-data's loader gives it a free base)"),
    _erd("solo8", "solo_description/robots/solo.urdf", FREE, note="Solo quadruped, 8 joints"),
    _erd("solo12", "solo_description/robots/solo12.urdf", FREE, note="Solo quadruped, 12 joints"),
    _erd("talos", "talos_data/robots/talos_reduced.urdf", FREE, note="TALOS humanoid, reduced"),
    _erd("talos_arm", "talos_data/robots/talos_left_arm.urdf", FIXED, note="TALOS left arm"),
    _erd("talos_box", "talos_data/robots/talos_reduced_box.urdf", FREE, note="TALOS, reduced, box feet"),
    _erd("talos_full", "talos_data/robots/talos_full_v2.urdf", FREE, note="TALOS humanoid with hands and head"),
    _erd("talos_full_box", "talos_data/robots/talos_full_v2_box.urdf", FREE, note="TALOS full, box feet"),
    _erd("talos_reduced_corrected", "talos_data/robots/talos_reduced_corrected.urdf", FREE,
         note="TALOS, reduced, corrected file"),
    _erd("tiago", "tiago_description/robots/tiago.urdf", FIXED, "warn",
         "TIAGo mobile manipulator; two 1e-6 kg antennas not positive semi-definite, merged into the base"),
    _erd("tiago_dual", "tiago_description/robots/tiago_dual.urdf", FIXED, "warn",
         "TIAGo with two arms; two 1e-6 kg antennas not positive semi-definite, merged into the base"),
    _erd("tiago_no_hand", "tiago_description/robots/tiago_no_hand.urdf", FIXED, "warn",
         "TIAGo without a hand; two 1e-6 kg antennas not positive semi-definite, merged into the base"),
    _erd("tiago_pro", "tiago_pro_description/robots/tiago_pro.urdf", FIXED, note="TIAGo Pro"),
    _erd("ur3", "ur_description/urdf/ur3_robot.urdf", FIXED,
         note="UR3 arm (example-robot-data's loader gives this name the UR5)"),
    _erd("ur3_gripper", "ur_description/urdf/ur3_gripper.urdf", FIXED, note="UR3 with a gripper"),
    _erd("ur3_limited", "ur_description/urdf/ur3_joint_limited_robot.urdf", FIXED, note="UR3, limited joints"),
    _erd("ur5", "ur_description/urdf/ur5_robot.urdf", FIXED, note="UR5 arm"),
    _erd("ur5_gripper", "ur_description/urdf/ur5_gripper.urdf", FIXED, note="UR5 with a gripper"),
    _erd("ur5_limited", "ur_description/urdf/ur5_joint_limited_robot.urdf", FIXED, note="UR5, limited joints"),
    _erd("ur10", "ur_description/urdf/ur10_robot.urdf", FIXED, note="UR10 arm"),
    _erd("ur10_limited", "ur_description/urdf/ur10_joint_limited_robot.urdf", FIXED, note="UR10, limited joints"),
    _erd("xarm7", "xarm_description/urdf/xarm7.urdf", FIXED, note="xArm7"),
    _erd("z1", "z1_description/urdf/z1.urdf", FIXED, note="Unitree Z1 arm"),
)

JAXMB_ROBOTS = (
    Robot("jaxmb/quadruped", JAXMB, "quadruped.urdf", True, "strict",
          "jaxmb's own 12-joint quadruped (jaxmb.assets), always installed"),
)

MJX_ROBOTS = (
    Robot("barkour", MJX, "barkour_v0/assets/barkour_v0_mjx.xml", None, None,
          "Google Barkour v0 quadruped; a free joint in the file"),
    Robot("humanoid", MJX, "humanoid/humanoid.xml", None, None,
          "MuJoCo's humanoid, 21 hinges; a free joint in the file"),
    Robot("shadow_hand", MJX, "shadow_hand/right_hand.xml", None, None,
          "Shadow Dexterous Hand E3M5, right; fixed in the file"),
)

# The domains of dm_control's suite that are complete models (lqr.xml and swimmer.xml are templates its Python
# code completes).
DM_CONTROL_DOMAINS = ("acrobot", "ball_in_cup", "cartpole", "cheetah", "dog", "finger", "fish", "hopper", "humanoid",
                      "humanoid_CMU", "manipulator", "pendulum", "point_mass", "quadruped", "reacher", "stacker",
                      "walker")
DM_CONTROL_ROBOTS = tuple(Robot(f"dm_control/{d}", DM_CONTROL, f"{d}.xml", None, None, "dm_control suite domain")
                          for d in DM_CONTROL_DOMAINS)

CATALOG = {r.name: r for r in JAXMB_ROBOTS + EXAMPLE_ROBOT_DATA_ROBOTS + MJX_ROBOTS + DM_CONTROL_ROBOTS}

# Names the packages' own loaders give that are not robots of the zoo, and why.
LEFT_OUT = {
    "cassie": "example-robot-data's Cassie is an SDF file (jaxmb loads URDF and MJCF)",
    "talos_legs": "example-robot-data's loader cuts talos_legs out of talos in code; load 'talos'",
    "dm_control/lqr": "dm_control's lqr.xml is a template that its Python code completes",
    "dm_control/swimmer": "dm_control's swimmer.xml is a template that its Python code completes",
}


def menagerie_robots(root) -> tuple:
    """The robots of a MuJoCo Menagerie tree at ``root``: every MJCF model at the top of one of its directories
    (``<root>/<dir>/<model>.xml``, whose root element is ``<mujoco>``), scenes (``*scene*.xml``: a robot with a
    floor and lights) left out, named ``"menagerie/<dir>/<model>"``."""
    robots = []
    for d in sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.name.startswith(".")):
        for f in sorted(d.glob("*.xml")):
            if "scene" not in f.stem and _is_mjcf_model(f):
                robots.append(Robot(f"{MENAGERIE}/{d.name}/{f.stem}", MENAGERIE, f"{d.name}/{f.name}", None, None,
                                    "MuJoCo Menagerie"))
    return tuple(robots)


def _is_mjcf_model(path) -> bool:
    """Whether the first element of the XML file ``path`` is ``<mujoco>`` (an included fragment is
    ``<mujocoinclude>``); reads no further than that element's start."""
    try:
        for _, element in ET.iterparse(path, events=("start",)):
            return element.tag == "mujoco"
    except (ET.ParseError, OSError):
        return False
    return False
