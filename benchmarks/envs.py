"""The environments' speed: env steps per second of cartpole against the batch, compile times of reset and of the
batched step, and a short PPO run of cartpole balance that shows it learning.

    python benchmarks/envs.py            # batches 1 .. 4096 and the PPO run (a few minutes on a 2-core CPU)
    python benchmarks/envs.py --no-ppo   # the throughput and compile times alone
    python benchmarks/envs.py --tiny     # batches 1 and 4, no PPO: proves the script works

The environment is ``cartpole_balance`` as a trainer sees it: `jaxmb.envs.wrap` with an episode length of 1000,
auto-reset and `Vmap`, and the randomization of its masses redrawn at every reset; a step is one action held for
``ctrl_dt`` (two simulator steps of ``sim_dt``). The figure is ``batch / time`` of one ``jit`` batched step, best
of repeats, in float32. Compile times are those of ``jax.jit(env.reset).lower(keys).compile()`` and of the batched
step, at batch 1024. The PPO run is `jaxmb.envs.train.train` with its ``cartpole_balance`` hyper-parameters.

Peer: MuJoCo Playground's ``CartpoleBalance`` (on MJX) is the natural one, but Playground is not installed here,
so this measures jaxmb alone.
"""

import argparse
import time

import jax
import jax.numpy as jnp

from common import best_time, compile_time, machine, save

from jaxmb import envs


def environment():
    randomize = envs.uniform(scale={"model.mass": (0.8, 1.2)})
    return envs.wrap(envs.make("cartpole_balance"), episode_length=1000, randomize=randomize, batch=True)


def throughput(env, batches):
    rows = []
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    for batch in batches:
        state = reset(jax.random.split(jax.random.PRNGKey(0), batch))
        actions = jnp.zeros((batch, env.action_size))
        seconds = best_time(step, state, actions)
        rows.append(dict(batch=batch, step_s=seconds, env_steps_per_s=batch / seconds,
                         sim_steps_per_s=batch * env.substeps / seconds))
        print(f"cartpole_balance batch {batch:5d}: {batch / seconds:12.0f} env steps/s "
              f"({batch * env.substeps / seconds:12.0f} simulator steps/s)")
    return rows


def compile_times(env, batch):
    keys = jax.random.split(jax.random.PRNGKey(0), batch)
    reset_s, reset = compile_time(jax.jit(env.reset), keys)
    state = reset(keys)
    step_s, _ = compile_time(jax.jit(env.step), state, jnp.zeros((batch, env.action_size)))
    print(f"compile at batch {batch}: reset {reset_s:.2f} s, step {step_s:.2f} s")
    return dict(batch=batch, reset_s=reset_s, step_s=step_s)


def ppo_run():
    from jaxmb.envs import train

    start = time.perf_counter()
    steps, rewards, _ = train.train("cartpole_balance", progress=False)
    seconds = time.perf_counter() - start
    for s, r in zip(steps, rewards):
        print(f"PPO cartpole_balance: {s:8d} env steps, evaluation episode reward {r:7.1f}")
    return dict(steps=steps, rewards=rewards, seconds=seconds, config=train.HYPERPARAMETERS["cartpole_balance"])


def plot(payload, path):
    """Throughput against the batch, and the PPO run's reward curve where there is one, in ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if "ppo" in payload else 1
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.4), squeeze=False)
    rows = payload["throughput"]
    ax = axes[0, 0]
    ax.loglog([r["batch"] for r in rows], [r["env_steps_per_s"] for r in rows], marker="o")
    ax.set(xlabel="batch (worlds)", ylabel="env steps / s", title="cartpole_balance, one batched step")
    ax.grid(alpha=0.3, which="both")
    if "ppo" in payload:
        ax = axes[0, 1]
        ax.plot(payload["ppo"]["steps"], payload["ppo"]["rewards"], marker="o")
        ax.set(xlabel="environment steps", ylabel="evaluation episode reward",
               title=f"PPO (brax), {payload['ppo']['seconds']:.0f} s")
        ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--no-ppo", action="store_true")
    args = parser.parse_args()
    env = environment()
    batches = (1, 4) if args.tiny else (1, 16, 64, 256, 1024, 4096)
    payload = dict(machine=machine(), throughput=throughput(env, batches),
                   compile=compile_times(env, 4 if args.tiny else 1024))
    if not (args.tiny or args.no_ppo):
        payload["ppo"] = ppo_run()
    if not args.tiny:
        path = save("envs", payload)
        plot(payload, path.with_suffix(".png"))
        print(f"wrote {path} and its plot")


if __name__ == "__main__":
    main()
