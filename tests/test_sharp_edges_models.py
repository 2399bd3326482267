"""Sharp edges of model building and configurations: float32 integration at small rotations, planar joints about
any normal (and the URDF default normal x), and finding a joint's coordinates by name."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb import joints
from jaxmb.rotation import left_jacobian_coefficients, so3_left_jacobian
from jaxmb.topology import Topology

jax.config.update("jax_enable_x64", True)  # also set in conftest.py

EPS32 = float(np.finfo(np.float32).eps)


# -- float32 SE(3) exponential at small angles ------------------------------------------------------------------------


def _coefficients_float64(t):
    """``(1 - cos t)/t^2`` and ``(t - sin t)/t^3`` in float64 without cancellation: ``2 sin^2(t/2)/t^2`` and the
    Taylor series to 20 terms (exact to float64 rounding for t <= 1)."""
    a = 2.0 * np.sin(t / 2) ** 2 / t**2
    b = sum((-1) ** k * t ** (2 * k) / math.factorial(2 * k + 3) for k in range(20))
    return a, b


def test_left_jacobian_coefficients_are_exact_to_float32_rounding_at_every_angle():
    """In float32 the textbook ``(1 - cos t)/t^2`` is 0 for t below about 3e-4 and ``(t - sin t)/t^3`` is noise; the
    coefficients must equal the float64 values to float32 rounding over t in [1e-8, 1] (and beyond, to 3)."""
    t = np.concatenate([np.logspace(-8, 0, 161), np.linspace(1.0, 3.0, 41)])
    a_ref, b_ref = _coefficients_float64(t)
    a32, b32 = jax.jit(left_jacobian_coefficients)(jnp.asarray(t, jnp.float32))
    assert a32.dtype == jnp.float32 and b32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(a32, float), a_ref, rtol=4 * EPS32, atol=0)
    np.testing.assert_allclose(np.asarray(b32, float), b_ref, rtol=4 * EPS32, atol=0)
    a64, b64 = left_jacobian_coefficients(jnp.asarray(t))
    np.testing.assert_allclose(a64, a_ref, rtol=1e-15, atol=0)
    np.testing.assert_allclose(b64, b_ref, rtol=1e-14, atol=0)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_left_jacobian_gradient_is_finite_at_zero_rotation(dtype):
    """d/dr of V(r) v at r = 0 is finite (the double-where trick) and equals 1/2 (. x v) there: V = 1 + r~/2 + ..."""
    v = jnp.array([0.3, -1.0, 0.5], dtype)
    J = jax.jacfwd(lambda r: so3_left_jacobian(r) @ v)(jnp.zeros(3, dtype))
    Jr = jax.jacrev(lambda r: so3_left_jacobian(r) @ v)(jnp.zeros(3, dtype))
    expected = -0.5 * np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])  # d(r x v)/dr / 2
    for g in (J, Jr):
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, expected, atol=1e-7 if dtype == jnp.float32 else 1e-15)


def _free_body():
    b = jaxmb.ModelBuilder("free-body", gravity=(0, 0, 0))
    b.add_body("body", None, joints.free(), mass=1.0, inertia=np.diag([0.1, 0.2, 0.3]))
    return b.build()


def test_float32_free_base_integration_does_not_drift_at_slow_rotation():
    """A free base turning at 0.15 rad/s and moving at 1 m/s, integrated for 1 s in steps of 1e-3 s: the float32
    position stays within a few micrometres of the float64 one. With ``(1 - cos t)/t^2`` computed as written, the
    rotation per step (1.5e-4 rad) cancels it to 0 in float32 and the position drifts by tens of micrometres."""
    model = _free_body()
    q0 = np.array([0.2, -0.1, 0.4, 1.0, 0.0, 0.0, 0.0])
    qd = np.array([0.03, -0.06, 0.13, 0.6, -0.5, 0.62])
    qd = qd / np.concatenate([np.full(3, np.linalg.norm(qd[:3]) / 0.15), np.full(3, np.linalg.norm(qd[3:]))])

    def run(dtype):
        m = model.cast(dtype)

        @jax.jit
        def steps(q):
            return jax.lax.fori_loop(0, 1000, lambda _, q: jaxmb.integrate(m, q, jnp.asarray(qd, dtype), 1e-3), q)

        return np.asarray(steps(jnp.asarray(q0, dtype)), float)

    q32, q64 = run(jnp.float32), run(jnp.float64)
    assert np.linalg.norm(q64[:3] - q0[:3]) > 0.9  # it did move about 1 m
    drift = np.linalg.norm(q32[:3] - q64[:3])
    assert drift < 3e-6, f"float32 position drift {drift * 1e6:.2f} um"
    np.testing.assert_allclose(q32[3:], q64[3:], atol=1e-5)


# -- planar joints about any normal -----------------------------------------------------------------------------------


@pytest.mark.parametrize("normal", [(0, 0, 1), (1, 0, 0), (0, -1, 0), (0.36, -0.48, -0.8), (0, 0, -1)])
def test_planar_joint_moves_in_the_plane_normal_to_its_axis(normal):
    """For every q the child frame turns about the normal by theta and its origin stays in the plane normal to it,
    and x, y run along two orthonormal directions of that plane; for the normal z they are the frame's x and y."""
    n = np.asarray(normal, float) / np.linalg.norm(normal)
    kind, axis, coef = joints.PLANAR, jnp.asarray(n), jnp.array([1.0, 0.0])
    B = np.asarray(joints.plane_basis(axis))
    np.testing.assert_allclose(B.T @ B, np.eye(3), atol=1e-15)
    np.testing.assert_allclose(np.linalg.det(B), 1.0, atol=1e-15)
    np.testing.assert_allclose(B[:, 2], n, atol=1e-15)
    if normal == (0, 0, 1):
        np.testing.assert_array_equal(B, np.eye(3))
    x, y, th = 0.3, -0.7, 1.1
    T = kind.transform(jnp.array([x, y, th]), axis, coef)
    R, p = np.asarray(T.R), np.asarray(T.p)
    np.testing.assert_allclose(R @ n, n, atol=1e-15)  # turns about the normal
    np.testing.assert_allclose(np.trace(R), 1 + 2 * np.cos(th), atol=1e-14)  # by theta
    u = B[:, 0]
    np.testing.assert_allclose(np.cross(u, R @ u), np.sin(th) * n, atol=1e-14)  # counter-clockwise about n
    np.testing.assert_allclose(p @ n, 0.0, atol=1e-15)
    np.testing.assert_allclose(p, x * B[:, 0] + y * B[:, 1], atol=1e-15)


def _planar_urdf(axis_element):
    return ('<robot name="slider"><link name="ground"/>'
            '<link name="puck"><inertial><mass value="1"/>'
            '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>'
            f'<joint name="plane" type="planar"><parent link="ground"/><child link="puck"/>{axis_element}'
            '<origin xyz="0 0 1"/></joint></robot>')


@pytest.mark.parametrize("axis_element, normal", [("", (1, 0, 0)), ('<axis xyz="1 0 0"/>', (1, 0, 0)),
                                                  ('<axis xyz="0 0 1"/>', (0, 0, 1)),
                                                  ('<axis xyz="0 2 0"/>', (0, 1, 0))])
def test_urdf_planar_joint_normal_is_its_axis_defaulting_to_x(axis_element, normal):
    """The URDF format's planar joint moves in the plane normal to its ``<axis>``, default (1, 0, 0): the link turns
    about that axis and moves perpendicular to it, whatever q."""
    model = jaxmb.load_urdf_string(_planar_urdf(axis_element), source="slider.urdf")
    n = np.asarray(normal, float)
    assert model.joint_types == ("planar",)
    np.testing.assert_allclose(model.axis[0], n)
    for q in ([0.4, -0.2, 0.0], [0.0, 0.0, 0.9], [0.3, 0.5, -2.0]):
        T = jaxmb.frame_poses(model, jnp.array(q))
        i = model.frame_index("puck")
        R, p = np.asarray(T.R[i]), np.asarray(T.p[i])
        np.testing.assert_allclose(R @ n, n, atol=1e-14)
        np.testing.assert_allclose(np.trace(R), 1 + 2 * np.cos(q[2]), atol=1e-14)
        np.testing.assert_allclose((p - [0, 0, 1]) @ n, 0.0, atol=1e-14)
        np.testing.assert_allclose(np.linalg.norm(p - [0, 0, 1]), np.hypot(q[0], q[1]), atol=1e-14)


# -- coordinates by joint name ----------------------------------------------------------------------------------------


def test_joint_coordinates_find_a_joint_by_name_whatever_the_order_of_add_body():
    """ModelBuilder numbers coordinates breadth first: a deep joint added first does not own q[0]. The q and v slices
    of `Model.joint_coordinates` address each joint's coordinates by name: setting them moves that joint only."""
    b = jaxmb.ModelBuilder("order")
    inertia = np.diag([0.1, 0.2, 0.3])
    # added depth first: the elbow (depth 1) before the second root (depth 0)
    b.add_body("upper", None, joints.revolute((0, 1, 0)), joint_name="shoulder", mass=1.0, com=(0, 0, -0.2),
               inertia=inertia)
    b.add_body("lower", "upper", joints.spherical(), joint_name="elbow", mass=1.0, com=(0, 0, -0.2), inertia=inertia,
               placement=(np.eye(3), (0, 0, -0.4)))
    b.add_body("cart", None, joints.free(), joint_name="cart", mass=2.0, inertia=inertia)
    m = b.build()
    assert m.joint_names == ("shoulder", "cart", "elbow")  # breadth first, not the order of add_body
    expected = {"shoulder": (slice(0, 1), slice(0, 1)), "cart": (slice(1, 8), slice(1, 7)),
                "elbow": (slice(8, 12), slice(7, 10))}
    for name, (qs, vs) in expected.items():
        assert m.joint_coordinates(name) == (qs, vs)
        assert m.joint_index(name) == m.body_index({"shoulder": "upper", "cart": "cart", "elbow": "lower"}[name])
    q = jaxmb.neutral_configuration(m)
    qs, _ = m.joint_coordinates("shoulder")
    moved = q.at[qs].set(0.5)
    T0, T1 = jaxmb.forward_kinematics(m, q), jaxmb.forward_kinematics(m, moved)
    changed = [m.body_names[i] for i in range(m.nb) if not np.allclose(T0.R[i], T1.R[i])]
    assert changed == ["upper", "lower"]
    with pytest.raises(KeyError, match="no movable joint 'wrist'"):
        m.joint_coordinates("wrist")


def test_topology_names_an_unknown_joint_kind():
    with pytest.raises(ValueError, match=r"unknown joint kind\(s\) \['helical'\].*screw"):
        Topology([-1, 0], ("screw", "helical"))
