"""MuJoCo's fluid forces in MJCF scenes (`jaxmb.sim.fluid`): the generalized forces equal MuJoCo's ``qfrc_fluid``
under both models at random states (a chain on slides, hinges and a ball joint and a free body, with geoms of
every shape), swimmers in a dense fluid with wind follow ``mj_step`` under Euler (its joint damping implicit) and
RK4, the gradient of a short rollout in the density equals central differences, and what the scene cannot take
as MuJoCo does is refused naming its ``drop`` option."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from checks import assert_close, fast_jit  # noqa: E402

from jaxmb import ModelError  # noqa: E402
from jaxmb.sim import init_state, load_mjcf_scene, rollout  # noqa: E402
from jaxmb.sim.fluid import fluid_forces  # noqa: E402

ELLIPSOID = '<default><geom fluidshape="ellipsoid" fluidcoef="0.5 0.25 1.5 1.0 1.0"/></default>'

SHAPES = """<mujoco>
  <option timestep="0.005" density="3000" viscosity="0.1" wind="0.5 -0.3 0.2"/>
  {default}
  <worldbody>
    <body name="head" pos="0 0 0.3" euler="10 20 30">
      <joint name="x" type="slide" axis="1 0 0"/><joint name="y" type="slide" axis="0 1 0"/>
      <joint name="rz" type="hinge" axis="0 0 1"/>
      <geom type="capsule" size="0.05" fromto="0 0 0 0.4 0.05 0.02"/>
      <geom type="box" size="0.05 0.04 0.03" pos="0.1 0 0.05" euler="20 0 10"/>
      <body name="b1" pos="0.4 0 0">
        <joint name="j1" type="hinge" axis="0 0 1"/><joint name="j1b" type="hinge" axis="0 1 0" pos="0.01 0 0"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
        <body name="b2" pos="0.4 0 0">
          <joint name="j2" type="ball"/>
          <geom type="ellipsoid" size="0.1 0.05 0.03" pos="0.1 0 0" contype="0" conaffinity="0"/>
          <geom type="cylinder" size="0.03 0.1" pos="0.15 0.05 0" euler="0 90 0" contype="0" conaffinity="0"/>
        </body>
      </body>
    </body>
    <body name="free" pos="1 1 1">
      <freejoint/><geom type="sphere" size="0.1"/><geom type="box" size="0.1 0.05 0.02" pos="0.1 0 0"/>
    </body>
  </worldbody>
</mujoco>"""

SWIMMER = """<mujoco>
  <option timestep="0.005" density="3000" viscosity="0.1" wind="0.5 -0.3 0.2" integrator="{integrator}"/>
  {default}
  <default><joint damping="0.05"/></default>
  <worldbody>
    <body name="head" pos="0 0 0.3">
      <joint name="x" type="slide" axis="1 0 0"/><joint name="y" type="slide" axis="0 1 0"/>
      <joint name="rz" type="hinge" axis="0 0 1"/>
      <geom type="capsule" size="0.05" fromto="0 0 0 0.3 0 0"/>
      <body name="b1" pos="0.3 0 0">
        <joint name="j1" type="hinge" axis="0 0 1"/><joint name="j1b" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        <body name="b2" pos="0.3 0 0">
          <joint name="j2" type="hinge" axis="0 0 1"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="j1" gear="0.5"/><motor joint="j2"/></actuator>
</mujoco>"""

MODELS = {"inertia box": "", "ellipsoid": ELLIPSOID}

_forces = fast_jit(fluid_forces)


def _states(mj, n, seed):
    """``n`` random ``(qpos, qvel)`` of ``mj`` (quaternions normalized)."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        qpos = mj.qpos0 + 0.3 * rng.normal(size=mj.nq)
        mujoco.mj_normalizeQuat(mj, qpos)
        yield qpos, rng.normal(size=mj.nv)


@pytest.mark.parametrize("model", MODELS)
def test_fluid_forces_are_mujocos_qfrc_fluid(model):
    ms = load_mjcf_scene(SHAPES.format(default=MODELS[model]))
    fl = ms.scene.fluid
    assert (len(fl.box_bodies), len(fl.ellipsoid_bodies)) == ((4, 0) if model == "inertia box" else (0, 7))
    mj, m = ms.mj, ms.mujoco_map
    d = mujoco.MjData(mj)
    for qpos, qvel in _states(mj, 4, 0):
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(mj, d)
        q = m.qpos_to_q(qpos)
        tau = _forces(ms.scene, jnp.asarray(q), jnp.asarray(m.qvel_to_qd(q, qvel)))
        assert np.abs(d.qfrc_fluid).max() > 10.0
        assert_close(m.tau_to_qfrc(q, tau), d.qfrc_fluid, 1e-12)


def test_a_fluid_built_for_make_scene_is_the_files():
    """`jaxmb.sim.fluid.fluid` on the file's bodies with its numbers (the boxes' axes MuJoCo's, the ellipsoids'
    coefficients the file's) gives `make_scene` the scene's forces."""
    from jaxmb.sim import make_scene
    from jaxmb.sim.fluid import fluid

    for model in MODELS:
        ms = load_mjcf_scene(SHAPES.format(default=MODELS[model]))
        fl, tree = ms.scene.fluid, ms.scene.tree
        n = lambda ks: [tree.body_names[k] for k in ks]
        keys = ("R", "p", "semiaxes", "coefficients", "added_mass", "added_inertia")
        leaves = (fl.ellipsoid_R, fl.ellipsoid_p, fl.semiaxes, fl.coefficients, fl.added_mass, fl.added_inertia)
        ellipsoids = [dict(body=b, **{k: np.asarray(x[i]) for k, x in zip(keys, leaves)})
                      for i, b in enumerate(n(fl.ellipsoid_bodies))]
        built = fluid(tree, 3000.0, 0.1, (0.5, -0.3, 0.2), n(fl.box_bodies), np.asarray(fl.box_axes), ellipsoids)
        scene = make_scene(ms.scene.model, fluid=built)
        q, qd = jnp.asarray(ms.scene.q0), jnp.linspace(-1.0, 1.0, tree.nv)
        assert_close(_forces(scene, q, qd), _forces(ms.scene, q, qd), 1e-14)
    with pytest.raises(ModelError, match="both the inertia-box and the ellipsoid"):
        fluid(tree, 1.0, boxes=n(fl.ellipsoid_bodies[:1]), ellipsoids=ellipsoids[:1])


def _follow(ms, steps, ctrl):
    """The largest difference of ``(q, qd)`` from ``mj_step``'s over ``steps`` steps from a random velocity."""
    mj, m = ms.mj, ms.mujoco_map
    d = mujoco.MjData(mj)
    d.qvel[:] = np.random.default_rng(3).normal(size=mj.nv)
    d.ctrl[:] = ctrl
    q = m.qpos_to_q(d.qpos)
    state = init_state(ms.scene, jnp.asarray(q), jnp.asarray(m.qvel_to_qd(q, d.qvel)))
    _, states = _rollout(ms.scene, state, ms.dt, jnp.tile(jnp.asarray(ctrl), (steps, 1)))
    err = 0.0
    for k in range(steps):
        mujoco.mj_step(mj, d)
        q = m.qpos_to_q(d.qpos)
        err = max(err, np.abs(np.asarray(states.q[k]) - q).max(),
                  np.abs(np.asarray(states.qd[k]) - m.qvel_to_qd(q, d.qvel)).max())
    return err


_rollout = fast_jit(lambda scene, state, dt, ctrls: rollout(scene, state, dt, ctrls))


@pytest.mark.parametrize("integrator", ["Euler", "RK4"])
@pytest.mark.parametrize("model", MODELS)
def test_swimmer_follows_mj_step(model, integrator):
    ms = load_mjcf_scene(SWIMMER.format(integrator=integrator, default=MODELS[model]))
    assert ms.scene.options.integrator == ("implicitfast" if integrator == "Euler" else "rk4")
    assert ms.solver.startswith("'newton'") and ms.scene.impedance is not None
    assert _follow(ms, 50, np.array([0.3, -0.2])) < 1e-6
    if model == "ellipsoid" and integrator == "Euler":  # in still water the scene departs from mj_step
        fl = ms.scene.fluid
        still = fl.replace(density=0.0 * fl.density, viscosity=0.0 * fl.viscosity)
        assert _follow(ms._replace(scene=ms.scene.replace(fluid=still)), 50, np.array([0.3, -0.2])) > 1e-3


def test_swimmer_on_jaxmbs_own_rk4_follows_mj_step():
    """RK4 without MuJoCo's soft constraints (its constraints held over the step; the swimmer has none active)
    evaluates the fluid at every stage too."""
    ms = load_mjcf_scene(SWIMMER.format(integrator="RK4", default=""), impedance=None, solver="pgs")
    assert ms.scene.impedance is None and ms.scene.options.integrator == "rk4"
    assert _follow(ms, 50, np.array([0.3, -0.2])) < 1e-6


def test_rollout_gradient_in_density_is_central_differences():
    ms = load_mjcf_scene(SWIMMER.format(integrator="Euler", default=ELLIPSOID))
    m = ms.mujoco_map
    qd = m.qvel_to_qd(np.zeros(ms.mj.nq), np.random.default_rng(4).normal(size=ms.mj.nv))
    state = init_state(ms.scene, qd=jnp.asarray(qd))
    ctrls = jnp.tile(jnp.array([0.3, -0.2]), (5, 1))

    def final(density):
        scene = ms.scene.replace(fluid=ms.scene.fluid.replace(density=density))
        end, _ = rollout(scene, state, ms.dt, ctrls)
        return jnp.sum(end.q * jnp.arange(1.0, 7.0)) + jnp.sum(end.qd * jnp.arange(2.0, 8.0))

    value_and_grad = fast_jit(jax.value_and_grad(final))
    rho, h = ms.scene.fluid.density, 0.1  # the differences' truncation error: 6e-10 relative at this step
    _, g = value_and_grad(rho)
    fd = (value_and_grad(rho + h)[0] - value_and_grad(rho - h)[0]) / (2 * h)
    assert abs(float(g)) > 1e-6
    assert abs(float(g) - float(fd)) <= 1e-7 * abs(float(fd))


def test_fluid_under_mujocos_implicit_integrators_is_refused():
    for integrator in ("implicit", "implicitfast"):
        with pytest.raises(ModelError, match=r"derivative of the fluid forces .*drop 'integrator'"):
            load_mjcf_scene(SWIMMER.format(integrator=integrator, default=""))
    with pytest.warns(UserWarning, match="derivative of the fluid forces"):
        ms = load_mjcf_scene(SWIMMER.format(integrator="implicitfast", default=""), drop="integrator")
    assert ms.scene.fluid is not None


def test_inertia_box_of_a_body_merged_with_a_welded_body_is_refused():
    welded = SWIMMER.format(integrator="Euler", default="").replace(
        '<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>',
        '<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>'
        '<body name="fin" pos="0.3 0 0"><geom type="box" size="0.05 0.01 0.05"/></body>')
    with pytest.raises(ModelError, match=r"merged with welded bodies of mass: 'b2', 'fin' \(drop 'fluid'\)"):
        load_mjcf_scene(welded)
    with pytest.warns(UserWarning, match="fluid"):
        ms = load_mjcf_scene(welded, drop="fluid")
    assert len(ms.scene.fluid.box_bodies) == 2
    assert load_mjcf_scene(welded.replace("<default>", ELLIPSOID + "<default>", 1)).scene.fluid is not None

