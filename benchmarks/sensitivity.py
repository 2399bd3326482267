"""Cost of the gradient of log det M(q): the O(N) rule of `jaxmb.dynamics.sensitivity` (one up and one down sweep)
against automatic differentiation through the articulated-body sweep, measured in the same run.

    python benchmarks/sensitivity.py            # panda, go1, talos; float32 and float64; batch 1024
    python benchmarks/sensitivity.py --quick    # talos, float32, batch 256
    python benchmarks/sensitivity.py --tiny     # panda, float32, batch 4: proves the script runs

Per robot (free base) and precision: jit(vmap) per-state time and compile time of the value (``sum log det D(k)``),
of ``jax.grad`` through the sweep (`jaxmb.dynamics.factorization.log_det_mass_matrix`), of the O(N) rule
(`log_det_mass_matrix_gradient`, tangent coordinates) and of ``jax.grad`` of `jaxmb.log_det_mass_matrix` (the rule
as its derivative, pulled back to ``q``). Writes ``benchmarks/results/sensitivity-<backend>-<cores>core.json``.
"""

import argparse

import jax
import jax.numpy as jnp

import jaxmb
from common import best_time, compile_time, load, machine, save
from jaxmb.dynamics import factorization, sensitivity


def functions(model):
    return {
        "value": lambda q: factorization.log_det_mass_matrix(model, q),
        "grad_autodiff": jax.grad(lambda q: factorization.log_det_mass_matrix(model, q)),
        "gradient_rule": lambda q: sensitivity.log_det_mass_matrix_gradient(model, q),
        "grad_custom": jax.grad(lambda q: jaxmb.log_det_mass_matrix(model, q)),
    }


def run(robots, dtypes, batch):
    rows = []
    for robot in robots:
        for dtype in dtypes:
            model = load(robot, True, dtype)
            keys = jax.random.split(jax.random.PRNGKey(0), batch)
            q = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(keys).astype(dtype)
            times = {}
            for name, fn in functions(model).items():
                t_compile, compiled = compile_time(jaxmb.jit(jax.vmap(fn)), q)
                times[name] = best_time(compiled, q) / batch
                rows.append(dict(robot=robot, dtype=jnp.dtype(dtype).name, batch=batch, route=name,
                                 s_per_state=times[name], compile_s=t_compile))
                print(f"  {robot:14s} {jnp.dtype(dtype).name:8s} {name:14s}: {times[name] * 1e6:8.2f} us/state, "
                      f"compile {t_compile:5.2f} s")
            print(f"  d log det M / dq, {robot} {jnp.dtype(dtype).name} batch {batch}: rule / autodiff time "
                  f"{times['gradient_rule'] / times['grad_autodiff']:.2f}, custom grad / autodiff "
                  f"{times['grad_custom'] / times['grad_autodiff']:.2f}, autodiff / value "
                  f"{times['grad_autodiff'] / times['value']:.2f}")
    return rows


def main():
    jax.config.update("jax_enable_x64", True)  # float64 available; float32 runs use float32 models and states
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="talos, float32, batch 256")
    size.add_argument("--tiny", action="store_true", help="panda, float32, batch 4: proves the script runs")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--robots", nargs="*", default=None)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    quick = args.quick or args.tiny
    robots = args.robots or (["panda"] if args.tiny else ["talos_full_v2"] if quick else
                             ["panda", "go1", "talos_full_v2"])
    dtypes = [jnp.float32] if quick else [jnp.float32, jnp.float64]
    batch = args.batch or (4 if args.tiny else 256 if quick else 1024)
    rows = run(robots, dtypes, batch)
    if not (args.no_save or args.tiny):
        mode = "quick" if args.quick else "full"
        path = save("sensitivity", {"machine": machine(), "mode": mode, "results": rows})
        print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
