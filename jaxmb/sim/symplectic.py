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

A step too long for its sweeps does not converge, and its result is not the method's step: each step reports the
``residual`` of its last sweep, the relative change it made to the unknowns. For a contraction of rate ``dt L < 1``
the unknowns' relative error is below ``residual dt L / (1 - dt L)``: a residual above the accuracy the caller needs
asks for more ``iterations``, and one that does not fall as they grow (the sweeps diverge, ``dt L >= 1``) for a
shorter ``dt``.
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
    """The point of phase space a step reaches: the configuration ``q`` (nq,) and the momenta ``p`` (nv,; ny, of a
    closed-loop system), and the step's fixed-point ``residual`` () (module docstring), a diagnostic that carries
    no derivative."""

    q: jnp.ndarray
    p: jnp.ndarray
    residual: jnp.ndarray


def _change(new, old):
    """The relative change ``|new - old|_inf / |new|_inf`` of one fixed-point sweep's unknowns (zero where both
    vanish, infinite where the sweeps have left the finite numbers), without a derivative."""
    new, old = jax.lax.stop_gradient(new), jax.lax.stop_gradient(old)
    scale = jnp.max(jnp.abs(new))
    change = jnp.max(jnp.abs(new - old))
    ratio = change / jnp.where(scale > 0, scale, 1.0)
    return jnp.where(change == 0, 0.0, jnp.where(jnp.isnan(ratio), jnp.inf, ratio))


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
        w, p_next, _ = unknowns
        # w = qd(q_m, p_m), p+ = p + dt pd(q_m, p_m) at q_m = q (+) dt/2 w, p_m = (p + p+) / 2
        w_new, pd = rates(move(q, w, 0.5 * dt), 0.5 * (p + p_next), tau, f_ext)
        p_new = p + dt * pd
        return w_new, p_new, jnp.maximum(_change(w_new, w), _change(p_new, p_next))

    start = (jnp.zeros_like(p), p, jnp.zeros((), p.dtype))  # qd and p have one size
    w, p_next, residual = jax.lax.fori_loop(0, iterations, sweep, start)
    return PhasePoint(q=move(q, w, dt), p=p_next, residual=residual)


@eager_jit(static_argnames=("iterations",))
def generalized_leapfrog(model, q, p, tau, dt, f_ext=None, iterations=6) -> PhasePoint:
    """One step of the generalized leapfrog (Stormer-Verlet) on ``(q, p)`` (module docstring): the half-step
    momenta ``p_h`` by ``iterations`` fixed-point sweeps from ``p``, the end configuration ``q+`` by
    ``iterations`` sweeps on its mean velocity ``w`` from ``qd(q, p_h)``, then the explicit last half step; the
    ``residual`` is the larger of the two solves'.

    Args: as `implicit_midpoint`."""
    _check_iterations(iterations)
    rates, velocities, move = _system(model)

    def half_step(_, unknowns):  # p_h = p + dt/2 pd(q, p_h)
        p_half, _ = unknowns
        p_new = p + 0.5 * dt * rates(q, p_half, tau, f_ext)[1]
        return p_new, _change(p_new, p_half)

    p_half, residual_p = jax.lax.fori_loop(0, iterations, half_step, (p, jnp.zeros((), p.dtype)))
    v0 = velocities(q, p_half)

    def drift(_, unknowns):  # q+ = q (+) dt w, w = 1/2 (qd(q, p_h) + qd(q+, p_h))
        q_next, w, _ = unknowns
        w_new = 0.5 * (v0 + velocities(q_next, p_half))
        return move(q, w_new, dt), w_new, _change(w_new, w)

    q_next, _, residual_q = jax.lax.fori_loop(0, iterations, drift, (move(q, v0, dt), v0, jnp.zeros((), p.dtype)))
    return PhasePoint(q=q_next, p=p_half + 0.5 * dt * rates(q_next, p_half, tau, f_ext)[1],
                      residual=jnp.maximum(residual_p, residual_q))
