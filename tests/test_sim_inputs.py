"""Free flight and the applied inputs of a step (`jaxmb.sim.inputs`).

* Free flight: a spinning, translating free body without gravity keeps its speed and its centre of mass on its
  straight line to round-off over 1 s with every integrator (closed-form mechanics: its linear momentum is constant;
  spun about a principal axis, its angular velocity is too).
* ``qfrc`` equals the same generalized forces given by motors on every coordinate; an ``xfrc`` wrench equals the
  ``qfrc`` of its body Jacobian ``J*(k) w`` (the world wrench at the centre of mass moved to the body's twist); both
  agree under each integrator, and gradients through both equal central differences.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from checks import assert_close

import jaxmb
from jaxmb import joints
from jaxmb.kinematics import forward_kinematics
from jaxmb.sim import init_state, make_scene, motor, rollout, step
from jaxmb.sim.integrators import euler_positions

INTEGRATORS = ("euler", "implicit", "implicitfast", "implicit_coriolis", "rk4")


def free_body(com=(0.0, 0.0, 0.0)):
    """A 1.2 kg body with the principal inertia diag(.011, .019, .027) on a free joint, no gravity."""
    b = jaxmb.ModelBuilder("free body")
    b.add_body("body", None, joints.free(), mass=1.2, com=com, inertia=np.diag([0.011, 0.019, 0.027]))
    return b.build().replace(gravity=jnp.zeros(3))


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_free_flight_keeps_speed_and_straight_line(integrator):
    """Spinning at 6 rad/s about its principal z axis while moving at 0.9 m/s along x, in world axes: after 1 s
    (500 steps of 2 ms) its speed is 0.9 m/s and its origin at x = 0.9 m on the x axis, to 1e-12."""
    scene = make_scene(free_body(), integrator=integrator)
    q0 = jnp.array([0.0, 0, 0, 1, 0, 0, 0])
    state = init_state(scene, q0, jnp.array([0.0, 0, 6.0, 0.9, 0, 0]))
    final, _ = rollout(scene, state, 2e-3, steps=500)
    R = forward_kinematics(scene.tree, final.q).R[0]
    v_world = R @ final.qd[3:]
    assert_close(jnp.linalg.norm(final.qd[3:]), 0.9, 1e-12)
    assert_close(v_world, jnp.array([0.9, 0, 0]), 1e-12)
    assert_close(final.q[:3], jnp.array([0.9, 0, 0]), 1e-12)
    assert_close(final.qd[:3], jnp.array([0.0, 0, 6.0]), 1e-12)


def test_euler_positions_move_a_free_origin_on_its_line_and_keep_world_velocity():
    """One configuration step of a free joint turned and spinning about a skew axis: the origin moves by
    ``dt R u_v``, the axes turn by ``exp(dt u_w)``, and the world linear velocity is the same before and after."""
    model = free_body()
    quat = jnp.array([0.9, 0.1, -0.3, 0.2])
    q = jnp.concatenate([jnp.array([0.1, -0.2, 0.3]), quat / jnp.linalg.norm(quat)])
    u = jnp.array([1.0, -2.0, 3.0, 0.4, 0.5, -0.6])
    dt = 0.01
    q_next, qd_next = euler_positions(model, q, u, dt)
    R0 = forward_kinematics(model, q).R[0]
    R1 = forward_kinematics(model, q_next).R[0]
    assert_close(q_next[:3], q[:3] + dt * R0 @ u[3:], 1e-15)
    assert_close(R1 @ qd_next[3:], R0 @ u[3:], 1e-15)
    assert_close(qd_next[:3], u[:3], 0.0)


def arm():
    """Three hinges and a slide carrying two bodies off their joint axes, under gravity."""
    b = jaxmb.ModelBuilder("arm")
    b.add_body("a", None, joints.revolute((0, 0, 1)), mass=2.0, com=(0.1, 0.0, 0.05),
               inertia=np.diag([0.02, 0.03, 0.04]))
    b.add_body("b", "a", joints.revolute((0, 1, 0)), placement=(np.eye(3), (0.3, 0, 0)), mass=1.5,
               com=(0.15, 0.02, 0.0), inertia=np.diag([0.01, 0.02, 0.02]))
    b.add_body("c", "b", joints.prismatic((1, 0, 0)), placement=(np.eye(3), (0.3, 0, 0)), mass=0.7,
               com=(0.05, 0.0, -0.03), inertia=np.diag([0.004, 0.005, 0.006]))
    b.add_body("d", "c", joints.revolute((1, 0, 0)), placement=(np.eye(3), (0.1, 0, 0)), mass=0.4,
               com=(0.0, 0.04, 0.02), inertia=np.diag([0.002, 0.002, 0.003]))
    return b.build()


MODEL = arm()
Q0 = jnp.array([0.3, -0.4, 0.05, 0.7])
QD0 = jnp.array([0.5, -0.2, 0.1, 1.0])


def body_jacobian_world_com(model, q, k):
    """``(6, nv)``: the rows ``[w; v_c]`` in world axes of body ``k``'s angular velocity and its centre of mass's
    velocity, by autodiff of the forward kinematics (an independent path to the wrench's generalized force)."""
    def pose(x):
        T = forward_kinematics(model, x)
        return T.R[k], T.p[k] + T.R[k] @ model.com[k]

    def rows(qd):
        (R, _), (dR, dc) = jax.jvp(pose, (q,), (qd,))
        W = dR @ R.T  # the skew matrix of the world angular velocity
        return jnp.concatenate([jnp.array([W[2, 1], W[0, 2], W[1, 0]]), dc])

    return jax.jacfwd(rows)(jnp.zeros(model.nv))


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_qfrc_equals_motors_and_xfrc_equals_its_jacobian_force(integrator):
    """20 steps of the arm: ``qfrc`` equals motors on every coordinate given the same forces as controls, to 1e-13;
    a wrench ``xfrc`` on body d (world axes at its centre of mass) equals ``qfrc = J*(d) w`` to 1e-12 in the first
    step (where the Jacobian is taken), and the two rollouts stay within 1e-12 of each other."""
    names = MODEL.joint_names
    with_motors = make_scene(MODEL, actuators=[motor(n) for n in names], integrator=integrator)
    plain = make_scene(MODEL, integrator=integrator)
    forces = jnp.array([0.3, -1.2, 2.0, 0.05])
    s0_m, s0_p = init_state(with_motors, Q0, QD0), init_state(plain, Q0, QD0)
    by_motors, _ = rollout(with_motors, s0_m, 1e-3, ctrls=jnp.tile(forces, (20, 1)))
    by_qfrc, _ = rollout(plain, s0_p, 1e-3, steps=20, qfrcs=jnp.tile(forces, (20, 1)))
    assert_close(by_qfrc.q, by_motors.q, 1e-13)
    assert_close(by_qfrc.qd, by_motors.qd, 1e-13)

    k = MODEL.body_names.index("d")
    wrench = jnp.array([0.2, -0.1, 0.3, 1.5, -0.5, 2.0])
    xfrc = jnp.zeros((MODEL.nb, 6)).at[k].set(wrench)
    J = body_jacobian_world_com(MODEL, Q0, k)
    one_x = step(plain, s0_p, None, 1e-3, xfrc=xfrc)
    one_q = step(plain, s0_p, None, 1e-3, qfrc=J.T @ wrench)
    if integrator != "rk4":  # RK4 re-expresses the wrench at each stage's pose
        assert_close(one_x.qd, one_q.qd, 1e-12)
        assert_close(one_x.q, one_q.q, 1e-12)
    assert not jnp.allclose(one_x.qd, step(plain, s0_p, None, 1e-3).qd, 1e-6)


def test_gradients_through_qfrc_and_xfrc_equal_central_differences():
    """The gradient of a 30-step cost with respect to a constant ``qfrc`` and a constant ``xfrc`` wrench (reverse
    mode through the checkpointed rollout) equals central differences to 1e-7 relative."""
    scene = make_scene(MODEL, integrator="implicitfast")
    s0 = init_state(scene, Q0, QD0)
    k = MODEL.body_names.index("c")

    def cost(qfrc, wrench):
        xfrc = jnp.zeros((MODEL.nb, 6)).at[k].set(wrench)
        final, states = rollout(scene, s0, 2e-3, steps=30, qfrcs=jnp.tile(qfrc, (30, 1)),
                                xfrcs=jnp.tile(xfrc, (30, 1, 1)))
        return jnp.sum(final.q ** 2) + jnp.sum(states.qd[::5] ** 2)

    qfrc, wrench = jnp.array([0.1, 0.2, -0.3, 0.05]), jnp.array([0.1, -0.2, 0.05, 0.4, 0.3, -0.2])
    g_q, g_w = jax.jit(jax.grad(cost, (0, 1)))(qfrc, wrench)
    f = jax.jit(cost)
    h = 1e-5
    for x, g, which in ((qfrc, g_q, 0), (wrench, g_w, 1)):
        fd = []
        for i in range(x.shape[0]):
            e = jnp.zeros_like(x).at[i].set(h)
            args_p = [qfrc, wrench]
            args_m = [qfrc, wrench]
            args_p[which], args_m[which] = x + e, x - e
            fd.append((f(*args_p) - f(*args_m)) / (2 * h))
        fd = np.array(fd)
        assert_close(g, fd, 1e-7, scale=np.abs(fd).max())


def test_applied_inputs_of_wrong_shape_name_themselves():
    scene = make_scene(MODEL)
    s0 = init_state(scene, Q0, QD0)
    with pytest.raises(ValueError, match=r"xfrc must have shape \(4, 6\)"):
        step(scene, s0, None, 1e-3, xfrc=jnp.zeros((2, 4, 6)))
    with pytest.raises(ValueError, match=r"qfrc must have shape \(4,\)"):
        step(scene, s0, None, 1e-3, qfrc=jnp.zeros(3))
