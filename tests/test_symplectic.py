"""The symplectic steps of `jaxmb.sim.symplectic`: bounded energy error over 1e5 steps where RK4 on ``(q, qd)`` drifts,
second order, symmetry (a step back undoes a step), and derivatives through the fixed-point sweeps."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from checks import assert_close, check_grads, fast_jit
from jaxmb import joints, testing
from jaxmb.configuration import configuration_rate, integrate
from jaxmb.dynamics.articulated import forward_dynamics
from jaxmb.dynamics.energy import kinetic_energy, potential_energy
from jaxmb.dynamics.hamiltonian import hamiltonian, momenta
from jaxmb.model import ModelBuilder
from jaxmb.sim.symplectic import generalized_leapfrog, implicit_midpoint
from jaxmb.testing import random_model, random_state

STEPS = 100_000
ITERATIONS = 6


@functools.cache
def double_pendulum():
    """`jaxmb.testing.double_pendulum` released from rest at 1 and 0.5 rad: a chaotic motion."""
    return testing.double_pendulum(), jnp.array([1.0, 0.5]), jnp.zeros(2), 0.01, ITERATIONS


@functools.cache
def tumbling_body():
    """A free box with three distinct moments of inertia and an offset centre of mass, spinning about an axis
    near its unstable middle one, without gravity."""
    b = ModelBuilder("tumbling_body", gravity=(0.0, 0.0, 0.0))
    b.add_body("box", None, joints.free(), mass=2.0, com=(0.05, -0.02, 0.03), inertia=np.diag([0.1, 0.2, 0.3]))
    model = b.build()
    q = jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    return model, q, jnp.array([0.1, 4.0, 0.2, 0.3, -0.1, 0.2]), 0.02, 2 * ITERATIONS  # omega dt = 0.08


STEPPERS = {
    "implicit_midpoint": lambda model, q, p, tau, dt: implicit_midpoint(model, q, p, tau, dt,
                                                                           iterations=ITERATIONS)[:2],
    "generalized_leapfrog": lambda model, q, p, tau, dt: generalized_leapfrog(model, q, p, tau, dt,
                                                                                 iterations=ITERATIONS)[:2],
}


def rk4_velocity_step(model, q, qd, tau, dt):
    """Classical RK4 on ``(q, qd)`` in ``q``'s coordinates, quaternions normalized at the end (as
    `jaxmb.sim.integrators.rk4`)."""

    def rate(q, qd):
        return configuration_rate(model, q, qd), forward_dynamics(model, q, qd, tau)

    k1 = rate(q, qd)
    k2 = rate(q + 0.5 * dt * k1[0], qd + 0.5 * dt * k1[1])
    k3 = rate(q + 0.5 * dt * k2[0], qd + 0.5 * dt * k2[1])
    k4 = rate(q + dt * k3[0], qd + dt * k3[1])
    q = q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
    qd = qd + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    return integrate(model, q, jnp.zeros_like(qd), 0.0), qd


@functools.partial(jax.jit, static_argnums=0)
def energy_errors(iterations, model, q, qd, p, dt):
    """``|E(t) - E(0)|`` (STEPS // 100, 3) sampled every 100 steps of ``STEPS``, of RK4 on ``(q, qd)`` and of the
    implicit midpoint and generalized leapfrog steps on ``(q, p)``, side by side: one `lax.scan`, one program per
    system. Compiled with XLA's defaults: the run, not the compilation, is the cost here."""
    tau = jnp.zeros(model.nv)
    steps = (lambda q, qd: rk4_velocity_step(model, q, qd, tau, dt),
             lambda q, p: implicit_midpoint(model, q, p, tau, dt, iterations=iterations)[:2],
             lambda q, p: generalized_leapfrog(model, q, p, tau, dt, iterations=iterations)[:2])
    energies = (lambda q, qd: kinetic_energy(model, q, qd) + potential_energy(model, q),
                lambda q, p: hamiltonian(model, q, p), lambda q, p: hamiltonian(model, q, p))
    y0 = ((q, qd), (q, p), (q, p))
    E0 = [energy(*y) for energy, y in zip(energies, y0)]

    def hundred(ys, _):
        ys = jax.lax.fori_loop(0, 100, lambda i, ys: tuple(step(*y) for step, y in zip(steps, ys)), ys)
        return ys, jnp.stack([jnp.abs(energy(*y) - e0) for energy, y, e0 in zip(energies, ys, E0)])

    return jax.lax.scan(hundred, y0, None, length=STEPS // 100)[1]


@functools.cache
def errors(system):
    """``{"rk4": ..., "implicit_midpoint": ..., "generalized_leapfrog": ...}``: the sampled energy errors."""
    model, q, qd, dt, iterations = {"double_pendulum": double_pendulum, "tumbling_body": tumbling_body}[system]()
    e = np.asarray(energy_errors(iterations, model, q, qd, momenta(model, q, qd), dt))
    return dict(zip(["rk4", *STEPPERS], e.T))


def trend(e):
    """The secular change of a sampled error over the run: the rise of its least-squares line."""
    return np.polyfit(np.arange(len(e)), e, 1)[0] * len(e)


@pytest.mark.parametrize("system", ["double_pendulum", "tumbling_body"])
def test_energy_error_stays_bounded_over_1e5_steps_where_rk4_drifts(system):
    """RK4's energy error, at the same step, grows through the run: its trend is most of its final value. The
    symplectic steps' error stays below RK4's final error and has no trend (below a hundredth of RK4's): it
    oscillates with the motion. The spin of the body takes twice the fixed-point sweeps, whose residual would
    otherwise drift."""
    tenth = STEPS // 100 // 10
    rk4 = errors(system)["rk4"]
    assert trend(rk4) > 0.5 * rk4[-tenth:].mean()
    for stepper in STEPPERS:
        e = errors(system)[stepper]
        assert np.all(np.isfinite(e))
        assert e.max() < rk4[-tenth:].mean(), stepper
        assert abs(trend(e)) < 0.01 * trend(rk4), stepper


@functools.cache
def mixed_tree():
    """A floating tree (its free base's rotation a quaternion) of helical and revolute joints, with armature."""
    model = random_model(7, 5, "mixed", floating_base=True, armature=True)
    q, qd, tau = random_state(model, jax.random.PRNGKey(3))
    return model, q, momenta(model, q, 0.5 * qd), tau


@functools.partial(fast_jit, static_argnums=(0,))
def _run(stepper, model, q, p, tau, dt, n):
    """``n`` steps of ``dt`` (both traced: one program per stepper, for every step size and count)."""
    return jax.lax.fori_loop(0, n, lambda i, y: STEPPERS[stepper](model, *y, tau, dt), (q, p))


@pytest.mark.parametrize("stepper", list(STEPPERS))
def test_steps_are_second_order_on_a_tree_with_quaternion_joints(stepper):
    """The end point at t = 0.2 with steps of 20, 10 and 5 ms against the implicit midpoint rule's with steps of
    0.25 ms (its fixed-point sweeps converge to round-off at that step): each halving divides the error by about
    4."""
    model, q, p, tau = mixed_tree()
    ref_q, ref_p = _run("implicit_midpoint", model, q, p, tau, 2.5e-4, 800)
    errs = []
    for n in (10, 20, 40):
        q_n, p_n = _run(stepper, model, q, p, tau, 0.2 / n, n)
        errs.append(max(float(jnp.max(jnp.abs(q_n - ref_q))), float(jnp.max(jnp.abs(p_n - ref_p)))))
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all((orders > 1.8) & (orders < 2.3)), (errs, orders)


@pytest.mark.parametrize("stepper", list(STEPPERS))
def test_a_step_back_undoes_a_step(stepper):
    """Symmetry: ``step(-dt) o step(dt)`` is the identity (to the fixed-point residual), quaternion joints
    included."""
    model, q, p, tau = mixed_tree()
    q1, p1 = _run(stepper, model, q, p, tau, 0.01, 1)
    q0, p0 = _run(stepper, model, q1, p1, tau, -0.01, 1)
    assert_close(q0, q, 1e-6)
    assert_close(p0, p, 1e-6)


def test_steps_are_differentiable_through_the_fixed_point_sweeps():
    """Forward and reverse mode against central differences, in ``q``, ``p``, ``tau`` and ``dt`` (two sweeps: the
    derivative of each sweep is the same), of both steps at once: one program for each mode."""
    model = double_pendulum()[0]
    q, p, tau = jnp.array([0.3, -0.2]), jnp.array([0.4, 0.1]), jnp.array([0.2, -0.1])
    check_grads(lambda q, p, tau, dt: tuple(method(model, q, p, tau, dt, iterations=2)[:2]
                                            for method in (implicit_midpoint, generalized_leapfrog)),
                (q, p, tau, 0.01), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("method", [implicit_midpoint, generalized_leapfrog])
def test_the_residual_bounds_the_fixed_point_error_and_names_a_step_too_long(method):
    """On the double pendulum at 10 ms the residual of ``k`` sweeps falls geometrically with ``k`` and bounds the
    relative distance of the step's momenta to the converged step's (60 sweeps, residual at round-off); at 0.5 s
    the sweeps do not contract and the residual stays of order one however many there are."""
    model = double_pendulum()[0]
    q, tau = jnp.array([1.0, 0.5]), jnp.zeros(2)
    p = momenta(model, q, jnp.array([1.0, -2.0]))
    converged = method(model, q, p, tau, 0.01, iterations=60)
    assert converged.residual < 1e-14
    residuals = []
    for k in (2, 4, 6, 8):
        step = method(model, q, p, tau, 0.01, iterations=k)
        error = jnp.max(jnp.abs(step.p - converged.p)) / jnp.max(jnp.abs(converged.p))
        assert error < step.residual, (k, error, step.residual)
        residuals.append(float(step.residual))
    assert np.all(np.diff(np.log10(residuals)) < -1.0), residuals
    for k in (6, 60):
        assert method(model, q, p, tau, 0.5, iterations=k).residual > 0.1


def test_iterations_must_be_a_positive_count():
    model, q, qd, _, _ = double_pendulum()
    with pytest.raises(ValueError, match="iterations must be a positive integer"):
        implicit_midpoint(model, q, qd, qd, 0.01, iterations=0)
