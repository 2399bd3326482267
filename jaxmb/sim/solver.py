"""The frictional contact problem of one step, solved by projected Gauss-Seidel sweeps (at most a fixed number, fewer
once they stop changing the impulses) and differentiated by the implicit function theorem at its solution.

The problem (velocity level, impulses ``p``): the constraint velocities after the step are ``v+ = A p + v_free``
with ``A = J M^-1 J*`` the constraint-space compliance (`jaxmb.sim.constraints`). Rows come in contact blocks of
three, ``[normal, tangent 1, tangent 2]``, and in scalar rows (joint limits, joint friction). With ``b = v_free -
v_star`` (``v_star`` the stabilizing target velocities) and ``R`` a small diagonal regularization (the softness of
MuJoCo's constraints), each block satisfies

    normal:    0 <= p_n  _|_  (A p + b + R p)_n >= 0                       (unilateral, complementary)
    tangent:   |p_t| <= mu p_n, and p_t opposes the tangential velocity when |p_t| = mu p_n  (Coulomb's cone)
    scalar:    lo <= p_j <= hi, with (A p + b + R p)_j of the sign that pushes p_j against its bound

Projected Gauss-Seidel (Jean and Moreau, Dynamics in the presence of unilateral contacts and dry friction, 1987;
Erleben, Velocity-based shock propagation for multibody dynamics animation, 2007) visits the blocks in turn and
solves each one exactly with the others held: the normal impulse by one division and a clamp, the tangential pair
as the minimum of its quadratic over the disk of radius ``mu p_n`` (`_friction`). This is Coulomb's law itself (no convex
relaxation that makes sliding bodies lift off), every sweep costs O(c^2) for c rows, the iteration count is
bounded, and warm-started from the previous step's impulses the sweeps continue where they stopped, so a resting
contact converges over the steps and then needs few sweeps a step. Each world runs the same sweep program, which
is what a GPU batch wants.

Derivatives. At the solution ``p* = F(p*, theta)`` of one sweep ``F`` (``theta`` = A, b, mu, bounds), the implicit
function theorem gives ``dp* = (I - dF/dp)^-1 dF/dtheta dtheta``: the tangent is solved by fixed-point iterations
``dp <- dF/dtheta dtheta + dF/dp dp`` under the same cap and stopping rule as the sweeps, and reverse mode by the
adjoint iteration ``u <- g + (dF/dp)* u`` followed by ``(dF/dtheta)* u``: one sweep's derivative, never the
iterations'. ``F`` is piecewise smooth: where a contact opens, closes, or starts to slide, its derivative is that
of one side of the switch. It stays finite, and the series of the tangent is truncated at the iteration cap, so a
derivative at a switch is finite, never NaN.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxmb.batching import full_precision
from jaxmb.rotation import safe_norm


class Problem(NamedTuple):
    """One world's contact problem, ``n = 3 nc + k`` rows.

    A (n, n)      the compliance with the regularization on its diagonal, ``J M^-1 J* + R``
    b (n,)        ``v_free - v_star``
    mu (nc,)      the friction coefficient of each contact block (rows ``3i .. 3i+2``)
    lo, hi (k,)   bounds of the scalar rows ``3 nc ..``
    """

    A: jnp.ndarray
    b: jnp.ndarray
    mu: jnp.ndarray
    lo: jnp.ndarray
    hi: jnp.ndarray


def _solve2(M, r):
    """``M^-1 r`` for a 2x2 ``M`` by Cramer's rule."""
    det = M[0, 0] * M[1, 1] - M[0, 1] * M[1, 0]
    return jnp.stack([M[1, 1] * r[0] - M[0, 1] * r[1], M[0, 0] * r[1] - M[1, 0] * r[0]]) / det


@jax.custom_jvp
def _friction(A_tt, r_t, radius):
    """The tangential impulse (2,) ``argmin 0.5 p* A_tt p + r_t* p`` over the disk ``|p| <= radius``: the
    unconstrained minimizer if it lies inside (sticking), else the point of the circle where ``p = -(A_tt + g)^-1
    r_t`` for the ``g >= 0`` that puts it there (sliding: the friction opposes the slip ``A_tt p + r_t = -g p``,
    Coulomb's maximum dissipation). A radial projection of the unconstrained minimizer would be right only where
    ``A_tt`` is a multiple of the identity, and slides a box at the wrong deceleration. Its derivative is that of
    the solution (`_friction_jvp`), not of the iterations that find it."""
    return _friction_solution(A_tt, r_t, radius)[0]


def _friction_solution(A_tt, r_t, radius, newton=6):
    """``(p, g, sliding)`` of `_friction`: ``g`` by Newton's method on ``1/|p(g)| - 1/radius`` from zero, as for a
    trust region step (More and Sorensen, Computing a trust region step, 1983), then ``p`` scaled onto the
    circle; ``sliding`` whether ``p`` is on the circle of a positive radius. Finite where ``r_t = 0`` or
    ``radius = 0``."""
    eye = jnp.eye(2, dtype=A_tt.dtype)
    p_free = -_solve2(A_tt, r_t)
    outside = safe_norm(p_free) > radius
    sliding = outside & (radius > 0)
    rho = jnp.where(sliding, radius, 1.0)
    r = jnp.where(sliding, r_t, jnp.ones_like(r_t))  # a safe problem where the branch is unused

    g = jnp.zeros((), A_tt.dtype)
    for _ in range(newton):  # a few straight-line steps: cheaper than a loop of so short a body
        M = A_tt + g * eye
        p = -_solve2(M, r)
        norm = jnp.maximum(safe_norm(p), jnp.finfo(p.dtype).tiny)
        slope = (p @ _solve2(M, p)) / norm**3
        g = jnp.maximum(g - (1.0 / norm - 1.0 / rho) / slope, 0.0)
    p = -_solve2(A_tt + g * eye, r)
    p_slide = p * (rho / jnp.maximum(safe_norm(p), jnp.finfo(p.dtype).tiny))
    return jnp.where(outside, jnp.where(sliding, p_slide, 0.0), p_free), g, sliding


@_friction.defjvp
def _friction_jvp(primals, tangents):
    """The derivative of the solution. Sticking: ``dp = -A_tt^-1 (dA_tt p + dr_t)``. Sliding: differentiating
    ``(A_tt + g) p + r_t = 0`` and ``|p|^2 = radius^2`` gives ``dp = -(A_tt + g)^-1 (w + dg p)`` with
    ``w = dA_tt p + dr_t`` and ``dg = -(radius dradius + p* (A_tt + g)^-1 w) / (p* (A_tt + g)^-1 p)``. At zero
    radius the impulse stays zero. One small solve in the place of the Newton steps' derivative."""
    (A_tt, r_t, radius), (dA, dr, drho) = primals, tangents
    p, g, sliding = _friction_solution(A_tt, r_t, radius)
    w = dA @ p + dr
    dp_stick = -_solve2(A_tt, w)
    M = A_tt + g * jnp.eye(2, dtype=A_tt.dtype)
    Minv_w, Minv_p = _solve2(M, w), _solve2(M, p)
    den = jnp.where(sliding, p @ Minv_p, 1.0)
    dg = -(radius * drho + p @ Minv_w) / den
    dp_slide = -(Minv_w + dg * Minv_p)
    stuck = safe_norm(_solve2(A_tt, r_t)) <= radius
    return p, jnp.where(sliding, dp_slide, jnp.where(stuck, dp_stick, 0.0))


def sweep(prob: Problem, p):
    """One projected Gauss-Seidel sweep ``F(p)`` (n,): every contact block, then every scalar row, solved exactly
    with the others held at their latest values. Each kind of block is one ``lax.scan`` over the blocks, so the
    program does not grow with their number."""
    A, b, n = prob.A, prob.b, prob.b.shape[0]
    nc = prob.mu.shape[0]

    def contact(p, i):
        s = 3 * i
        rows = jax.lax.dynamic_slice(A, (s, 0), (3, n))
        block = jax.lax.dynamic_slice(rows, (0, s), (3, 3))
        p_i = jax.lax.dynamic_slice(p, (s,), (3,))
        r = rows @ p + jax.lax.dynamic_slice(b, (s,), (3,))
        p_n = jnp.maximum(p_i[0] - r[0] / block[0, 0], 0.0)
        r_t = r[1:] + block[1:, 0] * (p_n - p_i[0])  # the tangential residual with the new normal impulse
        A_tt = block[1:, 1:]
        p_t = _friction(A_tt, r_t - A_tt @ p_i[1:], prob.mu[i] * p_n)
        return jax.lax.dynamic_update_slice(p, jnp.concatenate([p_n[None], p_t]), (s,)), None

    def scalar(p, j):
        row = jax.lax.dynamic_slice(A, (3 * nc + j, 0), (1, n))[0]
        p_j = jnp.clip(p[3 * nc + j] - (row @ p + b[3 * nc + j]) / row[3 * nc + j], prob.lo[j], prob.hi[j])
        return jax.lax.dynamic_update_slice(p, p_j[None], (3 * nc + j,)), None

    if nc:
        p, _ = jax.lax.scan(contact, p, jnp.arange(nc))
    if n > 3 * nc:
        p, _ = jax.lax.scan(scalar, p, jnp.arange(n - 3 * nc))
    return p


def stopping_tolerance(tolerance: float, dtype) -> float:
    """The relative change below which `solve` stops: ``tolerance``, but never under a few units of round-off of
    ``dtype`` (``8 eps``), which a sweep's floating-point arithmetic cannot get under."""
    return max(float(tolerance), 8 * float(jnp.finfo(dtype).eps))


def _iterate(f, x0, iterations, tol):
    """``x <- f(x)`` from ``x0`` until a step changes no entry by more than ``tol`` times the largest entry, at most
    ``iterations`` steps."""

    def going(carry):
        k, _, change = carry
        return (k < iterations) & (change > 0)

    def one(carry):
        k, x, _ = carry
        x_next = f(x)
        change = jnp.max(jnp.abs(x_next - x), initial=0.0) - tol * jnp.max(jnp.abs(x_next), initial=0.0)
        return k + 1, x_next, change

    return jax.lax.while_loop(going, one, (0, x0, jnp.asarray(jnp.inf, x0.dtype)))[1]


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def solve(prob: Problem, p0, iterations: int, tolerance: float = 0.0):
    """``p`` (n,) after at most ``iterations`` sweeps from the warm start ``p0`` (module docstring), fewer where a
    sweep changes no impulse by more than `stopping_tolerance` times the largest impulse: a warm-started resting
    contact stops after a few. Under ``vmap`` each world keeps its own result and the batch runs until its
    slowest world stops. Its derivative is the implicit function theorem's at the returned point, in forward and
    reverse mode; none flows through ``p0``."""
    return _iterate(lambda p: sweep(prob, p), p0, iterations, stopping_tolerance(tolerance, prob.b.dtype))


@solve.defjvp
@full_precision
def _solve_jvp(iterations, tolerance, primals, tangents):
    """``dp`` solves ``(I - dF/dp) dp = dF/dtheta dtheta`` by the fixed-point iteration ``dp <- dF/dtheta dtheta +
    dF/dp dp`` with the solve's own stopping rule; as a `jax.lax.custom_linear_solve`, reverse mode runs the
    adjoint iteration ``u <- g + (dF/dp)* u`` (then ``(dF/dtheta)* u``) with the same rule, not the transpose of
    the iterations. Traced when a derivative is taken, outside the caller's precision context: full precision is
    its own."""
    prob, p0 = primals
    d_prob, _ = tangents
    p = solve(prob, p0, iterations, tolerance)
    tol = stopping_tolerance(tolerance, p.dtype)
    _, forced = jax.jvp(lambda theta: sweep(theta, p), (prob,), (d_prob,))
    _, along_p = jax.linearize(lambda x: sweep(prob, x), p)

    def tangent(_, rhs):
        return _iterate(lambda dp: rhs + along_p(dp), rhs, iterations, tol)

    def adjoint(_, rhs):
        along_p_t = jax.linear_transpose(along_p, p)
        return _iterate(lambda u: rhs + along_p_t(u)[0], rhs, iterations, tol)

    return p, jax.lax.custom_linear_solve(lambda x: x - along_p(x), forced, tangent, adjoint)


def residuals(prob: Problem, p):
    """How far ``p`` is from solving the problem, per condition (each (nc,) or (k,), zero at a solution):
    ``normal`` the complementarity ``min(p_n, w_n)`` with ``w = A p + b``; ``cone`` the excess ``|p_t| - mu p_n``;
    ``slip`` for contacts inside the cone (sticking) the slip ``|w_t|``, and for those on its edge the
    misalignment ``|p_t + mu p_n w_t/|w_t||`` of the friction with the slip; ``scalar`` for the scalar rows the distance of ``p_j`` from the projection of
    ``p_j - w_j`` on its bounds."""
    nc = prob.mu.shape[0]
    w = prob.A @ p + prob.b
    pc, wc = p[: 3 * nc].reshape(nc, 3), w[: 3 * nc].reshape(nc, 3)
    p_n, p_t, w_n, w_t = pc[:, 0], pc[:, 1:], wc[:, 0], wc[:, 1:]
    radius = prob.mu * p_n
    t_norm, w_norm = safe_norm(p_t), safe_norm(w_t)
    sticking = t_norm < radius * (1 - 1e-9)
    direction = w_t / jnp.where(w_norm > 0, w_norm, 1.0)[:, None]
    slip = jnp.where(sticking, w_norm, jnp.where(w_norm > 0, safe_norm(p_t + radius[:, None] * direction), 0.0))
    ps, ws = p[3 * nc:], w[3 * nc:]
    return dict(normal=jnp.minimum(p_n, w_n), cone=jnp.maximum(t_norm - radius, 0.0), slip=slip,
                scalar=ps - jnp.clip(ps - ws, prob.lo, prob.hi))
