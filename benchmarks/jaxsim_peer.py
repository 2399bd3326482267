"""jaxsim's ``forward_dynamics_aba`` as a peer of jaxmb's batched forward dynamics, measured in the same run.

    python benchmarks/jaxsim_peer.py                         # talos_full_v2, batches 1024 and 4096, float32
    python benchmarks/jaxsim_peer.py --dtype float64         # both libraries in float64 (jaxsim's default)
    python benchmarks/jaxsim_peer.py --batches 4096 65536    # larger batches, on a GPU

Loads the robot's URDF into jaxsim with its visual and collision geometry stripped (no meshes, no contact
points), floating base. Both sides are timed as ``jit(vmap(f))(q, qd, tau)`` returning the base and joint
accelerations, on the same states mapped into each library's coordinates; jaxsim's ``f`` is
``JaxSimModelData.build`` (body-fixed velocity representation) followed by ``forward_dynamics_aba``, the call a
state goes through in its API. Prints states/s and compile time of each and jaxmb's ratio (jaxmb / jaxsim; above
1 means jaxmb is faster), and cross-checks the accelerations of every timed state (joints mapped by name, jaxmb's
base ``[omega; v]`` against jaxsim's body-fixed ``[v; omega]``; no wrench on the base). Writes
``benchmarks/results/jaxsim-<backend>-<cores>core.json``.

jaxsim turns on ``jax_enable_x64`` when imported unless ``JAX_ENABLE_X64=0``; this script sets the variable from
``--dtype`` before JAX is imported, so both libraries run in the same precision. jaxsim reads a URDF through
sdformat's ``gz sdf`` (or ``ign sdf``) executable, which must be on PATH: fixed joints are kept in the SDF
(``preserveFixedJoint``) and lumped by jaxsim, and rod's check that sdformat writes SDF 1.10 is skipped so that
sdformat 12 (SDF 1.9, Debian's ``libsdformat-dev`` + ``ignition-tools``) also serves; the cross-check verifies the
model. The peer needs ``jaxsim`` (not a dependency of jaxmb). Exits non-zero, saying why, if jaxsim cannot load
the model or its ABA fails.
"""

import argparse
import os
import xml.etree.ElementTree as ET


def jaxsim_model(name):
    """The jaxsim model of the robot (floating base, no geometry), from its URDF."""
    import jaxsim.api as js

    from common import robot_path

    root = ET.parse(robot_path(name)).getroot()
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for el in link.findall(tag):
                link.remove(el)
    for joint in root.findall("joint"):
        if joint.get("type") == "fixed":  # sdformat's own lumping of fixed joints yields NaN inertial poses
            gazebo = ET.SubElement(root, "gazebo", reference=joint.get("name"))
            ET.SubElement(gazebo, "preserveFixedJoint").text = "true"
    return js.model.JaxSimModel.build_from_model_description(ET.tostring(root, encoding="unicode"), is_urdf=True)


def coordinate_maps(model, sim):
    """Index maps from jaxmb's coordinates to jaxsim's: ``q_sim = q[q_index]``, ``qd_sim = qd[v_index]``,
    ``tau_sim = tau[s_index]``. jaxmb: ``q = [p, quat, s]``, ``qd = [omega, v, sd]`` (body frame); jaxsim:
    base position, quaternion, joint positions, and body-fixed ``[v, omega]``, joints in its own order."""
    import numpy as np

    names = model.joint_names
    if model.joint_types[0] != "free" or len(names) - 1 != sim.dofs():
        raise SystemExit(f"jaxsim_peer: the models differ: jaxmb joints {names}, jaxsim joints {sim.joint_names()}")
    missing = set(sim.joint_names()) - set(names)
    if missing:
        raise SystemExit(f"jaxsim_peer: jaxsim joints absent from jaxmb's model: {sorted(missing)}")
    s_index = np.array([6 + names.index(n) - 1 for n in sim.joint_names()])  # one coordinate per revolute joint
    q_index = np.concatenate([np.arange(7), s_index + 1])
    v_index = np.concatenate([[3, 4, 5, 0, 1, 2], s_index])
    return q_index, v_index, s_index


def run(name, batches, dtype, checkpoint=None):
    import jax
    import jax.numpy as jnp
    import jaxsim
    import jaxsim.api as js
    import numpy as np

    import jaxmb
    from common import alternating_best_times, compile_time, load

    try:
        sim = jaxsim_model(name)
    except Exception as e:  # any failure of the loader is the answer: jaxsim cannot load this model
        raise SystemExit(f"jaxsim_peer: jaxsim {jaxsim.__version__} could not load {name}: "
                         f"{type(e).__name__}: {e}") from e
    model = load(name, True, dtype)
    q_index, v_index, s_index = coordinate_maps(model, sim)
    print(f"{name}: jaxsim {jaxsim.__version__} dofs={sim.dofs()} links={sim.number_of_links()}; "
          f"jaxmb nq={model.nq} nv={model.nv} bodies={model.nb}; x64 {jax.config.jax_enable_x64}")

    def jaxsim_fd(q, qd, tau):
        data = js.data.JaxSimModelData.build(
            model=sim, base_position=q[:3], base_quaternion=q[3:7], joint_positions=q[7:],
            base_linear_velocity=qd[:3], base_angular_velocity=qd[3:6], joint_velocities=qd[6:],
            velocity_representation=jaxsim.VelRepr.Body)
        base, s = js.model.forward_dynamics_aba(sim, data, joint_forces=tau)
        return jnp.concatenate([base, s])

    def jaxmb_fd(q, qd, tau):
        return jaxmb.forward_dynamics(model, q, qd, tau)

    def states(b, key):
        k1, k2, k3 = jax.random.split(key, 3)
        q = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(jax.random.split(k1, b)).astype(dtype)
        tau = jax.random.normal(k3, (b, model.nv), dtype).at[:, :6].set(0)  # no wrench on the base
        return q, jax.random.normal(k2, (b, model.nv), dtype), tau

    def to_sim(q, qd, tau):
        return [jax.device_put(a[:, i]) for a, i in ((q, q_index), (qd, v_index), (tau, s_index))]

    def relative_deviation(jm_args, sim_args, f_sim, f_jm):
        """Per state, max |a_jaxsim - a_jaxmb| / max |a_jaxmb|, jaxsim's accelerations mapped back by name."""
        try:
            a_sim = np.asarray(f_sim(*sim_args))
        except Exception as e:
            raise SystemExit(f"jaxsim_peer: jaxsim's forward_dynamics_aba failed on {name}: "
                             f"{type(e).__name__}: {e}") from e
        a_jm = np.asarray(f_jm(*jm_args))
        a_back = np.empty_like(a_sim)
        a_back[:, v_index] = a_sim
        deviation = np.abs(a_back - a_jm).max(1) / np.abs(a_jm).max(1)
        if not np.isfinite(deviation).all():
            raise SystemExit(f"jaxsim_peer: jaxsim's accelerations on {name} are not finite")
        return deviation

    info = {"jaxsim": jaxsim.__version__, "dofs": int(sim.dofs()), "links": int(sim.number_of_links())}
    rows = []
    for b in batches:
        jm_args = states(b, jax.random.PRNGKey(b))
        sim_args = to_sim(*jm_args)
        c_sim, f_sim = compile_time(jax.jit(jax.vmap(jaxsim_fd)), *sim_args)
        c_jm, f_jm = compile_time(jaxmb.jit(jax.vmap(jaxmb_fd)), *jm_args)
        deviation = relative_deviation(jm_args, sim_args, f_sim, f_jm)
        t_sim, t_jm = alternating_best_times((f_sim, sim_args), (f_jm, jm_args))
        row = dict(robot=name, dtype=jnp.dtype(dtype).name, batch=b, jaxsim_states_per_s=b / t_sim,
                   jaxmb_states_per_s=b / t_jm, ratio_jaxmb_vs_jaxsim=t_sim / t_jm, jaxsim_compile_s=c_sim,
                   jaxmb_compile_s=c_jm, max_relative_deviation=float(deviation.max()),
                   median_relative_deviation=float(np.median(deviation)))
        rows.append(row)
        print(f"  {row['dtype']} batch {b:7d}: jaxsim ABA {b / t_sim:10.4g} states/s (compile {c_sim:5.1f} s), "
              f"jaxmb ABA {b / t_jm:10.4g} states/s (compile {c_jm:5.1f} s): jaxmb x{t_sim / t_jm:.2f} of jaxsim; "
              f"accelerations agree to {deviation.max():.1e} (max), {np.median(deviation):.1e} (median)", flush=True)
        if checkpoint is not None:
            checkpoint(rows, info)
    return rows, info


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", default="talos_full_v2")
    ap.add_argument("--batches", nargs="*", type=int, default=[1024, 4096])
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    # Before JAX and jaxsim are imported: jaxsim enables x64 at import unless told not to, and rod refuses
    # sdformat 12 at import (see the module docstring).
    os.environ["JAX_ENABLE_X64"] = "1" if args.dtype == "float64" else "0"
    os.environ.setdefault("ROD_SKIP_SDFORMAT_CHECK", "1")
    try:
        import jaxsim  # noqa: F401
    except Exception as e:
        raise SystemExit(f"jaxsim_peer: jaxsim does not import: {type(e).__name__}: {e}") from e
    import jax.numpy as jnp

    from common import machine, save

    def checkpoint(rows, info):
        return save("jaxsim", {"machine": machine(), "peer": info, "results": rows})

    rows, info = run(args.robot, args.batches, jnp.dtype(args.dtype), None if args.no_save else checkpoint)
    if not args.no_save:
        print("saved", checkpoint(rows, info))


if __name__ == "__main__":
    main()
