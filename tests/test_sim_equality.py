"""Equality constraints as rows (`jaxmb.sim.equality_rows`) against MuJoCo, on scenes written for these tests: a
four-bar closed by ``connect``, a free box welded to a two-joint arm (``torquescale`` 0.5, its own ``solref``), a
polynomial ``joint`` coupling of the arm's joints, a ``joint`` equality that fixes a slide, a ``connect`` and a
``weld`` of two sites through a ball joint and a ``tendon`` equality of two fixed tendons.

* The rows' errors, Jacobian, ``D`` and target equal MuJoCo's ``efc_pos``, ``efc_J``, ``efc_D`` and ``efc_vel + dt
  efc_aref`` (which subtracts ``Jdot v`` of the connect and weld rows) to 1e-12 at random states.
* Trajectories follow ``mj_step`` with the file's Newton solver to 1e-9: the whole scene under Euler over 200 steps;
  the hinge linkage (four-bar and coupling, damped joints) under implicitfast and RK4 over 100 steps.
* jaxmb's rule on both solvers holds a pendulum's connect; an inactive equality is left out of the rows (listed as
  disabled); ``equalities="embedded"`` keeps the exact embedding; a tendon equality on a tendon the scene leaves out
  is refused by name; bad equalities are `ModelError`s.
"""

import jax.numpy as jnp
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from checks import assert_close, fast_jit  # noqa: E402

from jaxmb import sim  # noqa: E402
from jaxmb.errors import ModelError  # noqa: E402
from jaxmb.joints import revolute  # noqa: E402
from jaxmb.model import ModelBuilder  # noqa: E402
from jaxmb.sim.closed_loops import is_closed  # noqa: E402
from jaxmb.sim.constraints import constraint_forces  # noqa: E402
from jaxmb.sim.equality_rows import connect, errors, joint_equality, weld  # noqa: E402
from jaxmb.sim.stages import kinematics, step_factors  # noqa: E402

LINKAGE = """<body name="crank" pos="0 0 1"><joint name="crank" axis="0 1 0" damping="{damping}"/>
  <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
  <body name="coupler" pos="0.2 0 0"><joint name="coupler" axis="0 1 0"/>
   <geom type="capsule" fromto="0 0 0 0.3 0 0.3" size="0.02"/></body></body>
 <body name="rocker" pos="0.4 0 1"><joint name="rocker" axis="0 1 0" damping="{damping}"/>
  <geom type="capsule" fromto="0 0 0 0.1 0 0.3" size="0.02"/></body>
 <body name="base" pos="1 0.5 1"><joint name="a" axis="0 1 0"/><geom type="box" size=".1 .02 .02" pos=".1 0 0"/>
  <body name="tip" pos="0.2 0 0"><joint name="b" axis="1 0 0" damping="{damping}"/>
   <joint name="c" type="slide" axis="0 0 1"/><geom type="box" size=".1 .02 .02" pos=".1 0 0"/></body></body>"""
LINKAGE_EQUALITIES = """<connect name="close" body1="coupler" body2="rocker" anchor="0.3 0 0.3"/>
 <joint name="mesh" joint1="b" joint2="a" polycoef="0.1 -2 0.3 0.2 0"/>
 <joint name="lock" joint1="c" polycoef="0.05 0 0 0 0"/>"""

SCENE = f"""<mujoco model="equalities">
<option timestep="0.002" integrator="{{integrator}}" iterations="100" tolerance="1e-15">
 <flag contact="disable"/></option>
<worldbody>
 {LINKAGE}
 <body name="box" pos="1 0 1" euler="0.3 0.2 0.1"><freejoint/><geom type="box" size=".1 .05 .03"/></body>
 <body name="swing" pos="-1 0 1"><joint name="ball" type="ball"/>
  <geom type="capsule" fromto="0 0 0 0.2 0.1 -0.3" size="0.03"/><site name="end" pos="0.2 0.1 -0.3" euler="0 0.3 1"/>
 </body>
 <site name="hook" pos="-0.78 0.12 0.68" euler="0.2 0.1 0"/>
 <body name="p1" pos="0 -1 1"><joint name="p1" axis="1 0 0"/><geom type="box" size=".02 .1 .02" pos="0 .1 0"/></body>
 <body name="p2" pos="0 -1.5 1"><joint name="p2" axis="1 0 0" ref="0.2"/>
  <geom type="box" size=".02 .1 .02" pos="0 .1 0"/></body>
</worldbody>
<tendon><fixed name="t1"><joint joint="p1" coef="0.5"/></fixed><fixed name="t2"><joint joint="p2" coef="1"/></fixed>
</tendon>
<equality>
 {LINKAGE_EQUALITIES}
 <weld name="glue" body1="box" body2="tip" torquescale="0.5" solref="0.01 1"/>
 <connect name="hang" site1="end" site2="hook" solimp="0.95 0.99 0.002 0.5 2"/>
 <weld name="turn" site1="end" site2="hook" torquescale="2" solref="0.05 0.8"/>
 <tendon name="pulley" tendon1="t1" tendon2="t2" polycoef="0.02 0.8 0 0 0"/>
 <connect name="later" body1="p1" body2="p2" anchor="0 0 0" active="false"/>
</equality>
</mujoco>"""

HINGES = f"""<mujoco model="hinge linkage">
<option timestep="0.002" integrator="{{integrator}}" iterations="100" tolerance="1e-15">
 <flag contact="disable"/></option>
<worldbody>{LINKAGE.format(damping=0.3)}</worldbody>
<equality>{LINKAGE_EQUALITIES}</equality>
</mujoco>"""


def loaded(source, integrator="Euler"):
    return sim.load_mjcf_scene(source.replace("{damping}", "0").format(integrator=integrator))


@pytest.fixture(scope="module")
def scene():
    return loaded(SCENE)


def random_state(mj, m, rng, d):
    d.qpos[:] = mj.qpos0 + rng.uniform(-0.2, 0.2, mj.nq)
    mujoco.mj_normalizeQuat(mj, d.qpos)
    d.qvel[:] = rng.uniform(-1, 1, mj.nv)
    mujoco.mj_forward(mj, d)
    q = jnp.asarray(m.qpos_to_q(d.qpos))
    return q, jnp.asarray(m.qvel_to_qd(q, d.qvel))


def test_scene_builds_every_active_equality_as_rows(scene):
    """Each active equality is rows on the tree, in the file's order (3 per connect, 6 per weld, 1 per scalar); the
    inactive one is left out and listed as disabled."""
    sc = scene.scene
    assert not is_closed(sc.model) and scene.left_out[0].category == "disabled"
    assert "'later'" in scene.left_out[0].what
    assert sc.equalities.names == ("close", "mesh", "lock", "glue", "hang", "turn", "pulley")
    assert scene.equality_ids == (0, 1, 2, 3, 4, 5, 6)
    assert sc.equalities.rows == 3 + 1 + 1 + 6 + 3 + 6 + 1 and sc.rows == sc.equalities.rows
    assert "loops embedded" not in scene.solver


@fast_jit
def the_problem(sc, q, qd, dt):
    ab = step_factors(sc.model, q, qd, jnp.zeros_like(qd), None)
    return constraint_forces(sc, sc.model, q, qd, dt, jnp.zeros(sc.rows), kinematics(sc, q), ab).problem


def test_rows_are_mujocos_efc(scene):
    """At random states (the equalities violated), the rows' errors, Jacobian (in MuJoCo's velocities, ``J T``),
    ``D`` and targets equal MuJoCo's ``efc_*`` of its equality rows, which come first in MuJoCo's and last in
    jaxmb's, in the same order."""
    sc, mj, m, dt = scene.scene, scene.mj, scene.mujoco_map, scene.dt
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(0)
    for _ in range(3):
        q, qd = random_state(mj, m, rng, d)
        prob = the_problem(sc, q, qd, dt)
        mine = d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY
        assert mine.sum() == sc.equalities.rows and mine[:mine.sum()].all()
        r = np.asarray(errors(sc.equalities, sc.tree, q)[0])
        assert np.abs(d.efc_pos[mine]).min() > 1e-4 or np.abs(d.efc_pos[mine]).max() > 1e-2
        assert_close(r, d.efc_pos[mine], 1e-12)
        assert_close(np.asarray(prob.J) @ m.velocity_map(np.asarray(q)), d.efc_J.reshape(d.nefc, mj.nv)[mine], 1e-12)
        assert_close(prob.D, d.efc_D[mine], 1e-12, scale=float(np.abs(d.efc_D[mine]).max()))
        assert_close(prob.v_star, (d.efc_vel + dt * d.efc_aref)[mine], 1e-12)


rollout = fast_jit(sim.rollout, static_argnames=("steps",))


def follows_mj_step(s, steps, tol, seed):
    sc, mj, m = s.scene, s.mj, s.mujoco_map
    d = mujoco.MjData(mj)
    d.qvel[:] = np.random.default_rng(seed).uniform(-1, 1, mj.nv)
    q = jnp.asarray(m.qpos_to_q(d.qpos))
    _, states = rollout(sc, sim.init_state(sc, q, jnp.asarray(m.qvel_to_qd(q, d.qvel))), s.dt, steps=steps)
    theirs = []
    for _ in range(steps):
        mujoco.mj_step(mj, d)
        theirs.append(m.qpos_to_q(d.qpos))
    theirs = np.asarray(theirs)
    assert np.abs(theirs - theirs[0]).max() > 0.1  # they move
    assert_close(states.q, theirs, tol)


def test_scene_follows_mj_step_under_euler(scene):
    """200 Euler steps of the whole scene from MuJoCo's ``qpos0`` (the coupling's constant term and the fixed slide
    violated there) with random velocities."""
    follows_mj_step(scene, 200, 1e-9, seed=1)


@pytest.mark.parametrize("integrator", ["implicitfast", "RK4"])
def test_hinge_linkage_follows_mj_step(integrator):
    """100 steps of the four-bar and the coupled arm with damped joints."""
    s = loaded(HINGES, integrator)
    assert s.scene.options.integrator == integrator.lower()
    follows_mj_step(s, 100, 1e-9, seed=2)


def _pendulum(solver):
    b = ModelBuilder("pendulum")
    b.add_body("arm", parent=None, joint=revolute((0, 1, 0)), joint_name="hinge", mass=1.0, com=(0.3, 0, 0),
               inertia=np.diag([0.01, 0.02, 0.01]))
    b.add_body("tip", parent="arm", joint=revolute((0, 1, 0)), joint_name="elbow", mass=0.5, com=(0.2, 0, 0),
               inertia=np.diag([0.01, 0.01, 0.01]), placement=(np.eye(3), (0.4, 0, 0)))
    return sim.make_scene(b.build(), solver=solver, integrator="euler",
                          equalities=[connect("pin", "tip", None, (0.3, 0, 0), (0.6, 0, -0.2))])


@pytest.mark.parametrize("solver", ["pgs", "newton"])
def test_jaxmbs_rule_holds_a_connect_on_both_solvers(solver):
    """jaxmb's rule (the error decays at ``1/timeconst``): a double pendulum at rest whose tip is pinned to a world
    point off it swings onto the point under gravity and stays within 1e-3 of it."""
    sc = _pendulum(solver)
    assert sc.rows == 3 and sc.impedance is None
    state = sim.init_state(sc)
    _, states = rollout(sc, state, 0.002, steps=200)
    miss = np.array([np.linalg.norm(errors(sc.equalities, sc.tree, q)[0]) for q in states.q])
    assert miss[0] > 0.05 and miss[-50:].max() < 1e-3
    assert np.abs(np.asarray(states.q[-1] - state.q)).max() > 0.1  # it swung there, from 5 cm away


def test_embedded_option_closes_the_loops_exactly():
    """``equalities="embedded"`` embeds the four-bar's connect and the coupling (`jaxmb.loops`); the slide fixed by
    a joint equality closes no loop and is refused there, by name."""
    source = HINGES.format(integrator="Euler")
    with pytest.raises(ModelError, match=r"'lock' \(it fixes joint 'c'.*\(drop 'equalities'\)"):
        sim.load_mjcf_scene(source, equalities="embedded")
    with pytest.warns(UserWarning, match="'lock'"):
        s = sim.load_mjcf_scene(source, equalities="embedded", drop="equalities")
    assert is_closed(s.scene.model) and s.scene.equalities is None and s.equality_ids == (0, 1)
    with pytest.raises(ModelError, match="equalities must be 'rows'"):
        sim.load_mjcf_scene(source, equalities="soft")


def test_bad_equalities_are_model_errors():
    sc = _pendulum("newton")
    model = sc.model
    with pytest.raises(ModelError, match="equality 'x': model 'pendulum' has no body 'hand'"):
        sim.make_scene(model, equalities=[connect("x", "hand", None, (0, 0, 0), (0, 0, 0))])
    with pytest.raises(ModelError, match="both ends are on one body"):
        sim.make_scene(model, equalities=[weld("x", "tip", "tip", None, None)])
    with pytest.raises(ModelError, match="polycoef must be five finite numbers"):
        sim.make_scene(model, equalities=[joint_equality("x", "elbow", "hinge", (0, np.nan, 0, 0, 0))])
    with pytest.raises(ModelError, match="two equalities of one name"):
        sim.make_scene(model, equalities=[joint_equality("x", "elbow"), joint_equality("x", "hinge")])
    with pytest.raises(ModelError, match="no fixed tendon 'cable'"):
        from jaxmb.sim.equality_rows import tendon_equality
        sim.make_scene(model, equalities=[tendon_equality("x", "cable")])


ROPE = """<mujoco><worldbody><site name="s0" pos="0 0 .2"/><geom name="knob" size=".02" pos=".05 0 .1" contype="0"
conaffinity="0"/>
<body name="a"><joint name="h1" axis="0 1 0"/><geom size=".1"/><site name="s1" pos=".1 0 0"/>
<body name="b" pos="0 0 -.3"><joint name="h" axis="0 1 0"/><geom size=".1"/></body></body></worldbody>
<tendon><spatial name="rope"><site site="s0"/><geom geom="knob"/><site site="s1"/></spatial><fixed name="f"><joint joint="h" coef="1"/>
</fixed></tendon>
<equality><tendon name="tie" tendon1="rope" tendon2="f"/><joint name="gear" joint1="h" joint2="h1"/></equality>
</mujoco>"""


def test_an_equality_on_a_tendon_left_out_is_refused_by_name():
    """A ``tendon`` equality on a spatial tendon that wraps a geom (which the scene leaves out) is refused by name
    until ``drop="equalities"``; the other equality stays a row."""
    with pytest.raises(ModelError, match=r"'tie' \(on tendons \['rope'\], which the scene leaves out\) \(drop "
                                         r"'equalities'\)"):
        sim.load_mjcf_scene(ROPE, drop="spatial tendons")
    with pytest.warns(UserWarning, match="'tie'"):
        s = sim.load_mjcf_scene(ROPE, drop=("spatial tendons", "equalities"))
    assert s.scene.equalities.names == ("gear",) and s.equality_ids == (1,)
