"""System identification: the regressor against Pinocchio's, the Panda's identification, a fit through the simulator.

    python benchmarks/sysid.py            # batch 4096; 60 s of Panda data at 200 Hz; 300 excitation steps
    python benchmarks/sysid.py --quick    # batch 1024; 20 s of data; 100 excitation steps
    python benchmarks/sysid.py --tiny     # batch 4; 2 s of data; 2 steps; single shooting only (proves it runs)

1. Throughput (states per second) of `jaxmb.sysid.regressor` on panda and talos (free base), ``jit(vmap)`` over a
   batch, float64, one device, against Pinocchio's ``computeJointTorqueRegressor`` in a Python loop over the same
   states (Pinocchio has no parallel regressor), with the compile time of jaxmb's program.
2. The Panda identified from joint forces with 1 % noise: the excitation optimized (optax), the regressor of the
   whole recording, the weighted least-squares fit of the base parameters, the physical fit; the time of each,
   the base parameters' error and the held-out prediction error against the noise.
3. A pushed box's friction and mass fitted through `jaxmb.sim` by single and multiple shooting: time and error.
   ``mujoco.sysid`` is not part of the installed MuJoCo, so no row compares with it.

Writes ``benchmarks/results/sysid-<backend>-<cores>core.json``.
"""

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

import jaxmb  # noqa: E402
from common import best_time, compile_time, load, machine, robot_path, save  # noqa: E402
from jaxmb import joints, sysid  # noqa: E402
from jaxmb.io.pinocchio import PinocchioMap  # noqa: E402
from jaxmb.sim import box, make_scene, plane  # noqa: E402
from jaxmb.sysid import excitation  # noqa: E402


def regressor_rows(batch):
    rows = []
    for name, floating in (("panda", False), ("talos_full_v2", True)):
        model = load(name, floating, jnp.float64)
        pm = pin.buildModelFromUrdf(robot_path(name), *([pin.JointModelFreeFlyer()] if floating else []))
        pmap = PinocchioMap(model, pm)
        keys = jax.random.split(jax.random.PRNGKey(0), batch)
        q, qd, qdd = jax.vmap(jaxmb.testing.random_state, in_axes=(None, 0))(model, keys)
        f = jaxmb.jit(jax.vmap(sysid.regressor, in_axes=(None, 0, 0, 0)))
        seconds, compiled = compile_time(f, model, q, qd, qdd)
        t = best_time(compiled, model, q, qd, qdd)
        data = pm.createData()
        qp, vp, ap = pmap.q_to_pin(np.asarray(q)), pmap.v_to_pin(np.asarray(qd)), pmap.v_to_pin(np.asarray(qdd))
        n_pin = min(batch, 512)
        t0 = time.perf_counter()
        for i in range(n_pin):
            pin.computeJointTorqueRegressor(pm, data, qp[i], vp[i], ap[i])
        t_pin = (time.perf_counter() - t0) / n_pin * batch
        rows.append(dict(robot=name, nv=model.nv, batch=batch, jaxmb_states_per_s=batch / t,
                         pinocchio_loop_states_per_s=batch / t_pin, ratio=t_pin / t, compile_s=seconds))
        print(rows[-1], flush=True)
    return rows


def panda_identification(duration, steps):
    model = load("panda", False, jnp.float64)
    out = {}
    t0 = time.perf_counter()
    W = jax.jit(sysid.stacked_regressor, static_argnums=(0, 3))(sysid.regressor, model, jax.random.PRNGKey(0), 40)
    base = sysid.base_parameters(W)
    out["base_parameters_s"], out["n_base"] = time.perf_counter() - t0, base.n_base
    lo, hi = np.asarray(model.q_lower), np.asarray(model.q_upper)
    amplitude = np.r_[np.full(7, 0.3), np.full(2, 0.001)]
    start = excitation.random_series(jax.random.PRNGKey(2), (lo + hi) / 2, 5, scale=1.0)
    start = start._replace(a=start.a * amplitude[:, None], b=start.b * amplitude[:, None])
    omega = 2 * np.pi / 5

    def reg(q, qd, qdd):
        return base.columns(sysid.regressor(model, q, qd, qdd))

    margin = 0.05 * (hi - lo)
    t0 = time.perf_counter()
    series, costs = jax.jit(excitation.optimize, static_argnums=(2, 3, 7))(
        start, omega, reg, 50, lo + margin, hi - margin, jnp.full(9, 2.5), steps, 1e-2)
    out["excitation_s"] = time.perf_counter() - t0
    out["log_condition_start"], out["log_condition_optimized"] = float(costs[0]), float(costs[-1])
    t, q, qd, qdd = excitation.sample(series, omega, duration, 200.0)
    t0 = time.perf_counter()
    Y = jax.block_until_ready(jax.jit(jax.vmap(sysid.regressor, in_axes=(None, 0, 0, 0)))(model, q, qd, qdd))
    out["regressor_s"], out["samples"] = time.perf_counter() - t0, len(t)
    tau = Y @ sysid.parameters(model)
    sigma = 0.01 * jnp.sqrt(jnp.mean(tau * tau, 0))
    measured = tau + sigma * jax.random.normal(jax.random.PRNGKey(3), tau.shape)
    n_fit = int(0.8 * len(t))
    Wb, y = base.columns(Y[:n_fit]).reshape(-1, base.n_base), measured[:n_fit].reshape(-1)
    t0 = time.perf_counter()
    weights = jax.jit(sysid.joint_weights, static_argnums=(2,))(Wb, y, model.nv)
    fit = jax.block_until_ready(jax.jit(sysid.least_squares)(Wb, y, weights))
    out["least_squares_s"] = time.perf_counter() - t0
    beta = base.to_base(sysid.parameters(model))
    out["base_error_norm_relative"] = float(jnp.linalg.norm(fit.theta - beta) / jnp.linalg.norm(beta))
    out["base_error_max_sigmas"] = float(jnp.max(jnp.abs(fit.theta - beta) / fit.std))
    noise = jnp.sqrt(jnp.mean((measured[n_fit:] - tau[n_fit:]) ** 2, 0))
    rms = jnp.sqrt(jnp.mean((base.columns(Y[n_fit:]) @ fit.theta - measured[n_fit:]) ** 2, 0))
    out["held_out_rms_over_noise_max"] = float(jnp.max(rms / noise))
    t0 = time.perf_counter()
    physical = jax.block_until_ready(jax.jit(sysid.physical_fit, static_argnums=(3,))(
        Y[:n_fit].reshape(-1, Y.shape[-1]), y, sysid.parameters(model) * 1.2, model.nb, weights))
    out["physical_fit_s"], out["physical_iterations"] = time.perf_counter() - t0, int(physical.iterations)
    out["physical_min_margin"] = float(jnp.min(sysid.physical_margin(physical.pi.reshape(model.nb, 10))))
    rms = jnp.sqrt(jnp.mean((Y[n_fit:] @ physical.pi - measured[n_fit:]) ** 2, 0))
    out["physical_held_out_rms_over_noise_max"] = float(jnp.max(rms / noise))
    print(out, flush=True)
    return out


def box_fit(steps, multiple=True):
    half, dt, true = (0.1, 0.08, 0.05), 2e-3, np.array([0.5, 1.3])
    b = jaxmb.ModelBuilder("box")
    b.add_body("body", None, joints.free(), mass=1.0, inertia=np.diag([0.003, 0.004, 0.005]))
    scene = make_scene(b.build(), [plane(name="floor", friction=0.3), box("body", half, friction=0.3)],
                       contact="compliant", integrator="euler", stiffness=1e5, dissipation=1.0, slip_velocity=0.05)

    def set_parameters(scene, theta):
        mu, m = jnp.exp(theta)
        return scene.replace(model=scene.model.replace(mass=jnp.array([m])),
                             geometry=scene.geometry.replace(friction=jnp.full(2, mu)))

    t = jnp.arange(steps) * dt
    qfrcs = jnp.zeros((steps, 6)).at[:, 3].set(8.0 * (1 + jnp.sin(2 * np.pi * 4 * t)))
    start = jnp.array([0, 0, half[2] - (true[1] * 9.81 / 4 / 1e5) ** (2 / 3), 1, 0, 0, 0, 0, 0, 0, 1.0, 0, 0])
    exact = jax.jit(sysid.simulate, static_argnums=(3,))(set_parameters(scene, jnp.log(true)), start, dt, steps, qfrcs)
    measured = exact + 1e-5 * jax.random.normal(jax.random.PRNGKey(0), exact.shape)
    rows = []
    methods = [("single", lambda th: sysid.fit_single_shooting(set_parameters, th, scene, start, measured, dt,
                                                                qfrcs=qfrcs))]
    if multiple:
        methods.append(("multiple_3", lambda th: sysid.fit_multiple_shooting(set_parameters, th, scene, start,
                                                                             measured, dt, 3, qfrcs=qfrcs)))
    for method, fn in methods:
        f = jax.jit(fn)
        theta0 = jnp.log(jnp.array([0.3, 1.0]))
        seconds, compiled = compile_time(f, theta0)
        t0 = time.perf_counter()
        fit = jax.block_until_ready(compiled(theta0))
        rows.append(dict(method=method, steps=steps, compile_s=seconds, fit_s=time.perf_counter() - t0,
                         iterations=int(fit.iterations),
                         relative_error=(np.exp(np.asarray(fit.theta)) / true - 1).tolist()))
        print(rows[-1], flush=True)
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--tiny", action="store_true")
    a = p.parse_args()
    batch, duration, steps, box_steps = (4, 2.0, 2, 30) if a.tiny else (1024, 20.0, 100, 120) if a.quick else \
        (4096, 60.0, 300, 300)
    payload = dict(machine=machine(), regressor=regressor_rows(batch),
                   panda_identification=panda_identification(duration, steps),
                   box_fit=box_fit(box_steps, multiple=not a.tiny),
                   mujoco_sysid="not measured: mujoco.sysid is not part of the installed MuJoCo")
    print(save("sysid", payload))


if __name__ == "__main__":
    main()
