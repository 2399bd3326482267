"""Pendulum swing-up: a torque-limited pendulum swings up from hanging and balances upright.

Model: a 1 kg point-like mass 0.5 m from a hinge about y (``q = 0`` hanging down, ``q = pi`` upright), gravity
9.81 m/s^2, one motor on the hinge of at most ``max_torque`` N m (default 2, below the 4.9 N m that gravity needs at
the horizontal, so the pendulum has to swing). Action (1,) in [-1, 1] (clipped), the torque ``max_torque action``.

Observation (3,): ``[cos q, sin q, qd]``.

Reward, in [0, 1]: ``upright(-cos q) (1 + small(qd, 8)) / 2 small_control(action)`` (`jaxmb.envs.rewards`): 1
upright at rest with zero action, 0 hanging down.

Start: hanging, ``q`` uniform in +-0.1 rad and ``qd`` in +-0.1 rad/s. No termination (the episode length ends it,
`jaxmb.envs.EpisodeLength`). Time steps: ``sim_dt`` 0.01 s (semi-implicit Euler), ``ctrl_dt`` 0.02 s.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb import joints, sim
from jaxmb.envs import rewards
from jaxmb.envs.core import Env
from jaxmb.model import ModelBuilder


def pendulum_scene(max_torque=2.0):
    """The scene of the module docstring."""
    b = ModelBuilder("pendulum", gravity=(0.0, 0.0, -9.81))
    b.add_body("pole", None, joints.revolute((0.0, 1.0, 0.0)), joint_name="hinge", mass=1.0, com=(0.0, 0.0, -0.5),
               inertia=np.diag([1e-3, 1e-3, 1e-3]))
    model = b.build()
    return sim.make_scene(model, actuators=[sim.motor("hinge", gear=max_torque)], integrator="euler")


class PendulumSwingup(Env):
    """The task of the module docstring."""

    def __init__(self, max_torque=2.0, sim_dt=0.01, ctrl_dt=0.02, asymmetric=False):
        super().__init__(pendulum_scene(max_torque), sim_dt, ctrl_dt, asymmetric)

    def initial_state(self, scene, rng):
        k_q, k_qd = jax.random.split(rng)
        dtype = scene.tree.mass.dtype
        q = jax.random.uniform(k_q, (1,), dtype, -0.1, 0.1)
        qd = jax.random.uniform(k_qd, (1,), dtype, -0.1, 0.1)
        return sim.init_state(scene, q, qd)

    def control(self, scene, state, action):
        return jnp.clip(action, -1.0, 1.0)

    def observe(self, scene, state, memory):
        q, qd = state.q[0], state.qd[0]
        return jnp.stack([jnp.cos(q), jnp.sin(q), qd])

    def reward(self, scene, state, action, memory):
        up = rewards.upright(-jnp.cos(state.q[0]))
        still = (1.0 + rewards.small(state.qd[0], 8.0)) / 2.0
        effort = rewards.small_control(action)
        return up * still * effort, {"upright": up}
