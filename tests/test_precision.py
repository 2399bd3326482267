"""Every dot product jaxmb traces runs at full float32 precision (`jaxmb.batching.precision`).

At JAX's default precision a float32 dot product runs in TensorFloat-32 on NVIDIA GPUs since Ampere (a relative
error of about 1e-3) and in bfloat16 passes on TPUs. The CPU computes it in full precision either way, so no
numerical test here could see the difference: the check is on the jaxprs. Each public function that multiplies
dense matrices, its gradient, and the sweeps beside them bind no ``dot_general`` below ``Precision.HIGHEST``.
"""

import jax
import jax.numpy as jnp
import pytest

import jaxmb
from jaxmb import joints, loops
from jaxmb.loops import mechanisms
from jaxmb.testing import random_model, random_state

from checks import equations

HIGHEST = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)


def dot_precisions(jaxpr):
    """The ``precision`` of every ``dot_general`` in ``jaxpr`` and the jaxprs nested in its equations."""
    return [e.params["precision"] for e in equations(jaxpr) if e.primitive.name == "dot_general"]


def tree_calls():
    model = random_model(3, n_bodies=6, floating_base=True)
    q, qd, tau = random_state(model, jax.random.PRNGKey(0))
    frames = model.body_names[-2:]

    def Lambda(q):
        return jaxmb.operational_space_inertia(model, q, frames).Lambda

    return {
        "potential_energy": lambda: jaxmb.potential_energy(model, q),
        "frame_velocity": lambda: jaxmb.frame_velocity(model, q, qd, frames[0]),
        "mass_matrix_inverse": lambda: jaxmb.mass_matrix_inverse(model, q),
        "forward_dynamics_derivatives": lambda: jaxmb.forward_dynamics_derivatives(model, q, qd, tau),
        "inverse_dynamics_derivatives": lambda: jaxmb.inverse_dynamics_derivatives(model, q, qd, tau),
        "task_space": lambda: jaxmb.task_space(model, q, frames),
        "operational_space_inertia": lambda: Lambda(q),
        "operational_space_bias": lambda: jaxmb.operational_space_bias(model, q, qd, tau, frames),
        "operational_space_control": lambda: jaxmb.operational_space_control(model, q, qd, frames, jnp.ones(12)),
        "forward_dynamics": lambda: jaxmb.forward_dynamics(model, q, qd, tau),
        "grad of operational_space_inertia": lambda: jax.grad(lambda q: jnp.sum(Lambda(q)))(q),
        "grad of potential_energy": lambda: jax.grad(jaxmb.potential_energy, 1)(model, q),
    }


def loop_calls():
    lm = mechanisms.four_bar_leg()
    q = mechanisms.reference_configuration(lm)
    yd = jnp.ones(lm.ny)
    qd = loops.spanning_velocity(lm, q, yd)
    tau = jnp.ones(lm.tree.nv)
    frame = [lm.tree.body_names[-1]]
    return {
        "loops.forward_dynamics": lambda: loops.forward_dynamics(lm, q, yd, loops.generalized_force(lm, q, tau)),
        "loops.inverse_dynamics": lambda: loops.inverse_dynamics(lm, q, yd, yd),
        "loops.mass_matrix": lambda: loops.mass_matrix(lm, q),
        "loops.lagrange_forward_dynamics": lambda: loops.lagrange_forward_dynamics(lm, q, qd, tau),
        "loops.projected_forward_dynamics": lambda: loops.projected_forward_dynamics(
            lm, q, yd, loops.generalized_force(lm, q, tau)),
        "loops.body_forces": lambda: loops.body_forces(lm, q, qd, jnp.zeros_like(qd), tau),
        "loops.constraint_bias": lambda: loops.constraint_bias(lm, q, qd),
        "loops.embedding": lambda: loops.embedding(lm, q, yd),
        "loops.operational_space_inertia": lambda: loops.operational_space_inertia(lm, q, frame),
        "loops.solve_configuration": lambda: loops.solve_configuration(lm, loops.independent_configuration(lm, q)),
        "loops.integrate": lambda: loops.integrate(lm, q, yd, 1e-3),
        "grad of loops.forward_dynamics": lambda: jax.grad(
            lambda q: jnp.sum(loops.forward_dynamics(lm, q, yd, yd)))(q),
    }


def sim_calls():
    """A float32 quadruped on its feet with constraint contact and joint limits, and a compliant ball stepped
    implicitly: a step each; and the gradient of a short rollout of a ball on the floor (constraint contact)."""
    from jaxmb import assets, sim

    path = assets.path("quadruped.urdf")
    model = jaxmb.load_urdf(path, floating_base=True).cast(jnp.float32)
    feet = sim.urdf_geometry(path, model)
    scene = sim.make_scene(model, [sim.plane(name="floor")] + feet, integrator="euler",
                           actuators=[sim.position(j, kp=60.0, kv=2.0) for j in model.joint_names[1:]])
    state = sim.init_state(scene, jaxmb.neutral_configuration(model).at[2].set(0.45))
    ball = jaxmb.ModelBuilder("ball")
    ball.add_body("ball", None, joints.free(), mass=1.0, inertia=jnp.eye(3) * 1e-3)
    ball = ball.build().cast(jnp.float32)
    soft = sim.make_scene(ball, [sim.plane(), sim.sphere("ball", 0.1)], contact="compliant")
    at_floor = sim.init_state(soft, jnp.array([0, 0, 0.099, 1, 0, 0, 0], jnp.float32))

    rigid = sim.make_scene(ball, [sim.plane(), sim.sphere("ball", 0.1)], integrator="euler")
    resting = sim.init_state(rigid, at_floor.q)

    def height(z):  # through the constraint solve's derivative rule, on a small model
        return sim.rollout(rigid, resting._replace(q=resting.q.at[2].set(z)), 0.002, steps=2)[0].q[2]

    return {
        "sim.step, constraint contact and limits": lambda: sim.step(scene, state, None, 0.002),
        "sim.step, implicit compliant contact": lambda: sim.step(soft, at_floor, None, 0.002),
        "grad of sim.rollout": lambda: jax.grad(height)(jnp.float32(0.099)),
    }


CALLS = tree_calls() | loop_calls() | sim_calls()


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_dot_product_is_at_full_precision(name):
    precisions = dot_precisions(jax.make_jaxpr(CALLS[name])().jaxpr)
    assert all(p == HIGHEST for p in precisions), f"{name}: {precisions.count(None)} products at default precision"


def test_the_check_sees_a_default_precision_product():
    """The walk finds a product at default precision, nested in a jit (so the passing tests above can fail)."""
    jaxpr = jax.make_jaxpr(jax.jit(lambda A: A @ A))(jnp.eye(3)).jaxpr
    assert dot_precisions(jaxpr) == [None]
