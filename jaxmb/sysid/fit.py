"""Fits of the parameters that a regressor makes linear: weighted least squares with its covariance and confidence
intervals, and a refinement in log-Cholesky parameters that makes every body physical.

With joint forces measured at N states, ``y = W theta + e`` stacks the regressor ``W`` (N nv, p) (the base
regressor `jaxmb.sysid.BaseParameters.columns`, whose columns are independent) and the measured forces ``y`` (N nv,).
Rows weighted by ``w`` (the inverse variance of each joint's noise, `joint_weights`) give the best linear unbiased
estimate (Gautier, "Dynamic identification of robots with power model", 1997)

    theta = (W* Om W)^-1 W* Om y,   Cov(theta) = s^2 (W* Om W)^-1,   s^2 = r* Om r / (N nv - p)

with ``Om = diag(w)`` and the residual ``r = y - W theta``; ``theta_i +- t_{(1+level)/2, N nv - p} sqrt(Cov_ii)``
are its Student-t confidence intervals.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import scipy.stats

from jaxmb.sysid.levenberg_marquardt import levenberg_marquardt
from jaxmb.sysid.physical import from_log_cholesky, log_cholesky, nearest_physical, pseudo_inertia
from jaxmb.sysid.regressor import N_BODY


class LinearFit(NamedTuple):
    """theta (p,): the estimate; covariance (p, p); std (p,): ``sqrt(diag(covariance))``; interval (p,): the
    confidence half-widths at the fit's level; sigma2: ``s^2``, the weighted residual variance (1 where the weights
    are the inverse noise variances and the model is right); dof: ``N nv - p``."""

    theta: jnp.ndarray
    covariance: jnp.ndarray
    std: jnp.ndarray
    interval: jnp.ndarray
    sigma2: jnp.ndarray
    dof: int


def least_squares(W, y, weights=None, level=0.95) -> LinearFit:
    """The weighted least-squares fit of ``y = W theta`` (module docstring). ``W`` (n, p), ``y`` (n,), ``weights``
    (n,) or None (all 1), ``level``: the confidence level of the intervals (a Python float: static under
    `jax.jit`). Solved by QR of ``sqrt(w) W``."""
    n, p = W.shape
    if n <= p:
        raise ValueError(f"least_squares needs more rows than parameters: W is {W.shape}")
    sw = jnp.ones(n, W.dtype) if weights is None else jnp.sqrt(weights)
    A, b = W * sw[:, None], y * sw
    Q, R = jnp.linalg.qr(A)
    theta = jax.scipy.linalg.solve_triangular(R, Q.T @ b)
    r = b - A @ theta
    dof = n - p
    sigma2 = (r @ r) / dof
    R_inv = jax.scipy.linalg.solve_triangular(R, jnp.eye(p, dtype=W.dtype))
    covariance = sigma2 * (R_inv @ R_inv.T)  # s^2 (A* A)^-1 = s^2 R^-1 R^-*
    std = jnp.sqrt(jnp.diag(covariance))
    t = scipy.stats.t.ppf(0.5 * (1 + level), dof)
    return LinearFit(theta=theta, covariance=covariance, std=std, interval=t * std, sigma2=sigma2, dof=dof)


def joint_weights(W, y, nv, passes=3):
    """Row weights (n,) for `least_squares`: the inverse residual variance of each joint, with the rows of ``W``
    (n, p) and ``y`` (n,) ordered by state then joint (n = N nv). The first pass fits without weights; each further
    pass refits with the weights found, so that a joint whose forces are small is not judged by the residual that
    the large forces of the others leave in an unweighted fit."""
    weights = jnp.ones_like(y)
    for _ in range(passes):
        theta = least_squares(W, y, weights).theta
        r = (y - W @ theta).reshape(-1, nv)
        weights = jnp.tile(1.0 / jnp.mean(r * r, 0), r.shape[0])
    return weights


class PhysicalFit(NamedTuple):
    """pi (10 nb + q,): standard parameters with every body physical, then the ``q`` joint-space parameters;
    theta (nb, 10): the bodies' log-Cholesky parameters; cost: the weighted squared residual; iterations;
    converged."""

    pi: jnp.ndarray
    theta: jnp.ndarray
    cost: jnp.ndarray
    iterations: jnp.ndarray
    converged: jnp.ndarray


def physical_fit(W, y, pi_prior, nb, weights=None, prior_weight=1e-6, margin=1e-9, max_iterations=100) -> PhysicalFit:
    """The fit of ``y = W pi`` over standard parameters ``pi = [bodies (10 nb), joint-space (q)]`` whose bodies
    are all physical: each body in its log-Cholesky parameters (`jaxmb.sysid.physical`), solved by
    Levenberg-Marquardt from a strictly physical start found by `_interior_point` from ``pi_prior`` (its bodies
    made physical by `nearest_physical` with ``margin``).

    ``W`` (n, p) is the full regressor (standard parameters, not the base ones: the bodies' constraints are on
    their own parameters). Its directions that the data do not see (those of the non-base parameters) are held
    by a small pull towards the prior, ``sum_i mu_i (pi_i - pi_prior_i)^2`` with ``mu_i = prior_weight (A_ii +
    1e-6 mean(A_jj))``: each parameter's pull in proportion to its own curvature, so that the parameters of
    precisely measured joints (a finger's, whose forces are small and weights large) do not swamp the others. The
    normal equations are formed once, ``A = W* Om W``, ``b = W* Om y``, so that each iteration costs ``p x p``
    work: with ``A + diag(mu) = L L*``, the residual is ``L* pi - L^-1 (b + mu pi_prior)`` (p,).
    """
    sw = jnp.ones(W.shape[0], W.dtype) if weights is None else jnp.sqrt(weights)
    A_w = W * sw[:, None]
    A, b = A_w.T @ A_w, A_w.T @ (y * sw)
    d = jnp.diag(A)
    mu = prior_weight * (d + 1e-6 * jnp.mean(d))  # each parameter pulled in proportion to its own curvature
    L = jnp.linalg.cholesky(A + jnp.diag(mu))
    rhs = jax.scipy.linalg.solve_triangular(L, b + mu * pi_prior, lower=True)
    y2 = jnp.sum((y * sw) ** 2)

    bodies = N_BODY * nb
    bodies_prior = nearest_physical(pi_prior[:bodies].reshape(nb, N_BODY), margin).reshape(-1)
    start = _interior_point(A + jnp.diag(mu), b + mu * pi_prior, jnp.concatenate([bodies_prior, pi_prior[bodies:]]), nb)

    def standard(x):
        return jnp.concatenate([from_log_cholesky(x[:bodies].reshape(nb, N_BODY)).reshape(-1), x[bodies:]])

    def residual(x):
        return L.T @ standard(x) - rhs

    x0 = jnp.concatenate([log_cholesky(start[:bodies].reshape(nb, N_BODY)).reshape(-1), start[bodies:]])
    out = levenberg_marquardt(residual, x0, max_iterations=max_iterations)
    pi = standard(out.x)
    cost = pi @ A @ pi - 2 * b @ pi + y2
    return PhysicalFit(pi=pi, theta=out.x[:bodies].reshape(nb, N_BODY), cost=cost, iterations=out.iterations,
                       converged=out.converged)


def _interior_point(A, b, pi0, nb, barriers=(1e2, 1e1, 1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6), newton_steps=8):
    """A strictly physical minimizer of ``1/2 pi* A pi - b* pi - t sum_k log det J_k(pi)`` for the last barrier
    weight ``t``, from the strictly physical ``pi0``: Newton's method on the log-det barrier of the pseudo-inertias
    (Wensing, Kim and Slotine 2017: the physical bodies are a convex set, ``J_k >= 0``), each step the best of a
    halving line search that keeps every ``J_k`` positive definite. The start of the log-Cholesky refinement: in
    log-Cholesky coordinates the data's directions near a degenerate body (a thin finger) are nearly flat, where
    the barrier method moves along them in a few steps."""
    bodies = N_BODY * nb
    sizes = 0.5 ** jnp.arange(40)

    def logdet(pi):
        sign, value = jnp.linalg.slogdet(pseudo_inertia(pi[:bodies].reshape(nb, N_BODY)))
        return jnp.where(jnp.all(sign > 0), jnp.sum(value), -jnp.inf)

    def objective(pi, t):
        return 0.5 * pi @ A @ pi - b @ pi - t * logdet(pi)

    def newton(pi, t):
        g = A @ pi - b - t * jax.grad(logdet)(pi)
        dx = -jnp.linalg.solve(A - t * jax.hessian(logdet)(pi), g)
        values = jax.vmap(lambda a: objective(pi + a * dx, t))(sizes)
        values = jnp.where(jnp.isfinite(values), values, jnp.inf)
        best = jnp.argmin(values)
        return jnp.where(values[best] < objective(pi, t), pi + sizes[best] * dx, pi), None

    def stage(pi, t):
        return jax.lax.scan(lambda pi, _: newton(pi, t), pi, None, length=newton_steps)[0], None

    return jax.lax.scan(stage, pi0, jnp.asarray(barriers, A.dtype))[0]
