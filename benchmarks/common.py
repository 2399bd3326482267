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
    their ratios compare calls made in the same state of the process (its memory and the machine's load): glibc
    may keep or return a call's scratch memory depending on what ran before."""
    best = [float("inf")] * len(calls)
    for _ in range(rounds):
        best = [min(t, best_time(fn, *args)) for t, (fn, args) in zip(best, calls)]
    return best


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


def time_state_functions(name, dtype, batch, functions):
    """Per-state seconds and compile seconds of ``jaxmb.jit(vmap(f))`` for each ``f(q, qd, x)`` of
    ``functions(model)``, at ``batch`` random states of robot ``name`` (free base): ``{name: {per_state_s,
    compile_s}}``."""
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
        rows[fname] = {"per_state_s": best_time(compiled, q, qd, x) / batch, "compile_s": seconds}
    return rows


def print_state_row(dtype, fname, row, note):
    """One line of a `time_state_functions` result: precision, function, us/state, compile time, a note."""
    print(f"  {np.dtype(dtype).name:7s} {fname:18s} {row['per_state_s'] * 1e6:9.2f} us/state, compile "
          f"{row['compile_s']:5.2f} s, {note}")
