"""The robot tasks of `jaxmb.envs`: the Panda reach in both action spaces and the quadruped joystick.

Oracles: Pinocchio's gravity forces (``computeGeneralizedGravity``) on the same URDF for the torques the Cartesian
action holds the arm with at rest; the rewards' closed forms on scripted states (at the target, a known distance
from it, standing still, upside down); the arm held still by the Cartesian action that names where its tool is.
Each environment's batched step is compiled once and shared by the tests of the file.
"""

import functools
import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from checks import assert_close, fast_jit

from jaxmb import envs, robots, sim

try:
    robots.path("panda")
    HAVE_PANDA = True
except FileNotFoundError:
    HAVE_PANDA = False
needs_panda = pytest.mark.skipif(not HAVE_PANDA, reason="example-robot-data is not installed")

KEY = jax.random.PRNGKey(0)
BATCH = 2


@functools.cache
def task(name):
    return envs.make(name)


@functools.cache
def batched(name, wrapped=False):
    """``(env, reset, step)``: ``name`` batched by `jaxmb.envs.Vmap` (for the quadruped with ``wrapped``: under
    randomized dynamics, pushes at every step, episodes of 50 steps and auto-reset), each compiled once."""
    env = task(name)
    if wrapped:
        from jaxmb.envs import quadruped_joystick as qj

        env = envs.wrap(env, randomize=qj.RANDOMIZE, push={**qj.PUSH, "force": (10.0, 30.0), "probability": 1.0},
                        episode_length=50, batch=True)
    else:
        env = envs.Vmap(env)
    return env, fast_jit(env.reset), fast_jit(env.step)


@functools.cache
def reward_of(name):
    env = task(name)
    return fast_jit(lambda state, action, memory: env.reward(env.scene, state, action, memory))


def random_rollout(name, steps, wrapped=False):
    env, reset, step = batched(name, wrapped)
    state = reset(jax.random.split(KEY, BATCH))
    states = [state]
    for k in jax.random.split(jax.random.PRNGKey(1), steps):
        state = step(state, jax.random.uniform(k, (BATCH, env.action_size), minval=-1.0, maxval=1.0))
        states.append(state)
    return env, states


def check_contract(env, states, obs_size, action_size):
    assert env.action_size == action_size and env.observation_size == obs_size
    for s in states:
        obs = s.obs if isinstance(s.obs, dict) else {"state": s.obs}
        for key, size in (obs_size.items() if isinstance(obs_size, dict) else [("state", (obs_size,))]):
            assert obs[key].shape == (BATCH, *size) and bool(jnp.all(jnp.isfinite(obs[key])))
        assert s.reward.shape == (BATCH,) and bool(jnp.all(jnp.isfinite(s.reward)))
        assert set(s.metrics) == set(states[0].metrics)
        assert not bool(jnp.any(s.metrics["diverged"]))
    first, last = (jax.tree.leaves(s.obs)[0] for s in (states[0], states[-1]))
    assert float(states[-1].sim.t[0]) > 0.0 and not np.array_equal(first, last)


# -- Panda reach ------------------------------------------------------------------------------------------------


@needs_panda
@pytest.mark.parametrize("name, action_size", [("panda_reach_torque", 7), ("panda_reach_cartesian", 3)])
def test_panda_reach_resets_and_steps_a_batch_with_its_documented_shapes(name, action_size):
    env, states = random_rollout(name, 5)
    check_contract(env, states, 20, action_size)
    first, last = states[0], states[-1]
    target = first.info["memory"]["target"]
    low, high = (np.asarray(c) for c in envs.panda_reach.TARGET_BOX)
    assert target.shape == (BATCH, 3) and np.all((low <= target) & (target <= high))
    assert not np.allclose(target[0], target[1])                       # a target drawn per world
    assert_close(last.info["memory"]["target"], target, 0.0)           # and kept through the episode
    assert_close(last.obs[:, 17:], target - last.obs[:, 14:17], 1e-15)   # the observation's target - tool
    assert float(last.sim.t[0]) == pytest.approx(5 * env.ctrl_dt, abs=1e-12)


def home_state(env):
    from jaxmb.envs import panda_reach

    state = sim.init_state(env.scene, jnp.asarray(panda_reach.Q_HOME))
    return state, env.tool(env.scene, state)[0]


@needs_panda
def test_panda_reach_rewards_one_and_succeeds_at_the_target_and_decays_with_the_distance():
    from jaxmb.envs import panda_reach

    env = task("panda_reach_torque")
    state, x = home_state(env)
    reward = reward_of("panda_reach_torque")
    r, m = reward(state, jnp.zeros(7), {"target": x})
    assert float(r) == 1.0 and float(m["success"]) == 1.0 and float(m["distance"]) == 0.0
    # 0.1 m away and a full torque on one joint: exp(-1) - 0.1 (1/7)
    r, m = reward(state, jnp.zeros(7).at[3].set(1.0), {"target": x + jnp.array([0.0, 0.06, -0.08])})
    assert_close(r, np.exp(-1.0) - panda_reach.CONTROL_COST / 7, 1e-14)
    assert float(m["success"]) == 0.0 and float(m["distance"]) == pytest.approx(0.1, rel=1e-14)
    r, m = reward(state, jnp.zeros(7), {"target": x + jnp.array([0.0, 0.0, 0.0099])})
    assert float(m["success"]) == 1.0


@needs_panda
def test_the_cartesian_action_naming_the_tool_holds_the_arm_at_rest_with_pinocchios_gravity_torques():
    import pinocchio as pin

    from jaxmb.envs import panda_reach

    env = task("panda_reach_cartesian")
    state, x = home_state(env)
    low, high = (np.asarray(c) for c in panda_reach.TARGET_BOX)
    hold = (np.asarray(x) - (low + high) / 2) / ((high - low) / 2)
    # the torques it commands at rest: the gravity forces (the task acceleration is zero, the posture at home)
    root = ET.fromstring(robots.path("panda").read_text(encoding="utf-8"))
    for joint in root.iter("joint"):
        if joint.get("type") == "prismatic":
            joint.set("type", "fixed")
    pmodel = pin.buildModelFromXML(ET.tostring(root, encoding="unicode"))
    g = pin.computeGeneralizedGravity(pmodel, pmodel.createData(), np.asarray(panda_reach.Q_HOME))
    ctrl = fast_jit(lambda s, a: env.control(env.scene, s, a))(state, jnp.asarray(hold))
    assert_close(ctrl, g / np.asarray(env.effort), 1e-7)
    r, _ = reward_of("panda_reach_cartesian")(state, jnp.asarray(hold), {"target": x})
    assert_close(r, 1.0 - panda_reach.CONTROL_COST * np.mean((g / np.asarray(env.effort)) ** 2), 1e-7)
    # held for 25 steps (0.5 s), the arm stays where it is
    _, reset, step = batched("panda_reach_cartesian")
    states = reset(jax.random.split(KEY, BATCH))
    states = states._replace(sim=jax.tree.map(lambda a: jnp.stack([a] * BATCH), state))
    for _ in range(25):
        states = step(states, jnp.tile(jnp.asarray(hold), (BATCH, 1)))
    assert np.max(np.abs(states.sim.q - np.asarray(panda_reach.Q_HOME))) < 1e-6
    assert np.max(np.abs(states.sim.qd)) < 1e-6
    assert_close(states.obs[:, 14:17], np.tile(np.asarray(x), (BATCH, 1)), 1e-6)


# -- quadruped joystick -----------------------------------------------------------------------------------------


def test_the_quadruped_joystick_steps_a_randomized_pushed_batch_with_its_documented_shapes():
    env, states = random_rollout("quadruped_joystick", 4, wrapped=True)
    check_contract(env, states, {"state": (45,), "privileged_state": (60,)}, 12)
    first, last = states[0], states[-1]
    command = first.info["memory"]["command"]
    low, high = (np.asarray(c) for c in envs.quadruped_joystick.COMMAND_RANGE)
    assert command.shape == (BATCH, 3) and np.all((low <= command) & (command <= high))
    assert_close(last.obs["state"][:, -3:], command, 0.0)                 # the command observed
    assert_close(last.info["memory"]["last_action"], last.obs["state"][:, -15:-3], 0.0)
    assert set(last.metrics) == set(envs.quadruped_joystick.REWARD_WEIGHTS) | {"diverged"}
    # the scene redrawn per world: masses, friction and servo gains within their ranges
    scenes = first.info["scene"]
    nominal = env.unwrapped.scene
    for leaf, (lo, hi) in [(lambda s: s.model.mass, (0.9, 1.1)), (lambda s: s.actuators.kp, (0.9, 1.1))]:
        ratio = np.asarray(leaf(scenes)) / np.asarray(leaf(nominal))
        assert np.all((lo <= ratio) & (ratio <= hi)) and not np.allclose(ratio[0], ratio[1])
    # a horizontal push of 10..30 N on the trunk at every step
    trunk = nominal.tree.body_names.index("trunk")
    push = np.asarray(last.info["xfrc"])
    size = np.linalg.norm(push[:, trunk, 3:], axis=-1)
    assert np.all((10.0 <= size) & (size <= 30.0)) and np.all(push[:, trunk, 5] == 0.0)
    assert np.count_nonzero(push) == np.count_nonzero(push[:, trunk, 3:5])


def scripted(env, flip=False):
    q = jnp.asarray(env.q_start)
    if flip:  # rotated by pi about the trunk's x axis
        q = q.at[3:7].set(jnp.array([0.0, 1.0, 0.0, 0.0]))
    return sim.init_state(env.scene, q)


def test_standing_still_under_a_zero_command_scores_full_tracking_and_upside_down_terminates():
    from jaxmb.envs import quadruped_joystick as qj

    env = task("quadruped_joystick")
    memory = {"command": jnp.zeros(3), "last_action": jnp.zeros(12)}
    reward = reward_of("quadruped_joystick")
    stand, flipped = scripted(env), scripted(env, flip=True)
    r, terms = reward(stand, jnp.zeros(12), memory)
    assert float(terms["tracking_lin_vel"]) == 1.0 and float(terms["tracking_ang_vel"]) == 1.0
    for name in ("lin_vel_z", "ang_vel_xy", "orientation", "action_rate", "feet_slip", "termination"):
        assert float(terms[name]) == 0.0, name
    # at its standing targets the servos push nothing (to round-off): the two tracking terms alone
    assert float(terms["torques"]) < 1e-24 and float(r) == pytest.approx(1.5 * env.ctrl_dt, rel=1e-14)
    assert not bool(env.terminated(env.scene, stand, memory))
    assert bool(env.terminated(env.scene, flipped, memory))
    _, flipped_terms = reward(flipped, jnp.zeros(12), memory)
    assert float(flipped_terms["termination"]) == 1.0 and float(flipped_terms["orientation"]) == 0.0
    # a command of 0.5 m/s forward while standing still: exp(-0.25 / sigma); a full action step: 12 in action_rate
    r, terms = reward(stand, jnp.ones(12), {**memory, "command": jnp.array([0.5, 0.0, 0.0])})
    assert_close(terms["tracking_lin_vel"], np.exp(-0.25 / qj.TRACKING_SIGMA), 1e-15)
    assert float(terms["action_rate"]) == 12.0
    obs = env.observe(env.scene, stand, memory)
    assert_close(obs[:3], np.array([0.0, 0.0, -1.0]), 1e-15)             # gravity down in the upright trunk
    assert_close(env.observe(env.scene, flipped, memory)[:3], np.array([0.0, 0.0, 1.0]), 1e-15)
