"""The URDF loader and the model builder: structure, inertias and frames (against the file itself and against
Pinocchio on example-robot-data), configurations, and a clear error for every kind of bad input."""

import math
import warnings
import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxmb
import jaxmb.loops as jaxmb_loops
from jaxmb import joints
from jaxmb.io.pinocchio import PinocchioMap
from pinocchio_bridge import load_pair, merged_frames, run_fast, urdf_path

jax.config.update("jax_enable_x64", True)  # also set in conftest.py; harmless duplicate

TRIANGLE = "ignore:.*triangle inequality.*:UserWarning"
ROBOTS = ["panda", "kinova", "talos_full_v2", "anymal_c", "go1", "allegro", "icub", "pr2"]


# -- small URDF documents -------------------------------------------------------------------------------------------


def link(name, mass=1.0, inertia=(0.1, 0.1, 0.1, 0.0, 0.0, 0.0), com="0 0 0", rpy="0 0 0", extra=""):
    ixx, iyy, izz, ixy, ixz, iyz = inertia
    return (f'<link name="{name}"><inertial><origin xyz="{com}" rpy="{rpy}"/><mass value="{mass}"/>'
            f'<inertia ixx="{ixx}" iyy="{iyy}" izz="{izz}" ixy="{ixy}" ixz="{ixz}" iyz="{iyz}"/></inertial>'
            f"{extra}</link>")


def joint(name, parent, child, jtype="revolute", axis="0 0 1", xyz="0 0 0", rpy="0 0 0", extra=""):
    axis_el = f'<axis xyz="{axis}"/>' if axis is not None else ""
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/>{axis_el}{extra}</joint>')


def robot(*parts, name="test_robot"):
    return f'<robot name="{name}">' + "".join(parts) + "</robot>"


def load(text, source="test.urdf", **kw):
    return jaxmb.load_urdf_string(text, source=source, **kw)


def pin_from_string(text, floating_base=False):
    return pin.buildModelFromXML(text, pin.JointModelFreeFlyer()) if floating_base else pin.buildModelFromXML(text)


# a branching tree: base -(j_a)- a -(j_c)- c;  base -(j_b)- b -(fixed j_d)- d -(j_e)- e
TREE = robot(
    link("base", 2.0),
    link("a", 1.0, com="0.1 0 0"),
    link("b", 1.5, com="0 0.1 0"),
    link("c", 0.5, com="0 0 0.2"),
    link("d", 0.7, com="0.05 0.05 0", rpy="0.3 0.2 0.1", inertia=(0.02, 0.03, 0.04, 0.001, 0.002, 0.003)),
    link("e", 0.3, com="0 0 0.1"),
    joint("j_a", "base", "a", xyz="0 0.2 0", axis="1 0 0", extra='<limit lower="-2" upper="2.5" effort="1" velocity="1"/>'),
    joint("j_b", "base", "b", "prismatic", xyz="0 -0.2 0", axis="0 1 0",
          extra='<limit lower="-0.5" upper="0.5" effort="1" velocity="1"/>'),
    joint("j_c", "a", "c", "continuous", xyz="0.3 0 0", axis="0 1 0"),
    joint("j_d", "b", "d", "fixed", xyz="0 0.3 0.1", rpy="0.5 -0.4 0.2", axis=None),
    joint("j_e", "d", "e", xyz="0.1 0 0", axis="0 0 1", extra='<limit lower="-1" upper="2" effort="1" velocity="1"/>'),
    name="tree",
)


# -- structure ---------------------------------------------------------------------------------------------------------


def test_tree_structure_fixed_base():
    m = load(TREE)
    assert (m.nq, m.nv, m.nb) == (4, 4, 4)
    assert m.name == "tree"
    assert m.joint_names == ("j_a", "j_b", "j_c", "j_e")  # breadth first: depth 0 then depth 1
    assert m.body_names == ("a", "b", "c", "e")
    assert m.joint_types == ("revolute", "prismatic", "continuous", "revolute")
    assert list(m.topology.parent) == [-1, -1, 0, 1]
    assert set(m.frame_names) == {"base", "a", "b", "c", "d", "e"}
    assert m.frame_body[m.frame_index("base")] == -1  # the root link is fixed to the world
    assert m.frame_body[m.frame_index("d")] == m.body_index("b")  # merged into b
    np.testing.assert_array_equal(m.q_lower, [-2.0, -0.5, -np.inf, -1.0])
    np.testing.assert_array_equal(m.q_upper, [2.5, 0.5, np.inf, 2.0])


def test_tree_structure_free_base():
    m = load(TREE, floating_base=True)
    assert (m.nq, m.nv, m.nb) == (11, 10, 5)
    assert m.joint_names[0] == "root" and m.joint_types[0] == "free" and m.topology.kinds[0] == "free"
    assert m.body_names[0] == "base"
    assert m.joint_names[1:] == ("j_a", "j_b", "j_c", "j_e")
    assert m.topology.q_offset[0] == 0 and m.topology.v_offset[0] == 0
    assert list(m.topology.parent) == [-1, 0, 0, 1, 2]
    assert m.frame_body[m.frame_index("base")] == 0
    assert float(jaxmb.total_mass(m)) == pytest.approx(2.0 + 1.0 + 1.5 + 0.5 + 0.7 + 0.3, rel=1e-14)


@pytest.mark.parametrize("floating", [False, True])
def test_tree_against_pinocchio(floating):
    """The small tree (prismatic, continuous, fixed joint with rotated origin, rotated inertial) in both libraries:
    body inertias, frame placements and the mass matrix."""
    m, pm = load(TREE, floating_base=floating), pin_from_string(TREE, floating)
    br = PinocchioMap(m, pm)
    _check_inertias_and_frames(m, pm, br)
    q = run_fast(jaxmb.random_configuration, m, jax.random.PRNGKey(3))
    M_pin = pin.crba(pm, pm.createData(), br.q_to_pin(q))
    np.testing.assert_allclose(run_fast(jaxmb.mass_matrix, m, q), br.matrix_from_pin(np.triu(M_pin) + np.triu(M_pin, 1).T),
                               rtol=0, atol=1e-12)


def _check_inertias_and_frames(m, pm, br):
    """Each jaxmb body inertia (fixed links merged) equals Pinocchio's joint inertia; each frame (links, merged
    links included) has Pinocchio's placement on the same body."""
    for i, j in enumerate(br.joint_ids):
        Y = pm.inertias[int(j)]
        scale = max(Y.mass, 1e-300)
        assert float(m.mass[i]) == pytest.approx(Y.mass, rel=1e-12, abs=1e-15), m.body_names[i]
        np.testing.assert_allclose(m.com[i], Y.lever, rtol=0, atol=1e-12, err_msg=m.body_names[i])
        I = np.asarray(Y.inertia)
        np.testing.assert_allclose(m.inertia[i], I, rtol=0, atol=1e-12 * max(1.0, np.abs(I).max()) + 1e-15 * scale,
                                   err_msg=m.body_names[i])
    for k, name in enumerate(m.frame_names):
        fid = br.frame_id(name)
        assert pm.frames[fid].name == name
        assert m.frame_body[k] == br.frame_body(name), name
        placement = pm.frames[fid].placement
        np.testing.assert_allclose(m.frame_placement.R[k], placement.rotation, rtol=0, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(m.frame_placement.p[k], placement.translation, rtol=0, atol=1e-12, err_msg=name)


def _urdf_masses(path):
    """Mass of every link, the root link and each link's parent, read with ElementTree (independently of jaxmb)."""
    root = ET.parse(path).getroot()
    mass = {}
    for el in root.findall("link"):
        m = el.find("inertial/mass")
        mass[el.get("name")] = 0.0 if m is None else float(m.get("value"))
    parent, jtype = {}, {}
    for el in root.findall("joint"):
        child = el.find("child").get("link")
        parent[child], jtype[child] = el.find("parent").get("link"), el.get("type")
    (root_link,) = [n for n in mass if n not in parent]
    return mass, parent, jtype, root_link


@pytest.mark.filterwarnings(TRIANGLE)
@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "free"])
def test_robot_mass_inertias_and_frames(robot, floating):
    """Fixed-joint merging keeps the total mass (all links for a free base; without the links welded to the world
    for a fixed base), and every body inertia and frame matches Pinocchio's."""
    m, pm, br = load_pair(robot, floating)
    mass, parent, jtype, root_link = _urdf_masses(urdf_path(robot))

    def welded_to_world(n):
        while n != root_link:
            if jtype[n] != "fixed":
                return False
            n = parent[n]
        return True

    expected = sum(v for n, v in mass.items() if floating or not welded_to_world(n))
    assert float(jaxmb.total_mass(m)) == pytest.approx(expected, rel=1e-12)
    merged = [n for n in mass if jtype.get(n) == "fixed" and (floating or not welded_to_world(n))]
    assert sorted(merged_frames(m)) == sorted(merged)
    assert set(m.frame_names) == set(mass)
    _check_inertias_and_frames(m, pm, br)


@pytest.mark.filterwarnings(TRIANGLE)
@pytest.mark.parametrize("robot", ROBOTS)
def test_robot_names_and_sizes(robot):
    m, pm, br = load_pair(robot, floating_base=True)
    assert m.joint_names[0] == "root" and m.joint_types[0] == "free" and m.body_names[0] == _urdf_masses(
        urdf_path(robot))[3]
    assert set(m.joint_names[1:]) == set(pm.names[2:])
    assert m.nv == pm.nv and m.nb == pm.njoints - 1
    # body k is the child link of joint k
    for i, name in enumerate(m.body_names):
        assert br.frame_body(name) == i
    # breadth first: parents come first, and each depth is a contiguous slice
    assert all(p < i for i, p in enumerate(m.topology.parent))
    assert list(m.topology.depth) == sorted(m.topology.depth)


def test_rotated_inertial_frame():
    """An inertial frame rotated by rpy: the inertia is rotated into the link frame (a quarter turn about z swaps
    ixx and iyy), and the com is the inertial origin."""
    text = robot(link("base"), link("x", 2.0, inertia=(1.0, 2.0, 3.0, 0, 0, 0), com="0.1 0.2 0.3",
                                    rpy=f"0 0 {math.pi / 2}"), joint("j", "base", "x"))
    m = load(text)
    np.testing.assert_allclose(m.inertia[0], np.diag([2.0, 1.0, 3.0]), atol=1e-14)
    np.testing.assert_allclose(m.com[0], [0.1, 0.2, 0.3], atol=1e-15)
    # a general rotation, against Pinocchio
    text = robot(link("base"), link("x", 2.0, inertia=(1.0, 2.0, 2.5, 0.1, -0.2, 0.05), com="0.1 0.2 0.3",
                                    rpy="0.4 -0.7 1.9"), joint("j", "base", "x", "continuous"))
    m, pm = load(text), pin_from_string(text)
    np.testing.assert_allclose(m.inertia[0], pm.inertias[1].inertia, atol=1e-14)
    np.testing.assert_allclose(m.com[0], pm.inertias[1].lever, atol=1e-15)


def test_continuous_joints_have_one_coordinate():
    text = robot(link("base"), link("x"), joint("wheel", "base", "x", "continuous", axis="0 1 0",
                                                extra='<limit lower="-6.28" upper="6.28" effort="1" velocity="1"/>'))
    m = load(text)
    assert (m.nq, m.nv) == (1, 1) and m.joint_types == ("continuous",)
    assert np.isneginf(m.q_lower[0]) and np.isposinf(m.q_upper[0])  # unbounded, whatever <limit> says
    m, pm, br = load_pair("kinova")
    assert m.nq == m.nv == 6 and pm.nq == 9  # three continuous joints: (cos, sin) pairs in Pinocchio
    assert m.joint_types.count("continuous") == 3
    q = jnp.array([0.3, -1.2, 2.5, 0.1, -3.0, 1.7])
    q_pin = br.q_to_pin(q)
    for i, jtype in enumerate(m.joint_types):
        jm = pm.joints[int(br.joint_ids[i])]
        if jtype == "continuous":
            np.testing.assert_allclose(q_pin[jm.idx_q : jm.idx_q + 2], [np.cos(q[i]), np.sin(q[i])], atol=1e-15)


def test_mimic_joints_load_as_independent_joints():
    text = robot(link("base"), link("l"), link("r"),
                 joint("left", "base", "l", "prismatic", axis="0 1 0"),
                 joint("right", "base", "r", "prismatic", axis="0 -1 0", extra='<mimic joint="left" multiplier="1"/>'))
    with pytest.warns(UserWarning, match=r"'right' \(mimics 'left'\).*independent coordinates"):
        m = load(text)
    assert m.nv == 2 and set(m.joint_names) == {"left", "right"}
    (note,) = m.notes
    assert "'right'" in note and "'left'" in note and "independent" in note
    with pytest.warns(UserWarning, match="panda_finger_joint2"):
        m = jaxmb.load_urdf(urdf_path("panda"))
    assert "panda_finger_joint2" in m.joint_names
    assert any("panda_finger_joint2" in n and "panda_finger_joint1" in n for n in m.notes)


def test_mimic_tag_on_a_fixed_joint_adds_no_note():
    """A fixed joint is merged into its parent whatever its <mimic> says: no coordinate, so nothing to note."""
    text = robot(link("base"), link("l"), link("r"),
                 joint("left", "base", "l", "prismatic", axis="0 1 0"),
                 joint("right", "base", "r", "fixed", extra='<mimic joint="left" multiplier="1"/>'))
    m = load(text)
    assert m.joint_names == ("left",) and m.notes == ()


def test_package_mesh_paths_are_ignored():
    geometry = ('<visual><geometry><mesh filename="package://no_such_package/meshes/link.dae" scale="1 1 1"/>'
                '</geometry></visual><collision><geometry><mesh filename="package://no_such_package/x.stl"/>'
                '</geometry></collision>')
    plain = robot(link("base"), link("x", com="0 0 0.1"), joint("j", "base", "x"))
    with_meshes = robot(link("base", extra=geometry), link("x", com="0 0 0.1", extra=geometry), joint("j", "base", "x"))
    a, b = load(plain), load(with_meshes)
    assert jax.tree.all(jax.tree.map(lambda x, y: bool(jnp.all(x == y)), a, b))
    assert a.body_names == b.body_names and a.frame_names == b.frame_names


def test_load_urdf_from_file(tmp_path):
    path = tmp_path / "tree.urdf"
    path.write_text(TREE)
    a, b = jaxmb.load_urdf(path), load(TREE)
    assert a.joint_names == b.joint_names
    assert jax.tree.all(jax.tree.map(lambda x, y: bool(jnp.all(x == y)), a, b))


# -- configurations -----------------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings(TRIANGLE)
@pytest.mark.parametrize("robot", ["panda", "kinova", "talos_full_v2", "pr2"])
@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "free"])
def test_neutral_and_random_configurations(robot, floating):
    m, pm, br = load_pair(robot, floating)
    lower, upper = np.asarray(m.q_lower), np.asarray(m.q_upper)
    q0 = np.asarray(jaxmb.neutral_configuration(m))
    assert q0.shape == (m.nq,)
    np.testing.assert_allclose(br.q_to_pin(q0), pin.neutral(pm), atol=1e-15)
    if floating:
        np.testing.assert_array_equal(q0[:7], [0, 0, 0, 1, 0, 0, 0])
    keys = jax.random.split(jax.random.PRNGKey(0), 64)
    Q = np.asarray(run_fast(jax.vmap(jaxmb.random_configuration, (None, 0)), m, keys))
    assert Q.shape == (64, m.nq)
    assert np.all(Q >= lower) and np.all(Q <= upper)
    unbounded = np.isinf(lower) & np.isinf(upper)
    if floating:
        unbounded[:7] = False
        np.testing.assert_allclose(np.linalg.norm(Q[:, 3:7], axis=1), 1.0, atol=1e-14)
        assert np.all(np.abs(Q[:, :3]) <= 1.0)
    assert np.all(np.abs(Q[:, unbounded]) <= np.pi)
    assert np.std(Q, axis=0).min() > 0  # every coordinate varies
    # Pinocchio's limits agree where jaxmb has finite ones
    for i in range(m.nb):
        jm = pm.joints[int(br.joint_ids[i])]
        if m.topology.kinds[i] == "screw" and br.layouts[i] == "scalar":
            a = m.topology.q_offset[i]
            if np.isfinite(lower[a]):
                assert lower[a] == pytest.approx(pm.lowerPositionLimit[jm.idx_q], abs=1e-12)
                assert upper[a] == pytest.approx(pm.upperPositionLimit[jm.idx_q], abs=1e-12)


# -- bad input: each a ModelError that names the file and the element --------------------------------------------------

BASE = link("base")


def _error(text, *fragments, cls=jaxmb.ModelError, **kw):
    with pytest.raises(cls) as info:
        load(text, source="bad_robot.urdf", **kw)
    message = str(info.value)
    assert "bad_robot.urdf" in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def test_malformed_xml():
    _error('<robot name="r"><link name="a">', "malformed XML")
    _error("<model/>", "<model>", "<robot>")


def test_unknown_joint_type():
    _error(robot(BASE, link("x"), joint("j_ball", "base", "x", "ball")), "j_ball", "'ball'")
    _error(robot(BASE, link("x"), '<joint name="j_untyped"><parent link="base"/><child link="x"/></joint>'),
           "j_untyped", "'type'")


def test_missing_parent_link():
    _error(robot(BASE, link("x"), joint("j0", "nowhere", "x")), "j0", "parent link 'nowhere'")


def test_undefined_child_link():
    _error(robot(BASE, link("x"), joint("j0", "base", "x"), joint("j1", "x", "ghost")), "j1", "child link 'ghost'")


def test_closed_loop_link_with_two_parents():
    text = robot(BASE, link("x"), link("y"), joint("j0", "base", "x"), joint("j1", "base", "y"), joint("j2", "x", "y"))
    _error(text, "j2", "'y'", "closed loop")


def test_cycle_of_joints():
    _error(robot(link("a"), link("b"), joint("j1", "a", "b"), joint("j2", "b", "a")), "cycle")


def test_cycle_detached_from_the_root():
    text = robot(BASE, link("x"), link("a"), link("b"), joint("j0", "base", "x"), joint("j1", "a", "b"),
                 joint("j2", "b", "a"))
    _error(text, "cycle")


def test_several_root_links():
    _error(robot(BASE, link("x"), link("stray"), joint("j0", "base", "x")), "'stray'", "root")


def test_massless_leaf_behind_movable_joint():
    text = robot(BASE, link("x"), '<link name="tip"/>', joint("j0", "base", "x"), joint("j_tip", "x", "tip"))
    _error(text, "'tip'", "'j_tip'", "singular")
    zero = link("tip", 0.0, inertia=(0, 0, 0, 0, 0, 0))
    _error(robot(BASE, link("x"), zero, joint("j0", "base", "x"), joint("j_tip", "x", "tip", "continuous")),
           "'tip'", "'j_tip'")
    # a massless leaf behind a fixed joint is merged, so it is harmless
    m = load(robot(BASE, link("x"), zero, joint("j0", "base", "x"), joint("j_tip", "x", "tip", "fixed", axis=None)))
    assert m.nb == 1 and "tip" in m.frame_names


def test_massless_leaf_behind_prismatic_joint():
    text = robot(BASE, link("x", com="0.5 0 0"), link("slider", 0.0), joint("j0", "base", "x"),
                 joint("slide", "x", "slider", "prismatic", axis="1 0 0"))
    _error(text, "'slider'", "'slide'")


def test_negative_mass():
    _error(robot(BASE, link("x", -1.0), joint("j0", "base", "x")), "'x'", "mass")
    _error(robot(BASE, link("x", "nan"), joint("j0", "base", "x")), "<mass>", "nan")


def test_inertia_not_positive_semidefinite():
    _error(robot(BASE, link("x", inertia=(0.1, 0.1, -0.1, 0, 0, 0)), joint("j0", "base", "x")), "'x'",
           "positive semi-definite")
    _error(robot(BASE, link("x", inertia=(0.1, 0.1, 0.1, 0.5, 0, 0)), joint("j0", "base", "x")), "'x'",
           "positive semi-definite")


def test_inertia_breaking_the_triangle_inequality():
    text = robot(BASE, link("x", inertia=(0.1, 0.1, 0.5, 0, 0, 0)), joint("j0", "base", "x"))
    with pytest.warns(UserWarning, match="triangle inequality") as record:
        m = load(text, source="bad_robot.urdf")
    assert "'x'" in str(record[0].message) and "bad_robot.urdf" in str(record[0].message)
    (note,) = m.notes
    assert "'x'" in note and "triangle inequality" in note
    _error(text, "'x'", "triangle inequality", 'inertia="warn"', 'inertia="repair"', inertia="strict")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a valid inertia gives no warning
        assert load(robot(BASE, link("x"), joint("j0", "base", "x"))).notes == ()


def test_zero_joint_axis():
    _error(robot(BASE, link("x"), joint("j_zero", "base", "x", axis="0 0 0")), "j_zero", "axis")
    _error(robot(BASE, link("x"), joint("j_zero", "base", "x", "prismatic", axis="0 0 0")), "j_zero", "axis")


@pytest.mark.parametrize("text, fragments", [
    (robot(BASE, link("x"), joint("j0", "base", "x", axis="a b c")), ["<axis>", "'a b c'"]),
    (robot(BASE, link("x"), joint("j0", "base", "x", axis="0 1")), ["<axis>", "'0 1'"]),
    (robot(BASE, link("x"), joint("j0", "base", "x", xyz="0 0 zero")), ["<origin>", "'0 0 zero'"]),
    (robot(BASE, link("x", "heavy"), joint("j0", "base", "x")), ["<mass>", "'heavy'"]),
    (robot(BASE, link("x", inertia=("big", 0.1, 0.1, 0, 0, 0)), joint("j0", "base", "x")), ["<inertia>", "'big'"]),
    (robot(BASE, link("x"), joint("j0", "base", "x", extra='<limit lower="low" upper="1" effort="1" velocity="1"/>')),
     ["<limit>", "'low'"]),
], ids=["axis", "axis-length", "origin", "mass", "inertia", "limit"])
def test_non_numeric_attributes(text, fragments):
    _error(text, "not numeric" if "0 1" not in fragments[1] else "3 finite numbers", *fragments)


@pytest.mark.parametrize("text, owner", [
    (robot(BASE, link("x"), joint("j_bad", "base", "x", axis="a b c")), "j_bad"),
    (robot(BASE, link("x_bad", "heavy"), joint("j0", "base", "x_bad")), "x_bad"),
], ids=["joint-axis", "link-mass"])
def test_non_numeric_attribute_names_its_joint_or_link(text, owner):
    _error(text, owner)


def test_limit_lower_above_upper():
    text = robot(BASE, link("x"), joint("j_lim", "base", "x", extra='<limit lower="1" upper="0" effort="1" velocity="1"/>'))
    _error(text, "j_lim", "lower")


def test_duplicates_and_missing_names():
    _error(robot(BASE, link("x"), link("x"), joint("j0", "base", "x")), "'x'", "duplicate")
    _error(robot(BASE, link("x"), link("y"), joint("j0", "base", "x"), joint("j0", "base", "y")), "j0", "duplicate")
    _error(robot(BASE, '<link/>'), "no name")


def test_robot_without_movable_joint_loads_with_no_coordinates():
    """All joints fixed (or none): a model with nv = 0 whose links are frames fixed to the world (as Pinocchio
    loads it), with a note that floating_base=True makes it a free body."""
    text = robot(BASE, link("x"), joint("j0", "base", "x", "fixed", axis=None, xyz="0 0 0.5"))
    fixed = load(text)
    for m in (fixed, load(robot(BASE))):
        assert (m.nb, m.nq, m.nv) == (0, 0, 0) and set(m.frame_body) == {-1}
        (note,) = m.notes
        assert "no movable joint" in note and "floating_base=True" in note
    assert np.allclose(fixed.frame_placement.p[fixed.frame_index("x")], [0, 0, 0.5])
    m = load(text, floating_base=True)
    assert m.joint_types == ("free",) and m.nv == 6 and m.notes == ()


def test_floating_base_joint_name_does_not_clash_with_a_joint_named_root():
    """floating_base=True adds a free joint; where the file already names a joint 'root', the added one takes the
    next free name, 'root_free' (then 'root_free_2'), and the notes say so: no 'duplicate joint names' error."""
    text = robot(BASE, link("x"), link("y"), joint("root", "base", "x"), joint("root_free", "x", "y"))
    m = load(text, floating_base=True)
    assert m.joint_names == ("root_free_2", "root", "root_free") and m.joint_types[0] == "free"
    assert any("'root_free_2'" in n and "'root'" in n for n in m.notes)
    m = load(robot(BASE, link("x"), joint("root", "base", "x")), floating_base=True)
    assert m.joint_names == ("root_free", "root")
    m = load(robot(BASE, link("x"), joint("root", "base", "x")))  # a fixed base adds no movable joint: no clash
    assert m.joint_names == ("root",) and m.notes == ()


def test_mimic_of_a_missing_joint_names_both_joints():
    """Loaded as independent coordinates (as Pinocchio loads them), a mimic of a joint the file lacks is named in
    the mimic warning; enforced as a coupling, it is an error naming both joints."""
    extra = '<mimic joint="ghost" multiplier="2"/>'
    text = robot(BASE, link("x"), link("y"), joint("j0", "base", "x"), joint("follower", "base", "y", extra=extra))
    with pytest.warns(UserWarning, match="'follower' \\(mimics 'ghost', a joint the file lacks\\)"):
        model = jaxmb.load_urdf_string(text)
    assert model.nv == 2 and any("'ghost', a joint the file lacks" in n for n in model.notes)
    with pytest.raises(jaxmb.ModelError) as err:
        jaxmb_loops.load_urdf_string(text, mimic=True)
    for part in ("<mimic> in <joint name='follower'>", "joint 'ghost' does not exist", "'follower' mimics"):
        assert part in str(err.value)
    text = robot(BASE, link("x"), link("y"), joint("j0", "base", "x"),
                 joint("follower", "base", "y", extra='<mimic multiplier="2"/>'))
    _error(text, "<mimic> in <joint name='follower'>", "missing attribute 'joint'")


XACRO_BODY = ('<xacro:property name="l" value="0.3"/><link name="base"/>'
              '<xacro:macro name="leg" params="n"><link name="${n}"/></xacro:macro><xacro:leg n="a"/>')


@pytest.mark.parametrize("text", [
    f'<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro">{XACRO_BODY}</robot>',
    f'<robot name="r">{XACRO_BODY}</robot>',  # no namespace declared: not even well-formed XML
    '<robot name="r" xmlns:x="http://wiki.ros.org/xacro"><link name="base"/><x:include filename="a.xacro"/></robot>',
])
def test_xacro_files_are_refused_with_how_to_expand_them(text):
    """A xacro file would load as the links and joints outside its macros (or not parse): refuse it, saying how to
    expand it."""
    _error(text, "the file is xacro", "Expand it first", "xacro robot.urdf.xacro > robot.urdf")


def test_expanded_xacro_output_that_keeps_the_namespace_declaration_loads():
    """The xacro tool keeps ``xmlns:xacro`` in the URDF it writes (pr2, talos): only xacro elements are refused."""
    text = robot(BASE, link("x"), joint("j0", "base", "x")).replace(
        "<robot ", '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" ')
    assert load(text).joint_names == ("j0",)


def test_nonexistent_file(tmp_path):
    missing = tmp_path / "no_such_robot.urdf"
    with pytest.raises(jaxmb.ModelError, match="no_such_robot.urdf"):
        jaxmb.load_urdf(missing)


# -- state shapes --------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small():
    return load(TREE, floating_base=True)  # nq=11, nv=10, nb=5


def _shape_error(fn, name, **args):
    with pytest.raises(ValueError, match=rf"^{name} must have shape"):
        fn(**args)


def test_wrong_state_shapes(small):
    m = small
    q, v, f = jaxmb.neutral_configuration(m), jnp.zeros(m.nv), jnp.zeros((m.nb, 6))
    fd = lambda q=q, qd=v, tau=v, f_ext=None: jaxmb.forward_dynamics(m, q, qd, tau, f_ext)
    idyn = lambda q=q, qd=v, qdd=v, f_ext=None: jaxmb.inverse_dynamics(m, q, qd, qdd, f_ext)
    mm = lambda q=q: jaxmb.mass_matrix(m, q)
    for fn in (fd, idyn, mm):
        _shape_error(fn, "q", q=jnp.zeros(m.nv))  # nv instead of nq (a free base: 10 vs 11)
        _shape_error(fn, "q", q=jnp.zeros((2, m.nq)))  # a batch without vmap
    _shape_error(fd, "qd", qd=jnp.zeros(m.nq))
    _shape_error(fd, "tau", tau=jnp.zeros(m.nv + 1))
    _shape_error(fd, "f_ext", f_ext=jnp.zeros((m.nb, 3)))
    _shape_error(fd, "f_ext", f_ext=jnp.zeros(6))
    _shape_error(idyn, "qd", qd=jnp.zeros((m.nv, 1)))
    _shape_error(idyn, "qdd", qdd=jnp.zeros(m.nv - 1))
    _shape_error(idyn, "f_ext", f_ext=jnp.zeros((m.nb + 1, 6)))
    # also under jit (the check runs at trace time), and the right shapes pass
    _shape_error(jax.jit(lambda q: jaxmb.mass_matrix(m, q)), "q", q=jnp.zeros(m.nv))
    assert jax.eval_shape(fd, f_ext=f).shape == (m.nv,) and jax.eval_shape(idyn, f_ext=f).shape == (m.nv,)
    assert jax.eval_shape(mm).shape == (m.nv, m.nv)


# -- the Python builder ---------------------------------------------------------------------------------------------------


def test_builder_errors():
    b = jaxmb.ModelBuilder("built")
    b.add_body("a", None, joints.revolute((0, 0, 1)), mass=1.0, inertia=np.eye(3))
    with pytest.raises(jaxmb.ModelError, match=r"built: duplicate body 'a'"):
        b.add_body("a", None, joints.prismatic((1, 0, 0)), mass=1.0, inertia=np.eye(3))
    b.add_body("c", "nope", joints.revolute(), mass=1.0, inertia=np.eye(3))
    with pytest.raises(jaxmb.ModelError, match=r"built: body 'c' has a missing parent 'nope'"):
        b.build()
    with pytest.raises(jaxmb.ModelError, match=r"built: body 'n': mass"):
        jaxmb.ModelBuilder("built").add_body("n", None, joints.revolute(), mass=-2.0, inertia=np.eye(3))
    with pytest.raises(ValueError, match="nonzero"):
        joints.revolute((0, 0, 0))
    b = jaxmb.ModelBuilder("built")
    b.add_body("a", None, joints.revolute(), mass=1.0, inertia=np.eye(3))
    b.add_frame("tool", "zzz")
    with pytest.raises(jaxmb.ModelError, match=r"frame 'tool' is attached to a missing body 'zzz'"):
        b.build()


def test_builder_loop_and_massless_leaf():
    b = jaxmb.ModelBuilder("looped")
    b.add_body("a", "b", joints.revolute(), mass=1.0, inertia=np.eye(3))
    b.add_body("b", "a", joints.revolute(), mass=1.0, inertia=np.eye(3))
    with pytest.raises(jaxmb.ModelError, match="loop"):
        b.build()
    b = jaxmb.ModelBuilder("leaf")
    b.add_body("a", None, joints.revolute(), mass=1.0, inertia=np.eye(3))
    b.add_body("tip", "a", joints.revolute())
    with pytest.raises(jaxmb.ModelError, match="'tip'"):
        b.build()
