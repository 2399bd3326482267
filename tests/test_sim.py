"""The simulator without contact: integrators, actuators, passive joint terms, limits, the diverged flag, batching.

Oracles: the order of convergence of RK4's energy error, energy balance under damping, static equilibria of servos,
limits and Coulomb friction worked out by hand, and the step of one world against the same world in a batch.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from checks import check_grads

import jaxmb
from jaxmb import joints
from jaxmb.errors import ModelError
from jaxmb.loops import mechanisms
from jaxmb.sim import (NONFINITE_STATE, failures, init_state, intvelocity, make_scene, motor, position, rollout, step,
                       velocity)
from jaxmb.sim.actuators import actuator_forces, with_activation

G = 9.81


def pendulum(limits=None, name="pendulum"):
    """A point-like mass of 1 kg at 0.5 m below a y-axis hinge: gravity torque ``-m g l sin q``."""
    b = jaxmb.ModelBuilder(name)
    b.add_body("link", None, joints.revolute((0, 1, 0), *(limits or (None, None))), mass=1.0, com=(0, 0, -0.5),
               inertia=np.diag([1e-3, 1e-3, 1e-3]))
    return b.build()


def chain():
    b = jaxmb.ModelBuilder("chain")
    parent = None
    for i, axis in enumerate([(0, 1, 0), (1, 0, 0), (0, 1, 0)]):
        b.add_body(f"l{i}", parent, joints.revolute(axis), placement=(np.eye(3), (0, 0, -0.4 if parent else 0.0)),
                   mass=1.0, com=(0.02, 0, -0.2), inertia=np.diag([0.02, 0.02, 0.005]))
        parent = f"l{i}"
    return b.build()


def tumbler():
    b = jaxmb.ModelBuilder("tumbler")
    b.add_body("body", None, joints.free(), mass=2.0, inertia=np.diag([0.05, 0.1, 0.13]))
    return b.build()


def energy(model, q, qd):
    return jaxmb.kinetic_energy(model, q, qd) + jaxmb.potential_energy(model, q)


def energy_error(scene, state, dt, duration):
    """Largest ``|E(t) - E(0)|`` over a rollout of ``duration``."""
    model = scene.model
    _, states = rollout(scene, state, dt, steps=int(round(duration / dt)))
    E = jax.vmap(lambda q, qd: energy(model, q, qd))(states.q, states.qd)
    return float(jnp.max(jnp.abs(E - energy(model, state.q, state.qd))))


@pytest.mark.parametrize("which", ["chain", "tumbler"])
def test_rk4_energy_error_converges_at_fourth_order(which):
    """RK4 is fourth order on every joint, the free body's quaternion included: halving ``dt`` divides the energy
    error by 16 (a measured order within 10 % of 4)."""
    if which == "chain":
        model = chain()
        q0, qd0 = jnp.array([0.8, 0.3, -0.5]), jnp.array([0.0, 1.0, 0.5])
    else:
        model = tumbler()
        quat = jnp.array([0.9, 0.1, 0.3, 0.2])
        q0 = jnp.concatenate([jnp.zeros(3), quat / jnp.linalg.norm(quat)])
        qd0 = jnp.array([1.0, 5.0, 0.3, 0.5, 0.0, 1.0])  # tumbling about the unstable middle axis, while falling
    scene = make_scene(model, integrator="rk4")
    state = init_state(scene, q0, qd0)
    coarse, fine = (energy_error(scene, state, dt, 1.0) for dt in (0.01, 0.005))
    assert abs(np.log2(coarse / fine) - 4.0) < 0.4, (coarse, fine)


@pytest.mark.parametrize("integrator", ["rk4", "implicit"])
def test_damped_energy_decreases_monotonically(integrator):
    """With joint damping and nothing driving, the energy never rises from one step to the next."""
    model = chain()
    scene = make_scene(model, integrator=integrator, damping=0.3)
    _, states = rollout(scene, init_state(scene, jnp.array([0.8, 0.3, -0.5])), 0.005, steps=400)
    E = jax.vmap(lambda q, qd: energy(model, q, qd))(states.q, states.qd)
    assert float(jnp.max(jnp.diff(E))) < 0.0
    assert float(E[-1]) < float(E[0]) - 0.5


def test_implicit_step_is_stable_where_explicit_euler_diverges_and_freezes():
    """A damping of 1e4 N m s with dt = 0.01 is far beyond the explicit step's stability limit (dt < 2 m / d): the
    semi-implicit world blows up, is flagged ``diverged`` and frozen at its last finite state; the implicit step
    decays."""
    model = pendulum()
    q0 = jnp.array([1.0])
    explicit = make_scene(model, damping=1e4, integrator="euler")
    implicit = make_scene(model, damping=1e4, integrator="implicit")
    final, states = rollout(explicit, init_state(explicit, q0, jnp.array([1.0])), 0.01, steps=200)
    assert failures(final.diverged) == ("non-finite state",)
    assert np.all(np.isfinite(np.asarray(states.q))) and np.all(np.isfinite(np.asarray(states.qd)))
    frozen = int(np.argmax(np.asarray(states.diverged)))
    assert np.all(np.asarray(states.q[frozen:]) == np.asarray(states.q[frozen]))
    final, _ = rollout(implicit, init_state(implicit, q0, jnp.array([1.0])), 0.01, steps=200)
    assert not bool(final.diverged)
    assert abs(float(final.qd[0])) < 1e-3


def test_a_diverged_world_stops_alone_in_a_batch():
    """A batch of two worlds, one starting with a NaN velocity: that one is flagged and frozen, the other runs as
    it does alone."""
    model = pendulum()
    scene = make_scene(model)
    qd = jnp.array([[0.5], [jnp.nan]])
    states = jax.vmap(lambda v: init_state(scene, jnp.array([0.3]), v))(qd)
    batch = jax.vmap(lambda s: rollout(scene, s, 0.01, steps=50)[0])(states)
    alone = rollout(scene, init_state(scene, jnp.array([0.3]), qd[0]), 0.01, steps=50)[0]
    assert np.asarray(batch.diverged).tolist() == [0, NONFINITE_STATE]
    np.testing.assert_allclose(batch.q[0], alone.q, rtol=0, atol=1e-14)
    assert float(batch.q[1, 0]) == 0.3


@pytest.mark.parametrize("dt", [0.0, -0.01, float("nan"), float("inf")])
def test_a_time_step_that_is_not_positive_and_finite_is_refused(dt):
    scene = make_scene(pendulum())
    state = init_state(scene, jnp.array([0.3]))
    with pytest.raises(ValueError, match="dt must be a positive, finite time step"):
        step(scene, state, None, dt)
    with pytest.raises(ValueError, match="dt must be a positive, finite time step"):
        rollout(scene, state, dt, steps=3)


def test_a_non_finite_control_stops_its_world_alone_and_gradients_stay_finite():
    """A policy's NaN reaches one world of a batch halfway through a rollout: that world stops there with the
    reason ``non-finite control`` and keeps the state it had, the other runs as it does alone, and the gradient of
    the batch's final positions with respect to the controls is finite (zero for the stopped world's steps from
    the NaN on)."""
    model = pendulum()
    scene = make_scene(model, actuators=[motor("link")])
    ctrls = jnp.full((2, 40, 1), 0.2).at[1, 20:, 0].set(jnp.nan)
    start = init_state(scene, jnp.array([0.3]))

    def final_q(u):
        return jax.vmap(lambda c: rollout(scene, start, 0.01, ctrls=c)[0].q[0])(u)

    final, states = jax.vmap(lambda c: rollout(scene, start, 0.01, ctrls=c))(ctrls)
    assert failures(final.diverged[0]) == () and failures(final.diverged[1]) == ("non-finite control",)
    assert np.asarray(states.diverged[1, :20]).tolist() == [0] * 20
    assert float(final.q[1, 0]) == float(states.q[1, 19, 0])
    alone = rollout(scene, start, 0.01, ctrls=ctrls[0])[0]
    np.testing.assert_allclose(final.q[0], alone.q, rtol=0, atol=1e-14)
    g = jax.grad(lambda u: jnp.sum(final_q(u)))(ctrls)
    assert np.all(np.isfinite(np.asarray(g)))
    assert np.all(np.asarray(g[1, 20:]) == 0.0) and np.any(np.asarray(g[1, :20]) != 0.0)


def test_position_servo_settles_where_its_force_balances_gravity():
    """A PD servo with target 0.5 rad settles at ``q`` with ``kp (0.5 - q) = m g l sin q``."""
    model = pendulum()
    kp = 40.0
    scene = make_scene(model, actuators=[position("link", kp=kp, kv=4.0)])
    final, _ = rollout(scene, init_state(scene), 0.002, ctrls=jnp.full((3000, 1), 0.5))
    q = float(final.q[0])
    assert abs(kp * (0.5 - q) - G * 0.5 * np.sin(q)) < 1e-6


def test_actuators_clip_controls_and_forces():
    """Controls are clipped to their range and forces to the force limit; a velocity servo pushes toward its
    target velocity; a motor scales by its gear."""
    model = chain()
    scene = make_scene(model, actuators=[motor("l0", gear=2.0, ctrl_range=(-1, 1)),
                                         position("l1", kp=100.0, force_limit=3.0),
                                         velocity("l2", kv=5.0)])
    q, qd = jnp.array([0.0, 0.2, 0.0]), jnp.array([0.0, 0.0, 1.0])
    tau = actuator_forces(scene.actuators, q, qd, jnp.array([5.0, 1.0, 3.0]))
    np.testing.assert_allclose(tau, [2.0, 3.0, 10.0], rtol=0, atol=1e-14)


def test_joint_limit_holds_the_pendulum_against_gravity():
    """A pendulum released at 1 rad swings down onto a lower limit at 0.3 rad (gravity pulls it toward 0): it
    passes the limit by no more than the stabilization's transient, comes to rest on it without bouncing, and the
    limit carries the gravity torque ``m g l sin(0.3)``."""
    model = pendulum(limits=(0.3, 2.0))
    scene = make_scene(model)
    dt = 0.002
    final, states = rollout(scene, init_state(scene, jnp.array([1.0])), dt, steps=1000)
    assert float(jnp.min(states.q)) > 0.3 - 1e-3
    assert abs(float(final.q[0]) - 0.3) < 1e-6
    torque = float(final.impulse[0]) / dt
    assert abs(torque - G * 0.5 * np.sin(0.3)) < 1e-6


def limited_chain():
    """Five links swinging in two planes, each joint between limits that the motion below reaches, up to three at
    once."""
    b = jaxmb.ModelBuilder("limited_chain")
    parent = None
    for i, limits in enumerate([(-0.2, 0.2), (-1.5, 1.5), (-0.1, 0.4), (-2.0, 2.0), (-0.3, 0.3)]):
        b.add_body(f"l{i}", parent, joints.revolute((0, 1, 0) if i % 2 == 0 else (1, 0, 0), *limits),
                   placement=(np.eye(3), (0, 0, -0.4 if parent else 0.0)), mass=1.0, com=(0.05, 0.02, -0.2),
                   inertia=np.diag([0.02, 0.02, 0.005]))
        parent = f"l{i}"
    return b.build(), jnp.array([0.1, 0.5, 0.2, -0.5, 0.1]), jnp.array([2.0, -1.0, 3.0, 1.0, -2.0])


def test_capped_limit_rows_step_as_every_row_while_no_more_limits_engage():
    """With ``limit_rows=3`` the chain, whose motion engages up to three limits at once, takes the steps of the
    uncapped scene (both solves converged: the order of the rows is not the same); with fewer rows than engaged
    limits, only that many carry an impulse in any step, the others are left for later steps, and the motion
    differs."""
    model, q0, qd0 = limited_chain()
    runs = {}
    for cap in (None, 3, 2):
        scene = make_scene(model, limit_rows=cap, integrator="euler", iterations=1000)
        _, runs[cap] = rollout(scene, init_state(scene, q0, qd0), 1e-3, steps=2000)
    engaged = np.sum(np.asarray(runs[None].impulse) > 0, axis=1)
    assert engaged.max() == 3
    np.testing.assert_allclose(runs[3].q, runs[None].q, rtol=0, atol=1e-9)
    largest = float(jnp.max(runs[None].impulse))  # the solves stop at a change of 1e-10 of the largest impulse
    assert float(jnp.max(jnp.abs(runs[3].impulse - runs[None].impulse))) < 1e-8 * largest
    assert np.max(np.sum(np.asarray(runs[2].impulse) > 0, axis=1)) == 2
    assert float(jnp.max(jnp.abs(runs[2].q - runs[None].q))) > 1e-2


def test_capped_limit_rows_differentiate_by_the_factored_solve():
    """Forward and reverse mode through 20 capped steps of the chain with two limits engaged in each (away from
    their switching), against central differences: the chosen rows' compliance columns come from the factored
    solve, and the solve's derivative is the implicit one."""
    model, q0, qd0 = limited_chain()
    scene = make_scene(model, limit_rows=2, integrator="euler", iterations=200)
    state = rollout(scene, init_state(scene, q0, qd0), 1e-3, steps=95)[0]
    engaged = np.sum(np.asarray(rollout(scene, state, 1e-3, steps=20)[1].impulse) > 0, axis=1)
    assert np.all(engaged == 2)

    def final(q, qd):
        return rollout(scene, state._replace(q=q, qd=qd), 1e-3, steps=20)[0].q

    check_grads(final, (state.q, state.qd), atol=1e-6, rtol=1e-5, eps=1e-6)


def test_limit_rows_must_be_a_positive_count_on_a_tree():
    model = limited_chain()[0]
    assert make_scene(model, limit_rows=9).options.limit_rows is None  # more than there are limits: all of them
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ModelError, match="limit_rows must be a positive integer"):
            make_scene(model, limit_rows=bad)
    with pytest.raises(ModelError, match="closed-loop scene of 'four_bar_leg'"):
        make_scene(mechanisms.four_bar_leg(), limit_rows=1)


@pytest.mark.parametrize("joint_friction", ["constraint", "smooth"])
def test_coulomb_joint_friction_holds_below_breakaway_and_slips_above(joint_friction):
    """Friction of 3 N m holds the pendulum at 0.5 rad (gravity torque 2.35 N m) and lets it go at 1.0 rad
    (4.13 N m). The constraint holds it but for the creep of its regularization (1e-6 x the velocity gravity adds
    in a step, ``g l sin(0.5) dt / I``: 1e-8 rad over the run); the smooth option lets it creep at a velocity set
    by its scale."""
    model = pendulum()
    scene = make_scene(model, frictionloss=3.0, joint_friction=joint_friction)
    held, _ = rollout(scene, init_state(scene, jnp.array([0.5])), 0.002, steps=250)
    slips, _ = rollout(scene, init_state(scene, jnp.array([1.0])), 0.002, steps=250)
    creep = 2e-8 if joint_friction == "constraint" else 2e-2
    assert abs(float(held.q[0]) - 0.5) < creep
    assert float(slips.q[0]) < 0.8


def test_randomized_scenes_are_one_batch_and_one_program():
    """The scene's numbers are leaves: a batch of pendulums of different masses and gains is one ``vmap``, changing
    them does not compile again, and each world equals its own scene stepped alone."""
    model = pendulum()
    scene = make_scene(model, actuators=[position("link", kp=20.0, kv=1.0)])
    masses = jnp.array([0.5, 1.0, 2.0])
    scenes = jax.vmap(lambda m: scene.replace(model=scene.model.replace(mass=scene.model.mass * m)))(masses)
    run = jax.jit(jax.vmap(lambda sc: rollout(sc, init_state(sc, jnp.array([0.2])), 0.01, ctrls=jnp.ones((20, 1)))[0]))
    finals = run(scenes)
    run(jax.tree.map(lambda x: x * 1.01, scenes))
    assert run._cache_size() == 1
    one = jax.tree.map(lambda x: x[2], scenes)
    alone = rollout(one, init_state(one, jnp.array([0.2])), 0.01, ctrls=jnp.ones((20, 1)))[0]
    np.testing.assert_allclose(finals.q[2], alone.q, rtol=0, atol=1e-13)


def test_rollout_by_policy_equals_rollout_by_controls():
    """A policy that returns the same controls as a control sequence gives the same trajectory; sharded over the
    devices (`jaxmb.sharded_vmap`), a batch gives what ``vmap`` gives."""
    model = pendulum()
    scene = make_scene(model, actuators=[motor("link")])
    state = init_state(scene, jnp.array([0.4]))
    by_ctrls, _ = rollout(scene, state, 0.01, ctrls=jnp.full((30, 1), 0.7))
    by_policy, _ = rollout(scene, state, 0.01, policy=lambda s: jnp.full((1,), 0.7), steps=30)
    np.testing.assert_allclose(by_ctrls.q, by_policy.q, rtol=0, atol=1e-15)
    q0 = jnp.linspace(-0.5, 0.5, 4)[:, None]
    run = lambda q: rollout(scene, init_state(scene, q), 0.01, ctrls=jnp.full((30, 1), 0.7))[0].q
    np.testing.assert_allclose(jaxmb.sharded_vmap(run)(q0), jax.vmap(run)(q0), rtol=0, atol=1e-15)


def test_bad_scene_options_name_the_problem():
    model = pendulum()
    with pytest.raises(ModelError, match="integrator 'rk5'"):
        make_scene(model, integrator="rk5")
    with pytest.raises(ModelError, match="contact model 'soft'"):
        make_scene(model, contact="soft")
    with pytest.raises(ModelError, match="joint 'elbow'"):
        make_scene(model, actuators=[motor("elbow")])
    with pytest.raises(ModelError, match="damping"):
        make_scene(model, damping=-1.0)
    with pytest.raises(ModelError, match="iterations"):
        make_scene(model, iterations=0)
    with pytest.raises(ModelError, match="tolerance"):
        make_scene(model, tolerance=-1e-3)
    with pytest.raises(ModelError, match="timeconst"):
        make_scene(model, timeconst=0.0)
    with pytest.raises(ValueError, match="ctrl must have shape"):
        scene = make_scene(model, actuators=[motor("link")])
        step(scene, init_state(scene), jnp.zeros(3), 0.01)


def test_activations_integrate_the_control_and_lag_behind_it_exactly():
    """An integrated-velocity servo's target ``a`` grows by ``dt u`` a step until its range stops it; a position
    servo with a time constant ``T`` follows a step of its control as ``1 - exp(-t/T)``, and its force is that of
    a servo at the lagged target."""
    scene = make_scene(chain(), actuators=[intvelocity("l0", kp=5.0, act_range=(-0.3, 0.3)),
                                           position("l1", kp=4.0, time_constant=0.05)], integrator="euler")
    assert scene.actuators.na == 2
    final, states = rollout(scene, init_state(scene), 0.01, ctrls=jnp.tile(jnp.array([1.0, 0.2]), (40, 1)))
    n = np.arange(1, 41)
    np.testing.assert_allclose(states.act[:, 0], np.minimum(0.01 * n, 0.3), rtol=0, atol=1e-14)
    np.testing.assert_allclose(states.act[:, 1], 0.2 * (1 - np.exp(-0.01 * n / 0.05)), rtol=0, atol=1e-14)
    lagged = make_scene(chain(), actuators=[position("l1", kp=4.0)], integrator="euler")
    f = actuator_forces(scene.actuators, final.q, final.qd, with_activation(scene.actuators, jnp.zeros(2), final.act))
    g = actuator_forces(lagged.actuators, final.q, final.qd, final.act[1:])
    assert float(g[1]) != 0.0 and float(f[1]) == float(g[1])


def test_activation_dynamics_bad_input_is_named():
    with pytest.raises(ModelError, match="'lag'.*positive, finite time_constant"):
        make_scene(chain(), actuators=[position("l1", kp=4.0, time_constant=0.0, name="lag")])
    with pytest.raises(ModelError, match="activation dynamics .*'intvelocity:l0'.*not 'rk4'"):
        make_scene(chain(), actuators=[intvelocity("l0", kp=5.0)], integrator="rk4")
    scene = make_scene(chain(), actuators=[intvelocity("l0", kp=5.0)])
    with pytest.raises(ValueError, match=r"act \(1,\)"):
        init_state(scene, act=jnp.zeros(2))
