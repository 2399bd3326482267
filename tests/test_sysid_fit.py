"""`jaxmb.sysid.fit` and `jaxmb.sysid.excitation`: weighted least squares against its closed form, the Panda
identified from noisy simulated joint forces (1 % noise; held-out prediction at the noise level, base parameters
within 1 % and within their confidence intervals, every body of the physical fit physical), and the excitation's
optimization (a lower condition number inside the joint limits). Float64."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from checks import fast_jit
from jaxmb import sysid, testing
from jaxmb.sysid import excitation
from pinocchio_bridge import load_jaxmb

pytestmark = pytest.mark.filterwarnings("ignore:.*mimic.*:UserWarning")

NOISE = 0.01  # torque noise, relative to each joint's RMS force
RATE = 200.0  # Hz


def test_least_squares_is_its_closed_form():
    rng = np.random.default_rng(0)
    W, y, w = rng.normal(size=(60, 4)), rng.normal(size=60), rng.uniform(0.5, 2.0, 60)
    fit = fast_jit(sysid.least_squares, static_argnums=(3,))(jnp.asarray(W), jnp.asarray(y), jnp.asarray(w), 0.9)
    A = W.T @ (w[:, None] * W)
    theta = np.linalg.solve(A, W.T @ (w * y))
    r = y - W @ theta
    s2 = r @ (w * r) / 56
    np.testing.assert_allclose(fit.theta, theta, rtol=1e-12)
    np.testing.assert_allclose(fit.covariance, s2 * np.linalg.inv(A), rtol=1e-11)
    np.testing.assert_allclose(fit.interval, scipy.stats.t.ppf(0.95, 56) * np.sqrt(s2 * np.diag(np.linalg.inv(A))),
                               rtol=1e-11)


@functools.cache
def _panda_data():
    """The Panda's base structure, and noisy joint forces along a random Fourier series: 8 s to fit, 2 s held out."""
    model = load_jaxmb("panda")
    W = fast_jit(sysid.stacked_regressor, static_argnums=(0, 3))(sysid.regressor, model, jax.random.PRNGKey(0), 30)
    base = sysid.base_parameters(W)
    lo, hi = np.asarray(model.q_lower), np.asarray(model.q_upper)
    amplitude = np.r_[np.full(7, 0.3), np.full(2, 0.001)]  # rad/s for the arm, m/s for the fingers
    series = excitation.random_series(jax.random.PRNGKey(2), (lo + hi) / 2, 5, scale=1.0)
    series = series._replace(a=series.a * amplitude[:, None], b=series.b * amplitude[:, None])
    t, q, qd, qdd = excitation.sample(series, 2 * np.pi / 5, 10.0, RATE)
    assert np.all((q > lo) & (q < hi))
    Y = fast_jit(jax.vmap(sysid.regressor, in_axes=(None, 0, 0, 0)))(model, q, qd, qdd)
    tau = Y @ sysid.parameters(model)
    sigma = NOISE * jnp.sqrt(jnp.mean(tau * tau, 0))
    measured = tau + sigma * jax.random.normal(jax.random.PRNGKey(2), tau.shape)
    n_fit = int(8 * RATE)
    return model, base, Y, tau, measured, sigma, n_fit


def test_panda_identified_from_noisy_forces_within_the_noise():
    model, base, Y, tau, measured, sigma, n_fit = _panda_data()
    W = base.columns(Y[:n_fit]).reshape(-1, base.n_base)
    y = measured[:n_fit].reshape(-1)
    weights = fast_jit(sysid.joint_weights, static_argnums=(2,))(W, y, model.nv)
    fit = fast_jit(sysid.least_squares)(W, y, weights)
    beta = base.to_base(sysid.parameters(model))
    err = fit.theta - beta
    assert float(jnp.linalg.norm(err) / jnp.linalg.norm(beta)) < 0.01
    assert float(jnp.max(jnp.abs(err) / fit.std)) < 5.0  # each within 5 standard deviations of the estimate
    assert abs(float(fit.sigma2) - 1) < 0.05  # the weights are the noise's inverse variances
    predicted = base.columns(Y[n_fit:]) @ fit.theta
    noise = jnp.sqrt(jnp.mean((tau[n_fit:] - measured[n_fit:]) ** 2, 0))  # the held-out noise drawn, per joint
    rms = jnp.sqrt(jnp.mean((predicted - measured[n_fit:]) ** 2, 0))
    assert np.all(rms < 1.05 * noise)  # held out: the noise, nothing more
    assert np.all(jnp.sqrt(jnp.mean((predicted - tau[n_fit:]) ** 2, 0)) < 0.3 * sigma)

    # every body physical, from a prior 20 % off, with the same prediction
    Y_full = Y[:n_fit].reshape(-1, Y.shape[-1])
    prior = sysid.parameters(model) * 1.2
    physical = fast_jit(sysid.physical_fit, static_argnums=(3,))(Y_full, y, prior, model.nb, weights)
    assert bool(physical.converged)
    assert np.all(sysid.physical_margin(physical.pi.reshape(model.nb, 10)) > 0)
    cost_ls = jnp.sum(weights * (W @ fit.theta - y) ** 2)
    assert float(physical.cost) < 1.01 * float(cost_ls), (float(physical.cost), float(cost_ls))
    rms = jnp.sqrt(jnp.mean((Y[n_fit:] @ physical.pi - measured[n_fit:]) ** 2, 0))
    assert np.all(rms < 1.05 * noise)


def test_excitation_optimization_lowers_the_condition_inside_the_limits():
    model = testing.random_model(2, n_bodies=3, joint_mix="revolute")
    W = fast_jit(sysid.stacked_regressor, static_argnums=(0, 3))(sysid.regressor, model, jax.random.PRNGKey(0), 20)
    base = sysid.base_parameters(W)

    def regressor(q, qd, qdd):
        return base.columns(sysid.regressor(model, q, qd, qdd))

    lo, hi, qd_max = -jnp.ones(3), jnp.ones(3), jnp.full(3, 3.0)
    start = excitation.random_series(jax.random.PRNGKey(3), jnp.zeros(3), 3, scale=0.2)
    series, costs = fast_jit(excitation.optimize, static_argnums=(2, 3, 7))(start, 1.0, regressor, 40, lo, hi,
                                                                            qd_max, 60, 3e-2)
    assert float(costs[-1]) < float(costs[0]) - 0.5
    _, q, qd, _ = excitation.sample(series, 1.0, 2 * np.pi, 20.0)
    assert np.all(np.abs(q) < 1.02) and np.all(np.abs(qd) < 3.06)  # the penalties hold the bounds
    # the objective's condition is the base regressor's, columns normalized
    t = jnp.arange(40) * (2 * np.pi / 40)
    stack = jax.vmap(lambda t: regressor(*excitation.evaluate(series, 1.0, t)))(t).reshape(-1, base.n_base)
    s = np.linalg.svd(np.asarray(stack / jnp.linalg.norm(stack, axis=0)), compute_uv=False)
    np.testing.assert_allclose(np.log(s[0] / s[-1]), excitation.log_condition(stack / jnp.linalg.norm(stack, axis=0)),
                               rtol=1e-10)
