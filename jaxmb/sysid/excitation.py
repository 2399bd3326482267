"""Excitation trajectories: periodic Fourier series whose regressor is well conditioned (Swevers, Ganseman, Tukel,
De Schutter and Van Brussel, "Optimal robot excitation and identification", 1997).

Each coordinate follows a finite Fourier series of base pulsation ``omega`` and ``L`` harmonics,

    q_i(t) = q0_i + sum_l a_il / (omega l) sin(omega l t) - b_il / (omega l) cos(omega l t)
    qd_i(t) = sum_l a_il cos(omega l t) + b_il sin(omega l t)
    qdd_i(t) = sum_l omega l (b_il cos(omega l t) - a_il sin(omega l t))

so that positions, velocities and accelerations are exact and periodic (a measurement can average periods). The
coefficients are optimized (optax) for the condition number of the base regressor stacked over one period, with
penalties that keep the positions inside the joint limits and the velocities below a bound. The series are in
coordinates where ``q`` and ``qd`` have the same size (revolute, prismatic, helical joints: a fixed-base arm).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax


class Fourier(NamedTuple):
    """q0 (nv,), a (nv, L), b (nv, L): the coefficients of a series of base pulsation ``omega`` (rad/s)."""

    q0: jnp.ndarray
    a: jnp.ndarray
    b: jnp.ndarray


def evaluate(series: Fourier, omega, t):
    """``(q, qd, qdd)`` (nv,) each at time ``t`` (a scalar; vmap for many)."""
    wl = omega * jnp.arange(1, series.a.shape[1] + 1, dtype=series.a.dtype)
    s, c = jnp.sin(wl * t), jnp.cos(wl * t)
    q = series.q0 + (series.a * s - series.b * c) @ (1 / wl)
    qd = series.a @ c + series.b @ s
    qdd = (series.b * c - series.a * s) @ wl
    return q, qd, qdd


def random_series(key, q0, n_harmonics, scale=0.1, dtype=jnp.float64) -> Fourier:
    """A series about ``q0`` (nv,) with normal coefficients of standard deviation ``scale`` (rad/s)."""
    ka, kb = jax.random.split(key)
    nv = len(q0)
    return Fourier(jnp.asarray(q0, dtype), scale * jax.random.normal(ka, (nv, n_harmonics), dtype),
                   scale * jax.random.normal(kb, (nv, n_harmonics), dtype))


def log_condition(W):
    """``log(s_max / s_min)`` of the matrix ``W`` (n, p), n >= p: differentiable where the extreme singular values
    are simple."""
    s = jnp.linalg.svd(W, compute_uv=False)
    return jnp.log(s[0]) - jnp.log(s[-1])


def objective(series: Fourier, omega, regressor, n_samples, q_lower, q_upper, qd_max, penalty=1e2):
    """The excitation's cost: `log_condition` of ``regressor(q, qd, qdd)`` (nv, p), column-normalized and stacked
    over ``n_samples`` times of one period, plus ``penalty`` times the squared excursions beyond the position limits
    ``q_lower``, ``q_upper`` (nv,) and the velocity bound ``qd_max`` (nv,)."""
    t = jnp.arange(n_samples) * (2 * jnp.pi / omega / n_samples)
    q, qd, qdd = jax.vmap(evaluate, in_axes=(None, None, 0))(series, omega, t)
    W = jax.vmap(regressor)(q, qd, qdd)
    W = W.reshape(-1, W.shape[-1])
    W = W / jnp.linalg.norm(W, axis=0)  # the condition of the scaled regressor: parameters have different units
    out = (jnp.maximum(q - q_upper, 0) ** 2 + jnp.maximum(q_lower - q, 0) ** 2
           + jnp.maximum(jnp.abs(qd) - qd_max, 0) ** 2)
    return log_condition(W) + penalty * jnp.sum(out)


def optimize(series: Fourier, omega, regressor, n_samples, q_lower, q_upper, qd_max, steps=200, learning_rate=1e-2):
    """``(series, costs)``: the series after ``steps`` Adam steps on `objective` from ``series`` (``q0`` held),
    and the cost at every step (steps,). ``regressor(q, qd, qdd) -> (nv, p)``: the base regressor of a model
    (the columns of `jaxmb.sysid.BaseParameters`), so that the condition is finite."""
    opt = optax.adam(learning_rate)
    coefs = (series.a, series.b)

    def cost(coefs):
        return objective(Fourier(series.q0, *coefs), omega, regressor, n_samples, q_lower, q_upper, qd_max)

    def one(carry, _):
        coefs, state = carry
        value, grad = jax.value_and_grad(cost)(coefs)
        updates, state = opt.update(grad, state)
        return (optax.apply_updates(coefs, updates), state), value

    (coefs, _), costs = jax.lax.scan(one, (coefs, opt.init(coefs)), None, length=steps)
    return Fourier(series.q0, *coefs), costs


def sample(series: Fourier, omega, duration, rate):
    """``(t, q, qd, qdd)`` at ``rate`` Hz over ``duration`` s: (N,), (N, nv) each, N = round(duration rate)."""
    t = jnp.arange(int(round(duration * rate)), dtype=series.a.dtype) / rate
    return (t, *jax.vmap(evaluate, in_axes=(None, None, 0))(series, omega, t))
