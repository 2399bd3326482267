"""Actuator parameters as leaves, and joint springs, against MuJoCo and central differences.

* A servo's ``kp`` is one leaf: replacing it gives the forces and the trajectory of the scene built with that kp; the
  derivative of a rollout's cost with respect to it (through the implicit step, which takes ``g^2 kp`` into its
  damping) equals central differences; a ``vmap`` over scenes of different gains equals the loop over them.
* Joint springs ``-k (q - q_ref)`` on hinges and a slide: their forces equal MuJoCo's ``qfrc_spring`` at random
  states; a chain with springs about nonzero references (one on a hinge whose ``ref`` is not zero), damping, a
  servo and a motor, read from MJCF, follows MuJoCo's ``mj_step`` over 200 steps with MuJoCo's Euler (which takes
  the damping implicitly), implicitfast and RK4; jaxmb's ``implicit`` step takes the spring implicitly, as the
  closed form of one step of a damped spring says.
* Bad input: a negative stiffness (given or in a compiled model) and a spring on a ball joint raise `ModelError`
  naming the joint; a ball joint's spring in MJCF is named in the scene's left-out list.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from checks import assert_close, fast_jit

import jaxmb
from jaxmb import joints
from jaxmb.errors import ModelError
from jaxmb.sim import init_state, make_scene, motor, position, rollout, velocity
from jaxmb.sim.actuators import actuator_forces, passive_forces

mujoco = pytest.importorskip("mujoco")

from jaxmb.sim.mjcf import load_mjcf_scene  # noqa: E402

DT, STEPS = 2e-3, 100


def arm():
    """Two hinges and a slide below them."""
    b = jaxmb.ModelBuilder("arm")
    b.add_body("l0", None, joints.revolute((0, 1, 0)), mass=1.0, com=(0.02, 0, -0.2),
               inertia=np.diag([0.02, 0.02, 0.005]))
    b.add_body("l1", "l0", joints.revolute((1, 0, 0)), placement=(np.eye(3), (0, 0, -0.4)), mass=0.8,
               com=(0, 0.01, -0.2), inertia=np.diag([0.015, 0.015, 0.004]))
    b.add_body("l2", "l1", joints.prismatic((0, 0, 1)), placement=(np.eye(3), (0, 0, -0.4)), mass=0.3,
               inertia=np.diag([1e-3, 1e-3, 1e-3]))
    return b.build()


MODEL = arm()
CTRL = jnp.array([0.4, -0.3, 0.5])
Q0, QD0 = jnp.array([0.2, -0.1, 0.05]), jnp.array([0.5, 0.3, -0.2])


def arm_scene(kp=(40.0, 25.0), integrator="implicit"):
    """A geared position servo with kv on the first hinge, one without on the second, a velocity servo on the
    slide; damping and springs."""
    acts = [position("l0", kp[0], 2.0, gear=1.5, force_limit=50.0), position("l1", kp[1]),
            velocity("l2", 3.0, gear=-2.0)]
    return make_scene(MODEL, actuators=acts, damping=0.1, spring_stiffness={"l0": 3.0, "l2": 20.0},
                      spring_reference={"l0": 0.3, "l2": -0.1}, integrator=integrator)


def trajectory(scene, state):
    return rollout(scene, state, DT, ctrls=jnp.tile(CTRL, (STEPS, 1)))[1]


run = fast_jit(trajectory)
run_batch = fast_jit(jax.vmap(trajectory, in_axes=(0, None)))


def final_cost(scene, state):
    final = rollout(scene, state, DT, ctrls=jnp.tile(CTRL, (STEPS, 1)))[0]
    return jnp.sum(final.q ** 2) + 0.1 * jnp.sum(final.qd ** 2)


cost = fast_jit(final_cost)
grad_cost = fast_jit(jax.grad(final_cost))


def with_kp(scene, kp):
    return scene.replace(actuators=scene.actuators.replace(kp=jnp.asarray(kp, scene.actuators.kp.dtype)))


def test_replacing_the_kp_leaf_gives_the_servo_built_with_it():
    """The scene built with kp = (40, 25) with its one ``kp`` leaf replaced by (70, 10): its forces at a state and its
    trajectory over 100 implicit steps equal those of the scene built with (70, 10), to round-off; they differ from
    the first scene's."""
    built, replaced = arm_scene((70.0, 10.0)), with_kp(arm_scene(), [70.0, 10.0, 0.0])
    f_built = actuator_forces(built.actuators, Q0, QD0, CTRL)
    assert_close(actuator_forces(replaced.actuators, Q0, QD0, CTRL), f_built, 1e-15)
    by_hand = 1.5 * (70.0 * (0.4 - 1.5 * 0.2) - 2.0 * 1.5 * 0.5)  # g (kp (u - g q) - kv g qd)
    assert_close(f_built[0], by_hand, 1e-15)
    a, b = run(built, init_state(built, Q0, QD0)), run(replaced, init_state(replaced, Q0, QD0))
    assert_close(b.q, a.q, 1e-14)
    assert_close(b.qd, a.qd, 1e-14)
    first = run(arm_scene(), init_state(built, Q0, QD0))
    assert np.abs(np.asarray(first.q - a.q)).max() > 1e-2


def test_rollout_gradient_wrt_kp_equals_central_differences():
    """``d cost / d kp`` of a 100-step implicit rollout (the servo's ``g^2 kp`` in the step's damping too), with
    respect to the one ``kp`` leaf, equals central differences of step 1e-4 relative to 1e-7; the velocity servo's
    entry (its kind has no kp) is zero."""
    scene = arm_scene()
    state = init_state(scene, Q0, QD0)
    g = np.asarray(grad_cost(scene, state).actuators.kp)
    kp = np.asarray(scene.actuators.kp)
    fd = []
    for i in range(2):
        h = 1e-4 * kp[i]
        up, down = kp.copy(), kp.copy()
        up[i] += h
        down[i] -= h
        fd.append((float(cost(with_kp(scene, up), state)) - float(cost(with_kp(scene, down), state))) / (2 * h))
    assert np.all(np.abs(fd) > 1e-4)
    assert_close(g[:2], fd, 1e-7, scale=np.abs(fd).max())
    assert g[2] == 0.0


def test_vmap_over_scenes_of_different_kp_equals_the_loop():
    """Four scenes whose ``kp`` leaves differ, stacked and stepped by one ``vmap``: each world's trajectory equals
    its scene's own rollout."""
    base = arm_scene()
    gains = np.array([[40.0, 25.0, 0.0], [10.0, 60.0, 0.0], [80.0, 5.0, 0.0], [0.0, 0.0, 0.0]])
    scenes = [with_kp(base, k) for k in gains]
    batch = jax.tree.map(lambda *x: jnp.stack(x), *scenes)
    state = init_state(base, Q0, QD0)
    together = run_batch(batch, state)
    for i, sc in enumerate(scenes):
        alone = run(sc, state)
        assert_close(together.q[i], alone.q, 1e-13)
        assert_close(together.qd[i], alone.qd, 1e-13)
    assert np.abs(np.asarray(together.q[0] - together.q[1])).max() > 1e-2


def test_implicit_step_takes_the_spring_implicitly():
    """One slide of mass m under a spring k about r and damping c, without gravity: the ``implicit`` step is ``(m +
    dt c + dt^2 k) (v+ - v) = dt (-k (q - r) - c v)``; ``implicitfast`` and ``euler`` take the spring explicitly,
    ``(m + dt c) (v+ - v)`` and ``m (v+ - v)`` to the same right-hand side."""
    b = jaxmb.ModelBuilder("slider", gravity=(0, 0, 0))
    b.add_body("cart", None, joints.prismatic((1, 0, 0)), mass=2.0, inertia=np.eye(3) * 1e-3)
    model = b.build()
    m, k, r, c, dt, q, v = 2.0, 5e4, 0.2, 3.0, 0.01, 0.05, -0.4
    rhs = dt * (-k * (q - r) - c * v)
    for integrator, lhs in (("implicit", m + dt * c + dt * dt * k), ("implicitfast", m + dt * c), ("euler", m)):
        scene = make_scene(model, damping=c, spring_stiffness=k, spring_reference=r, integrator=integrator)
        s = jaxmb.sim.step(scene, init_state(scene, jnp.array([q]), jnp.array([v])), None, dt)
        assert_close(s.qd, [v + rhs / lhs], 1e-14)
        assert_close(s.q, [q + dt * (v + rhs / lhs)], 1e-14)


# -- springs against MuJoCo ---------------------------------------------------------------------------------------

SPRINGS = """<mujoco model="springs">
  <compiler angle="radian"/>
  <option timestep="0.002" integrator="{integrator}"><flag contact="disable"/></option>
  <default><joint armature="0.01"/></default>
  <worldbody>
    <body name="base" pos="0 0 1">
      <joint name="slide" type="slide" axis="1 0 0.2" stiffness="30" springref="0.1" damping="2"/>
      <geom type="box" size=".1 .1 .1" mass="2"/>
      <body name="upper" pos="0 0 -.1" euler="0.2 0 0.1">
        <joint name="shoulder" axis="0 1 0" stiffness="5" springref="-0.4" damping="0.3"/>
        <joint name="twist" axis="1 0 0.3" stiffness="1.5" springref="0.7"/>
        <geom type="capsule" fromto="0 0 0 0.05 0 -.4" size=".04"/>
        <body name="lower" pos="0.05 0 -.4">
          <joint name="elbow" axis="0.1 1 0" ref="0.2" stiffness="2" springref="0.6" damping="0.05"/>
          <geom type="capsule" fromto="0 0 0 0 0.02 -.3" size=".03"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="servo" joint="shoulder" kp="40" kv="{kv}" gear="1.5" forcerange="-30 30"/>
    <motor name="push" joint="slide" gear="3" ctrlrange="-2 2"/>
  </actuator>
  <keyframe><key name="moving" qpos="0.1 0.3 -0.2 0.5" qvel="0.5 -1 2 0.3" ctrl="0.5 2.5"/></keyframe>
</mujoco>"""


def quietly(source, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = load_mjcf_scene(source, **options)
    return s, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_spring_forces_equal_mujocos_qfrc_spring():
    """At five random states the scene's passive forces less its damping equal MuJoCo's ``qfrc_spring`` to 1e-10 (the
    elbow's reference measured from its ``ref``, jaxmb's zero), and its damping MuJoCo's ``qfrc_damper``."""
    s, caught = quietly(SPRINGS.format(integrator="RK4", kv=2))
    assert not caught
    mj, m, terms = s.mj, s.mujoco_map, s.scene.joints
    undamped = terms.replace(damping=jnp.zeros_like(terms.damping))
    rng = np.random.default_rng(7)
    data = mujoco.MjData(mj)
    for _ in range(5):
        data.qpos[:], data.qvel[:] = rng.uniform(-1.5, 1.5, mj.nq), rng.uniform(-2, 2, mj.nv)
        mujoco.mj_forward(mj, data)
        q = m.qpos_to_q(data.qpos)
        qd = m.qvel_to_qd(q, data.qvel)
        spring = passive_forces(undamped, jnp.asarray(q), jnp.asarray(qd), False)
        assert np.abs(data.qfrc_spring).min() > 1e-3
        assert_close(spring, m.qfrc_to_tau(q, data.qfrc_spring), 1e-10)
        damper = passive_forces(s.scene.joints, jnp.asarray(q), jnp.asarray(qd), False) - spring
        assert_close(damper, m.qfrc_to_tau(q, data.qfrc_damper), 1e-10)


@pytest.mark.parametrize("integrator,kv", [("Euler", 0), ("implicitfast", 2), ("RK4", 2)])
def test_springs_follow_mujocos_steps(integrator, kv):
    """The chain from its keyframe under its controls: 200 steps of the scene read from the file equal MuJoCo's
    ``mj_step`` to 1e-8 in ``qpos`` and ``qvel`` with MuJoCo's Euler (damping implicit: the scene's
    ``implicitfast``; the servo without kv, which MuJoCo's Euler would take explicitly), implicitfast and RK4."""
    s, caught = quietly(SPRINGS.format(integrator=integrator, kv=kv))
    assert not caught
    assert s.scene.options.integrator == {"Euler": "implicitfast", "implicitfast": "implicitfast", "RK4": "rk4"}[
        integrator]
    key = s.keyframes["moving"]
    data = mujoco.MjData(s.mj)
    mujoco.mj_resetDataKeyframe(s.mj, data, 0)
    qpos, qvel = [], []
    for _ in range(200):
        mujoco.mj_step(s.mj, data)
        qpos.append(data.qpos.copy())
        qvel.append(data.qvel.copy())
    states = rollout(s.scene, init_state(s.scene, key.q, key.qd), s.dt, ctrls=jnp.tile(key.ctrl, (200, 1)))[1]
    q = np.asarray(states.q)
    assert np.abs(np.array(qpos) - s.mujoco_map.q_to_qpos(key.q)).max() > 0.3  # the chain moves
    assert_close(s.mujoco_map.q_to_qpos(q), np.array(qpos), 1e-8)
    assert_close(s.mujoco_map.qd_to_qvel(q, np.asarray(states.qd)), np.array(qvel), 1e-8)


def test_eulers_explicit_velocity_gains_are_named():
    """MuJoCo's Euler on a model with damping steps as ``implicitfast``, which takes the servo's kv implicitly too:
    the scene is refused naming the servo unless ``drop="integrator"``, and then the warning names it."""
    with pytest.raises(ModelError, match=r"velocity gains of actuators 'servo'.*\(drop 'integrator'\)"):
        quietly(SPRINGS.format(integrator="Euler", kv=2))
    s, caught = quietly(SPRINGS.format(integrator="Euler", kv=2), drop="integrator")
    assert s.scene.options.integrator == "implicitfast"
    assert len(caught) == 1 and "velocity gains of actuators 'servo'" in caught[0]


def test_bad_springs_raise_model_errors_naming_the_joint():
    """A negative stiffness given to `make_scene` or in a compiled model, and a spring on a ball joint given to
    `make_scene`, raise `ModelError` naming the joint; a ball joint's spring in MJCF is refused, named, and with
    ``drop="springs"`` stays out of the scene, named."""
    with pytest.raises(ModelError, match=r"spring_stiffness must be finite and non-negative.*'l1'"):
        make_scene(MODEL, spring_stiffness={"l1": -1.0})
    mj = mujoco.MjModel.from_xml_string(SPRINGS.format(integrator="RK4", kv=2))
    mj.jnt_stiffness[mj.joint("twist").id] = -3.0
    with pytest.raises(ModelError, match=r"<MjModel 'springs'>: spring_stiffness .*'twist'"):
        quietly(mj)
    b = jaxmb.ModelBuilder("ball")
    b.add_body("a", None, joints.revolute((0, 1, 0)), mass=1.0, inertia=np.eye(3))
    b.add_body("b", "a", joints.spherical(), mass=1.0, inertia=np.eye(3))
    with pytest.raises(ModelError, match=r"hinge and slide joints; joints \['b'\]"):
        make_scene(b.build(), spring_stiffness=1.0)
    ball = SPRINGS.format(integrator="RK4", kv=2).replace(
        '<joint name="elbow" axis="0.1 1 0" ref="0.2"', '<joint name="elbow" type="ball"').replace(
        'qpos="0.1 0.3 -0.2 0.5" qvel="0.5 -1 2 0.3"', 'qpos="0.1 0.3 -0.2 1 0 0 0" qvel="0.5 -1 2 0.3 0 0"')
    with pytest.raises(ModelError, match=r"ball and free joints 'elbow' \(drop 'springs'\)"):
        quietly(ball)
    s, caught = quietly(ball, drop="springs")
    assert any("joint springs (stiffness) of ball and free joints 'elbow'" in e.what for e in s.left_out)
    assert len(caught) == 1 and "'elbow'" in caught[0]
    k = np.asarray(s.scene.joints.spring_stiffness)
    assert np.count_nonzero(k) == 3 and not k[s.scene.tree.joint_coordinates("elbow")[1]].any()
