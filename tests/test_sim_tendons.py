"""Fixed tendons (`jaxmb.sim.tendons`) against MuJoCo on a three-link arm written for these tests: a tendon that
couples the two outer hinges (``j2 - 0.7 j3``) with a range that the start engages, a spring with a dead band,
damping, friction loss and its own ``solref``, ``solimp`` and margin, driven by a position servo; and a tendon on
the two inner hinges (``0.5 j1 - 0.3 j2``, one with a ``ref``) with damping and armature, driven by a motor.

* ``lengths`` and ``moments`` equal ``ten_length`` and ``ten_J`` to 1e-12 at random states; the tendons' passive
  forces equal ``qfrc_passive`` and the actuators' forces ``qfrc_actuator`` to 1e-12.
* The rows: the tendon limit and friction rows' ``D`` and ``v_star`` equal MuJoCo's ``efc_D`` and ``efc_vel + dt
  efc_aref`` to 1e-12.
* Trajectories from the engaged limit follow ``mj_step`` over 50 steps with the file's Newton solver and MuJoCo's
  soft constraints: Euler (tendon damping explicit) to 1e-12, implicitfast (the tendons' damping and the servo's
  velocity gain in the step, ``M + J* (armature + dt B) J``; the tendon without friction) to 1e-12; each RK4 step along MuJoCo's trajectory is MuJoCo's to
  1e-11.
* jaxmb's rule on both solvers: one step against the tendon's bound gives the closed-form impulse of one row.
* The reverse-mode derivative of a short rollout with respect to a tendon's stiffness leaf equals central
  differences to 1e-7.
* A spatial tendon that wraps a geom is refused by name until ``drop="spatial tendons"`` (spatial tendons through
  sites only: `tests/test_sim_spatial_tendons.py`); bad tendons are `ModelError`s.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from checks import assert_close, fast_jit  # noqa: E402

from jaxmb import sim  # noqa: E402
from jaxmb.errors import ModelError  # noqa: E402
from jaxmb.sim.actuators import actuator_forces, on_tendon  # noqa: E402
from jaxmb.sim.constraints import constraint_forces  # noqa: E402
from jaxmb.sim.stages import kinematics, step_factors  # noqa: E402
from jaxmb.sim.tendons import fixed_tendon, lengths, moments, passive_forces  # noqa: E402

ARM = """<mujoco model="tendon arm"><option timestep="0.002" integrator="{integrator}" tolerance="1e-15"
  iterations="100"/>
<default><geom contype="0" conaffinity="0"/></default>
<worldbody><body pos="0 0 1"><joint name="j1" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="1"/>
<body pos="0.4 0 0"><joint name="j2" axis="0 1 0" ref="0.3"/>
<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5"/>
<body pos="0.3 0 0"><joint name="j3" axis="0 1 0" range="-90 90"/>
<geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.02" mass="0.3"/></body></body></body></worldbody>
<tendon>
<fixed name="couple" limited="true" range="-0.4 0.5" stiffness="3" springlength="0.05 0.15" damping="0.2"
  frictionloss="0.03" solreflimit="0.01 0.9" solimplimit="0.85 0.95 0.002 0.5 2" margin="0.01"
  solreffriction="0.03 1.1"><joint joint="j2" coef="1"/><joint joint="j3" coef="-0.7"/></fixed>
<fixed name="drive" damping="0.1" armature="0.02"><joint joint="j1" coef="0.5"/><joint joint="j2" coef="-0.3"/></fixed>
</tendon>
<actuator><motor name="motor" tendon="drive" gear="2" ctrlrange="-1 1" ctrllimited="true"/>
<position name="servo" tendon="couple" kp="20" kv="0.5" gear="1.5"/></actuator>
</mujoco>"""

START = dict(qpos=[0.2, 0.6, 0.1], qvel=[0.5, 1.0, -1.0], ctrl=[0.4, 0.3])  # "couple" at 0.53, past its range
STEPS = 50


def loaded(integrator="Euler", source=ARM):
    mj = mujoco.MjModel.from_xml_string(source.format(integrator=integrator))
    return mj, sim.load_mjcf_scene(mj)


NO_FRICTION = ARM.replace(' frictionloss="0.03"', "")
NO_ARMATURE = ARM.replace(' armature="0.02"', "")


def dense_ten_J(mj, d):
    """MuJoCo's ``ten_J`` (nt, nv) from its sparse rows."""
    out = np.zeros((mj.ntendon, mj.nv))
    for t in range(mj.ntendon):
        a, n = mj.ten_J_rowadr[t], mj.ten_J_rownnz[t]
        out[t, mj.ten_J_colind[a:a + n]] = d.ten_J[a:a + n]
    return out


def random_states(mj, m, count=4, seed=0):
    rng = np.random.default_rng(seed)
    d = mujoco.MjData(mj)
    for _ in range(count):
        d.qpos[:] = rng.uniform(-1, 1, mj.nq)
        d.qvel[:] = rng.uniform(-1, 1, mj.nv)
        d.ctrl[:] = rng.uniform(-1.5, 1.5, mj.nu)
        mujoco.mj_forward(mj, d)
        q = m.qpos_to_q(d.qpos)
        yield d, jnp.asarray(q), jnp.asarray(m.qvel_to_qd(q, d.qvel))


def test_lengths_and_moments_are_mujocos_ten_length_and_ten_J():
    mj, s = loaded()
    ten, m = s.scene.tendons, s.mujoco_map
    assert ten.names == ("couple", "drive") and ten.limited == (0,) and ten.friction == (0,)
    for d, q, _ in random_states(mj, m):
        assert_close(lengths(ten, q), d.ten_length, 1e-12)
        assert_close(np.asarray(moments(ten)) @ m.P, dense_ten_J(mj, d), 1e-12)


def test_passive_and_actuator_forces_are_mujocos():
    """No joint has damping or a spring: ``qfrc_passive`` is the tendons' (the spring outside its dead band at
    most states), and both actuators drive tendons."""
    mj, s = loaded()
    sc, m = s.scene, s.mujoco_map
    springs = 0
    for d, q, qd in random_states(mj, m, 6):
        springs += int(not 0.05 <= d.ten_length[0] <= 0.15)
        assert_close(m.P.T @ np.asarray(passive_forces(sc.tendons, q, qd)), d.qfrc_passive, 1e-12)
        ctrl = jnp.asarray(d.ctrl[list(s.actuator_ids)])
        tau = actuator_forces(sc.actuators, q, qd, ctrl, sc.tendons)
        assert_close(m.P.T @ np.asarray(tau), d.qfrc_actuator, 1e-12)
    assert springs >= 3


def test_tendon_limit_and_friction_rows_are_mujocos():
    """At the start the coupling tendon is past its upper bound and moving: its limit and friction rows (MuJoCo's
    order: friction, then the limit) have MuJoCo's ``D`` and targets; the hinge's limit row, far from its range,
    carries none."""
    mj, s = loaded()
    sc, m = s.scene, s.mujoco_map
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:] = START["qpos"], START["qvel"]
    mujoco.mj_forward(mj, d)
    q = jnp.asarray(m.qpos_to_q(d.qpos))
    qd = jnp.asarray(m.qvel_to_qd(q, d.qvel))
    ab = step_factors(sc.model, q, qd, jnp.zeros_like(qd), None)
    prob = constraint_forces(sc, sc.model, q, qd, s.dt, jnp.zeros(sc.rows), kinematics(sc, q), ab).problem
    assert list(d.efc_type) == [mujoco.mjtConstraint.mjCNSTR_FRICTION_TENDON, mujoco.mjtConstraint.mjCNSTR_LIMIT_TENDON]
    ours = np.asarray([2, 1])  # rows: the hinge's limit, the tendon's limit, the tendon's friction
    assert float(prob.D[0]) == 0.0
    assert_close(prob.D[ours], d.efc_D, 1e-12, scale=np.abs(d.efc_D).max())
    assert_close(prob.v_star[ours], d.efc_vel + s.dt * d.efc_aref, 1e-12)
    J_t = np.asarray(moments(sc.tendons))[0]
    assert_close(prob.J[ours], np.stack([J_t, -J_t]), 1e-15)  # friction along the tendon; the upper limit against it


rollout = fast_jit(sim.rollout, static_argnames=("steps",))


def mujoco_trajectory(mj, m, steps=STEPS):
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:], d.ctrl[:] = START["qpos"], START["qvel"], START["ctrl"]
    out = []
    for _ in range(steps):
        mujoco.mj_step(mj, d)
        out.append(m.qpos_to_q(d.qpos))
    return np.asarray(out)


@pytest.mark.parametrize("integrator, source, tol", [("Euler", ARM, 1e-12), ("implicitfast", NO_FRICTION, 1e-12)])
def test_scene_follows_mj_step_from_the_engaged_limit(integrator, source, tol):
    """50 steps from the engaged limit. Under implicitfast the tendon has no friction: jaxmb's implicit steps solve
    the rows with the implicit terms in the metric (``M + dt D + J* W J``, as for the joints' damping), and a
    sticking friction row's impulse then differs from MuJoCo's, which the file's friction row here makes 1e-3 after
    a few steps (the same holds for a joint's friction row under a joint's damping)."""
    mj, s = loaded(integrator, source)
    sc, m = s.scene, s.mujoco_map
    assert sc.options.integrator == integrator.lower() and sc.options.solver == "newton"
    assert sc.tendons.implicit == (integrator != "Euler")
    q = jnp.asarray(m.qpos_to_q(np.asarray(START["qpos"])))
    qd = jnp.asarray(m.qvel_to_qd(q, np.asarray(START["qvel"])))
    ctrls = jnp.tile(jnp.asarray(START["ctrl"])[np.asarray(s.actuator_ids)], (STEPS, 1))
    _, states = rollout(sc, sim.init_state(sc, q, qd), s.dt, ctrls, steps=STEPS)
    assert_close(states.q, mujoco_trajectory(mj, m), tol)


step = fast_jit(sim.step)


def test_rk4_steps_are_mujocos_along_its_trajectory():
    """Each of 50 RK4 steps along MuJoCo's trajectory from the engaged limit (the rows solved at every stage), started
    from MuJoCo's state, lands on MuJoCo's next state to 1e-11 of the velocities' scale. (A rollout of its own
    parts from MuJoCo's by 1e-5 within 50 steps: the stiff servo and the limits switching on and off within a
    step amplify round-off here.)"""
    mj, s = loaded("RK4")
    sc, m = s.scene, s.mujoco_map
    assert sc.options.integrator == "rk4"
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:], d.ctrl[:] = START["qpos"], START["qvel"], START["ctrl"]
    ctrl = jnp.asarray(START["ctrl"])[np.asarray(s.actuator_ids)]
    ours, theirs = [], []
    for _ in range(STEPS):
        q = jnp.asarray(m.qpos_to_q(d.qpos))
        nxt = step(sc, sim.init_state(sc, q, jnp.asarray(m.qvel_to_qd(q, d.qvel))), ctrl, s.dt)
        mujoco.mj_step(mj, d)
        ours.append(np.concatenate([nxt.q, nxt.qd]))
        theirs.append(np.concatenate([m.qpos_to_q(d.qpos), m.qvel_to_qd(nxt.q, d.qvel)]))
    assert_close(np.asarray(ours), np.asarray(theirs), 1e-11)


@pytest.mark.parametrize("solver", ["pgs", "newton"])
def test_a_tendon_limit_holds_the_arm_with_the_closed_form_impulse(solver):
    """jaxmb's rule on either solver: at rest without gravity, the coupling tendon at its upper bound and a pushing
    generalized force ``qfrc`` and the servo, one step's limit impulse is ``p = -J v_free / ((1 + regularization)
    J M^-1 J*)`` (one row in contact: both solvers' answer) with ``J = -J_t``, ``v_free = dt M^-1 tau``, from the dense
    ``M`` (not the solvers' factored solve or walk), and the velocity after the step is ``v_free + M^-1 J* p``."""
    from jaxmb.dynamics.mass import mass_matrix
    from jaxmb.sim.stages import joint_forces

    mj = mujoco.MjModel.from_xml_string(NO_ARMATURE.format(integrator="Euler"))  # the Gauss-Seidel solver's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = sim.load_mjcf_scene(mj, impedance=None, solver=solver, integrator="euler")
    sc = s.scene
    sc = sc.replace(model=sc.model.replace(gravity=jnp.zeros(3)), tendons=sc.tendons.replace(
        frictionloss=jnp.zeros(2)))
    q = jnp.asarray(s.mujoco_map.qpos_to_q(np.array([0.1, 0.57, 0.1])))
    assert_close(lengths(sc.tendons, q)[0], 0.5, 1e-15)
    qfrc = jnp.asarray(s.mujoco_map.P @ np.array([0.0, 4.0, -1.0]))
    ctrl = jnp.asarray([0.0, 2.0])  # the servo pulls the tendon past its bound
    nxt = step(sc, sim.init_state(sc, q), ctrl, s.dt, qfrc)
    tau = joint_forces(sc, q, jnp.zeros(3), ctrl) + qfrc
    M_inv = np.linalg.inv(np.asarray(mass_matrix(sc.model, q)))
    J = -np.asarray(moments(sc.tendons))[0]
    v_free = s.dt * M_inv @ np.asarray(tau)
    assert J @ v_free < -1e-3  # the free step would cross the bound
    p = -(J @ v_free) / ((1 + float(sc.contact.regularization)) * (J @ M_inv @ J))
    assert_close(nxt.impulse, [0.0, p, 0.0], 1e-12, scale=p)
    assert_close(nxt.qd, v_free + M_inv @ J * p, 1e-12, scale=np.abs(v_free).max())


def test_rollout_gradient_wrt_a_tendon_stiffness_is_central_differences():
    """Eight Euler steps from the engaged limit, the spring stretched past its dead band: the reverse-mode
    derivative of a projection of the final configuration with respect to the coupling tendon's stiffness leaf."""
    _, s = loaded()
    sc, m = s.scene, s.mujoco_map
    q = jnp.asarray(m.qpos_to_q(np.asarray(START["qpos"])))
    qd = jnp.asarray(m.qvel_to_qd(q, np.asarray(START["qvel"])))
    ctrls = jnp.tile(jnp.asarray(START["ctrl"]), (8, 1))
    w = jnp.asarray([0.3, -1.0, 0.7])

    def final(k):
        scene = sc.replace(tendons=sc.tendons.replace(stiffness=sc.tendons.stiffness.at[0].set(k)))
        return sim.rollout(scene, sim.init_state(scene, q, qd), s.dt, ctrls, steps=8)[0].q @ w

    k, h = jnp.asarray(3.0), 1e-4
    reverse = fast_jit(jax.grad(final))(k)
    pair = fast_jit(jax.vmap(final))(jnp.stack([k + h, k - h]))
    fd = (pair[0] - pair[1]) / (2 * h)
    assert abs(float(fd)) > 1e-6
    assert_close(reverse, fd, 1e-7, scale=abs(float(fd)))


SPATIAL = """<mujoco model="spatial"><worldbody><site name="s0"/><geom name="peg" type="sphere" size="0.02"
pos="0.1 0 -0.1"/><site name="side" pos="0.2 0 -0.1"/><body><joint name="a" axis="0 1 0"/>
<site name="s1" pos="0 0 -0.3"/><geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02"/></body></worldbody>
<tendon><spatial name="cable"><site site="s0"/><geom geom="peg" sidesite="side"/><site site="s1"/></spatial>
<fixed name="link"><joint joint="a" coef="2"/></fixed></tendon></mujoco>"""


def test_a_spatial_tendon_that_wraps_a_geom_is_refused_by_name_until_dropped():
    with pytest.raises(ModelError, match=r"spatial tendons .*'cable'.*\(drop 'spatial tendons'\)"):
        sim.load_mjcf_scene(SPATIAL)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = sim.load_mjcf_scene(SPATIAL, drop="spatial tendons")
    assert s.scene.tendons.names == ("link",) and [e.category for e in s.left_out] == ["spatial tendons"]
    assert len(caught) == 1 and "'cable'" in str(caught[0].message)


def test_bad_tendons_and_tendon_actuators_are_model_errors():
    _, s = loaded()
    model = s.scene.model
    with pytest.raises(ModelError, match="tendon 't'.*no joint|tendon 't'.*'nope'"):
        sim.make_scene(model, tendons=[fixed_tendon("t", {"nope": 1.0})])
    with pytest.raises(ModelError, match="tendon 't'.*range must be increasing"):
        sim.make_scene(model, tendons=[fixed_tendon("t", {"j1": 1.0}, range=(1.0, -1.0))])
    with pytest.raises(ModelError, match="actuator 'm'.*no tendon 'u'"):
        sim.make_scene(model, tendons=[fixed_tendon("t", {"j1": 1.0})],
                       actuators=[on_tendon(sim.motor("j1", name="m"), "u")])
    with pytest.raises(ModelError, match="implicitfast integrator takes the damping of tendons \\['t'\\]"):
        sim.make_scene(model, tendons=[fixed_tendon("t", {"j1": 1.0}, damping=1.0)], integrator="implicitfast")
