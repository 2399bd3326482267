"""Cartpole balance and swing-up: a cart on a rail pushes a hinged pole upright and keeps it there.

Model (the dimensions of the DeepMind Control Suite's cartpole, Tassa et al., 2018): a 1 kg cart sliding along x
(``q[0] = x``), a 0.1 kg uniform pole of 1 m hinged on it about y (``q[1] = theta``, 0 upright, ``pi`` hanging
down; its centre of mass 0.5 m from the hinge, inertia ``m l^2 / 12`` about its hinge axes), gravity 9.81 m/s^2,
one motor on the cart of at most ``max_force`` N (default 10). Action (1,) in [-1, 1] (clipped), the force
``max_force action``.

Observation (5,): ``[x, cos theta, sin theta, xd, thetad]``.

Reward, in [0, 1] (`jaxmb.envs.rewards`): ``upright(cos theta) (1 + small(x, 2)) / 2 small_control(action)
(1 + small(thetad, 5)) / 2``: 1 with the pole upright at rest, the cart at the centre and zero action.

Termination: the cart leaves the rail (``|x| > rail``, default 3 m); under ``balance``, also the pole falls
(``cos theta < 0.75``).

Start: ``x`` uniform in +-0.1 m, the velocities normal with standard deviation 0.01; ``theta`` uniform in +-0.1 rad
(balance) or ``pi`` plus that (swing-up). Time steps: ``sim_dt`` 0.01 s (semi-implicit Euler), ``ctrl_dt`` 0.02 s.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb import joints, sim
from jaxmb.envs import rewards
from jaxmb.envs.core import Env
from jaxmb.model import ModelBuilder

FALLEN_COS = 0.75
"""Under balance, the episode ends once ``cos theta`` is below this (the pole more than 41 degrees from upright)."""


def cartpole_scene(max_force=10.0, cart_mass=1.0, pole_mass=0.1, pole_length=1.0):
    """The scene of the module docstring."""
    b = ModelBuilder("cartpole", gravity=(0.0, 0.0, -9.81))
    b.add_body("cart", None, joints.prismatic((1.0, 0.0, 0.0)), joint_name="slider", mass=cart_mass,
               inertia=np.diag([1e-2, 1e-2, 1e-2]))
    rod = pole_mass * pole_length ** 2 / 12.0
    b.add_body("pole", "cart", joints.revolute((0.0, 1.0, 0.0)), joint_name="hinge", mass=pole_mass,
               com=(0.0, 0.0, pole_length / 2), inertia=np.diag([rod, rod, 1e-4 * rod]))
    model = b.build()
    return sim.make_scene(model, actuators=[sim.motor("slider", gear=max_force)], integrator="euler")


class Cartpole(Env):
    """The task of the module docstring: ``balance=True`` starts upright and ends when the pole falls,
    ``balance=False`` (swing-up) starts hanging down."""

    def __init__(self, balance=True, max_force=10.0, rail=3.0, sim_dt=0.01, ctrl_dt=0.02, asymmetric=False):
        super().__init__(cartpole_scene(max_force), sim_dt, ctrl_dt, asymmetric)
        self.balance = bool(balance)
        self.rail = float(rail)

    def initial_state(self, scene, rng):
        k_x, k_theta, k_qd = jax.random.split(rng, 3)
        dtype = scene.tree.mass.dtype
        x = jax.random.uniform(k_x, (), dtype, -0.1, 0.1)
        theta = jax.random.uniform(k_theta, (), dtype, -0.1, 0.1) + (0.0 if self.balance else jnp.pi)
        qd = 0.01 * jax.random.normal(k_qd, (2,), dtype)
        return sim.init_state(scene, jnp.stack([x, theta]), qd)

    def control(self, scene, state, action):
        return jnp.clip(action, -1.0, 1.0)

    def observe(self, scene, state, memory):
        (x, theta), (xd, thetad) = state.q, state.qd
        return jnp.stack([x, jnp.cos(theta), jnp.sin(theta), xd, thetad])

    def reward(self, scene, state, action, memory):
        (x, theta), thetad = state.q, state.qd[1]
        up = rewards.upright(jnp.cos(theta))
        centered = (1.0 + rewards.small(x, 2.0)) / 2.0
        still = (1.0 + rewards.small(thetad, 5.0)) / 2.0
        effort = rewards.small_control(action)
        return up * centered * effort * still, {"upright": up, "centered": centered}

    def terminated(self, scene, state, memory):
        off_rail = jnp.abs(state.q[0]) > self.rail
        if self.balance:
            return off_rail | (jnp.cos(state.q[1]) < FALLEN_COS)
        return off_rail
