"""Trajectory optimization: jaxmb.trajopt's FDDP against Crocoddyl 3.2's in the same run.

    python benchmarks/trajopt.py            # Panda reach, Talos whole-body, 256 targets, MPC
    python benchmarks/trajopt.py --quick    # Panda reach, 64 targets, MPC
    python benchmarks/trajopt.py --tiny     # one short Panda solve: proves the script runs (no Crocoddyl, no save)

Rows: compile seconds of the jitted solve; seconds to convergence (best of repeats, after compiling) and per
iteration, with Crocoddyl's FDDP on the same problem (``benchmarks/crocoddyl_peer.py`` in the Python that
``JAXMB_CROCODDYL_PYTHON`` names, one thread) and the ratio; a batch of targets solved by one ``jax.vmap`` against
Crocoddyl solving them one after another; MPC's seconds per control step (one warm-started solve of at most ten
iterations and two simulator steps); the first-order baselines (`jaxmb.trajopt.single_shooting` and
`multiple_shooting` by optax's adam) on the Panda reach: their time and the cost they reach over FDDP's. The
Talos problem is the reduced Talos floating free (no contact) reaching with its left gripper from its neutral
configuration, its 32 joints actuated; its two costs differ (the state
regularization's reference and the floating base's coordinates are each library's own, not mapped onto one
another), so its row compares seconds per iteration, not solutions.
"""

import argparse
import importlib.util
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from common import compile_time, machine, save

import jaxmb
from jaxmb import sim, trajopt
from jaxmb.envs.panda_reach import panda_model
from jaxmb.trajopt import reach

HERE = Path(__file__).parent


def peer():
    spec = importlib.util.spec_from_file_location("crocoddyl_peer", HERE / "crocoddyl_peer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def best(fn, *args, repeats=5):
    out = fn(*args)
    jax.block_until_ready(out)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return min(times), out


def talos_reach(horizon):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = jaxmb.robots.load("talos", floating_base=True)
    q0 = jaxmb.neutral_configuration(model)
    x0 = jnp.concatenate([q0, jnp.zeros(model.nv)])
    target, frame = (0.4, 0.4, 0.2), "gripper_left_base_link"
    running = [trajopt.frame_translation(model, frame, target, reach.GOAL),
               trajopt.state_regularization(model, x0, reach.STATE), trajopt.control_regularization(model.nv - 6,
                                                                                                      weight=reach.CONTROL)]
    terminal = [trajopt.frame_translation(model, frame, target, reach.GOAL_TERMINAL),
                trajopt.state_regularization(model, x0, reach.STATE_TERMINAL)]
    problem = trajopt.shooting_problem(model, x0, reach.DT, horizon, running, terminal,
                                       actuated=model.joint_names[1:])
    us = jnp.broadcast_to(jaxmb.gravity_forces(model, q0)[6:], (horizon, model.nv - 6))
    spec = {"robot": "talos", "frame": frame, "horizon": horizon, "dt": reach.DT, "targets": [list(target)],
            "weights": reach.peer_spec([])["weights"]}
    return problem, jnp.broadcast_to(x0, (horizon + 1, x0.shape[0])), us, spec


def single(name, problem, xs, us, spec, croc, rows, repeats):
    solve = jaxmb.jit(lambda p, xs, us: trajopt.solve(p, xs, us))
    compile_s, compiled = compile_time(solve, problem, xs, us)
    seconds, sol = best(compiled, problem, xs, us, repeats=repeats)
    row = {"problem": name, "compile_s": compile_s, "solve_s": seconds, "iterations": int(sol.iterations),
           "per_iteration_s": seconds / int(sol.iterations), "cost": float(sol.cost), "converged": bool(sol.converged)}
    if croc is not None:
        out = croc.solve_in_peer(dict(spec, repeats=repeats))["solutions"][0]
        row.update(crocoddyl_s=min(out["times"]), crocoddyl_iterations=out["iter"] + 1, crocoddyl_cost=out["cost"],
                   ratio=seconds / min(out["times"]))
    rows.append(row)
    print(f"{name}: compile {compile_s:.1f} s, solve {seconds * 1e3:.2f} ms in {row['iterations']} iterations "
          f"({row['per_iteration_s'] * 1e3:.2f} ms each), cost {row['cost']:.10g}"
          + (f"; Crocoddyl {row['crocoddyl_s'] * 1e3:.2f} ms in {row['crocoddyl_iterations']}, cost "
             f"{row['crocoddyl_cost']:.10g}; ratio {row['ratio']:.2f}" if croc is not None else ""), flush=True)


def shooting_baselines(problem, xs, us, rows, fddp, steps, rounds):
    """First-order single and multiple shooting (optax's adam) on the problem FDDP solved (``fddp`` its row):
    compile, wall time, and the cost they reach over FDDP's."""
    import optax

    for name, solve, updates in (
            ("single shooting (adam)", lambda p, xs, us: trajopt.single_shooting(
                p, us, optimizer=optax.adam(0.1), steps=steps), steps),
            ("multiple shooting (adam, augmented Lagrangian)", lambda p, xs, us: trajopt.multiple_shooting(
                p, xs, us, optimizer=optax.adam(3e-2), steps=steps // rounds, rounds=rounds), steps)):
        compile_s, compiled = compile_time(jaxmb.jit(solve), problem, xs, us)
        seconds, sol = best(compiled, problem, xs, us, repeats=1)
        row = {"problem": f"{fddp['problem']}, {name}", "compile_s": compile_s, "solve_s": seconds,
               "updates": updates, "cost": float(sol.cost), "gaps": float(sol.gaps),
               "cost_over_fddp": float(sol.cost) / fddp["cost"]}
        rows.append(row)
        print(f"{row['problem']}: compile {compile_s:.1f} s, {seconds:.2f} s for {updates} updates, cost "
              f"{row['cost']:.6g} ({row['cost_over_fddp']:.3g}x FDDP's), largest gap {row['gaps']:.1e}", flush=True)


def batch(model, n, croc, rows, horizon):
    rng = np.random.default_rng(0)
    targets = jnp.asarray(rng.uniform((0.3, -0.3, 0.3), (0.6, 0.3, 0.6), (n, 3)))
    problem, xs, us = reach.panda_reach(model=model, horizon=horizon)

    def one(t):
        p = problem.replace(running=trajopt.retarget(problem.running, t), terminal=trajopt.retarget(problem.terminal, t))
        return trajopt.solve(p, xs, us)

    solve = jaxmb.jit(jax.vmap(one))
    compile_s, compiled = compile_time(solve, targets)
    seconds, sol = best(compiled, targets, repeats=2)
    row = {"problem": f"panda reach, {n} targets", "compile_s": compile_s, "solve_s": seconds,
           "converged": int(jnp.sum(sol.converged)), "max_iterations": int(jnp.max(sol.iterations))}
    if croc is not None:
        spec = reach.peer_spec(np.asarray(targets).tolist())
        spec["horizon"] = horizon
        out = croc.solve_in_peer(spec, timeout=3600)["solutions"]
        row.update(crocoddyl_s=sum(s["times"][0] for s in out), ratio=seconds / sum(s["times"][0] for s in out))
    rows.append(row)
    print(f"{row['problem']}: compile {compile_s:.1f} s, {seconds:.3f} s for the batch ({row['converged']} converged)"
          + (f"; Crocoddyl one after another {row['crocoddyl_s']:.3f} s; ratio {row['ratio']:.2f}"
             if croc is not None else ""), flush=True)


def mpc(model, steps, rows, horizon):
    problem, xs, us = reach.panda_reach(model=model, horizon=horizon)
    scene = sim.make_scene(model, integrator="euler")

    def update(p, k):
        t = jnp.array(reach.TARGET) + 0.1 * jnp.array([0.0, jnp.sin(0.1 * k), jnp.cos(0.1 * k) - 1.0])
        return p.replace(running=trajopt.retarget(p.running, t), terminal=trajopt.retarget(p.terminal, t))

    run = jaxmb.jit(lambda s: trajopt.receding_horizon(scene, problem, s, steps, update, xs, us, substeps=2))
    state = sim.init_state(scene, problem.x0[:7])
    compile_s, compiled = compile_time(run, state)
    seconds, (_, trace) = best(compiled, state, repeats=2)
    row = {"problem": f"panda MPC, horizon {horizon}", "compile_s": compile_s, "per_step_s": seconds / steps,
           "mean_iterations": float(jnp.mean(trace.iterations))}
    rows.append(row)
    print(f"{row['problem']}: compile {compile_s:.1f} s, {row['per_step_s'] * 1e3:.2f} ms per control step "
          f"({row['mean_iterations']:.1f} iterations a solve)", flush=True)


def main():
    jax.config.update("jax_enable_x64", True)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true")
    size.add_argument("--tiny", action="store_true")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    croc_module = peer()
    croc = None if args.tiny or croc_module.peer_python() is None else croc_module
    if croc is None and not args.tiny:
        print("no Crocoddyl peer (set JAXMB_CROCODDYL_PYTHON): jaxmb's figures alone")
    model = panda_model()[0]
    rows = []
    horizon = 10 if args.tiny else reach.HORIZON
    problem, xs, us = reach.panda_reach(model=model, horizon=horizon)
    spec = reach.peer_spec([reach.TARGET])
    single("panda reach", problem, xs, us, dict(spec, horizon=horizon), croc, rows, 1 if args.tiny else 10)
    if not (args.tiny or args.quick):
        single("talos whole-body reach (no contact)", *talos_reach(50), croc, rows, 3)
    shooting_baselines(problem, xs, us, rows, rows[0], *((100, 2) if args.tiny else (3000, 10)))
    if not args.tiny:
        batch(model, 64 if args.quick else 256, croc, rows, horizon)
        mpc(model, 50, rows, 30)
    if not (args.no_save or args.tiny):
        path = save("trajopt", {"machine": machine(), "mode": "quick" if args.quick else "full",
                                "crocoddyl": None if croc is None else "3.2.1", "results": rows})
        print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
