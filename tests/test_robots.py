"""`jaxmb.robots`: robots by name from the files installed packages ship.

Every robot of example-robot-data loads with its default base and ``inertia`` option, with Pinocchio's nv and
joint names (Pinocchio loads the same file, with a free flyer where the base is free), and its ``inertia`` option is
the least permissive that loads it. MJX's robots load with MuJoCo's nv and joint names, and so does every MJCF file
of ``mujoco/mjx/test_data`` that MuJoCo compiles (those it refuses are listed, with MuJoCo's reason). dm_control's
suite loads where dm_control is installed, and is found from a fake package beside ``sys.path`` where it is not.
MuJoCo Menagerie is tried on a tiny fake tree. Unknown names, left-out names, missing packages and unknown options
give errors that name what to do. Loading only: nothing is compiled.
"""

import contextlib
import importlib.metadata
import subprocess
import sys
import warnings
from pathlib import Path

import pinocchio as pin
import pytest

import jaxmb
import jaxmb.robots as robots
from jaxmb.io.mjcf import load_mjcf, mujoco_names
from jaxmb.robots import sources
from jaxmb.robots.catalog import DM_CONTROL_ROBOTS, EXAMPLE_ROBOT_DATA_ROBOTS, MJX_ROBOTS
from pinocchio_bridge import robots_dir

mujoco = pytest.importorskip("mujoco")

DOCS = Path(__file__).parent.parent / "docs" / "robots.md"
MJX_DIR = robots.mjx_test_data_dir()
MJX_FILES = sorted(str(p.relative_to(MJX_DIR)) for p in MJX_DIR.rglob("*.xml"))

# The MJX test files MuJoCo's compiler refuses, with a fragment of its message.
MUJOCO_REFUSES = {
    "actuator/arm26.xml": "Lengthrange computation did not converge",
    "constraints.xml": "must be slide or hinge",
}

# The robots of example-robot-data's own loaders (example_robot_data.robots_loader.ROBOTS) that the zoo has, by
# the same names.
UPSTREAM_NAMES = (
    "a1", "alex_nub_hands", "alex_psyonic_hands", "alex_sake_hands", "alexander", "allegro_left_hand",
    "allegro_right_hand", "anymal", "anymal_c", "anymal_kinova", "asr_twodof", "b1", "b1_z1", "baxter", "bolt",
    "borinot", "centauro", "double_pendulum", "double_pendulum_continuous", "double_pendulum_simple", "finger_edu",
    "g1", "g1_with_hands", "go1", "go2", "hector", "hextilt", "human", "hyq", "icub", "icub_reduced", "iris",
    "kinova", "laikago", "panda", "panda_collision", "pr2", "quadruped", "romeo", "simple_humanoid",
    "simple_humanoid_classical", "so100", "so101", "solo8", "solo12", "talos", "talos_arm", "talos_box",
    "talos_full", "talos_full_box", "tiago", "tiago_dual", "tiago_no_hand", "tiago_pro", "ur3", "ur3_gripper",
    "ur3_limited", "ur5", "ur5_gripper", "ur5_limited", "ur10", "ur10_limited", "xarm7", "z1",
)

STRICTER = {"warn": "strict", "repair": "warn"}

ARM = """<mujoco model="arm">
  <worldbody>
    <body name="upper">
      <joint name="shoulder" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

BALL = """<mujoco model="ball">
  <worldbody>
    <body name="ball" pos="0 0 1">
      <freejoint name="ball_free"/>
      <geom type="sphere" size="0.1"/>
    </body>
  </worldbody>
</mujoco>
"""

SCENE = """<mujoco model="scene">
  <include file="arm.xml"/>
  <worldbody><geom type="plane" size="1 1 0.1"/></worldbody>
</mujoco>
"""

FRAGMENT = """<mujocoinclude><default/></mujocoinclude>
"""


def load_quietly(name, **options):
    """``jaxmb.robots.load`` with the loaders' warnings (inertia, mimic joints, what MJCF leaves out) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return robots.load(name, **options)


def assert_joints(model, names_expected, nv_expected, free=None):
    """``model`` has nv ``nv_expected`` and the joints ``names_expected`` (plus its free joint ``free``)."""
    assert model.nv == nv_expected
    assert sorted(model.joint_names) == sorted(list(names_expected) + ([free] if free else []))


# -- names ------------------------------------------------------------------------------------------------------

def test_importing_the_zoo_looks_at_no_robot_directory():
    """Importing jaxmb.robots stats, lists and opens nothing in the robots' directories (``os.stat`` recorded, and
    an audit hook on ``open``, ``os.listdir``, ``os.scandir``, in a fresh process); `available` afterwards does."""
    code = (
        "import os, sys\n"
        "seen = []\n"
        "def note(p):\n"
        "    if any(k in str(p) for k in ('example-robot-data', 'test_data', 'menagerie', 'dm_control')) \\\n"
        "            and '.dist-info' not in str(p):  # package metadata, which importlib.metadata's scans read\n"
        "        seen.append(str(p))\n"
        "stat = os.stat\n"
        "def recording_stat(p, *args, **kwargs):\n"
        "    note(p)\n"
        "    return stat(p, *args, **kwargs)\n"
        "os.stat = recording_stat\n"
        "sys.addaudithook(lambda event, args: event in ('open', 'os.listdir', 'os.scandir') and args and "
        "note(args[0]))\n"
        "import jaxmb.robots\n"
        "print(len(seen))\n"
        "jaxmb.robots.available()\n"
        "print(len(seen) > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "True"]


def test_names_are_unique_and_include_the_loaders_names():
    names = robots.names()
    assert len(names) == len(set(names))
    assert set(UPSTREAM_NAMES) <= set(names)
    assert {"panda", "go1", "humanoid", "barkour", "shadow_hand", "talos", "solo12", "anymal", "tiago",
            "romeo", "ur5", "a1"} <= set(names)


def test_available_robots_have_their_files():
    available = robots.available()
    assert set(available) <= set(robots.names())
    assert {r.name for r in EXAMPLE_ROBOT_DATA_ROBOTS + MJX_ROBOTS} <= set(available)
    for name in available:
        assert robots.path(name).is_file(), name


def test_jaxmb_quadruped_is_always_available():
    assert "jaxmb/quadruped" in robots.available()
    model = robots.load("jaxmb/quadruped")
    assert model.nv == 18 and "root" in model.joint_names


def test_finder_agrees_with_the_test_bridge():
    assert robots.example_robot_data_dir() == robots_dir()


def test_example_robot_data_is_found_under_a_ros_or_conda_prefix(monkeypatch, tmp_path):
    """Without the pip distribution, the directory is found under a prefix of ``CMAKE_PREFIX_PATH`` (searched
    before the ``sys.path`` entries)."""
    def no_distribution(name):
        raise importlib.metadata.PackageNotFoundError(name)

    fake = tmp_path / "robotpkg" / "share" / "example-robot-data" / "robots"
    fake.mkdir(parents=True)
    monkeypatch.setattr(importlib.metadata, "distribution", no_distribution)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path / "ros"))
    monkeypatch.setenv("CMAKE_PREFIX_PATH", str(tmp_path / "robotpkg"))
    assert tmp_path / "ros" / "share" / "example-robot-data" / "robots" in sources.example_robot_data_candidates()
    assert robots.example_robot_data_dir() == fake


# -- example-robot-data -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("robot", EXAMPLE_ROBOT_DATA_ROBOTS, ids=lambda r: r.name)
def test_example_robot_data_robot_loads_as_pinocchio_loads_it(robot):
    model = load_quietly(robot.name)
    file = str(robots.path(robot.name))
    pm = pin.buildModelFromUrdf(file, pin.JointModelFreeFlyer()) if robot.floating_base else \
        pin.buildModelFromUrdf(file)
    joints = [n for n in pm.names[1:] if not (robot.floating_base and n == "root_joint")]
    assert_joints(model, joints, pm.nv, free="root" if robot.floating_base else None)


@pytest.mark.parametrize("robot", [r for r in EXAMPLE_ROBOT_DATA_ROBOTS if r.inertia != "strict"],
                         ids=lambda r: r.name)
def test_inertia_option_is_the_least_permissive_that_loads(robot):
    with pytest.raises(jaxmb.ModelError, match=robot.inertia):
        load_quietly(robot.name, inertia=STRICTER[robot.inertia])


def test_legged_robots_and_humanoids_are_free_and_arms_fixed():
    free = {"a1", "anymal", "go1", "go2", "solo12", "hyq", "talos", "romeo", "g1", "icub", "human", "b1"}
    fixed = {"panda", "ur5", "z1", "kinova", "xarm7", "so100", "talos_arm", "allegro_right_hand", "baxter"}
    assert all(robots.info(n).floating_base for n in free)
    assert not any(robots.info(n).floating_base for n in fixed)


def test_options_replace_the_defaults():
    assert load_quietly("panda", floating_base=True).nv == 9 + 6
    assert load_quietly("go1", floating_base=False).nv == 12
    gravity = load_quietly("ur5", gravity=(0.0, 0.0, -1.62)).gravity
    assert float(gravity[2]) == -1.62
    assert load_quietly("humanoid", floating_base=False).nv == 27 - 6


# -- MJX ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("robot", MJX_ROBOTS, ids=lambda r: r.name)
def test_mjx_robot_loads_as_mujoco_compiles_it(robot):
    mj = mujoco.MjModel.from_xml_path(str(robots.path(robot.name)))
    model = load_quietly(robot.name)
    assert_joints(model, mujoco_names(mj).joints, mj.nv)


@pytest.fixture(scope="module")
def mjx_compiled(tmp_path_factory):
    """Each MJX test file compiled by MuJoCo, or MuJoCo's message where it refuses it (compiled in a temporary
    directory, where MuJoCo writes its MUJOCO_LOG.TXT)."""
    out = {}
    with contextlib.chdir(tmp_path_factory.mktemp("mujoco_log")):
        for file in MJX_FILES:
            try:
                out[file] = mujoco.MjModel.from_xml_path(str(MJX_DIR / file))
            except ValueError as e:
                out[file] = str(e)
    return out


def test_mujoco_refuses_only_the_listed_mjx_files(mjx_compiled):
    refused = {f: m for f, m in mjx_compiled.items() if isinstance(m, str)}
    assert sorted(refused) == sorted(MUJOCO_REFUSES)
    for file, fragment in MUJOCO_REFUSES.items():
        assert fragment in refused[file]
    assert len(MJX_FILES) - len(refused) >= 30


@pytest.mark.parametrize("file", MJX_FILES)
def test_every_mjx_file_mujoco_compiles_loads(mjx_compiled, file):
    mj = mjx_compiled[file]
    if isinstance(mj, str):
        pytest.skip(f"MuJoCo refuses it: {mj.splitlines()[0]}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_mjcf(mj)
    assert len(caught) <= 1 and all("not loaded" in str(w.message) for w in caught)
    assert model.nv == mj.nv and len(model.joint_names) == mj.njnt
    named = [mj.joint(j).name for j in range(mj.njnt) if mj.joint(j).name]
    assert set(named) <= set(model.joint_names)


# -- dm_control -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("robot", DM_CONTROL_ROBOTS, ids=lambda r: r.name)
def test_dm_control_domain_loads_where_installed(robot):
    if sources.package_dir("dm_control") is None:
        pytest.skip("dm_control is not installed")
    mj = mujoco.MjModel.from_xml_path(str(robots.path(robot.name)))
    assert_joints(load_quietly(robot.name), mujoco_names(mj).joints, mj.nv)


def test_dm_control_is_found_as_an_installed_package(monkeypatch, tmp_path):
    suite = tmp_path / "dm_control" / "suite"
    suite.mkdir(parents=True)
    (tmp_path / "dm_control" / "__init__.py").write_text("")
    (suite / "acrobot.xml").write_text(ARM)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert robots.dm_control_suite_dir() == suite
    assert robots.path("acrobot") == suite / "acrobot.xml"
    assert "dm_control/acrobot" in robots.available()
    assert load_quietly("dm_control/acrobot").joint_names == ("shoulder", "elbow")


# -- MuJoCo Menagerie ----------------------------------------------------------------------------------------------

@pytest.fixture
def menagerie(tmp_path, monkeypatch):
    """A tiny Menagerie: an arm with a scene and an included fragment, a free ball, and a hand in both; no other
    Menagerie (no variable, an empty robot_descriptions cache)."""
    root = tmp_path / "menagerie"
    for directory, files in {"acme_arm": {"arm.xml": ARM, "scene.xml": SCENE, "arm_defaults.xml": FRAGMENT,
                                          "hand.xml": ARM},
                             "acme_ball": {"ball.xml": BALL, "hand.xml": ARM}}.items():
        (root / directory).mkdir(parents=True)
        for name, text in files.items():
            (root / directory / name).write_text(text)
    monkeypatch.delenv(sources.MENAGERIE_VARIABLE, raising=False)
    monkeypatch.setenv("ROBOT_DESCRIPTIONS_CACHE", str(tmp_path / "cache"))
    return root


def test_menagerie_robots_are_its_models_without_scenes_or_fragments(menagerie):
    found = [n for n in robots.names(menagerie=menagerie) if n.startswith("menagerie/")]
    assert found == ["menagerie/acme_arm/arm", "menagerie/acme_arm/hand", "menagerie/acme_ball/ball",
                     "menagerie/acme_ball/hand"]
    assert not any(n.startswith("menagerie/") for n in robots.names())


def test_menagerie_robot_loads_from_a_given_path(menagerie):
    assert load_quietly("acme_arm/arm", menagerie=menagerie).joint_names == ("shoulder", "elbow")
    assert robots.path("menagerie/acme_ball/ball", menagerie=menagerie) == menagerie / "acme_ball" / "ball.xml"
    assert load_quietly("ball", menagerie=menagerie, floating_base=False).nv == 0


def test_menagerie_is_found_from_the_variable_and_the_robot_descriptions_cache(menagerie, monkeypatch, tmp_path):
    monkeypatch.setenv(sources.MENAGERIE_VARIABLE, str(menagerie))
    assert load_quietly("acme_ball/ball").nv == 6
    monkeypatch.delenv(sources.MENAGERIE_VARIABLE)
    cached = tmp_path / "cache" / "mujoco_menagerie"
    cached.parent.mkdir()
    menagerie.rename(cached)
    assert robots.menagerie_dir() == cached
    assert "menagerie/acme_arm/arm" in robots.available()


def test_missing_menagerie_says_how_to_give_one(menagerie, monkeypatch, tmp_path):
    with pytest.raises(FileNotFoundError, match="menagerie=.*no such directory"):
        robots.names(menagerie=tmp_path / "nowhere")
    monkeypatch.setenv(sources.MENAGERIE_VARIABLE, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=sources.MENAGERIE_VARIABLE):
        robots.load("menagerie/acme_arm/arm")
    monkeypatch.delenv(sources.MENAGERIE_VARIABLE)
    with pytest.raises(robots.UnknownRobotError, match="JAXMB_MENAGERIE"):
        robots.load("menagerie/acme_arm/arm")


def test_a_tail_of_several_names_asks_for_the_full_name(menagerie):
    with pytest.raises(robots.UnknownRobotError, match="acme_arm/hand.*acme_ball/hand"):
        robots.load("hand", menagerie=menagerie)


# -- errors -----------------------------------------------------------------------------------------------------

def test_unknown_name_lists_close_names_and_the_sources():
    with pytest.raises(robots.UnknownRobotError) as e:
        robots.load("go3")
    message = str(e.value)
    assert "'go3'" in message and "go1" in message and "go2" in message
    assert "example-robot-data at" in message and "mujoco-mjx" in message and "dm_control" in message
    assert "MuJoCo Menagerie" in message
    with pytest.raises(robots.UnknownRobotError, match="shadow_hand"):
        robots.load("shadowhand")


def test_left_out_names_say_why():
    with pytest.raises(robots.UnknownRobotError, match="SDF"):
        robots.load("cassie")
    with pytest.raises(robots.UnknownRobotError, match="load 'talos'"):
        robots.load("talos_legs")


def test_missing_package_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(sources, "package_dir", lambda name: None)
    with pytest.raises(FileNotFoundError, match="'dm_control/cheetah'.*pip install dm_control"):
        robots.load("cheetah")
    with pytest.raises(FileNotFoundError, match="'humanoid'.*pip install mujoco"):
        robots.path("humanoid")
    monkeypatch.setattr(sources, "example_robot_data_candidates", lambda: [tmp_path / "none"])
    with pytest.raises(FileNotFoundError, match="'panda'.*pip install example-robot-data"):
        robots.load("panda")
    assert "panda" not in robots.available()


def test_unknown_option_is_named():
    with pytest.raises(TypeError, match="load_urdf.*not assets"):
        robots.load("panda", assets={})
    with pytest.raises(TypeError, match="load_mjcf.*not inertia"):
        robots.load("humanoid", inertia="repair")


# -- docs -------------------------------------------------------------------------------------------------------

def test_docs_table_is_the_catalog():
    assert robots.markdown_table() in DOCS.read_text()
