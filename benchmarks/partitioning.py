"""Partitioned hinges: the cost of forward dynamics through a partitioned model against the unpartitioned model.

    python benchmarks/partitioning.py            # float32 and float64, batches 64 and 1024
    python benchmarks/partitioning.py --quick    # float32, batch 256
    python benchmarks/partitioning.py --tiny     # float32, batch 4 (the suite's smoke run)

Two models built in code: a humanoid (free pelvis, spherical waist, neck, shoulders, wrists, hips and ankles,
revolute elbows and knees) and a free-flyer (one free body). Each is timed as jit(vmap) per-state time and
compile time for:

* ``unpartitioned``: `jaxmb.forward_dynamics` of the model as built (quaternion spherical and free joints, 3x3 and
  6x6 ``D(k)``);
* ``partitioned``: `jaxmb.forward_dynamics` of `jaxmb.partitioning.partition_model` of it, in the sub-hinges'
  coordinates (every ``D(k)`` a scalar, the tree deeper);
* ``partitioned + maps``: `jaxmb.partitioning.partitioned_dynamics`, the state mapped forward, the sweeps, and
  ``qdd``, ``V``, ``alpha`` and the inter-body forces mapped back, with the gimbal-lock flags.

Writes ``benchmarks/results/partitioning-<backend>-<cores>core.json`` and a plot beside it.
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb
from common import best_time, compile_time, machine, save
from jaxmb import joints
from jaxmb.model import ModelBuilder
from jaxmb.partitioning import partition_model, partitioned_dynamics, to_partitioned, to_partitioned_forces


def box(mass, size):
    a, b, c = size
    return dict(mass=mass, inertia=mass / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b]))


def humanoid():
    """A 15-body humanoid with ten spherical joints: nv = 40."""
    b = ModelBuilder("humanoid")
    b.add_body("pelvis", None, joints.free(), **box(8.0, (0.3, 0.2, 0.15)))
    b.add_body("torso", "pelvis", joints.spherical(), placement=(np.eye(3), (0, 0, 0.1)), com=(0, 0, 0.2),
               **box(15.0, (0.3, 0.2, 0.4)))
    b.add_body("head", "torso", joints.spherical(), placement=(np.eye(3), (0, 0, 0.45)), com=(0, 0, 0.1),
               **box(4.0, (0.2, 0.2, 0.2)))
    for side, y in (("left", 1), ("right", -1)):
        b.add_body(f"{side}_upper_arm", "torso", joints.spherical(), placement=(np.eye(3), (0, 0.2 * y, 0.35)),
                   com=(0, 0, -0.15), **box(2.0, (0.08, 0.08, 0.3)))
        b.add_body(f"{side}_forearm", f"{side}_upper_arm", joints.revolute((0, 1, 0)),
                   placement=(np.eye(3), (0, 0, -0.3)), com=(0, 0, -0.12), **box(1.2, (0.06, 0.06, 0.25)))
        b.add_body(f"{side}_hand", f"{side}_forearm", joints.spherical(), placement=(np.eye(3), (0, 0, -0.25)),
                   com=(0, 0, -0.05), **box(0.4, (0.05, 0.08, 0.1)))
        b.add_body(f"{side}_thigh", "pelvis", joints.spherical(), placement=(np.eye(3), (0, 0.1 * y, -0.1)),
                   com=(0, 0, -0.2), **box(6.0, (0.12, 0.12, 0.4)))
        b.add_body(f"{side}_shin", f"{side}_thigh", joints.revolute((0, 1, 0)),
                   placement=(np.eye(3), (0, 0, -0.4)), com=(0, 0, -0.2), **box(3.0, (0.1, 0.1, 0.4)))
        b.add_body(f"{side}_foot", f"{side}_shin", joints.spherical(), placement=(np.eye(3), (0, 0, -0.4)),
                   com=(0.05, 0, -0.03), **box(1.0, (0.2, 0.08, 0.06)))
    return b.build()


def free_flyer():
    b = ModelBuilder("free-flyer")
    b.add_body("body", None, joints.free(), com=(0.02, -0.01, 0.03), **box(5.0, (0.4, 0.3, 0.2)))
    return b.build()


MODELS = {"humanoid": humanoid, "free-flyer": free_flyer}


def states(model, batch, dtype, seed=0):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    q = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(jax.random.split(k1, batch)).astype(dtype)
    return q, jax.random.normal(k2, (batch, model.nv), dtype), jax.random.normal(k3, (batch, model.nv), dtype)


def partitioned_state(partition, q, qd, tau):
    """The partitioned model's ``(q, qd, tau)`` of an unpartitioned state."""
    state = to_partitioned(partition, q, qd)
    return state.q, state.qd, to_partitioned_forces(partition, state.q, tau).tau


def routes(model, partition):
    """``{route: (function of (q, qd, tau) of the route's model, uses the partitioned state)}``."""
    return {
        "unpartitioned": (lambda q, qd, tau: jaxmb.forward_dynamics(model, q, qd, tau), False),
        "partitioned": (lambda q, qd, tau: jaxmb.forward_dynamics(partition.model, q, qd, tau), True),
        "partitioned + maps": (lambda q, qd, tau: partitioned_dynamics(partition, q, qd, tau), False),
    }


def run(dtypes, batches):
    rows = []
    for name, build in MODELS.items():
        for dtype in dtypes:
            model = build().cast(dtype)
            partition = partition_model(model)
            print(f"{name} ({np.dtype(dtype).name}): nb {model.nb} -> {partition.model.nb}, depth "
                  f"{len(model.topology.levels)} -> {len(partition.model.topology.levels)}, nv {model.nv}")
            for batch in batches:
                q, qd, tau = states(model, batch, dtype)
                q_p, qd_p, tau_p = jax.jit(jax.vmap(lambda *s: partitioned_state(partition, *s)))(q, qd, tau)
                base = None
                for route, (fn, partitioned) in routes(model, partition).items():
                    args = (q_p, qd_p, tau_p) if partitioned else (q, qd, tau)
                    seconds, compiled = compile_time(jaxmb.jit(jax.vmap(fn)), *args)
                    t = best_time(compiled, *args) / batch
                    base = base or t
                    rows.append(dict(model=name, dtype=np.dtype(dtype).name, batch=batch, route=route,
                                     nb=partition.model.nb if route != "unpartitioned" else model.nb,
                                     s_per_state=t, compile_s=seconds, vs_unpartitioned=t / base))
                    print(f"  batch {batch:5d} {route:19s} {t * 1e6:9.2f} us/state ({t / base:5.2f}x "
                          f"unpartitioned), compile {seconds:5.2f} s")
    return rows


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(MODELS), figsize=(5 * len(MODELS), 4))
    for ax, name in zip(np.atleast_1d(axes), MODELS):
        for route in ("unpartitioned", "partitioned", "partitioned + maps"):
            for dtype in sorted({r["dtype"] for r in rows}):
                sel = [r for r in rows if r["model"] == name and r["route"] == route and r["dtype"] == dtype]
                if sel:
                    ax.plot([r["batch"] for r in sel], [r["s_per_state"] * 1e6 for r in sel], "o-",
                            label=f"{route} ({dtype})")
        ax.set_xscale("log")
        ax.set_xlabel("batch")
        ax.set_ylabel("us / state")
        ax.set_title(f"forward dynamics, {name}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="float32 only, batch 256")
    ap.add_argument("--tiny", action="store_true", help="float32 only, batch 4")
    ap.add_argument("--batch", type=int, nargs="*", default=None)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    fast = args.quick or args.tiny
    if not fast:
        jax.config.update("jax_enable_x64", True)
    dtypes = [jnp.float32] + ([] if fast else [jnp.float64])
    batches = args.batch or ([4] if args.tiny else [256] if args.quick else [64, 1024])
    rows = run(dtypes, batches)
    if not args.no_save and not args.tiny:
        mode = "quick" if args.quick else "full"
        path = save("partitioning", {"machine": machine(), "mode": mode, "rows": rows})
        plot(rows, path.with_suffix(".png"))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
