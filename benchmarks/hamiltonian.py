"""Hamiltonian dynamics against forward dynamics, and symplectic steps against RK4 over long horizons.

    python benchmarks/hamiltonian.py            # n = 4 ... 128; batch 1024; 1e5 RK4 steps
    python benchmarks/hamiltonian.py --quick    # n = 4, 16, 64; batch 256; 1e5 RK4 steps
    python benchmarks/hamiltonian.py --tiny     # n = 4 chain; batch 4; 1e3 steps; two drift runs (proves it runs)

1. Cost of `jaxmb.dynamics.hamiltonian.hamiltonian_dynamics` (``(q, p) -> (qd, pd)``, three sweeps) against
   `jaxmb.forward_dynamics` (``(q, qd) -> qdd``, three sweeps) on random revolute chains and balanced binary trees:
   throughput of ``jit(vmap(f))`` in float64 on the CPU, and XLA's flop count of one state's compiled program
   (``jax.jit(f).lower(...).compile().cost_analysis()``), against the number of bodies and the depth. XLA counts
   the body of a loop once: the chain segments of `jaxmb.sweeps` (one `lax.scan` over a run of single-child
   levels) are counted for one level, so the flop counts compare the two algorithms on one shape, not shapes.
2. Energy error of a double pendulum over a long horizon: the implicit midpoint rule and the generalized leapfrog
   on ``(q, p)`` (`jaxmb.sim.symplectic`) against classical RK4 on ``(q, qd)`` at equal cost, counted in
   evaluations of the right side (RK4 takes 4 per step, the midpoint rule ``iterations``, the leapfrog
   ``iterations + 1`` and as many velocity sweeps), with the wall time of each run.
3. Constraint drift of the four-bar leg (`jaxmb.loops.mechanisms.four_bar_leg`): RK4 on ``(q, yd)`` without
   projection against the symplectic steps, whose configuration update projects onto the loop.

Writes ``benchmarks/results/hamiltonian-<backend>-<cores>core.json`` and a plot beside it.
"""

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb  # noqa: E402
from common import best_time, compile_time, machine, save  # noqa: E402
from jaxmb import loops  # noqa: E402
from jaxmb.configuration import configuration_rate  # noqa: E402
from jaxmb.dynamics.energy import kinetic_energy, potential_energy  # noqa: E402
from jaxmb.dynamics.hamiltonian import hamiltonian, hamiltonian_dynamics, momenta  # noqa: E402
from jaxmb.loops import hamiltonian as closed  # noqa: E402
from jaxmb.sim.symplectic import generalized_leapfrog, implicit_midpoint  # noqa: E402
from jaxmb.testing import double_pendulum, random_model, random_state  # noqa: E402

ITERATIONS = 6


def shapes(n):
    return {"chain": [-1] + list(range(n - 1)), "binary_tree": [-1] + [(i - 1) // 2 for i in range(1, n)]}


def flops(f, *args):
    cost = jax.jit(f).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost.get("flops", float("nan")))


def cost_rows(sizes, batch, kinds=("chain", "binary_tree")):
    rows = []
    for n in sizes:
        for shape, parents in shapes(n).items():
            if shape not in kinds:
                continue
            model = random_model(0, n_bodies=n, joint_mix="revolute", parents=parents)
            keys = jax.random.split(jax.random.PRNGKey(0), batch)
            q, qd, tau = jax.vmap(lambda k: random_state(model, k))(keys)
            p = jax.vmap(lambda q, qd: momenta(model, q, qd))(q, qd)
            row = {"shape": shape, "bodies": n, "depth": len(model.topology.levels), "batch": batch}
            for name, f, x in (("hamiltonian", lambda q, p, tau: hamiltonian_dynamics(model, q, p, tau), p),
                               ("forward", lambda q, qd, tau: jaxmb.forward_dynamics(model, q, qd, tau), qd)):
                seconds, compiled = compile_time(jaxmb.jit(jax.vmap(f)), q, x, tau)
                row[f"{name}_us_per_state"] = 1e6 * best_time(compiled, q, x, tau) / batch
                row[f"{name}_compile_s"] = seconds
                row[f"{name}_flops"] = flops(f, q[0], x[0], tau[0])
            row["time_ratio"] = row["hamiltonian_us_per_state"] / row["forward_us_per_state"]
            row["flop_ratio"] = row["hamiltonian_flops"] / row["forward_flops"]
            rows.append(row)
            print(f"{shape:12s} n={n:4d} depth={row['depth']:4d}  hamiltonian {row['hamiltonian_us_per_state']:7.2f} us"
                  f" {row['hamiltonian_flops']:9.0f} flops   forward {row['forward_us_per_state']:7.2f} us "
                  f"{row['forward_flops']:9.0f} flops   time x{row['time_ratio']:.2f}  flops x{row['flop_ratio']:.2f}",
                  flush=True)
    return rows


def rk4(rate, y, dt):
    k1 = rate(y)
    k2 = rate(jax.tree.map(lambda y, k: y + 0.5 * dt * k, y, k1))
    k3 = rate(jax.tree.map(lambda y, k: y + 0.5 * dt * k, y, k2))
    k4 = rate(jax.tree.map(lambda y, k: y + dt * k, y, k3))
    return jax.tree.map(lambda y, a, b, c, d: y + dt / 6 * (a + 2 * b + 2 * c + d), y, k1, k2, k3, k4)


def run(step, measure, y, steps, samples):
    """``measure(y)`` at ``samples`` times over ``steps`` steps, and the wall seconds of the (compiled) run."""
    per = steps // samples
    go = jax.jit(lambda y: jax.lax.scan(lambda y, _: (jax.lax.fori_loop(0, per, lambda i, y: step(y), y),) * 2,
                                        y, None, length=samples)[1])
    jax.block_until_ready(go(y))
    t0 = time.perf_counter()
    ys = jax.block_until_ready(go(y))
    return np.asarray(jax.vmap(measure)(ys)), time.perf_counter() - t0


def energy_rows(rk4_steps, samples):
    """Energy error of the double pendulum at equal evaluations of the right side: RK4 at dt, the midpoint rule
    at ``ITERATIONS / 4`` dt, the leapfrog at ``(ITERATIONS + 1) / 4`` dt (its velocity sweeps not counted)."""
    model = double_pendulum()
    q, qd, tau = jnp.array([1.0, 0.5]), jnp.zeros(2), jnp.zeros(2)
    p = momenta(model, q, qd)
    dt = 0.01
    E0 = hamiltonian(model, q, p)
    out = {}
    lagrange = lambda y: (configuration_rate(model, y[0], y[1]), jaxmb.forward_dynamics(model, *y, tau))  # noqa: E731
    e, wall = run(lambda y: rk4(lagrange, y, dt), lambda y: kinetic_energy(model, *y) + potential_energy(model, y[0]),
                  (q, qd), rk4_steps, samples)
    out["rk4"] = dict(dt=dt, steps=rk4_steps, evaluations_per_step=4, wall_s=wall, error=np.abs(e - E0).tolist())
    for name, method, evals in (("implicit_midpoint", implicit_midpoint, ITERATIONS),
                                ("generalized_leapfrog", generalized_leapfrog, ITERATIONS + 1)):
        h = dt * evals / 4
        steps = int(round(rk4_steps * dt / h))
        e, wall = run(lambda y, h=h, method=method: method(model, *y, tau, h, iterations=ITERATIONS)[:2],
                      lambda y: hamiltonian(model, *y), (q, p), steps, samples)
        out[name] = dict(dt=h, steps=steps, evaluations_per_step=evals, wall_s=wall, error=np.abs(e - E0).tolist())
    T = rk4_steps * dt
    for name, r in out.items():
        err = np.asarray(r["error"])
        tenth = max(1, len(err) // 10)
        r["first_tenth_mean"], r["last_tenth_mean"], r["max"] = (float(err[:tenth].mean()),
                                                                 float(err[-tenth:].mean()), float(err.max()))
        print(f"double pendulum {name:21s} dt={r['dt']:.4f} over {T:.0f} s: |dE| first tenth "
              f"{r['first_tenth_mean']:.2e}, last tenth {r['last_tenth_mean']:.2e}, max {r['max']:.2e}; "
              f"wall {r['wall_s']:.2f} s", flush=True)
    return dict(horizon_s=T, iterations=ITERATIONS, samples=samples, runs=out)


DRIFT_METHODS = ("rk4_velocities", "rk4_momenta", "implicit_midpoint", "generalized_leapfrog")


def drift_rows(steps, samples, methods=DRIFT_METHODS):
    """``max |phi(q)|`` of the four-bar leg over ``steps`` steps of 2 ms: RK4 on ``(q, yd)`` without projection
    against the symplectic steps (those of ``methods``)."""
    lm = loops.mechanisms.four_bar_leg()
    q = loops.mechanisms.reference_configuration(lm)
    yd = jnp.array([0.0, 2.0])
    tau = jnp.zeros(lm.ny)
    p = closed.momenta(lm, q, yd)
    dt = 0.002
    phi = lambda y: jnp.max(jnp.abs(loops.constraint_residual(lm, y[0])))  # noqa: E731

    def lagrange(y):
        return configuration_rate(lm.tree, y[0], loops.spanning_velocity(lm, *y)), loops.forward_dynamics(lm, *y, tau)

    def hamilton(y):
        yd, pd = closed.hamiltonian_dynamics(lm, *y, tau)
        return configuration_rate(lm.tree, y[0], loops.spanning_velocity(lm, y[0], yd)), pd

    out = {}
    for name, step, y in (("rk4_velocities", lambda y: rk4(lagrange, y, dt), (q, yd)),
                          ("rk4_momenta", lambda y: rk4(hamilton, y, dt), (q, p)),
                          ("implicit_midpoint", lambda y: implicit_midpoint(lm, *y, tau, dt)[:2], (q, p)),
                          ("generalized_leapfrog", lambda y: generalized_leapfrog(lm, *y, tau, dt)[:2], (q, p))):
        if name not in methods:
            continue
        e, wall = run(step, phi, y, steps, samples)
        out[name] = dict(max_phi=float(np.max(e)), final_phi=float(e[-1]), wall_s=wall, phi=e.tolist())
        print(f"four-bar leg {name:21s} over {steps * dt:.1f} s: max |phi| {out[name]['max_phi']:.2e}, wall "
              f"{wall:.2f} s", flush=True)
    return dict(dt=dt, steps=steps, runs=out)


def plot(payload, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4))
    rows = payload["cost"]
    for shape, style in (("chain", "-"), ("binary_tree", "--")):
        rs = [r for r in rows if r["shape"] == shape]
        n = [r["bodies"] for r in rs]
        ax1.plot(n, [r["hamiltonian_us_per_state"] for r in rs], "o" + style, label=f"hamiltonian_dynamics {shape}")
        ax1.plot(n, [r["forward_us_per_state"] for r in rs], "s" + style, label=f"forward_dynamics {shape}")
        ax2.plot(n, [r["hamiltonian_flops"] for r in rs], "o" + style, label=f"hamiltonian_dynamics {shape}")
        ax2.plot(n, [r["forward_flops"] for r in rs], "s" + style, label=f"forward_dynamics {shape}")
    ax1.set(xscale="log", yscale="log", xlabel="bodies", ylabel="us per state (float64, CPU)")
    ax2.set(xscale="log", yscale="log", xlabel="bodies", ylabel="XLA flops per state")
    energy = payload["energy"]
    for name, r in energy["runs"].items():
        t = np.linspace(0, energy["horizon_s"], len(r["error"]) + 1)[1:]
        ax3.plot(t, r["error"], label=f"{name}, dt {r['dt']:.4f}")
    ax3.set(yscale="log", xlabel="time (s)", ylabel="|E(t) - E(0)| (J)",
            title="double pendulum, equal right-side evaluations")
    for ax in (ax1, ax2, ax3):
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="n = 4, 16, 64; batch 256")
    size.add_argument("--tiny", action="store_true", help="n = 4, a chain; batch 4; 1e3 steps; drift of RK4 and the "
                      "leapfrog only: proves the script runs")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    sizes = [4] if args.tiny else [4, 16, 64] if args.quick else [4, 8, 16, 32, 64, 128]
    batch = 4 if args.tiny else 256 if args.quick else 1024
    rk4_steps = 1000 if args.tiny else 100_000
    payload = {"machine": machine(), "mode": "tiny" if args.tiny else "quick" if args.quick else "full",
               "cost": cost_rows(sizes, batch, ("chain",) if args.tiny else ("chain", "binary_tree")),
               "energy": energy_rows(rk4_steps, 100 if args.tiny else 1000),
               "drift": drift_rows(100 if args.tiny else 5000, 50,
                                   ("rk4_velocities", "generalized_leapfrog") if args.tiny else DRIFT_METHODS)}
    if not args.no_save:
        path = save("hamiltonian", payload)
        plot(payload, path.with_suffix(".png"))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
