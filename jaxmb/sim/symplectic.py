"""Symplectic time steps on ``(q, p)``: the implicit midpoint rule and the generalized leapfrog (Stormer-Verlet for
a Hamiltonian that is not separable, ``H = 1/2 p* M(q)^-1 p + V_g(q)``), each from ``(q, p)`` to ``(q+, p+)`` over
``dt`` (Hairer, Lubich and Wanner, "Geometric Numerical Integration", 2006, sections II.1, VI.3).

Both take the right side ``(qd, pd)`` of `jaxmb.dynamics.hamiltonian.hamiltonian_dynamics` for a tree, or of
`jaxmb.loops.hamiltonian.hamiltonian_dynamics` for a closed-loop system (`jaxmb.loops.LoopModel`: then ``qd`` is
``yd`` and ``p`` are the momenta of the independent coordinates), with the joint forces ``tau`` and external forces
``f_ext`` held over the step. The configuration moves on each joint's manifold by `jaxmb.integrate` (for a closed
loop `jaxmb.loops.integrate`, which projects it back onto ``phi(q) = 0``), at a constant velocity ``w`` for a
time ``h``, written ``q (+) h w``:

``implicit_midpoint``   ``q+ = q (+) dt w``, ``p+ = p + dt pd(q_m, p_m)`` with ``w = qd(q_m, p_m)``, at the midpoint
                        ``q_m = q (+) dt/2 w``, ``p_m = (p + p+) / 2``.
``generalized_leapfrog``  ``p_h = p + dt/2 pd(q, p_h)``; ``q+ = q (+) dt/2 (qd(q, p_h) + qd(q+, p_h))``;
                        ``p+ = p_h + dt/2 pd(q+, p_h)``.

In canonical coordinates (screw joints; a closed loop's independent angles) ``q (+) h w = q + h w`` and these are
the textbook methods: second order, symmetric and symplectic, so the energy error stays bounded over long
horizons where an explicit Runge-Kutta method drifts. A joint whose velocity is body-frame (spherical, free,
planar) moves by its group's exponential and its momentum is conjugate to that velocity (Hamel's equations,
docs/hamiltonian.md): the steps stay second order and symmetric (the exponential of ``-dt w`` undoes that of
``dt w``), and a symmetric method keeps the energy error bounded on reversible motions such as a tumbling body.

Implicit equations are solved by a fixed number ``iterations`` of fixed-point sweeps (a static argument), the first
from the explicit Euler guess, so that a step compiles to one program of fixed shape under `jax.jit` and reverse
mode differentiates through the sweeps; the sweeps are a loop, not unrolled, so that the program holds the right
side once whatever the count (a closed-loop system's right side is a large program). Each sweep gains one order in
``dt``; the residual after ``k`` is of the order of ``(dt L)^k`` for a Lipschitz constant ``L`` of the right side.
``implicit_midpoint`` evaluates the right side ``iterations`` times; ``generalized_leapfrog`` ``iterations + 1``
times and the velocities alone ``iterations + 1`` times.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxmb.batching import eager_jit
from jaxmb.configuration import integrate
from jaxmb.dynamics import hamiltonian as tree
from jaxmb.loops import hamiltonian as closed
from jaxmb.loops.model import LoopModel
from jaxmb.loops.position import integrate as loop_integrate


class PhasePoint(NamedTuple):
    """A point of phase space: the configuration ``q`` (nq,) and the momenta ``p`` (nv,; ny, of a closed-loop
    system)."""

    q: jnp.ndarray
    p: jnp.ndarray


def _system(model):
    """``(rates, velocities, move)`` of a tree or a closed-loop system: ``rates(q, p, tau, f_ext) -> (qd, pd)``,
    ``velocities(q, p) -> qd`` and ``move(q, w, h) -> q (+) h w``."""
    if isinstance(model, LoopModel):
        return (lambda q, p, tau, f_ext: tuple(closed.hamiltonian_dynamics(model, q, p, tau, f_ext)),
                lambda q, p: closed.velocities_from_momenta(model, q, p),
                lambda q, w, h: loop_integrate(model, q, w, h))
    return (lambda q, p, tau, f_ext: tuple(tree.hamiltonian_dynamics(model, q, p, tau, f_ext)),
            lambda q, p: tree.velocities_from_momenta(model, q, p),
            lambda q, w, h: integrate(model, q, w, h))


def _check_iterations(iterations):
    if int(iterations) != iterations or iterations < 1:
        raise ValueError(f"iterations must be a positive integer (a static count of fixed-point sweeps), got "
                         f"{iterations!r}")


@eager_jit(static_argnames=("iterations",))
def implicit_midpoint(model, q, p, tau, dt, f_ext=None, iterations=6) -> PhasePoint:
    """One step of the implicit midpoint rule on ``(q, p)`` (module docstring), its unknowns the mean velocity
    ``w`` and ``p+`` by ``iterations`` fixed-point sweeps from ``(w, p+) = (0, p)``, whose first sweep is the
    explicit Euler step.

    Args: model (`jaxmb.Model` or `jaxmb.loops.LoopModel`), q (nq,), p (nv,; ny,), tau (nv,; ny,) forces held over
    the step, dt (), f_ext (nb, 6) or None, iterations (static)."""
    _check_iterations(iterations)
    rates, _, move = _system(model)

    def sweep(_, unknowns):
        w, p_next = unknowns
        # w = qd(q_m, p_m), p+ = p + dt pd(q_m, p_m) at q_m = q (+) dt/2 w, p_m = (p + p+) / 2
        w, pd = rates(move(q, w, 0.5 * dt), 0.5 * (p + p_next), tau, f_ext)
        return w, p + dt * pd

    w, p_next = jax.lax.fori_loop(0, iterations, sweep, (jnp.zeros_like(p), p))  # qd and p have one size
    return PhasePoint(q=move(q, w, dt), p=p_next)


@eager_jit(static_argnames=("iterations",))
def generalized_leapfrog(model, q, p, tau, dt, f_ext=None, iterations=6) -> PhasePoint:
    """One step of the generalized leapfrog (Stormer-Verlet) on ``(q, p)`` (module docstring): the half-step
    momenta ``p_h`` by ``iterations`` fixed-point sweeps from ``p``, the end configuration ``q+`` by
    ``iterations`` sweeps from ``q (+) dt qd(q, p_h)``, then the explicit last half step.

    Args: as `implicit_midpoint`."""
    _check_iterations(iterations)
    rates, velocities, move = _system(model)

    def half_step(_, p_half):  # p_h = p + dt/2 pd(q, p_h)
        return p + 0.5 * dt * rates(q, p_half, tau, f_ext)[1]

    p_half = jax.lax.fori_loop(0, iterations, half_step, p)
    v0 = velocities(q, p_half)

    def drift(_, q_next):  # q+ = q (+) dt/2 (qd(q, p_h) + qd(q+, p_h))
        return move(q, 0.5 * (v0 + velocities(q_next, p_half)), dt)

    q_next = jax.lax.fori_loop(0, iterations, drift, move(q, v0, dt))
    return PhasePoint(q=q_next, p=p_half + 0.5 * dt * rates(q_next, p_half, tau, f_ext)[1])
