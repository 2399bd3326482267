"""A jaxmb environment with gymnax's functional signature, its parameters explicit: `GymnaxEnv` and `Params`.

    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)

as gymnax's environments (Lange, gymnax: A JAX-based reinforcement learning environment library, 2022), with
gymnasium's split of ``done`` into ``terminated`` and ``truncated``. ``params`` (`Params`) holds the scene and the
episode length, so a trainer can vmap or change them without rebuilding the environment. ``step`` starts a new
episode where the step ended one (gymnax's rule), drawing it with ``key``; the returned reward, terminated,
truncated and info are those of the step that ended it. gymnax need not be installed.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxmb.envs.core import Env, State
from jaxmb.envs.wrappers import AutoReset, EpisodeLength, Vmap


class Params(NamedTuple):
    """The parameters of a `GymnaxEnv`: ``scene`` (a `jaxmb.sim.Scene`, the nominal scene a
    `jaxmb.envs.Randomize` draws from) and ``max_steps_in_episode`` () the episode length."""

    scene: Any
    max_steps_in_episode: jnp.ndarray


class GymnaxEnv:
    """``env`` (a `jaxmb.envs.Env` of one world, without `EpisodeLength`, `AutoReset` or `Vmap`: the adapter counts
    the steps and resets) with gymnax's signature (module docstring)."""

    def __init__(self, env: Env, max_steps_in_episode=1000):
        layer = env
        while layer is not None:
            if isinstance(layer, (EpisodeLength, AutoReset, Vmap)):
                raise ValueError(f"GymnaxEnv counts the steps and resets itself: pass the environment without its "
                                 f"{type(layer).__name__} wrapper")
            layer = getattr(layer, "env", None)
        self.env = env
        self.max_steps_in_episode = int(max_steps_in_episode)

    @property
    def default_params(self) -> Params:
        return Params(self.env.scene, jnp.asarray(self.max_steps_in_episode, jnp.int32))

    def reset(self, key, params: Params):
        """``(obs, state)`` at the start of an episode of the scene ``params.scene``."""
        state = self.env.reset_scene(params.scene, key)
        state = state._replace(info={**state.info, "episode_steps": jnp.zeros((), jnp.int32)})
        return state.obs, state

    def step(self, key, state: State, action, params: Params):
        """``(obs, state, reward, terminated, truncated, info)``: ``terminated`` and ``truncated`` () bool (a
        failure or diverged world, and the episode length), ``info`` the step's metrics and ``discount`` (0 where
        terminated)."""
        stepped = self.env.step_scene(params.scene, state, action)
        steps = state.info["episode_steps"] + 1
        terminated = stepped.info["terminated"] != 0
        truncated = (steps >= params.max_steps_in_episode) & ~terminated
        stepped = stepped._replace(info={**stepped.info, "episode_steps": steps})
        _, fresh = self.reset(key, params)
        done = terminated | truncated
        next_state = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, stepped)
        info = {**stepped.metrics, "discount": 1.0 - terminated.astype(stepped.reward.dtype)}
        return next_state.obs, next_state, stepped.reward, terminated, truncated, info

    @property
    def num_actions(self) -> int:
        return self.env.action_size

    @property
    def observation_size(self):
        return self.env.observation_size
