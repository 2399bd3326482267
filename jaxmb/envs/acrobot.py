"""Acrobot swing-up: a two-link pendulum with a motor at the elbow alone swings its tip up above the shoulder.

Model (the dimensions of the DeepMind Control Suite's acrobot, Tassa et al., 2018): two uniform 1 kg links of 1 m
in a vertical plane, the upper hinged to the world (the shoulder, ``q[0]``, passive) and the lower to the upper's
tip (the elbow, ``q[1]``), both about y, ``q = 0`` hanging straight down; gravity 9.81 m/s^2; one motor on the
elbow of at most ``max_torque`` N m (default 2). Action (1,) in [-1, 1] (clipped), the torque ``max_torque action``.

Observation (6,): ``[cos q0, sin q0, cos q1, sin q1, qd0, qd1]``.

Reward, in [0, 1]: ``(2 + h) / 4 small_control(action)`` with ``h = -(cos q0 + cos(q0 + q1))`` the tip's height
above the shoulder in link lengths (`jaxmb.envs.rewards`): 1 with both links upright and zero action, 0 hanging.

Start: both angles uniform in +-0.1 rad, velocities in +-0.1 rad/s. No termination. Time steps: ``sim_dt`` 0.005 s
(semi-implicit Euler), ``ctrl_dt`` 0.02 s.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb import joints, sim
from jaxmb.envs import rewards
from jaxmb.envs.core import Env
from jaxmb.model import ModelBuilder


def acrobot_scene(max_torque=2.0):
    """The scene of the module docstring."""
    b = ModelBuilder("acrobot", gravity=(0.0, 0.0, -9.81))
    rod = 1.0 / 12.0
    link = dict(mass=1.0, com=(0.0, 0.0, -0.5), inertia=np.diag([rod, rod, 1e-4]))
    b.add_body("upper", None, joints.revolute((0.0, 1.0, 0.0)), joint_name="shoulder", **link)
    b.add_body("lower", "upper", joints.revolute((0.0, 1.0, 0.0)), joint_name="elbow",
               placement=(np.eye(3), (0.0, 0.0, -1.0)), **link)
    model = b.build()
    return sim.make_scene(model, actuators=[sim.motor("elbow", gear=max_torque)], integrator="euler")


def tip_height(q):
    """The lower link's tip above the shoulder, in link lengths: ``-(cos q0 + cos(q0 + q1))``."""
    return -(jnp.cos(q[0]) + jnp.cos(q[0] + q[1]))


class AcrobotSwingup(Env):
    """The task of the module docstring."""

    def __init__(self, max_torque=2.0, sim_dt=0.005, ctrl_dt=0.02, asymmetric=False):
        super().__init__(acrobot_scene(max_torque), sim_dt, ctrl_dt, asymmetric)

    def initial_state(self, scene, rng):
        k_q, k_qd = jax.random.split(rng)
        dtype = scene.tree.mass.dtype
        q = jax.random.uniform(k_q, (2,), dtype, -0.1, 0.1)
        qd = jax.random.uniform(k_qd, (2,), dtype, -0.1, 0.1)
        return sim.init_state(scene, q, qd)

    def control(self, scene, state, action):
        return jnp.clip(action, -1.0, 1.0)

    def observe(self, scene, state, memory):
        q, qd = state.q, state.qd
        return jnp.concatenate([jnp.stack([jnp.cos(q[0]), jnp.sin(q[0]), jnp.cos(q[1]), jnp.sin(q[1])]), qd])

    def reward(self, scene, state, action, memory):
        h = tip_height(state.q)
        return (2.0 + h) / 4.0 * rewards.small_control(action), {"tip_height": h}
