"""Panda reach: the Franka Emika Panda arm brings its tool centre point to a target drawn at every reset.

Model: the Panda of example-robot-data (`jaxmb.robots`, ``"panda"``) with its fingers fixed open (their prismatic
joints made fixed, so the seven arm joints move alone), gravity 9.81 m/s^2, no contacts; one motor per arm joint
of the joint's URDF effort limit (87 N m on joints 1-4, 12 N m on 5-7), its control in [-1, 1]; the model's joint
limits enforced; joint damping `JOINT_DAMPING` (the URDF has none: without it a full torque spins the light wrist
past 100 rad/s within a second), taken implicitly (``implicitfast``).

Two action spaces (two registered names):

* ``"torque"`` (`PandaReach` ``action="torque"``), (7,) in [-1, 1] (clipped): the joints' torques as fractions of
  their effort limits.
* ``"cartesian"``, (3,) in [-1, 1] (clipped): the target point ``x* = centre + half a`` of the tool centre point in
  `TARGET_BOX` (world axes), tracked at every simulator step by `jaxmb.operational_space_control` on the tool
  centre point's linear axes with the task accelerations ``u = KP (x* - x) - KD xd`` and, in the null space, the
  posture forces ``g(q) + KP_POSTURE (q_home - q) - KD_POSTURE qd`` (``g`` the gravity forces,
  `jaxmb.gravity_forces`); the torques, divided by the effort limits, are clipped to [-1, 1].

Observation (20,): ``[q (7), qd (7), x (3), target - x (3)]``, ``x`` the tool centre point ``panda_hand_tcp`` in
world coordinates.

Reward: ``exp(-d / DISTANCE_SCALE) - CONTROL_COST mean(c^2)``, ``d`` the distance from the tool centre point to the
target (m) and ``c`` (7,) the motors' controls the action commands at the state arrived at: 1 at the target with no
torque. Metrics: ``distance`` and ``success`` (1.0 where ``d < SUCCESS_DISTANCE``).

Start: the ready pose `Q_HOME` plus a uniform offset of +-0.1 rad per joint, at rest; the target uniform in
`TARGET_BOX`. No termination. Time steps: ``sim_dt`` 0.004 s, ``ctrl_dt`` 0.02 s.
"""

import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb import robots, sim
from jaxmb.dynamics.inverse import gravity_forces
from jaxmb.dynamics.opspace import operational_space_control
from jaxmb.envs.core import Env
from jaxmb.io.urdf import load_urdf_string
from jaxmb.kinematics import frame_poses, frame_velocity

TOOL = "panda_hand_tcp"
"""The frame that reaches: the tool centre point between the fingers."""

Q_HOME = (0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4)
"""The ready pose (rad) an episode starts near and the null-space posture of the Cartesian action."""

TARGET_BOX = ((0.25, -0.3, 0.2), (0.65, 0.3, 0.7))
"""(low, high) corners (m, world axes) of the box the target is drawn in and the Cartesian action spans."""

DISTANCE_SCALE = 0.1
"""The distance (m) at which the reach term is ``exp(-1)``."""

CONTROL_COST = 0.1
"""The weight of the mean squared motor control in the reward."""

SUCCESS_DISTANCE = 0.01
"""A step succeeds where the tool centre point is within this distance (m) of the target."""

KP, KD = 100.0, 20.0
"""The Cartesian action's task-space gains (1/s^2, 1/s): critically damped at 10 rad/s."""

KP_POSTURE, KD_POSTURE = 10.0, 0.5
"""The Cartesian action's null-space posture gains (N m/rad, N m s/rad)."""

JOINT_DAMPING = 1.0
"""Viscous damping (N m s/rad) on every arm joint, as MuJoCo Menagerie's Panda carries: the wrist's 12 N m then
turn it at no more than 12 rad/s."""

ACTIONS = ("torque", "cartesian")
"""The action spaces (module docstring)."""


def panda_model():
    """``(model, effort)``: the Panda of the module docstring (7 coordinates) and its joints' effort limits (7,)
    (N m), read from the URDF of `jaxmb.robots.path` ``("panda")``."""
    root = ET.fromstring(robots.path("panda").read_text(encoding="utf-8"))
    effort = []
    for joint in root.iter("joint"):
        if joint.get("type") == "prismatic":
            joint.set("type", "fixed")
        elif joint.get("type") == "revolute":
            effort.append(float(joint.find("limit").get("effort")))
    model = load_urdf_string(ET.tostring(root, encoding="unicode"), source="panda.urdf (fingers fixed)",
                             inertia="strict")
    return model, tuple(effort)


def panda_scene():
    """The scene of the module docstring: ``(scene, effort)``."""
    model, effort = panda_model()
    motors = [sim.motor(j, gear=e) for j, e in zip(model.joint_names, effort)]
    return sim.make_scene(model, actuators=motors, damping=JOINT_DAMPING, integrator="implicitfast"), effort


class PandaReach(Env):
    """The task of the module docstring; ``action`` one of `ACTIONS`."""

    def __init__(self, action="torque", sim_dt=0.004, ctrl_dt=0.02, asymmetric=False):
        if action not in ACTIONS:
            raise ValueError(f"PandaReach: action must be one of {ACTIONS}, got {action!r}")
        scene, effort = panda_scene()
        super().__init__(scene, sim_dt, ctrl_dt, asymmetric)
        self.action = action
        self.effort = effort

    @property
    def action_size(self) -> int:
        return 7 if self.action == "torque" else 3

    def initial_state(self, scene, rng):
        dtype = scene.tree.mass.dtype
        q = jnp.asarray(Q_HOME, dtype) + jax.random.uniform(rng, (7,), dtype, -0.1, 0.1)
        return sim.init_state(scene, q)

    def initial_memory(self, scene, rng):
        low, high = (jnp.asarray(c, scene.tree.mass.dtype) for c in TARGET_BOX)
        return {"target": jax.random.uniform(rng, (3,), low.dtype, low, high)}

    def tool(self, scene, state):
        """The tool centre point's position and velocity (3,), (3,) in world coordinates."""
        model = scene.model
        x = frame_poses(model, state.q).p[model.frame_index(TOOL)]
        xd = frame_velocity(model, state.q, state.qd, TOOL, "world_aligned")[3:]
        return x, xd

    def control(self, scene, state, action):
        a = jnp.clip(action, -1.0, 1.0)
        if self.action == "torque":
            return a
        low, high = (jnp.asarray(c, a.dtype) for c in TARGET_BOX)
        goal = (low + high) / 2 + (high - low) / 2 * a
        model, q, qd = scene.model, state.q, state.qd
        x, xd = self.tool(scene, state)
        u = KP * (goal - x) - KD * xd
        posture = gravity_forces(model, q) + KP_POSTURE * (jnp.asarray(Q_HOME, q.dtype) - q) - KD_POSTURE * qd
        tau = operational_space_control(model, q, qd, TOOL, u, posture, axes="linear", reference="world_aligned")
        return jnp.clip(tau / scene.actuators.gear, -1.0, 1.0)

    def observe(self, scene, state, memory):
        x, _ = self.tool(scene, state)
        return jnp.concatenate([state.q, state.qd, x, memory["target"] - x])

    def reward(self, scene, state, action, memory):
        x, _ = self.tool(scene, state)
        d = jnp.linalg.norm(memory["target"] - x)
        c = self.control(scene, state, action)
        reward = jnp.exp(-d / DISTANCE_SCALE) - CONTROL_COST * jnp.mean(jnp.square(c))
        return reward, {"distance": d, "success": (d < SUCCESS_DISTANCE).astype(d.dtype)}
