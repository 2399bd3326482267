"""Quadruped joystick: the shipped quadruped follows a velocity command ``(vx, vy, yaw rate)`` drawn at every reset.

Model: `jaxmb.assets.quadruped` on a floor (the feet's URDF collision spheres against a plane), twelve position
servos (``kp`` `KP` N m/rad, ``kv`` `KV` N m s/rad, at most `FORCE_LIMIT` N m) holding the leg joints at their
targets, MuJoCo's convex contact problem by Newton's method (``solver="newton"``), semi-implicit Euler. Action
(12,) in [-1, 1] (clipped): the servos' targets ``standing + ACTION_SCALE a`` (rad), ``standing`` the leg angles of
`jaxmb.assets.quadruped_standing`.

Observation (45,): ``[g_B (3), w_B (3), q_legs - standing (12), qd_legs (12), last action (12), command (3)]``,
``g_B`` the unit gravity direction in the trunk frame and ``w_B`` the trunk's angular velocity in it. The critic's
``privileged_state`` (``asymmetric=True``, the default) adds the trunk's linear velocity ``v_B`` (3,) in the trunk
frame and the feet's contact forces (4, 3) in world axes (`jaxmb.sim.contact_forces`).

Reward: ``ctrl_dt sum_i w_i r_i`` over the terms of MuJoCo Playground's Go1 joystick (Zakka et al., "MuJoCo
Playground", 2025), their weights ``w_i`` the table `REWARD_WEIGHTS`:

    tracking_lin_vel   exp(-|cmd_xy - v_B,xy|^2 / TRACKING_SIGMA)
    tracking_ang_vel   exp(-(cmd_yaw - w_B,z)^2 / TRACKING_SIGMA)
    lin_vel_z          v_B,z^2
    ang_vel_xy         |w_B,xy|^2
    orientation        |g_B,xy|^2
    torques            |tau|^2 of the servos at the state arrived at (N^2 m^2)
    action_rate        |a - last action|^2
    feet_slip          sum over the feet in contact of their horizontal speed squared (m^2/s^2)
    termination        1 where the trunk has fallen (its up axis below the horizontal)

Standing still under a zero command scores 1 on both tracking terms and 0 on every penalty. Metrics: each term.

Termination: the trunk fallen (``g_B,z > 0``). Start: standing with its feet on the floor, a uniform heading, the
leg angles offset uniformly by +-0.05 rad; the command uniform in `COMMAND_RANGE`. Time steps: ``sim_dt`` 0.004 s,
``ctrl_dt`` 0.02 s. `RANDOMIZE` (masses, friction, servo gains) and `PUSH` (on the trunk) are the settings of
`jaxmb.envs.wrap` for a robust policy.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb import assets, sim
from jaxmb.envs.core import Env
from jaxmb.envs.randomization import uniform
from jaxmb.kinematics import frame_poses, frame_velocity
from jaxmb.rotation import quat_multiply, quat_to_matrix
from jaxmb.sim.actuators import actuator_forces

KP, KV, FORCE_LIMIT = 60.0, 2.0, 25.0
"""The servos' stiffness (N m/rad), damping (N m s/rad) and force limit (N m)."""

ACTION_SCALE = 0.5
"""The servo target's offset (rad) from standing at a full action."""

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
"""The feet (frames and bodies of the collision spheres), in the order of the contact slots."""

COMMAND_RANGE = ((-1.0, -0.5, -1.0), (1.0, 0.5, 1.0))
"""(low, high) of the command ``(vx, vy, yaw rate)`` (m/s, m/s, rad/s), in the trunk frame."""

TRACKING_SIGMA = 0.25
"""The tracking terms' width (squared units of the velocity)."""

REWARD_WEIGHTS = {
    "tracking_lin_vel": 1.0,
    "tracking_ang_vel": 0.5,
    "lin_vel_z": -0.5,
    "ang_vel_xy": -0.05,
    "orientation": -5.0,
    "torques": -2e-4,
    "action_rate": -0.01,
    "feet_slip": -0.1,
    "termination": -1.0,
}
"""The weight of each reward term (module docstring), Playground's Go1 joystick's."""

RANDOMIZE = uniform(scale={"model.mass": (0.9, 1.1), "geometry.friction": (0.6, 1.4), "actuators.kp": (0.9, 1.1)})
"""Randomized dynamics, drawn at every reset (`jaxmb.envs.Randomize`): each body's mass and inertia, each geom's
friction and each servo's ``kp`` scaled by a factor uniform in the ranges."""

PUSH = {"body": "trunk", "force": (0.0, 30.0), "probability": 0.05}
"""Pushes on the trunk (`jaxmb.envs.Push`): a horizontal force up to 30 N held for a step, at 5 % of the steps."""


def quadruped_scene():
    """``(scene, q_start)``: the scene of the module docstring and the standing configuration (19,) whose lowest
    foot sphere touches the floor."""
    path = assets.path("quadruped.urdf")
    model = assets.quadruped()
    feet = sim.urdf_geometry(path, model)
    if tuple(g.body for g in feet) != FEET:
        raise ValueError(f"{path}: expected foot spheres on {FEET}, found {[g.body for g in feet]}")
    legs = model.joint_names[1:]
    servos = [sim.position(j, kp=KP, kv=KV, force_limit=FORCE_LIMIT) for j in legs]
    scene = sim.make_scene(model, [sim.plane(name="floor")] + feet, pairs_include=[("floor", g.name) for g in feet],
                           actuators=servos, solver="newton", integrator="euler")
    q = np.array(assets.quadruped_standing(), float)
    T = frame_poses(model, jnp.asarray(q))
    lowest = min(float(T.p[model.frame_index(f), 2]) - g.size[0] for f, g in zip(FEET, feet))
    q[2] -= lowest
    return scene, q


class QuadrupedJoystick(Env):
    """The task of the module docstring."""

    def __init__(self, sim_dt=0.004, ctrl_dt=0.02, asymmetric=True):
        scene, q_start = quadruped_scene()
        super().__init__(scene, sim_dt, ctrl_dt, asymmetric)
        self.q_start = q_start
        self.feet = tuple(scene.model.frame_index(f) for f in FEET)

    @property
    def action_size(self) -> int:
        return 12

    def initial_state(self, scene, rng):
        k_yaw, k_legs = jax.random.split(rng)
        dtype = scene.tree.mass.dtype
        q = jnp.asarray(self.q_start, dtype)
        yaw = jax.random.uniform(k_yaw, (), dtype, -jnp.pi, jnp.pi)
        heading = jnp.stack([jnp.cos(yaw / 2), jnp.zeros((), dtype), jnp.zeros((), dtype), jnp.sin(yaw / 2)])
        legs = q[7:] + jax.random.uniform(k_legs, (12,), dtype, -0.05, 0.05)
        return sim.init_state(scene, q.at[3:7].set(quat_multiply(heading, q[3:7])).at[7:].set(legs))

    def initial_memory(self, scene, rng):
        low, high = (jnp.asarray(c, scene.tree.mass.dtype) for c in COMMAND_RANGE)
        return {"command": jax.random.uniform(rng, (3,), low.dtype, low, high), "last_action": jnp.zeros(12, low.dtype)}

    def remember(self, scene, memory, state, action):
        return {**memory, "last_action": jnp.clip(action, -1.0, 1.0)}

    def control(self, scene, state, action):
        return jnp.asarray(self.q_start[7:], action.dtype) + ACTION_SCALE * jnp.clip(action, -1.0, 1.0)

    def trunk(self, state):
        """``(g_B, w_B, v_B)`` (3,) each: gravity's direction, angular and linear velocity in the trunk frame."""
        R = quat_to_matrix(state.q[3:7])
        return -R[2], state.qd[:3], state.qd[3:6]

    def observe(self, scene, state, memory):
        g_B, w_B, _ = self.trunk(state)
        legs = state.q[7:] - jnp.asarray(self.q_start[7:], state.q.dtype)
        return jnp.concatenate([g_B, w_B, legs, state.qd[6:], memory["last_action"], memory["command"]])

    def privileged(self, scene, state, memory):
        return jnp.concatenate([self.trunk(state)[2], sim.contact_forces(state).reshape(-1)])

    def terminated(self, scene, state, memory):
        return self.trunk(state)[0][2] > 0.0

    def reward(self, scene, state, action, memory):
        g_B, w_B, v_B = self.trunk(state)
        cmd = memory["command"]
        tau = actuator_forces(scene.actuators, state.q, state.qd, self.control(scene, state, action))
        in_contact = state.contact.force[:, 0] > 0.0
        foot_v = jnp.stack([frame_velocity(scene.model, state.q, state.qd, f, "world_aligned")[3:5] for f in FEET])
        terms = {
            "tracking_lin_vel": jnp.exp(-jnp.sum(jnp.square(cmd[:2] - v_B[:2])) / TRACKING_SIGMA),
            "tracking_ang_vel": jnp.exp(-jnp.square(cmd[2] - w_B[2]) / TRACKING_SIGMA),
            "lin_vel_z": jnp.square(v_B[2]),
            "ang_vel_xy": jnp.sum(jnp.square(w_B[:2])),
            "orientation": jnp.sum(jnp.square(g_B[:2])),
            "torques": jnp.sum(jnp.square(tau)),
            "action_rate": jnp.sum(jnp.square(jnp.clip(action, -1.0, 1.0) - memory["last_action"])),
            "feet_slip": jnp.sum(jnp.where(in_contact, jnp.sum(jnp.square(foot_v), -1), 0.0)),
            "termination": (g_B[2] > 0.0).astype(v_B.dtype),
        }
        reward = self.ctrl_dt * sum(REWARD_WEIGHTS[k] * v for k, v in terms.items())
        return reward, terms
