"""The frictional contact problem of one step, solved by projected Gauss-Seidel sweeps (at most a fixed number, fewer
once they stop changing the impulses) and differentiated by the implicit function theorem at its solution.

The problem (velocity level, impulses ``p``): the constraint velocities after the step are ``v+ = A p + v_free``
with ``A = J M^-1 J*`` the constraint-space compliance (`jaxmb.sim.compliance`). Rows come in contact blocks of
three, ``[normal, tangent 1, tangent 2]``, and in scalar rows (joint limits, joint friction). With ``b = v_free -
v_star`` (``v_star`` the stabilizing target velocities) and ``R`` a small diagonal regularization (the softness of
MuJoCo's constraints), each block satisfies

    normal:    0 <= p_n  _|_  (A p + b + R p)_n >= 0                       (unilateral, complementary)
    tangent:   |p_t| <= mu p_n, and p_t opposes the tangential velocity when |p_t| = mu p_n  (Coulomb's cone)
    scalar:    lo <= p_j <= hi, with (A p + b + R p)_j of the sign that pushes p_j against its bound

Projected Gauss-Seidel (Jean and Moreau, Dynamics in the presence of unilateral contacts and dry friction, 1987;
Erleben, Velocity-based shock propagation for multibody dynamics animation, 2007) visits the blocks in turn and
solves each one exactly with the others held: the normal impulse by one division and a clamp, the tangential pair
as the minimum of its quadratic over the disk of radius ``mu p_n`` (`_friction`: in the eigenbasis of the 2x2
block, a scalar equation for the multiplier of the circle, solved by a few Newton steps). This is Coulomb's law
itself (no convex relaxation that makes sliding bodies lift off), every sweep costs O(c^2) for c rows, the
iteration count is bounded, and warm-started from the previous step's impulses the sweeps continue where they
stopped, so a resting contact converges over the steps and then needs few sweeps a step. Each world runs the same
sweep program, which is what a GPU batch wants.

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


def _where(pred, x, y: float):
    """``jnp.where(pred, x, y)`` for a scalar ``x`` and a number ``y``: one select, no call."""
    return jax.lax.select(pred, x, jnp.full_like(x, y))


def _eigen(A_tt):
    """``(l1, l2, cs, sn)``: ``sym(A_tt) = Q diag(l1, l2) Q*`` with ``Q = [[cs, -sn], [sn, cs]]`` and ``l1 >= l2``,
    for the symmetric part ``sym(A_tt)`` (the quadratic sees no other). The angle comes from the half-angle
    formulas on the larger of ``cos`` and ``sin`` (at least ``1/sqrt 2``, so nothing is divided by a small
    number), ``l2 = det / l1`` keeps the small eigenvalue to the accuracy of the determinant rather than losing it
    to the cancellation in ``m - s``, and equal eigenvalues give ``Q = I``."""
    a, b01, b10, c = jnp.unstack(A_tt.reshape(4))
    b = 0.5 * (b01 + b10)
    h = 0.5 * (a - c)
    s2 = h * h + b * b
    split = s2 > 0
    s = jnp.sqrt(_where(split, s2, 1.0))
    k = jnp.sqrt(0.5 + 0.5 * jnp.abs(h) / s)  # cos or sin of the angle, in [1/sqrt 2, 1]
    j = _where(split, b / (2.0 * s * k), 0.0)
    k = _where(split, k, 1.0)
    up = h >= 0  # the first eigenvector leans to the first axis
    l1 = 0.5 * (a + c) + _where(split, s, 0.0)
    return l1, (a * c - b * b) / l1, jax.lax.select(up, k, j), jax.lax.select(up, j, k)


@jax.custom_jvp
def _friction(A_tt, r_t, radius):
    """The tangential impulse (2,) ``argmin 0.5 p* A_tt p + r_t* p`` over the disk ``|p| <= radius``: the
    unconstrained minimizer if it lies inside (sticking), else the point of the circle where ``p = -(A_tt + g)^-1
    r_t`` for the ``g >= 0`` that puts it there (sliding: the friction opposes the slip ``A_tt p + r_t = -g p``,
    Coulomb's maximum dissipation). A radial projection of the unconstrained minimizer would be right only where
    ``A_tt`` is a multiple of the identity, and slides a box at the wrong deceleration. ``A_tt`` is symmetric
    positive definite (its symmetric part is used). Its derivative is that of the solution (`_friction_jvp`), not
    of the iterations that find it."""
    return _friction_solution(A_tt, r_t, radius)[0]


def _friction_solution(A_tt, r_t, radius, newton=None):
    """``(p, (g, sliding, stuck, q, eigen))`` of `_friction`. In the eigenbasis of ``A_tt = Q diag(l1, l2) Q*``
    (`_eigen`), with ``c = Q* r_t``, ``p(g) = -(A_tt + g)^-1 r_t = -Q t(g)`` with ``t_i = c_i / (l_i + g)``, so
    ``|p(g)| = |t(g)|`` is a sum of two scalar poles: the secular equation of a trust region step (More and
    Sorensen, Computing a trust region step, 1983). Sliding, ``g`` is Newton's method on ``1/|t(g)| - 1/radius``,
    concave and increasing in ``g``, from a lower bound of its root, ``max(0, |c|/radius - l1, |c2|/radius -
    l2)`` (``|t| >= |c|/(l1 + g)`` and ``|t| >= |c2|/(l2 + g)``), so that every step stays below the root and the
    steps converge to it monotonically. A step is a few scalar operations on ``c / max|c_i|`` and ``(l1 + g) t``,
    neither of which underflows or overflows where the radius is tiny (``g`` does not depend on these scalings);
    the circle's point is the direction of ``t`` at the radius. ``newton`` steps (default: 6 in single precision,
    12 in double) reach round-off also near the hard case, where ``c`` is so nearly along the stiff axis of an
    ill-conditioned ``A_tt`` that ``1/|t(g)|`` bends sharply and the steps from the bound are short.

    ``sliding`` whether ``p`` is on the circle of a positive radius, ``stuck`` whether the unconstrained minimizer
    is in the disk, ``q = Q* p``. Finite, and safe to differentiate, where ``r_t = 0``, ``radius = 0`` or ``l1 =
    l2``."""
    if newton is None:
        newton = 6 if jnp.finfo(A_tt.dtype).bits <= 32 else 12
    l1, l2, cs, sn = eigen = _eigen(A_tt)
    r0, r1 = jnp.unstack(r_t)
    c1, c2 = cs * r0 + sn * r1, cs * r1 - sn * r0
    f1, f2 = c1 / l1, c2 / l2  # -Q* of the unconstrained minimizer
    outside = jnp.sqrt(f1 * f1 + f2 * f2) > radius
    sliding = outside & (radius > 0)
    rho = _where(sliding, radius, 1.0)
    c1, c2 = _where(sliding, c1, 1.0), _where(sliding, c2, 1.0)  # a safe problem where the branch is unused
    unit = 1.0 / jnp.maximum(jnp.abs(c1), jnp.abs(c2))
    u1, u2, inv = c1 * unit, c2 * unit, 1.0 / (rho * unit)  # |t(g)| = rho unit at the root
    w1 = u1 * u1
    g = jnp.maximum(jnp.maximum(jnp.sqrt(w1 + u2 * u2) * inv - l1, jnp.abs(u2) * inv - l2), 0.0)
    for _ in range(newton):  # straight-line steps: cheaper than a loop of so short a body
        d1 = l1 + g
        k = d1 / (l2 + g)
        v2 = u2 * k
        w2 = v2 * v2
        m2 = w1 + w2
        g = g + (jnp.sqrt(m2) * inv - d1) * m2 / (w1 + w2 * k)
    g = jnp.maximum(g, 0.0)
    v2 = u2 * ((l1 + g) / (l2 + g))
    scale = rho * jax.lax.rsqrt(w1 + v2 * v2)
    t1, t2 = u1 * scale, v2 * scale
    stuck = ~outside
    q1 = -jax.lax.select(sliding, t1, _where(stuck, f1, 0.0))
    q2 = -jax.lax.select(sliding, t2, _where(stuck, f2, 0.0))
    return jnp.stack([cs * q1 - sn * q2, sn * q1 + cs * q2]), (g, sliding, stuck, (q1, q2), eigen)


@_friction.defjvp
def _friction_jvp(primals, tangents):
    """The derivative of the solution, in the eigenbasis of `_friction_solution` (``q = Q* p``, ``v = Q* w`` with
    ``w = dA_tt p + dr_t``, ``dA_tt`` symmetrized as ``A_tt`` is). Sticking: ``dq = -diag(1/l) v``, from ``dp =
    -A_tt^-1 w``. Sliding: differentiating ``(A_tt + g) p + r_t = 0`` and ``|p|^2 = radius^2`` gives ``dq = -E (v
    + dg q)`` with ``E = diag(1/(l_i + g))`` and ``dg = -(radius dradius + q* E v) / (q* E q)``, evaluated with
    ``q / radius`` and ``(l1 + g) E`` so that nothing underflows at a tiny radius. At zero radius the impulse stays
    zero. A few scalar operations in the place of the Newton steps' derivative."""
    (A_tt, r_t, radius), (dA, dr, drho) = primals, tangents
    p, (g, sliding, stuck, (q1, q2), (l1, l2, cs, sn)) = _friction_solution(A_tt, r_t, radius)
    da, db01, db10, dc = jnp.unstack(dA.reshape(4))
    db = 0.5 * (db01 + db10)
    p0, p1 = jnp.unstack(p)
    dr0, dr1 = jnp.unstack(dr)
    w0, w1 = da * p0 + db * p1 + dr0, db * p0 + dc * p1 + dr1
    v1, v2 = cs * w0 + sn * w1, cs * w1 - sn * w0
    h1 = l1 + g
    k = h1 / (l2 + g)
    rho = _where(sliding, radius, 1.0)
    n1, n2 = q1 / rho, q2 / rho  # a unit vector where sliding
    dgr = -(drho * h1 + n1 * v1 + k * n2 * v2) / _where(sliding, n1 * n1 + k * n2 * n2, 1.0)  # dg radius
    d1 = jax.lax.select(sliding, -(v1 + dgr * n1) / h1, _where(stuck, -v1 / l1, 0.0))
    d2 = jax.lax.select(sliding, -k * (v2 + dgr * n2) / h1, _where(stuck, -v2 / l2, 0.0))
    return p, jnp.stack([cs * d1 - sn * d2, sn * d1 + cs * d2])


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
    """``(k, x)``: ``x <- f(x)`` from ``x0`` until a step changes no entry by more than ``tol`` times the largest
    entry, at most ``iterations`` steps, ``k`` of them."""

    def going(carry):
        k, _, change = carry
        return (k < iterations) & (change > 0)

    def one(carry):
        k, x, _ = carry
        x_next = f(x)
        change = jnp.max(jnp.abs(x_next - x), initial=0.0) - tol * jnp.max(jnp.abs(x_next), initial=0.0)
        return k + 1, x_next, change

    return jax.lax.while_loop(going, one, (0, x0, jnp.asarray(jnp.inf, x0.dtype)))[:2]


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def solve(prob: Problem, p0, iterations: int, tolerance: float = 0.0):
    """``p`` (n,) after at most ``iterations`` sweeps from the warm start ``p0`` (module docstring), fewer where a
    sweep changes no impulse by more than `stopping_tolerance` times the largest impulse: a warm-started resting
    contact stops after a few. Under ``vmap`` each world keeps its own result and the batch runs until its
    slowest world stops. Its derivative is the implicit function theorem's at the returned point, in forward and
    reverse mode; none flows through ``p0``."""
    return sweeps(prob, p0, iterations, tolerance)[1]


def sweeps(prob: Problem, p0, iterations: int, tolerance: float = 0.0):
    """``(k, p)``: the ``k`` sweeps that `solve` takes from ``p0`` and their impulses (not differentiated)."""
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
        return _iterate(lambda dp: rhs + along_p(dp), rhs, iterations, tol)[1]

    def adjoint(_, rhs):
        along_p_t = jax.linear_transpose(along_p, p)
        return _iterate(lambda u: rhs + along_p_t(u)[0], rhs, iterations, tol)[1]

    return p, jax.lax.custom_linear_solve(lambda x: x - along_p(x), forced, tangent, adjoint)


def residuals(prob: Problem, p):
    """How far ``p`` is from solving the problem, per condition (each (nc,) or (k,), zero at a solution):
    ``normal`` the complementarity ``min(p_n, w_n)`` with ``w = A p + b``; ``cone`` the excess ``|p_t| - mu p_n``;
    ``slip`` for contacts inside the cone (sticking) the slip ``|w_t|``, and for those on its edge the
    misalignment ``|p_t + mu p_n w_t/|w_t||`` of the friction with the slip; ``scalar`` for the scalar rows the
    distance of ``p_j`` from the projection of ``p_j - w_j`` on its bounds."""
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
