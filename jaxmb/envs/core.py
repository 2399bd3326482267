"""`State` and `Env`: a reinforcement-learning environment of one world on `jaxmb.sim`.

An environment is a Python object (static under ``jax.jit``) with two pure functions of one world:
``reset(rng) -> State`` and ``step(state, action) -> State``. Batching worlds is ``jax.vmap`` (`jaxmb.envs.Vmap`).
Each step holds the action for ``ctrl_dt`` and advances the simulator by ``ctrl_dt / sim_dt`` steps of ``sim_dt``
in a ``lax.scan``; the task's `Env.control` maps the action to the simulator's controls at every one of them, from
the simulator state then (a low-level controller at the simulator's rate, as an operational-space one).

What a task keeps beside the simulator state (a target drawn at reset, a command, the last action) is its
``memory``, a dict of arrays in ``info["memory"]``: drawn by `Env.initial_memory` at reset, advanced by
`Env.remember` after each step, and handed to `Env.observe`, `Env.reward` and `Env.terminated`.

The scene a world runs is an argument of the environment's functions: ``reset_scene(scene, rng)`` and
``step_scene(scene, state, action)`` are the functions of a world whose scene is ``scene``, and ``reset`` and
``step`` call them with the environment's own ``scene``. So a wrapper can hand a world another scene (a randomized
one, `jaxmb.envs.Randomize`, which keeps it in the world's ``info``) without the task knowing.

A world whose simulation diverged (``sim.diverged != 0``) or whose observation or reward is not finite ends its
episode: its ``terminated`` is set, its reward is zero and the non-finite entries of its observation are zero, so a
NaN never reaches a trainer; `jaxmb.envs.AutoReset` starts it again.
"""

import abc
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxmb import sim


class State(NamedTuple):
    """One world of an environment (batched by ``jax.vmap``: every leaf gains a leading axis).

    sim: the simulator's `jaxmb.sim.State`.
    obs: the observation, an array (n,) or a dict of arrays (``{"state": ..., "privileged_state": ...}`` for an
        asymmetric actor-critic).
    reward: () the reward of the last step (zero after a reset).
    done: () 1.0 where the episode ended at the last step (``max(terminated, truncated)``), else 0.0.
    metrics: dict of () arrays, the task's reward terms and ``diverged`` (1.0 where the world's step was not finite).
    info: dict; ``rng`` the world's key; ``terminated`` () 1.0 where the task ended the episode (a failure state or
        a diverged world: the value of what follows is zero); ``truncated`` () 1.0 where a time limit cut it
        (`jaxmb.envs.EpisodeLength`: the value of what follows is not zero); ``memory`` the task's memory (module
        docstring); wrappers add their own entries
        (``episode_steps``, ``scene``, ``action_buffer``, ``xfrc``).
    """

    sim: sim.State
    obs: Any
    reward: jnp.ndarray
    done: jnp.ndarray
    metrics: dict
    info: dict


def finite_or_zero(tree):
    """``tree`` with every non-finite entry of its arrays replaced by zero, and whether all were finite (a ()
    bool)."""
    leaves = jax.tree.leaves(tree)
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves])) if leaves else jnp.bool_(True)
    return jax.tree.map(lambda x: jnp.where(jnp.isfinite(x), x, 0.0), tree), ok


class Env(abc.ABC):
    """An environment of one world (module docstring). Tasks subclass it and define `initial_state`, `observe`,
    `reward` and `control` (abstract: a task without one is a TypeError naming it when it is built), `terminated`
    where a state ends the episode, and `initial_memory` and `remember` where they keep a memory; wrappers
    (`jaxmb.envs.Wrapper`) subclass it and forward to the environment they wrap.

    scene: the nominal `jaxmb.sim.Scene`; sim_dt: the simulator's time step (s); ctrl_dt: the time an action is
    held (s), an integer multiple of ``sim_dt``; asymmetric: observe a dict ``{"state": obs, "privileged_state":
    [obs, privileged]}`` for an actor-critic whose critic sees more than its actor (`privileged`).
    """

    def __init__(self, scene, sim_dt, ctrl_dt, asymmetric=False):
        substeps = ctrl_dt / sim_dt
        if not (sim_dt > 0 and abs(substeps - round(substeps)) < 1e-9 and round(substeps) >= 1):
            raise ValueError(f"ctrl_dt ({ctrl_dt}) must be a positive integer multiple of sim_dt ({sim_dt})")
        self.scene = scene
        self.sim_dt = float(sim_dt)
        self.ctrl_dt = float(ctrl_dt)
        self.substeps = int(round(substeps))
        self.asymmetric = bool(asymmetric)

    # -- what a task defines ------------------------------------------------------------------------------------

    @abc.abstractmethod
    def initial_state(self, scene, rng) -> sim.State:
        """The simulator state a world starts an episode from (drawn with ``rng``)."""

    def initial_memory(self, scene, rng) -> dict:
        """The task's memory at the start of an episode (a dict of arrays, drawn with ``rng``): none by default."""
        return {}

    def remember(self, scene, memory, state: sim.State, action) -> dict:
        """The memory after a step under ``action`` that arrived at ``state``: ``memory`` unchanged by default."""
        return memory

    @abc.abstractmethod
    def observe(self, scene, state: sim.State, memory):
        """The observation of ``state`` (and ``memory``): an array (n,) or a dict of arrays."""

    @abc.abstractmethod
    def reward(self, scene, state: sim.State, action, memory):
        """``(reward, metrics)`` of arriving at ``state`` under ``action``, ``memory`` the memory before the step (its
        last action is the previous step's): a () array and a dict of () arrays."""

    def privileged(self, scene, state: sim.State, memory):
        """What the critic of an `asymmetric` environment sees beside the observation: the scene's body masses
        (nb,) and actuator gears (nu,), the quantities `jaxmb.envs.Randomize` draws most often."""
        return jnp.concatenate([scene.tree.mass, scene.actuators.gear])

    def observation(self, scene, state: sim.State, memory):
        """`observe`, as the dict of an `asymmetric` environment where it is one."""
        obs = self.observe(scene, state, memory)
        if not self.asymmetric:
            return obs
        return {"state": obs, "privileged_state": jnp.concatenate([obs, self.privileged(scene, state, memory)])}

    def terminated(self, scene, state: sim.State, memory):
        """() bool: whether ``state`` ends the episode (a failure state)."""
        return jnp.bool_(False)

    @abc.abstractmethod
    def control(self, scene, state: sim.State, action):
        """The simulator's controls (nu,) of ``action`` (`action_size`,) at the simulator state ``state`` (called at
        every simulator step of `step_scene`)."""

    @property
    def action_size(self) -> int:
        return self.scene.nu

    # -- the environment's functions ---------------------------------------------------------------------------

    def reset(self, rng) -> State:
        """A world at the start of an episode, drawn with ``rng`` (a key)."""
        return self.reset_scene(self.scene, rng)

    def step(self, state: State, action) -> State:
        """``state`` after ``action`` (`action_size`,) held for ``ctrl_dt``."""
        return self.step_scene(self.scene, state, action)

    def reset_scene(self, scene, rng) -> State:
        """`reset` of a world whose scene is ``scene``."""
        rng, key, k_memory = jax.random.split(rng, 3)
        start = self.initial_state(scene, key)
        memory = self.initial_memory(scene, k_memory)
        obs, _ = finite_or_zero(self.observation(scene, start, memory))
        zero = jnp.zeros((), start.qd.dtype)
        _, shapes = jax.eval_shape(self.reward, scene, start, jnp.zeros(self.action_size, start.qd.dtype), memory)
        metrics = {**jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes), "diverged": zero}
        info = {"rng": rng, "terminated": zero, "truncated": zero, "memory": memory}
        return State(start, obs, zero, zero, metrics, info)

    def step_scene(self, scene, state: State, action) -> State:
        """`step` of a world whose scene is ``scene``. ``state.info["xfrc"]`` (nb, 6), where present, is a body
        wrench applied at every simulator step (`jaxmb.sim.step`'s ``xfrc``)."""
        xfrc = state.info.get("xfrc")
        memory = state.info["memory"]

        def substep(s, _):
            return sim.step(scene, s, self.control(scene, s, action), self.sim_dt, xfrc=xfrc), None

        after, _ = jax.lax.scan(substep, state.sim, None, length=self.substeps)
        remembered = self.remember(scene, memory, after, action)
        obs, obs_finite = finite_or_zero(self.observation(scene, after, remembered))
        reward, metrics = self.reward(scene, after, action, memory)
        (reward, metrics), reward_finite = finite_or_zero((reward, metrics))
        diverged = (after.diverged != 0) | ~obs_finite | ~reward_finite
        terminated = diverged | self.terminated(scene, after, remembered)
        dtype = reward.dtype
        reward = jnp.where(diverged, 0.0, reward)
        metrics = {**metrics, "diverged": diverged.astype(dtype)}
        info = {**state.info, "terminated": terminated.astype(dtype), "truncated": jnp.zeros((), dtype),
                "memory": remembered}
        return State(after, obs, reward, terminated.astype(dtype), metrics, info)

    # -- sizes --------------------------------------------------------------------------------------------------

    @property
    def observation_size(self):
        """The observation's size: an int for an array observation, ``{key: shape}`` for a dict (brax's
        convention)."""
        obs = jax.eval_shape(self.reset, jax.random.PRNGKey(0)).obs
        if isinstance(obs, dict):
            return {k: tuple(v.shape) for k, v in obs.items()}
        return int(obs.shape[-1])

    @property
    def unwrapped(self) -> "Env":
        return self
