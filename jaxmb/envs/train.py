"""Train a task with brax's PPO: ``python -m jaxmb.envs.train TASK``, and `load_policy` to run what it saved.

    python -m jaxmb.envs.train cartpole_balance                 # HYPERPARAMETERS["cartpole_balance"]
    python -m jaxmb.envs.train cartpole_swingup --timesteps 2000000 --seed 1 --out runs/swingup

The task (`jaxmb.envs.make`) runs under `jaxmb.envs.brax.wrap_env_fn` (jaxmb's episodes, auto-reset and batching)
with a progress bar over the evaluations; the run leaves in ``--out`` (default ``runs/TASK``):

* ``policy.pkl``: the policy's parameters and what rebuilds its network (`load_policy`);
* ``rewards.png`` and ``rewards.json``: the evaluation episodes' mean reward against the environment steps.

Proximal policy optimization: Schulman et al., Proximal policy optimization algorithms, 2017; brax's
implementation (Freeman et al., Brax: a differentiable physics engine for large scale rigid body simulation, 2021).
"""

import argparse
import functools
import json
import pickle
from pathlib import Path

import jax

from jaxmb import envs

_PPO = dict(episode_length=500, num_envs=128, batch_size=128, num_minibatches=4, unroll_length=20,
            num_updates_per_batch=4, learning_rate=1e-3, entropy_cost=1e-2, discounting=0.97, reward_scaling=1.0,
            normalize_observations=True, num_evals=10, num_eval_envs=32)

HYPERPARAMETERS = {
    "cartpole_balance": dict(_PPO, num_timesteps=300_000, seed=0),
    "cartpole_swingup": dict(_PPO, num_timesteps=3_000_000, discounting=0.99, seed=0),
    "pendulum_swingup": dict(_PPO, num_timesteps=3_000_000, discounting=0.99, seed=0),
    "acrobot_swingup": dict(_PPO, num_timesteps=10_000_000, discounting=0.99, seed=0),
}
"""brax ``ppo.train``'s arguments per task (with the networks of `NETWORK`), sized for a CPU of a few cores."""

NETWORK = dict(policy_hidden_layer_sizes=(32, 32, 32, 32), value_hidden_layer_sizes=(64, 64, 64))
"""The sizes of the policy's and the value function's hidden layers, for every task."""


def _network_factory(network):
    from brax.training.agents.ppo import networks as ppo_networks

    return functools.partial(ppo_networks.make_ppo_networks, **network)


def train(name, out=None, progress=True, **overrides):
    """Train task ``name`` with ``HYPERPARAMETERS[name]`` updated by ``overrides``; save the policy and the reward
    curve in ``out`` (None: save nothing). Returns ``(steps, rewards, params)``: the environment steps and mean
    evaluation reward at each evaluation, and brax's ``(normalizer, policy, value)`` parameters."""
    from brax.training.agents.ppo import train as ppo
    from tqdm import tqdm

    from jaxmb.envs import brax as adapter

    config = dict(HYPERPARAMETERS[name], **overrides)
    env = adapter.BraxEnv(envs.make(name))
    steps, rewards = [], []
    bar = tqdm(total=config["num_timesteps"], desc=name, unit="step", disable=not progress)

    def progress_fn(step, metrics):
        steps.append(int(step))
        rewards.append(float(metrics["eval/episode_reward"]))
        bar.update(int(step) - bar.n)
        bar.set_postfix(reward=f"{rewards[-1]:.1f}")

    _, params, _ = ppo.train(env, wrap_env_fn=adapter.wrap_env_fn, progress_fn=progress_fn,
                             network_factory=_network_factory(NETWORK), **config)
    bar.close()
    if out is not None:
        save(out, name, params, steps, rewards, config)
    return steps, rewards, params


def save(out, name, params, steps, rewards, config):
    """Write ``policy.pkl``, ``rewards.json`` and ``rewards.png`` (module docstring) in the folder ``out``. The plot
    is a bare ``matplotlib.figure.Figure``, so pyplot's backend (a notebook's inline one) is left as it is."""
    from matplotlib.figure import Figure

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = envs.make(name)
    record = dict(task=name, observation_size=env.observation_size, action_size=env.action_size, network=NETWORK,
                  normalize_observations=config["normalize_observations"], params=jax.device_get(params))
    (out / "policy.pkl").write_bytes(pickle.dumps(record))
    (out / "rewards.json").write_text(json.dumps(dict(task=name, config=config, steps=steps, rewards=rewards),
                                                 indent=1, default=str))
    fig = Figure(figsize=(5, 3.2))
    ax = fig.subplots()
    ax.plot(steps, rewards, marker="o")
    ax.set(xlabel="environment steps", ylabel="evaluation episode reward", title=f"{name}, PPO (brax)")
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "rewards.png", dpi=120)


def load_policy(path, deterministic=True):
    """The policy ``policy(obs, key) -> action`` that `train` saved in ``path`` (a ``policy.pkl`` or its folder):
    brax's inference function of the saved parameters (the mean action where ``deterministic``), and the task's
    name as ``policy.task``."""
    from brax.training.acme import running_statistics
    from brax.training.agents.ppo import networks as ppo_networks

    path = Path(path)
    record = pickle.loads((path / "policy.pkl" if path.is_dir() else path).read_bytes())
    preprocess = running_statistics.normalize if record["normalize_observations"] else (lambda x, y: x)
    network = _network_factory(record["network"])(record["observation_size"], record["action_size"],
                                                 preprocess_observations_fn=preprocess)
    policy = ppo_networks.make_inference_fn(network)(record["params"], deterministic=deterministic)

    def act(obs, key=None):
        return policy(obs, jax.random.PRNGKey(0) if key is None else key)[0]

    act.task = record["task"]
    return act


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m jaxmb.envs.train", description=__doc__.split("\n")[0])
    parser.add_argument("task", choices=sorted(HYPERPARAMETERS))
    parser.add_argument("--timesteps", type=int, help="environment steps (default: the task's HYPERPARAMETERS)")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--num-envs", type=int)
    parser.add_argument("--out", help="the folder of the saved policy and reward curve (default runs/TASK)")
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in dict(num_timesteps=args.timesteps, seed=args.seed, num_envs=args.num_envs).items()
                 if v is not None}
    out = args.out or f"runs/{args.task}"
    steps, rewards, _ = train(args.task, out=out, **overrides)
    print(f"{args.task}: evaluation reward {rewards[0]:.1f} -> {rewards[-1]:.1f} over {steps[-1]} steps; "
          f"saved in {out}")


if __name__ == "__main__":
    main()
