"""`jaxmb.sysid.trajectory`: a box pushed along the floor, sliding on its four corners (compliant contact): its
friction coefficient and mass recovered within 1 % by single and by multiple shooting from 60 steps of positions and
velocities with noise, starting 40 % and 25 % off; the shipped quadruped's link masses and foot friction through
its feet's contacts; and an MJCF arm's armatures recovered to round-off from MuJoCo's own recording of its motion
(the fit of benchmarks/sysid.py against ``mujoco.sysid``). Float64."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb
from checks import fast_jit
from jaxmb import assets, joints, sim, sysid
from jaxmb.sim import box, load_mjcf_scene, make_scene, plane

HALF = (0.1, 0.08, 0.05)
TRUE = (0.5, 1.3)  # friction coefficient, mass (kg)
GUESS = (0.3, 1.0)
STEPS, DT = 60, 2e-3
NOISE = 1e-5  # m, m/s, rad/s


def _set_parameters(scene, theta):
    mu, m = jnp.exp(theta)  # log-parameters: positive at every step of the fit
    return scene.replace(model=scene.model.replace(mass=jnp.array([m])),
                         geometry=scene.geometry.replace(friction=jnp.full(2, mu)))


@functools.cache
def _problem():
    """The scene, the start, the push (qfrcs) and the noisy measured states of the true box."""
    b = jaxmb.ModelBuilder("box")
    b.add_body("body", None, joints.free(), mass=1.0, inertia=np.diag([0.003, 0.004, 0.005]))
    scene = make_scene(b.build(), [plane(name="floor", friction=0.3), box("body", HALF, friction=0.3)],
                       contact="compliant", integrator="euler", stiffness=1e5, dissipation=1.0, slip_velocity=0.05)
    t = jnp.arange(STEPS) * DT
    qfrcs = jnp.zeros((STEPS, 6)).at[:, 3].set(8.0 * (1 + jnp.sin(2 * np.pi * 4 * t)))  # a push along x, in N
    depth = (TRUE[1] * 9.81 / 4 / 1e5) ** (2 / 3)  # a corner's static Hunt-Crossley depth
    start = jnp.array([0, 0, HALF[2] - depth, 1, 0, 0, 0, 0, 0, 0, 1.0, 0, 0])  # sliding at 1 m/s along x
    exact = fast_jit(sysid.simulate, static_argnums=(3,))(_set_parameters(scene, jnp.log(jnp.array(TRUE))), start,
                                                          DT, STEPS, qfrcs)
    assert np.all(exact[:, 10] > 0.5)  # it slides throughout
    measured = exact + NOISE * jax.random.normal(jax.random.PRNGKey(0), exact.shape)
    return scene, start, qfrcs, measured


def _check(fit):
    assert bool(fit.converged)
    found = np.exp(np.asarray(fit.theta))
    assert np.all(np.abs(found / np.array(TRUE) - 1) < 0.01), found


def test_single_shooting_recovers_friction_and_mass():
    scene, start, qfrcs, measured = _problem()
    fit = fast_jit(lambda theta: sysid.fit_single_shooting(_set_parameters, theta, scene, start, measured, DT,
                                                           qfrcs=qfrcs))(jnp.log(jnp.array(GUESS)))
    _check(fit)


def test_multiple_shooting_recovers_friction_mass_and_continuous_starts():
    scene, start, qfrcs, measured = _problem()
    fit = fast_jit(lambda theta: sysid.fit_multiple_shooting(_set_parameters, theta, scene, start, measured, DT, 3,
                                                             qfrcs=qfrcs))(jnp.log(jnp.array(GUESS)))
    _check(fit)
    # the segments' starts close the gaps: each is the measured state before it, to the noise
    assert fit.starts.shape == (3, 13)
    before = measured[np.array([STEPS // 3 - 1, 2 * STEPS // 3 - 1])]
    assert float(jnp.max(jnp.abs(fit.starts[1:] - before))) < 10 * NOISE



def test_a_quadrupeds_link_masses_and_foot_friction_come_back_through_its_contacts():
    """The quadruped dropped onto its feet (compliant contact, the implicit integrator) while its servos sway its
    legs: the trunk's, thighs' and calves' masses and the floor's friction, from 0.2 s of states with 1e-5 noise,
    starting 20-30 % off, within 1e-4 relative."""
    path = assets.path("quadruped.urdf")
    model = jaxmb.load_urdf(path, floating_base=True)
    feet = sim.urdf_geometry(path, model)
    scene = make_scene(model, [plane(name="floor", friction=0.8)] + feet,
                       actuators=[sim.position(j, kp=60.0, kv=2.0, force_limit=25.0) for j in model.joint_names[1:]],
                       pairs_include=[("floor", g.name) for g in feet], contact="compliant", stiffness=5e4,
                       dissipation=2.0, slip_velocity=0.05)
    thighs = np.array([i for i, n in enumerate(model.body_names) if n.endswith("thigh")])
    calves = np.array([i for i, n in enumerate(model.body_names) if n.endswith("calf")])

    def set_parameters(scene, theta):
        trunk, thigh, calf, mu = theta
        mass = scene.model.mass.at[0].set(trunk).at[thighs].set(thigh).at[calves].set(calf)
        return scene.replace(model=scene.model.replace(mass=mass),
                             geometry=scene.geometry.replace(friction=scene.geometry.friction.at[0].set(mu)))

    steps, dt = 200, 1e-3
    q0 = jnp.asarray(assets.quadruped_standing())  # the feet 2.4 cm above the floor
    ctrls = q0[7:] + 0.25 * jnp.sin(2 * np.pi * 3 * jnp.arange(steps)[:, None] * dt + jnp.arange(12))
    start = jnp.concatenate([q0, jnp.zeros(model.nv)])
    true = jnp.array([5.0, 0.9, 0.25, 0.8])
    exact = fast_jit(sysid.simulate, static_argnums=(3,))(set_parameters(scene, true), start, dt, steps, None, None,
                                                          ctrls)
    measured = exact + NOISE * jax.random.normal(jax.random.PRNGKey(1), exact.shape)
    fit = fast_jit(lambda theta: sysid.fit_single_shooting(set_parameters, theta, scene, start, measured, dt,
                                                           ctrls=ctrls))(true * jnp.array([0.8, 1.2, 1.3, 0.7]))
    assert bool(fit.converged)
    assert float(jnp.max(jnp.abs(fit.theta / true - 1))) < 1e-4, fit.theta

ARM = """
<mujoco model="arm3">
  <option integrator="implicitfast" timestep="0.002"><flag contact="disable"/></option>
  <worldbody>
    <body name="l1" pos="0 0 0.1">
      <inertial pos="0 0 0.06" mass="1.2" diaginertia="0.012 0.011 0.004"/>
      <joint name="j1" type="hinge" axis="0 0 1" armature="0.45" damping="0.9"/>
      <body name="l2" pos="0 0 0.12">
        <inertial pos="0.01 0 0.05" mass="0.9" diaginertia="0.009 0.008 0.003"/>
        <joint name="j2" type="hinge" axis="0 1 0" armature="0.35" damping="0.7"/>
        <body name="l3" pos="0 0 0.1">
          <inertial pos="0 0.01 0.05" mass="0.7" diaginertia="0.006 0.006 0.002"/>
          <joint name="j3" type="hinge" axis="1 0 0" armature="0.25" damping="0.5"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="j1"/><motor joint="j2"/><motor joint="j3"/></actuator>
</mujoco>
"""


def test_an_mjcf_arms_armatures_come_back_to_round_off_from_mujocos_recording():
    import mujoco
    from mujoco import rollout

    loaded = load_mjcf_scene(ARM)
    scene, dt = loaded.scene, loaded.dt
    t = np.arange(250) * dt
    ctrl = np.array([4.0, 3.0, 2.0]) * np.sin(2 * np.pi * np.array([0.9, 1.3, 1.7]) * t[:, None] + np.arange(3))
    m = loaded.mj
    d = mujoco.MjData(m)
    state = np.squeeze(rollout.rollout(m, d, np.r_[0.0, d.qpos, d.qvel], ctrl)[0], 0)  # (steps, time + q + qd)
    measured = jnp.asarray(state[:, 1:])  # the state after each step
    true = np.asarray(scene.model.armature)

    def set_parameters(scene, theta):  # the armatures themselves (a log-parameter's cost is flat near zero)
        return scene.replace(model=scene.model.replace(armature=theta))

    fit = fast_jit(lambda theta: sysid.fit_single_shooting(set_parameters, theta, scene, jnp.zeros(6), measured, dt,
                                                           ctrls=jnp.asarray(ctrl)))(jnp.asarray(0.5 * true))
    assert bool(fit.converged) and float(fit.cost) < 1e-25
    np.testing.assert_allclose(np.asarray(fit.theta), true, rtol=1e-12)
