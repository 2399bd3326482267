"""Joint kinds (`jaxmb.joints`): transform, hinge map, configuration rate, integration, neutral and random
configurations, for revolute, prismatic and helical screws, spherical, planar and free joints (book Fig 3.2,
(3.5)-(3.8)).

The hinge map is checked against the joint transform itself: moving along q(t) with dq/dt =
configuration_rate(q, qd), the child frame's body twist [vee(R* dR/dt); R* dp/dt] must be H* qd. Integration is
checked against the matrix exponential of that twist.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.linalg import expm

import checks
import jaxmb
from jaxmb import joints
from jaxmb.joints import FREE, PLANAR, SCREW, SPHERICAL

RTOL = 1e-12  # float64


assert_close = functools.partial(checks.assert_close, rtol=RTOL)


_AXIS = np.array([0.36, -0.48, 0.8])  # unit
JOINTS = {
    # name: (kind, axis, coef)
    "revolute": (SCREW, _AXIS, (1.0, 0.0)),
    "prismatic": (SCREW, _AXIS, (0.0, 1.0)),
    "helical": (SCREW, _AXIS, (1.0, 0.3)),
    "spherical": (SPHERICAL, _AXIS, (1.0, 0.0)),
    "planar": (PLANAR, _AXIS, (1.0, 0.0)),
    "free": (FREE, _AXIS, (1.0, 0.0)),
}
QUATERNION_SLICE = {"spherical": slice(0, 4), "free": slice(3, 7)}


def joint(name):
    kind, axis, coef = JOINTS[name]
    return kind, jnp.asarray(axis), jnp.asarray(coef)


def samples(name, n=4, seed=0):
    """``n`` random (q, qd) pairs: q from the kind's own sampler, qd standard normal."""
    kind, *_ = joint(name)
    keys = jax.random.split(jax.random.PRNGKey(seed), n)
    inf = jnp.full(kind.nq, jnp.inf)
    out = []
    for k in keys:
        k1, k2 = jax.random.split(k)
        out.append((kind.random(k1, -inf, inf), jax.random.normal(k2, (kind.nv,), jnp.float64)))
    return out


def vee(S):
    A = 0.5 * (S - S.T)
    return jnp.stack([A[2, 1], A[0, 2], A[1, 0]])


def homogeneous(T):
    return jnp.block([[T.R, T.p[:, None]], [jnp.zeros((1, 3)), jnp.ones((1, 1))]])


def twist_matrix(xi):
    """The 4x4 matrix of a body twist [w; v] (se(3))."""
    w, v = xi[:3], xi[3:]
    W = jnp.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
    return jnp.block([[W, v[:, None]], [jnp.zeros((1, 4))]])


@functools.cache
def compiled(name):
    """Jitted per-joint functions (each joint kind compiles once)."""
    kind, axis, coef = joint(name)

    def body_twist(q, qd):
        """[vee(R* dR/dt); R* dp/dt] along dq/dt = configuration_rate(q, qd)."""
        T, dT = jax.jvp(lambda q: kind.transform(q, axis, coef), (q,), (kind.configuration_rate(q, qd),))
        return jnp.concatenate([vee(T.R.T @ dT.R), T.R.T @ dT.p]), T.R.T @ dT.R

    def exact_motion(q, qd, dt):
        """T(integrate(q, qd, dt)) and T(q) expm(dt [H* qd]) as 4x4 matrices."""
        xi = kind.hinge_map(axis, coef).T @ qd
        moved = homogeneous(kind.transform(kind.integrate(q, qd, dt), axis, coef))
        return moved, homogeneous(kind.transform(q, axis, coef)) @ expm(dt * twist_matrix(xi))

    def integrate_rate(q, qd):
        """d/dt integrate(q, qd, t) at t = 0."""
        return jax.jvp(lambda t: kind.integrate(q, qd, t), (0.0,), (1.0,))[1]

    return dict(
        body_twist=jax.jit(body_twist),
        exact_motion=jax.jit(exact_motion),
        integrate=jax.jit(kind.integrate),
        rate=jax.jit(kind.configuration_rate),
        integrate_rate=jax.jit(integrate_rate),
    )


@pytest.mark.parametrize("name", JOINTS)
def test_hinge_map_is_body_twist_of_joint_transform(name):
    """H* qd == [vee(R* dR/dt); R* dp/dt] for the joint transform (R, p)(q(t)) with dq/dt =
    configuration_rate(q, qd) (3.5, 3.7): the rows of H are the child-frame motions of unit coordinate rates, and
    configuration_rate is consistent with them."""
    kind, axis, coef = joint(name)
    H = kind.hinge_map(axis, coef)
    assert H.shape == (kind.nv, 6)
    assert np.linalg.matrix_rank(np.asarray(H)) == kind.nv
    for q, qd in samples(name):
        twist, RtRdot = compiled(name)["body_twist"](q, qd)
        assert_close(RtRdot, -RtRdot.T)
        assert_close(twist, H.T @ qd)


def test_screw_hinge_maps():
    """Revolute [a; 0], prismatic [0; a], helical [a; h a] (Fig 3.2)."""
    a = _AXIS
    for name, expected in (("revolute", [*a, 0, 0, 0]), ("prismatic", [0, 0, 0, *a]), ("helical", [*a, *(0.3 * a)])):
        kind, axis, coef = joint(name)
        assert_close(kind.hinge_map(axis, coef), np.array([expected]))


@pytest.mark.parametrize("name", JOINTS)
def test_integrate_is_exponential_of_body_twist(name):
    """T(integrate(q, qd, dt)) == T(q) expm(dt [H* qd]): constant body velocity for dt, exactly, also for large
    rotations (dt |w| up to several radians)."""
    for q, qd in samples(name, seed=1):
        for dt in (1e-3, 0.4, 2.5):
            moved, expected = compiled(name)["exact_motion"](q, qd, dt)
            assert_close(moved, expected, rtol=1e-11)


@pytest.mark.parametrize("name", JOINTS)
def test_integrate_agrees_with_configuration_rate(name):
    """integrate(q, qd, dt) == q + dt configuration_rate(q, qd) + O(dt^2): the derivative at dt = 0 is the rate
    (to rounding), and the remainder shrinks 4x when dt halves."""
    f = compiled(name)
    for q, qd in samples(name, seed=2):
        rate = f["rate"](q, qd)
        assert_close(f["integrate_rate"](q, qd), rate)
        errors = [np.abs(f["integrate"](q, qd, dt) - (q + dt * rate)).max() for dt in (1e-2, 5e-3)]
        if name in ("revolute", "prismatic", "helical"):
            assert max(errors) <= 1e-15  # linear in q: exact
        else:
            assert errors[0] > 1e-8
            assert 3.5 < errors[0] / errors[1] < 4.5, errors


@pytest.mark.parametrize("name", JOINTS)
def test_integrate_with_zero_step_or_zero_velocity_is_identity(name):
    f = compiled(name)
    for q, qd in samples(name, seed=3):
        assert_close(f["integrate"](q, qd, 0.0), q)
        assert_close(f["integrate"](q, jnp.zeros_like(qd), 0.7), q)


@pytest.mark.parametrize("name", JOINTS)
def test_integrate_is_a_one_parameter_group(name):
    """integrate(integrate(q, qd, s), qd, t) == integrate(q, qd, s + t) (constant body velocity)."""
    f = compiled(name)
    for q, qd in samples(name, seed=4):
        assert_close(f["integrate"](f["integrate"](q, qd, 0.3), qd, 0.9), f["integrate"](q, qd, 1.2), rtol=1e-11)


@pytest.mark.parametrize("name", ["spherical", "free"])
def test_integrate_stays_on_the_unit_quaternion_sphere(name):
    """The quaternion is a unit quaternion after integrating, for large steps and velocities, and also when the
    starting quaternion has drifted off the sphere (integrate renormalizes)."""
    f = compiled(name)
    sl = QUATERNION_SLICE[name]
    for q, qd in samples(name, seed=5):
        for start in (q, q.at[sl].multiply(1.3)):
            for dt in (1e-3, 3.0):
                out = f["integrate"](start, 10.0 * qd, dt)
                assert_close(jnp.linalg.norm(out[sl]), 1.0, rtol=1e-14)


@pytest.mark.parametrize("name", JOINTS)
def test_neutral_is_identity_transform(name):
    kind, axis, coef = joint(name)
    q0 = jnp.asarray(kind.neutral())
    assert q0.shape == (kind.nq,)
    T = kind.transform(q0, axis, coef)
    assert_close(T.R, np.eye(3))
    assert_close(T.p, np.zeros(3))


@pytest.mark.parametrize("name", JOINTS)
def test_random_respects_limits(name):
    """Coordinates with finite limits fall inside them; without limits, in [-pi, pi] (position of a free joint:
    [-1, 1]); quaternions are unit quaternions with w >= 0."""
    kind, *_ = joint(name)
    keys = jax.random.split(jax.random.PRNGKey(7), 200)
    inf = jnp.full(kind.nq, jnp.inf)
    lower = jnp.linspace(-0.3, 0.2, kind.nq)
    upper = lower + jnp.linspace(0.1, 0.5, kind.nq)
    unlimited = np.asarray(jax.vmap(lambda k: kind.random(k, -inf, inf))(keys))
    limited = np.asarray(jax.vmap(lambda k: kind.random(k, lower, upper))(keys))
    quat = QUATERNION_SLICE.get(name)
    scalar = np.ones(kind.nq, bool)
    if quat is not None:
        scalar[quat] = False
        for q in (unlimited, limited):
            assert_close(np.linalg.norm(q[:, quat], axis=1), np.ones(len(keys)))
            assert np.all(q[:, quat][:, 0] >= 0)
    bound = 1.0 if name == "free" else np.pi
    assert np.all(np.abs(unlimited[:, scalar]) <= bound)
    assert np.all(unlimited[:, scalar].std(0) > 0.2 * bound)  # spread over the range, not stuck
    lo, hi = np.asarray(lower)[scalar], np.asarray(upper)[scalar]
    assert np.all((limited[:, scalar] >= lo) & (limited[:, scalar] <= hi))


# -- joint specifications and model-level configuration functions -------------------------------------------------


def test_joint_specifications():
    """Axes are normalized; helical pitch lands in coef; a zero axis is rejected; fixed has no kind."""
    j = joints.revolute((0.0, 0.0, 2.0), lower=-1.0, upper=1.5)
    assert j.kind is SCREW and j.axis == (0.0, 0.0, 1.0) and j.coef == (1.0, 0.0)
    assert j.lower == (-1.0,) and j.upper == (1.5,)
    assert joints.prismatic((3.0, 4.0, 0.0)).axis == (0.6, 0.8, 0.0)
    assert joints.prismatic().coef == (0.0, 1.0)
    assert joints.helical((1.0, 0.0, 0.0), pitch=0.25).coef == (1.0, 0.25)
    assert joints.fixed().kind is None
    for bad in ((0.0, 0.0, 0.0), (1.0, 2.0), (np.nan, 0.0, 1.0)):
        with pytest.raises(ValueError):
            joints.revolute(bad)


def test_a_hand_built_joint_gets_a_unit_axis_or_plane_normal_and_a_zero_one_is_refused_naming_the_joint():
    """`Joint` built by hand with a screw axis or plane normal of any length: the builder scales it to unit length,
    so the model is the one of the helpers (`joints.revolute`, `joints.planar`), whose plane basis is a rotation;
    a zero one is a ``ValueError`` naming the body and the joint."""
    inertia = np.diag([0.1, 0.2, 0.3])

    def build(screw, plane):
        b = jaxmb.ModelBuilder("hand_built")
        b.add_body("arm", None, screw, joint_name="shoulder", mass=1.0, com=(0.1, 0.0, 0.0), inertia=inertia)
        b.add_body("slider", "arm", plane, joint_name="table", mass=1.0, inertia=inertia)
        return b.build()

    model = build(joints.Joint("revolute", SCREW, (0.0, 3.0, 4.0)), joints.Joint("planar", PLANAR, (2.0, 0.0, -2.0)))
    helpers = build(joints.revolute((0.0, 3.0, 4.0)), joints.planar((2.0, 0.0, -2.0)))
    assert_close(model.axis, helpers.axis)
    assert_close(model.axis, np.array([[0.0, 0.6, 0.8], [np.sqrt(0.5), 0.0, -np.sqrt(0.5)]]))
    q = jnp.array([0.4, 0.1, -0.2, 0.7])
    T = jaxmb.forward_kinematics(model, q)
    assert_close(T.R, jaxmb.forward_kinematics(helpers, q).R)
    assert_close(jnp.einsum("kji,kjl->kil", T.R, T.R), jnp.broadcast_to(jnp.eye(3), T.R.shape))
    for screw, plane, named in ((joints.revolute(), joints.Joint("planar", PLANAR, (0.0, 0.0, 0.0)),
                                 "body 'slider': the planar joint 'table''s plane normal"),
                                (joints.Joint("revolute", SCREW, (0.0, 0.0, 0.0)), joints.planar(),
                                 "body 'arm': the revolute joint 'shoulder''s axis"),
                                (joints.Joint("prismatic", SCREW, (np.nan, 0.0, 1.0), (0.0, 1.0)), joints.planar(),
                                 "body 'arm': the prismatic joint 'shoulder''s axis")):
        with pytest.raises(ValueError, match=f"hand_built: {named} must be a nonzero 3-vector"):
            build(screw, plane)


def _limited_model():
    b = jaxmb.ModelBuilder("limited")
    inertia = np.diag([0.1, 0.2, 0.3])
    b.add_body("base", None, joints.free(), mass=2.0, inertia=inertia)
    b.add_body("a", "base", joints.revolute((0, 0, 1), lower=-0.5, upper=0.25), mass=1.0, inertia=inertia)
    b.add_body("b", "a", joints.spherical(), placement=(np.eye(3), (0.0, 0.0, 0.3)), mass=1.0, inertia=inertia)
    b.add_body("c", "b", joints.prismatic((1, 0, 0), lower=0.1, upper=0.2), mass=1.0, inertia=inertia)
    b.add_body("d", "a", joints.planar(), mass=1.0, inertia=inertia)
    return b.build()


@jax.jit
def _model_configuration_functions(model, key):
    q0 = jaxmb.neutral_configuration(model)
    qs = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(jax.random.split(key, 100))
    qd = jax.random.normal(jax.random.fold_in(key, 1), (model.nv,), qs.dtype)
    return dict(q0=q0, T0=jaxmb.forward_kinematics(model, q0), qs=qs, qd=qd,
                rate=jaxmb.configuration_rate(model, qs[0], qd), stepped=jaxmb.integrate(model, qs[0], qd, 0.3))


def test_model_configurations():
    """neutral_configuration is the identity pose of every joint; random_configuration respects the model's
    limits; the model-level configuration_rate and integrate act joint by joint."""
    model = _limited_model()
    out = _model_configuration_functions(model, jax.random.PRNGKey(3))
    assert out["q0"].shape == (model.nq,)
    T, X = out["T0"], model.X_tree
    # at the neutral configuration each body sits at its joint frame: T(k) = T(parent) X_tree(k)
    for k, p in enumerate(model.topology.parent):
        R_par, p_par = (np.eye(3), np.zeros(3)) if p < 0 else (np.asarray(T.R[p]), np.asarray(T.p[p]))
        assert_close(T.R[k], R_par @ np.asarray(X.R[k]))
        assert_close(T.p[k], p_par + R_par @ np.asarray(X.p[k]))

    qs = np.asarray(out["qs"])
    lower, upper = np.asarray(model.q_lower), np.asarray(model.q_upper)
    assert np.isfinite(lower).sum() == 2
    assert np.all((qs >= lower) & (qs <= upper))

    q, qd = out["qs"][0], out["qd"]
    topo = model.topology
    for k, name in enumerate(topo.kinds):
        kind = joints.KINDS[name]
        sl = slice(topo.q_offset[k], topo.q_offset[k] + kind.nq)
        vk = qd[topo.v_offset[k] : topo.v_offset[k] + kind.nv]
        assert_close(out["rate"][sl], kind.configuration_rate(q[sl], vk))
        assert_close(out["stepped"][sl], kind.integrate(q[sl], vk, 0.3))
