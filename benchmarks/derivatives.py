"""Whole Jacobians of the dynamics, analytic against autodiff, against Pinocchio measured in the same run.

    python benchmarks/derivatives.py               # panda, go1, talos_full_v2 (free base); batch 256; f32, f64
    python benchmarks/derivatives.py --quick       # talos only, float32

Per robot and precision, jaxmb's jit(vmap(f)) per-state time and compile time of:

* `inverse_dynamics_derivatives` (``tau``, ``d tau/d q``, ``d tau/d qd``, ``M``), and the same three Jacobians by
  ``jax.jacfwd`` of `inverse_dynamics` through `jaxmb.integrate` (one tangent sweep per column); the peer is
  Pinocchio's ``computeRNEADerivatives`` in a single-call loop (it has no parallel version);
* `forward_dynamics_derivatives` (``qdd``, ``d qdd/d q``, ``d qdd/d qd``, ``M^-1``), and ``jax.jacfwd`` of
  `forward_dynamics` likewise; the peer is ``computeABADerivatives``;
* `inverse_dynamics` and `forward_dynamics` themselves, for the cost of a Jacobian in forward calls.

Writes ``benchmarks/results/derivatives-<backend>-<cores>core.json``.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb
from common import (machine, pinocchio_states, print_state_row, robot_grid_arguments, robot_path, save,
                    time_state_functions)


def functions(model):
    zero = jnp.zeros(model.nv, model.mass.dtype)

    def along(f):
        """``d f / d (q, qd, x)`` with the columns in q tangent directions, by forward-mode autodiff."""
        def jac(q, qd, x):
            g = lambda dq, qd, x: f(model, jaxmb.integrate(model, q, dq, 1.0), qd, x)
            return jax.jacfwd(g, argnums=(0, 1, 2))(zero, qd, x)
        return jac

    return {
        "rnea": lambda q, qd, x: jaxmb.inverse_dynamics(model, q, qd, x),
        "rnea_derivatives": lambda q, qd, x: jaxmb.inverse_dynamics_derivatives(model, q, qd, x),
        "rnea_jacfwd": along(jaxmb.inverse_dynamics),
        "aba": lambda q, qd, x: jaxmb.forward_dynamics(model, q, qd, x),
        "aba_derivatives": lambda q, qd, x: jaxmb.forward_dynamics_derivatives(model, q, qd, x),
        "aba_jacfwd": along(jaxmb.forward_dynamics),
    }


def pinocchio_peer(name, loop_states=256):
    """Pinocchio's single-call seconds per state, or None if it is not installed."""
    try:
        import pinocchio as pin
    except ImportError:
        return None

    pm = pin.buildModelFromUrdf(robot_path(name), pin.JointModelFreeFlyer())
    pd = pm.createData()
    q, v, x = pinocchio_states(pm, loop_states)
    calls = {"rnea": pin.rnea, "rnea_derivatives": pin.computeRNEADerivatives, "aba": pin.aba,
             "aba_derivatives": pin.computeABADerivatives}
    out = {}
    for key, call in calls.items():
        best = np.inf
        for _ in range(3):
            t0 = time.perf_counter()
            for i in range(loop_states):
                call(pm, pd, q[:, i], v[:, i], x[:, i])
            best = min(best, (time.perf_counter() - t0) / loop_states)
        out[key] = best
    return out


def main():
    args, robots, dtypes = robot_grid_arguments(__doc__.split("\n\n")[0], 256)
    results = {"machine": machine(), "batch": args.batch, "robots": {}}
    peers = {"rnea_derivatives": "rnea_derivatives", "rnea_jacfwd": "rnea_derivatives",
             "aba_derivatives": "aba_derivatives", "aba_jacfwd": "aba_derivatives"}
    for name in robots:
        peer = pinocchio_peer(name)
        if peer is None:
            print(f"\n{name} (free base): Pinocchio not installed")
        else:
            print(f"\n{name} (free base), Pinocchio single calls: rnea {peer['rnea'] * 1e6:.2f} us, "
                  f"computeRNEADerivatives {peer['rnea_derivatives'] * 1e6:.2f} us, aba {peer['aba'] * 1e6:.2f} us, "
                  f"computeABADerivatives {peer['aba_derivatives'] * 1e6:.2f} us")
        results["robots"][name] = {"pinocchio": peer}
        for dtype in dtypes:
            rows = time_state_functions(name, dtype, args.batch, functions)
            results["robots"][name][jnp.dtype(dtype).name] = rows
            for fname, r in rows.items():
                t = r["per_state_s"]
                base = rows["rnea" if fname.startswith("rnea") else "aba"]["per_state_s"]
                notes = [] if fname in ("rnea", "aba") else [f"{t / base:.1f}x the {fname.split('_')[0].upper()}"]
                if peer is not None:
                    notes.append(f"x{peer[peers.get(fname, fname)] / t:.3f} of Pinocchio's single call")
                print_state_row(dtype, fname, r, ', '.join(notes))
    if not args.no_save:
        print("saved", save("derivatives", results))


if __name__ == "__main__":
    main()
