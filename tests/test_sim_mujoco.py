"""MuJoCo as the oracle of the simulator's contact-free dynamics and RK4 integrator.

The same URDF text is compiled by jaxmb (`jaxmb.load_urdf_string`) and by MuJoCo's compiler
(``mujoco.MjModel.from_xml_string``), and both integrate it with the classical fourth-order Runge-Kutta method from
the same state under zero control: jaxmb through ``make_scene(..., integrator="rk4", limits=False)`` and
`jaxmb.sim.rollout`, MuJoCo through ``mj_step`` with ``mjINT_RK4``. The two trajectories of ``q`` and ``qd``
must agree to 1e-8 at every step over 1 s.

Bridged here:

* MuJoCo's URDF compiler reads meshes for ``<visual>`` and ``<collision>``: they are stripped from the text (jaxmb
  ignores them). A ``<mujoco><compiler .../></mujoco>`` element keeps the inertias as written
  (``balanceinertia="false"``) and the fixed links as bodies of their own (``fusestatic="false"``); jaxmb merges
  them into their parents, which changes the bodies but not the dynamics, so the models are compared through the
  joint-space mass matrix and bias forces, not body by body.
* MuJoCo reads the URDF ``<dynamics damping friction>`` and ``<limit>``, and turns ``<mimic>`` into an equality
  constraint; jaxmb's scene has none of these here. MuJoCo's damping, friction loss and armature are zeroed, and its
  limits, equality constraints and contacts disabled.
* Coordinates: jaxmb numbers joints breadth first, MuJoCo in file order; they are matched by joint name
  (`jaxmb.Model.joint_coordinates` and MuJoCo's ``jnt_qposadr`` / ``jnt_dofadr``).

The Panda is example-robot-data's, with its two finger joints (prismatic) loaded as independent coordinates (the
``<mimic>`` coupling is not enforced on either side), so the check covers prismatic joints as well as revolute.
"""

import re
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

import jaxmb  # noqa: E402
from jaxmb.sim.scene import make_scene  # noqa: E402
from jaxmb.sim.stepping import init_state, rollout  # noqa: E402
from pinocchio_bridge import urdf_path  # noqa: E402

DT = 1e-3
STEPS = 1000  # 1 s
TOL = 1e-8

# A double pendulum hanging from a fixed base, with joint axes, inertial frames (offset and rotated) and full
# inertia tensors that are not aligned with one another, so that no term of the dynamics vanishes by symmetry.
DOUBLE_PENDULUM = """<?xml version="1.0"?>
<robot name="double_pendulum">
  <link name="base">
    <inertial>
      <origin xyz="0 0 0.05" rpy="0 0 0"/>
      <mass value="2.0"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/>
    </inertial>
  </link>
  <link name="upper">
    <inertial>
      <origin xyz="0.01 0.02 -0.25" rpy="0.1 -0.2 0.3"/>
      <mass value="1.3"/>
      <inertia ixx="0.03" ixy="0.001" ixz="-0.002" iyy="0.028" iyz="0.0015" izz="0.004"/>
    </inertial>
  </link>
  <link name="lower">
    <inertial>
      <origin xyz="-0.015 0.01 -0.2" rpy="-0.25 0.15 0.05"/>
      <mass value="0.8"/>
      <inertia ixx="0.012" ixy="-0.0007" ixz="0.0009" iyy="0.011" iyz="-0.0004" izz="0.002"/>
    </inertial>
  </link>
  <joint name="shoulder" type="revolute">
    <origin xyz="0 0 0.1" rpy="0.05 0 0"/>
    <parent link="base"/>
    <child link="upper"/>
    <axis xyz="0 1 0"/>
  </joint>
  <joint name="elbow" type="continuous">
    <origin xyz="0.02 0 -0.5" rpy="0 0.1 -0.2"/>
    <parent link="upper"/>
    <child link="lower"/>
    <axis xyz="0.1 0.98 0.05"/>
  </joint>
</robot>
"""

MUJOCO_COMPILER = '<mujoco><compiler discardvisual="true" fusestatic="false" balanceinertia="false"/></mujoco>'


def _panda_urdf():
    text = urdf_path("panda").read_text()
    return re.sub(r"<visual\b.*?</visual>|<collision\b.*?</collision>", "", text, flags=re.S)


def _load_pair(text):
    """``(jaxmb model, MuJoCo model, q index, v index)`` for one URDF text: the MuJoCo model set up for RK4 at
    ``DT`` with no damping, friction, armature, limits, equality constraints or contacts (module docstring);
    ``q_mj = q_jaxmb[q index]`` and ``qd_mj = qd_jaxmb[v index]``."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*mimic joints.*")  # the Panda's fingers, independent here
        jm = jaxmb.load_urdf_string(text)
    mj = mujoco.MjModel.from_xml_string(text.replace("</robot>", MUJOCO_COMPILER + "</robot>"))
    mj.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    mj.opt.timestep = DT
    mj.opt.gravity[:] = (0.0, 0.0, -9.81)
    off = mujoco.mjtDisableBit
    mj.opt.disableflags |= off.mjDSBL_CONTACT | off.mjDSBL_EQUALITY | off.mjDSBL_LIMIT
    mj.dof_damping[:] = 0.0
    mj.dof_frictionloss[:] = 0.0
    mj.dof_armature[:] = 0.0
    mj.jnt_stiffness[:] = 0.0
    assert mj.nq == jm.nq and mj.nv == jm.nv, (mj.nq, mj.nv, jm.nq, jm.nv)
    q_index, v_index = np.zeros(mj.nq, int), np.zeros(mj.nv, int)
    for j in range(mj.njnt):
        qs, vs = jm.joint_coordinates(mj.joint(j).name)
        q_index[mj.jnt_qposadr[j] + np.arange(qs.stop - qs.start)] = np.arange(qs.start, qs.stop)
        v_index[mj.jnt_dofadr[j] + np.arange(vs.stop - vs.start)] = np.arange(vs.start, vs.stop)
    assert sorted(q_index) == list(range(jm.nq)) and sorted(v_index) == list(range(jm.nv))
    return jm, mj, q_index, v_index


def _initial_state(nq, nv, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, nq), rng.uniform(-2.0, 2.0, nv)


def _mujoco_trajectory(mj, q0, qd0):
    """``(q, qd)`` after each of ``STEPS`` RK4 steps, in MuJoCo's coordinates."""
    data = mujoco.MjData(mj)
    data.qpos[:], data.qvel[:] = q0, qd0
    qs, qds = np.empty((STEPS, mj.nq)), np.empty((STEPS, mj.nv))
    for i in range(STEPS):
        mujoco.mj_step(mj, data)
        qs[i], qds[i] = data.qpos, data.qvel
    return qs, qds


def _jaxmb_trajectory(jm, q0, qd0, q_index, v_index):
    """``(q, qd)`` after each of ``STEPS`` RK4 steps of `jaxmb.sim`, in MuJoCo's coordinates (``q0``, ``qd0`` are
    in MuJoCo's coordinates too)."""
    q, qd = np.zeros(jm.nq), np.zeros(jm.nv)
    q[q_index], qd[v_index] = q0, qd0
    scene = make_scene(jm, integrator="rk4", limits=False)
    _, states = rollout(scene, init_state(scene, q, qd), DT, steps=STEPS)
    assert not bool(jnp.any(states.diverged))
    return np.asarray(states.q)[:, q_index], np.asarray(states.qd)[:, v_index]


def _models_agree(jm, mj, q_index, v_index, q0, qd0):
    """MuJoCo compiled the same masses, centres of mass and inertias as jaxmb: the joint-space mass matrix and the
    bias forces (Coriolis, centrifugal, gravity) at ``(q0, qd0)`` agree to round-off."""
    data = mujoco.MjData(mj)
    data.qpos[:], data.qvel[:] = q0, qd0
    mujoco.mj_forward(mj, data)
    M_mj = np.zeros((mj.nv, mj.nv))
    mujoco.mj_fullM(mj, data, M_mj)
    q, qd = np.zeros(jm.nq), np.zeros(jm.nv)
    q[q_index], qd[v_index] = q0, qd0
    M = np.asarray(jaxmb.mass_matrix(jm, q))[np.ix_(v_index, v_index)]
    bias = np.asarray(jaxmb.inverse_dynamics(jm, q, qd, np.zeros(jm.nv)))[v_index]
    np.testing.assert_allclose(M, M_mj, rtol=0, atol=1e-12 * max(1.0, np.abs(M_mj).max()))
    np.testing.assert_allclose(bias, data.qfrc_bias, rtol=0, atol=1e-12 * max(1.0, np.abs(data.qfrc_bias).max()))


def _check_trajectory(text, seed):
    jm, mj, q_index, v_index = _load_pair(text)
    q0, qd0 = _initial_state(mj.nq, mj.nv, seed)
    _models_agree(jm, mj, q_index, v_index, q0, qd0)
    q_mj, qd_mj = _mujoco_trajectory(mj, q0, qd0)
    q_jx, qd_jx = _jaxmb_trajectory(jm, q0, qd0, q_index, v_index)
    err_q, err_qd = np.abs(q_jx - q_mj).max(), np.abs(qd_jx - qd_mj).max()
    # the motion is not trivial: the state travels far from where it started
    assert np.abs(q_mj - q0).max() > 0.5 and np.abs(qd_mj - qd0).max() > 1.0
    assert err_q < TOL and err_qd < TOL, f"max |q - q_mujoco| = {err_q:.3e}, max |qd - qd_mujoco| = {err_qd:.3e}"
    return err_q, err_qd


def test_double_pendulum_rk4_trajectory_matches_mujoco_to_1e8():
    """A double pendulum with skewed axes and rotated, full inertias, from a random state under gravity: jaxmb's
    RK4 rollout and MuJoCo's RK4 agree on ``q`` and ``qd`` to 1e-8 at every step of 1 s. The two compile the same
    inertias from the URDF (mass matrix and bias forces agree to round-off first), so any difference is the
    dynamics or the integrator's."""
    _check_trajectory(DOUBLE_PENDULUM, seed=0)


def test_panda_rk4_trajectory_matches_mujoco_to_1e8():
    """example-robot-data's Panda (seven revolute joints and two prismatic fingers, free of limits and of the
    fingers' mimic coupling), from a random state under gravity: jaxmb's RK4 rollout and MuJoCo's RK4 agree on
    ``q`` and ``qd`` to 1e-8 at every step of 1 s, after checking that both compiled the same inertias."""
    _check_trajectory(_panda_urdf(), seed=1)
