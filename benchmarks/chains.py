"""Cost of forward dynamics (ABA) against the number of bodies, for serial chains and balanced binary trees of 8 to
128 revolute bodies, with compile times: where the level schedule pays (bushy trees, few levels) and where depth
is the sequential length (chains); for chains also the divide-and-conquer forward dynamics (O(log n) depth).

    python benchmarks/chains.py            # n = 8, 16, 32, 64, 128; batch 1024; float32
    python benchmarks/chains.py --quick    # n = 8, 32, 128

For each shape and size: jaxmb's jit(vmap(forward_dynamics)) states/s and first-call compile time, with the
chain segments of `jaxmb.sweeps` (the default) and, up to ``--per-level-max`` bodies, with every level swept and
compiled on its own (``SEGMENT_COST = 0``, the schedule before chain segments); for chains,
jit(vmap(forward_dynamics_dc)) on the same model and states, and its ratio to the level-schedule ABA; Pinocchio's
all-core ``abaInParallel`` and single-call loop on the same model (built from the jaxmb model's parameters), and the
ratio; with more than one core, also jaxmb with the batch split over one CPU device per core
(``jaxmb.sharded_vmap``), against the same ``abaInParallel``.
Writes ``benchmarks/results/chains-<backend>-<cores>core.json`` and a plot beside it.
"""

import argparse
import os

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb.topology
from common import best_time, compile_time, loop_call, machine, save, sharded_versus, versus
from jaxmb.testing import random_model, random_state


def shapes(n):
    return {"chain": [-1] + list(range(n - 1)), "binary_tree": [-1] + [(i - 1) // 2 for i in range(1, n)]}


def _states(model, batch):
    return jax.vmap(lambda k: random_state(model, k))(jax.random.split(jax.random.PRNGKey(0), batch))


def jaxmb_call(parents, batch, segment_cost=None):
    """``((fn, args, batch), compile s, model)``: jit(vmap(forward_dynamics)) compiled on a random revolute model of
    the given shape, with its states, as `common.versus` takes a call."""
    default = jaxmb.topology.SEGMENT_COST
    if segment_cost is not None:
        jaxmb.topology.SEGMENT_COST = segment_cost
    try:
        model = random_model(0, n_bodies=len(parents), joint_mix="revolute", parents=parents).cast(jnp.float32)
    finally:
        jaxmb.topology.SEGMENT_COST = default
    return (*_compiled(jaxmb.forward_dynamics, model, batch), model)


def _compiled(algorithm, model, batch):
    args = _states(model, batch)
    f = jaxmb.jit(jax.vmap(lambda q, qd, tau: algorithm(model, q, qd, tau)))
    seconds, compiled = compile_time(f, *args)
    return (compiled, args, batch), seconds


def states_per_s(call):
    fn, args, states = call
    return states / best_time(fn, *args)


def pinocchio_calls(model, batch, loop_states=256):
    """``(parallel, loop)``: Pinocchio's all-core abaInParallel on ``batch`` states and its single-call loop on
    ``loop_states``, on the same tree, as `common.versus` takes calls; (None, None) without Pinocchio."""
    try:
        import pinocchio as pin
    except ImportError:
        return None, None
    pm = pin.Model()
    ids = []
    X, axis = model.X_tree, np.asarray(model.axis, float)
    for k, p in enumerate(model.topology.parent):
        placement = pin.SE3(np.asarray(X.R[k], float), np.asarray(X.p[k], float))
        jid = pm.addJoint(0 if p < 0 else ids[p], pin.JointModelRevoluteUnaligned(axis[k] / np.linalg.norm(axis[k])),
                          placement, f"j{k}")
        pm.appendBodyToJoint(jid, pin.Inertia(float(model.mass[k]), np.asarray(model.com[k], float),
                                              np.asarray(model.inertia[k], float)), pin.SE3.Identity())
        ids.append(jid)
    rng = np.random.default_rng(0)
    q, v, tau = (rng.standard_normal((pm.nq, batch)) for _ in range(3))
    pool = pin.ModelPool(pm, os.cpu_count())
    parallel = (pin.abaInParallel, (os.cpu_count(), pool, q, v, tau, np.zeros((pm.nv, batch))), batch)
    pd = pm.createData()
    loop_states = min(loop_states, batch)
    loop = (loop_call(lambda i: pin.aba(pm, pd, q[:, i], v[:, i], tau[:, i]), loop_states), (), loop_states)
    return parallel, loop


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for shape, style in (("chain", "-"), ("binary_tree", "--")):
        rs = [r for r in rows if r["shape"] == shape]
        n = [r["bodies"] for r in rs]
        ax1.plot(n, [1e6 / r["states_per_s"] for r in rs], "o" + style, label=f"jaxmb {shape}")
        if rs[0]["pinocchio_parallel_states_per_s"]:
            ax1.plot(n, [1e6 / r["pinocchio_parallel_states_per_s"] for r in rs], "s" + style,
                     label=f"Pinocchio abaInParallel {shape}")
        ax2.plot(n, [r["compile_s"] for r in rs], "o" + style, label=f"chain segments, {shape}")
        if "dc_states_per_s" in rs[0]:
            ax1.plot(n, [1e6 / r["dc_states_per_s"] for r in rs], "^" + style, label=f"divide and conquer {shape}")
            ax2.plot(n, [r["dc_compile_s"] for r in rs], "^" + style, label=f"divide and conquer, {shape}")
        old = [r for r in rs if r.get("per_level_compile_s")]
        if old:
            ax2.plot([r["bodies"] for r in old], [r["per_level_compile_s"] for r in old], "x" + style,
                     label=f"one level at a time, {shape}")
    ax1.set(xscale="log", yscale="log", xlabel="bodies", ylabel="us per state (batch throughput)")
    ax2.set(xscale="log", yscale="log", xlabel="bodies", ylabel="first-call compile (s)")
    for ax in (ax1, ax2):
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 8, 32, 128")
    ap.add_argument("--sizes", nargs="*", type=int, default=None)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--per-level-max", type=int, default=32, help="largest n also compiled one level at a time")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    jaxmb.use_cpu_cores()  # one CPU device per core, for the figures sharded over them (before any JAX operation)
    sizes = args.sizes or ([8, 32, 128] if args.quick else [8, 16, 32, 64, 128])
    rows = []
    for n in sizes:
        for shape, parents in shapes(n).items():
            ours, seconds, model = jaxmb_call(parents, args.batch)
            parallel, loop = pinocchio_calls(model, args.batch)
            if parallel is None:
                rate, peer, ratio = states_per_s(ours), None, None
            else:
                t, t_peer, ratio = versus(ours, parallel)
                rate, peer = 1 / t, 1 / t_peer
            row = {"shape": shape, "bodies": n, "depth": len(model.topology.levels),
                   "segments": len(model.topology.segments), "batch": args.batch, "states_per_s": rate,
                   "compile_s": seconds, "pinocchio_parallel_states_per_s": peer, "ratio_vs_pinocchio": ratio,
                   "pinocchio_loop_states_per_s": None if loop is None else states_per_s(loop)}
            if len(jax.devices()) > 1:
                t_sharded, row["sharded_ratio_vs_pinocchio"] = sharded_versus(
                    lambda q, qd, tau: jaxmb.forward_dynamics(model, q, qd, tau), ours[1], args.batch, parallel,
                    len(jax.devices()))
                row.update(devices=len(jax.devices()), sharded_states_per_s=1 / t_sharded)
            if shape == "chain":
                dc, row["dc_compile_s"] = _compiled(jaxmb.forward_dynamics_dc, model, args.batch)
                row["dc_states_per_s"] = states_per_s(dc)
                row["dc_vs_level_schedule"] = row["dc_states_per_s"] / rate
            if n <= args.per_level_max:
                per_level, row["per_level_compile_s"], _ = jaxmb_call(parents, args.batch, 0)
                row["per_level_states_per_s"] = states_per_s(per_level)
            rows.append(row)
            old = (f"  one level at a time: {row['per_level_compile_s']:5.1f} s, "
                   f"{1e6 / row['per_level_states_per_s']:6.2f} us" if "per_level_compile_s" in row else "")
            ratio = f"  {row['ratio_vs_pinocchio']:.2f}x Pinocchio parallel" if peer else ""
            if "devices" in row:
                ratio += (f"  sharded over {row['devices']} devices: {1e6 / row['sharded_states_per_s']:6.2f} us"
                          + (f", {row['sharded_ratio_vs_pinocchio']:.2f}x" if peer else ""))
            dc = (f"  divide and conquer: {1e6 / row['dc_states_per_s']:6.2f} us, compile {row['dc_compile_s']:5.1f} s,"
                  f" {row['dc_vs_level_schedule']:.2f}x the level schedule" if "dc_states_per_s" in row else "")
            print(f"{shape:12s} n={n:4d} depth={row['depth']:4d} segments={row['segments']:3d}  "
                  f"{1e6 / rate:7.2f} us/state  compile {seconds:5.1f} s{ratio}{old}{dc}", flush=True)
    if not args.no_save:
        path = save("chains", {"machine": machine(), "results": rows})
        plot(rows, path.with_suffix(".png"))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
