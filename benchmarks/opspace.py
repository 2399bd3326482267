"""Cost of the operational-space compliance Lambda^-1 = J M^-1 J* for 1, 2 and 4 task frames of talos_full_v2
(free base; hands, then feet), against Pinocchio and a dense JAX route measured in the same run.

    python benchmarks/opspace.py            # float32 and float64, batch 1024
    python benchmarks/opspace.py --quick    # float32, batch 256

Per number of frames: jaxmb's `operational_space_compliance` (the articulated-body sweep at rest, then each
frame's columns walked up its path to the root) as jit(vmap) per-state time and compile time; without --quick
also all of `task_space` (J, ``Lambda_inv`` and ``M^-1 J*``: the walk, a down sweep of the 6m columns over the
whole tree, and the Jacobians); a dense JAX route (frame Jacobians, CRBA mass matrix, Cholesky solve) in the
same jit(vmap); Pinocchio's ``computeDelassusMatrix`` (6-D rigid constraints at the frames: the same matrix) and
``computeMinverse`` + ``getFrameJacobian`` + numpy products, each in a single-call loop (Pinocchio has no parallel
version of either); with more than one core, also the walk with the batch split over one CPU device per core
(``jaxmb.sharded_vmap``), against the Delassus loop as if it ran on every core at once. Writes
``benchmarks/results/opspace-<backend>-<cores>core.json`` and a plot beside it.
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb
from jaxmb.batching.precision import full_precision
from common import (best_time, compile_time, load, loop_call, machine, pinocchio_states, robot_path, save,
                    sharded_versus, versus)

ROBOT = "talos_full_v2"
FRAMES = ("gripper_left_base_link", "gripper_right_base_link", "left_sole_link", "right_sole_link")
COUNTS = (1, 2, 4)


def jaxmb_functions(model, frames, quick):
    def walk(q):
        return jaxmb.operational_space_compliance(model, q, frames)

    def task_space(q):
        return jaxmb.task_space(model, q, frames)  # J, Lambda_inv and M^-1 J* (the walk, then a down sweep)

    @full_precision  # as jaxmb's own dense products, so that neither route runs in TensorFloat-32 on a GPU
    def dense(q):
        J = jnp.concatenate([jaxmb.jacobian(model, q, f) for f in frames])
        factor = jax.scipy.linalg.cho_factor(jaxmb.mass_matrix(model, q))
        return J @ jax.scipy.linalg.cho_solve(factor, J.T)

    return {"walk": walk, "dense_jax": dense} | ({} if quick else {"task_space": task_space})


def pinocchio_peer(frames, loop_states=200):
    """Pinocchio's two routes for ``frames`` as `common.versus` takes them, ``{route: (fn, args, states)}`` (single-call
    loops), or None if Pinocchio is not installed."""
    try:
        import pinocchio as pin
    except ImportError:
        return None
    pm = pin.buildModelFromUrdf(robot_path(ROBOT), pin.JointModelFreeFlyer())
    pd = pm.createData()
    ids = [pm.getFrameId(f) for f in frames]
    models, datas = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for i in ids:
        fr = pm.frames[i]
        models.append(pin.RigidConstraintModel(pin.ContactType.CONTACT_6D, pm, fr.parentJoint, fr.placement,
                                               pin.ReferenceFrame.LOCAL))
    for cm in models:
        datas.append(cm.createData())
    pin.initConstraintDynamics(pm, pd, models, datas)
    q, _, _ = pinocchio_states(pm, loop_states)

    def delassus(i):
        return pin.computeDelassusMatrix(pm, pd, q[:, i], models, datas, 0.0)

    def minverse(i):
        Minv = pin.computeMinverse(pm, pd, q[:, i])
        Minv = np.triu(Minv) + np.triu(Minv, 1).T
        pin.computeJointJacobians(pm, pd, q[:, i])
        pin.updateFramePlacements(pm, pd)
        J = np.vstack([pin.getFrameJacobian(pm, pd, f, pin.LOCAL) for f in ids])
        return J @ Minv @ J.T

    assert np.allclose(delassus(0), minverse(0), rtol=1e-8, atol=1e-8)
    return {name: (loop_call(fn, loop_states), (), loop_states)
            for name, fn in (("delassus", delassus), ("minverse_jacobians", minverse))}


def run(dtypes, batch, counts=COUNTS, quick=False):
    rows = []
    for n in counts:
        frames = FRAMES[:n]
        peer = pinocchio_peer(frames)
        minverse_s = None
        if peer is not None:
            fn, args, states = peer["minverse_jacobians"]
            minverse_s = best_time(fn, *args) / states
        print(f"\n{ROBOT} (free base), {n} frame(s) {frames}: " + (
            "Pinocchio not installed" if peer is None else
            f"Pinocchio computeMinverse + Jacobians {minverse_s * 1e6:.1f} us (single call)"))
        for dtype in dtypes:
            model = load(ROBOT, True, dtype)
            keys = jax.random.split(jax.random.PRNGKey(0), batch)
            q = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(keys).astype(dtype)
            for route, fn in jaxmb_functions(model, frames, quick).items():
                t_compile, compiled = compile_time(jaxmb.jit(jax.vmap(fn)), q)
                if peer is None:
                    t, delassus_s, ratio = best_time(compiled, q) / batch, None, None
                else:
                    t, delassus_s, ratio = versus((compiled, (q,), batch), peer["delassus"])
                row = dict(robot=ROBOT, frames=n, route=route, dtype=jnp.dtype(dtype).name, batch=batch,
                           s_per_state=t, compile_s=t_compile, pinocchio_delassus_s=delassus_s,
                           ratio_vs_pinocchio_delassus=ratio, pinocchio_minverse_jacobians_s=minverse_s)
                if route == "walk" and len(jax.devices()) > 1:
                    t_sharded, sharded_ratio = sharded_versus(fn, (q,), batch, peer and peer["delassus"], 1)
                    row.update(devices=len(jax.devices()), sharded_s_per_state=t_sharded,
                               sharded_ratio_vs_pinocchio_delassus=sharded_ratio)
                rows.append(row)
                versus_text = "" if peer is None else (f", x{ratio:.3f} of Pinocchio's Delassus loop "
                                                       f"({delassus_s * 1e6:.1f} us)")
                if "devices" in row:
                    versus_text += (f"; sharded over {row['devices']} devices: {t_sharded * 1e6:.2f} us/state"
                                    + ("" if peer is None else f", x{sharded_ratio:.3f} of the loop on every core"))
                print(f"  {route:13s} {row['dtype']:8s}: {t * 1e6:8.2f} us/state, compile {t_compile:5.2f} s"
                      + versus_text)
        walk = {r["dtype"]: r["s_per_state"] for r in rows if r["frames"] == n and r["route"] == "walk"}
        dense = {r["dtype"]: r["s_per_state"] for r in rows if r["frames"] == n and r["route"] == "dense_jax"}
        print("  walk / dense JAX time: " + ", ".join(f"{d} {walk[d] / dense[d]:.2f}" for d in walk))
    return rows


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for route in ("walk", "task_space", "dense_jax"):
        for dtype in sorted({r["dtype"] for r in rows}):
            sel = [r for r in rows if r["route"] == route and r["dtype"] == dtype]
            if sel:
                ax.plot([r["frames"] for r in sel], [r["s_per_state"] * 1e6 for r in sel], "o-",
                        label=f"jaxmb {route} {dtype}")
    delassus = {}  # frames -> Pinocchio's best per-state seconds over the runs against each precision
    for r in rows:
        if r["route"] == "walk" and r["pinocchio_delassus_s"]:
            delassus[r["frames"]] = min(delassus.get(r["frames"], np.inf), r["pinocchio_delassus_s"])
    if delassus:
        ax.plot(sorted(delassus), [delassus[f] * 1e6 for f in sorted(delassus)], "k--",
                label="Pinocchio Delassus (1 thread)")
    ax.set_xlabel("task frames (6 rows each)")
    ax.set_ylabel("us per state")
    ax.set_xticks(COUNTS)
    ax.set_title(f"Lambda^-1 of {ROBOT} (free base)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    jaxmb.use_cpu_cores()  # one CPU device per core, for the figures sharded over them (before any JAX operation)
    jax.config.update("jax_enable_x64", True)  # float64 available; float32 runs use float32 models and states
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="float32 only, batch 256")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--frames", nargs="*", type=int, default=list(COUNTS), help="numbers of task frames")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    dtypes = [jnp.float32] + ([] if args.quick else [jnp.float64])
    batch = args.batch or (256 if args.quick else 1024)
    rows = run(dtypes, batch, args.frames, args.quick)
    if not args.no_save:
        path = save("opspace", {"machine": machine(), "results": rows})
        plot(rows, path.with_suffix(".png"))
        print(f"\nwrote {path} and {path.with_suffix('.png')}")


if __name__ == "__main__":
    main()
