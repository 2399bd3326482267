"""Ranges of ball joints (`jaxmb.sim.ball_limits`): the row's distance, Jacobian, ``D`` and target equal MuJoCo's
``efc_pos``, ``efc_J``, ``efc_D`` and ``efc_vel + dt efc_aref``; pendulums on a ball joint with ``range="0 40"``
(started outside the range, and swinging into it, with the joint's own ``solref``, ``solimp`` and ``margin``)
follow ``mj_step`` on the file's Newton solver with MuJoCo's impedance, under RK4 too; jaxmb's Gauss-Seidel and
Newton solvers hold a pendulum at its range; what the scene cannot take is refused."""

import jax.numpy as jnp
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from checks import assert_close, fast_jit  # noqa: E402

from jaxmb import ModelError  # noqa: E402
from jaxmb.joints import spherical  # noqa: E402
from jaxmb.model import ModelBuilder  # noqa: E402
from jaxmb.sim import init_state, load_mjcf_scene, make_scene, rollout  # noqa: E402
from jaxmb.sim.ball_limits import ball_angles  # noqa: E402
from jaxmb.sim.constraints import constraint_forces  # noqa: E402
from jaxmb.sim.stages import kinematics, step_factors  # noqa: E402

PENDULUM = """<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="bob" pos="0 0 1">
      <joint name="ball" type="ball" range="0 40" {numbers}/>
      <geom type="capsule" fromto="0 0 0 0.1 0.05 -0.4" size="0.04"/>
      <geom type="box" size="0.1 0.05 0.02" pos="0.05 0 -0.4" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>"""

NUMBERS = {"default": "", "own": 'solreflimit="0.01 0.8" solimplimit="0.8 0.9 0.01 0.5 2" margin="0.05"'}


def _turned(degrees, axis):
    """The quaternion of a turn by ``degrees`` about ``axis``."""
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    a = np.deg2rad(degrees)
    return np.r_[np.cos(a / 2), np.sin(a / 2) * axis]


@pytest.mark.parametrize("numbers", NUMBERS)
def test_ball_limit_row_is_mujocos(numbers):
    ms = load_mjcf_scene(PENDULUM.format(numbers=NUMBERS[numbers]))
    scene, mj, m = ms.scene, ms.mj, ms.mujoco_map
    assert scene.options.ball_limited == ((0, 0),) and ms.left_out == ()
    assert_close(scene.ball_ranges, [np.deg2rad(40.0)], 1e-15)
    d = mujoco.MjData(mj)
    cases = [(55, (1, 1, 0.3), (0.5, -1.0, 2.0)), (300, (1, -2, 0.5), (0.1, 0.2, -0.3))]  # 300: -60 about the axis
    if numbers == "own":
        cases.append((38, (0, -1, 2), (-2.0, 0.3, 0.1)))  # within the margin, inside the range
    for degrees, axis, qvel in cases:
        d.qpos[:], d.qvel[:] = _turned(degrees, axis), qvel
        mujoco.mj_forward(mj, d)
        q = jnp.asarray(m.qpos_to_q(d.qpos))
        qd = jnp.asarray(m.qvel_to_qd(q, d.qvel))
        dist, _ = ball_angles(scene, q)
        ab = step_factors(scene.model, q, qd, jnp.zeros_like(qd), None)
        prob = constraint_forces(scene, scene.model, q, qd, ms.dt, jnp.zeros(scene.rows), kinematics(scene, q), ab).problem
        assert d.nefc == 1  # past the range or within the margin
        assert_close(dist, d.efc_pos, 1e-12)
        assert_close(prob.J, d.efc_J.reshape(1, 3), 1e-12)
        assert_close(prob.D, d.efc_D, 1e-12, scale=float(np.abs(d.efc_D).max()))
        assert_close(prob.v_star, d.efc_vel + ms.dt * d.efc_aref, 1e-12)


_rollout = fast_jit(lambda scene, state, dt: rollout(scene, state, dt, steps=50))


@pytest.mark.parametrize("start", ["outside", "swinging in"])
@pytest.mark.parametrize("numbers", NUMBERS)
def test_pendulum_on_a_ranged_ball_joint_follows_mj_step(numbers, start):
    ms = load_mjcf_scene(PENDULUM.format(numbers=NUMBERS[numbers]))
    mj, m = ms.mj, ms.mujoco_map
    d = mujoco.MjData(mj)
    if start == "outside":
        d.qpos[:], d.qvel[:] = _turned(60, (1, 1, 0.3)), (0.5, -1.0, 2.0)
    else:
        d.qpos[:], d.qvel[:] = _turned(30, (1, -0.5, 0)), (6.0, -3.0, 1.0)
    q = m.qpos_to_q(d.qpos)
    state = init_state(ms.scene, jnp.asarray(q), jnp.asarray(m.qvel_to_qd(q, d.qvel)))
    _, states = _rollout(ms.scene, state, ms.dt)
    err, active = 0.0, 0
    for k in range(50):
        mujoco.mj_step(mj, d)
        active += d.nefc
        q = m.qpos_to_q(d.qpos)
        err = max(err, np.abs(np.asarray(states.q[k]) - q).max(),
                  np.abs(np.asarray(states.qd[k]) - m.qvel_to_qd(q, d.qvel)).max())
    assert active >= 5
    assert err < 1e-6


def _pendulum(range_angle, **options):
    b = ModelBuilder("pendulum")
    b.add_body("bob", parent=None, joint=spherical(), joint_name="ball", mass=1.0, com=(0.1, 0.05, -0.4),
               inertia=np.diag([0.02, 0.03, 0.01]))
    return make_scene(b.build(), ball_ranges={"ball": range_angle}, **options)


@pytest.mark.parametrize("solver", ["pgs", "newton"])
def test_jaxmbs_solvers_hold_a_pendulum_at_its_range(solver):
    scene = _pendulum(0.5, solver=solver, integrator="euler")
    q = jnp.asarray(_turned(25, (1, 0, 0)))
    state = init_state(scene, q, jnp.array([4.0, 1.0, -0.5]))
    _, states = _rollout(scene, state, 0.002)
    dist = np.array([float(ball_angles(scene, qk)[0][0]) for qk in states.q])
    assert dist.min() < 0.02  # it reaches the range
    assert dist.min() > -0.005  # and stays at it: without the row it swings on past
    free = _rollout(scene.replace(ball_ranges=scene.ball_ranges + 10.0), state, 0.002)[1]
    assert min(float(ball_angles(scene, qk)[0][0]) for qk in free.q) < -0.05


def test_ball_ranges_are_checked():
    with pytest.raises(ModelError, match="has no joints"):
        make_scene(_pendulum(0.5).model, ball_ranges={"elbow": 0.5})
    with pytest.raises(ModelError, match="limit_rows caps"):
        _pendulum(0.5, limit_rows=1)
    with pytest.raises(ModelError, match="finite, non-negative"):
        _pendulum(-1.0)
    assert _pendulum(0.5, limits=False).options.ball_limited == ()


def test_rk4_with_a_ball_range_follows_mj_step():
    """Under RK4 the pendulum started outside its range (its own numbers) follows MuJoCo 4's ``mj_step``: the
    classical stages in qpos coordinates, the limit rows solved anew at every stage."""
    ms = load_mjcf_scene(PENDULUM.format(numbers=NUMBERS["own"]).replace('timestep="0.002"',
                                                                         'timestep="0.002" integrator="RK4"'))
    assert ms.scene.options.integrator == "rk4"
    mj, m, h = ms.mj, ms.mujoco_map, ms.dt
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:] = _turned(60, (1, 1, 0.3)), np.array([0.5, -1.0, 2.0])
    q = m.qpos_to_q(d.qpos)
    state = init_state(ms.scene, jnp.asarray(q), jnp.asarray(m.qvel_to_qd(q, d.qvel)))
    _, states = _rollout(ms.scene, state, h)
    err, active = 0.0, 0
    for k in range(50):
        mujoco.mj_step(mj, d)
        active += d.nefc
        q = m.qpos_to_q(d.qpos)
        err = max(err, np.abs(np.asarray(states.q[k]) - q).max(),
                  np.abs(np.asarray(states.qd[k]) - m.qvel_to_qd(q, d.qvel)).max())
    assert active >= 5
    assert err < 1e-12
