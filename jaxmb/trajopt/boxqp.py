"""The box-constrained quadratic program of a box-DDP backward pass, by projected Newton steps (Tassa, Mansard and
Todorov, "Control-Limited Differential Dynamic Programming", 2014), as Crocoddyl's ``BoxQP``::

    min_x 1/2 x' H x + q' x   subject to   lb <= x <= ub

Each iteration splits the coordinates into clamped ones (at a bound whose gradient pushes outward) and free ones,
takes the Newton step of the free block ``H_ff``, and searches the step length along the projected arc
``clip(x + alpha dx)`` (alpha = 1, 1/2, ..., 1/512) for Armijo's decrease (``th_acceptstep``); it stops where the
free gradient's largest entry is at most ``th_grad``. Masked to fixed shapes: the free block is solved as
``H`` with the clamped rows and columns replaced by the identity's.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_factor, cho_solve

MAX_ITERATIONS = 100
TH_ACCEPTSTEP = 0.1
TH_GRAD = 1e-5
ALPHAS = tuple(0.5 ** n for n in range(10))


class BoxQPSolution(NamedTuple):
    """x (n,) the minimizer; free (n,) bool, the coordinates off their bounds at the last iteration; Hff_inv (n, n)
    the inverse of ``H``'s free block, zero in clamped rows and columns."""

    x: jnp.ndarray
    free: jnp.ndarray
    Hff_inv: jnp.ndarray


def box_qp(H, q, lb, ub, x_init) -> BoxQPSolution:
    """Crocoddyl's ``BoxQP.solve(H, q, lb, ub, x_init)`` (module docstring), ``x_init`` clipped into the box."""
    n = q.shape[0]
    alphas = jnp.asarray(ALPHAS, q.dtype)

    def body(carry):
        it, x, _, free, Hff_inv = carry
        g = q + H @ x
        clamped = ((x == lb) & (g > 0)) | ((x == ub) & (g < 0))
        free = ~clamped
        both = free[:, None] & free[None, :]
        Hm = jnp.where(both, H, 0.0) + jnp.diag(clamped.astype(H.dtype))
        factor = cho_factor(Hm, lower=True)
        Hff_inv = jnp.where(both, cho_solve(factor, jnp.eye(n, dtype=H.dtype)), 0.0)
        qf = jnp.where(free, g, 0.0)
        dx = jnp.where(free, -cho_solve(factor, qf), 0.0)
        g_search = jnp.where(free, -qf, g)
        f_old = 0.5 * x @ H @ x + q @ x
        x_new = jnp.clip(x[None] + alphas[:, None] * dx[None], lb, ub)  # every step length at once
        f_new = 0.5 * jnp.einsum("ai,ij,aj->a", x_new, H, x_new) + x_new @ q
        ok = f_old - f_new > TH_ACCEPTSTEP * ((x[None] - x_new) @ g_search)
        x = jnp.where(jnp.any(ok), x_new[jnp.argmax(ok)], x)
        converged = jnp.max(jnp.abs(qf)) <= TH_GRAD
        return it + 1, x, converged, free, Hff_inv

    def cond(carry):
        it, _, converged, _, _ = carry
        return (it < MAX_ITERATIONS) & ~converged

    x0 = jnp.clip(x_init, lb, ub)
    init = (0, x0, jnp.zeros((), bool), jnp.ones(n, bool), jnp.zeros((n, n), q.dtype))
    _, x, _, free, Hff_inv = jax.lax.while_loop(cond, body, init)
    return BoxQPSolution(x, free, Hff_inv)
