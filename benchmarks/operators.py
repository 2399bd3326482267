"""Cost of the spatial-operator layer, against Pinocchio measured in the same run.

    python benchmarks/operators.py                 # panda, go1, talos_full_v2 (free base); batch 1024; f64, f32
    python benchmarks/operators.py --quick         # talos only, float32

Per robot and precision, jaxmb's jit(vmap(f)) per-state time and compile time of:

* the mass-matrix inverse three ways: `mass_matrix_inverse` (the factors L^-1 and D), ``M^-1 e_j`` by vmapped
  O(N) solves (`mass_matrix_inverse_times`), and ``jnp.linalg.inv(mass_matrix)``; the peer is Pinocchio's
  ``computeMinverse`` in a single-call loop (it has no parallel version);
* ``M^-1 x`` in O(N) and the forward dynamics, against Pinocchio's ``abaInParallel`` (all cores);
* with more than one core, the factors of ``M^-1`` and ``M^-1 x`` also with the batch split over one CPU device per
  core (``jaxmb.sharded_vmap``), against ``abaInParallel`` and against ``computeMinverse``'s loop as if it ran on
  every core at once;
* inter-body forces by eq. 18 (`interbody_forces`) against forward dynamics alone, and against forward dynamics
  followed by a Newton-Euler force sweep (`body_forces`);
* hybrid dynamics with a random mask against forward dynamics;
* ``log_det_mass_matrix`` and its gradient (cost relative to the value);
* the Jacobian of the deepest body (`jacobian`) and the centroidal momentum matrix (`centroidal_momentum_matrix`),
  against Pinocchio's ``computeFrameJacobian`` and ``ccrba`` in single-call loops.

Writes ``benchmarks/results/operators-<backend>-<cores>core.json``.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb
from common import (load, loop_call, machine, pinocchio_states, print_state_row, robot_grid_arguments, robot_path, save,
                    time_state_functions)


def deepest_body(model):
    """The name of a body at the tree's greatest depth: the Jacobian with the most columns."""
    return model.body_names[int(np.argmax(model.topology.depth))]


def functions(model):
    nv = model.nv
    tip = deepest_body(model)
    mask = jax.random.bernoulli(jax.random.PRNGKey(1), 0.5, (nv,))
    eye = jnp.eye(nv, dtype=model.mass.dtype)
    return {
        "forward_dynamics": lambda q, qd, x: jaxmb.forward_dynamics(model, q, qd, x),
        "minv_factors": lambda q, qd, x: jaxmb.mass_matrix_inverse(model, q),
        "minv_columns": lambda q, qd, x: jax.vmap(lambda e: jaxmb.mass_matrix_inverse_times(model, q, e),
                                                  out_axes=1)(eye),
        "minv_dense": lambda q, qd, x: jnp.linalg.inv(jaxmb.mass_matrix(model, q)),
        "minv_times": lambda q, qd, x: jaxmb.mass_matrix_inverse_times(model, q, x),
        "interbody_eq18": lambda q, qd, x: jaxmb.interbody_forces(model, q, qd, x),
        "interbody_fd_rnea": lambda q, qd, x: jaxmb.body_forces(model, q, qd,
                                                                jaxmb.forward_dynamics(model, q, qd, x)),
        "hybrid": lambda q, qd, x: jaxmb.hybrid_dynamics(model, q, qd, x, mask),
        "log_det": lambda q, qd, x: jaxmb.log_det_mass_matrix(model, q),
        "grad_log_det": lambda q, qd, x: jax.grad(jaxmb.log_det_mass_matrix, argnums=1)(model, q),
        "jacobian": lambda q, qd, x: jaxmb.jacobian(model, q, tip),
        "centroidal_matrix": lambda q, qd, x: jaxmb.centroidal_momentum_matrix(model, q),
    }


def pinocchio_peer(name, batch, loop_states=256):
    """Pinocchio's calls that our functions are timed against, as `common.versus` takes them: ``{function: (fn,
    args, states)}`` (computeMinverse's single-call loop for the explicit inverses, abaInParallel on all cores for
    ``M^-1 x`` and forward dynamics); None if Pinocchio is not installed."""
    try:
        import pinocchio as pin
    except ImportError:
        return None

    pm = pin.buildModelFromUrdf(robot_path(name), pin.JointModelFreeFlyer())
    pd = pm.createData()
    q, v, x = pinocchio_states(pm, max(batch, loop_states))
    minverse = (loop_call(lambda i: pin.computeMinverse(pm, pd, q[:, i]), loop_states), (), loop_states)
    tip = pm.getFrameId(deepest_body(load(name, True, np.float32)))
    jacobian = (loop_call(lambda i: pin.computeFrameJacobian(pm, pd, q[:, i], tip, pin.LOCAL), loop_states), (),
                loop_states)
    ccrba = (loop_call(lambda i: pin.ccrba(pm, pd, q[:, i], v[:, i]), loop_states), (), loop_states)
    pool = pin.ModelPool(pm, os.cpu_count())
    out = np.zeros((pm.nv, batch))
    aba = (pin.abaInParallel, (os.cpu_count(), pool, q[:, :batch], v[:, :batch], x[:, :batch], out), batch)
    return {"minv_factors": minverse, "minv_columns": minverse, "minv_dense": minverse, "minv_times": aba,
            "forward_dynamics": aba, "jacobian": jacobian, "centroidal_matrix": ccrba}


PEER_NAMES = {"minv_factors": "computeMinverse", "minv_columns": "computeMinverse", "minv_dense": "computeMinverse",
              "minv_times": "abaInParallel", "forward_dynamics": "abaInParallel", "jacobian": "computeFrameJacobian",
              "centroidal_matrix": "ccrba"}


def main():
    jaxmb.use_cpu_cores()  # one CPU device per core, for the figures sharded over them (before any JAX operation)
    args, robots, dtypes = robot_grid_arguments(__doc__.split("\n\n")[0], 1024)
    results = {"machine": machine(), "batch": args.batch, "robots": {}}
    for name in robots:
        peers = pinocchio_peer(name, args.batch)
        print(f"\n{name} (free base)" + (": Pinocchio not installed" if peers is None else ""))
        results["robots"][name] = {}
        for dtype in dtypes:
            rows = time_state_functions(name, dtype, args.batch, functions, peers,
                                        sharded={"minv_factors": 1, "minv_times": os.cpu_count()})
            results["robots"][name][jnp.dtype(dtype).name] = rows
            fd = rows["forward_dynamics"]["per_state_s"]
            for fname, r in rows.items():
                t = r["per_state_s"]
                if "ratio_vs_peer" in r:
                    note = (f"x{r['ratio_vs_peer']:.3f} of Pinocchio {PEER_NAMES[fname]} "
                            f"({r['peer_per_state_s'] * 1e6:.2f} us/state)")
                elif fname in PEER_NAMES:
                    note = ""
                elif fname == "grad_log_det":
                    note = f"{t / rows['log_det']['per_state_s']:.2f}x the log det"
                else:
                    note = f"{t / fd:.2f}x forward dynamics"
                print_state_row(dtype, fname, r, note)
    if not args.no_save:
        print("saved", save("operators", results))


if __name__ == "__main__":
    main()
