"""jaxmb environments for brax's trainers (brax 0.14): `BraxEnv` and `wrap_env_fn`.

`BraxEnv(env)` is a ``brax.envs.base.Env`` (``reset``, ``step``, ``observation_size``, ``action_size``,
``backend``) of a jaxmb environment; its states are ``brax.envs.base.State(pipeline_state, obs, reward, done,
metrics, info)`` with the `jaxmb.sim.State` as ``pipeline_state``. brax's ``ppo.train`` takes it unchanged, with
``wrap_env_fn=wrap_env_fn``, so that the episodes, resets and batching are jaxmb's (`jaxmb.envs.wrappers`) and a
reset draws a new start state and, under `jaxmb.envs.Randomize`, a new scene; brax's ``AutoResetWrapper`` (which
restarts every episode from the state of the first reset) is not used::

    env = BraxEnv(jaxmb.envs.wrap(jaxmb.envs.make("cartpole_balance"), randomize=..., auto_reset=False))
    make_policy, params, metrics = ppo.train(env, ..., wrap_env_fn=wrap_env_fn)

brax 0.14.2 calls ``jax.device_put_replicated``, which JAX 0.10 removed (google/brax#671); importing this module
installs `device_put_replicated` in its place where JAX lacks it, and nothing else does. The shim is removed once a
brax release no longer calls it.
"""

import jax
import jax.numpy as jnp
import numpy as np

try:
    from brax.envs import base as brax_base
except ModuleNotFoundError as e:
    raise ImportError("jaxmb.envs.brax needs brax: `pip install 'jaxmb[rl]'`, or the package itself, "
                      "`pip install brax==0.14.2`") from e

from jaxmb.envs.core import State
from jaxmb.envs.wrappers import AutoReset, EpisodeLength, Vmap, Wrapper


def device_put_replicated(x, devices):
    """``x`` (a pytree) stacked once per device of ``devices`` on a new leading axis, sharded one copy per device
    (what ``jax.device_put_replicated`` did before JAX 0.10)."""
    mesh = jax.sharding.Mesh(np.asarray(devices), ("replica",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("replica"))
    return jax.tree.map(lambda a: jax.device_put(jnp.stack([jnp.asarray(a)] * len(devices)), sharding), x)


if not hasattr(jax, "device_put_replicated"):
    jax.device_put_replicated = device_put_replicated


def to_brax(state: State) -> brax_base.State:
    """The brax state of a jaxmb environment's state (``sim`` as ``pipeline_state``)."""
    return brax_base.State(state.sim, state.obs, state.reward, state.done, dict(state.metrics), dict(state.info))


def from_brax(state: brax_base.State) -> State:
    """The jaxmb environment's state of a brax state."""
    return State(state.pipeline_state, state.obs, state.reward, state.done, dict(state.metrics), dict(state.info))


class BraxEnv(brax_base.Env):
    """A jaxmb environment ``env`` (`jaxmb.envs.Env`, of one world or a `jaxmb.envs.Vmap` batch) as a brax
    ``Env`` (module docstring). ``env`` is kept as ``jaxmb_env``."""

    def __init__(self, env):
        self.jaxmb_env = env

    def reset(self, rng: jax.Array) -> brax_base.State:
        return to_brax(self.jaxmb_env.reset(rng))

    def step(self, state: brax_base.State, action: jax.Array) -> brax_base.State:
        return to_brax(self.jaxmb_env.step(from_brax(state), action))

    @property
    def observation_size(self):
        return self.jaxmb_env.observation_size

    @property
    def action_size(self) -> int:
        return self.jaxmb_env.action_size

    @property
    def backend(self) -> str:
        return "jaxmb"


class EpisodeMetrics(Wrapper):
    """The ``info`` entries brax's trainers read (as brax's ``EpisodeWrapper`` writes them): ``truncation`` (the
    world's ``truncated``; also as ``time_out``, which PPO's ``bootstrap_on_timeout`` reads), ``episode_done`` (its
    ``done``), ``episode_metrics`` (``sum_reward``, ``length`` and each metric summed over the current episode,
    restarted after a ``done``) and ``steps`` (the episode's ``length``: at a ``done``, the length of the episode
    that ended). Goes outside `AutoReset`."""

    def reset_scene(self, scene, rng) -> State:
        state = self.env.reset_scene(scene, rng)
        zero = jnp.zeros_like(state.reward)
        sums = {"sum_reward": zero, "length": zero, **{k: zero for k in state.metrics}}
        info = {**state.info, "truncation": state.info["truncated"], "time_out": state.info["truncated"],
                "episode_done": zero, "episode_metrics": sums, "steps": zero}
        return state._replace(info=info)

    def step_scene(self, scene, state: State, action) -> State:
        state = self.env.step_scene(scene, state, action)
        keep = 1.0 - state.info["episode_done"]
        old = state.info["episode_metrics"]
        sums = {"sum_reward": old["sum_reward"] * keep + state.reward, "length": old["length"] * keep + 1.0,
                **{k: old[k] * keep + v for k, v in state.metrics.items()}}
        info = {**state.info, "truncation": state.info["truncated"], "time_out": state.info["truncated"],
                "episode_done": state.done, "episode_metrics": sums, "steps": sums["length"]}
        return state._replace(info=info)


def wrap_env_fn(env: BraxEnv, episode_length: int = 1000, action_repeat: int = 1, randomization_fn=None):
    """brax's ``wrap_env_fn`` for ``ppo.train`` (and its other trainers): ``env``, a `BraxEnv` of one world, under
    jaxmb's `EpisodeLength`, `AutoReset`, `EpisodeMetrics` and `Vmap`, as a `BraxEnv` of a batch. A randomization
    belongs to the jaxmb environment (`jaxmb.envs.Randomize`, drawn at every reset), so brax's
    ``randomization_fn`` (a system batch drawn once) is refused, as is an ``action_repeat`` other than 1 (the
    environment's ``ctrl_dt`` is its repeat)."""
    if randomization_fn is not None:
        raise ValueError("wrap_env_fn: randomize the jaxmb environment (jaxmb.envs.wrap(env, randomize=...)), "
                         "which draws a new scene at every reset, instead of passing randomization_fn")
    if action_repeat != 1:
        raise ValueError(f"wrap_env_fn: action_repeat must be 1, got {action_repeat!r}; set the environment's "
                         "ctrl_dt (the simulator's substeps per action) instead")
    inner = env.jaxmb_env if isinstance(env, BraxEnv) else env
    return BraxEnv(Vmap(EpisodeMetrics(AutoReset(EpisodeLength(inner, episode_length)))))
