"""The simulator (`jaxmb.sim`) against MJX `step` and MuJoCo C (`mujoco.rollout`) on the same models, in the same run.

    python benchmarks/sim.py --quick     # panda, quadruped standing and trotting, the humanoid; batches 1 and 32
                                         # (32 and 256 over one CPU device per core)
    python benchmarks/sim.py             # the same at batches 1, 16, 256, 1024
    python benchmarks/sim.py --tiny      # the panda at batch 2 and the box's solver study, no reverse mode (tests)
    python benchmarks/sim.py --gpu       # on a GPU: the quadruped and the panda at batches 8192 and 65536
    python benchmarks/sim.py --gpu --solver newton   # the steps/s rows with the Newton solver (default: pgs)

Scenarios, each a floating or fixed base under gravity with MuJoCo-style ``position`` servos (``kp``, ``kv``, a
force limit) on every actuated joint and the URDF's joint limits enforced on both sides. MuJoCo's solver takes the
limits it finds active; jaxmb's takes a fixed number of limit rows a step, those nearest to crossing
(``make_scene(limit_rows=...)``): two on the Panda, four on the quadruped, eight on the humanoid.

* ``panda``: example-robot-data's Panda (fixed base, 9 joints, the fingers' ``<mimic>`` dropped on both sides), no
  geometry; from a pose 0.3 rad off its targets (the ready pose).
* ``quadruped_stand``: the shipped 12-dof quadruped (`jaxmb.assets`), its four foot spheres (the URDF's
  ``<collision>``, `jaxmb.sim.urdf_geometry`) against a floor plane, the servos holding the bent standing pose
  (hip flexion 0.7, knee -1.4, base 0.35 m up: the feet start 2.4 cm above the floor and land).
* ``quadruped_trot``: the same with targets ``pose + 0.3 sin(2 pi 2 t + phi)`` on the hip flexion and knee
  joints, diagonal legs in phase (FL with RR, FR with RL, the pairs half a period apart).
* ``talos``: example-robot-data's ``talos_reduced`` (free base, 32 joints), a box (0.2 x 0.13 x
  0.02 m) under each sole frame and a sphere (r 0.05 m) on each wrist (``arm_*_7_link``), each against the floor,
  servos on every joint holding the half-sitting pose of talos.srdf; the implicit-in-velocity step (MuJoCo's
  ``implicitfast`` on both sides): the wrist servos are too stiff for the explicit one. The
  hands stay in the air: their slots are computed and solved every step but carry no force (no side skips an
  inactive slot's work).

Both simulators get the same model: MuJoCo's compiler loads the same URDF text (visual and collision elements
stripped, ``fusestatic`` off so that foot and sole frames are bodies, the URDF's damping and friction zeroed), and
`mujoco.MjSpec` adds a free joint (floating bases), a floor plane, the same geoms on the same bodies (colliding with
the floor only, by ``contype``/``conaffinity``, as jaxmb's ``pairs_include``), the same ``position`` actuators and
force limits. Same time step (2 ms), same integrator, the same friction (1) and, with contacts, elliptic cones
(jaxmb's friction is the disk). Both solvers stop at their default tolerance or at 30 iterations: jaxmb's projected
Gauss-Seidel sweeps once a sweep changes no impulse by more than 1e-10 of the largest (or float32's round-off),
MuJoCo's default Newton solver at its own tolerance (``opt.iterations`` 30); both batched loops run until every
world of the batch has stopped. Float32 on both JAX sides
(MJX's precision); MuJoCo C in float64.

Measured:

* steps/s = batch x steps / time of one call that rolls ``--steps`` (100) steps of the whole batch from a batch of
  initial states (the pose plus uniform +-0.02 rad on the actuated joints, world by world, the same on every
  side): jaxmb ``jaxmb.jit(jax.vmap(rollout))`` (``lax.scan``, final state only; `jaxmb.jit` is ``jax.jit`` with
  jaxmb's CPU compiler options); MJX ``jax.jit(jax.vmap(scan of mjx.step))``; MuJoCo C ``mujoco.rollout`` on all
  the machine's cores (one ``MjData`` per thread; it also returns every step's state). The three timed in
  alternating rounds (`common.alternating_best_times`); compile times of both JAX calls (trace, lower, compile).
  Ratios: jaxmb's steps/s over the peer's (above 1: jaxmb is faster). A sanity figure per side: the mean base
  height (or the mean of the first joint, fixed base) after the rollout.
* sharded (CPU, several cores): the same rollouts with the batch split over one CPU device per core
  (`jaxmb.use_cpu_cores`, ``jaxmb.jit(jaxmb.sharded_vmap(rollout))``, the states placed by `jaxmb.split_batch`), so
  that jaxmb uses every core as ``mujoco.rollout``'s threads do, against MuJoCo C in the same run, at the batches
  that divide evenly (``--quick``: 32, and 256, a reinforcement-learning batch, where each XLA operation of the
  solver's sweeps covers more worlds), with each of jaxmb's two constraint solvers. Measured in a child process:
  MJX's CPU programs stall in a process with several CPU devices.
* solvers: at the largest batch, steps/s with the projected Gauss-Seidel solver (the scenario's ``limit_rows``)
  and with ``solver="newton"`` (every limit row; its own default regularization) on elliptic cones (the default,
  as MuJoCo's model here) and on pyramids (``cone="pyramidal"``), timed in alternating rounds with MuJoCo C.
* gradient: ``jax.grad`` of ``sum(q_final^2) + sum(qd_final^2)`` with respect to the (batch, steps, nu) controls
  through a ``--grad-steps`` (100) step rollout, at batch ``--grad-batch``, over the forward rollout's time (MJX's
  solver loop is a ``while_loop``, which JAX cannot differentiate in reverse: no peer).
* memory: the scratch memory XLA plans for reverse mode through ``--memory-steps`` (1000) steps of one world
  (``jax.jit(grad).lower(...).compile().memory_analysis().temp_size_in_bytes``), with ``rollout(checkpoint=True)``
  (each step recomputed in the backward pass) and ``checkpoint=False``.
* solver: the projected Gauss-Seidel iteration count. One step from a fixed mid-trajectory state (the quadruped
  standing after 0.5 s; a 2 kg box sliding at 2 m/s on the floor, 0.1 s into its slide, dt 1 ms) with
  ``make_scene(..., iterations=k, tolerance=0)`` (exactly k sweeps), k = 5, 10, 20, 30, 50, from a zero warm start and from the previous step's
  impulses (the state's); the error is ``|f_k - f_ref| / |f_ref|`` of the contact forces (all slots, normal and
  tangential, in their frames), ``f_ref`` after 500 sweeps from zero, and the same of their sum in world axes (the
  net contact force: the box's four corners are redundant, their split is not unique, the net force is). Float64.

Writes ``benchmarks/results/sim-<backend>-<cores>core.json`` and a plot ``.png`` (steps/s against batch). Needs
``mujoco`` and ``mujoco-mjx`` (without them: jaxmb alone) and example-robot-data. ``--tiny`` leaves MJX out (its
compile alone takes 20-40 s here). ``--gpu`` measures throughput at the batches a GPU is for, MuJoCo C (on the
host's cores) only up to batch 8192, and the gradient at batch 1024; it leaves out the reverse-mode memory and the
solver study (float64, the same on any backend).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb
from jaxmb import joints
from common import alternating_best_times, compile_time, machine, robot_path, save, temp_bytes
from jaxmb.sim import box, contact_forces, init_state, make_scene, plane, position, rollout, sphere, step, urdf_geometry

DT = 2e-3
ITERATIONS = 30
NOISE = 0.02  # rad, uniform, on the actuated joints of each world's initial state


# -- scenarios ----------------------------------------------------------------------------------------------------


def _urdf_text(path):
    """The URDF text with ``<visual>``, ``<collision>`` and ``<mimic>`` elements stripped (no meshes needed; the
    fingers' coupling enforced on neither side)."""
    text = open(path).read()
    return re.sub(r"<visual\b.*?</visual>|<collision\b.*?</collision>|<mimic\b[^>]*/>", "", text, flags=re.S)


def _joint_targets(model, values):
    """``(joint names, targets)`` of every joint but a floating root, the targets from ``values`` (by name, else 0)."""
    names = [n for n in model.joint_names if n != "root"] if model.joint_names[0] == "root" else list(
        model.joint_names)
    return names, np.array([values.get(n, 0.0) for n in names])


def scenario(name):
    """The scenario ``name`` (module docstring) as a dict: ``text`` (URDF), ``floating``, ``geoms``, ``joints``
    (actuated, in actuator order), ``kp``, ``kv``, ``force_limit``, ``pose`` ((nu,) targets and joint angles of
    the initial state), ``base`` (the base position and quaternion, w first, or None), ``integrator``, and
    ``ctrls(steps) -> (steps, nu)``."""
    if name == "panda":
        text = _urdf_text(robot_path("panda"))
        ready = {"panda_joint2": -0.785, "panda_joint4": -2.356, "panda_joint6": 1.571, "panda_joint7": 0.785,
                 "panda_finger_joint1": 0.02, "panda_finger_joint2": 0.02}
        model = jaxmb.load_urdf_string(text)
        joints, pose = _joint_targets(model, ready)
        start = pose + np.where(np.char.startswith(np.array(joints), "panda_finger"), 0.0, 0.3)
        return dict(text=text, floating=False, geoms=[], joints=joints, kp=100.0, kv=5.0, force_limit=87.0,
                    limit_rows=2, pose=pose, start=start, base=None, integrator="euler",
                    ctrls=lambda steps: np.tile(pose, (steps, 1)))
    if name.startswith("quadruped"):
        path = jaxmb.assets.path("quadruped.urdf")
        text = _urdf_text(path)
        model = jaxmb.load_urdf(path, floating_base=True)
        standing = jaxmb.assets.quadruped_standing()  # the base, then the legs in the model's joint order
        joints, pose = list(model.joint_names[1:]), standing[7:]
        geoms = urdf_geometry(path, model)

        def ctrls(steps):
            out = np.tile(pose, (steps, 1))
            if name == "quadruped_trot":
                t = DT * np.arange(1, steps + 1)
                for i, joint in enumerate(joints):
                    leg, kind = joint.split("_", 1)
                    if kind in ("hip_flexion", "knee"):
                        phase = 0.0 if leg in ("FL", "RR") else np.pi
                        out[:, i] += 0.3 * np.sin(2 * np.pi * 2.0 * t + phase)
            return out

        return dict(text=text, floating=True, geoms=geoms, joints=joints, kp=60.0, kv=2.0, force_limit=25.0,
                    limit_rows=4, pose=pose, start=pose, base=standing[:7], integrator="euler",
                    ctrls=ctrls)
    if name == "talos":
        path = robot_path("talos_full_v2").replace("talos_full_v2.urdf", "talos_reduced.urdf")
        text = _urdf_text(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = jaxmb.load_urdf_string(text, floating_base=True)
        half_sitting = {"arm_left_1_joint": 0.25847, "arm_left_2_joint": 0.173046, "arm_left_3_joint": -0.0002,
                        "arm_left_4_joint": -0.525366, "arm_left_7_joint": 0.1, "arm_right_1_joint": -0.25847,
                        "arm_right_2_joint": -0.173046, "arm_right_3_joint": 0.0002, "arm_right_4_joint": -0.525366,
                        "arm_right_7_joint": 0.1, "torso_2_joint": 0.006761}
        for side in ("left", "right"):
            half_sitting.update({f"leg_{side}_3_joint": -0.411354, f"leg_{side}_4_joint": 0.859395,
                                 f"leg_{side}_5_joint": -0.448041, f"leg_{side}_6_joint": -0.001708})
        joints, pose = _joint_targets(model, half_sitting)
        geoms = [box(f"{side}_sole_link", (0.1, 0.065, 0.01), (0.0, 0.0, 0.01), name=f"{side}_foot")
                 for side in ("left", "right")]
        geoms += [sphere(f"arm_{side}_7_link", 0.05, name=f"{side}_hand") for side in ("left", "right")]
        return dict(text=text, floating=True, geoms=geoms, joints=joints, kp=300.0, kv=10.0, force_limit=None,
                    limit_rows=8, pose=pose, start=pose, base=np.array([0, 0, 1.02, 1, 0, 0, 0.0]),
                    integrator="implicitfast", ctrls=lambda steps: np.tile(pose, (steps, 1)))
    raise ValueError(f"unknown scenario {name!r}")


def jaxmb_scene(sc, dtype, iterations=ITERATIONS, integrator=None, **options):
    """``(scene, q0)``: the jaxmb scene of a scenario and its initial configuration, in ``dtype``; a floating base's
    height is set so that the lowest geom starts 1 mm above the floor (kept where it is already higher)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = jaxmb.load_urdf_string(sc["text"], floating_base=sc["floating"]).cast(dtype)
    geoms = [plane(name="floor")] + sc["geoms"] if sc["geoms"] else []
    acts = [position(j, kp=sc["kp"], kv=sc["kv"], force_limit=sc["force_limit"]) for j in sc["joints"]]
    options = {"limit_rows": sc["limit_rows"], **options}
    scene = make_scene(model, geoms, actuators=acts, pairs_include=[("floor", g.name) for g in sc["geoms"]] or None,
                       integrator=integrator or sc["integrator"], iterations=iterations, **options)
    q0 = np.array(jaxmb.neutral_configuration(model), float)
    for j, v in zip(sc["joints"], sc["start"]):
        q0[model.joint_coordinates(j)[0].start] = v
    if sc["floating"]:
        q0[:7] = sc["base"]
        gap = float(jnp.min(init_state(scene, q0).contact.dist))
        if gap < 1e-3:
            q0[2] += 1e-3 - gap
    return scene, jnp.asarray(q0, dtype)


def mujoco_model(sc, scene, dtype=np.float32):
    """``(MjModel, q index)``: MuJoCo's model of the scenario (module docstring) and ``q_mj = q_jaxmb[q index]``."""
    import mujoco

    compiler = '<mujoco><compiler discardvisual="true" fusestatic="false" balanceinertia="true"/></mujoco>'
    spec = mujoco.MjSpec.from_string(sc["text"].replace("</robot>", compiler + "</robot>"))
    if sc["floating"]:
        spec.worldbody.first_body().add_freejoint(name="root")
    kinds = {"plane": mujoco.mjtGeom.mjGEOM_PLANE, "sphere": mujoco.mjtGeom.mjGEOM_SPHERE,
             "box": mujoco.mjtGeom.mjGEOM_BOX, "capsule": mujoco.mjtGeom.mjGEOM_CAPSULE}
    if sc["geoms"]:
        spec.worldbody.add_geom(name="floor", type=kinds["plane"], size=[0, 0, 1], contype=1, conaffinity=0,
                                friction=[1.0, 0.005, 0.0001])
        for g in sc["geoms"]:
            rot = np.eye(3) if g.rot is None else np.asarray(g.rot).reshape(3, 3)
            quat = np.zeros(4)
            mujoco.mju_mat2Quat(quat, rot.ravel())
            size = list(g.size) + [0.0] * (3 - len(g.size))
            spec.body(g.body).add_geom(name=g.name, type=kinds[g.kind], size=size, pos=list(g.pos), quat=quat,
                                       contype=0, conaffinity=1, friction=[1.0, 0.005, 0.0001])
    for j in sc["joints"]:
        act = spec.add_actuator(name=j, target=j, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=sc["kp"], kv=sc["kv"])
        if sc["force_limit"] is not None:
            act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            act.forcerange = [-sc["force_limit"], sc["force_limit"]]
    m = spec.compile()
    m.opt.timestep = DT
    m.opt.gravity[:] = (0.0, 0.0, -9.81)
    m.opt.integrator = {"euler": mujoco.mjtIntegrator.mjINT_EULER,
                        "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST}[sc["integrator"]]
    m.opt.iterations = ITERATIONS
    if sc["geoms"]:  # (MJX 4.0.0's elliptic-cone code fails on a model without contacts)
        m.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    m.dof_damping[:] = 0.0
    m.dof_frictionloss[:] = 0.0
    m.dof_armature[:] = 0.0
    m.jnt_stiffness[:] = 0.0
    model = scene.model
    assert m.nq == model.nq and m.nv == model.nv and m.nu == scene.nu, (m.nq, model.nq, m.nv, model.nv)
    q_index = np.zeros(m.nq, int)
    for j in range(m.njnt):
        qs = model.joint_coordinates(m.joint(j).name)[0]
        q_index[m.jnt_qposadr[j] + np.arange(qs.stop - qs.start)] = np.arange(qs.start, qs.stop)
    assert sorted(q_index) == list(range(model.nq))
    return m, q_index


def initial_configurations(scene, sc, q0, batch, seed=0):
    """(batch, nq): ``q0`` with uniform +-`NOISE` on the actuated joints, world by world."""
    rng = np.random.default_rng(seed)
    q = np.tile(np.asarray(q0, float), (batch, 1))
    idx = [scene.model.joint_coordinates(j)[0].start for j in sc["joints"]]
    q[:, idx] += rng.uniform(-NOISE, NOISE, (batch, len(idx)))
    return q


def sanity(q, floating):
    """The mean base height (floating base) or the mean first joint angle (fixed base) of a batch (batch, nq)."""
    return float(np.mean(np.asarray(q)[:, 2 if floating else 0]))


# -- throughput ---------------------------------------------------------------------------------------------------


def jaxmb_rollout(scene, sharded=False):
    """``f(states, ctrls)``: the batch's final states after ``len(ctrls)`` steps under the same (steps, nu)
    controls; with ``sharded`` the batch split over the devices (`jaxmb.sharded_vmap`)."""
    def one(s, ctrls):
        return rollout(scene, s, DT, ctrls=ctrls, checkpoint=False)[0]
    return jaxmb.jit((jaxmb.sharded_vmap if sharded else jax.vmap)(one, in_axes=(0, None)))


def mjx_rollout(m):
    """``(f(qpos, ctrls), mx)``: MJX's final qpos of the batch after ``len(ctrls)`` steps of ``mjx.step``."""
    from mujoco import mjx

    mx = mjx.put_model(m, impl="jax")
    d0 = mjx.make_data(mx, impl="jax")

    def one(qpos, ctrls):
        def body(d, u):
            return mjx.step(mx, d.replace(ctrl=u)), None
        return jax.lax.scan(body, d0.replace(qpos=qpos), ctrls)[0].qpos
    return jax.jit(jax.vmap(one, in_axes=(0, None)))


def mujoco_c(m, q_mj, ctrls):
    """``(f(), final qpos)``: ``mujoco.rollout`` of the batch on every core, from the configurations ``q_mj``
    (batch, nq) at rest under the (steps, nu) controls."""
    import mujoco
    from mujoco import rollout as mj_rollout

    nthread = os.cpu_count()
    data = [mujoco.MjData(m) for _ in range(nthread)]
    d = data[0]
    size = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    x0 = np.empty((len(q_mj), size))
    for i, q in enumerate(q_mj):
        mujoco.mj_resetData(m, d)
        d.qpos[:] = q
        mujoco.mj_getState(m, d, x0[i], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    ctrl = np.asarray(ctrls, float)[None]
    runner = mj_rollout.Rollout(nthread=nthread)
    state = np.empty((len(q_mj), len(ctrls), size))

    def f():
        runner.rollout(m, data, x0, ctrl, state=state)
        return state
    f()
    return f, state[:, -1, 1:1 + m.nq]


def solver_options(solver, cone="elliptic"):
    """`make_scene` keywords of a constraint solver: the scenario's ``limit_rows`` for Gauss-Seidel, every limit
    row and the friction ``cone`` for Newton (which takes no cap)."""
    return dict(solver="newton", limit_rows=None, cone=cone) if solver == "newton" else {}


def throughput(name, batches, steps, dtype, peers=("mjx", "mujoco_c"), cache=None, c_max_batch=None, solver="pgs"):
    """Rows of steps/s of jaxmb (with the constraint ``solver``) and its ``peers`` (of "mjx", "mujoco_c"; MuJoCo C
    only up to ``c_max_batch`` worlds) for one scenario at each batch. ``cache``
    (a dict) keeps the compiled calls of a robot by batch: the quadruped's standing and trotting differ only in
    their controls, arguments of the same two programs."""
    sc = scenario(name)
    robot = name.split("_")[0]
    cache = {} if cache is None else cache
    if robot not in cache:
        scene, q0 = jaxmb_scene(sc, dtype, **solver_options(solver))
        m, q_index = mujoco_model(sc, scene) if peers else (None, None)
        cache[robot] = dict(scene=scene, q0=q0, m=m, q_index=q_index, f_jm=jaxmb_rollout(scene),
                            f_mjx=mjx_rollout(m) if "mjx" in peers else None)
    c = cache[robot]
    scene, q0, m, q_index = c["scene"], c["q0"], c["m"], c["q_index"]
    ctrls = sc["ctrls"](steps)
    what = "base z" if sc["floating"] else "q[0]"
    print(f"{name}: nq {scene.model.nq}, nv {scene.model.nv}, nu {scene.nu}, contact slots {scene.nc}, solver rows "
          f"{scene.rows}; {steps} steps of {DT * 1e3:g} ms" + (f"; MuJoCo nbody {m.nbody}" if m else ""))
    rows = []
    for b in batches:
        q = initial_configurations(scene, sc, q0, b)
        states = jax.vmap(lambda x: init_state(scene, x))(jnp.asarray(q, dtype))
        u = jnp.asarray(ctrls, dtype)
        if ("jaxmb", b, steps) not in c:
            c[("jaxmb", b, steps)] = compile_time(c["f_jm"], states, u)
        c_jm, g_jm = c[("jaxmb", b, steps)]
        final = g_jm(states, u)
        row = dict(scenario=name, batch=b, steps=steps, dtype=jnp.dtype(dtype).name, solver=solver, nv=int(scene.model.nv),
                   contact_slots=int(scene.nc), solver_rows=int(scene.rows), jaxmb_compile_s=c_jm,
                   jaxmb_sanity=sanity(final.q, sc["floating"]), jaxmb_diverged=int(jnp.sum(final.diverged != 0)))
        calls = [("jaxmb", g_jm, (states, u))]
        if "mjx" in peers:
            q_mj = jnp.asarray(q[:, q_index], dtype)
            if ("mjx", b, steps) not in c:
                c[("mjx", b, steps)] = compile_time(c["f_mjx"], q_mj, u)
            c_mjx, g_mjx = c[("mjx", b, steps)]
            calls.append(("mjx", g_mjx, (q_mj, u)))
            row.update(mjx_compile_s=c_mjx, mjx_sanity=sanity(g_mjx(q_mj, u), sc["floating"]))
        if "mujoco_c" in peers and (c_max_batch is None or b <= c_max_batch):
            f_c, final_c = mujoco_c(m, q[:, q_index], ctrls)
            calls.append(("mujoco_c", f_c, ()))
            row.update(mujoco_c_sanity=sanity(final_c, sc["floating"]), mujoco_c_threads=os.cpu_count())
        times = dict(zip([k for k, *_ in calls], alternating_best_times(*[(f, a) for _, f, a in calls])))
        line = f"  batch {b:5d}: jaxmb {b * steps / times['jaxmb']:10.4g} steps/s (compile {c_jm:5.1f} s)"
        for key, label in (("jaxmb", "jaxmb"), ("mjx", "MJX"), ("mujoco_c", "MuJoCo C")):
            if key in times:
                row[f"{key}_steps_per_s"] = b * steps / times[key]
            if key in times and key != "jaxmb":
                row[f"ratio_jaxmb_vs_{key}"] = times[key] / times["jaxmb"]
                line += (f", {label} {row[f'{key}_steps_per_s']:10.4g}" + (
                    f" (compile {row['mjx_compile_s']:5.1f} s)" if key == "mjx" else "")
                    + f" [jaxmb x{row[f'ratio_jaxmb_vs_{key}']:.3g}]")
        line += f"; final {what}: jaxmb {row['jaxmb_sanity']:.4f}" + "".join(
            f", {label} {row[f'{key}_sanity']:.4f}" for key, label in (("mjx", "MJX"), ("mujoco_c", "C"))
            if f"{key}_sanity" in row)
        rows.append(row)
        print(line + (f"  [{row['jaxmb_diverged']} jaxmb worlds diverged]" if row["jaxmb_diverged"] else ""),
              flush=True)
    return rows


def sharded_throughput(names, batches, steps, dtype):
    """Rows of steps/s of jaxmb's rollout with the batch split over one CPU device per core
    (``jaxmb.jit(jaxmb.sharded_vmap(rollout))``, the states placed by `jaxmb.split_batch`) against MuJoCo C's
    threaded rollout, at the batches that divide evenly over the devices. Run in a process of its own that called
    `jaxmb.use_cpu_cores` first (`sharded_rows`)."""
    devices = len(jax.devices())
    rows = []
    for name in names:
        sc = scenario(name)
        scene, q0 = jaxmb_scene(sc, dtype)
        m, q_index = mujoco_model(sc, scene)
        f = jaxmb_rollout(scene, sharded=True)
        ctrls = sc["ctrls"](steps)
        u = jnp.asarray(ctrls, dtype)
        scene_nt, _ = jaxmb_scene(sc, dtype, **solver_options("newton"))
        f_nt = jaxmb_rollout(scene_nt, sharded=True)
        for b in [b for b in batches if b > 1 and b % devices == 0]:
            q = initial_configurations(scene, sc, q0, b)
            states = jaxmb.split_batch(jax.vmap(lambda x: init_state(scene, x))(jnp.asarray(q, dtype)))
            states_nt = jaxmb.split_batch(jax.vmap(lambda x: init_state(scene_nt, x))(jnp.asarray(q, dtype)))
            c_jm, g_jm = compile_time(f, states, u)
            c_nt, g_nt = compile_time(f_nt, states_nt, u)
            f_c, final_c = mujoco_c(m, q[:, q_index], ctrls)
            t_jm, t_nt, t_c = alternating_best_times((g_jm, (states, u)), (g_nt, (states_nt, u)), (f_c, ()))
            row = dict(scenario=name, batch=b, steps=steps, dtype=jnp.dtype(dtype).name, devices=devices,
                       jaxmb_compile_s=c_jm, jaxmb_steps_per_s=b * steps / t_jm, mujoco_c_steps_per_s=b * steps / t_c,
                       mujoco_c_threads=os.cpu_count(), ratio_jaxmb_vs_mujoco_c=t_c / t_jm,
                       jaxmb_sanity=sanity(g_jm(states, u).q, sc["floating"]),
                       mujoco_c_sanity=sanity(final_c, sc["floating"]), newton_compile_s=c_nt,
                       newton_steps_per_s=b * steps / t_nt, ratio_newton_vs_mujoco_c=t_c / t_nt,
                       newton_sanity=sanity(g_nt(states_nt, u).q, sc["floating"]))
            rows.append(row)
            print(f"  {name}, batch {b:5d} over {devices} devices: jaxmb {row['jaxmb_steps_per_s']:10.4g} steps/s "
                  f"(compile {c_jm:5.1f} s), with solver='newton' {row['newton_steps_per_s']:10.4g} (compile "
                  f"{c_nt:5.1f} s), MuJoCo C {row['mujoco_c_steps_per_s']:10.4g} [jaxmb x"
                  f"{row['ratio_jaxmb_vs_mujoco_c']:.3g}, newton x{row['ratio_newton_vs_mujoco_c']:.3g}]", flush=True)
    return rows


def solver_throughput(names, batch, steps, dtype):
    """Rows of steps/s at ``batch`` of each scenario with the projected Gauss-Seidel solver, with the Newton solver
    (``make_scene(solver="newton")``, every limit row) on elliptic cones, and with it on pyramids
    (``cone="pyramidal"``), timed in alternating rounds with MuJoCo C: what the choice of solver and cone costs or
    saves."""
    rows = []
    kinds = (("pgs", "pgs", None), ("newton", "newton", "elliptic"), ("pyramidal", "newton", "pyramidal"))
    for name in names:
        sc = scenario(name)
        u = jnp.asarray(sc["ctrls"](steps), dtype)
        calls, compile_s, sanity_of = [], {}, {}
        for key, solver, cone in kinds:
            scene, q0 = jaxmb_scene(sc, dtype, **solver_options(solver, cone))
            q = initial_configurations(scene, sc, q0, batch)
            states = jax.vmap(lambda x: init_state(scene, x))(jnp.asarray(q, dtype))
            compile_s[key], g = compile_time(jaxmb_rollout(scene), states, u)
            sanity_of[key] = sanity(g(states, u).q, sc["floating"])
            calls.append((g, (states, u)))
        m, q_index = mujoco_model(sc, scene)
        f_c, _ = mujoco_c(m, q[:, q_index], sc["ctrls"](steps))
        *times, t_c = alternating_best_times(*calls, (f_c, ()))
        row = dict(scenario=name, batch=batch, steps=steps, dtype=jnp.dtype(dtype).name,
                   mujoco_c_steps_per_s=batch * steps / t_c, mujoco_c_threads=os.cpu_count())
        for (key, _, _), t in zip(kinds, times):
            row.update({f"{key}_steps_per_s": batch * steps / t, f"ratio_{key}_vs_mujoco_c": t_c / t,
                        f"{key}_compile_s": compile_s[key], f"{key}_sanity": sanity_of[key]})
        row.update(ratio_newton_vs_pgs=times[0] / times[1], ratio_pyramidal_vs_newton=times[1] / times[2])
        rows.append(row)
        print(f"  {name}, batch {batch}: projected Gauss-Seidel {row['pgs_steps_per_s']:.4g} steps/s (compile "
              f"{compile_s['pgs']:.1f} s), Newton {row['newton_steps_per_s']:.4g} (compile {compile_s['newton']:.1f} "
              f"s) [newton x{row['ratio_newton_vs_pgs']:.3g}], on pyramids {row['pyramidal_steps_per_s']:.4g} "
              f"[x{row['ratio_pyramidal_vs_newton']:.3g}]; MuJoCo C {row['mujoco_c_steps_per_s']:.4g}", flush=True)
    return rows


def sharded_rows(names, batches, steps):
    """`sharded_throughput` in a child process with one CPU device per core: MJX's CPU programs stall in a process
    that has several CPU devices, so the rows with MJX keep a process of one device."""
    out = subprocess.run([sys.executable, __file__, "--sharded-child", "--scenarios", *names, "--batches",
                          *map(str, batches), "--steps", str(steps)], check=True, capture_output=True, text=True)
    print(out.stdout.rsplit("\n", 2)[0], flush=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- reverse mode -------------------------------------------------------------------------------------------------


def limit_rows_study(names, batch, steps):
    """Rows of jaxmb's steps/s at ``batch`` with every limit row and with the scenario's ``limit_rows``, timed in
    alternating rounds (`common.alternating_best_times`) so that both see the same machine: what the cap saves."""
    rows = []
    for name in names:
        sc = scenario(name)
        calls = []
        for cap in (None, sc["limit_rows"]):
            scene, q0 = jaxmb_scene(sc, jnp.float32, limit_rows=cap)
            states = jax.vmap(lambda q: init_state(scene, q))(initial_configurations(scene, sc, q0, batch))
            f, ctrls = jaxmb_rollout(scene), jnp.asarray(sc["ctrls"](steps), jnp.float32)
            jax.block_until_ready(f(states, ctrls))
            calls.append((f, (states, ctrls)))
        every, capped = (batch * steps / t for t in alternating_best_times(*calls))
        row = dict(scenario=name, batch=batch, steps=steps, limited=len(scene.options.limited),
                   limit_rows=sc["limit_rows"], every_row_steps_per_s=every, capped_steps_per_s=capped,
                   speedup=capped / every)
        print(f"  {name}, batch {batch}: {row['limited']} limit rows {every:.4g} steps/s, the {row['limit_rows']} "
              f"nearest {capped:.4g} steps/s: x{row['speedup']:.2f}", flush=True)
        rows.append(row)
    return rows


def _loss(scene, steps, checkpoint):
    def loss(states, ctrls):
        def one(s, u):
            final = rollout(scene, s, DT, ctrls=u, checkpoint=checkpoint)[0]
            return jnp.sum(final.q ** 2) + jnp.sum(final.qd ** 2)
        return jnp.sum(jax.vmap(one)(states, ctrls))
    return loss


def gradient_cost(name, batch, steps, dtype):
    """The time of ``grad`` of the loss with respect to the controls through a rollout over the rollout's time."""
    sc = scenario(name)
    scene, q0 = jaxmb_scene(sc, dtype)
    states = jax.vmap(lambda x: init_state(scene, x))(
        jnp.asarray(initial_configurations(scene, sc, q0, batch), dtype))
    u = jnp.asarray(np.tile(sc["ctrls"](steps), (batch, 1, 1)), dtype)
    loss = _loss(scene, steps, checkpoint=True)
    c_fwd, fwd = compile_time(jaxmb.jit(loss), states, u)
    c_grad, grad = compile_time(jaxmb.jit(jax.grad(loss, argnums=1)), states, u)
    g = grad(states, u)
    t_fwd, t_grad = alternating_best_times((fwd, (states, u)), (grad, (states, u)))
    row = dict(scenario=name, batch=batch, steps=steps, dtype=jnp.dtype(dtype).name, forward_s=t_fwd,
               gradient_s=t_grad, cost_vs_forward=t_grad / t_fwd, forward_compile_s=c_fwd, gradient_compile_s=c_grad,
               gradient_finite=bool(jnp.all(jnp.isfinite(g))))
    print(f"  {name} batch {batch}, {steps} steps: gradient {t_grad * 1e3:.1f} ms, rollout {t_fwd * 1e3:.1f} ms: "
          f"x{row['cost_vs_forward']:.2f} (compile {c_grad:.1f} s; finite: {row['gradient_finite']})", flush=True)
    return row


def reverse_memory(name, steps, dtype):
    """Scratch bytes XLA plans for the gradient through ``steps`` steps of one world, with and without
    checkpointing."""
    sc = scenario(name)
    scene, q0 = jaxmb_scene(sc, dtype)
    states = jax.vmap(lambda x: init_state(scene, x))(jnp.asarray(q0, dtype)[None])
    u = jnp.asarray(sc["ctrls"](steps)[None], dtype)
    row = dict(scenario=name, batch=1, steps=steps, dtype=jnp.dtype(dtype).name,
               state_bytes=int(sum(x.nbytes for x in jax.tree.leaves(states))))
    for key, checkpoint in (("checkpoint", True), ("no_checkpoint", False)):
        c, compiled = compile_time(jaxmb.jit(jax.grad(_loss(scene, steps, checkpoint), 1)), states, u)
        row[f"{key}_temp_bytes"] = temp_bytes(compiled)
        row[f"{key}_compile_s"] = c
    mb = {k: (row[f"{k}_temp_bytes"] or 0) / 1e6 for k in ("checkpoint", "no_checkpoint")}
    print(f"  {name}, {steps} steps, one world: reverse mode scratch {mb['checkpoint']:.2f} MB with checkpoint, "
          f"{mb['no_checkpoint']:.2f} MB without (compile {row['checkpoint_compile_s']:.0f} s and "
          f"{row['no_checkpoint_compile_s']:.0f} s)", flush=True)
    return row


# -- the solver's iteration count ---------------------------------------------------------------------------------


def _sliding_box(iterations):
    b = jaxmb.ModelBuilder("box")
    b.add_body("box", None, joints.free(), mass=2.0, inertia=np.diag([0.1, 0.1, 0.1]))
    model = b.build()
    return make_scene(model, [plane(name="floor"), box("box", (0.2, 0.2, 0.1))], iterations=iterations,
                      tolerance=0.0)


def solver_study(iterations, reference, scenarios=("quadruped_stand", "sliding_box")):
    """Contact-force error of k sweeps, from zero and from the previous step's impulses, against ``reference``
    sweeps from zero, one step from a mid-trajectory state (module docstring). Float64.

    k sweeps are k calls of a one-sweep step (``iterations=1``) from the same state, each warm-started from the
    impulses the one before returned: the same sweeps as ``iterations=k`` (checked at the smallest k), with one
    compiled program for every k."""
    jax.config.update("jax_enable_x64", True)
    out = []
    for name in scenarios:
        if name == "sliding_box":
            dt, build = 1e-3, _sliding_box
            s = init_state(build(1), jnp.array([0, 0, 0.1, 1, 0, 0, 0.0]), jnp.array([0, 0, 0, 2.0, 0, 0]))
            ctrl, steps = None, 100
        else:
            sc = scenario(name)
            dt = DT

            def build(k, sc=sc):
                return jaxmb_scene(sc, jnp.float64, iterations=k, tolerance=0.0)[0]
            _, q0 = jaxmb_scene(sc, jnp.float64)
            s, ctrl, steps = init_state(build(1), q0), jnp.asarray(sc["pose"]), 250
        ctrls = None if ctrl is None else jnp.tile(ctrl, (steps, 1))
        s = rollout(build(ITERATIONS), s, dt, ctrls=ctrls, steps=steps)[0]  # mid-trajectory; its impulses warm
        one = build(1)

        def sweeps(k, warm):
            """``(contact forces (nc, 3) in their frames, their world-axes sum (3,))`` after k sweeps."""
            p = s.impulse if warm else jnp.zeros_like(s.impulse)
            for _ in range(k):
                new = step(one, s._replace(impulse=p), ctrl, dt)
                p = new.impulse
            return np.asarray(new.contact.force), np.asarray(contact_forces(new)).sum(0)

        ref, ref_net = sweeps(reference, False)
        direct = step(build(iterations[0]), s._replace(impulse=jnp.zeros_like(s.impulse)), ctrl, dt).contact.force
        row = dict(scenario=name, dt=dt, after_steps=steps, reference_iterations=reference,
                   reference_force_norm=float(np.linalg.norm(ref)), reference_net_force=ref_net.tolist(),
                   iterations=list(iterations), cold=[], warm=[], net_cold=[], net_warm=[],
                   chained_vs_direct=float(np.abs(np.asarray(direct) - sweeps(iterations[0], False)[0]).max()))
        for k in iterations:
            for key, warm in (("cold", False), ("warm", True)):
                f, net = sweeps(k, warm)
                row[key].append(float(np.linalg.norm(f - ref) / np.linalg.norm(ref)))
                row[f"net_{key}"].append(float(np.linalg.norm(net - ref_net) / np.linalg.norm(ref_net)))
        out.append(row)
        print(f"  {name} ({steps} steps in, |f_ref| {row['reference_force_norm']:.4g} N; k sweeps of a one-sweep "
              f"step - k sweeps: {row['chained_vs_direct']:.1e}); per-slot forces, then their sum:")
        for key, label in (("cold", "zero warm start"), ("warm", "previous step's impulses")):
            print(f"    {label:26s}" + "  ".join(f"k={k}: {e:.1e} / {n:.1e}" for k, e, n in
                                                 zip(iterations, row[key], row[f"net_{key}"])), flush=True)
    return out


def solver_study_apart(iterations, reference, scenarios):
    """`solver_study` in a fresh process: it turns on float64, which a process that has already run float32
    programs does not take cleanly."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "solver.json")
        code = (f"import json, sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); import sim; "
                f"json.dump(sim.solver_study({list(iterations)!r}, {reference!r}, {tuple(scenarios)!r}), "
                f"open({out!r}, 'w'))")
        subprocess.run([sys.executable, "-c", code], check=True)
        with open(out) as f:
            return json.load(f)


# -- plot, main ---------------------------------------------------------------------------------------------------


def plot(rows, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    names = list(dict.fromkeys(r["scenario"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        rs = [r for r in rows if r["scenario"] == name]
        for key, label in (("jaxmb", "jaxmb.sim"), ("mjx", "MJX"), ("mujoco_c", "MuJoCo C, all cores")):
            measured = [r for r in rs if f"{key}_steps_per_s" in r]
            if measured:
                ax.loglog([r["batch"] for r in measured], [r[f"{key}_steps_per_s"] for r in measured], "o-",
                          label=label)
        ax.set_title(name)
        ax.set_xlabel("batch")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("steps/s")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="batches 1 and 32, reverse mode on a batch of 4")
    size.add_argument("--tiny", action="store_true",
                      help="the panda, batch 2, 5 steps, and the sliding box's solver study; no reverse mode")
    size.add_argument("--gpu", action="store_true", help="batches 8192 and 65536; no memory or solver study")
    ap.add_argument("--scenarios", nargs="*", default=None)
    ap.add_argument("--batches", nargs="*", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--grad-batch", type=int, default=None)
    ap.add_argument("--grad-steps", type=int, default=None)
    ap.add_argument("--memory-steps", type=int, default=None)
    ap.add_argument("--solver", choices=("pgs", "newton"), default="pgs",
                    help="jaxmb's constraint solver in the steps/s rows (the other tables measure both)")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--sharded-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sharded_child:  # the process of `sharded_rows`: its rows as JSON on the last line
        jaxmb.use_cpu_cores()
        print(json.dumps(sharded_throughput(args.scenarios, args.batches, args.steps, jnp.float32)))
        return
    solver = ([5, 10, 20, 30, 50], 500)
    if args.tiny:
        defaults = dict(scenarios=["panda"], batches=[2], steps=5, grad_batch=2, grad_steps=5, memory_steps=10,
                        gradient=[], memory=None, solver=([2, 5], 20), solver_scenarios=("sliding_box",))
    elif args.gpu:
        defaults = dict(scenarios=["quadruped_stand", "quadruped_trot", "panda"], batches=[8192, 65536], steps=100,
                        grad_batch=1024, grad_steps=100, memory_steps=1000, gradient=["quadruped_stand"],
                        memory=None, solver=None, solver_scenarios=(), c_max_batch=8192)
    elif args.quick:
        defaults = dict(scenarios=["panda", "quadruped_stand", "quadruped_trot", "talos"], batches=[1, 32], steps=100,
                        grad_batch=4, grad_steps=100, memory_steps=1000, gradient=["quadruped_stand"],
                        memory="quadruped_stand", solver=solver, solver_scenarios=("quadruped_stand", "sliding_box"),
                        limit_rows=["quadruped_stand", "talos"], sharded_batches=[32, 256],
                        solvers=["panda", "quadruped_trot", "talos"])
    else:
        defaults = dict(scenarios=["panda", "quadruped_stand", "quadruped_trot", "talos"], batches=[1, 16, 256, 1024],
                        steps=100, grad_batch=16, grad_steps=100, memory_steps=1000,
                        gradient=["panda", "quadruped_stand"], memory="quadruped_stand", solver=solver,
                        solver_scenarios=("quadruped_stand", "sliding_box"), limit_rows=["quadruped_stand", "talos"],
                        solvers=["panda", "quadruped_trot", "talos"])
    for key in ("scenarios", "batches", "steps", "grad_batch", "grad_steps", "memory_steps"):
        if getattr(args, key) is None:
            setattr(args, key, defaults[key])
    dtype = jnp.float32
    mode = "tiny" if args.tiny else "quick" if args.quick else "gpu" if args.gpu else "full"
    payload = {"machine": machine(), "mode": mode,
               "dt": DT, "iterations": ITERATIONS}
    try:
        import mujoco
        from mujoco import mjx  # noqa: F401

        payload["peer"] = {"mujoco": mujoco.__version__, "solver": "Newton", "iterations": ITERATIONS,
                           "cone": "elliptic", "mujoco_c_threads": os.cpu_count()}
        peers = ("mujoco_c",) if args.tiny else ("mjx", "mujoco_c")
    except ImportError:
        payload["peer"], peers = None, ()

    def checkpoint():
        if not args.no_save:
            return save("sim", payload)

    t0 = time.perf_counter()
    payload["results"], cache = [], {}
    print("== steps/s (float32)")
    for name in args.scenarios:
        payload["results"] += throughput(name, args.batches, args.steps, dtype, peers, cache,
                                         defaults.get("c_max_batch"), args.solver)
        checkpoint()
    if "mujoco_c" in peers and jax.default_backend() == "cpu" and os.cpu_count() > 1 and not args.tiny:
        print(f"== steps/s over {os.cpu_count()} CPU devices, one per core (float32)")
        payload["sharded"] = sharded_rows(args.scenarios, defaults.get("sharded_batches", args.batches), args.steps)
        checkpoint()
    if "mujoco_c" in peers and not args.tiny and defaults.get("solvers"):
        print(f"== the two constraint solvers, batch {max(args.batches)} (float32)")
        payload["solvers"] = solver_throughput(defaults["solvers"], max(args.batches), args.steps, dtype)
        checkpoint()
    if not args.tiny and "limit_rows" in defaults:
        print("== limit rows: every limited coordinate's, or the scenario's nearest few (float32)")
        payload["limit_rows"] = limit_rows_study(defaults["limit_rows"], max(args.batches), args.steps)
        checkpoint()
    print(f"== gradient through a {args.grad_steps}-step rollout, over the rollout")
    payload["gradient"] = [gradient_cost(n, args.grad_batch, args.grad_steps, dtype) for n in defaults["gradient"]]
    checkpoint()
    payload["memory"] = []
    if defaults["memory"]:
        print(f"== reverse mode through {args.memory_steps} steps: XLA's planned scratch memory")
        payload["memory"] = [reverse_memory(defaults["memory"], args.memory_steps, dtype)]
    checkpoint()
    if defaults["solver"]:
        print("== solver: relative contact-force error after k projected Gauss-Seidel sweeps (float64)")
        ks, reference = defaults["solver"]
        payload["solver"] = solver_study_apart(ks, reference, defaults["solver_scenarios"])
    payload["seconds"] = time.perf_counter() - t0
    path = checkpoint()
    if path:
        plotted = plot(payload["results"], path.with_suffix(".png"))
        print("saved", path, plotted or "")


if __name__ == "__main__":
    main()
