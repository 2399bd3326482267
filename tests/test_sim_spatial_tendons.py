"""Spatial tendons through sites (`jaxmb.sim.spatial_tendons`) against MuJoCo on a three-link arm written for these
tests, its hinges on three different axes: a tendon from a world site over a site on each link, with a range that
the start engages, a spring with a dead band, damping, friction loss and its own ``solref`` and margin, driven by a
position servo.

* The tendon's length and Jacobian row equal ``ten_length`` and ``ten_J``, its passive forces ``qfrc_passive`` and
  the servo's ``qfrc_actuator``, to 1e-12 at random states.
* The rows at the engaged limit: the limit and friction rows' ``J``, ``D`` and targets equal ``efc_J``, ``efc_D``
  and ``efc_vel + dt efc_aref`` to 1e-12.
* Trajectories from the engaged limit follow ``mj_step`` over 100 steps with the file's Newton solver and MuJoCo's
  soft constraints: Euler and implicitfast (the tendon's damping and the servo's velocity gain in the step; the
  tendon without friction, as for fixed tendons, `tests/test_sim_tendons.py`) to 1e-12; each RK4 step along MuJoCo's
  trajectory is MuJoCo's to 1e-11.
* The reverse-mode derivative of a short rollout with respect to the tendon's stiffness leaf equals central
  differences to 1e-7.
* A hand-built spatial tendon is the file's, and `jaxmb.sim.with_mujoco_impedance` alone gives a hand-built scene
  its tendon and equality rows' numbers; bad spatial tendons are `ModelError`s.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from checks import assert_close, fast_jit  # noqa: E402

from jaxmb import sim  # noqa: E402
from jaxmb.errors import ModelError  # noqa: E402
from jaxmb.sim.actuators import actuator_forces  # noqa: E402
from jaxmb.sim.constraints import constraint_forces  # noqa: E402
from jaxmb.sim.stages import kinematics, step_factors  # noqa: E402
from jaxmb.sim.equality_rows import with_equality_impedance  # noqa: E402
from jaxmb.sim.tendons import lengths, passive_forces, tendon_geometry, with_tendon_impedance  # noqa: E402

ARM = """<mujoco model="spatial arm"><option timestep="0.002" integrator="{integrator}" tolerance="1e-15"
  iterations="100"/>
<default><geom contype="0" conaffinity="0"/></default>
<worldbody><site name="anchor" pos="0.1 0.05 1.2"/>
<body pos="0 0 1"><joint name="j1" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="1"/><site name="a1" pos="0.2 0.03 0.05"/>
<body pos="0.4 0 0"><joint name="j2" axis="0 0.6 0.8"/>
<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5"/><site name="a2" pos="0.15 -0.02 0.04"/>
<body pos="0.3 0 0"><joint name="j3" axis="1 0 0"/>
<geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.02" mass="0.3"/><site name="a3" pos="0.2 0.03 0.02"/>
</body></body></body></worldbody>
<tendon>
<spatial name="cable" limited="true" range="0.2 0.9" stiffness="4" springlength="0.7 0.8" damping="0.3"
  frictionloss="0.02" solreflimit="0.01 0.9" margin="0.005">
<site site="anchor"/><site site="a1"/><site site="a2"/><site site="a3"/></spatial>
</tendon>
<actuator><position name="servo" tendon="cable" kp="15" kv="0.4" gear="1.5"/></actuator>
</mujoco>"""

START = dict(qpos=[0.3, 0.2, 0.1], qvel=[0.5, 1.0, -1.0], ctrl=[0.2])
STEPS = 100
NO_FRICTION = ARM.replace(' frictionloss="0.02"', "")


def loaded(integrator="Euler", source=ARM):
    mj = mujoco.MjModel.from_xml_string(source.format(integrator=integrator))
    return mj, sim.load_mjcf_scene(mj)


def dense_ten_J(mj, d):
    """MuJoCo's ``ten_J`` (nt, nv) from its sparse rows."""
    out = np.zeros((mj.ntendon, mj.nv))
    for t in range(mj.ntendon):
        a, n = mj.ten_J_rowadr[t], mj.ten_J_rownnz[t]
        out[t, mj.ten_J_colind[a:a + n]] = d.ten_J[a:a + n]
    return out


def start_data(mj):
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:], d.ctrl[:] = START["qpos"], START["qvel"], START["ctrl"]
    mujoco.mj_forward(mj, d)
    return d


def state(m, d):
    q = jnp.asarray(m.qpos_to_q(d.qpos))
    return q, jnp.asarray(m.qvel_to_qd(q, d.qvel))


geometry = fast_jit(tendon_geometry)


def test_length_jacobian_passive_and_actuator_forces_are_mujocos():
    """At random states (the spring outside its dead band at most of them)."""
    mj, s = loaded()
    sc, m = s.scene, s.mujoco_map
    assert sc.tendons.names == ("cable",) and sc.tendons.site_body == (-1, 0, 1, 2)
    rng = np.random.default_rng(0)
    d = mujoco.MjData(mj)
    springs = 0
    for _ in range(6):
        d.qpos[:], d.qvel[:], d.ctrl[:] = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 1)
        mujoco.mj_forward(mj, d)
        q, qd = state(m, d)
        geo = geometry(sc, q)
        springs += int(not 0.7 <= d.ten_length[0] <= 0.8)
        assert_close(geo.L, d.ten_length, 1e-12)
        assert_close(np.asarray(geo.J) @ m.P, dense_ten_J(mj, d), 1e-12)
        assert_close(m.P.T @ np.asarray(passive_forces(sc.tendons, q, qd, geo)), d.qfrc_passive, 1e-12)
        tau = actuator_forces(sc.actuators, q, qd, jnp.asarray(d.ctrl), sc.tendons, geo)
        assert_close(m.P.T @ np.asarray(tau), d.qfrc_actuator, 1e-12)
    assert springs >= 3
    with pytest.raises(ModelError, match="spatial tendons depend on the body poses"):
        lengths(sc.tendons, q)


def test_limit_and_friction_rows_are_mujocos():
    """At the start the tendon is past its upper bound and moving: its friction and limit rows (MuJoCo's order;
    jaxmb's: the hinges' rows, the limit, the friction) have MuJoCo's ``J``, ``D`` and targets."""
    mj, s = loaded()
    sc, m = s.scene, s.mujoco_map
    d = start_data(mj)
    assert d.ten_length[0] > 0.9
    q, qd = state(m, d)
    ab = step_factors(sc.model, q, qd, jnp.zeros_like(qd), None)
    prob = constraint_forces(sc, sc.model, q, qd, s.dt, jnp.zeros(sc.rows), kinematics(sc, q), ab).problem
    assert list(d.efc_type) == [mujoco.mjtConstraint.mjCNSTR_FRICTION_TENDON, mujoco.mjtConstraint.mjCNSTR_LIMIT_TENDON]
    ours = np.asarray([1, 0]) + sc.rows - 2
    efc_J = np.asarray(d.efc_J).reshape(d.nefc, mj.nv)
    assert_close(np.asarray(prob.J)[ours] @ m.P, efc_J, 1e-12)
    assert_close(prob.D[ours], d.efc_D, 1e-12, scale=np.abs(d.efc_D).max())
    assert_close(prob.v_star[ours], d.efc_vel + s.dt * d.efc_aref, 1e-12)


rollout = fast_jit(sim.rollout, static_argnames=("steps",))


def mujoco_trajectory(mj, m, steps=STEPS):
    d = start_data(mj)
    out = []
    for _ in range(steps):
        mujoco.mj_step(mj, d)
        out.append(m.qpos_to_q(d.qpos))
    return np.asarray(out)


@pytest.mark.parametrize("integrator, source", [("Euler", ARM), ("implicitfast", NO_FRICTION)])
def test_scene_follows_mj_step_from_the_engaged_limit(integrator, source):
    mj, s = loaded(integrator, source)
    sc, m = s.scene, s.mujoco_map
    assert sc.options.integrator == integrator.lower() and sc.options.solver == "newton"
    q, qd = state(m, start_data(mj))
    ctrls = jnp.tile(jnp.asarray(START["ctrl"]), (STEPS, 1))
    _, states = rollout(sc, sim.init_state(sc, q, qd), s.dt, ctrls, steps=STEPS)
    assert_close(states.q, mujoco_trajectory(mj, m), 1e-12)


step = fast_jit(sim.step)


def test_rk4_steps_are_mujocos_along_its_trajectory():
    """Each of 100 RK4 steps along MuJoCo's trajectory from the engaged limit (the rows solved at every stage),
    started from MuJoCo's state, lands on MuJoCo's next state to 1e-11 of the velocities' scale."""
    mj, s = loaded("RK4")
    sc, m = s.scene, s.mujoco_map
    assert sc.options.integrator == "rk4"
    d = start_data(mj)
    ctrl = jnp.asarray(START["ctrl"])
    ours, theirs = [], []
    for _ in range(STEPS):
        q, qd = state(m, d)
        nxt = step(sc, sim.init_state(sc, q, qd), ctrl, s.dt)
        mujoco.mj_step(mj, d)
        ours.append(np.concatenate([nxt.q, nxt.qd]))
        theirs.append(np.concatenate([m.qpos_to_q(d.qpos), m.qvel_to_qd(nxt.q, d.qvel)]))
    assert_close(np.asarray(ours), np.asarray(theirs), 1e-11)


def test_rollout_gradient_wrt_the_tendon_stiffness_is_central_differences():
    """Twenty Euler steps from the engaged limit, the spring stretched past its dead band: the reverse-mode
    derivative of a projection of the final configuration with respect to the tendon's stiffness leaf."""
    mj, s = loaded()
    sc, m = s.scene, s.mujoco_map
    q, qd = state(m, start_data(mj))
    ctrls = jnp.tile(jnp.asarray(START["ctrl"]), (20, 1))
    w = jnp.asarray([0.3, -1.0, 0.7])

    def final(k):
        scene = sc.replace(tendons=sc.tendons.replace(stiffness=sc.tendons.stiffness.at[0].set(k)))
        return sim.rollout(scene, sim.init_state(scene, q, qd), s.dt, ctrls, steps=20)[0].q @ w

    k, h = jnp.asarray(4.0), 1e-3  # (the rows' solve leaves round-off that smaller steps' differences magnify)
    reverse = fast_jit(jax.grad(final))(k)
    pair = fast_jit(jax.vmap(final))(jnp.stack([k + h, k - h]))
    fd = (pair[0] - pair[1]) / (2 * h)
    assert abs(float(fd)) > 1e-4
    assert_close(reverse, fd, 1e-7, scale=abs(float(fd)))


def test_a_hand_built_spatial_tendon_is_the_files():
    """`jaxmb.sim.spatial_tendon` on the loaded model with the file's sites (in jaxmb's body frames) gives the same
    length and Jacobian row as the file's tendon."""
    mj, s = loaded()
    sc, m = s.scene, s.mujoco_map
    ten = sc.tendons
    names = [None if b < 0 else sc.model.body_names[b] for b in ten.site_body]
    spec = sim.spatial_tendon("cable", zip(names, np.asarray(ten.site_point)), range=(0.2, 0.9), stiffness=4.0,
                              springlength=(0.7, 0.8), damping=0.3, frictionloss=0.02)
    built = sim.make_scene(sc.model, tendons=[spec], solver="newton")
    q, _ = state(m, start_data(mj))
    ours, theirs = geometry(built, q), geometry(sc, q)
    assert_close(ours.L, theirs.L, 1e-15)
    assert_close(ours.J, theirs.J, 1e-15)


def test_with_mujoco_impedance_gives_a_hand_built_scene_its_tendon_and_equality_numbers():
    """One call sets the tendon rows' and the equality rows' numbers, as their own functions do by default."""
    mj, s = loaded()
    sc = s.scene
    tip = sc.model.body_names[-1]
    spec = sim.spatial_tendon("cable", [(None, (0.1, 0.05, 1.2)), (tip, (0.2, 0.03, 0.02))], range=(0.2, 0.9),
                              frictionloss=0.02)
    pin = sim.connect("pin", None, tip, (0.9, 0.0, 1.0), (0.2, 0.0, 0.0))
    built = sim.make_scene(sc.model, tendons=[spec], equalities=[pin], solver="newton")
    once = sim.with_mujoco_impedance(built, solref=(0.03, 1.2))
    by_parts = with_equality_impedance(with_tendon_impedance(built, solref=(0.03, 1.2)), solref=(0.03, 1.2))
    for a, b in zip(jax.tree.leaves((once.tendons, once.equalities)), jax.tree.leaves((by_parts.tendons,
                                                                                        by_parts.equalities))):
        np.testing.assert_array_equal(a, b)
    assert once.tendons.impedance is not None and once.equalities.impedance is not None


def test_bad_spatial_tendons_are_model_errors():
    _, s = loaded()
    model = s.scene.model
    body = model.body_names[0]
    with pytest.raises(ModelError, match="tendon 't'.*at least two sites"):
        sim.make_scene(model, tendons=[sim.spatial_tendon("t", [(body, (0, 0, 0))])])
    with pytest.raises(ModelError, match="tendon 't'.*no body 'nope'"):
        sim.make_scene(model, tendons=[sim.spatial_tendon("t", [(None, (0, 0, 1)), ("nope", (0, 0, 0))])])
    with pytest.raises(ModelError, match="equality 'e'.*'cable' is a spatial tendon"):
        sim.make_scene(model, tendons=[sim.spatial_tendon("cable", [(None, (0, 0, 1)), (body, (0, 0, 0))])],
                       equalities=[sim.tendon_equality("e", "cable")], solver="newton")
    with pytest.raises(ModelError, match="tendon 't'.*three finite numbers"):
        sim.make_scene(model, tendons=[sim.spatial_tendon("t", [(None, (0, 0, 1)), (body, (0, np.nan, 0))])])


def test_wrapping_armature_and_tendon_equalities_are_refused_by_name():
    wrapped = ARM.replace('<site site="a2"/>', '<geom geom="ball"/><site site="a2"/>').replace(
        '<site name="a2"', '<geom name="ball" type="sphere" size="0.01" pos="0.1 0 0.1"/><site name="a2"')
    with pytest.raises(ModelError, match=r"pulleys or wrapping.*'cable'"):
        sim.load_mjcf_scene(wrapped.format(integrator="Euler"))
    with pytest.raises(ModelError, match=r"'cable' \(armature on a spatial tendon\)"):
        sim.load_mjcf_scene(ARM.replace('damping="0.3"', 'damping="0.3" armature="0.1"').format(integrator="Euler"))
    tied = ARM.replace("</mujoco>", '<equality><tendon name="tie" tendon1="cable"/></equality></mujoco>')
    with pytest.raises(ModelError, match=r"'tie' \(on spatial tendons \['cable'\].*\(drop 'equalities'\)"):
        sim.load_mjcf_scene(tied.format(integrator="Euler"))
