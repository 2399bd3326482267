"""The jaxmb <-> Pinocchio converters of `jaxmb.io.pinocchio` on the robot pairs of `pinocchio_bridge` round-trip
and agree with each other (and with Pinocchio's own kinematics), so that the oracle tests compare like with like."""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxmb
from jaxmb import joints
from jaxmb.io.pinocchio import (
    PinocchioMap,
    force_from_pin,
    force_to_pin,
    motion_from_pin,
    motion_to_pin,
    swap_spatial,
)
from pinocchio_bridge import ROBOTS, load_pair, merged_frames, robots_dir, run_fast, urdf_path

jax.config.update("jax_enable_x64", True)  # also set in conftest.py; harmless duplicate

# a planar joint at the base, a continuous joint, and a floating joint inside the tree
MIXED_URDF = """<robot name="mixed">
  <link name="ground"><inertial><mass value="3"/><inertia ixx="0.2" ixy="0" ixz="0" iyy="0.3" iyz="0" izz="0.4"/></inertial></link>
  <link name="a"><inertial><origin xyz="0.1 0.2 0.05" rpy="0.1 0.2 0.3"/><mass value="2"/>
    <inertia ixx="0.3" ixy="0.01" ixz="0.02" iyy="0.4" iyz="0.03" izz="0.5"/></inertial></link>
  <link name="b"><inertial><origin xyz="0 0.3 0.1"/><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.15"/></inertial></link>
  <link name="c"><inertial><origin xyz="0.2 0 0"/><mass value="0.5"/><inertia ixx="0.05" ixy="0" ixz="0" iyy="0.06" iyz="0" izz="0.07"/></inertial></link>
  <link name="tip"/>
  <joint name="j_planar" type="planar"><parent link="ground"/><child link="a"/><origin xyz="0.1 0 0.2" rpy="0.3 0 0"/><axis xyz="0 0 1"/></joint>
  <joint name="j_cont" type="continuous"><parent link="a"/><child link="b"/><origin xyz="0 0 0.3"/><axis xyz="0 1 0"/></joint>
  <joint name="j_float" type="floating"><parent link="b"/><child link="c"/><origin xyz="0 0.1 0.3" rpy="0 0.4 0"/></joint>
  <joint name="j_tip" type="fixed"><parent link="c"/><child link="tip"/><origin xyz="0.3 0 0" rpy="0 0 0.5"/></joint>
</robot>"""


def _mixed(floating):
    model = jaxmb.load_urdf_string(MIXED_URDF, floating_base=floating, source="mixed.urdf")
    pm = pin.buildModelFromXML(MIXED_URDF, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromXML(MIXED_URDF)
    return model, pm, PinocchioMap(model, pm)


def _spherical():
    """A spherical joint (not expressible in URDF) built in both libraries by hand."""
    R0 = pin.utils.rpyToMatrix(0.2, -0.1, 0.4)
    p0, p1 = np.array([0.1, 0.0, 0.5]), np.array([0.0, 0.2, 0.3])
    I1, I2 = np.diag([0.1, 0.2, 0.25]), np.diag([0.05, 0.04, 0.03])
    c1, c2 = np.array([0.0, 0.0, 0.2]), np.array([0.1, 0.0, 0.1])
    b = jaxmb.ModelBuilder("spherical")
    b.add_body("ball", None, joints.spherical(), joint_name="ball_joint", placement=(R0, p0), mass=2.0, com=c1,
               inertia=I1)
    b.add_body("arm", "ball", joints.revolute((0, 1, 0)), joint_name="elbow", placement=(np.eye(3), p1), mass=1.0,
               com=c2, inertia=I2)
    model = b.build()
    pm = pin.Model()
    j1 = pm.addJoint(0, pin.JointModelSpherical(), pin.SE3(R0, p0), "ball_joint")
    pm.appendBodyToJoint(j1, pin.Inertia(2.0, c1, I1), pin.SE3.Identity())
    pm.addBodyFrame("ball", j1, pin.SE3.Identity(), 0)
    j2 = pm.addJoint(j1, pin.JointModelRY(), pin.SE3(np.eye(3), p1), "elbow")
    pm.appendBodyToJoint(j2, pin.Inertia(1.0, c2, I2), pin.SE3.Identity())
    pm.addBodyFrame("arm", j2, pin.SE3.Identity(), 0)
    return model, pm, PinocchioMap(model, pm)


CASES = {
    "kinova-fixed": lambda: load_pair("kinova", False),  # continuous joints
    "kinova-free": lambda: load_pair("kinova", True),
    "panda-free": lambda: load_pair("panda", True),  # prismatic joints, a mimic joint
    "mixed-fixed": lambda: _mixed(False),  # planar, continuous, floating inside the tree
    "mixed-free": lambda: _mixed(True),
    "spherical": _spherical,
}


@pytest.fixture(scope="module", params=list(CASES))
def pair(request):
    model, pm, br = CASES[request.param]()
    keys = jax.random.split(jax.random.PRNGKey(7), 4)
    q = np.asarray(run_fast(jax.vmap(jaxmb.random_configuration, (None, 0)), model, keys))
    rng = np.random.default_rng(7)
    return model, pm, br, q, rng.standard_normal((4, model.nv))


# -- files -----------------------------------------------------------------------------------------------------------


def test_robot_files():
    d = robots_dir()
    assert d.is_dir() and d.parts[-3:] == ("share", "example-robot-data", "robots")
    assert len(list(d.glob("**/*.urdf"))) >= 60
    for name in ROBOTS:
        assert urdf_path(name).is_file(), name
    assert urdf_path("z1.urdf") == urdf_path("z1")
    with pytest.raises(FileNotFoundError):
        urdf_path("no_such_robot")


def test_bridge_rejects_different_models():
    model, _, _ = load_pair("kinova", False)
    with pytest.raises(ValueError, match="nv"):
        PinocchioMap(model, pin.buildModelFromUrdf(str(urdf_path("kinova")), pin.JointModelFreeFlyer()))
    with pytest.raises(ValueError):
        PinocchioMap(model, pin.buildModelFromUrdf(str(urdf_path("ur5"))))  # same nv, other joints


# -- configurations --------------------------------------------------------------------------------------------------


def test_q_round_trip(pair):
    model, pm, br, Q, _ = pair
    Q_pin = br.q_to_pin(Q)  # batched
    assert Q_pin.shape == (len(Q), pm.nq)
    np.testing.assert_allclose(br.q_from_pin(Q_pin), Q, rtol=0, atol=1e-14)
    for q, q_pin in zip(Q, Q_pin):
        np.testing.assert_array_equal(br.q_to_pin(q), q_pin)
        assert pin.isNormalized(pm, q_pin)  # unit quaternions and (cos, sin) pairs
        np.testing.assert_allclose(br.q_to_pin(br.q_from_pin(q_pin)), q_pin, rtol=0, atol=1e-14)


def test_neutral_configuration(pair):
    model, pm, br, _, _ = pair
    q0 = np.asarray(jaxmb.neutral_configuration(model))
    np.testing.assert_array_equal(br.q_to_pin(q0), pin.neutral(pm))
    np.testing.assert_array_equal(br.q_from_pin(pin.neutral(pm)), q0)


def test_continuous_joint_coordinates():
    """An angle becomes Pinocchio's (cos, sin) pair, and Pinocchio's joint then turns by that angle."""
    model, pm, br = load_pair("double_pendulum_continuous")
    assert (model.nq, pm.nq) == (2, 4) and br.layouts == ("unbounded", "unbounded")
    q = np.array([0.7, -2.9])
    q_pin = br.q_to_pin(q)
    d = pm.createData()
    pin.forwardKinematics(pm, d, q_pin)
    for i in range(model.nb):
        j = int(br.joint_ids[i])
        jm = pm.joints[j]
        np.testing.assert_allclose(q_pin[jm.idx_q : jm.idx_q + 2], [np.cos(q[i]), np.sin(q[i])], atol=1e-16)
        axis = np.asarray(model.axis[i])
        turn = pm.jointPlacements[j].rotation.T @ d.liMi[j].rotation
        np.testing.assert_allclose(turn, pin.AngleAxis(q[i], axis).matrix(), atol=1e-15)
    np.testing.assert_allclose(br.q_from_pin(q_pin), q, atol=1e-15)


def test_free_flyer_conversion():
    """jaxmb [p, w, x, y, z] / [omega; v] against Pinocchio's root joint placement and local velocity."""
    model, pm, br = load_pair("kinova", True)
    assert model.joint_names[0] == "root" and pm.names[int(br.joint_ids[0])] == "root_joint"
    q = np.asarray(run_fast(jaxmb.random_configuration, model, jax.random.PRNGKey(1)))
    qd = np.random.default_rng(1).standard_normal(model.nv)
    d = pm.createData()
    pin.forwardKinematics(pm, d, br.q_to_pin(q), br.v_to_pin(qd))
    root = int(br.joint_ids[0])
    w, x, y, z = q[3:7]
    np.testing.assert_allclose(d.oMi[root].rotation, pin.Quaternion(w, x, y, z).matrix(), atol=1e-15)
    np.testing.assert_allclose(d.oMi[root].translation, q[:3], atol=1e-15)
    np.testing.assert_allclose(d.v[root].angular, qd[:3], atol=1e-15)
    np.testing.assert_allclose(d.v[root].linear, qd[3:6], atol=1e-15)


# -- velocities, forces, matrices ---------------------------------------------------------------------------------------


def test_velocity_permutation(pair):
    model, pm, br, _, V = pair
    P = br.P
    assert P.shape == (pm.nv, model.nv)
    np.testing.assert_array_equal(P @ P.T, np.eye(model.nv))
    assert set(np.unique(P)) <= {0.0, 1.0}
    np.testing.assert_array_equal(br.v_to_pin(V), V @ P.T)
    np.testing.assert_array_equal(br.v_from_pin(br.v_to_pin(V)), V)
    np.testing.assert_array_equal(br.tau_to_pin(V[0]), P @ V[0])
    A = np.arange(model.nv**2, dtype=float).reshape(model.nv, model.nv)
    np.testing.assert_array_equal(br.matrix_from_pin(P @ A @ P.T), A)


def test_kinetic_energy_is_invariant(pair):
    """1/2 v* M v is the same number in both libraries' coordinates, and M_pin = P M P*."""
    model, pm, br, Q, V = pair
    d = pm.createData()
    Ms = run_fast(jax.vmap(jaxmb.mass_matrix, (None, 0)), model, jnp.asarray(Q[:2]))
    for q, v, M in zip(Q[:2], V[:2], np.asarray(Ms)):
        q_pin, v_pin = br.q_to_pin(q), br.v_to_pin(v)
        M_pin = pin.crba(pm, d, q_pin)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        np.testing.assert_allclose(br.P @ M @ br.P.T, M_pin, rtol=0, atol=1e-12 * np.abs(M_pin).max())
        ke = 0.5 * v @ M @ v
        assert ke > 0
        assert ke == pytest.approx(0.5 * v_pin @ M_pin @ v_pin, rel=1e-12)
        assert ke == pytest.approx(pin.computeKineticEnergy(pm, d, q_pin, v_pin), rel=1e-12)


def test_spatial_vectors():
    x = np.arange(1.0, 7.0)
    np.testing.assert_array_equal(swap_spatial(x), [4, 5, 6, 1, 2, 3])
    X = np.random.default_rng(0).standard_normal((2, 6, 5))
    np.testing.assert_array_equal(swap_spatial(swap_spatial(X, axis=-2), axis=-2), X)
    with pytest.raises(ValueError):
        swap_spatial(np.zeros(5))
    m, f = motion_to_pin(x), force_to_pin(x)
    np.testing.assert_array_equal(m.angular, x[:3])
    np.testing.assert_array_equal(m.linear, x[3:])
    np.testing.assert_array_equal(f.angular, x[:3])
    np.testing.assert_array_equal(f.linear, x[3:])
    np.testing.assert_array_equal(m.vector, swap_spatial(x))  # Pinocchio's own [linear; angular] layout
    np.testing.assert_array_equal(motion_from_pin(m), x)
    np.testing.assert_array_equal(force_from_pin(f), x)


def test_jacobians_agree_with_velocities(pair):
    """Converted Pinocchio Jacobians times jaxmb velocities give Pinocchio's body velocities, converted."""
    model, pm, br, Q, V = pair
    d = pm.createData()
    q_pin, v_pin = br.q_to_pin(Q[0]), br.v_to_pin(V[0])
    pin.forwardKinematics(pm, d, q_pin, v_pin)
    pin.computeJointJacobians(pm, d, q_pin)
    for j in br.joint_ids:
        J_pin = pin.getJointJacobian(pm, d, int(j), pin.LOCAL)
        J = br.jacobian_from_pin(J_pin)
        assert J.shape == (6, model.nv)
        np.testing.assert_allclose(J @ V[0], motion_from_pin(d.v[int(j)]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(br.jacobian_to_pin(J), J_pin, rtol=0, atol=0)
    np.testing.assert_allclose(br.body_motions_from_pin(d.v)[0], motion_from_pin(d.v[int(br.joint_ids[0])]))


def test_external_forces_agree_with_jacobians(pair):
    """rnea(fext) - rnea() = -sum_k J(k)* f(k), with jaxmb-layout forces and converted Jacobians: the force
    converter, the Jacobian converter and the torque permutation are consistent."""
    model, pm, br, Q, _ = pair
    f = np.random.default_rng(3).standard_normal((model.nb, 6))
    fext = br.body_forces_to_pin(f)
    assert len(fext) == pm.njoints and np.all(fext[0].vector == 0)
    np.testing.assert_array_equal(br.body_forces_from_pin(fext), f)
    d = pm.createData()
    q_pin, zero = br.q_to_pin(Q[1]), np.zeros(pm.nv)
    delta = br.tau_from_pin(pin.rnea(pm, d, q_pin, zero, zero, fext) - pin.rnea(pm, d, q_pin, zero, zero))
    pin.computeJointJacobians(pm, d, q_pin)
    expected = -sum(br.jacobian_from_pin(pin.getJointJacobian(pm, d, int(j), pin.LOCAL)).T @ f[i]
                    for i, j in enumerate(br.joint_ids))
    np.testing.assert_allclose(delta, expected, rtol=0, atol=1e-11 * np.abs(expected).max())


def test_poses_and_frames(pair):
    model, pm, br, Q, _ = pair
    d = pm.createData()
    pin.forwardKinematics(pm, d, br.q_to_pin(Q[2]))
    R, p = br.body_poses_from_pin(d.oMi)
    assert R.shape == (model.nb, 3, 3) and p.shape == (model.nb, 3)
    for i, j in enumerate(br.joint_ids):
        np.testing.assert_array_equal(p[i], d.oMi[int(j)].translation)
    assert list(br.body_of_joint[br.joint_ids]) == list(range(model.nb)) and br.body_of_joint[0] == -1
    for k, name in enumerate(model.frame_names):
        assert pm.frames[br.frame_id(name)].name == name
        assert br.frame_body(name) == model.frame_body[k], name
    for i, name in enumerate(model.body_names):
        assert pm.frames[br.frame_id(name)].parentJoint == br.joint_ids[i]
    assert set(merged_frames(model)) == {n for n, b in zip(model.frame_names, model.frame_body)
                                         if b >= 0 and n not in model.body_names}
    with pytest.raises(KeyError):
        br.frame_id("no_such_frame")


def test_mixed_model_kinds():
    model, pm, br = _mixed(True)
    assert br.layouts == ("free", "planar", "unbounded", "free")
    assert model.topology.kinds == ("free", "planar", "screw", "free")
    assert merged_frames(model) == ["tip"]
