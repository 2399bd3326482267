"""Throughput of batched forward dynamics (ABA), inverse dynamics (RNEA) and the mass matrix (CRBA), against
Pinocchio measured in the same run.

    python benchmarks/dynamics.py            # panda, go1, talos_full_v2 (free base); batches 1 .. 16384; f32, f64
    python benchmarks/dynamics.py --quick    # talos only, batches 64 and 4096, float32
    python benchmarks/dynamics.py --large    # adds batches 65536 and 262144 (for a GPU)

For each robot, algorithm, precision and batch: jaxmb's ``jaxmb.jit(vmap(f))`` states/s and compile time, and the
same for the program a user writes, ``jax.jit(vmap(f))`` with the model closed over; Pinocchio's
all-core ``abaInParallel``/``rneaInParallel`` (no parallel CRBA exists: its single-call loop is the peer) and
its single-call Python loop; the ratio jaxmb / Pinocchio-parallel; the scratch memory of one call and the minor
page faults it takes. With more than one core, each figure is also measured with the batch split over one CPU
device per core, ``jaxmb.sharded_vmap(f)`` (`jaxmb.use_cpu_cores`), as Pinocchio's parallel calls split theirs over
threads; the CRBA's peer for it is Pinocchio's single-call loop as if it ran on every core at once (its throughput
times the cores). Batches larger than ``--chunk`` (default 1024) are also measured mapped in chunks,
``jaxmb.chunked_vmap(f, chunk_size=chunk)``, each chunk one ``vmap`` (benchmarks/findings.md, "Scratch memory").
Also the cost of ``grad(sum(forward_dynamics))`` (w.r.t. q, qd, tau) relative to the forward call, both ways. Writes
``benchmarks/results/dynamics-<backend>-<cores>core.json`` (after each robot and precision, so a run cut short
keeps what it measured) and a plot beside it. Without Pinocchio installed, its figures are None and only jaxmb is
measured.
"""

import argparse
import os

os.environ.setdefault("JAXMB_XLA_FLAGS", "1")  # the plain-jit rows: jaxmb's options as the process's flags

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb
from common import (alternating_best_times, best_time, compile_time, load, loop_call, machine, page_faults,
                    pinocchio_states, robot_path, save, sharded_versus, temp_bytes, versus)

ALGORITHMS = {
    "aba": lambda m: lambda q, qd, x: jaxmb.forward_dynamics(m, q, qd, x),
    "rnea": lambda m: lambda q, qd, x: jaxmb.inverse_dynamics(m, q, qd, x),
    "crba": lambda m: lambda q, qd, x: jaxmb.mass_matrix(m, q),
}


def batched(fn, chunk=None):
    """jit of ``fn`` (one state) over a batch: one `vmap`, or with ``chunk`` `jaxmb.chunked_vmap` (a
    `jax.lax.map` over chunks of ``chunk`` states, each chunk one `vmap`)."""
    return jaxmb.jit(jax.vmap(fn) if chunk is None else jaxmb.chunked_vmap(fn, chunk_size=chunk))


def plain(fn):
    """``jax.jit(jax.vmap(fn))``, the model closed over: the program a JAX user writes, without `jaxmb.jit`, in a
    process that runs jaxmb alone with ``JAXMB_XLA_FLAGS=1``."""
    return jax.jit(jax.vmap(fn))


def jaxmb_states(model, batch, dtype, seed=0):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    q = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(jax.random.split(k1, batch)).astype(dtype)
    return q, jax.random.normal(k2, (batch, model.nv), dtype), jax.random.normal(k3, (batch, model.nv), dtype)


def pinocchio_peer(name, batches, loop_states=256):
    """Pinocchio's calls, as `common.versus` takes them: ``{"threads": n, "loop": {alg: call}, "parallel": {alg:
    {batch: call}}}``, the single-call loops of ABA, RNEA and CRBA and the all-core abaInParallel/rneaInParallel per
    batch; None if Pinocchio is not installed."""
    try:
        import pinocchio as pin
    except ImportError:
        return None

    pm = pin.buildModelFromUrdf(robot_path(name), pin.JointModelFreeFlyer())
    pd = pm.createData()
    threads = os.cpu_count()
    pool = pin.ModelPool(pm, threads)
    q, v, x = pinocchio_states(pm, loop_states)
    loop = {alg: (loop_call(call, loop_states), (), loop_states)
            for alg, call in (("aba", lambda i: pin.aba(pm, pd, q[:, i], v[:, i], x[:, i])),
                              ("rnea", lambda i: pin.rnea(pm, pd, q[:, i], v[:, i], x[:, i])),
                              ("crba", lambda i: pin.crba(pm, pd, q[:, i])))}
    parallel = {"aba": {}, "rnea": {}}
    for b in batches:
        args = (threads, pool, *pinocchio_states(pm, b), np.zeros((pm.nv, b)))
        parallel["aba"][b] = (pin.abaInParallel, args, b)
        parallel["rnea"][b] = (pin.rneaInParallel, args, b)
    return {"threads": threads, "loop": loop, "parallel": parallel}


def run(robots, batches, dtypes, grad_batch, checkpoint=None, algorithms=tuple(ALGORITHMS), chunk=1024):
    """Rows of results; ``checkpoint(rows)`` is called after each robot and precision. Batches larger than
    ``chunk`` are also measured mapped in chunks of ``chunk`` states (None or 0: not). Each figure is timed against
    its peer (`common.versus`): all-core Pinocchio for ABA and RNEA, its single-call loop for CRBA."""
    rows = []
    for name in robots:
        peer = pinocchio_peer(name, batches)
        loop_s = {} if peer is None else {alg: best_time(fn, *args) / n for alg, (fn, args, n) in peer["loop"].items()}
        print(f"\n{name} (free base): " + ("Pinocchio not installed" if peer is None else
                                           "Pinocchio single call " + ", ".join(f"{a} {t * 1e6:.2f} us"
                                                                               for a, t in loop_s.items())
                                           + f"; parallel on {peer['threads']} threads"))
        for dtype in dtypes:
            model = load(name, True, dtype)
            for alg in algorithms:
                fn = ALGORITHMS[alg](model)
                f = batched(fn)
                for b in batches:
                    args = jaxmb_states(model, b, dtype)
                    t_compile, compiled = compile_time(f, *args)
                    par = None if peer is None else peer["parallel"].get(alg, {}).get(b)
                    if peer is None:
                        t, t_peer, ratio = best_time(compiled, *args) / b, None, None
                    else:
                        t, t_peer, ratio = versus((compiled, args, b), par or peer["loop"][alg])
                    row = dict(robot=name, algorithm=alg, dtype=jnp.dtype(dtype).name, batch=b,
                               states_per_s=1 / t, compile_s=t_compile,
                               temp_bytes=temp_bytes(compiled), page_faults_per_call=page_faults(compiled, *args),
                               pinocchio_parallel_states_per_s=1 / t_peer if par else None,
                               pinocchio_loop_states_per_s=1 / loop_s[alg] if loop_s else None,
                               ratio_vs_pinocchio=ratio)
                    t_plain_compile, plain_compiled = compile_time(plain(fn), *args)
                    if peer is None:
                        t_plain, plain_ratio = best_time(plain_compiled, *args) / b, None
                    else:
                        t_plain, _, plain_ratio = versus((plain_compiled, args, b), par or peer["loop"][alg])
                    row.update(plain_jit_states_per_s=1 / t_plain, plain_jit_compile_s=t_plain_compile,
                               plain_jit_ratio_vs_pinocchio=plain_ratio)
                    if len(jax.devices()) > 1:
                        t_sharded, sharded_ratio = sharded_versus(
                            fn, args, b, None if peer is None else par or peer["loop"][alg],
                            len(jax.devices()) if par else 1)
                        row.update(devices=len(jax.devices()), sharded_states_per_s=1 / t_sharded,
                                   sharded_ratio_vs_pinocchio=sharded_ratio)
                    if chunk and b > chunk:
                        chunked = (batched(fn, chunk), args, b)
                        if peer is None:
                            t_chunk, chunk_ratio = best_time(*chunked[:2]) / b, None
                        else:
                            t_chunk, _, chunk_ratio = versus(chunked, par or peer["loop"][alg])
                        row.update(chunk=chunk, chunked_states_per_s=1 / t_chunk,
                                   chunked_ratio_vs_pinocchio=chunk_ratio)
                    rows.append(row)
                    print(f"  {alg:5s} {row['dtype']:8s} batch {b:6d}: {row['states_per_s']:10.4g} states/s "
                          f"({t * 1e6:8.3f} us/state), compile {t_compile:5.2f} s"
                          + ("" if t_peer is None else f", x{ratio:.3f} of Pinocchio "
                             f"{'parallel' if par else 'loop'} ({t_peer * 1e6:.3f} us/state)")
                          + ("" if "devices" not in row else f"; sharded over {row['devices']} devices: "
                             f"{t_sharded * 1e6:.3f} us/state"
                             + ("" if sharded_ratio is None else f", x{sharded_ratio:.3f}"))
                          + ("" if "chunk" not in row else f"; in chunks of {chunk}: {t_chunk * 1e6:.3f} us/state"
                             + ("" if t_peer is None else f", x{row['chunked_ratio_vs_pinocchio']:.3f}"))
                          + ("" if row["temp_bytes"] is None else f"; scratch {row['temp_bytes'] / 1e6:.1f} MB")
                          + ("" if row["page_faults_per_call"] is None
                             else f", {row['page_faults_per_call']:.0f} page faults per call"))
            fwd_fn = ALGORITHMS["aba"](model)
            grad_fn = jax.grad(lambda q, qd, x: jnp.sum(fwd_fn(q, qd, x)), argnums=(0, 1, 2))
            args = jaxmb_states(model, grad_batch, dtype)
            t_grad_compile, grad_c = compile_time(batched(grad_fn), *args)
            t_fwd, t_grad = alternating_best_times((batched(fwd_fn), args), (grad_c, args))
            row = dict(robot=name, algorithm="grad_aba", dtype=jnp.dtype(dtype).name, batch=grad_batch,
                       states_per_s=grad_batch / t_grad, compile_s=t_grad_compile, cost_vs_forward=t_grad / t_fwd)
            line = f"  grad(sum(aba)) {row['dtype']} batch {grad_batch}: {t_grad / t_fwd:.2f}x the forward call"
            if chunk and grad_batch > chunk:
                t_fwd_chunk, t_grad_chunk = alternating_best_times((batched(fwd_fn, chunk), args),
                                                                   (batched(grad_fn, chunk), args))
                row.update(chunk=chunk, chunked_states_per_s=grad_batch / t_grad_chunk,
                           chunked_cost_vs_forward=t_grad_chunk / t_fwd_chunk)
                line += f" ({row['chunked_cost_vs_forward']:.2f}x in chunks of {chunk})"
            if len(jax.devices()) > 1:
                t_fwd_sharded, t_grad_sharded = alternating_best_times(
                    (jaxmb.jit(jaxmb.sharded_vmap(fwd_fn)), args), (jaxmb.jit(jaxmb.sharded_vmap(grad_fn)), args))
                row.update(devices=len(jax.devices()), sharded_states_per_s=grad_batch / t_grad_sharded,
                           sharded_cost_vs_forward=t_grad_sharded / t_fwd_sharded)
                line += f" ({row['sharded_cost_vs_forward']:.2f}x sharded over {row['devices']} devices)"
            rows.append(row)
            print(line + f", compile {t_grad_compile:.2f} s")
            if checkpoint is not None:
                checkpoint(rows)
    return rows


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    robots = sorted({r["robot"] for r in rows})
    fig, axes = plt.subplots(1, len(robots), figsize=(5 * len(robots), 4), squeeze=False)
    for ax, name in zip(axes[0], robots):
        for alg in ALGORITHMS:
            for dtype in sorted({r["dtype"] for r in rows}):
                sel = [r for r in rows if r["robot"] == name and r["algorithm"] == alg and r["dtype"] == dtype]
                if sel:
                    ax.loglog([r["batch"] for r in sel], [r["states_per_s"] for r in sel], "o-",
                              label=f"jaxmb {alg} {dtype}")
        for alg in ("aba", "rnea"):
            sel = [r for r in rows if r["robot"] == name and r["algorithm"] == alg and r["dtype"] == "float32"
                   and r.get("pinocchio_parallel_states_per_s")]
            if sel:
                ax.loglog([r["batch"] for r in sel], [r["pinocchio_parallel_states_per_s"] for r in sel], "k--"
                          if alg == "aba" else "k:", label=f"Pinocchio {alg} parallel")
        ax.set_title(f"{name} (free base)")
        ax.set_xlabel("batch size")
        ax.set_ylabel("states / s")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    jaxmb.use_cpu_cores()  # one CPU device per core, for the figures sharded over them (before any JAX operation)
    jax.config.update("jax_enable_x64", True)  # float64 available; float32 runs use float32 models and states
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="talos only, batches 64 and 4096, float32")
    ap.add_argument("--robots", nargs="*", default=None)
    ap.add_argument("--batches", nargs="*", type=int, default=None)
    ap.add_argument("--large", action="store_true", help="add batches 65536 and 262144 (for a GPU)")
    ap.add_argument("--grad-batch", type=int, default=None, help="batch of the gradient cost (default: "
                    "the largest batch, at most 4096)")
    ap.add_argument("--float32-only", action="store_true")
    ap.add_argument("--dtypes", nargs="*", choices=["float32", "float64"], default=None)
    ap.add_argument("--algorithms", nargs="*", choices=list(ALGORITHMS), default=list(ALGORITHMS))
    ap.add_argument("--chunk", type=int, default=1024, help="also measure batches larger than this mapped in "
                    "chunks of this many states (0: do not)")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    robots = args.robots or (["talos_full_v2"] if args.quick else ["panda", "go1", "talos_full_v2"])
    batches = args.batches or ([64, 4096] if args.quick else [1, 64, 1024, 4096, 16384])
    dtypes = [jnp.float32] + ([] if args.quick or args.float32_only else [jnp.float64])
    if args.dtypes:
        dtypes = [jnp.dtype(d).type for d in args.dtypes]
    if args.large:
        batches = sorted(set(batches) | {65536, 262144})
    grad_batch = args.grad_batch or min(4096, max(batches))
    name = "dynamics-quick" if args.quick else "dynamics"  # a quick run keeps the full grid's file
    rows = run(robots, batches, dtypes, grad_batch, algorithms=args.algorithms, chunk=args.chunk,
               checkpoint=None if args.no_save else lambda r: save(name, {"machine": machine(), "results": r}))
    if not args.no_save:
        path = save(name, {"machine": machine(), "results": rows})
        plot(rows, path.with_suffix(".png"))
        print(f"\nwrote {path} and {path.with_suffix('.png')}")


if __name__ == "__main__":
    main()
