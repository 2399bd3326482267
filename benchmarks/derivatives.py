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

Writes ``benchmarks/results/derivatives-<backend>-<cores>core.json`` (``derivatives-quick-...`` with ``--quick``).
"""

import jax
import jax.numpy as jnp

import jaxmb
from common import (loop_call, machine, pinocchio_states, print_state_row, robot_grid_arguments, robot_path, save,
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
    """Pinocchio's single-call loops that our functions are timed against, as `common.versus` takes them:
    ``{function: (fn, args, states)}``; None if Pinocchio is not installed."""
    try:
        import pinocchio as pin
    except ImportError:
        return None

    pm = pin.buildModelFromUrdf(robot_path(name), pin.JointModelFreeFlyer())
    pd = pm.createData()
    q, v, x = pinocchio_states(pm, loop_states)

    def loop(call):
        return loop_call(lambda i: call(pm, pd, q[:, i], v[:, i], x[:, i]), loop_states), (), loop_states

    return {"rnea": loop(pin.rnea), "rnea_derivatives": loop(pin.computeRNEADerivatives),
            "rnea_jacfwd": loop(pin.computeRNEADerivatives), "aba": loop(pin.aba),
            "aba_derivatives": loop(pin.computeABADerivatives), "aba_jacfwd": loop(pin.computeABADerivatives)}


PEER_NAMES = {"rnea": "rnea", "rnea_derivatives": "computeRNEADerivatives", "rnea_jacfwd": "computeRNEADerivatives",
              "aba": "aba", "aba_derivatives": "computeABADerivatives", "aba_jacfwd": "computeABADerivatives"}


def main():
    args, robots, dtypes = robot_grid_arguments(__doc__.split("\n\n")[0], 256)
    results = {"machine": machine(), "batch": args.batch, "robots": {}}
    for name in robots:
        peers = pinocchio_peer(name)
        print(f"\n{name} (free base)" + (": Pinocchio not installed" if peers is None else ""))
        results["robots"][name] = {}
        for dtype in dtypes:
            rows = time_state_functions(name, dtype, args.batch, functions, peers)
            results["robots"][name][jnp.dtype(dtype).name] = rows
            for fname, r in rows.items():
                t = r["per_state_s"]
                base = rows["rnea" if fname.startswith("rnea") else "aba"]["per_state_s"]
                notes = [] if fname in ("rnea", "aba") else [f"{t / base:.1f}x the {fname.split('_')[0].upper()}"]
                if "ratio_vs_peer" in r:
                    notes.append(f"x{r['ratio_vs_peer']:.3f} of Pinocchio's single {PEER_NAMES[fname]} "
                                 f"({r['peer_per_state_s'] * 1e6:.2f} us)")
                print_state_row(dtype, fname, r, ", ".join(notes))
    if not args.no_save:
        print("saved", save("derivatives-quick" if args.quick else "derivatives", results))  # keeps the full grid's


if __name__ == "__main__":
    main()
