"""Exact derivatives of the simulator's steps, against central differences, through 200 steps of contact.

A box launched along the floor slides on its four corners throughout (no contact opens or closes, no corner
sticks): its compliant contact under each integrator, and its constraint contact under the Newton solver (the
implicit function theorem at each step's solution). The gradient of its final velocity and position with respect to
the friction coefficient and the launch speed equals central differences to 1e-7 relative: the step is smooth
there, so an approximate derivative (a matrix held fixed, a solve left unconverged) is a defect.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb import joints
from jaxmb.sim import box, init_state, make_scene, plane, rollout

HALF = (0.1, 0.08, 0.05)
MASS = 1.3
STEPS, DT = 200, 1e-3


def box_scene(**options):
    b = jaxmb.ModelBuilder("box")
    b.add_body("body", None, joints.free(), mass=MASS, inertia=np.diag([0.003, 0.004, 0.005]))
    model = b.build()
    return make_scene(model, [plane(name="floor", friction=0.4), box("body", HALF, friction=0.4)], **options)


def gradient_and_differences(scene, depth):
    """``(jax.grad, central differences)`` of ``v_x + 3 x + 5 z`` at the end of the slide, in the friction
    coefficient (at 0.4) and the launch speed (at 1.5 m/s along x, 0.2 across), the box started ``depth`` into the
    floor (its compliant contact's rest depth)."""

    def cost(mu, v0):
        sc = scene.replace(geometry=scene.geometry.replace(friction=jnp.full(2, mu)))
        q0 = jnp.array([0.0, 0.0, HALF[2] - depth, 1.0, 0.0, 0.0, 0.0])
        final = rollout(sc, init_state(sc, q0, jnp.array([0.0, 0.0, 0.3, v0, 0.2, 0.0])), DT, steps=STEPS)[0]
        return final.qd[3] + 3.0 * final.q[0] + 5.0 * final.q[2]

    f = jax.jit(cost)
    grad = jax.jit(jax.grad(cost, argnums=(0, 1)))(0.4, 1.5)
    h = 1e-5
    fd = ((f(0.4 + h, 1.5) - f(0.4 - h, 1.5)) / (2 * h), (f(0.4, 1.5 + h) - f(0.4, 1.5 - h)) / (2 * h))
    return np.array(grad), np.array(fd)


@pytest.mark.parametrize("integrator", ["euler", "implicit", "implicitfast", "rk4"])
def test_compliant_contact_gradients_are_exact(integrator):
    """Compliant contact (stiffness 1e5, slip velocity 0.05 m/s): the implicit steps differentiate their contact
    damping matrix too."""
    scene = box_scene(contact="compliant", integrator=integrator, stiffness=1e5, dissipation=1.0,
                      slip_velocity=0.05)
    depth = (MASS * 9.81 / 4 / 1e5) ** (2 / 3)  # a corner's static Hunt-Crossley depth
    grad, fd = gradient_and_differences(scene, depth)
    assert np.all(np.abs(grad - fd) <= 1e-7 * np.abs(fd).max()), (grad, fd)


@pytest.mark.parametrize("integrator", ["euler", "implicitfast", "implicit_coriolis"])
def test_newton_constraint_contact_gradients_are_exact(integrator):
    """Constraint contact by the Newton solver on Coulomb's elliptic cone, its tolerance at round-off."""
    scene = box_scene(solver="newton", integrator=integrator, iterations=50, tolerance=1e-14)
    grad, fd = gradient_and_differences(scene, 0.0)
    assert np.all(np.abs(grad - fd) <= 1e-7 * np.abs(fd).max()), (grad, fd)
