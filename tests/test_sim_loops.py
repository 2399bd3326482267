"""Closed-loop systems in the simulator: constraint-embedded models stepped with the tree's integrators, contact
and limits included.

Oracles: the order of RK4's energy error on a four-bar linkage, the loop residual at round-off, a loop model
without constraints stepping as its tree (contact, friction and limit rows through the embedded compliance against
the tree's compliance walk), the weight carried by a four-bar leg standing on its foot, and the gradient of a
step in contact against central differences.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb.loops import close_loops, constraint_residual, mechanisms, spanning_velocity
from jaxmb.sim import contact_forces, failures, init_state, make_scene, plane, position, rollout, sphere, step

G = 9.81
FOOT = 0.02  # radius of the foot sphere (m)


@pytest.fixture(scope="module")
def leg():
    """The four-bar leg with its foot just above the floor (the slider raised by the foot's height + 1 mm)."""
    lm = mechanisms.four_bar_leg()
    q = mechanisms.reference_configuration(lm)
    foot = jaxmb.frame_poses(lm.tree, q)
    height = float(foot.p[lm.tree.frame_names.index("foot"), 2])
    return lm, q.at[0].add(-height + FOOT + 1e-3)


def leg_scene(model, **kw):
    return make_scene(model, [plane(name="floor"), sphere("foot", FOOT, name="foot")],
                      actuators=[position("driver", kp=200.0, kv=2.0)], **kw)


def loop_residual(lm, qs):
    return float(jnp.max(jnp.abs(jax.vmap(lambda q: constraint_residual(lm, q))(qs))))


STEPS, DT = 400, 2e-3


@jax.jit
def stand(scene, state, target):
    """``STEPS`` steps of ``DT`` with the driver's servo at ``target``: the final state and the loop residual."""
    final, states = rollout(scene, state, DT, ctrls=jnp.full((STEPS, 1), target))
    residual = jnp.max(jnp.abs(jax.vmap(lambda q: constraint_residual(scene.model, q))(states.q)))
    return final, residual


def with_gain(scene, kp):
    return scene.replace(actuators=scene.actuators.replace(kp=jnp.array([kp])))


def test_closed_loop_rk4_energy_error_converges_at_fourth_order(leg):
    """A four-bar linkage swinging under gravity: halving ``dt`` divides RK4's energy error by 16 (order within
    10 % of 4), and the projection keeps the loop closed to round-off."""
    lm, _ = leg
    scene = make_scene(lm, integrator="rk4")
    start = init_state(scene, mechanisms.reference_configuration(lm), jnp.array([0.3, 2.0]))

    def energy(state):
        q, yd = state.q, state.qd
        return float(jaxmb.kinetic_energy(lm.tree, q, spanning_velocity(lm, q, yd)) + jaxmb.potential_energy(lm.tree, q))

    errors = []
    for dt in (0.004, 0.002):
        state, error = start, 0.0
        for _ in range(int(round(1.0 / dt))):
            state = step(scene, state, None, dt)
            error = max(error, abs(energy(state) - energy(start)))
        errors.append(error)
        assert float(jnp.max(jnp.abs(constraint_residual(lm, state.q)))) < 1e-13
    assert abs(np.log2(errors[0] / errors[1]) - 4) < 0.4, errors


@pytest.mark.parametrize("solver", ["pgs", "newton"])
def test_loop_model_without_constraints_steps_as_its_tree(leg, solver):
    """The spanning tree of the four-bar leg (open: its push rod hangs free), closed by no constraint, steps as the
    tree itself: foot contact, Coulomb friction and a position limit in the solver, the rows' compliance from the
    embedded articulated-body algorithm against the tree's compliance walk and factored solves (Gauss-Seidel), the
    dense Hessian on the independent velocities against the tree's articulated-body Hessian (Newton)."""
    lm, q = leg
    support = lm.tree.joint_coordinates("support")[0].start
    tree = lm.tree.replace(q_lower=lm.tree.q_lower.at[support].set(q[support] - 0.02))
    ctrls = jnp.full((150, 1), 0.3)
    finals = []
    for model in (tree, close_loops(tree, [])):
        scene = leg_scene(model, frictionloss={"coupler": 0.05}, solver=solver)
        assert scene.rows == 3 + 1 + 1
        finals.append(rollout(scene, init_state(scene, q), DT, ctrls=ctrls)[0])
    a, b = finals
    np.testing.assert_allclose(b.q, a.q, atol=1e-12)
    np.testing.assert_allclose(b.qd, a.qd, atol=1e-10)
    np.testing.assert_allclose(b.impulse, a.impulse, atol=1e-10)
    assert float(a.impulse[3]) > 0 and float(a.contact.force[0, 0]) > 0  # the limit and the foot push


def test_four_bar_leg_standing_on_its_foot_carries_its_weight(leg):
    """The trunk on its vertical slider, held by the leg under a position servo: at rest the floor carries the
    whole weight (the slider carries no vertical force), and the loop stays closed."""
    lm, q = leg
    scene = leg_scene(lm)
    final, residual = stand(scene, init_state(scene, q), q[1])
    weight = float(jnp.sum(lm.tree.mass)) * G
    assert not bool(final.diverged)
    assert abs(float(contact_forces(final)[0, 2]) - weight) < 1e-6 * weight
    assert float(jnp.max(jnp.abs(final.qd))) < 1e-5
    assert float(residual) < 1e-12


def test_gradient_through_a_closed_loop_contact_step_matches_differences(leg):
    """The slider's velocity one step after standing, as a function of the servo's gain while the servo moves to a
    new target: reverse mode through the embedded dynamics, the constraint solve with the foot in contact, and the
    loop projection, against central differences."""
    lm, q = leg
    scene = leg_scene(lm)
    standing, _ = stand(scene, init_state(scene, q), q[1])

    @jax.jit
    def slider_velocity(kp):
        return step(with_gain(scene, kp), standing, jnp.array([0.25]), DT).qd[0]

    grad = float(jax.jit(jax.grad(slider_velocity))(200.0))
    h = 1e-3
    fd = float((slider_velocity(200.0 + h) - slider_velocity(200.0 - h)) / (2 * h))
    assert float(standing.contact.force[0, 0]) > 0 and grad != 0
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_a_step_past_the_linkage_range_stops_its_world_with_loops_open():
    """The four-bar leg with its coupler as the independent joint, batched with two coupler rates: at 300 rad/s a
    10 ms step asks for a coupler angle the linkage cannot reach, so that world stops with the reason ``loops
    open`` and keeps its configuration; at 10 rad/s the other world steps and stays closed."""
    lm = mechanisms.four_bar_leg(independent="coupler")
    q = mechanisms.reference_configuration(lm)
    scene = make_scene(lm)
    start = init_state(scene, q)
    yd = jnp.array([[0.0, 10.0], [0.0, 300.0]])
    out = jax.jit(jax.vmap(lambda v: step(scene, start._replace(qd=v), None, 0.01)))(yd)
    assert failures(out.diverged[0]) == () and failures(out.diverged[1]) == ("loops open",)
    assert np.all(np.asarray(out.q[1]) == np.asarray(start.q))
    assert float(jnp.max(jnp.abs(constraint_residual(lm, out.q[0])))) < 1e-10
    assert float(out.q[0, 3]) != float(start.q[3])
