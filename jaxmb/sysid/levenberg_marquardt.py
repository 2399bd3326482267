"""Levenberg-Marquardt: Gauss-Newton with damping, on the exact Jacobian of a residual (Marquardt, "An algorithm
for least-squares estimation of nonlinear parameters", 1963; the damping update of Nielsen, "Damping parameter in
Marquardt's method", 1999).

Each iteration solves ``(J* J + lam diag(J* J)) dx = -J* r`` with ``J = d r / d x`` from ``jax.jacfwd`` (forward
mode: one tangent per parameter, the cheap direction for the few parameters of an identification), keeps the
step where it lowers ``1/2 |r|^2`` (and then lowers ``lam`` by up to 3 in proportion to the gain), and raises
``lam`` otherwise. The loop is a `jax.lax.while_loop`: the whole fit is one program, under `jax.jit`.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp


class LMResult(NamedTuple):
    """x (p,): the parameters found; cost: ``1/2 |r(x)|^2``; iterations; converged: the relative change of the
    cost or of ``x`` fell below its tolerance before ``max_iterations``; jacobian (n, p): ``J`` at ``x`` (for the
    covariance ``s^2 (J* J)^-1``)."""

    x: jnp.ndarray
    cost: jnp.ndarray
    iterations: jnp.ndarray
    converged: jnp.ndarray
    jacobian: jnp.ndarray


class _Iterate(NamedTuple):
    """The loop's state: the point kept ``x`` with its residual ``r`` and Jacobian ``J``, the damping ``lam``, the
    next trial step ``dx`` and the decrease ``predicted`` for it, the passes ``k``, and whether the last stopped."""

    x: jnp.ndarray
    r: jnp.ndarray
    J: jnp.ndarray
    lam: jnp.ndarray
    dx: jnp.ndarray
    predicted: jnp.ndarray
    k: jnp.ndarray
    done: jnp.ndarray


def levenberg_marquardt(residual, x0, max_iterations=50, damping=1e-3, rtol=1e-10, xtol=1e-10) -> LMResult:
    """Minimize ``1/2 |residual(x)|^2`` from ``x0`` (p,); ``residual`` maps (p,) to (n,) and is differentiable.
    It stops when a step changes the cost by at most ``rtol`` of it, or ``x`` by at most ``xtol`` of its norm (a
    step refused that small: no descent is left at round-off), or after ``max_iterations``.

    The program holds ``residual`` once: each pass of the loop linearizes at one trial point (``x0`` first), keeps
    it where it lowers the cost, and proposes the next trial from the point kept, so that the residual's value and
    its ``p`` tangents come from one forward-mode evaluation inside the loop and none outside it."""
    eye = jnp.eye(x0.shape[0], dtype=x0.dtype)

    def linearize(x):
        """``r(x)`` (n,) and ``J(x)`` (n, p) from one evaluation: the value does not depend on the tangent."""
        return jax.vmap(lambda t: jax.jvp(residual, (x,), (t,)), out_axes=(None, 1))(eye)

    def cost_of(r):
        return 0.5 * jnp.sum(r * r)

    def propose(x, r, J, lam):
        """The damped Gauss-Newton step from ``x``, and the decrease of the cost its linear model predicts."""
        JtJ, g = J.T @ J, J.T @ r
        d = jnp.diag(JtJ)
        dx = jnp.linalg.solve(JtJ + lam * jnp.diag(jnp.maximum(d, 1e-12 * jnp.max(d))), -g)
        return dx, -(g @ dx) - 0.5 * dx @ (JtJ @ dx)

    def step(it: _Iterate) -> _Iterate:
        x, r, J, lam, dx, predicted, k = it.x, it.r, it.J, it.lam, it.dx, it.predicted, it.k
        r_new, J_new = linearize(x + dx)
        c, c_new = cost_of(r), cost_of(r_new)
        first = k == 0  # the trial is x0 itself: nothing is kept yet
        gain = (c - c_new) / jnp.maximum(predicted, jnp.finfo(c.dtype).tiny)
        better = first | (jnp.isfinite(c_new) & (c_new < c))
        small = ~first & ((jnp.abs(c - c_new) <= rtol * c)
                          | (jnp.linalg.norm(dx) <= xtol * (jnp.linalg.norm(x) + xtol)))
        lam = jnp.where(first, lam, jnp.where(better, lam * jnp.maximum(1 / 3, 1 - (2 * gain - 1) ** 3), lam * 2))
        keep = lambda a, b: jnp.where(better, a, b)
        x, r, J = keep(x + dx, x), keep(r_new, r), keep(J_new, J)
        dx, predicted = propose(x, r, J, lam)
        return _Iterate(x, r, J, lam, dx, predicted, k + 1, small)

    def running(it: _Iterate):
        return (it.k <= max_iterations) & ~it.done

    n = jax.eval_shape(residual, x0).shape[0]
    init = _Iterate(x=x0, r=jnp.zeros(n, x0.dtype), J=jnp.zeros((n, x0.shape[0]), x0.dtype),
                    lam=jnp.asarray(damping, x0.dtype), dx=jnp.zeros_like(x0), predicted=jnp.zeros((), x0.dtype),
                    k=jnp.asarray(0), done=jnp.asarray(False))
    out = jax.lax.while_loop(running, step, init)
    return LMResult(x=out.x, cost=cost_of(out.r), iterations=out.k - 1, converged=out.done, jacobian=out.J)
