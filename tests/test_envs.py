"""The environments of `jaxmb.envs`: API contracts, wrappers, randomization, divergence, rewards, adapters.

Oracles: closed-form rewards on scripted states; the cartpole's first step from rest against its 2x2 mass matrix
worked out by hand; a push on the cart against the same force given by its motor; a delayed action against the
undelayed environment fed the zero actions first; central differences through a step; a world alone against the
same world in a batch; brax's own ``ppo.train`` on the adapter.
"""

import functools
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from checks import assert_close, check_grads, fast_compile_environment, fast_jit

from jaxmb import envs, sim
from jaxmb.envs import cartpole as cartpole_task
from jaxmb.envs.gymnax import GymnaxEnv, Params

KEY = jax.random.PRNGKey(0)


@functools.cache
def programs(env):
    """``(reset, step)`` of ``env``, each compiled once per test file."""
    return fast_jit(env.reset), fast_jit(env.step)


@functools.cache
def task(name, **kwargs):
    return envs.make(name, **kwargs)


def rollout(env, state, actions):
    _, step = programs(env)
    states = []
    for a in actions:
        state = step(state, a)
        states.append(state)
    return states


@pytest.mark.parametrize("name", ["acrobot_swingup", "cartpole_balance", "cartpole_swingup", "pendulum_swingup"])
def test_every_task_resets_and_steps_with_its_documented_shapes(name):
    env = task(name)
    reset, step = programs(env)
    state = reset(KEY)
    after = step(state, jnp.full(env.action_size, 0.5))
    size = {"acrobot_swingup": 6, "cartpole_balance": 5, "cartpole_swingup": 5, "pendulum_swingup": 3}[name]
    assert env.observation_size == size and env.action_size == 1
    for s in (state, after):
        assert s.obs.shape == (size,) and s.obs.dtype == jnp.float64
        assert s.reward.shape == () and s.done.shape == () and s.reward.dtype == jnp.float64
        assert set(s.metrics) == set(state.metrics) and "diverged" in s.metrics
        assert s.info["terminated"].shape == () and s.info["truncated"].shape == ()
    assert float(state.reward) == 0.0 and 0.0 < float(after.reward) <= 1.0
    assert float(after.sim.t) == pytest.approx(env.ctrl_dt, abs=1e-15)  # ctrl_dt / sim_dt substeps
    assert not np.array_equal(after.obs, state.obs)


def test_the_registry_names_the_tasks_and_refuses_an_unknown_one():
    assert envs.names() == ("acrobot_swingup", "cartpole_balance", "cartpole_swingup", "panda_reach_cartesian",
                            "panda_reach_torque", "pendulum_swingup", "quadruped_joystick")
    with pytest.raises(ValueError, match="cartpole_balance, cartpole_swingup"):
        envs.make("cartpole")
    with pytest.raises(ValueError, match="integer multiple"):
        envs.make("pendulum_swingup", sim_dt=0.03, ctrl_dt=0.05)


def test_rewards_on_scripted_states_are_their_closed_forms():
    cart = task("cartpole_balance")
    scene, zero = cart.scene, jnp.zeros(1)

    def r(env, q, qd=None, action=zero):
        return float(env.reward(env.scene, sim.init_state(env.scene, jnp.asarray(q, float), qd), action, {})[0])

    assert r(cart, [0.0, 0.0]) == 1.0                                   # upright, at rest, centred, no effort
    assert r(cart, [0.0, np.pi]) == pytest.approx(0.0, abs=1e-16)       # hanging
    # x at the margin 2 m, the pole horizontal, full effort: 0.5 (1 + 0.1)/2 0.8 1
    assert r(cart, [2.0, np.pi / 2], action=jnp.ones(1)) == pytest.approx(0.5 * 0.55 * 0.8, rel=1e-14)
    assert r(cart, [0.0, 0.0], qd=jnp.array([0.0, 5.0])) == pytest.approx(0.55, rel=1e-14)
    pend, acro = task("pendulum_swingup"), task("acrobot_swingup")
    assert r(pend, [np.pi]) == pytest.approx(1.0, rel=1e-15) and r(pend, [0.0]) == 0.0
    assert r(acro, [np.pi, 0.0]) == pytest.approx(1.0, rel=1e-15) and r(acro, [0.0, 0.0]) == 0.0
    assert r(acro, [np.pi / 2, 0.0]) == pytest.approx(0.5, rel=1e-15)   # both links horizontal: tip at height 0
    up = sim.init_state(scene, jnp.array([0.0, 0.0]))
    fallen = sim.init_state(scene, jnp.array([0.0, 0.8]))               # cos 0.8 = 0.697 < 0.75
    off = sim.init_state(scene, jnp.array([3.1, 0.0]))
    assert not cart.terminated(scene, up, {}) and cart.terminated(scene, fallen, {}) and cart.terminated(scene, off, {})
    swing = task("cartpole_swingup")
    assert not swing.terminated(scene, fallen, {}) and swing.terminated(scene, off, {})


def test_the_cartpole_is_the_documented_cartpole():
    """From rest upright, one semi-implicit Euler step under the force F: ``xd = dt xdd`` with ``xdd`` from
    ``[[M + m, m l/2], [m l/2, m l^2/3]] qdd = [F, 0]`` (a uniform pole about its end; gravity has no torque
    upright)."""
    env = envs.make("cartpole_balance", sim_dt=0.01, ctrl_dt=0.01)
    state = env.reset(KEY)
    state = state._replace(sim=sim.init_state(env.scene, jnp.zeros(2)))
    after = env.step(state, jnp.array([0.3]))
    M, m, l, F, dt = 1.0, 0.1, 1.0, 0.3 * 10.0, 0.01
    A = np.array([[M + m, m * l / 2], [m * l / 2, m * l ** 2 / 3]])
    qdd = np.linalg.solve(A, [F, 0.0])
    assert_close(after.sim.qd, dt * qdd, 1e-12)
    assert_close(after.sim.q, dt * dt * qdd, 1e-12)


def test_a_batch_steps_each_world_as_it_steps_alone():
    env = task("cartpole_swingup")
    batch = envs.Vmap(env)
    keys = jax.random.split(KEY, 3)
    actions = jnp.array([[0.7], [-0.2], [1.0]])
    reset_b, step_b = programs(batch)
    reset, step = programs(env)
    together = step_b(reset_b(keys), actions)
    for i in range(3):
        alone = step(reset(keys[i]), actions[i])
        for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(together)):
            if a.size:  # the contact slots of a scene without geometry are empty
                assert_close(b[i], a, 1e-14)


def test_a_step_is_differentiable_as_central_differences_say():
    """d(obs, reward)/d(action, pole mass) through a pendulum step of two semi-implicit Euler substeps."""
    env = task("pendulum_swingup")
    state = env.reset(KEY)

    def f(action, mass):
        scene = env.scene.replace(model=env.scene.model.replace(mass=env.scene.model.mass.at[0].set(mass)))
        s = env.step_scene(scene, state, action)
        return jnp.concatenate([s.obs, s.reward[None]])

    check_grads(f, (jnp.array([0.4]), jnp.asarray(1.0)), atol=1e-7, rtol=1e-7, eps=1e-6)
    g = jax.grad(lambda a: env.step(state, a).obs[2])(jnp.array([0.4]))
    assert float(g[0]) > 0  # more torque, more speed


MASS = {"model.mass": (0.5, 2.0)}


def test_randomization_changes_exactly_the_leaves_it_names():
    scene = task("cartpole_swingup").scene
    randomize = envs.uniform(scale={**MASS, "actuators.gear": (0.9, 1.1)}, shift={"model.com": (-0.01, 0.01)})
    drawn = randomize(scene, KEY)
    before = dict(jax.tree_util.tree_flatten_with_path(scene)[0])
    after = dict(jax.tree_util.tree_flatten_with_path(drawn)[0])
    changed = {jax.tree_util.keystr(p) for p in before if not np.array_equal(before[p], after[p])}
    assert changed == {".model.mass", ".model.com", ".actuators.gear"}
    assert jax.tree.structure(drawn) == jax.tree.structure(scene)
    ratio = drawn.model.mass / scene.model.mass
    assert np.all((ratio >= 0.5) & (ratio <= 2.0)) and ratio[0] != ratio[1]  # one factor per body
    assert np.all(np.abs(drawn.model.com - scene.model.com) <= 0.01)
    # a body's inertia scales as a whole, with its mass
    inertia = envs.uniform(scale={"model.inertia": (0.5, 2.0)})(scene, KEY).model.inertia
    factor = inertia[:, 0, 0] / scene.model.inertia[:, 0, 0]
    assert_close(inertia, scene.model.inertia * factor[:, None, None], 1e-15)
    with pytest.raises(ValueError, match="'model.masses' is not a leaf"):
        envs.uniform(scale={"model.masses": (0.5, 2.0)})(scene, KEY)
    with pytest.raises(ValueError, match="low <= high"):
        envs.uniform(scale={"model.mass": (2.0, 0.5)})


def test_auto_reset_draws_a_new_start_state_and_a_new_scene_at_every_reset():
    env = envs.wrap(task("cartpole_swingup"), episode_length=3, randomize=envs.uniform(scale=MASS), batch=True)
    reset, step = programs(env)
    state = reset(jax.random.split(KEY, 2))
    starts, masses = [state.sim.q], [state.info["scene"].model.mass]
    for episode in range(2):
        for k in range(3):
            state = step(state, jnp.zeros((2, 1)))
            assert np.all(state.done == (k == 2)) and np.all(state.info["truncated"] == (k == 2))
            assert np.all(state.info["terminated"] == 0)
        assert np.all(state.info["episode_steps"] == 0) and np.all(state.sim.t == 0)
        starts.append(state.sim.q)
        masses.append(state.info["scene"].model.mass)
    for i in range(3):
        for j in range(i):
            assert np.all(starts[i] != starts[j]) and np.all(masses[i] != masses[j])
    assert np.all(starts[0][0] != starts[0][1]) and np.all(masses[0][0] != masses[0][1])  # worlds differ
    assert np.all(np.abs(starts[2][:, 1] - np.pi) <= 0.1)  # the start distribution of the task


def test_a_diverged_world_resets_and_its_nan_reaches_no_other_world():
    """World 1 gets a NaN action, world 2 a non-finite velocity: both end their episode (terminated, zero reward,
    diverged metric) and start again from the task's start distribution; worlds 0 and 3 step as they would have."""
    env = envs.wrap(task("cartpole_balance"), episode_length=50, batch=True)
    reset, step = programs(env)
    state = reset(jax.random.split(KEY, 4))
    clean = step(state, jnp.full((4, 1), 0.5))
    bad_sim = state.sim._replace(qd=state.sim.qd.at[2, 0].set(jnp.inf))
    actions = jnp.full((4, 1), 0.5).at[1, 0].set(jnp.nan)
    after = step(state._replace(sim=bad_sim), actions)
    for leaf in jax.tree.leaves((after.obs, after.reward, after.sim.q, after.sim.qd, after.metrics)):
        assert np.all(np.isfinite(leaf))
    np.testing.assert_array_equal(after.done, [0, 1, 1, 0])
    np.testing.assert_array_equal(after.info["terminated"], [0, 1, 1, 0])
    np.testing.assert_array_equal(after.info["truncated"], [0, 0, 0, 0])
    np.testing.assert_array_equal(after.metrics["diverged"], [0, 1, 1, 0])
    assert np.all(after.reward[1:3] == 0) and np.all(after.sim.diverged == 0)
    assert np.all(after.sim.t[1:3] == 0) and np.all(np.abs(after.sim.q[1:3, 1]) <= 0.1)
    for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(clean)):
        if a.ndim and a.shape[0] == 4:
            np.testing.assert_array_equal(a[np.array([0, 3])], b[np.array([0, 3])])


def test_terminated_and_truncated_are_kept_apart():
    env = envs.wrap(task("cartpole_balance"), episode_length=200, auto_reset=False)
    _, step = programs(env)
    state = env.reset(KEY)
    for _ in range(200):
        state = step(state, jnp.ones(1))  # full force: the pole falls behind
        if state.done:
            break
    assert state.info["terminated"] == 1 and state.info["truncated"] == 0
    assert state.info["episode_steps"] < 200 and np.cos(state.sim.q[1]) < cartpole_task.FALLEN_COS


def test_a_delayed_action_is_the_undelayed_environment_fed_zeros_first():
    base = task("pendulum_swingup")
    delayed = envs.ActionLatency(base, 2)
    actions = jnp.array([[0.9], [-0.4], [0.6], [0.1]])
    late = rollout(delayed, programs(delayed)[0](KEY), actions)
    early = rollout(base, programs(base)[0](KEY), [jnp.zeros(1), jnp.zeros(1), *actions[:2]])
    for a, b in zip(late, early):
        np.testing.assert_array_equal(a.sim.q, b.sim.q)
        np.testing.assert_array_equal(a.sim.qd, b.sim.qd)
    np.testing.assert_array_equal(late[-1].info["action_buffer"][late[-1].info["action_index"]], actions[2])


def test_a_push_on_the_cart_is_the_motor_giving_its_force():
    base = envs.make("cartpole_balance", sim_dt=0.01, ctrl_dt=0.01)
    pushed = envs.Push(base, body="cart", force=(4.0, 4.0), probability=1.0)
    state = pushed.reset(KEY)
    after = pushed.step(state, jnp.zeros(1))
    xfrc = after.info["xfrc"]
    force = xfrc[base.scene.tree.body_names.index("cart"), 3:]
    assert float(jnp.linalg.norm(force)) == pytest.approx(4.0, rel=1e-14) and force[2] == 0
    assert np.count_nonzero(xfrc) == 2  # a horizontal force on the cart alone
    same = base.step(state._replace(info={k: v for k, v in state.info.items() if k != "xfrc"}),
                     force[:1] / 10.0)  # the motor's force is 10 N per unit action
    assert_close(after.sim.qd, same.sim.qd, 1e-13)
    with pytest.raises(ValueError, match="no body 'wheel'.*'cart', 'pole'"):
        envs.Push(base, body="wheel", force=(1.0, 2.0), probability=0.1)


def test_observation_noise_spares_the_privileged_observation():
    base = envs.make("cartpole_balance", asymmetric=True)
    noisy = envs.ObservationNoise(base, 0.05)
    assert base.observation_size == {"state": (5,), "privileged_state": (8,)}
    clean, state = base.reset(KEY), noisy.reset(KEY)
    np.testing.assert_array_equal(state.obs["privileged_state"], clean.obs["privileged_state"])
    np.testing.assert_array_equal(clean.obs["privileged_state"][:5], clean.obs["state"])
    np.testing.assert_array_equal(clean.obs["privileged_state"][5:], [1.0, 0.1, 10.0])  # masses, gear
    noise = state.obs["state"] - clean.obs["state"]
    assert np.all(noise != 0) and np.all(np.abs(noise) < 0.25)


def test_the_gymnax_signature_steps_resets_and_takes_its_parameters():
    env = GymnaxEnv(task("cartpole_swingup"), max_steps_in_episode=2)
    params = env.default_params
    reset, step = fast_jit(env.reset), fast_jit(env.step)
    obs, state = reset(KEY, params)
    assert obs.shape == (5,) and env.num_actions == 1
    out = step(KEY, state, jnp.ones(1), params)
    assert len(out) == 6
    obs1, state1, reward, terminated, truncated, info = out
    assert reward.shape == () and terminated.dtype == jnp.bool_ and not truncated and info["discount"] == 1
    obs2, state2, _, terminated, truncated, _ = step(jax.random.PRNGKey(1), state1, jnp.ones(1), params)
    assert truncated and not terminated and int(state2.info["episode_steps"]) == 0
    np.testing.assert_array_equal(obs2, reset(jax.random.PRNGKey(1), params)[0])  # the new episode's start
    heavy = Params(params.scene.replace(model=params.scene.model.replace(
        mass=params.scene.model.mass * 2.0)), params.max_steps_in_episode)
    assert not np.array_equal(step(KEY, state, jnp.ones(1), heavy)[0], obs1)
    with pytest.raises(ValueError, match="EpisodeLength"):
        GymnaxEnv(envs.wrap(task("cartpole_swingup"), episode_length=5, auto_reset=False))


def test_brax_ppo_trains_on_the_adapter_and_its_policy_reloads(tmp_path):
    """brax's own ``ppo.train`` on `BraxEnv` with jaxmb's `wrap_env_fn` (a randomized scene) finishes, with
    episodes of the asked length; the policy `jaxmb.envs.train.save` writes acts as brax's after `load_policy`."""
    pytest.importorskip("brax")
    from brax.training.agents.ppo import train as ppo

    from jaxmb.envs import brax as adapter
    from jaxmb.envs import train

    assert hasattr(jax, "device_put_replicated")  # the shim the adapter installs for brax 0.14.2
    env = adapter.BraxEnv(envs.wrap(task("cartpole_balance"), randomize=envs.uniform(scale=MASS),
                                    auto_reset=False))
    first = env.reset(KEY)
    assert first.pipeline_state.q.shape == (2,) and env.observation_size == 5 and env.backend == "jaxmb"
    make_policy, params, metrics = ppo.train(
        env, num_timesteps=80, episode_length=10, num_envs=4, batch_size=4, num_minibatches=1, unroll_length=5,
        num_updates_per_batch=1, num_evals=2, num_eval_envs=4, wrap_env_fn=adapter.wrap_env_fn, seed=0,
        network_factory=train._network_factory(train.NETWORK), bootstrap_on_timeout=True)
    assert metrics["eval/avg_episode_length"] == 10.0
    assert 0 < metrics["eval/episode_reward"] <= 10.0
    assert params[1]["params"]["hidden_0"]["kernel"].shape[0] == 5
    action, _ = make_policy(params, deterministic=True)(first.obs, KEY)
    assert action.shape == (1,) and np.all(np.isfinite(action))
    train.save(tmp_path, "cartpole_balance", params, [0, 80], [1.0, 2.0], dict(normalize_observations=False))
    policy = train.load_policy(tmp_path)
    assert policy.task == "cartpole_balance" and (tmp_path / "rewards.png").exists()
    np.testing.assert_array_equal(policy(first.obs), action)
    with pytest.raises(ValueError, match="randomize the jaxmb environment"):
        adapter.wrap_env_fn(env, episode_length=10, randomization_fn=lambda sys, rng: (sys, sys))
    wrapped = adapter.wrap_env_fn(env, episode_length=2)  # the batch brax trains on: a reset redraws the masses
    state = fast_jit(wrapped.reset)(jax.random.split(KEY, 2))
    step = fast_jit(wrapped.step)
    first = state.info["scene"].model.mass
    state = step(step(state, jnp.zeros((2, 1))), jnp.zeros((2, 1)))
    assert np.all(state.done == 1) and np.all(state.info["truncation"] == 1) and np.all(state.info["steps"] == 2)
    assert np.all(state.info["scene"].model.mass != first) and np.all(state.info["episode_steps"] == 0)


def test_the_benchmark_script_runs_on_a_tiny_configuration():
    """benchmarks/envs.py (not part of benchmarks/run.py's suite) end to end, batches 1 and 4, so it cannot rot."""
    root = Path(__file__).resolve().parent.parent
    env = fast_compile_environment()
    env["PYTHONPATH"] = str(root)
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "envs.py"), "--tiny"], capture_output=True,
                         text=True, timeout=600, env=env, cwd=root / "benchmarks")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "cartpole_balance batch     4:" in out.stdout and "compile at batch 4: reset" in out.stdout


def test_a_task_without_one_of_its_functions_is_refused_when_built():
    """`Env`'s task functions are abstract: a task that leaves out `control` is a TypeError naming it at
    construction, not a failure inside a trace."""

    class Unfinished(envs.Env):
        def initial_state(self, scene, rng):
            return sim.init_state(scene)

        def observe(self, scene, state, memory):
            return state.q

        def reward(self, scene, state, action, memory):
            return jnp.zeros(()), {}

    with pytest.raises(TypeError, match="control"):
        Unfinished(envs.make("pendulum_swingup").scene, 0.01, 0.01)
