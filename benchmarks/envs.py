"""The environments' speed: env steps per second against the batch, compile times of reset and of the batched
step, and a short PPO run of cartpole balance that shows it learning.

    python benchmarks/envs.py            # every environment of ENVIRONMENTS and the PPO run (minutes on 2 cores)
    python benchmarks/envs.py --no-ppo   # the throughput and compile times alone
    python benchmarks/envs.py --tiny     # cartpole at batches 1 and 4, no PPO: proves the script works

Each environment runs as a trainer sees it: `jaxmb.envs.wrap` with an episode length of 1000, auto-reset and
`Vmap`, with the randomization of `ENVIRONMENTS` redrawn at every reset: ``cartpole_balance`` (masses),
``panda_reach_torque`` and ``panda_reach_cartesian`` (masses; the Cartesian action runs
`jaxmb.operational_space_control` at every simulator step), ``quadruped_joystick`` (masses, friction and servo
gains, and pushes on the trunk: `jaxmb.envs.quadruped_joystick.RANDOMIZE`, ``PUSH``). A step is one action held
for ``ctrl_dt`` (``substeps`` simulator steps of ``sim_dt``). The figure is ``batch / time`` of one ``jit``
batched step, best of repeats, in float32. Compile times are those of ``jax.jit(env.reset).lower(keys).compile()``
and of the batched step, at the largest batch measured up to 1024. The PPO run is `jaxmb.envs.train.train` with its
``cartpole_balance`` hyper-parameters.

Peer: MuJoCo Playground's ``CartpoleBalance`` (on MJX) is the natural one, but Playground is not installed here,
so this measures jaxmb alone.
"""

import argparse
import time

import jax
import jax.numpy as jnp

from common import best_time, compile_time, machine, save

from jaxmb import envs


def quadruped():
    from jaxmb.envs import quadruped_joystick

    return dict(randomize=quadruped_joystick.RANDOMIZE, push=quadruped_joystick.PUSH)


MASSES = envs.uniform(scale={"model.mass": (0.8, 1.2)})

ENVIRONMENTS = {
    "cartpole_balance": (lambda: dict(randomize=MASSES), (1, 16, 64, 256, 1024, 4096)),
    "panda_reach_torque": (lambda: dict(randomize=MASSES), (1, 16, 64, 256, 1024)),
    "panda_reach_cartesian": (lambda: dict(randomize=MASSES), (1, 16, 64, 256)),
    "quadruped_joystick": (quadruped, (1, 16, 64, 256)),
}
"""Each environment's wrappers (`jaxmb.envs.wrap`'s arguments beside the episode length) and the batches
measured."""


def environment(name):
    return envs.wrap(envs.make(name), episode_length=1000, batch=True, **ENVIRONMENTS[name][0]())


def throughput(name, env, batches):
    rows = []
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    for batch in batches:
        state = reset(jax.random.split(jax.random.PRNGKey(0), batch))
        actions = jnp.zeros((batch, env.action_size))
        seconds = best_time(step, state, actions)
        rows.append(dict(env=name, batch=batch, step_s=seconds, env_steps_per_s=batch / seconds,
                         sim_steps_per_s=batch * env.substeps / seconds))
        print(f"{name} batch {batch:5d}: {batch / seconds:12.0f} env steps/s "
              f"({batch * env.substeps / seconds:12.0f} simulator steps/s)")
    return rows


def compile_times(name, env, batch):
    keys = jax.random.split(jax.random.PRNGKey(0), batch)
    reset_s, reset = compile_time(jax.jit(env.reset), keys)
    state = reset(keys)
    step_s, _ = compile_time(jax.jit(env.step), state, jnp.zeros((batch, env.action_size)))
    print(f"{name} compile at batch {batch}: reset {reset_s:.2f} s, step {step_s:.2f} s")
    return dict(env=name, batch=batch, reset_s=reset_s, step_s=step_s)


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
    ax = axes[0, 0]
    for name in dict.fromkeys(r["env"] for r in payload["throughput"]):
        rows = [r for r in payload["throughput"] if r["env"] == name]
        ax.loglog([r["batch"] for r in rows], [r["env_steps_per_s"] for r in rows], marker="o", label=name)
    ax.set(xlabel="batch (worlds)", ylabel="env steps / s", title="one batched step (auto-reset, randomized)")
    ax.legend(fontsize=7)
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
    payload = dict(machine=machine(), throughput=[], compile=[])
    for name, (_, batches) in ENVIRONMENTS.items():
        if args.tiny and name != "cartpole_balance":
            continue
        batches = (1, 4) if args.tiny else batches
        env = environment(name)
        payload["throughput"] += throughput(name, env, batches)
        payload["compile"].append(compile_times(name, env, max(b for b in batches if b <= 1024)))
    if not (args.tiny or args.no_ppo):
        payload["ppo"] = ppo_run()
    if not args.tiny:
        path = save("envs", payload)
        plot(payload, path.with_suffix(".png"))
        print(f"wrote {path} and its plot")


if __name__ == "__main__":
    main()
