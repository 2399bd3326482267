"""``python -m jaxmb``: a tour of the library on the shipped quadruped (`jaxmb.assets`).

Loads the 12-dof quadruped with a free base and prints the model; checks inverse against forward dynamics on
one random state; then compiles and times ``jit(vmap(forward_dynamics))`` and a reverse-mode gradient through it
over a batch of random states, and, with one JAX device per CPU core, the same batch split over them
(`jaxmb.sharded_vmap`). Last, the simulator (`jaxmb.sim`): a batch of worlds in which the quadruped, its feet the
URDF's collision spheres, drops onto a floor and stands under position servos, rolled out for half a second.
Everything runs in float32: the demo never switches ``jax_enable_x64`` on.

Options: ``--batch N`` (default 4096), ``--worlds W`` (default 256), ``--seed S`` (default 0).
"""

import argparse
import functools
import os
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb
from jaxmb import assets, sim

DTYPE = jnp.float32


@functools.partial(jax.jit, static_argnums=2)
def _random_states(model, key, n):
    """``n`` random states ``(q, qd, u)``: configurations within the joint limits, and standard-normal ``qd`` and
    ``u`` (used as ``qdd`` or as ``tau``), each (n, ...) in ``DTYPE``."""
    k_q, k_v, k_u = jax.random.split(key, 3)
    q = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(jax.random.split(k_q, n))
    return q, jax.random.normal(k_v, (n, model.nv), DTYPE), jax.random.normal(k_u, (n, model.nv), DTYPE)


def _compile(fn, *args):
    """``jaxmb.jit(fn)`` compiled for ``args``, and the seconds that tracing and compiling took."""
    t = time.perf_counter()
    compiled = jaxmb.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t


def _time(fn, *args, min_seconds=0.5, min_runs=3):
    """Median wall time of a compiled ``fn(*args)`` after one warm-up call, over ``min_runs`` runs or more."""
    jax.block_until_ready(fn(*args))
    times, start = [], time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - start < min_seconds:
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _wrap(label, items):
    return textwrap.fill(", ".join(items), 116, initial_indent=f"{label:8}", subsequent_indent=" " * 8)


def summary(model):
    levels = [str(lvl.stop - lvl.start) for lvl in model.topology.levels]
    frames = [n for n in model.frame_names if n not in model.body_names]
    print(f"model   {model.name!r}: {model.nb} bodies, nq = {model.nq}, nv = {model.nv}, depth {len(levels)} "
          f"(bodies per level {' + '.join(levels)}), total mass {float(jaxmb.total_mass(model)):.2f} kg")
    print(_wrap("bodies", model.body_names))
    kinds = {t: model.joint_types.count(t) for t in dict.fromkeys(model.joint_types)}
    print(_wrap("joints", model.joint_names))
    print(" " * 8 + f"{', '.join(f'{c} {t}' for t, c in kinds.items())}, in coordinate order (q and qd follow it)")
    print(" " * 8 + "free joint: q = [p_world, w, x, y, z], qd = [omega; v] in the body frame")
    print(_wrap("frames", frames) + " (fixed-joint links, merged into their bodies)")


@jax.jit
def _dynamics(model, q, qd, qdd):
    M = jaxmb.mass_matrix(model, q)
    C = jaxmb.bias_forces(model, q, qd)
    tau = jaxmb.inverse_dynamics(model, q, qd, qdd)
    return M, C, tau, jaxmb.forward_dynamics(model, q, qd, tau)


def one_state(model, q, qd, qdd):
    """Mass matrix, inverse and forward dynamics at one state; returns the round-trip error."""
    M, C, tau, qdd_fd = _dynamics(model, q, qd, qdd)
    eig = np.linalg.eigvalsh(np.asarray(M, np.float64))
    err = float(jnp.max(jnp.abs(qdd_fd - qdd)))
    print(f"\none random state, {jnp.dtype(DTYPE).name}")
    print(f"  mass matrix          M(q) {M.shape}: eigenvalues in [{eig[0]:.2e}, {eig[-1]:.2e}], "
          f"|M - M*|_max = {float(jnp.max(jnp.abs(M - M.T))):.1e},")
    print(f"                       free-base block M[3:6, 3:6] = {float(M[3, 3]):.3f} kg x identity (the total mass)")
    print(f"  inverse dynamics     tau = ID(q, qd, qdd): |tau|_max = {float(jnp.max(jnp.abs(tau))):.3g} "
          f"(|M qdd + C - tau|_max = {float(jnp.max(jnp.abs(jaxmb.spatial.mv(M, qdd) + C - tau))):.1e})")
    print(f"  forward dynamics     FD(q, qd, tau) for that tau: |qdd|_max = {float(jnp.max(jnp.abs(qdd_fd))):.3g}")
    print(f"  round trip           max |FD(q, qd, ID(q, qd, qdd)) - qdd| = {err:.2e}")
    return err


def batch(model, q, qd, tau):
    """Compile time and throughput of batched forward dynamics, and the relative cost of its gradient."""
    n = len(q)

    def fd_one(q, qd, tau):
        return jaxmb.forward_dynamics(model, q, qd, tau)

    fd = jax.vmap(fd_one)
    fd_c, fd_compile = _compile(fd, q, qd, tau)
    t_fd = _time(fd_c, q, qd, tau)

    def loss(q, qd, tau):
        return jnp.sum(jaxmb.forward_dynamics(model, q, qd, tau) ** 2)

    grad = jax.vmap(jax.grad(loss, argnums=(0, 2)))  # d |qdd|^2 / d(q, tau), per state
    grad_c, grad_compile = _compile(grad, q, qd, tau)
    t_grad = _time(grad_c, q, qd, tau)

    dev = jax.devices()[0]
    where = f"{dev.platform}, {os.cpu_count()} cores" if dev.platform == "cpu" else f"{dev.platform}, {dev.device_kind}"
    print(f"\nbatch of {n} random states, {jnp.dtype(DTYPE).name}, {where}")
    print(f"  jit(vmap(forward_dynamics))         compile {fd_compile:5.1f} s   {t_fd * 1e3:8.2f} ms per batch   "
          f"{n / t_fd:11,.0f} states/s")
    devices = len(jax.devices())
    if devices > 1:  # the batch split over the devices: on the CPU, one per core (jaxmb.use_cpu_cores)
        split = jaxmb.split_batch((q, qd, tau)) if n % devices == 0 else (q, qd, tau)
        sharded_c, sharded_compile = _compile(jaxmb.sharded_vmap(fd_one), *split)
        t_sharded = _time(sharded_c, *split)
        print(f"  {f'same, sharded_vmap on {devices} devices':36s}compile {sharded_compile:5.1f} s   "
              f"{t_sharded * 1e3:8.2f} ms per batch   {n / t_sharded:11,.0f} states/s")
    print(f"  jit(vmap(grad(|qdd|^2, (q, tau))))  compile {grad_compile:5.1f} s   {t_grad * 1e3:8.2f} ms per batch   "
          f"{t_grad / t_fd:11.1f}x forward")


def simulate(worlds, seed, dt=2e-3, steps=250):
    """``worlds`` quadrupeds dropped on the floor and standing under position servos: compile time, throughput, and
    the state after ``steps`` steps of ``dt`` (the base height, and world 0's contact forces against its weight)."""
    path = assets.path("quadruped.urdf")
    model = jaxmb.load_urdf(path, floating_base=True).cast(DTYPE)
    feet = sim.urdf_geometry(path, model)
    legs = model.joint_names[1:]  # joint 0 is the free joint
    scene = sim.make_scene(model, [sim.plane(name="floor")] + feet, pairs_include=[("floor", g.name) for g in feet],
                           actuators=[sim.position(j, kp=60.0, kv=2.0, force_limit=25.0) for j in legs])
    q0 = assets.quadruped_standing()  # the trunk 0.35 m up, the feet 2.4 cm above the floor
    pose = q0[7:]  # the leg joints' angles, the servos' targets
    noise = np.random.default_rng(seed).uniform(-0.02, 0.02, (worlds, len(legs)))
    states = jax.vmap(lambda q: sim.init_state(scene, q))(jnp.asarray(np.c_[np.tile(q0[:7], (worlds, 1)),
                                                                                  pose + noise], DTYPE))
    ctrls = jnp.tile(jnp.asarray(pose, DTYPE), (steps, 1))
    roll, compile_s = _compile(jax.vmap(lambda s: sim.rollout(scene, s, dt, ctrls=ctrls)[0]), states)
    t = _time(roll, states, min_runs=1, min_seconds=0.0)
    final = roll(states)
    z = 1e3 * np.asarray(final.q[:, 2])
    F = np.asarray(sim.contact_forces(jax.tree.map(lambda x: x[0], final)))
    weight = 9.81 * float(jnp.sum(model.mass))
    print(f"\nsimulation (jaxmb.sim): {worlds} worlds, {steps} steps of {1e3 * dt:.0f} ms, {jnp.dtype(DTYPE).name}")
    print(f"  the quadruped dropped onto the floor on its {len(feet)} foot spheres, servos holding the standing pose")
    print(f"  jit(vmap(rollout))                  compile {compile_s:5.1f} s   {t * 1e3:8.2f} ms per rollout "
          f"{worlds * steps / t:11,.0f} steps/s")
    print(f"  {f'after {steps * dt:.1f} s':36s}base height {z.min():.1f} to {z.max():.1f} mm; "
          f"stopped worlds {int(np.sum(np.asarray(final.diverged) != 0))}")
    print(f"  {'contact forces':36s}world 0's feet carry {F[:, 2].sum():.1f} N vertically, "
          f"{F[:, 2].sum() / weight:.3f} x its weight")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m jaxmb", description="jaxmb demo on the shipped quadruped")
    parser.add_argument("--batch", type=int, default=4096, help="number of random states in the batch (4096)")
    parser.add_argument("--worlds", type=int, default=256, help="number of simulated worlds (256)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    args = parser.parse_args(argv)
    if args.batch < 1 or args.worlds < 1:
        parser.error("--batch and --worlds must be at least 1")

    start = time.perf_counter()
    model = assets.quadruped(floating_base=True).cast(DTYPE)
    print(f"jaxmb {jaxmb.__version__} (jax {jax.__version__}): jaxmb.assets.quadruped(), free base\n")
    summary(model)
    q, qd, u = _random_states(model, jax.random.PRNGKey(args.seed), args.batch)
    one_state(model, q[0], qd[0], u[0])
    batch(model, q, qd, u)
    simulate(args.worlds, args.seed)
    print(f"\ndone in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    jaxmb.use_cpu_cores()  # one JAX device per core, for the sharded batch (before JAX's first operation)
    sys.exit(main())
