"""Closed loops: the constraint-embedded AB algorithm against the Lagrange-multiplier and projected solves in JAX,
Pinocchio's KKT ``forwardDynamics`` and the armature approximation.

    python benchmarks/loops.py [--quick] [--batch 1024] [--no-save]

Three tables, all jitted ``vmap`` over a batch of consistent states (float64, as the references need):

* mechanisms (`jaxmb.loops.mechanisms`): us/state of each method, of the embedded method's gradient (in ``q``,
  ``yd`` and ``tau``, and its cost over the forward call), and the ratio to Pinocchio's
  ``forwardDynamics(q, v, tau, K, -k)`` (its KKT solve, one state per call on one core: it has no batched
  constrained solver) on the same spanning tree, and the cost of the exact model over the armature model;
* cost against the number of clusters: geared pendulum chains of 1-10 links (one link + rotor cluster each),
  which should grow linearly for the embedded AB algorithm;
* cost against the loop size: one planar closed chain of L links (a cluster of L bodies, L - 2 degrees of
  freedom), where the embedded method's dense cluster step grows like L^2-L^3 (Chignoli et
  al., "A Propagation Perspective on Recursive Forward Dynamics for Systems with Kinematic Loops", 2023, Fig. 10).
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import jaxmb  # noqa: E402
from common import alternating_best_times, best_time, compile_time, loop_call, machine, save, versus  # noqa: E402
from jaxmb import joints, loops  # noqa: E402
from jaxmb.loops import mechanisms  # noqa: E402
from jaxmb.model import ModelBuilder  # noqa: E402
from jaxmb.batching.precision import full_precision  # noqa: E402

MECHANISMS = {
    "geared chain (3 links)": lambda exact: mechanisms.geared_pendulum_chain(3, exact=exact),
    "four-bar leg": lambda exact: mechanisms.four_bar_leg(exact=exact) if exact else None,
    "belt leg": lambda exact: mechanisms.belt_leg(exact=exact),
    "bevel differential": lambda exact: mechanisms.bevel_differential(exact=exact),
    "quadruped with rotors": lambda exact: mechanisms.quadruped_with_rotors(exact=exact),
}


def states(lm, q_ref, batch, seed=0):
    """A batch of consistent states near ``q_ref``: (q (B, nq), yd (B, ny), tau (B, ny))."""
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    moved = jax.vmap(lambda v: jaxmb.integrate(lm.tree, q_ref, v, 0.05))(jax.random.normal(k1, (batch, lm.nv)))
    solve = jax.jit(jax.vmap(lambda q: loops.solve_configuration(lm, loops.independent_configuration(lm, q),
                                                                 guess=q_ref, iterations=20).q))
    return solve(moved), jax.random.normal(k2, (batch, lm.ny)), jax.random.normal(k3, (batch, lm.ny))


@full_precision  # as the loops' own dense products
def _tau_span(lm, q, tau):
    G = loops.embedding_matrix(lm, q)
    return G @ jnp.linalg.solve(G.T @ G, tau)


METHODS = {
    "embedded": lambda lm: lambda q, yd, tau: loops.forward_dynamics(lm, q, yd, tau),
    "projected": lambda lm: lambda q, yd, tau: loops.projected_forward_dynamics(lm, q, yd, tau),
    "lagrange": lambda lm: lambda q, yd, tau: loops.lagrange_forward_dynamics(
        lm, q, loops.spanning_velocity(lm, q, yd), _tau_span(lm, q, tau))[0],
}


def compiled_method(fn, args):
    """``((fn, args, states), compile s)``: a jitted vmap of ``fn`` compiled for the batch ``args``, as
    `common.versus` takes a call."""
    seconds, compiled = compile_time(jaxmb.jit(jax.vmap(fn)), *args)
    return (compiled, args, args[0].shape[0]), seconds


def time_method(fn, args):
    """(us/state, compile s) of a jitted vmap of ``fn`` over the batch ``args``."""
    (compiled, args, states), seconds = compiled_method(fn, args)
    return 1e6 * best_time(compiled, *args) / states, seconds


def time_gradient(fn, args):
    """(us/state of ``grad(sum(vmap(fn)))`` in all arguments, its cost over the forward call, compile s): the two
    timed in alternating rounds."""
    forward = jaxmb.jit(jax.vmap(fn)).lower(*args).compile()
    gradient = jaxmb.jit(jax.grad(lambda *a: jnp.sum(jax.vmap(fn)(*a)), argnums=tuple(range(len(args)))))
    seconds, compiled = compile_time(gradient, *args)
    t_forward, t_gradient = alternating_best_times((forward, args), (compiled, args))
    return 1e6 * t_gradient / args[0].shape[0], t_gradient / t_forward, seconds


def _depth_first(parent):
    order, stack = [], [i for i in range(len(parent)) if parent[i] < 0][::-1]
    while stack:
        i = stack.pop()
        order.append(i)
        stack += [j for j in range(len(parent)) if parent[j] == i][::-1]
    return order


def pinocchio_tree(tree):
    """The same spanning tree in Pinocchio, added depth first (Pinocchio's algorithms need each subtree's
    coordinates contiguous): screw joints as unaligned revolute or prismatic joints, a free base. Returns
    ``(model, P, to_pin_q)`` with ``v_pin = P v`` and ``to_pin_q(q)``, or None."""
    try:
        import pinocchio as pin
    except ImportError:
        return None
    topo = tree.topology
    pm, pin_id = pin.Model(), {}
    X, axis, coef = tree.X_tree, np.asarray(tree.axis), np.asarray(tree.coef)
    for k in _depth_first(topo.parent):
        p = topo.parent[k]
        kind = topo.kinds[k]
        if kind == "free" and p < 0:
            jm = pin.JointModelFreeFlyer()
        elif kind == "screw" and coef[k, 1] == 0:
            jm = pin.JointModelRevoluteUnaligned(axis[k] * coef[k, 0])
        elif kind == "screw" and coef[k, 0] == 0:
            jm = pin.JointModelPrismaticUnaligned(axis[k] * coef[k, 1])
        else:
            return None
        pin_id[k] = pm.addJoint(0 if p < 0 else pin_id[p], jm, pin.SE3(np.asarray(X.R[k]), np.asarray(X.p[k])),
                                f"j{k}")
        pm.appendBodyToJoint(pin_id[k], pin.Inertia(float(tree.mass[k]), np.asarray(tree.com[k]),
                                                    np.asarray(tree.inertia[k])), pin.SE3.Identity())
    P = np.zeros((tree.nv, tree.nv))
    q_index = np.zeros(pm.nq, int)
    for k, j in pin_id.items():
        jm = pm.joints[j]
        local_v = [3, 4, 5, 0, 1, 2] if topo.kinds[k] == "free" else [0]  # pin [v; w] <- jaxmb [w; v]
        local_q = [0, 1, 2, 4, 5, 6, 3] if topo.kinds[k] == "free" else [0]  # pin xyzw <- jaxmb wxyz
        for i, lv in enumerate(local_v):
            P[jm.idx_v + i, topo.v_offset[k] + lv] = 1.0
        q_index[jm.idx_q + np.arange(jm.nq)] = topo.q_offset[k] + np.asarray(local_q)
    pm.armature = P @ np.asarray(tree.armature)
    pm.gravity = pin.Motion(np.asarray(tree.gravity), np.zeros(3))
    return pm, P, lambda q: np.asarray(q)[q_index]


def pinocchio_kkt(lm, q, yd, tau, n_states=200):
    """Pinocchio's ``forwardDynamics(q, v, tau, K, -k)`` in a single-call loop over the first states, as
    `common.versus` takes a call, and its largest deviation from jaxmb's spanning accelerations; or (None, None)."""
    peer = pinocchio_tree(lm.tree)
    if peer is None:
        return None, None
    import pinocchio as pin

    pm, P, to_pin_q = peer

    @jax.jit
    def terms(q, yd, tau):
        qd = loops.spanning_velocity(lm, q, yd)
        qdd = loops.spanning_acceleration(lm, q, yd, loops.forward_dynamics(lm, q, yd, tau))
        return qd, _tau_span(lm, q, tau), loops.constraint_jacobian(lm, q), loops.constraint_bias(lm, q, qd), qdd

    n = min(n_states, q.shape[0])
    inputs = [jax.device_get(terms(q[i], yd[i], tau[i])) for i in range(n)]
    pin_args = [(to_pin_q(q[i]), P @ qd, P @ ts, K @ P.T, -k) for i, (qd, ts, K, k, _) in enumerate(inputs)]
    data = pm.createData()
    err = max(float(np.abs(P.T @ pin.forwardDynamics(pm, data, *a, 0.0) - inp[4]).max() /
                    max(1.0, np.abs(inp[4]).max())) for a, inp in zip(pin_args[:20], inputs))
    return (loop_call(lambda i: pin.forwardDynamics(pm, data, *pin_args[i], 0.0), n), (), n), err


def closed_polygon(L):
    """A planar chain of L unit links (revolute about z) whose tip is pinned to the ground: an (L+1)-gon with
    the ground as its last side, L - 2 degrees of freedom; and a closed configuration."""
    b = ModelBuilder(f"polygon-{L}", gravity=(0, -9.81, 0))
    for i in range(L):
        b.add_body(f"l{i}", None if i == 0 else f"l{i - 1}", joints.revolute((0, 0, 1)),
                   placement=(np.eye(3), (0, 0, 0) if i == 0 else (1.0, 0, 0)), mass=1.0, com=(0.5, 0, 0),
                   inertia=np.diag([1e-3, 0.08, 0.08]))
    tree = b.build()
    q = jnp.full(L, 2 * np.pi / (L + 1)).at[0].set(0.3)
    T = jaxmb.forward_kinematics(tree, q)
    tip = np.asarray(T.R[-1] @ jnp.array([1.0, 0, 0]) + T.p[-1])
    closure = loops.loop_closure(f"l{L - 1}", None, (np.eye(3), (1.0, 0, 0)), (np.eye(3), tip), kind="planar")
    return loops.close_loops(tree, [closure], q_reference=q), q


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="batch 256, fewer sizes")
    ap.add_argument("--tiny", action="store_true", help="batch 4, one case each: proves the script runs")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    batch = args.batch or (4 if args.tiny else 256 if args.quick else 1024)
    chain_sizes = [1] if args.tiny else [1, 2, 4, 8] if args.quick else [1, 2, 4, 6, 8, 10]
    loop_sizes = [4] if args.tiny else [4, 6, 8] if args.quick else [4, 6, 8, 12, 16]
    mech_names = list(MECHANISMS)[:1] if args.tiny else list(MECHANISMS)
    result = {"machine": machine(), "batch": batch, "dtype": "float64", "mechanisms": [], "chains": [],
              "loop_sizes": []}

    print(f"mechanisms, float64, batch {batch}: us/state (compile s)")
    for name in mech_names:
        lm = MECHANISMS[name](True)
        q, yd, tau = states(lm, mechanisms.reference_configuration(lm), batch)
        row = {"mechanism": name, "ny": lm.ny, "nv": lm.nv, "clusters": len(lm.loop_clusters)}
        kkt, row["pinocchio_max_deviation"] = pinocchio_kkt(lm, q, yd, tau)
        for method, make in METHODS.items():
            if method == "embedded" and kkt is not None:
                embedded, row["embedded_compile_s"] = compiled_method(make(lm), (q, yd, tau))
                t, t_peer, row["embedded_vs_pinocchio"] = versus(embedded, kkt)
                row["embedded"], row["pinocchio_kkt"] = 1e6 * t, 1e6 * t_peer
            else:
                row[method], row[method + "_compile_s"] = time_method(make(lm), (q, yd, tau))
        row["embedded_grad"], row["embedded_grad_over_forward"], row["embedded_grad_compile_s"] = time_gradient(
            METHODS["embedded"](lm), (q, yd, tau))
        approx = MECHANISMS[name](False)
        if approx is not None:
            y = jax.vmap(lambda x: loops.independent_configuration(lm, x))(q)
            row["armature"], row["armature_compile_s"] = time_method(
                lambda y, yd, tau: jaxmb.forward_dynamics(approx, y, yd, tau), (y, yd, tau))
            row["exact_over_armature"] = row["embedded"] / row["armature"]
        result["mechanisms"].append(row)
        extra = (f"  armature {row['armature']:7.2f} us (exact costs {row['exact_over_armature']:.2f}x)"
                 if "armature" in row else "")
        pin_txt = (f"  Pinocchio KKT loop {row['pinocchio_kkt']:6.2f} us (embedded {row['embedded_vs_pinocchio']:.2f}x "
                   f"its throughput; max rel. dev {row['pinocchio_max_deviation']:.1e})" if kkt else "")
        print(f"  {name:24s} ny={lm.ny:3d}  embedded {row['embedded']:7.2f} ({row['embedded_compile_s']:4.1f} s)  "
              f"its gradient {row['embedded_grad']:7.2f} ({row['embedded_grad_over_forward']:.2f}x, "
              f"{row['embedded_grad_compile_s']:4.1f} s)  projected {row['projected']:7.2f}  "
              f"lagrange {row['lagrange']:7.2f}{extra}{pin_txt}", flush=True)

    print("cost against the number of clusters (geared chains): us/state")
    for n in chain_sizes:
        lm = mechanisms.geared_pendulum_chain(n)
        q, yd, tau = states(lm, mechanisms.reference_configuration(lm), batch)
        row = {"clusters": n}
        for method, make in METHODS.items():
            row[method], row[method + "_compile_s"] = time_method(make(lm), (q, yd, tau))
        result["chains"].append(row)
        print(f"  {n:3d} clusters  embedded {row['embedded']:7.2f} ({row['embedded'] / n:5.2f} per cluster, "
              f"compile {row['embedded_compile_s']:4.1f} s)  projected {row['projected']:7.2f}  "
              f"lagrange {row['lagrange']:7.2f}", flush=True)

    print("cost against the loop size (one planar closed chain of L links): us/state")
    for L in loop_sizes:
        lm, q_ref = closed_polygon(L)
        q, yd, tau = states(lm, q_ref, batch)
        row = {"links": L, "ny": lm.ny}
        for method, make in METHODS.items():
            row[method], row[method + "_compile_s"] = time_method(make(lm), (q, yd, tau))
        result["loop_sizes"].append(row)
        print(f"  L={L:3d}  embedded {row['embedded']:7.2f}  projected {row['projected']:7.2f}  "
              f"lagrange {row['lagrange']:7.2f}", flush=True)

    if not args.no_save:
        path = save("loops", result)
        plot(result, path.with_suffix(".png"))
        print(f"wrote {path}")


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, x, label in ((axes[0], "chains", "clusters", "number of link+rotor clusters"),
                              (axes[1], "loop_sizes", "links", "links in the closed chain")):
        rows = result[key]
        for method in METHODS:
            ax.plot([r[x] for r in rows], [r[method] for r in rows], "o-", label=method)
        ax.set_xlabel(label)
        ax.set_ylabel("us / state")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"jaxmb loops, float64, batch {result['batch']}, {result['machine']['backend']} "
                 f"({result['machine']['cores']} cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
