"""Throughput of batched forward dynamics (ABA), inverse dynamics (RNEA) and the mass matrix (CRBA), against
Pinocchio measured in the same run.

    python benchmarks/dynamics.py            # panda, go1, talos_full_v2 (free base); batches 1 .. 16384; f32, f64
    python benchmarks/dynamics.py --quick    # talos only, batches 64 and 4096, float32
    python benchmarks/dynamics.py --large    # adds batches 65536 and 262144 (for a GPU)

For each robot, algorithm, precision and batch: jaxmb's jit(vmap(f)) states/s and compile time; Pinocchio's
all-core ``abaInParallel``/``rneaInParallel`` (no parallel CRBA exists: its single-call loop is the peer) and
its single-call Python loop; the ratio jaxmb / Pinocchio-parallel; the scratch memory of one call and the minor
page faults it takes. Batches larger than ``--chunk`` (default 1024) are also measured mapped in chunks,
``jaxmb.chunked_vmap(f, chunk_size=chunk)``, each chunk one ``vmap`` (benchmarks/README.md, "Scratch memory").
Also the cost of ``grad(sum(forward_dynamics))`` (w.r.t. q, qd, tau) relative to the forward call, both ways. Writes
``benchmarks/results/dynamics-<backend>-<cores>core.json`` (after each robot and precision, so a run cut short
keeps what it measured) and a plot beside it. Without Pinocchio installed, its figures are None and only jaxmb is
measured.
"""

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb
from common import (alternating_best_times, best_time, compile_time, load, machine, page_faults, pinocchio_states,
                    robot_path, save, temp_bytes)

ALGORITHMS = {
    "aba": lambda m: lambda q, qd, x: jaxmb.forward_dynamics(m, q, qd, x),
    "rnea": lambda m: lambda q, qd, x: jaxmb.inverse_dynamics(m, q, qd, x),
    "crba": lambda m: lambda q, qd, x: jaxmb.mass_matrix(m, q),
}


def batched(fn, chunk=None):
    """jit of ``fn`` (one state) over a batch: one `vmap`, or with ``chunk`` `jaxmb.chunked_vmap` (a
    `jax.lax.map` over chunks of ``chunk`` states, each chunk one `vmap`)."""
    return jaxmb.jit(jax.vmap(fn) if chunk is None else jaxmb.chunked_vmap(fn, chunk_size=chunk))


def jaxmb_states(model, batch, dtype, seed=0):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    q = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(jax.random.split(k1, batch)).astype(dtype)
    return q, jax.random.normal(k2, (batch, model.nv), dtype), jax.random.normal(k3, (batch, model.nv), dtype)


def pinocchio_peer(name, batches, loop_states=256):
    """Per-state seconds of Pinocchio: all-core parallel ABA/RNEA per batch, and single-call loops; None if
    Pinocchio is not installed."""
    try:
        import pinocchio as pin
    except ImportError:
        return None

    pm = pin.buildModelFromUrdf(robot_path(name), pin.JointModelFreeFlyer())
    pd = pm.createData()
    threads = os.cpu_count()
    pool = pin.ModelPool(pm, threads)
    q, v, x = pinocchio_states(pm, loop_states)
    loop = {}
    for alg, call in (("aba", lambda i: pin.aba(pm, pd, q[:, i], v[:, i], x[:, i])),
                      ("rnea", lambda i: pin.rnea(pm, pd, q[:, i], v[:, i], x[:, i])),
                      ("crba", lambda i: pin.crba(pm, pd, q[:, i]))):
        t0 = time.perf_counter()
        for i in range(loop_states):
            call(i)
        loop[alg] = (time.perf_counter() - t0) / loop_states
    parallel = {"aba": {}, "rnea": {}}
    for b in batches:
        q, v, x = pinocchio_states(pm, b)
        out = np.zeros((pm.nv, b))
        for alg, fn in (("aba", pin.abaInParallel), ("rnea", pin.rneaInParallel)):
            best = np.inf
            for _ in range(3 if b >= 1024 else 20):
                t0 = time.perf_counter()
                fn(threads, pool, q, v, x, out)
                best = min(best, time.perf_counter() - t0)
            parallel[alg][b] = best / b
    return {"threads": threads, "loop_s_per_state": loop, "parallel_s_per_state": parallel}


def run(robots, batches, dtypes, grad_batch, checkpoint=None, algorithms=tuple(ALGORITHMS), chunk=1024):
    """Rows of results; ``checkpoint(rows)`` is called after each robot and precision. Batches larger than
    ``chunk`` are also measured mapped in chunks of ``chunk`` states (None or 0: not)."""
    rows = []
    for name in robots:
        peer = pinocchio_peer(name, batches)
        if peer is None:
            print(f"\n{name} (free base): Pinocchio not installed")
        else:
            print(f"\n{name} (free base): Pinocchio single call "
                  + ", ".join(f"{a} {t * 1e6:.2f} us" for a, t in peer["loop_s_per_state"].items())
                  + f"; {peer['threads']}-thread parallel at batch {batches[-1]}: "
                  + ", ".join(f"{a} {peer['parallel_s_per_state'][a][batches[-1]] * 1e6:.2f} us/state"
                              for a in ("aba", "rnea")))
        for dtype in dtypes:
            model = load(name, True, dtype)
            for alg in algorithms:
                fn = ALGORITHMS[alg](model)
                f = batched(fn)
                for b in batches:
                    args = jaxmb_states(model, b, dtype)
                    t_compile, compiled = compile_time(f, *args)
                    t = best_time(compiled, *args)
                    par = None if peer is None else peer["parallel_s_per_state"].get(alg, {}).get(b)
                    loop = None if peer is None else peer["loop_s_per_state"][alg]
                    peer_t = par if par is not None else loop
                    row = dict(robot=name, algorithm=alg, dtype=jnp.dtype(dtype).name, batch=b,
                               states_per_s=b / t, compile_s=t_compile,
                               temp_bytes=temp_bytes(compiled), page_faults_per_call=page_faults(compiled, *args),
                               pinocchio_parallel_states_per_s=None if par is None else 1 / par,
                               pinocchio_loop_states_per_s=None if loop is None else 1 / loop,
                               ratio_vs_pinocchio=None if peer_t is None else (b / t) * peer_t)
                    if chunk and b > chunk:
                        t_chunk = best_time(batched(fn, chunk), *args)
                        row.update(chunk=chunk, chunked_states_per_s=b / t_chunk,
                                   chunked_ratio_vs_pinocchio=None if peer_t is None else (b / t_chunk) * peer_t)
                    rows.append(row)
                    print(f"  {alg:5s} {row['dtype']:8s} batch {b:6d}: {row['states_per_s']:10.4g} states/s "
                          f"({t / b * 1e6:8.3f} us/state), compile {t_compile:5.2f} s"
                          + ("" if peer_t is None else f", x{row['ratio_vs_pinocchio']:.3f} of Pinocchio "
                             f"{'parallel' if par else 'loop'}")
                          + ("" if "chunk" not in row else f"; in chunks of {chunk}: {t_chunk / b * 1e6:.3f} us/state"
                             + ("" if peer_t is None else f", x{row['chunked_ratio_vs_pinocchio']:.3f}"))
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
