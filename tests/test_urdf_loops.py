"""The closed-loop URDF loader (`jaxmb.loops.urdf`): the shipped examples and
the docstring's example load, the loaded four-bar leg is the mechanism built in code, couplings embed (``K G = 0``),
mimic tags become couplings, and every kind of bad input raises a `ModelError` naming the file and the element."""

import re
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb import assets, joints, loops
from jaxmb.loops import urdf as loops_urdf
from jaxmb.model import ModelBuilder
from jaxmb.rotation import rpy_to_matrix

from checks import fast_jit

TOL = 1e-10


@pytest.fixture(scope="module")
def four_bar_leg():
    return loops.load_urdf(assets.path("four_bar_leg.urdf"))


@pytest.fixture(scope="module")
def belt_leg():
    return loops.load_urdf(assets.path("belt_leg.urdf"))


def consistent_state(lm, y, iterations, seed=0):
    """A configuration on the constraint manifold and random independent velocities and forces."""
    solution = loops.solve_configuration(lm, jnp.asarray(y, float), jnp.zeros(lm.nq), iterations=iterations)
    assert solution.converged
    rng = np.random.default_rng(seed)
    return solution.q, jnp.asarray(rng.normal(size=lm.ny)), jnp.asarray(rng.normal(size=lm.ny))


# -- the shipped examples -------------------------------------------------------------------------------------------


def test_four_bar_leg_loads(four_bar_leg):
    lm = four_bar_leg
    assert isinstance(lm, loops.LoopModel)
    assert (lm.nv, lm.ny, lm.nc) == (4, 2, 2)
    assert lm.independent_joints == ("slide", "hip")
    assert float(jnp.max(jnp.abs(loops.constraint_residual(lm, jnp.zeros(lm.nq))))) < TOL  # drawn assembled
    assert jaxmb.load_urdf(assets.path("four_bar_leg.urdf")).nv == 4  # the tree loader sees the spanning tree


def test_belt_leg_loads(belt_leg):
    lm = belt_leg
    assert (lm.nv, lm.ny, lm.nc) == (5, 3, 2)
    assert lm.independent_joints == ("hip", "knee", "ankle")  # the driven rotors are made dependent


def test_docstring_example_loads():
    doc = loops_urdf.__doc__
    text = doc[doc.index("<robot") : doc.index("</robot>") + len("</robot>")]
    lm = loops.load_urdf_string(text, source="four_bar.urdf")
    assert (lm.nv, lm.ny, lm.independent_joints) == (4, 1, ("crank",))


def test_four_bar_leg_equals_the_mechanism_built_in_code(four_bar_leg):
    """The same leg through `ModelBuilder` and `close_loops`: same tree, same closed-loop forward dynamics, and
    the embedded AB algorithm agrees with the projected dense solve."""
    def cylinder(pitch, I_perpendicular, I_axial):  # a rod's inertia, its axis z pitched about y (inertial rpy)
        R = np.asarray(rpy_to_matrix(np.array([0.0, pitch, 0.0])))
        return R @ np.diag([I_perpendicular, I_perpendicular, I_axial]) @ R.T

    y_axis = joints.revolute((0, 1, 0))
    b = ModelBuilder("four_bar_leg")
    b.add_body("body", None, joints.prismatic((0, 0, 1), -0.5, 0.5), joint_name="slide",
               placement=(np.eye(3), (0, 0, 0.5)), mass=3.0, com=(0, 0, 0.05),
               inertia=np.diag([0.008125, 0.0125, 0.015625]))
    b.add_body("thigh", "body", joints.revolute((0, 1, 0), -1.5, 1.5), joint_name="hip", mass=0.4,
               com=(0.04, 0, -0.09), inertia=cylinder(-0.418224, 0.00131583, 4.5e-05))
    b.add_body("rocker", "body", y_axis, joint_name="rocker", placement=(np.eye(3), (-0.05, 0, -0.02)), mass=0.1,
               com=(0.035, 0, -0.09), inertia=cylinder(-0.370891, 0.000312433, 3.2e-06))
    b.add_body("shank", "thigh", joints.revolute((0, 1, 0), -2, 2), joint_name="knee",
               placement=(np.eye(3), (0.08, 0, -0.18)), mass=0.3, com=(-0.04, 0, -0.11),
               inertia=cylinder(0.348771, 0.0013808, 2.16e-05))
    b.add_body("foot", "shank", joints.fixed(), placement=(np.eye(3), (-0.08, 0, -0.22)), mass=0.05,
               inertia=np.eye(3) * 8e-06)
    b.add_frame("rocker_tip", "rocker", (np.eye(3), (0.07, 0, -0.18)))
    closure = loops.loop_closure("shank", "rocker_tip", (np.eye(3), (-0.06, 0, -0.02)), kind="planar",
                                 axis=(0, 1, 0))
    built = loops.close_loops(b.build(), [closure], independent=["hip"])
    loaded = four_bar_leg

    assert built.tree.joint_names == loaded.tree.joint_names
    assert (built.y_q_index, built.y_v_index) == (loaded.y_q_index, loaded.y_v_index)
    q, yd, tau = consistent_state(loaded, [0.1, 0.3], iterations=8)

    @fast_jit  # one program instead of one per call
    def evaluate(q, yd, tau):
        return (loops.constraint_residual(built, q), loops.forward_dynamics(loaded, q, yd, tau),
                loops.forward_dynamics(built, q, yd, tau), loops.projected_forward_dynamics(loaded, q, yd, tau))

    residual, ydd, ydd_built, ydd_projected = evaluate(q, yd, tau)
    assert float(jnp.max(jnp.abs(residual))) < TOL
    np.testing.assert_allclose(ydd, ydd_built, atol=1e-9)
    np.testing.assert_allclose(ydd, ydd_projected, atol=1e-9)


def test_belt_leg_couplings_embed(belt_leg):
    lm = belt_leg
    q, yd, _ = consistent_state(lm, [0.2, -0.7, 0.4], iterations=1)  # linear: one step
    names = lm.tree.joint_names
    knee, ankle = (q[names.index(n)] for n in ("knee", "ankle"))
    np.testing.assert_allclose(q[names.index("rotor_knee")], 12 * knee, atol=TOL)
    np.testing.assert_allclose(q[names.index("rotor_ankle")], 12 * knee + 12 * ankle, atol=TOL)
    K, G = loops.constraint_jacobian(lm, q), loops.embedding_matrix(lm, q)
    np.testing.assert_allclose(K @ G, 0.0, atol=TOL)
    qd = G @ yd
    np.testing.assert_allclose(qd[names.index("rotor_ankle")], 12 * (yd[1] + yd[2]), atol=TOL)


GRIPPER = """<robot name="gripper">
  <link name="palm"/>
  <link name="hand"><inertial><mass value="0.5"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <link name="finger_a"><inertial><origin xyz="0 0 0.03"/><mass value="0.05"/>
    <inertia ixx="2e-5" iyy="2e-5" izz="1e-6" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="finger_b"><inertial><origin xyz="0 0 0.03"/><mass value="0.05"/>
    <inertia ixx="2e-5" iyy="2e-5" izz="1e-6" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="wrist" type="revolute"><parent link="palm"/><child link="hand"/><axis xyz="0 0 1"/></joint>
  <joint name="finger_a" type="revolute"><parent link="hand"/><child link="finger_a"/>
    <origin xyz="0.02 0 0.05"/><axis xyz="0 1 0"/></joint>
  <joint name="finger_b" type="revolute"><parent link="hand"/><child link="finger_b"/>
    <origin xyz="-0.02 0 0.05"/><axis xyz="0 1 0"/><mimic joint="finger_a" MIMIC/></joint>
</robot>"""


def test_mimic_becomes_a_coupling():
    text = GRIPPER.replace("MIMIC", 'multiplier="-0.5" offset="0.1"')
    with pytest.warns(UserWarning, match="load as independent coordinates"):
        free = loops.load_urdf_string(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # enforced couplings: no warning that they are not
        coupled = loops.load_urdf_string(text, mimic=True)
    assert (free.nv, free.ny, coupled.ny) == (3, 3, 2)
    assert coupled.independent_joints == ("wrist", "finger_a")
    assert any("enforced as a coupling" in n for n in coupled.tree.notes)
    assert not any("not enforced" in n for n in coupled.tree.notes)
    q = loops.solve_configuration(coupled, jnp.array([0.0, 0.4]), iterations=1).q  # linear: one step
    np.testing.assert_allclose(q[2], -0.5 * 0.4 + 0.1, atol=TOL)


# -- errors ---------------------------------------------------------------------------------------------------------

# the docstring's four-bar, plus a fixed-joint link on the rocker and a planar-jointed puck; EXTRA is replaced
FOUR_BAR = """<robot name="four_bar">
  <link name="base"/>
  <link name="crank"><inertial><origin xyz="0 0 0.05"/><mass value="0.1"/>
    <inertia ixx="1e-4" iyy="1e-4" izz="1e-5" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="coupler"><inertial><origin xyz="0.1 0 0.01"/><mass value="0.2"/>
    <inertia ixx="1e-5" iyy="7e-4" izz="7e-4" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="rocker"><inertial><origin xyz="0 0 0.06"/><mass value="0.1"/>
    <inertia ixx="1.2e-4" iyy="1.2e-4" izz="1e-5" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="tip"/>
  <link name="motor"><inertial><mass value="0.05"/>
    <inertia ixx="1e-5" iyy="2e-5" izz="1e-5" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="puck"><inertial><mass value="0.05"/>
    <inertia ixx="1e-5" iyy="1e-5" izz="1e-5" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="crank" type="revolute"><parent link="base"/><child link="crank"/><axis xyz="0 1 0"/></joint>
  <joint name="coupler" type="revolute"><parent link="crank"/><child link="coupler"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 1 0"/></joint>
  <joint name="rocker" type="revolute"><parent link="base"/><child link="rocker"/>
    <origin xyz="0.2 0 0"/><axis xyz="0 1 0"/></joint>
  <joint name="tip_mount" type="fixed"><parent link="rocker"/><child link="tip"/><origin xyz="0 0 0.12"/></joint>
  <joint name="motor" type="continuous"><parent link="base"/><child link="motor"/><axis xyz="0 1 0"/></joint>
  <joint name="puck" type="planar"><parent link="base"/><child link="puck"/><axis xyz="0 0 1"/></joint>
  <loop name="closure" type="planar">
    <link1 link="coupler" xyz="0.2 0 0.02"/>
    <link2 link="rocker" xyz="0 0 0.12"/>
    <axis xyz="0 1 0"/>
  </loop>
  <independent joints="crank"/>
  EXTRA
</robot>"""

LOOP = FOUR_BAR[FOUR_BAR.index("<loop") : FOUR_BAR.index("</loop>") + len("</loop>")]
GEAR = '<coupling name="gear" joint="motor" reference="crank" ratio="5"/>'


def variant(old=None, new=None, extra=""):
    text = FOUR_BAR.replace("EXTRA", extra)
    if old is not None:
        assert old in text
        text = text.replace(old, new)
    return text


def test_error_free_variant_loads():
    lm = loops.load_urdf_string(variant(LOOP, LOOP.replace('link="rocker" xyz="0 0 0.12"', 'link="tip"'), GEAR))
    assert (lm.ny, lm.independent_joints) == (4, ("crank", "puck"))  # the merged link "tip" closes the loop


def test_q_reference_for_a_file_drawn_at_a_singular_pose():
    """A four-bar drawn straight (every link along x: crank 0.1, coupler pin 0.15, rocker 0.12, pivots 0.06
    apart) cannot choose its coordinates at zero angles; a reference near an assembled pose fixes that."""
    text = variant('<origin xyz="0 0 0.1"/>', '<origin xyz="0.1 0 0"/>')
    for old, new in [('<origin xyz="0.2 0 0"/>', '<origin xyz="0.06 0 0"/>'), ('xyz="0.2 0 0.02"', 'xyz="0.15 0 0"'),
                     ('<link2 link="rocker" xyz="0 0 0.12"/>', '<link2 link="rocker" xyz="0.12 0 0"/>')]:
        text = text.replace(old, new)
    singular = r"test\.urdf: <loop name='closure'>: .*reference pose is singular.*pass q_reference"
    with pytest.raises(jaxmb.ModelError, match=singular):
        loops.load_urdf_string(text, source="test.urdf")
    tree = jaxmb.load_urdf_string(text)
    q_reference = np.zeros(tree.nq)
    for name, angle in {"crank": -1.2, "rocker": -1.0, "coupler": 0.6}.items():
        q_reference[tree.topology.q_offset[tree.joint_names.index(name)]] = angle
    lm = loops.load_urdf_string(text, source="test.urdf", q_reference=q_reference)
    assert lm.independent_joints == ("crank", "motor", "puck")


E = r"test\.urdf: "
ERRORS = {
    "missing link": (variant('<link1 link="coupler"', '<link1 link="foo"'),
                     E + r"<loop name='closure'>: link 'foo' does not exist"),
    "loop without name": (variant('<loop name="closure"', "<loop"), E + r"<loop>: missing attribute 'name'"),
    "loop without type": (variant('"closure" type="planar">', '"closure">'),
                          E + r"<loop name='closure'>: missing attribute 'type'"),
    "bad loop type": (variant('"closure" type="planar">', '"closure" type="hinge">'),
                      E + r"<loop name='closure'>: type 'hinge' is not"),
    "loop without link2": (variant('<link2 link="rocker" xyz="0 0 0.12"/>', ""),
                           E + r"<loop name='closure'>: needs exactly one <link2>, found 0"),
    "link1 without link": (variant('<link1 link="coupler"', "<link1"),
                           E + r"<link1> in <loop name='closure'>: missing attribute 'link'"),
    "non-numeric xyz": (variant('xyz="0.2 0 0.02"', 'xyz="0.2 0 x"'),
                        E + r"<link1> in <loop name='closure'>: attribute xyz='0.2 0 x' is not numeric"),
    "zero axis": (variant('<axis xyz="0 1 0"/>\n  </loop>', '<axis xyz="0 0 0"/></loop>'),
                  E + r"<loop name='closure'>: the axis is zero"),
    "both ends on one body": (variant('<link1 link="coupler" xyz="0.2 0 0.02"/>', '<link1 link="tip"/>'),
                              E + r"<loop name='closure'>: .*both ends are on"),
    "missing joint": (variant(extra=GEAR.replace('joint="motor"', 'joint="foo"')),
                      E + r"<coupling name='gear'>: joint 'foo' does not exist"),
    "missing reference joint": (variant(extra=GEAR.replace('reference="crank"', 'reference="bar"')),
                                E + r"<coupling name='gear'>: joint 'bar' does not exist"),
    "coupling without joint": (variant(extra=GEAR.replace('joint="motor" ', "")),
                               E + r"<coupling name='gear'>: missing attribute 'joint'"),
    "coupling without reference": (variant(extra=GEAR.replace('reference="crank" ', "")),
                                   E + r"<coupling name='gear'>: missing attribute 'reference'"),
    "coupling without ratio": (variant(extra=GEAR.replace(' ratio="5"', "")),
                               E + r"<coupling name='gear'>: missing attribute 'ratio'"),
    "non-numeric ratio": (variant(extra=GEAR.replace('ratio="5"', 'ratio="twelve"')),
                          E + r"<coupling name='gear'>: attribute ratio='twelve' is not numeric"),
    "coupling on a fixed joint": (variant(extra=GEAR.replace('joint="motor"', 'joint="tip_mount"')),
                                  E + r"<coupling name='gear'>: joint 'tip_mount' is fixed"),
    "coupling on a multi-dof joint": (variant(extra=GEAR.replace('joint="motor"', 'joint="puck"')),
                                      E + r"<coupling name='gear'>: .*'puck' is a planar joint"),
    "reference without ratio": (
        variant(extra='<coupling name="belt" joint="motor"><reference joint="crank"/></coupling>'),
        E + r"<reference> in <coupling name='belt'>: missing attribute 'ratio'"),
    "missing reference child joint": (
        variant(extra='<coupling name="belt" joint="motor"><reference joint="crank" ratio="1"/>'
                      '<reference joint="foo" ratio="2"/></coupling>'),
        E + r"<reference> in <coupling name='belt'>: joint 'foo' does not exist"),
    "duplicate name": (variant(extra=GEAR.replace('"gear"', '"closure"')),
                       E + r"<coupling name='closure'>: duplicate constraint name"),
    "unknown independent joint": (variant('joints="crank"', 'joints="foo"'),
                                  E + r"<independent>: no movable joint named \['foo'\]"),
    "independent joint in no loop": (variant('joints="crank"', 'joints="crank puck"'),
                                     E + r"<independent>: joints \['puck'\] are in no loop"),
    "too many independent joints": (variant('joints="crank"', 'joints="crank coupler"'),
                                     E + r"<independent>: .*<loop name='closure'> need 1 independent joint\(s\), "
                                         r"got \['crank', 'coupler'\]"),
    "independent without joints": (variant('joints="crank"', ""), E + r"<independent>: missing attribute 'joints'"),
    "no freedom": (variant('"closure" type="planar">', '"closure" type="revolute">'),
                   E + r"<loop name='closure'>: 5 constraint rows leave no degree of freedom .*type=\"planar\""),
    "no freedom, coupled": (
        variant(extra=GEAR + '<coupling name="gear2" joint="crank" reference="rocker" ratio="1"/>'),
        E + r"<loop name='closure'>, <coupling name='gear'>, <coupling name='gear2'>: 4 constraint rows leave no "),
    "cannot be closed": (variant('<link2 link="rocker" xyz="0 0 0.12"/>', '<link2 link="rocker" xyz="0 0 0.5"/>'),
                         E + r"<loop name='closure'>: the loop cannot be closed.*pass a q_reference near an assembled"),
}


@pytest.mark.parametrize("text, message", ERRORS.values(), ids=ERRORS.keys())
def test_errors_name_the_file_and_the_element(text, message):
    with pytest.raises(jaxmb.ModelError, match=message):
        loops.load_urdf_string(text, source="test.urdf")


@pytest.mark.parametrize("mimic, message, in_tree", [
    ('joint="foo"', r"<mimic> in <joint name='finger_b'>: joint 'foo' does not exist", False),
    ('multiplier="2"', r"<mimic> in <joint name='finger_b'>: missing attribute 'joint'", True),
    ('joint="finger_a" multiplier="x"', r"<mimic> in <joint name='finger_b'>: attribute multiplier='x' is not", False),
])
def test_mimic_errors(mimic, message, in_tree):
    """A mimic that names no joint is an error whether or not it is enforced; one that names a missing joint, or
    has a bad multiplier, only where it is (mimic=True): unenforced, the mimic warning names it (as Pinocchio
    loads such files)."""
    text = GRIPPER.replace('joint="finger_a" MIMIC', mimic)
    if in_tree:
        with pytest.raises(jaxmb.ModelError, match=r"g\.urdf: " + message):
            loops.load_urdf_string(text, source="g.urdf")
    else:
        with pytest.warns(UserWarning, match="independent coordinates"):
            assert loops.load_urdf_string(text, source="g.urdf").ny == 3  # mimic=False ignores the multiplier
    with pytest.raises(jaxmb.ModelError, match=r"g\.urdf: " + message):
        loops.load_urdf_string(text, source="g.urdf", mimic=True)


def test_file_errors_name_the_path(tmp_path):
    path = tmp_path / "bad.urdf"
    path.write_text(variant('<link1 link="coupler"', '<link1 link="foo"'))
    with pytest.raises(jaxmb.ModelError, match=re.escape(str(path)) + r": <loop name='closure'>: link 'foo'"):
        loops.load_urdf(path)
    with pytest.raises(jaxmb.ModelError, match="cannot read"):
        loops.load_urdf(tmp_path / "missing.urdf")
