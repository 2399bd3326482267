"""The fused GPU kernels of the forward dynamics (`jaxmb.dynamics.fused`) against the level-scheduled sweeps, on
the same GPU in the same run: talos_full_v2 with a fixed base (one kernel) and with a free base (two kernels around
the base, which XLA computes).

    python benchmarks/fused.py                     # batches 4096, 65536, 262144; float32 and float64
    python benchmarks/fused.py --quick             # batch 65536, float32
    python benchmarks/fused.py --batches 65536 --dtypes float64

Both sides are ``jaxmb.jit(jax.vmap(forward_dynamics))`` on the same random states, the sweeps with
``fused.ON_GPU = False``. Prints states/s of each, the kernels' gain (sweeps time / kernels time), both first-call
compile times and the largest difference of the accelerations relative to the largest acceleration. On a backend
other than a GPU there are no kernels to time: the script says so and writes nothing. Writes
``benchmarks/results/fused-<backend>-<cores>core.json`` after every configuration, so that a run cut short keeps
what it measured.
"""

import argparse

import jax
import jax.numpy as jnp

import jaxmb
from common import alternating_best_times, compile_time, load, machine, save
from jaxmb.dynamics import fused


def states(model, batch, dtype):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(batch), 3)
    q = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(jax.random.split(k1, batch)).astype(dtype)
    return [q, jax.random.normal(k2, (batch, model.nv), dtype), jax.random.normal(k3, (batch, model.nv), dtype)]


def compiled(model, on_gpu, args):
    """``(compile s, function)`` of the batched forward dynamics, by the kernels or by the sweeps."""
    fused.ON_GPU = on_gpu
    try:
        return compile_time(jaxmb.jit(jax.vmap(lambda q, qd, tau: jaxmb.forward_dynamics(model, q, qd, tau))), *args)
    finally:
        fused.ON_GPU = True


def run(robot, floating_base, dtype, batch):
    model = load(robot, floating_base, dtype)
    args = states(model, batch, dtype)
    c_fused, f_fused = compiled(model, True, args)
    c_sweeps, f_sweeps = compiled(model, False, args)
    expected = f_sweeps(*args)
    error = float(jnp.max(jnp.abs(f_fused(*args) - expected)) / jnp.max(jnp.abs(expected)))
    t_fused, t_sweeps = alternating_best_times((f_fused, args), (f_sweeps, args))
    row = dict(robot=robot, floating_base=floating_base, dtype=dtype, batch=batch, fused_states_per_s=batch / t_fused,
               sweeps_states_per_s=batch / t_sweeps, ratio_fused_vs_sweeps=t_sweeps / t_fused,
               fused_compile_s=c_fused, sweeps_compile_s=c_sweeps, relative_error=error)
    base = "free" if floating_base else "fixed"
    print(f"{robot} ({base} base) {dtype} batch {batch:7d}: kernels {batch / t_fused:10.4g} states/s (compile "
          f"{c_fused:5.1f} s), sweeps {batch / t_sweeps:10.4g} (compile {c_sweeps:5.1f} s): x{t_sweeps / t_fused:.2f}, "
          f"difference {error:.1e}")
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="batch 65536, float32")
    ap.add_argument("--robot", default="talos_full_v2")
    ap.add_argument("--batches", nargs="*", type=int, default=None)
    ap.add_argument("--dtypes", nargs="*", default=None, choices=["float32", "float64"])
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    if jax.default_backend() != "gpu":
        print(f"fused.py: the fused kernels run on a GPU; the {jax.default_backend()} backend takes the sweeps. "
              "Nothing to measure.")
        return
    jax.config.update("jax_enable_x64", True)
    batches = args.batches or ([65536] if args.quick else [4096, 65536, 262144])
    dtypes = args.dtypes or (["float32"] if args.quick else ["float32", "float64"])
    rows, info = [], machine()
    for floating_base in (True, False):  # the free base, the targets' configuration, first
        for dtype in dtypes:
            for batch in batches:
                rows.append(run(args.robot, floating_base, dtype, batch))
                if not args.no_save:
                    path = save("fused", {"machine": info, "results": rows})
                    plot(rows, info, path.with_suffix(".png"))
    if not args.no_save:
        print("saved", path)


def plot(rows, machine, path):
    """States/s of the kernels and the sweeps for each configuration, as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{'free' if r['floating_base'] else 'fixed'} base\n{r['dtype']}\n{r['batch']}" for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(rows)), 4))
    ax.bar([i - 0.2 for i in x], [r["fused_states_per_s"] for r in rows], 0.4, label="fused kernels")
    ax.bar([i + 0.2 for i in x], [r["sweeps_states_per_s"] for r in rows], 0.4, label="level-scheduled sweeps")
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_ylabel("states / s")
    ax.legend()
    ax.grid(alpha=0.3, axis="y")
    fig.suptitle(f"jaxmb ABA, {rows[0]['robot']}, {machine.get('device', machine['backend'])}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
