"""``inertia="strict" | "warn" | "repair"``: every URDF of example-robot-data, the nearest physical inertia, the
armature that repairs a joint which moves nothing, models with no movable joint (nv = 0), and `Model.q_index` /
`Model.v_index`.

Every (file, base) case that Pinocchio loads loads with the option `NEEDS` names ("strict" where it names none),
with Pinocchio's nv, and each stricter option raises naming it (docs/inertia.md lists the cases). The survey only
loads; the dynamics are compiled for two repaired robots (romeo, against Pinocchio given the same armature, and
romeo_laas_small) and a few small models. Float64.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxmb
from checks import assert_close, fast_jit
from jaxmb import joints
from jaxmb.io.urdf import Reader, parse_robot, read_text
from jaxmb.model import INERTIA_OPTIONS, REPAIR_ARMATURE, check_inertia, nearest_physical_inertia
from pinocchio_bridge import robots_dir

RTOL = 1e-9  # float64, relative to the largest magnitude of the expected value

# The option each (file, base) case needs, as (fixed base, floating base); every other file loads with "strict".
NEEDS = {
    # principal moments that break the triangle inequality
    "alex_description/urdf/alex_psyonic_hands.urdf": ("warn", "warn"),  # and a mimic of a joint it lacks
    "allegro_hand_description/urdf/allegro_left_hand.urdf": ("warn", "warn"),
    "allegro_hand_description/urdf/allegro_right_hand.urdf": ("warn", "warn"),
    "anymal_b_simple_description/robots/anymal-kinova.urdf": ("warn", "warn"),
    "anymal_b_simple_description/robots/anymal.urdf": ("warn", "warn"),
    "anymal_c_simple_description/urdf/anymal.urdf": ("warn", "warn"),
    "b1_description/urdf/b1-z1.urdf": ("warn", "warn"),
    "b1_description/urdf/b1.urdf": ("warn", "warn"),
    "go1_description/urdf/go1.urdf": ("warn", "warn"),
    "hyq_description/robots/hyq_no_sensors.urdf": ("warn", "warn"),
    "pr2_description/urdf/pr2.urdf": ("warn", "warn"),
    "romeo_description/urdf/romeo_small.urdf": ("warn", "warn"),
    # a 1e-6 kg antenna whose inertia is not positive semi-definite, fixed to the base link
    "tiago_description/robots/tiago.urdf": ("warn", "warn"),
    "tiago_description/robots/tiago_dual.urdf": ("warn", "warn"),
    "tiago_description/robots/tiago_no_hand.urdf": ("warn", "warn"),
    # finger joints that carry only massless links: a singular D(k)
    "romeo_description/urdf/romeo.urdf": ("repair", "repair"),
    # links whose inertia is not positive semi-definite, on movable joints and the root link, and two gripper
    # joints that carry only massless links
    "romeo_description/urdf/romeo_laas_small.urdf": ("repair", "repair"),
}

# Files out of scope, with a fragment of the error every option gives.
REFUSED = {
    # Pinocchio refuses it too: its <robot> has no name and no link
    "ur_description/urdf/ur3.urdf": "the robot has no <link>",
}

FILES = sorted(str(p.relative_to(robots_dir())) for p in robots_dir().rglob("*.urdf"))
XACRO_FILES = sorted(str(p.relative_to(robots_dir())) for p in robots_dir().rglob("*.xacro"))


def load(file, floating_base=False, inertia="warn"):
    """The jaxmb model of an example-robot-data file, its warnings silenced (they are the notes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return jaxmb.load_urdf(robots_dir() / file, floating_base=floating_base, inertia=inertia)


def load_pinocchio(file, floating_base=False):
    path = str(robots_dir() / file)
    return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating_base else pin.buildModelFromUrdf(path)


def is_physical(mass, inertia):
    return check_inertia(mass, inertia, "body") is None


# -- every example-robot-data case ------------------------------------------------------------------------------


def test_the_tables_cover_the_files_of_example_robot_data():
    """69 URDF files (138 cases with a fixed and a floating base), and 2 xacro files left out of scope."""
    assert len(FILES) == 69 and len(XACRO_FILES) == 2, (len(FILES), XACRO_FILES)
    assert set(NEEDS) | set(REFUSED) <= set(FILES)


@pytest.mark.parametrize("file", FILES)
def test_each_case_loads_with_the_option_it_needs_and_stricter_options_name_it(file):
    for floating_base, need in zip((False, True), NEEDS.get(file, ("strict", "strict"))):
        if file in REFUSED:
            for option in INERTIA_OPTIONS:
                with pytest.raises(jaxmb.ModelError, match=REFUSED[file]):
                    load(file, floating_base, option)
            continue
        model, pm = load(file, floating_base, need), load_pinocchio(file, floating_base)
        assert model.nv == pm.nv, (model.nv, pm.nv)
        stricter = INERTIA_OPTIONS[: INERTIA_OPTIONS.index(need)]  # ("strict", "warn", "repair") in that order
        for option in stricter:
            with pytest.raises(jaxmb.ModelError, match=f'inertia="{need}"'):
                load(file, floating_base, option)


def test_pinocchio_refuses_the_file_it_cannot_parse():
    with pytest.raises(Exception):
        load_pinocchio("ur_description/urdf/ur3.urdf")


def link_inertias(file):
    """{link name: (mass, rotational inertia about the com in the link frame)} as the file gives them."""
    path = str(robots_dir() / file)
    reader = Reader(parse_robot(read_text(path), path), path)
    return {link.get("name"): reader.inertial(link)[::2] for link in reader.robot.findall("link")}


def naive_repair(e):
    """A physical set of principal moments near the ascending ``e``: clipped at zero, the largest then lowered to
    the sum of the others (the repair must be at least as near)."""
    x = np.maximum(e, 0.0)
    return np.array([x[0], x[1], min(x[2], x[0] + x[1])])


@pytest.mark.parametrize("file", [f for f, need in NEEDS.items() if "repair" in need])
def test_repaired_robots_are_physical_and_near_their_files(file):
    """Each impossible link inertia is replaced by one that is physical, at least as near as a naive repair, and
    said so in the notes; every body of the model is physical; each joint that would move nothing has the armature
    `REPAIR_ARMATURE` and a note, the others their file's zero."""
    model = load(file, floating_base=True, inertia="repair")
    notes = "\n".join(model.notes)
    largest = 0.0
    for name, (mass, I) in link_inertias(file).items():
        if check_inertia(mass, I, name) is None:
            continue
        J = nearest_physical_inertia(I)
        assert is_physical(mass, J), name
        e = np.linalg.eigvalsh(I)
        change = np.linalg.norm(np.linalg.eigvalsh(J) - e)
        assert change <= np.linalg.norm(naive_repair(e) - e) + 1e-15, name
        assert f"body {name!r}" in notes and 'inertia="repair"' in notes
        largest = max(largest, np.abs(np.linalg.eigvalsh(J) - e).max())
    assert largest < 0.03  # kg m^2: romeo_laas_small's root link, whose smallest principal moment is -0.021
    for i, name in enumerate(model.body_names):
        assert is_physical(float(model.mass[i]), np.asarray(model.inertia[i])), name
    repaired = [j for j in model.joint_names if f"joint {j!r} would have a singular" in notes]
    for j in model.joint_names:
        assert np.all(np.asarray(model.armature)[model.v_index(j)] == (REPAIR_ARMATURE if j in repaired else 0.0))
    assert len(repaired) == {"romeo_description/urdf/romeo.urdf": 24,
                             "romeo_description/urdf/romeo_laas_small.urdf": 2}[file]


@pytest.fixture(scope="module")
def forward_and_inverse():
    @fast_jit
    def evaluate(model, q, qd, tau, qdd):
        return jaxmb.forward_dynamics(model, q, qd, tau), jaxmb.inverse_dynamics(model, q, qd, qdd)

    return evaluate


def test_repaired_romeo_agrees_with_pinocchio_given_the_same_armature(forward_and_inverse):
    """romeo's 24 finger joints carry massless links: repaired with an armature, its forward dynamics invert its
    inverse dynamics, and both agree with Pinocchio's `aba` and `rnea` on the file's model given that armature."""
    file = "romeo_description/urdf/romeo.urdf"
    model, pm = load(file, inertia="repair"), load_pinocchio(file)
    v_pin = np.array([pm.joints[pm.getJointId(j)].idx_v for j in model.joint_names])
    assert all(pm.joints[pm.getJointId(j)].nq == 1 for j in model.joint_names)  # revolute: q maps as v
    pm.armature[v_pin] = np.asarray(model.armature)
    data = pm.createData()
    rng = np.random.default_rng(3)
    q, qd, tau, qdd = (rng.uniform(-1, 1, model.nv) for _ in range(4))

    def to_pin(x):
        y = np.zeros(pm.nv)
        y[v_pin] = x
        return y

    def from_pin(x):
        return np.asarray(x)[v_pin]

    qdd_jaxmb, tau_jaxmb = forward_and_inverse(model, q, qd, tau, qdd)
    assert np.all(np.isfinite(qdd_jaxmb)) and np.all(np.isfinite(tau_jaxmb))
    assert_close(qdd_jaxmb, from_pin(pin.aba(pm, data, to_pin(q), to_pin(qd), to_pin(tau))), RTOL)
    assert_close(tau_jaxmb, from_pin(pin.rnea(pm, data, to_pin(q), to_pin(qd), to_pin(qdd))), RTOL)
    assert_close(forward_and_inverse(model, q, qd, tau_jaxmb, qdd)[0], qdd, RTOL)


def test_repaired_inertias_give_forward_dynamics_that_invert_inverse_dynamics(forward_and_inverse):
    """romeo_laas_small on a free base, its indefinite and triangle-breaking links repaired."""
    model = load("romeo_description/urdf/romeo_laas_small.urdf", floating_base=True, inertia="repair")
    assert model.nq == model.nv + 1 and model.joint_types[0] == "free"
    rng = np.random.default_rng(4)
    q = rng.uniform(-1, 1, model.nq)  # the root's position and quaternion, then one angle per joint
    q[3:7] /= np.linalg.norm(q[3:7])
    qd, qdd = rng.uniform(-1, 1, model.nv), rng.uniform(-1, 1, model.nv)
    _, tau = forward_and_inverse(model, q, qd, qdd, qdd)
    qdd_back, _ = forward_and_inverse(model, q, qd, tau, qdd)
    assert np.all(np.isfinite(tau))
    assert_close(qdd_back, qdd, RTOL)


# -- the options on models made in code -----------------------------------------------------------------------

TRIANGLE = np.diag([0.1, 0.1, 0.5])  # positive definite, I1 + I2 < I3
INDEFINITE = np.diag([0.1, 0.2, -0.05])
BOX = np.diag([0.02, 0.03, 0.04])


def builder(inertia):
    return jaxmb.ModelBuilder("test", source="test.urdf", inertia=inertia)


def test_unknown_option_raises():
    with pytest.raises(ValueError, match="strict"):
        jaxmb.ModelBuilder(inertia="balance")


@pytest.mark.parametrize("inertia, option, names", [
    (TRIANGLE, "strict", ['inertia="warn"', 'inertia="repair"', "triangle inequality"]),
    (INDEFINITE, "strict", ['inertia="repair"', "not positive semi-definite"]),
    (INDEFINITE, "warn", ['inertia="repair"', "dynamics would be undefined"]),
], ids=["triangle-strict", "indefinite-strict", "indefinite-warn"])
def test_refusals_name_the_body_and_the_option_that_loads_it(inertia, option, names):
    b = builder(option)
    with pytest.raises(jaxmb.ModelError) as info:
        b.add_body("link", None, joints.revolute(), mass=1.0, inertia=inertia)
        b.build()
    for fragment in ["test.urdf", "'link'"] + names:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_warn_loads_an_indefinite_link_that_leaves_the_dynamics_defined():
    """An indefinite link fixed to the world is never used; one merged into a heavier body leaves that body
    positive semi-definite: both load, each with a warning and a note."""
    b = builder("warn")
    b.add_body("stand", None, joints.fixed(), mass=1e-6, inertia=INDEFINITE * 1e-6)
    b.add_body("arm", "stand", joints.revolute(), mass=2.0, com=(0.1, 0, 0), inertia=BOX)
    b.add_body("antenna", "arm", joints.fixed(), mass=1e-6, inertia=INDEFINITE * 1e-6)
    with pytest.warns(UserWarning, match="not positive semi-definite") as record:
        model = b.build()
    assert len(record) == 2 and len(model.notes) == 2
    stand, antenna = sorted(model.notes, key=lambda n: "antenna" in n)
    assert "'stand'" in stand and "fixed to the world" in stand
    assert "'antenna'" in antenna and "body 'arm'" in antenna and "dynamics are defined" in antenna


def test_repair_makes_each_impossible_inertia_the_nearest_physical_one():
    b = builder("repair")
    with pytest.warns(UserWarning, match="'upper'.*triangle inequality.*repaired"):
        b.add_body("upper", None, joints.revolute(), mass=1.0, inertia=TRIANGLE)
    with pytest.warns(UserWarning, match="'lower'.*not positive semi-definite.*repaired"):
        b.add_body("lower", "upper", joints.revolute((0, 1, 0)), placement=(np.eye(3), (0, 0, -0.3)), mass=1.0,
                   inertia=INDEFINITE)
    model = b.build()
    for name, original in [("upper", TRIANGLE), ("lower", INDEFINITE)]:
        I = np.asarray(model.inertia[model.body_index(name)])
        assert_close(I, nearest_physical_inertia(original), 1e-14)
        assert is_physical(1.0, I)
    assert len(model.notes) == 2 and all("largest change" in n for n in model.notes)


def test_repair_gives_joints_that_move_nothing_an_armature_and_leaves_the_others_exact():
    """A pendulum carrying a two-joint finger of massless links: each finger joint gets the armature
    `REPAIR_ARMATURE`, named in the warning and a note each; the pendulum's acceleration is that of the pendulum
    alone, and each finger joint is a lone rotor, ``qdd = tau / armature``. Without repair it raises."""

    def pendulum(inertia, finger):
        b = builder(inertia)
        b.add_body("link", None, joints.revolute((0, 1, 0)), joint_name="swing", mass=1.5, com=(0, 0, -0.4),
                   inertia=BOX)
        if finger:
            b.add_body("f1", "link", joints.revolute((1, 0, 0)), joint_name="finger_1",
                       placement=(np.eye(3), (0, 0, -0.5)))
            b.add_body("f2", "f1", joints.revolute((0, 0, 1)), joint_name="finger_2",
                       placement=(np.eye(3), (0, 0, -0.1)))
        return b.build()

    for option in ("strict", "warn"):
        with pytest.raises(jaxmb.ModelError, match="'finger_1'.*singular.*1 more.*inertia=\"repair\""):
            pendulum(option, True)
    with pytest.warns(UserWarning, match=r"\['finger_1', 'finger_2'\].*repaired") as record:
        model = pendulum("repair", True)
    assert len(record) == 1
    assert [n for n in model.notes if "finger" in n] == list(model.notes) and len(model.notes) == 2
    alone = pendulum("strict", False)
    forward = fast_jit(jaxmb.forward_dynamics)
    q, qd, tau = np.array([0.4, -0.3, 0.8]), np.array([1.1, 0.5, -2.0]), np.array([0.2, 3e-6, -1e-6])
    sw, f1, f2 = (model.v_index(j) for j in ("swing", "finger_1", "finger_2"))
    qdd = np.asarray(forward(model, q, qd, tau))
    assert_close(np.asarray(model.armature)[[f1, f2]], [REPAIR_ARMATURE] * 2, 0.0)
    assert_close(qdd[sw], forward(alone, q[[sw]], qd[[sw]], tau[[sw]])[0], 1e-12)
    assert_close(qdd[[f1, f2]], tau[[f1, f2]] / REPAIR_ARMATURE, 1e-9)


def random_physical_inertias(rng, n):
    """Rotational inertias of random point clouds: ``tr(S) 1 - S`` for second moments ``S`` (physical, and
    sometimes on the boundary: a flat cloud)."""
    out = []
    for k in range(n):
        points = rng.normal(size=(5, 3)) * rng.uniform(0.1, 2.0, 3)
        if k % 4 == 0:
            points[:, 2] = 0.0  # a lamina: I1 + I2 = I3
        S = points.T @ points * rng.uniform(0.01, 1.0)
        out.append(np.trace(S) * np.eye(3) - S)
    return out


def test_nearest_physical_inertia_is_the_projection_onto_physical_inertias():
    """For random symmetric matrices (indefinite, triangle-breaking and physical): the result is physical, a
    physical input is returned as it is, and the result ``P`` is the nearest physical inertia in the Frobenius norm:
    ``<I - P, J - P> <= 0`` for every physical ``J`` (the projection onto a convex set), checked on random ones."""
    rng = np.random.default_rng(0)
    candidates = random_physical_inertias(rng, 200)
    for k in range(300):
        A = rng.normal(size=(3, 3))
        I = (A + A.T) / 2 if k % 3 else candidates[k % len(candidates)]
        P = nearest_physical_inertia(I)
        assert is_physical(1.0, P)
        if is_physical(1.0, I):
            assert np.array_equal(P, I)
        scale = np.abs(I).max()
        worst = max(np.sum((I - P) * (J - P)) for J in candidates)
        assert worst <= 1e-12 * scale * max(1.0, np.abs(candidates).max()), worst
        assert_close(P, P.T, 0.0)


# -- a model with no movable joint --------------------------------------------------------------------------------


def test_a_robot_with_no_movable_joint_loads_with_nv_zero_and_its_frames_on_the_world():
    """hector's quadrotor on a fixed base: nb = nq = nv = 0, as Pinocchio loads it; its frames stand where
    Pinocchio puts them, and kinematics, mass matrix, forward and inverse dynamics give empty results, under jit
    and vmap too; its frames do not move."""
    file = "hector_description/robots/quadrotor_base.urdf"
    model, pm = load(file, inertia="strict"), load_pinocchio(file)
    assert (model.nb, model.nq, model.nv, pm.nq, pm.nv) == (0, 0, 0, 0, 0)
    assert "no movable joint" in model.notes[0] and set(model.frame_body) == {-1}
    data = pm.createData()
    pin.framesForwardKinematics(pm, data, np.zeros(0))
    empty = jnp.zeros(0)
    T = jaxmb.frame_poses(model, empty)
    for i, name in enumerate(model.frame_names):
        M = data.oMf[pm.getFrameId(name, pin.BODY)]
        assert_close(T.R[i], M.rotation, 1e-14)
        assert_close(T.p[i], M.translation, 1e-14)
    X = jaxmb.forward_kinematics(model, empty)
    assert X.R.shape == (0, 3, 3) and X.p.shape == (0, 3)
    assert jaxmb.mass_matrix(model, empty).shape == (0, 0)
    assert jaxmb.forward_dynamics(model, empty, empty, empty).shape == (0,)
    assert jaxmb.inverse_dynamics(model, empty, empty, empty).shape == (0,)
    assert jax.jit(jaxmb.forward_dynamics)(model, empty, empty, empty).shape == (0,)
    batch = jnp.zeros((4, 0))
    assert jax.vmap(jaxmb.inverse_dynamics, (None, 0, 0, 0))(model, batch, batch, batch).shape == (4, 0)
    assert jaxmb.integrate(model, empty, empty, 0.1).shape == (0,)
    frame = model.frame_names[-1]
    assert jaxmb.jacobian(model, empty, frame).shape == (6, 0)
    assert np.array_equal(jaxmb.frame_velocity(model, empty, empty, frame), np.zeros(6))
    assert np.array_equal(jaxmb.frame_bias_acceleration(model, empty, empty, frame, "world_aligned"), np.zeros(6))
    assert float(jaxmb.kinetic_energy(model, empty, empty)) == 0.0
    model_free = load(file, floating_base=True, inertia="strict")
    assert model_free.nv == 6 and model_free.notes == ()


# -- name-based indexing ------------------------------------------------------------------------------------------


def test_q_index_and_v_index_address_each_joint_by_name():
    """On the panda with a free base: an int for each one-coordinate joint, index arrays for the free joint's 7
    position and 6 velocity coordinates; together they cover q and qd once, as `Model.joint_coordinates` says.
    On the fixed-base panda, a configuration set joint by joint by name puts every frame where Pinocchio does."""
    file = "panda_description/urdf/panda.urdf"
    model = load(file, floating_base=True)
    assert np.array_equal(model.q_index("root"), np.arange(7)) and np.array_equal(model.v_index("root"), np.arange(6))
    q_all, v_all = [], []
    for j in model.joint_names:
        qi, vi = model.q_index(j), model.v_index(j)
        q_slice, v_slice = model.joint_coordinates(j)
        assert np.array_equal(np.atleast_1d(qi), np.arange(model.nq)[q_slice])
        assert np.array_equal(np.atleast_1d(vi), np.arange(model.nv)[v_slice])
        if j != "root":
            assert type(qi) is int and type(vi) is int
        q_all += list(np.atleast_1d(qi))
        v_all += list(np.atleast_1d(vi))
    assert sorted(q_all) == list(range(model.nq)) and sorted(v_all) == list(range(model.nv))
    with pytest.raises(KeyError, match="panda_joint1"):
        model.q_index("panda_hand_joint")  # a fixed joint: merged, no coordinate

    model, pm = load(file), load_pinocchio(file)
    rng = np.random.default_rng(5)
    q, q_pin = np.zeros(model.nq), np.zeros(pm.nq)
    for j in model.joint_names:
        q[model.q_index(j)] = q_pin[pm.joints[pm.getJointId(j)].idx_q] = rng.uniform(-1, 1)
    data = pm.createData()
    pin.framesForwardKinematics(pm, data, q_pin)
    T = jaxmb.frame_poses(model, jnp.asarray(q))
    for i, name in enumerate(model.frame_names):
        assert_close(T.p[i], data.oMf[pm.getFrameId(name, pin.BODY)].translation, 1e-12)
