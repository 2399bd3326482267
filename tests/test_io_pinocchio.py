"""`jaxmb.io.pinocchio`: `PinocchioMap`'s converters round-trip on every joint kind and are the same states in both
libraries (Pinocchio's own crba, rnea, aba and forward kinematics at converted states equal jaxmb's); `to_pinocchio`
builds that Pinocchio model from a jaxmb one, and `from_pinocchio` undoes it."""

import functools
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxmb
from jaxmb import joints
from jaxmb.io.pinocchio import (
    UNLIMITED,
    PinocchioMap,
    force_from_pin,
    force_to_pin,
    from_pinocchio,
    motion_from_pin,
    motion_to_pin,
    pinocchio_module,
    pose_from_pin,
    pose_to_pin,
    swap_spatial,
    to_pinocchio,
)
from jaxmb.rotation import rpy_to_matrix
from jaxmb.spatial import Transform, compose
from jaxmb.testing import random_inertia, random_model
from pinocchio_bridge import compile_fast, load_jaxmb, load_pinocchio, run_fast

pytestmark = [pytest.mark.filterwarnings("ignore:.*triangle inequality.*:UserWarning"),
              pytest.mark.filterwarnings("ignore:.*mimic.*:UserWarning")]

RTOL = {"to_pinocchio": 1e-12, "urdf": 1e-9}  # Pinocchio against jaxmb, relative to the norm of Pinocchio's result,
# for a model exported by `to_pinocchio` and for Pinocchio's own reading of the URDF file
N_STATES = 3


def _every_screw_joint():
    """Continuous joints about z and about an oblique axis, revolute and prismatic joints along axes with limits, a
    helical joint, a revolute joint about -z, a free joint inside the tree; a frame on a body and one on the world;
    armature."""
    rng = np.random.default_rng(5)
    b = jaxmb.ModelBuilder("screws")

    def add(name, parent, joint):
        m, c, I = random_inertia(rng)
        placement = (np.asarray(rpy_to_matrix(rng.uniform(-1.0, 1.0, 3))), rng.uniform(-0.3, 0.3, 3))
        b.add_body(name, parent, joint, joint_name=f"{name}_joint", placement=placement, mass=m, com=c, inertia=I,
                   armature=rng.uniform(0.01, 0.1, joint.kind.nv))

    add("turntable", None, joints.continuous((0, 0, 1)))
    add("arm", "turntable", joints.revolute((0, 1, 0), lower=-1.0, upper=2.0))
    add("slider", "arm", joints.prismatic((1, 0, 0), lower=-0.1, upper=0.3))
    add("wheel", "arm", joints.continuous((0.0, 0.6, 0.8)))
    add("screw", "slider", joints.helical((0, 0, 1), pitch=0.05))
    add("flipped", "turntable", joints.revolute((0, 0, -1)))
    add("drone", "flipped", joints.free())
    b.add_frame("tool", "screw", (np.eye(3), (0.0, 0.0, 0.1)))
    b.add_frame("camera", None, (np.eye(3), (1.0, 0.0, 2.0)))
    return b.build()


def _kinova():
    """kinova from its URDF (continuous joints) with a free base, given armature (URDFs carry none)."""
    model = load_jaxmb("kinova", floating_base=True)
    return model.replace(armature=jnp.asarray(np.random.default_rng(2).uniform(0.01, 0.2, model.nv)))


MODELS = {
    "screws": _every_screw_joint,
    # free base, revolute, prismatic, helical (oblique axes), spherical and planar joints, armature
    "random_tree": lambda: random_model(9, n_bodies=10, joint_mix="mixed", floating_base=True, armature=True),
    "kinova": _kinova,
}


def _evaluate(model, q, qd, qdd, tau):
    return (jaxmb.mass_matrix(model, q), jaxmb.inverse_dynamics(model, q, qd, qdd),
            jaxmb.forward_dynamics(model, q, qd, tau), jaxmb.forward_kinematics(model, q))


class Robot(NamedTuple):
    model: jaxmb.Model
    evaluate: object  # `_evaluate` compiled for the model, called with it (or a model of the same structure)
    states: tuple  # q (n, nq), qd, qdd, tau (n, nv)
    results: tuple  # `_evaluate`'s values per state, stacked


@functools.cache
def _robot(name) -> Robot:
    """A model, its program and its results at a few random states (compiled once per module run)."""
    model = MODELS[name]()
    keys = jnp.stack([jax.random.PRNGKey(s) for s in range(N_STATES)])
    q = np.asarray(run_fast(jax.vmap(jaxmb.random_configuration, (None, 0)), model, keys))
    rng = np.random.default_rng(len(name))
    qd, qdd, tau = (rng.standard_normal((N_STATES, model.nv)) for _ in range(3))
    evaluate = compile_fast(jax.jit(_evaluate), model, q[0], qd[0], qdd[0], tau[0])
    out = [evaluate(model, q[s], qd[s], qdd[s], tau[s]) for s in range(N_STATES)]
    results = jax.tree.map(lambda *x: np.stack(x), *out)
    return Robot(model, evaluate, (q, qd, qdd, tau), results)


def _pinocchio_model(name, source):
    """Pinocchio's model of robot ``name``: by `to_pinocchio`, or by Pinocchio's URDF reader (with the jaxmb
    model's armature, through the map)."""
    model = _robot(name).model
    if source == "to_pinocchio":
        return to_pinocchio(model)
    pm = load_pinocchio(name, floating_base=True)
    pm.armature = PinocchioMap(model, pm).v_to_pin(model.armature)
    return pm


CASES = [("screws", "to_pinocchio"), ("random_tree", "to_pinocchio"), ("kinova", "to_pinocchio"), ("kinova", "urdf")]


class Case(NamedTuple):
    robot: Robot
    pm: object  # the Pinocchio model
    pmap: PinocchioMap
    source: str  # "to_pinocchio" or "urdf" (Pinocchio's URDF reader)


@pytest.fixture(scope="module", params=CASES, ids=[f"{n}-{s}" for n, s in CASES])
def case(request):
    name, source = request.param
    robot = _robot(name)
    pm = _pinocchio_model(name, source)
    return Case(robot, pm, PinocchioMap(robot.model, pm), source)


def _relative(x, y):
    return np.linalg.norm(np.asarray(x) - y) / np.linalg.norm(y)


# -- configurations ----------------------------------------------------------------------------------------------------


def test_q_round_trip(case):
    """jaxmb -> Pinocchio -> jaxmb gives the configurations back, batched or one at a time; Pinocchio's are
    normalized (unit quaternions, (cos, sin) pairs), and its own random configurations come back too."""
    robot, pm, pmap, _ = case
    Q = robot.states[0]
    Q_pin = pmap.q_to_pin(Q)
    assert Q_pin.shape == (N_STATES, pm.nq) and Q_pin.dtype == np.float64
    np.testing.assert_allclose(pmap.q_from_pin(Q_pin), Q, rtol=0, atol=1e-14)
    for q, q_pin in zip(Q, Q_pin):
        np.testing.assert_array_equal(pmap.q_to_pin(q), q_pin)
        assert pin.isNormalized(pm, q_pin)
    lower = np.clip(pm.lowerPositionLimit, -1.0, 1.0)
    upper = np.clip(pm.upperPositionLimit, -1.0, 1.0)
    for _ in range(3):
        q_pin = pin.randomConfiguration(pm, lower, upper)
        np.testing.assert_allclose(pmap.q_to_pin(pmap.q_from_pin(q_pin)), q_pin, rtol=0, atol=1e-14)


def test_neutral_configurations_correspond(case):
    robot, pm, pmap, _ = case
    q0 = np.asarray(jaxmb.neutral_configuration(robot.model))
    np.testing.assert_array_equal(pmap.q_to_pin(q0), pin.neutral(pm))
    np.testing.assert_array_equal(pmap.q_from_pin(pin.neutral(pm)), q0)


def test_limits_correspond(case):
    """Position limits sit at the same coordinates, jaxmb's infinite ones as Pinocchio's largest float; `to_pinocchio`
    gives the (cos, sin) coordinates no limits (Pinocchio's URDF reader gives them +-1.01)."""
    robot, pm, pmap, source = case
    copies = pmap.q_to_pin(np.full(robot.model.nq, 5.0)) == 5.0  # not a cosine or sine
    assert np.sum(~copies) == 2 * sum(robot.model.joint_types.count(t) for t in ("continuous", "planar"))
    for limit, limit_pin, unlimited in ((robot.model.q_lower, pm.lowerPositionLimit, -UNLIMITED),
                                        (robot.model.q_upper, pm.upperPositionLimit, UNLIMITED)):
        expected = pmap.q_limits_to_pin(limit, unlimited)
        assert np.sum(np.abs(expected) < UNLIMITED) == np.isfinite(limit).sum()
        np.testing.assert_array_equal(limit_pin[copies], expected[copies])
        if source == "to_pinocchio":
            np.testing.assert_array_equal(limit_pin, expected)


# -- velocities, accelerations, forces, matrices, Jacobians ------------------------------------------------------------


def test_velocity_permutation(case):
    """``v_pin = P v`` with ``P`` an orthogonal permutation; matrices map as ``P M P*``, Jacobians as ``S J P*``."""
    robot, pm, pmap, _ = case
    model = robot.model
    P = pmap.P
    assert P.shape == (pm.nv, model.nv) and set(np.unique(P)) == {0.0, 1.0}
    np.testing.assert_array_equal(P @ P.T, np.eye(model.nv))
    V = robot.states[1]
    np.testing.assert_array_equal(pmap.v_to_pin(V), V @ P.T)
    np.testing.assert_array_equal(pmap.v_from_pin(pmap.v_to_pin(V)), V)
    np.testing.assert_array_equal(pmap.tau_from_pin(pmap.tau_to_pin(V[0])), V[0])
    A = np.random.default_rng(0).standard_normal((2, model.nv, model.nv))
    np.testing.assert_array_equal(pmap.matrix_to_pin(A), P @ A @ P.T)
    np.testing.assert_array_equal(pmap.matrix_from_pin(pmap.matrix_to_pin(A)), A)
    S = np.block([[np.zeros((3, 3)), np.eye(3)], [np.eye(3), np.zeros((3, 3))]])
    J = np.random.default_rng(1).standard_normal((2, 6, model.nv))
    np.testing.assert_array_equal(pmap.jacobian_to_pin(J), S @ J @ P.T)
    np.testing.assert_array_equal(pmap.jacobian_from_pin(pmap.jacobian_to_pin(J)), J)


def test_pinocchio_dynamics_equal_jaxmb(case):
    """Pinocchio's crba, rnea, aba and joint placements at the converted states, converted back, are jaxmb's mass
    matrix, inverse and forward dynamics and body poses; the Jacobians of the two libraries give the same body
    velocities."""
    robot, pm, pmap, source = case
    d = pm.createData()
    M, ID, FD, poses = robot.results
    rtol = RTOL[source]
    for s, (q, qd, qdd, tau) in enumerate(zip(*robot.states)):
        q_pin, v_pin = pmap.q_to_pin(q), pmap.v_to_pin(qd)
        assert _relative(M[s], pmap.matrix_from_pin(pin.crba(pm, d, q_pin))) <= rtol
        assert _relative(ID[s], pmap.tau_from_pin(pin.rnea(pm, d, q_pin, v_pin, pmap.v_to_pin(qdd)))) <= rtol
        assert _relative(FD[s], pmap.v_from_pin(pin.aba(pm, d, q_pin, v_pin, pmap.tau_to_pin(tau)))) <= rtol
        pin.forwardKinematics(pm, d, q_pin, v_pin)
        R, p = pmap.body_poses_from_pin(d.oMi)
        np.testing.assert_allclose(R, poses.R[s], rtol=0, atol=1e-12)
        np.testing.assert_allclose(p, poses.p[s], rtol=0, atol=1e-12)
        pin.computeJointJacobians(pm, d, q_pin)
        J = np.stack([pmap.jacobian_from_pin(pin.getJointJacobian(pm, d, int(j), pin.LOCAL))
                      for j in pmap.joint_ids])
        np.testing.assert_allclose(J @ qd, pmap.body_motions_from_pin(d.v), rtol=0, atol=1e-12)


def test_body_forces_agree_with_jacobians(case):
    """rnea(f_ext) - rnea() = -sum_k J(k)* f(k): forces, Jacobians and torques convert consistently."""
    robot, pm, pmap, _ = case
    model = robot.model
    f = np.random.default_rng(3).standard_normal((model.nb, 6))
    f_pin = pmap.body_forces_to_pin(f)
    assert len(f_pin) == pm.njoints and np.all(f_pin[0].vector == 0)
    np.testing.assert_array_equal(pmap.body_forces_from_pin(f_pin), f)
    d = pm.createData()
    q_pin, zero = pmap.q_to_pin(robot.states[0][1]), np.zeros(pm.nv)
    delta = pmap.tau_from_pin(pin.rnea(pm, d, q_pin, zero, zero, f_pin) - pin.rnea(pm, d, q_pin, zero, zero))
    pin.computeJointJacobians(pm, d, q_pin)
    expected = -sum(pmap.jacobian_from_pin(pin.getJointJacobian(pm, d, int(j), pin.LOCAL)).T @ f[i]
                    for i, j in enumerate(pmap.joint_ids))
    np.testing.assert_allclose(delta, expected, rtol=0, atol=1e-11 * np.abs(expected).max())


def test_frames_correspond(case):
    """Every jaxmb frame is a Pinocchio frame of the same name, on the same body, at the same placement."""
    robot, pm, pmap, _ = case
    model = robot.model
    assert list(pmap.body_of_joint[pmap.joint_ids]) == list(range(model.nb)) and pmap.body_of_joint[0] == -1
    for k, name in enumerate(model.frame_names):
        frame = pm.frames[pmap.frame_id(name)]
        assert frame.name == name and pmap.frame_body(name) == model.frame_body[k]
        np.testing.assert_allclose(frame.placement.rotation, model.frame_placement.R[k], rtol=0, atol=1e-15)
        np.testing.assert_allclose(frame.placement.translation, model.frame_placement.p[k], rtol=0, atol=1e-15)
    with pytest.raises(KeyError, match="no_such_frame"):
        pmap.frame_id("no_such_frame")


# -- models ------------------------------------------------------------------------------------------------------------


def _assert_same_model(a, b, atol=1e-15):
    assert (a.name, a.body_names, a.joint_names, a.joint_types) == (b.name, b.body_names, b.joint_names, b.joint_types)
    assert (a.frame_names, a.frame_body) == (b.frame_names, b.frame_body)
    assert a.topology == b.topology
    for field, x, y in zip(("X_tree.R", "X_tree.p", "axis", "coef", "mass", "com", "inertia", "gravity", "q_lower",
                            "q_upper", "armature", "frame_placement.R", "frame_placement.p"),
                           jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(x, y, rtol=1e-15, atol=atol, err_msg=field)


@pytest.mark.parametrize("name", list(MODELS))
def test_model_round_trip(name):
    """jaxmb -> Pinocchio -> jaxmb gives the model back: names, numbering, frames and parameters (to rounding), and
    its dynamics from the program compiled for the original (the same structure)."""
    robot = _robot(name)
    model = robot.model
    back = from_pinocchio(to_pinocchio(model))
    _assert_same_model(model, back)
    back = back.replace(notes=model.notes)  # the loader's messages
    for s in range(N_STATES):
        ours = robot.evaluate(back, *(x[s] for x in robot.states))
        for x, y in zip(jax.tree.leaves(ours), jax.tree.leaves(robot.results)):
            assert _relative(x, y[s]) <= 1e-13


@pytest.mark.parametrize("robot_name", ["kinova", "talos_full_v2"])
def test_from_pinocchio_of_a_urdf_model(robot_name):
    """`from_pinocchio` of Pinocchio's URDF model is jaxmb's URDF model, joint by joint and frame by frame (numbered
    in Pinocchio's frame order, which may differ from the file's)."""
    ours, pm = load_jaxmb(robot_name, floating_base=True), load_pinocchio(robot_name, floating_base=True)
    model = from_pinocchio(pm)
    assert set(model.joint_names) == set(ours.joint_names) and model.joint_names[0] == "root"
    for name in ours.joint_names:
        i, k = ours.joint_index(name), model.joint_index(name)
        assert (model.joint_types[k], model.body_names[k]) == (ours.joint_types[i], ours.body_names[i])
        for field in ("axis", "coef", "mass", "com", "inertia"):
            np.testing.assert_allclose(getattr(model, field)[k], getattr(ours, field)[i], rtol=1e-12, atol=1e-12,
                                       err_msg=f"{name}: {field}")
        np.testing.assert_allclose(model.X_tree.R[k], ours.X_tree.R[i], rtol=0, atol=1e-15)
        np.testing.assert_allclose(model.X_tree.p[k], ours.X_tree.p[i], rtol=0, atol=1e-15)
        q, q_ours = model.joint_coordinates(name)[0], ours.joint_coordinates(name)[0]
        np.testing.assert_array_equal(model.q_lower[q], ours.q_lower[q_ours])
        np.testing.assert_array_equal(model.q_upper[q], ours.q_upper[q_ours])
    assert set(model.frame_names) == set(ours.frame_names)
    for name in ours.frame_names:
        i, k = ours.frame_index(name), model.frame_index(name)
        body_i, body_k = ours.frame_body[i], model.frame_body[k]
        assert (body_i < 0 and body_k < 0) or ours.body_names[body_i] == model.body_names[body_k], name
        np.testing.assert_allclose(model.frame_placement.R[k], ours.frame_placement.R[i], rtol=0, atol=1e-15)
        np.testing.assert_allclose(model.frame_placement.p[k], ours.frame_placement.p[i], rtol=0, atol=1e-15)
    PinocchioMap(model, pm)  # the states convert


def test_free_base_names():
    """The free base's names are an option of every converter."""
    model = _robot("kinova").model
    pm = to_pinocchio(model, free_base_names=("root", "base_free"))
    assert pm.names[1] == "base_free" and pm.joints[1].shortname() == "JointModelFreeFlyer"
    PinocchioMap(model, pm, free_base_names=("root", "base_free"))
    with pytest.raises(jaxmb.ModelError, match="no joint 'root_joint'"):
        PinocchioMap(model, pm)
    assert from_pinocchio(pm, free_base_names=("floating", "base_free")).joint_names[0] == "floating"
    assert from_pinocchio(pm).joint_names[0] == "base_free"


# -- spatial vectors, poses, tracing -----------------------------------------------------------------------------------


def test_spatial_vectors_and_poses():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(6)
    m, f = motion_to_pin(x), force_to_pin(x)
    np.testing.assert_array_equal(m.angular, x[:3])
    np.testing.assert_array_equal(m.linear, x[3:])
    np.testing.assert_array_equal(m.vector, swap_spatial(x))  # Pinocchio's [linear; angular]
    np.testing.assert_array_equal(f.vector, swap_spatial(x))
    np.testing.assert_array_equal(motion_from_pin(m), x)
    np.testing.assert_array_equal(force_from_pin(f), x)
    X = rng.standard_normal((3, 6))
    np.testing.assert_array_equal(motion_from_pin(motion_to_pin(X)), X)
    np.testing.assert_array_equal(force_from_pin(force_to_pin(X)), X)
    np.testing.assert_array_equal(swap_spatial(swap_spatial(rng.standard_normal((2, 6, 4)), -2), -2).shape, (2, 6, 4))
    with pytest.raises(ValueError, match="length 6"):
        swap_spatial(np.zeros(5))

    poses = [pin.SE3.Random() for _ in range(3)]
    T = pose_from_pin(poses)
    assert T.R.shape == (3, 3, 3) and T.p.shape == (3, 3)
    for M, back in zip(poses, pose_to_pin(T)):
        assert back.isApprox(M, 0.0)
    A, B = pose_from_pin(poses[0]), pose_from_pin(poses[1])
    assert pose_to_pin(compose(A, B)).isApprox(poses[0] * poses[1], 1e-15)
    point = rng.standard_normal(3)
    np.testing.assert_allclose(poses[0].act(point), A.R @ point + A.p, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="pose"):
        pose_to_pin(Transform(np.eye(3), np.zeros(2)))


def test_converters_trace_under_jit_vmap_and_grad():
    """Traced, the converters compute with jax.numpy: jit and vmap give the numpy values, and the configuration
    round trip has the identity as its derivative."""
    robot = _robot("screws")
    pmap = PinocchioMap(robot.model, to_pinocchio(robot.model))
    Q, V = robot.states[0], robot.states[1]
    np.testing.assert_allclose(jax.jit(pmap.q_to_pin)(jnp.asarray(Q)), pmap.q_to_pin(Q), rtol=0, atol=1e-15)
    np.testing.assert_allclose(jax.vmap(pmap.q_from_pin)(jnp.asarray(pmap.q_to_pin(Q))), Q, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(jax.jit(pmap.v_to_pin)(jnp.asarray(V)), pmap.v_to_pin(V))
    J = jnp.asarray(np.random.default_rng(0).standard_normal((6, robot.model.nv)))
    np.testing.assert_array_equal(jax.jit(pmap.jacobian_to_pin)(J), pmap.jacobian_to_pin(np.asarray(J)))
    identity = jax.jacfwd(lambda q: pmap.q_from_pin(pmap.q_to_pin(q)))(jnp.asarray(Q[0]))
    np.testing.assert_allclose(identity, np.eye(robot.model.nq), rtol=0, atol=1e-14)
    assert isinstance(pmap.q_to_pin(jnp.asarray(Q[0])), np.ndarray)  # concrete arrays give numpy, for Pinocchio


# -- clear errors ------------------------------------------------------------------------------------------------------


def _two_links(parent_of_second):
    rng = np.random.default_rng(0)
    b = jaxmb.ModelBuilder("two")
    for name, parent in (("a", None), ("b", parent_of_second)):
        m, c, I = random_inertia(rng)
        b.add_body(name, parent, joints.revolute((0, 1, 0)), placement=(np.eye(3), (0.1, 0, 0)), mass=m, com=c,
                   inertia=I)
    return b.build()


def test_mismatched_models_raise():
    model = _robot("screws").model
    with pytest.raises(jaxmb.ModelError, match="nv="):
        PinocchioMap(model, to_pinocchio(_robot("random_tree").model))
    renamed = tuple("elbow" if n == "arm_joint" else n for n in model.joint_names)
    with pytest.raises(jaxmb.ModelError, match="Pinocchio has no joint 'arm_joint'"):
        PinocchioMap(model, to_pinocchio(model.replace(joint_names=renamed)))
    tree = _robot("random_tree").model
    ball, plane = tree.topology.kinds.index("spherical"), tree.topology.kinds.index("planar")
    swapped = list(tree.joint_names)
    swapped[ball], swapped[plane] = swapped[plane], swapped[ball]
    with pytest.raises(jaxmb.ModelError, match=r"is a (spherical|planar) joint in jaxmb but a JointModel(Planar|Sph)"):
        PinocchioMap(tree, to_pinocchio(tree.replace(joint_names=tuple(swapped))))
    with pytest.raises(jaxmb.ModelError, match="joint 'b' has parent 'universe' in Pinocchio but 'a' in jaxmb"):
        PinocchioMap(_two_links("a"), to_pinocchio(_two_links(None)))
    pmap = PinocchioMap(model, to_pinocchio(model))
    with pytest.raises(ValueError, match=rf"q must have shape \(\.\.\., {model.nq}\)"):
        pmap.q_to_pin(np.zeros(model.nq + 1))
    with pytest.raises(ValueError, match="body forces"):
        pmap.body_forces_to_pin(np.zeros((model.nb, 3)))


def test_joints_one_library_lacks_raise():
    b = jaxmb.ModelBuilder("tilted")
    b.add_body("slab", None, joints.planar((1.0, 0.0, 0.0)), joint_name="plane", mass=1.0, inertia=np.eye(3))
    with pytest.raises(jaxmb.ModelError, match="joint 'plane' is planar in the plane normal to .* xy-plane"):
        to_pinocchio(b.build())
    model = _two_links("a")
    with pytest.raises(jaxmb.ModelError, match=r"joint 'b' is a screw joint with coefficients \(c_w, c_v\) = \(2"):
        to_pinocchio(model.replace(coef=model.coef.at[1].set(jnp.array([2.0, 0.0]))))
    pm = pin.Model()
    pm.addJoint(0, pin.JointModelSphericalZYX(), pin.SE3.Identity(), "zyx")
    with pytest.raises(jaxmb.ModelError, match="joint 'zyx' is a JointModelSphericalZYX, which jaxmb lacks"):
        from_pinocchio(pm)


def test_missing_pinocchio_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pinocchio", None)
    with pytest.raises(ImportError, match=r"jaxmb\[pinocchio\]"):
        pinocchio_module()
