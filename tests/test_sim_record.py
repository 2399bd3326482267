"""A step's record (`jaxmb.sim.inspect_step`): the step it records is `step`'s, and its fields are what the stages
and the solver computed: the free accelerations of the forward dynamics, the constraint force of the solver's
impulses, a converged solver's iterations and residual."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb.sim import init_state, inspect_step, make_scene, plane, sphere, step
from jaxmb.sim.stages import turning_rates

from checks import assert_close
from test_contact import box_on, box_scene, free_body

DT = 0.002


@pytest.mark.parametrize("solver", ["pgs", "newton"])
def test_record_is_the_steps_and_its_solver_converged(solver):
    """A sphere landing while sliding and spinning, two steps into contact (warm-started): the record's state is
    `step`'s to 1e-14; ``qdd_free`` is the forward dynamics (plus the free joint's turning rates of the Euler step);
    ``tau_constraint`` is ``J* p / dt`` of the recorded rows and impulses; the solver stopped before its cap with a
    residual at round-off."""
    model, _ = free_body(None)
    scene = make_scene(model, [plane(name="floor", friction=0.5), sphere("body", 0.1, friction=0.5)], solver=solver,
                       integrator="euler", iterations=60, tolerance=1e-12)
    q0 = jnp.asarray([0.0, 0.0, 0.1005, 1.0, 0.0, 0.0, 0.0])
    state = init_state(scene, q0, jnp.asarray([0.3, -0.2, 5.5, 1.1, 0.2, -0.4]))
    for _ in range(2):
        state = step(scene, state, None, DT)
    record = inspect_step(scene, state, None, DT)
    expected = step(scene, state, None, DT)
    for got, want in zip(jax.tree.leaves(record.state), jax.tree.leaves(expected)):
        if np.size(want):
            assert_close(got, want, rtol=1e-14)
    model = scene.model
    qdd = jaxmb.forward_dynamics(model, state.q, state.qd, jnp.zeros(model.nv)) + turning_rates(model, state.qd)
    assert_close(record.qdd_free, qdd, rtol=1e-12)
    assert_close(record.tau_constraint, record.rows.J.T @ record.impulses / DT, rtol=1e-12)
    assert_close(record.kinematics.contacts.dist, expected.contact.dist, rtol=0)
    assert float(np.max(record.contact_force[:, 0])) > 0.0  # in contact
    assert 1 <= int(record.iterations) < scene.options.iterations
    assert float(record.residual) < 1e-9 * float(np.max(np.abs(record.impulses)))


def test_record_of_free_flight_has_no_constraint_force():
    """A box in free flight far above the floor: its contact rows are inactive, and the record's constraint force
    and contact forces are exactly zero."""
    scene = box_scene(solver="newton", integrator="euler")
    state = init_state(scene, box_on((0, 0, 1), height=2.0))
    record = inspect_step(scene, state, None, DT)
    assert_close(record.tau_constraint, jnp.zeros(scene.model.nv), rtol=0)
    assert_close(record.contact_force, jnp.zeros_like(record.contact_force), rtol=0)
