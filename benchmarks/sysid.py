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
4. Against ``mujoco.sysid`` (``pip install "mujoco[sysid]"``) on one problem: the five armatures of a five-link
   arm (`ARM`, an MJCF file: implicitfast, joint damping, no contact) from a recording of MuJoCo's own rollout under
   sinusoidal motor torques, from half the file's armatures. jaxmb's scene of the same file is first checked
   against the recording (its largest state difference), then each tool fits: jaxmb by Levenberg-Marquardt on the
   exact Jacobian (`jaxmb.sysid.fit_single_shooting`, one compiled program, its compile time apart),
   ``mujoco.sysid`` by its box-bounded Levenberg-Marquardt on finite differences of threaded ``mujoco.rollout``
   calls; then a batch of fits of recordings with armatures drawn 30 % about the file's, from the same start: one
   ``jax.vmap`` against ``mujoco.sysid`` one after another. Each row gives the wall time, the iterations (residual
   calls for ``mujoco.sysid``) and the largest relative error of the armatures.

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
from jaxmb.sim import box, load_mjcf_scene, make_scene, plane  # noqa: E402
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


ARM = """
<mujoco model="arm5">
  <option integrator="implicitfast" timestep="0.002"><flag contact="disable"/></option>
  <default><joint type="hinge"/></default>
  <worldbody>
    <body name="l1" pos="0 0 0.1">
      <inertial pos="0 0 0.06" mass="1.2" diaginertia="0.012 0.011 0.004"/>
      <joint name="j1" axis="0 0 1" armature="0.45" damping="0.9"/>
      <body name="l2" pos="0 0 0.12">
        <inertial pos="0 0 0.05" mass="0.9" diaginertia="0.009 0.008 0.003"/>
        <joint name="j2" axis="0 1 0" armature="0.35" damping="0.7"/>
        <body name="l3" pos="0 0 0.1">
          <inertial pos="0.01 0 0.05" mass="0.7" diaginertia="0.006 0.006 0.002"/>
          <joint name="j3" axis="0 1 0" armature="0.25" damping="0.5"/>
          <body name="l4" pos="0 0 0.1">
            <inertial pos="0 0 0.04" mass="0.45" diaginertia="0.004 0.004 0.002"/>
            <joint name="j4" axis="0 0 1" armature="0.15" damping="0.3"/>
            <body name="l5" pos="0 0 0.08">
              <inertial pos="0 0.01 0.03" mass="0.25" diaginertia="0.002 0.002 0.001"/>
              <joint name="j5" axis="1 0 0" armature="0.08" damping="0.2"/>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="j1"/><motor joint="j2"/><motor joint="j3"/><motor joint="j4"/><motor joint="j5"/>
  </actuator>
  <sensor>
    <jointpos name="q1" joint="j1"/><jointpos name="q2" joint="j2"/><jointpos name="q3" joint="j3"/>
    <jointpos name="q4" joint="j4"/><jointpos name="q5" joint="j5"/>
    <jointvel name="qd1" joint="j1"/><jointvel name="qd2" joint="j2"/><jointvel name="qd3" joint="j3"/>
    <jointvel name="qd4" joint="j4"/><jointvel name="qd5" joint="j5"/>
  </sensor>
</mujoco>
"""
ARM_JOINTS = ("j1", "j2", "j3", "j4", "j5")


def arm_torques(duration, dt):
    """Sinusoidal motor torques (steps, 5): one frequency and phase per motor."""
    t = np.arange(int(round(duration / dt))) * dt
    amplitude, hertz, phase = np.array([5.0, 4.0, 3.0, 2.0, 1.0]), np.array([0.5, 0.7, 0.4, 0.9, 0.6]), np.arange(5) / 2
    return t, amplitude * np.sin(2 * np.pi * hertz * t[:, None] + phase)


def mujoco_recording(armature, ctrl):
    """MuJoCo's rollout of `ARM` with ``armature`` (5,) from rest: the spec, the initial state, the states
    ``[q, qd]`` after each step (steps - 1, 10) and the sensors (steps - 1, 10), read before each step."""
    import mujoco
    from mujoco import rollout, sysid as mjsysid

    spec = mujoco.MjSpec.from_string(ARM)
    for name, a in zip(ARM_JOINTS, armature):
        spec.joint(name).armature = float(a)
    m = spec.compile()
    d = mujoco.MjData(m)
    initial = mjsysid.create_initial_state(m, d.qpos, d.qvel, d.act)
    state, sensor = rollout.rollout(m, d, initial, ctrl[:-1])
    state = np.squeeze(state, 0)
    return spec, m, initial, state[:, 0], state[:, 1:1 + m.nq + m.nv], np.squeeze(sensor, 0)


def mujoco_sysid_fit(recording, armature, t, ctrl, start):
    """``mujoco.sysid``'s fit of the five armatures to MuJoCo's ``recording`` (`mujoco_recording`) with
    ``armature``, from ``start`` (5,):
    (armatures found, seconds, iterations, residual calls). Its solver's iterations are the entries of the log
    that its verbose mode keeps (``extras["objective"]``)."""
    from mujoco import sysid as mjsysid

    spec, m, initial, times, _, sensor = recording
    params = mjsysid.ParameterDict()
    for name, a, a0 in zip(ARM_JOINTS, armature, start):
        params.add(mjsysid.Parameter(f"{name}_armature", nominal=float(a), min_value=0.001, max_value=2.0,
                                     modifier=lambda s, p, n=name: setattr(s.joint(n), "armature", p.value[0])))
        params[f"{name}_armature"].value[:] = a0
    sequences = mjsysid.ModelSequences("arm5", spec, "sinusoidal", initial, mjsysid.TimeSeries(t, ctrl),
                                       mjsysid.TimeSeries.from_names(times, sensor, m))
    residual = mjsysid.build_residual_fn(models_sequences=[sequences])
    calls = [0]

    def counted(x, p):
        calls[0] += 1
        return residual(x, p)

    t0 = time.perf_counter()
    found, result = mjsysid.optimize(initial_params=params, residual_fn=counted, optimizer="mujoco", verbose=False)
    seconds = time.perf_counter() - t0
    return (np.array([found[f"{n}_armature"].value[0] for n in ARM_JOINTS]), seconds,
            len(result.extras["objective"]), calls[0])


def mujoco_sysid_rows(duration, batch):
    """Section 4 of the module docstring; None where ``mujoco.sysid`` is not installed."""
    try:
        from mujoco import sysid as mjsysid
    except ImportError:
        mjsysid = None
    if mjsysid is None or not hasattr(mjsysid, "optimize"):
        print("mujoco.sysid: not installed (pip install \"mujoco[sysid]\"); no comparison", flush=True)
        return None
    loaded = load_mjcf_scene(ARM)
    scene, dt = loaded.scene, loaded.dt
    t, ctrl = arm_torques(duration, dt)
    nominal = np.asarray(scene.model.armature)
    guess = 0.5 * nominal
    start = jnp.zeros(scene.model.nq + scene.model.nv)
    ctrls = jnp.asarray(ctrl[:-1])

    def set_parameters(scene, theta):  # the armatures themselves: a log-parameter flattens where one tends to 0
        return scene.replace(model=scene.model.replace(armature=theta))

    def fit(measured):
        return sysid.fit_single_shooting(set_parameters, jnp.asarray(guess), scene, start, measured, dt, ctrls=ctrls)

    recording = mujoco_recording(nominal, ctrl)
    states = recording[4]
    following = float(np.max(np.abs(np.asarray(jax.jit(sysid.simulate, static_argnums=(3,))(
        scene, start, dt, len(ctrls), None, None, ctrls)) - states)))
    one = {"steps": len(ctrls), "jaxmb_follows_mujoco_max_abs": following}
    seconds, compiled = compile_time(jax.jit(fit), jnp.asarray(states))
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(jnp.asarray(states)))
    one.update(jaxmb_compile_s=seconds, jaxmb_s=time.perf_counter() - t0, jaxmb_iterations=int(out.iterations),
               jaxmb_max_relative_error=float(np.max(np.abs(np.asarray(out.theta) / nominal - 1))))
    found, peer_s, iterations, calls = mujoco_sysid_fit(recording, nominal, t, ctrl, guess)
    one.update(mujoco_sysid_s=peer_s, mujoco_sysid_iterations=iterations, mujoco_sysid_residual_calls=calls,
               mujoco_sysid_max_relative_error=float(np.max(np.abs(found / nominal - 1))),
               ratio=peer_s / one["jaxmb_s"])
    print("one fit:", one, flush=True)

    truths = nominal * np.random.default_rng(0).uniform(0.7, 1.3, (batch, 5))
    recorded = [mujoco_recording(a, ctrl) for a in truths]
    recordings = jnp.asarray(np.stack([r[4] for r in recorded]))
    seconds, compiled = compile_time(jax.jit(jax.vmap(fit)), recordings)
    t0 = time.perf_counter()
    outs = jax.block_until_ready(compiled(recordings))
    many = {"batch": batch, "jaxmb_compile_s": seconds, "jaxmb_s": time.perf_counter() - t0,
            "jaxmb_max_relative_error": float(np.max(np.abs(np.asarray(outs.theta) / truths - 1)))}
    peer = [mujoco_sysid_fit(r, a, t, ctrl, guess) for r, a in zip(recorded, truths)]
    errors = [np.max(np.abs(found / a - 1)) for (found, *_), a in zip(peer, truths)]
    many.update(mujoco_sysid_s=sum(p[1] for p in peer), mujoco_sysid_max_relative_error=float(max(errors)))
    many["ratio"] = many["mujoco_sysid_s"] / many["jaxmb_s"]
    print(f"{batch} fits:", many, flush=True)
    return {"duration_s": duration, "one": one, "batch": many}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--tiny", action="store_true")
    a = p.parse_args()
    batch, duration, steps, box_steps = (4, 2.0, 2, 30) if a.tiny else (1024, 20.0, 100, 120) if a.quick else \
        (4096, 60.0, 300, 300)
    arm_duration, arm_batch = (0.2, 2) if a.tiny else (2.0, 8) if a.quick else (2.0, 32)
    payload = dict(machine=machine(), regressor=regressor_rows(batch),
                   panda_identification=panda_identification(duration, steps),
                   box_fit=box_fit(box_steps, multiple=not a.tiny),
                   mujoco_sysid=mujoco_sysid_rows(arm_duration, arm_batch))
    print(save("sysid", payload))


if __name__ == "__main__":
    main()
