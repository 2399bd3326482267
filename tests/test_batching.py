"""`jaxmb.chunked_vmap`: the same values and gradients as `jax.vmap`, for batches that chunks divide or not, with
shared arguments, and clear errors for what it cannot map."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb.testing import random_model, random_state

from checks import fast_jit

BATCH = 7  # chunks of 3 leave a remainder of 1


@pytest.fixture(scope="module")
def problem():
    model = random_model(4, n_bodies=3, floating_base=True)
    q, qd, tau = jax.vmap(lambda k: random_state(model, k))(jax.random.split(jax.random.PRNGKey(1), BATCH))
    return model, q, qd, tau


@pytest.mark.parametrize("chunk_size", [1, 3, BATCH, 64])
def test_equals_vmap_with_a_shared_model(problem, chunk_size):
    model, q, qd, tau = problem
    want = fast_jit(jax.vmap(jaxmb.inverse_dynamics, in_axes=(None, 0, 0, 0)))(model, q, qd, tau)
    got = fast_jit(jaxmb.chunked_vmap(jaxmb.inverse_dynamics, (None, 0, 0, 0), chunk_size))(model, q, qd, tau)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_pytree_outputs_and_every_argument_batched(problem):
    model, q, qd, tau = problem

    def energy_and_tau(q, qd, tau):
        return {"T": jaxmb.kinetic_energy(model, q, qd), "tau": jaxmb.inverse_dynamics(model, q, qd, tau)}

    want = fast_jit(jax.vmap(energy_and_tau))(q, qd, tau)
    got = fast_jit(jaxmb.chunked_vmap(energy_and_tau, chunk_size=2))(q, qd, tau)
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12), got, want)


def test_gradient_equals_the_gradient_through_vmap(problem):
    model, q, qd, tau = problem

    def loss(batched, model, tau):
        return jnp.sum(batched(jaxmb.inverse_dynamics, (None, 0, 0, 0))(model, q, qd, tau) ** 2)

    chunked = lambda f, axes: jaxmb.chunked_vmap(f, axes, chunk_size=3)  # noqa: E731
    grad = fast_jit(jax.grad(loss, argnums=(1, 2)), static_argnums=0)
    want, got = grad(jax.vmap, model, tau), grad(chunked, model, tau)
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10), got, want)


def test_bad_axes_and_chunk_sizes_are_named(problem):
    model, q, qd, tau = problem
    with pytest.raises(ValueError, match="chunk_size"):
        jaxmb.chunked_vmap(jaxmb.forward_dynamics, chunk_size=0)
    with pytest.raises(ValueError, match="in_axes"):
        jaxmb.chunked_vmap(jaxmb.forward_dynamics, (None, 0))(model, q, qd, tau)
    with pytest.raises(ValueError, match="in_axes"):
        jaxmb.chunked_vmap(jaxmb.forward_dynamics, (None, 1, 0, 0))(model, q, qd, tau)
    with pytest.raises(ValueError, match="batched"):
        jaxmb.chunked_vmap(jaxmb.forward_dynamics, None)(model, q[0], qd[0], tau[0])
