"""MuJoCo's soft constraints in the Newton solver (`jaxmb.sim.impedance`), with MuJoCo itself as the oracle.

* The rows: at states where contacts and limits are engaged, each row's stiffness ``D`` and target ``v_star`` equal
  MuJoCo's ``efc_D`` and ``efc_vel + dt efc_aref`` to 1e-12 (a contact's tangent rows up to the turn of its frame
  about the normal): two geoms of different ``solref``, ``solimp``,
  ``solmix``, margins and gaps (MuJoCo's mixing), limits with their own ``solreflimit``, ``solimplimit`` and margin,
  joint friction, both cones and an ``impratio`` on the pyramid.
* Trajectories: a sphere and a box landing while sliding and spinning, and a two-hinge arm started outside both its
  ranges, follow ``mj_step`` (Euler, the file's defaults, MuJoCo's solver tolerance at round-off) over hundreds of
  steps to 1e-8, on both cones: the rest pose is MuJoCo's.
* A hopper with damped joints, springs, a margin and limits engaged from the start follows ``mj_step`` through its
  landing to 1e-12 over 400 steps (Euler), and MuJoCo's RK4 to 1e-9.
* RK4: the arm's limits follow MuJoCo's RK4 to 1e-10; free and ball joints, spinning in free flight and landing,
  follow it to 1e-13 and 1e-10; steps in contact equal the Runge-Kutta-Munthe-Kaas stages on MuJoCo's own stage
  accelerations to 1e-12.
* The impedance ``d(r)`` against MuJoCo's ``efc_KBIP`` (its third column) over a sweep of penetrations, and
  `reference_weights` against MuJoCo's ``body_invweight0`` and ``dof_invweight0``.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from checks import assert_close  # noqa: E402

from jaxmb import sim  # noqa: E402
from jaxmb.errors import ModelError  # noqa: E402
from jaxmb.sim.constraints import constraint_forces  # noqa: E402
from jaxmb.sim.impedance import impedance, reference_weights, with_mujoco_impedance  # noqa: E402
from jaxmb.sim.stages import kinematics, step_factors  # noqa: E402
from jaxmb.sim.mjcf_impedance import mujoco_impedance  # noqa: E402

DT = 0.002

SPHERE = """<mujoco><option timestep="0.002" cone="{cone}" integrator="Euler" impratio="{impratio}"/>
<worldbody><geom name="floor" type="plane" size="5 5 .1" friction="0.6" solref="0.03 0.9" solimp="0.8 0.97 0.002 0.4 3"
  solmix="2" margin="0.004" gap="0.001"/>
<body pos="0 0 0.12"><freejoint/><geom type="sphere" size="0.1" mass="1.3" friction="0.6" solref="0.015 1.1"
  solimp="0.85 0.93 0.003 0.6 1.5" margin="0.006" gap="0.002"/></body></worldbody></mujoco>"""

BOX = """<mujoco><option timestep="0.002" cone="{cone}" integrator="Euler" tolerance="1e-15"/>
<worldbody><geom type="plane" size="5 5 .1" friction="0.7"/>
<body pos="0 0 0.08"><freejoint/><geom type="box" size="0.1 0.07 0.05" mass="1.2"/></body></worldbody></mujoco>"""

ARM = """<mujoco><option timestep="0.002" cone="{cone}" integrator="Euler" tolerance="1e-15"/>
<worldbody><body pos="0 0 1">
<joint name="shoulder" axis="0 1 0" range="-30 30" solreflimit="0.01 0.8" solimplimit="0.8 0.9 0.01 0.5 2"
  margin="0.01" frictionloss="0.05"/>
<geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="1"/>
<body pos="0.4 0 0"><joint name="elbow" axis="0 1 0" range="-10 60"/>
<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5"/></body></body></worldbody></mujoco>"""


HOPPER = """<mujoco><option timestep="0.002" integrator="{integrator}" tolerance="1e-15" cone="{cone}"/>
<default><joint damping="0.3" armature="0.01" limited="true"/><geom friction="0.9" solimp=".9 .95 .001" solref=".02 1"/>
<motor ctrlrange="-1 1" ctrllimited="true"/></default>
<worldbody><geom name="floor" type="plane" size="20 20 .1"/>
<body name="torso" pos="0 0 1.25">
 <joint name="rootx" type="slide" axis="1 0 0" limited="false" damping="0" armature="0"/>
 <joint name="rootz" type="slide" axis="0 0 1" limited="false" damping="0" armature="0"/>
 <joint name="rooty" type="hinge" axis="0 1 0" limited="false" damping="0" armature="0"/>
 <geom name="torso" type="capsule" fromto="0 0 0.2 0 0 -0.2" size="0.05"/>
 <body name="thigh" pos="0 0 -0.2">
  <joint name="thigh" axis="0 -1 0" range="-150 0" stiffness="4" springref="-20"/>
  <geom type="capsule" fromto="0 0 0 0 0 -0.45" size="0.05"/>
  <body name="leg" pos="0 0 -0.45">
   <joint name="leg" axis="0 -1 0" range="-150 0"/>
   <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.04"/>
   <body name="foot" pos="0 0 -0.5">
    <joint name="foot" axis="0 -1 0" range="-45 45" stiffness="2" springref="5"/>
    <geom name="foot" type="capsule" fromto="-0.13 0 -0.04 0.26 0 -0.04" size="0.06" margin="0.005"/>
 </body></body></body></body></worldbody>
<actuator><motor joint="thigh" gear="200"/><motor joint="leg" gear="200"/><motor joint="foot" gear="200"/></actuator>
</mujoco>"""
"""A planar hopper: its thigh and leg start at the end of their ranges, damped joints (implicit in MuJoCo's
Euler), springs on the thigh and the foot, a margin on the foot, motors driven by sines."""


def scene_of(xml, cone):
    mj = mujoco.MjModel.from_xml_string(xml)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = sim.load_mjcf_scene(mj, solver="newton", cone=cone, iterations=100, tolerance=1e-14)
    return mj, loaded, mujoco_impedance(mj, loaded.scene, loaded.mujoco_map, loaded.geom_ids)


def rows_at(scene, q, qd):
    """``(D, v_star)`` of the Newton solver's rows at ``(q, qd)``."""
    ab = step_factors(scene.model, q, qd, jnp.zeros_like(qd), None)
    prob = constraint_forces(scene, scene.model, q, qd, DT, jnp.zeros(scene.rows), kinematics(scene, q), ab).problem
    return prob.D, prob.v_star


@pytest.mark.parametrize("cone, impratio", [("elliptic", 1.0), ("pyramidal", 1.0), ("pyramidal", 3.0)])
def test_contact_rows_are_mujocos(cone, impratio):
    """A sphere 2 mm into the floor, sliding, spinning and sinking: its rows' ``D`` and ``v_star`` are MuJoCo's."""
    mj, loaded, scene = scene_of(SPHERE.format(cone=cone, impratio=impratio), cone)
    d = mujoco.MjData(mj)
    d.qpos[2] = 0.098
    d.qvel[:] = [0.8, -0.3, -0.4, 1.5, 2.0, -3.0]
    mujoco.mj_forward(mj, d)
    m = loaded.mujoco_map
    q = jnp.asarray(m.qpos_to_q(d.qpos))
    D, v_star = rows_at(scene, q, jnp.asarray(m.qvel_to_qd(q, d.qvel)))
    theirs = d.efc_vel + DT * d.efc_aref
    assert d.nefc == D.shape[0]
    assert_close(D, d.efc_D, 1e-12, scale=np.abs(d.efc_D).max())
    # the contact frames' tangents differ by a turn about the normal: the cone's tangent rows agree in length, the
    # pyramid's edges as a set
    if cone == "elliptic":
        assert_close(v_star[0], theirs[0], 1e-12)
        assert_close(jnp.linalg.norm(v_star[1:]), np.linalg.norm(theirs[1:]), 1e-12)
    else:
        assert_close(jnp.sort(v_star), np.sort(theirs), 1e-12)


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_limit_and_friction_rows_are_mujocos(cone):
    """The arm outside both ranges (the shoulder within its margin too), moving: the limit rows (MuJoCo's order:
    friction, then limits) and the shoulder's friction row are MuJoCo's."""
    mj, loaded, scene = scene_of(ARM.format(cone=cone), cone)
    d = mujoco.MjData(mj)
    d.qpos[:] = [0.53, -0.4]
    d.qvel[:] = [0.5, -1.0]
    mujoco.mj_forward(mj, d)
    m = loaded.mujoco_map
    q = jnp.asarray(m.qpos_to_q(d.qpos))
    D, v_star = rows_at(scene, q, jnp.asarray(m.qvel_to_qd(q, d.qvel)))
    # jaxmb's rows: limits (shoulder, elbow), then friction; MuJoCo's: friction, then the limits
    order = np.array([2, 0, 1])
    assert d.nefc == 3
    assert_close(D[order], d.efc_D, 1e-12, scale=np.abs(d.efc_D).max())
    assert_close(v_star[order], d.efc_vel + DT * d.efc_aref, 1e-12)


def follows_mujoco(xml, cone, qpos, qvel, steps):
    """The largest difference of ``q`` from MuJoCo's over ``steps`` steps of the file's integrator from ``(qpos,
    qvel)``, and the final configurations."""
    mj, loaded, scene = scene_of(xml.format(cone=cone), cone)
    d = mujoco.MjData(mj)
    d.qpos[:] = qpos
    d.qvel[:] = qvel
    m = loaded.mujoco_map
    q = jnp.asarray(m.qpos_to_q(d.qpos))
    _, states = jax.jit(sim.rollout, static_argnames="steps")(
        scene, sim.init_state(scene, q, jnp.asarray(m.qvel_to_qd(q, d.qvel))), DT, steps=steps)
    worst = 0.0
    for i in range(steps):
        mujoco.mj_step(mj, d)
        worst = max(worst, float(np.abs(np.asarray(states.q[i]) - m.qpos_to_q(d.qpos)).max()))
    return worst, np.asarray(states.q[-1]), m.qpos_to_q(d.qpos)


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_sphere_and_box_landing_while_sliding_and_spinning_follow_mj_step(cone):
    """A sphere (one contact, the mixed numbers of the two geoms) and a box (four corners, the file's defaults)
    dropped while sliding and spinning: their configurations stay within 1e-8 of MuJoCo's over 400 steps, through
    the landing, the slide and the rest."""
    worst, *_ = follows_mujoco(SPHERE.replace("{impratio}", "1"), cone, [0, 0, 0.12, 1, 0, 0, 0],
                               [1.1, 0.3, -0.5, 2.0, -5.5, 3.0], 400)
    assert worst < 1e-8, worst
    worst, ours, theirs = follows_mujoco(BOX, cone, [0, 0, 0.08, 1, 0, 0, 0], [1.1, 0, 0, 0, 0, 5.5], 400)
    assert worst < 1e-8, worst


def test_arm_started_outside_its_ranges_follows_mj_step():
    """The two-hinge arm from 0.7 rad (the shoulder's range ends at 0.52) and -0.4 (the elbow's at -0.17): the
    limits push it back as MuJoCo's do, to 1e-10 over 1000 steps."""
    worst, *_ = follows_mujoco(ARM, "pyramidal", [0.7, -0.4], [0.5, 1.0], 1000)
    assert worst < 1e-10, worst


def test_rk4_with_limits_follows_mujocos_rk4():
    """Under RK4 MuJoCo solves its constraints at each of the four stages: the arm pushed back by its limits follows
    MuJoCo's RK4 to 1e-10 over 500 steps."""
    worst, *_ = follows_mujoco(ARM.replace('integrator="Euler"', 'integrator="RK4"'), "pyramidal", [0.7, -0.4],
                               [0.5, 1.0], 500)
    assert worst < 1e-10, worst


def hopper_error(integrator, cone, steps):
    """The largest difference of the hopper's ``q`` from MuJoCo's after each step (steps,), dropped from 3 cm
    below its rest height under the sines."""
    mj = mujoco.MjModel.from_xml_string(HOPPER.format(integrator=integrator, cone=cone))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = sim.load_mjcf_scene(mj, iterations=100, tolerance=1e-14)
    d = mujoco.MjData(mj)
    d.qpos[1] = -0.03
    m, scene = loaded.mujoco_map, loaded.scene
    t = np.arange(steps) * DT
    ctrls = np.stack([0.3 * np.sin(7 * t), 0.4 * np.sin(5 * t + 1), 0.2 * np.cos(9 * t)], -1)
    _, states = jax.jit(sim.rollout)(scene, sim.init_state(scene, jnp.asarray(m.qpos_to_q(d.qpos))), DT,
                                     ctrls=jnp.asarray(ctrls))
    errors = []
    for i in range(steps):
        d.ctrl[:] = ctrls[i]
        mujoco.mj_step(mj, d)
        errors.append(float(np.abs(np.asarray(states.q[i]) - m.qpos_to_q(d.qpos)).max()))
    assert d.ncon > 0  # it landed
    return np.asarray(errors)


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_hopper_with_damping_springs_margins_and_limits_follows_mj_step(cone):
    """The hopper lands, hops and falls under its motors with MuJoCo's Euler (the joints' damping implicit, the
    soft rows solved on ``M``): within 1e-12 of MuJoCo over 400 steps on either cone."""
    errors = hopper_error("Euler", cone, 400)
    assert errors.max() < 1e-12, errors.max()


def test_hopper_follows_mujocos_rk4():
    """Under RK4 the hopper follows MuJoCo's RK4 to 1e-9 over 400 steps: its landing, and its fall onto its own
    torso (a capsule-capsule contact, one point as MuJoCo's narrow phase takes it)."""
    errors = hopper_error("RK4", "pyramidal", 400)
    assert errors.max() < 1e-9, errors.max()


def test_hopper_follows_mujocos_implicit():
    """Under MuJoCo's ``implicit`` (``implicit_coriolis``: the damping, the servos' velocity gains and the Coriolis
    forces' velocity derivative in the step) the hopper follows ``mj_step`` to 1e-12 over 400 steps."""
    errors = hopper_error("implicit", "elliptic", 400)
    assert errors.max() < 1e-12, errors.max()


SPINNING = """<mujoco><option timestep="0.002" integrator="implicit" tolerance="1e-15"/><worldbody>
<body pos="0 0 0.3"><freejoint/><inertial pos="0.02 -0.01 0.03" mass="1.2" diaginertia="0.011 0.019 0.027"/>
<geom type="box" size="0.1 0.07 0.05"/>
<body pos="0.1 0 0"><joint type="ball" damping="0.05"/><geom type="capsule" fromto="0 0 0 0.2 0.1 0" size="0.03"
  mass="0.4"/></body></body></worldbody></mujoco>"""


def test_spinning_free_body_with_a_ball_joint_follows_mujocos_implicit():
    """A free body with an offset centre of mass and a damped ball-jointed arm, spinning fast in flight: under
    MuJoCo's ``implicit`` its motion follows ``mj_step`` to 1e-12 over 200 steps, where the Coriolis forces'
    derivative couples every coordinate (MuJoCo's ``implicitfast``, which leaves it out, ends over 1e-4 away)."""
    d0 = np.r_[0, 0, 0.3, 1, 0, 0, 0, 0.9, 0.1, 0.3, 0.2]
    d0[7:] /= np.linalg.norm(d0[7:])
    v0 = [0.4, -0.2, 0.3, 3.0, -7.0, 5.0, 2.0, -4.0, 6.0]
    worst, ours, implicit = follows_mujoco(SPINNING, "elliptic", d0, v0, 200)
    assert worst < 1e-12, worst
    mj = mujoco.MjModel.from_xml_string(SPINNING.replace('integrator="implicit"', 'integrator="implicitfast"'))
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:] = d0, v0
    for _ in range(200):
        mujoco.mj_step(mj, d)
    assert np.abs(sim.load_mjcf_scene(mj).mujoco_map.qpos_to_q(d.qpos) - implicit).max() > 1e-4


def _dexp_inverse(r, w):
    """SO(3)'s ``dexp^-1_r(w)``, in numpy."""
    t = np.linalg.norm(r)
    c = 1 / 12 if t < 1e-6 else (1 - t / 2 / np.tan(t / 2)) / t**2
    return w + 0.5 * np.cross(r, w) + c * np.cross(r, np.cross(r, w))


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_rk4_steps_in_contact_are_munthe_kaas_stages_on_mujocos_accelerations(cone):
    """Ten RK4 steps of the sphere sliding and spinning on the floor equal the classical tableau as
    Runge-Kutta-Munthe-Kaas stages (stage ``i`` at ``mj_integratePos(qpos, theta_i)``, the ball's rate
    ``dexp^-1_theta(w)``) on MuJoCo's own ``mj_forward`` accelerations at every stage, to 1e-12; and ``mj_step``'s
    RK4, which takes those stages: to 1e-12 on the pyramidal cone, and on the elliptic one as far as MuJoCo's Newton
    solver converges inside ``mj_step`` (it stops on the cost's improvement, which is quadratic in the
    accelerations' error: seen 7e-10 over these steps, where ``mj_forward`` at each stage agrees to round-off)."""
    xml = SPHERE.replace("{impratio}", "1").replace('integrator="Euler"', 'integrator="RK4" tolerance="1e-15"')
    mj, loaded, scene = scene_of(xml.format(cone=cone), cone)
    m = loaded.mujoco_map
    d = mujoco.MjData(mj)
    d.qpos[:] = [0.01, -0.02, 0.095, 0.9, 0.1, -0.2, 0.3]
    d.qpos[3:] /= np.linalg.norm(d.qpos[3:])
    d.qvel[:] = [1.1, 0.3, -0.2, 2.0, -5.5, 3.0]

    def qacc(qpos, qvel):
        e = mujoco.MjData(mj)
        e.qpos[:], e.qvel[:] = qpos, qvel
        mujoco.mj_forward(mj, e)
        return e.qacc.copy()

    def moved(qpos, theta):
        qpos = qpos.copy()
        mujoco.mj_integratePos(mj, qpos, theta, 1.0)
        return qpos

    def rate(theta, qvel):
        return np.r_[qvel[:3], _dexp_inverse(theta[3:], qvel[3:])]

    qpos, qvel = d.qpos.copy(), d.qvel.copy()
    q = jnp.asarray(m.qpos_to_q(qpos))
    ours = sim.init_state(scene, q, jnp.asarray(m.qvel_to_qd(q, qvel)))
    step = jax.jit(lambda s: sim.step(scene, s, None, DT))
    for _ in range(10):
        K, F = [qvel], [qacc(qpos, qvel)]
        for c in (0.5, 0.5, 1.0):
            theta, v = c * DT * K[-1], qvel + c * DT * F[-1]
            K.append(rate(theta, v))
            F.append(qacc(moved(qpos, theta), v))
        qpos = moved(qpos, DT * (K[0] + 2 * K[1] + 2 * K[2] + K[3]) / 6)
        qvel = qvel + DT * (F[0] + 2 * F[1] + 2 * F[2] + F[3]) / 6
        ours = step(ours)
        mujoco.mj_step(mj, d)
        assert d.ncon
        assert_close(ours.q, m.qpos_to_q(qpos), 1e-12)
        assert_close(ours.qd, m.qvel_to_qd(ours.q, qvel), 1e-12)
        within = 1e-12 if cone == "pyramidal" else 1e-9
        assert_close(ours.q, m.qpos_to_q(d.qpos), within)
        assert_close(ours.qd, m.qvel_to_qd(ours.q, d.qvel), within)


TUMBLING = """<mujoco><option timestep="0.002" integrator="RK4"/><worldbody>
<body pos="0 0 1"><freejoint/><geom type="box" size="0.1 0.07 0.05" mass="1.2"/></body>
<body pos="1 0 1"><joint type="ball"/><geom type="capsule" fromto="0 0 0 0.3 0.1 -0.2" size="0.03" mass="1"/>
<body pos="0.3 0.1 -0.2"><joint type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.5"/></body></body></worldbody></mujoco>"""


def test_free_and_ball_joints_follow_mujocos_rk4():
    """A box tumbling in free flight and a ball-and-hinge pendulum, both spinning fast, follow MuJoCo's RK4 to 1e-13
    over 200 steps (measured 8e-15); the box sliding and spinning into the floor (four corners, the elliptic cone) to
    1e-10 over 400 (measured 1e-12), as far as MuJoCo's Newton solver converges inside ``mj_step``."""
    d0 = np.r_[0, 0, 1, 1, 0, 0, 0, 0.9, 0.1, 0.3, 0.2, 0.4]
    d0[7:11] /= np.linalg.norm(d0[7:11])
    worst, *_ = follows_mujoco(TUMBLING, "elliptic", d0, [1.1, 0.3, -0.5, 2.0, -5.5, 3.0, 1.0, -2.0, 3.0, 1.5], 200)
    assert worst < 1e-13, worst
    worst, *_ = follows_mujoco(BOX.replace('integrator="Euler"', 'integrator="RK4"'), "elliptic",
                               [0, 0, 0.08, 1, 0, 0, 0], [1.1, 0, 0, 0, 0, 5.5], 400)
    assert worst < 1e-10, worst


def test_impedance_equals_mujocos_over_a_sweep_of_penetrations():
    """``d(r)`` of the sphere's mixed ``solimp`` (power 2.25, its midpoint, saturation past the width) at 40
    depths equals MuJoCo's ``efc_KBIP[:, 2]``."""
    mj, loaded, scene = scene_of(SPHERE.format(cone="elliptic", impratio=1), "elliptic")
    d = mujoco.MjData(mj)
    ours, theirs = [], []
    for depth in np.linspace(-0.004, 0.006, 40):
        d.qpos[2] = 0.1 - depth
        mujoco.mj_forward(mj, d)
        if d.ncon:
            theirs.append(d.efc_KBIP[0, 2])
            ours.append(float(impedance(scene.impedance.contact_solimp[0],
                                        d.contact.dist[0] - (scene.impedance.contact_margin[0]
                                                             - scene.impedance.contact_gap[0]))))
    assert len(ours) > 30
    assert_close(np.array(ours), np.array(theirs), 1e-14)


def test_reference_weights_are_mujocos_invweight0():
    """`reference_weights` of the arm at ``qpos0`` equals MuJoCo's ``body_invweight0[:, 0]`` and
    ``dof_invweight0``."""
    mj = mujoco.MjModel.from_xml_string(ARM.format(cone="pyramidal"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = sim.load_mjcf_scene(mj, solver="newton")
    m = loaded.mujoco_map
    body, dof = reference_weights(loaded.scene.tree, jnp.asarray(m.qpos_to_q(mj.qpos0)))
    index = np.asarray(m.body_index)[1:]
    assert_close(body[index], mj.body_invweight0[1:, 0], 1e-12)
    assert_close(dof[np.asarray(m.v_index)], mj.dof_invweight0, 1e-12)


def test_mujoco_rows_need_the_newton_solver_and_an_elliptic_impratio_of_one():
    mj, loaded, _ = scene_of(SPHERE.format(cone="elliptic", impratio=1), "elliptic")
    with pytest.raises(ModelError, match="impratio 2.0"):
        with_mujoco_impedance(loaded.scene, impratio=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pgs = sim.load_mjcf_scene(mj, solver="pgs", drop="margins").scene  # jaxmb's rule has no margins
    with pytest.raises(ModelError, match="solver='newton'"):
        with_mujoco_impedance(pgs)
