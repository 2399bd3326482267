"""Shared helpers of the benchmark scripts: robots, timing, machine description, result files."""

import json
import os
import platform
import site
import time
import warnings
from pathlib import Path

import jax
import numpy as np

RESULTS = Path(os.environ.get("JAXMB_RESULTS_DIR") or Path(__file__).parent / "results")

ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "go1": "go1_description/urdf/go1.urdf",
    "talos_full_v2": "talos_data/robots/talos_full_v2.urdf",
}


def robot_path(name):
    """Path of a benchmark robot's URDF: under ``$JAXMB_ROBOTS_DIR`` if set (a folder laid out like
    example-robot-data's ``robots/``; meshes are not needed), else in the installed example-robot-data."""
    if os.environ.get("JAXMB_ROBOTS_DIR"):
        p = Path(os.environ["JAXMB_ROBOTS_DIR"]) / ROBOTS[name]
        if not p.exists():
            raise FileNotFoundError(f"{p} (from JAXMB_ROBOTS_DIR) does not exist")
        return str(p)
    for d in site.getsitepackages() + [site.getusersitepackages()]:
        p = Path(d) / "cmeel.prefix/share/example-robot-data/robots" / ROBOTS[name]
        if p.exists():
            return str(p)
    raise FileNotFoundError(f"example-robot-data not installed: {ROBOTS[name]}")


def load(name, floating_base, dtype):
    import jaxmb

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # published URDFs with triangle-inequality-breaking inertias
        return jaxmb.load_urdf(robot_path(name), floating_base=floating_base).cast(dtype)


def best_time(fn, *args, min_total=0.3, max_reps=20):
    """Best wall time of ``fn(*args)`` over repeats (after one warm-up call)."""
    jax.block_until_ready(fn(*args))
    times, total = [], 0.0
    while (total < min_total or len(times) < 3) and len(times) < max_reps:
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
        total += times[-1]
    return min(times)


def alternating_best_times(*calls, rounds=3):
    """Best wall times of each ``(fn, args)`` of ``calls``, measured in alternating rounds of `best_time`, so that
    their ratios compare calls made in the same state of the machine (benchmarks/findings.md, "Two speeds for one
    machine")."""
    best = [float("inf")] * len(calls)
    for _ in range(rounds):
        best = [min(t, best_time(fn, *args)) for t, (fn, args) in zip(best, calls)]
    return best


def versus(ours, peer, rounds=5, min_total=0.2):
    """``(ours_s, peer_s, ratio)``: per-state seconds of ``ours`` and ``peer``, each ``(fn, args, states)`` (one
    call of ``fn(*args)`` computes ``states`` states), and our throughput over the peer's.

    The two calls are timed in ``rounds`` alternating rounds, each the `best_time` of a few repeats, and each
    figure is the best over the rounds. This machine has slow periods, seconds to a minute long, in which XLA's
    one-device programs run at half speed and Pinocchio's do not (benchmarks/findings.md, "Two speeds for one
    machine"); rounds spread over a few seconds give each call a chance of an undisturbed round."""
    (f, f_args, n), (g, g_args, m) = ours, peer
    t = u = float("inf")
    for _ in range(rounds):
        t = min(t, best_time(f, *f_args, min_total=min_total) / n)
        u = min(u, best_time(g, *g_args, min_total=min_total) / m)
    return t, u, u / t


def loop_call(call, n):
    """A function making the single calls ``call(0), ..., call(n - 1)``: a peer's loop over ``n`` states, timed as one
    call (`versus`)."""
    def loop():
        for i in range(n):
            call(i)
    return loop


def page_faults(fn, *args, calls=5):
    """Minor page faults per call of ``fn(*args)`` (after one warm-up call): the pages of fresh memory the call
    touched. None where the platform has no `resource` module."""
    try:
        import resource
    except ImportError:
        return None
    jax.block_until_ready(fn(*args))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        jax.block_until_ready(fn(*args))
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def temp_bytes(compiled):
    """The scratch memory XLA allocates for each call of a compiled function (None where not reported)."""
    stats = compiled.memory_analysis()
    return None if stats is None else stats.temp_size_in_bytes


def compile_time(jitted, *args):
    """Seconds to trace, lower and compile ``jitted`` for ``args``, and the compiled function."""
    t0 = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    return time.perf_counter() - t0, compiled


def machine():
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    dev = jax.devices()[0]
    return {
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "jax": jax.__version__,
        "backend": dev.platform,
        "device": getattr(dev, "device_kind", str(dev)),
    }


def save(name, payload):
    RESULTS.mkdir(exist_ok=True)
    m = payload["machine"]
    tag = f"{m['backend']}-{m['cores']}core"
    path = RESULTS / f"{name}-{tag}.json"
    path.write_text(json.dumps(payload, indent=1))
    return path


def pinocchio_states(pm, batch, seed=0):
    import pinocchio as pin

    rng = np.random.default_rng(seed)
    lo, hi = -np.ones(pm.nq), np.ones(pm.nq)
    q = np.stack([pin.randomConfiguration(pm, lo, hi) for _ in range(batch)], 1)
    return q, rng.standard_normal((pm.nv, batch)), rng.standard_normal((pm.nv, batch))


def robot_grid_arguments(description, batch):
    """The command line of the per-robot scripts (`operators.py`, `derivatives.py`): ``(args, robots, dtypes)``,
    talos alone in float32 with ``--quick``, else panda, go1 and talos in float32 and float64."""
    import argparse

    import jax.numpy as jnp

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="talos only, float32")
    parser.add_argument("--batch", type=int, default=batch)
    parser.add_argument("--robots", nargs="*", default=None, help="default: talos_full_v2 with --quick, else all")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    robots = args.robots or (["talos_full_v2"] if args.quick else ["panda", "go1", "talos_full_v2"])
    dtypes = [jnp.float32] if args.quick else [jnp.float32, jnp.float64]
    return args, robots, dtypes


def sharded_versus(fn, args, states, peer, peer_cores):
    """``(per-state s, ratio)`` of ``jaxmb.jit(jaxmb.sharded_vmap(fn))`` over the devices against ``peer`` (as `versus`
    takes it; None: timed alone, ratio None), a peer running on ``peer_cores`` cores: a single-call loop (1) is
    credited with every core of the machine at once, its throughput times the number of devices (ideal scaling).
    The states ``args`` are split over the devices beforehand (`jaxmb.split_batch`, where they divide evenly), as a
    rollout keeps them and as Pinocchio's threads find theirs."""
    import jaxmb

    if states % len(jax.devices()) == 0:
        args = jaxmb.split_batch(args)
    sharded = (jaxmb.jit(jaxmb.sharded_vmap(fn)), args, states)
    if peer is None:
        return best_time(*sharded[:2]) / states, None
    t, _, ratio = versus(sharded, peer)
    return t, ratio * peer_cores / len(jax.devices())


def time_state_functions(name, dtype, batch, functions, peers=None, sharded=None):
    """Per-state seconds and compile seconds of ``jaxmb.jit(vmap(f))`` for each ``f(q, qd, x)`` of
    ``functions(model)``, at ``batch`` random states of robot ``name`` (free base): ``{name: {per_state_s,
    compile_s}}``. Functions named in ``peers`` (``{name: (fn, args, states)}``, a peer's call as `versus` takes
    it) are timed against that call, and their rows add the peer's ``peer_per_state_s`` and ``ratio_vs_peer``.
    Those also named in ``sharded`` (``{name: the cores its peer runs on}``) are, with more than one device, timed
    split over the devices too (`sharded_versus`: ``sharded_per_state_s``, ``sharded_ratio_vs_peer``)."""
    import jaxmb

    if np.dtype(dtype) == np.float64:
        jax.config.update("jax_enable_x64", True)
    model = load(name, True, dtype)
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    q = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(jax.random.split(k1, batch)).astype(dtype)
    qd = jax.random.normal(k2, (batch, model.nv), dtype)
    x = jax.random.normal(k3, (batch, model.nv), dtype)
    rows = {}
    for fname, f in functions(model).items():
        seconds, compiled = compile_time(jaxmb.jit(jax.vmap(f)), q, qd, x)
        if fname in (peers or {}):
            t, t_peer, ratio = versus((compiled, (q, qd, x), batch), peers[fname])
            rows[fname] = {"per_state_s": t, "compile_s": seconds, "peer_per_state_s": t_peer, "ratio_vs_peer": ratio}
            if len(jax.devices()) > 1 and fname in (sharded or {}):
                t_sharded, sharded_ratio = sharded_versus(f, (q, qd, x), batch, peers[fname], sharded[fname])
                rows[fname].update(devices=len(jax.devices()), sharded_per_state_s=t_sharded,
                                   sharded_ratio_vs_peer=sharded_ratio)
        else:
            rows[fname] = {"per_state_s": best_time(compiled, q, qd, x) / batch, "compile_s": seconds}
    return rows


def print_state_row(dtype, fname, row, note):
    """One line of a `time_state_functions` result: precision, function, us/state, compile time, a note."""
    sharded = "" if "devices" not in row else (
        f"; sharded over {row['devices']} devices: {row['sharded_per_state_s'] * 1e6:.2f} us/state"
        + ("" if row["sharded_ratio_vs_peer"] is None else f", x{row['sharded_ratio_vs_peer']:.3f}"))
    print(f"  {np.dtype(dtype).name:7s} {fname:18s} {row['per_state_s'] * 1e6:9.2f} us/state, compile "
          f"{row['compile_s']:5.2f} s, {note}{sharded}")
