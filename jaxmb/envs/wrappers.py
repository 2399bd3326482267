"""Wrappers: environments made of an environment, each adding one thing to a world.

Each wrapper is an `jaxmb.envs.Env` whose ``reset_scene`` and ``step_scene`` call those of the environment it wraps,
so wrappers stack in any order but two: `AutoReset` goes outside `Randomize` (a reset then draws a new scene) and
outside `EpisodeLength` (a truncated episode then starts again), and `Vmap` goes outermost. `wrap` stacks them in
that order:

    Vmap(AutoReset(EpisodeLength(ObservationNoise(ActionLatency(Push(Randomize(task)))))))

- `Randomize`: a new scene ``randomize(scene, rng)`` drawn at every reset, kept in ``info["scene"]`` and stepped.
- `Push`: random body wrenches (`jaxmb.sim.step`'s ``xfrc``) now and then.
- `ActionLatency`: the action applied ``latency`` steps late, from a ring buffer in ``info["action_buffer"]``.
- `ObservationNoise`: Gaussian noise on the observation (on its ``"state"`` entry for a dict observation, so that a
  critic's privileged observation stays clean).
- `EpisodeLength`: ``info["episode_steps"]`` counted; ``truncated`` set at the episode length.
- `AutoReset`: a world whose episode ended starts a new one from a fresh draw of the start state and, under
  `Randomize`, of the scene (not from a state cached at the first reset).
- `Vmap`: ``reset(rngs)`` and ``step(states, actions)`` of a batch, ``jax.vmap`` of the world's functions.
"""

import jax
import jax.numpy as jnp

from jaxmb.envs.core import Env, State


class Wrapper(Env):
    """An environment that forwards everything to ``env`` (its `scene`, time steps, sizes, `reset_scene`,
    `step_scene` and the task's functions); subclasses override what they change."""

    def __init__(self, env: Env):
        self.env = env

    @property
    def scene(self):
        return self.env.scene

    @property
    def sim_dt(self):
        return self.env.sim_dt

    @property
    def ctrl_dt(self):
        return self.env.ctrl_dt

    @property
    def substeps(self):
        return self.env.substeps

    @property
    def action_size(self) -> int:
        return self.env.action_size

    @property
    def unwrapped(self) -> Env:
        return self.env.unwrapped

    def reset_scene(self, scene, rng) -> State:
        return self.env.reset_scene(scene, rng)

    def step_scene(self, scene, state: State, action) -> State:
        return self.env.step_scene(scene, state, action)

    def initial_state(self, scene, rng):
        return self.env.initial_state(scene, rng)

    def observe(self, scene, state, memory):
        return self.env.observe(scene, state, memory)

    def reward(self, scene, state, action, memory):
        return self.env.reward(scene, state, action, memory)

    def control(self, scene, state, action):
        return self.env.control(scene, state, action)


def _split(state: State):
    """``(state with a new info["rng"], a key)``."""
    rng, key = jax.random.split(state.info["rng"])
    return state._replace(info={**state.info, "rng": rng}), key


class Randomize(Wrapper):
    """Domain randomization: ``randomize(scene, rng) -> scene`` draws the scene of a world at every reset (from the
    nominal scene given to `reset_scene`); the drawn scene is ``info["scene"]``, and the world's steps run it.
    `jaxmb.envs.randomization.uniform` builds such a function over named leaves."""

    def __init__(self, env: Env, randomize):
        super().__init__(env)
        self.randomize = randomize
        drawn = jax.eval_shape(randomize, env.scene, jax.random.PRNGKey(0))
        if jax.tree.structure(drawn) != jax.tree.structure(env.scene):
            raise ValueError("randomize(scene, rng) must return a scene of the same structure (only leaf values "
                             "change)")

    def reset_scene(self, scene, rng) -> State:
        rng, key = jax.random.split(rng)
        drawn = self.randomize(scene, key)
        state = self.env.reset_scene(drawn, rng)
        return state._replace(info={**state.info, "scene": drawn})

    def step_scene(self, scene, state: State, action) -> State:
        return self.env.step_scene(state.info["scene"], state, action)


class Push(Wrapper):
    """Pushes: before each step, with probability ``probability``, a force of magnitude uniform in ``force``
    (lower, upper) (N) in a uniformly random direction of the world's horizontal (x, y) plane at the centre of mass
    of ``body`` (a body name), held for that step; ``info["xfrc"]`` (nb, 6) is the wrench of the last step."""

    def __init__(self, env: Env, body, force, probability):
        super().__init__(env)
        names = self.scene.tree.body_names
        if body not in names:
            raise ValueError(f"Push: no body {body!r} in model {self.scene.tree.name!r}; its bodies are {names}")
        if len(force) != 2 or not 0 <= force[0] <= force[1] or not 0 <= probability <= 1:
            raise ValueError(f"Push: force must be (lower, upper) with 0 <= lower <= upper and probability in "
                             f"[0, 1], got {force!r} and {probability!r}")
        self.body = names.index(body)
        self.force = tuple(float(f) for f in force)
        self.probability = float(probability)

    def reset_scene(self, scene, rng) -> State:
        state = self.env.reset_scene(scene, rng)
        xfrc = jnp.zeros((scene.tree.nb, 6), state.reward.dtype)
        return state._replace(info={**state.info, "xfrc": xfrc})

    def step_scene(self, scene, state: State, action) -> State:
        state, key = _split(state)
        k_on, k_size, k_angle = jax.random.split(key, 3)
        dtype = state.reward.dtype
        on = jax.random.uniform(k_on, (), dtype) < self.probability
        size = jax.random.uniform(k_size, (), dtype, *self.force)
        angle = jax.random.uniform(k_angle, (), dtype, 0.0, 2 * jnp.pi)
        force = jnp.where(on, size, 0.0) * jnp.stack([jnp.cos(angle), jnp.sin(angle), jnp.zeros((), dtype)])
        xfrc = jnp.zeros((scene.tree.nb, 6), dtype).at[self.body, 3:].set(force)
        return self.env.step_scene(scene, state._replace(info={**state.info, "xfrc": xfrc}), action)


class ActionLatency(Wrapper):
    """Action latency: the action a step receives is applied ``latency`` steps later (the steps before it apply
    the zero action). ``info["action_buffer"]`` (latency, action_size) is a ring buffer of the actions not yet
    applied and ``info["action_index"]`` () the slot of the oldest."""

    def __init__(self, env: Env, latency: int):
        super().__init__(env)
        if int(latency) != latency or latency < 1:
            raise ValueError(f"latency must be a positive number of steps, got {latency!r}")
        self.latency = int(latency)

    def reset_scene(self, scene, rng) -> State:
        state = self.env.reset_scene(scene, rng)
        buffer = jnp.zeros((self.latency, self.action_size), state.reward.dtype)
        return state._replace(info={**state.info, "action_buffer": buffer,
                                    "action_index": jnp.zeros((), jnp.int32)})

    def step_scene(self, scene, state: State, action) -> State:
        buffer, i = state.info["action_buffer"], state.info["action_index"]
        applied = buffer[i]
        buffer = buffer.at[i].set(action)
        state = self.env.step_scene(scene, state, applied)
        return state._replace(info={**state.info, "action_buffer": buffer,
                                    "action_index": (i + 1) % self.latency})


class ObservationNoise(Wrapper):
    """Observation noise: zero-mean Gaussian noise of standard deviation ``scale`` (a scalar or one value per entry)
    added to the observation, or to its ``key`` entry (default ``"state"``) for a dict observation."""

    def __init__(self, env: Env, scale, key="state"):
        super().__init__(env)
        self.scale = scale
        self.key = key

    def _noisy(self, state: State) -> State:
        state, key = _split(state)
        obs = state.obs
        clean = obs[self.key] if isinstance(obs, dict) else obs
        noisy = clean + jnp.asarray(self.scale, clean.dtype) * jax.random.normal(key, clean.shape, clean.dtype)
        return state._replace(obs={**obs, self.key: noisy} if isinstance(obs, dict) else noisy)

    def reset_scene(self, scene, rng) -> State:
        return self._noisy(self.env.reset_scene(scene, rng))

    def step_scene(self, scene, state: State, action) -> State:
        return self._noisy(self.env.step_scene(scene, state, action))


class EpisodeLength(Wrapper):
    """Episodes of at most ``episode_length`` steps: ``info["episode_steps"]`` () counts a world's steps, and the
    step that reaches the length sets ``truncated`` (unless the task terminated it then) and ``done``."""

    def __init__(self, env: Env, episode_length: int):
        super().__init__(env)
        if int(episode_length) != episode_length or episode_length < 1:
            raise ValueError(f"episode_length must be a positive number of steps, got {episode_length!r}")
        self.episode_length = int(episode_length)

    def reset_scene(self, scene, rng) -> State:
        state = self.env.reset_scene(scene, rng)
        return state._replace(info={**state.info, "episode_steps": jnp.zeros((), jnp.int32)})

    def step_scene(self, scene, state: State, action) -> State:
        state = self.env.step_scene(scene, state, action)
        steps = state.info["episode_steps"] + 1
        terminated = state.info["terminated"]
        truncated = jnp.where((steps >= self.episode_length) & (terminated == 0), 1.0, 0.0).astype(terminated.dtype)
        info = {**state.info, "episode_steps": steps, "truncated": truncated}
        return state._replace(done=jnp.maximum(terminated, truncated), info=info)


TRANSITION = ("terminated", "truncated")
"""The ``info`` entries that describe the step just taken; `AutoReset` keeps them (with the step's reward, done and
metrics) where it starts a new episode."""


class AutoReset(Wrapper):
    """A world whose step ended its episode (``done``) starts a new one at once: its ``sim``, ``obs`` and the
    ``info`` entries its reset makes come from a fresh `reset_scene` with a new key from ``info["rng"]``, so the
    start state (and, under `Randomize`, the scene) is drawn again at every reset. The step's ``reward``, ``done``,
    ``metrics`` and `TRANSITION` entries stay those of the step that ended the episode. ``info`` entries that the
    reset does not make (a trainer's own) are kept."""

    def step_scene(self, scene, state: State, action) -> State:
        state = self.env.step_scene(scene, state, action)
        state, key = _split(state)
        fresh = self.env.reset_scene(scene, key)
        done = state.done != 0

        def pick(new, old):
            return jax.tree.map(lambda a, b: jnp.where(done, a, b), new, old)

        kept = {k: v for k, v in fresh.info.items() if k not in TRANSITION and k != "rng"}
        info = {**state.info, **pick(kept, {k: state.info[k] for k in kept})}
        return state._replace(sim=pick(fresh.sim, state.sim), obs=pick(fresh.obs, state.obs), info=info)


class Vmap(Wrapper):
    """A batch of worlds: ``reset(rngs)`` with keys (batch, 2) (or typed keys (batch,)), ``step(states, actions)``
    with actions (batch, action_size); ``jax.vmap`` of the wrapped environment's functions of one world."""

    def reset(self, rng) -> State:
        return jax.vmap(self.env.reset)(rng)

    def step(self, state: State, action) -> State:
        return jax.vmap(self.env.step)(state, action)

    def reset_scene(self, scene, rng) -> State:
        return jax.vmap(self.env.reset_scene, in_axes=(None, 0))(scene, rng)

    def step_scene(self, scene, state: State, action) -> State:
        return jax.vmap(self.env.step_scene, in_axes=(None, 0, 0))(scene, state, action)

    @property
    def observation_size(self):
        return self.env.observation_size


def wrap(env: Env, episode_length=None, randomize=None, push=None, latency=None, obs_noise=None, auto_reset=True,
         batch=False) -> Env:
    """``env`` under the wrappers asked for, in the order of the module docstring: ``randomize`` (a function,
    `Randomize`), ``push`` (a dict of `Push`'s arguments), ``latency`` (steps, `ActionLatency`), ``obs_noise``
    (`ObservationNoise`'s ``scale``), ``episode_length`` (`EpisodeLength`), ``auto_reset`` (`AutoReset`),
    ``batch`` (`Vmap`)."""
    if randomize is not None:
        env = Randomize(env, randomize)
    if push is not None:
        env = Push(env, **push)
    if latency:
        env = ActionLatency(env, latency)
    if obs_noise is not None:
        env = ObservationNoise(env, obs_noise)
    if episode_length is not None:
        env = EpisodeLength(env, episode_length)
    if auto_reset:
        env = AutoReset(env)
    if batch:
        env = Vmap(env)
    return env
