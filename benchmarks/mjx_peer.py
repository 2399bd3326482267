"""MuJoCo MJX as a peer of jaxmb's batched forward dynamics, measured in the same run.

    python benchmarks/mjx_peer.py                              # talos_full_v2, batches 64 .. 16384 (float32)
    python benchmarks/mjx_peer.py --batches 4096 65536 262144  # larger batches, on a GPU

Loads the robot's URDF into MuJoCo with its visual and collision geometry stripped (no meshes needed), adds a
free joint to the base, keeps gravity and disables contacts, constraints, springs and dampers
(``opt.disableflags``), so that ``mjx.forward`` computes the smooth forward dynamics: kinematics, the mass matrix
(CRBA), its factorization, the bias forces (RNE) and the solve for ``qacc``. Both sides are timed as
``jit(vmap(f))(q, qd, tau)`` returning only the accelerations, on the same random states. Prints states/s of
each and jaxmb's ratio (jaxmb / MJX; above 1 means jaxmb is faster). Writes
``benchmarks/results/mjx-<backend>-<cores>core.json``.

MuJoCo's model is not jaxmb's to the last digit: links without mass are given MuJoCo's minimum mass and
inertias breaking the triangle inequality are balanced (``compiler.boundmass``, ``balanceinertia``), which changes
no cost. The peer needs ``mujoco`` and ``mujoco-mjx`` (not dependencies of jaxmb).
"""

import argparse
import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb
from common import alternating_best_times, compile_time, load, machine, robot_path, save


def mujoco_model(name):
    """A MuJoCo model of the robot (free base, no geometry) and the index maps between its coordinates and
    jaxmb's: ``(mj_model, q_index, v_index)`` with ``q_mj = q_jaxmb[q_index]`` and ``v_mj = v_jaxmb[v_index]``
    (the free joint's order differs too: MuJoCo's ``qvel`` is linear then angular, handled by v_index)."""
    import mujoco

    root = ET.parse(robot_path(name)).getroot()
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for el in link.findall(tag):
                link.remove(el)
    spec = mujoco.MjSpec.from_string(ET.tostring(root, encoding="unicode"))
    spec.compiler.balanceinertia = True
    spec.compiler.boundmass = 1e-6
    spec.compiler.boundinertia = 1e-9
    base = spec.worldbody.first_body()
    base.add_freejoint()
    m = spec.compile()
    m.opt.disableflags |= (mujoco.mjtDisableBit.mjDSBL_CONSTRAINT | mujoco.mjtDisableBit.mjDSBL_CONTACT
                           | mujoco.mjtDisableBit.mjDSBL_SPRING | mujoco.mjtDisableBit.mjDSBL_DAMPER)
    m.opt.gravity[:] = [0, 0, -9.81]
    return m


def run(name, batches, dtype, checkpoint=None):
    import mujoco
    from mujoco import mjx

    m = mujoco_model(name)
    model = load(name, True, dtype)
    print(f"{name}: MuJoCo nq={m.nq} nv={m.nv} nbody={m.nbody}; jaxmb nq={model.nq} nv={model.nv}")
    assert m.nv == model.nv, (m.nv, model.nv)
    mx = mjx.put_model(m, impl="jax")
    d0 = mjx.make_data(mx, impl="jax")

    def mjx_fd(q, qd, tau):
        d = d0.replace(qpos=q, qvel=qd, qfrc_applied=tau)
        return mjx.forward(mx, d).qacc

    def jaxmb_fd(q, qd, tau):
        return jaxmb.forward_dynamics(model, q, qd, tau)

    rows = []
    rng = np.random.default_rng(0)
    for b in batches:
        # Random states of the right shape for each side; the cost does not depend on the values.
        q_mj = np.tile(m.qpos0, (b, 1))
        q_mj[:, 7:] += rng.uniform(-0.5, 0.5, (b, m.nq - 7))
        quat = rng.standard_normal((b, 4))
        q_mj[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        mj_args = [jax.device_put(jnp.asarray(a, dtype)) for a in
                   (q_mj, rng.standard_normal((b, m.nv)), rng.standard_normal((b, m.nv)))]
        k1, k2, k3 = jax.random.split(jax.random.PRNGKey(b), 3)
        q = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(jax.random.split(k1, b)).astype(dtype)
        jm_args = [q, jax.random.normal(k2, (b, model.nv), dtype), jax.random.normal(k3, (b, model.nv), dtype)]
        c_mjx, f_mjx = compile_time(jax.jit(jax.vmap(mjx_fd)), *mj_args)
        c_jm, f_jm = compile_time(jaxmb.jit(jax.vmap(jaxmb_fd)), *jm_args)
        out = f_mjx(*mj_args)
        finite = bool(jnp.all(jnp.isfinite(out)))
        t_mjx, t_jm = alternating_best_times((f_mjx, mj_args), (f_jm, jm_args))
        row = dict(robot=name, dtype=jnp.dtype(dtype).name, batch=b, mjx_states_per_s=b / t_mjx,
                   jaxmb_states_per_s=b / t_jm, ratio_jaxmb_vs_mjx=t_mjx / t_jm, mjx_compile_s=c_mjx,
                   jaxmb_compile_s=c_jm, mjx_qacc_finite=finite)
        rows.append(row)
        print(f"  {row['dtype']} batch {b:7d}: MJX forward {b / t_mjx:10.4g} states/s (compile {c_mjx:5.1f} s), "
              f"jaxmb ABA {b / t_jm:10.4g} states/s (compile {c_jm:5.1f} s): jaxmb x{t_mjx / t_jm:.2f} of MJX"
              + ("" if finite else "  [MJX qacc not finite]"))
        if checkpoint is not None:
            checkpoint(rows, {"mujoco": mujoco.__version__, "nv": int(m.nv), "nbody": int(m.nbody)})
    return rows, {"mujoco": mujoco.__version__, "nv": int(m.nv), "nbody": int(m.nbody)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", default="talos_full_v2")
    ap.add_argument("--batches", nargs="*", type=int, default=[64, 1024, 4096, 16384])
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    # float32 only, with x64 off: MJX builds its model in the default precision.
    def checkpoint(rows, info):
        return save("mjx", {"machine": machine(), "peer": info, "results": rows})

    rows, info = run(args.robot, args.batches, jnp.float32, None if args.no_save else checkpoint)
    if not args.no_save:
        print("saved", checkpoint(rows, info))


if __name__ == "__main__":
    main()
