"""A public function's state enters in the model's dtype and as arrays: a state in another precision than the model
(a float64 velocity with a float32 model, a float32 policy's torques with a float64 model) is cast at entry, in
forward and reverse mode, under ``jit`` and ``vmap``; Python lists of numbers are arrays; anything else is a
``TypeError`` that names the function and the argument."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
import jaxmb.loops
from jaxmb import assets
from jaxmb.testing import random_model, random_state

from checks import fast_jit

DTYPES = [jnp.float32, jnp.float64]


@pytest.fixture(scope="module")
def state():
    model = random_model(5, n_bodies=5, floating_base=True)
    return model, random_state(model, jax.random.PRNGKey(1))


@pytest.mark.parametrize("model_dtype", DTYPES, ids=["model32", "model64"])
@pytest.mark.parametrize("state_dtype", DTYPES, ids=["state32", "state64"])
def test_state_in_another_dtype_is_cast_to_the_models_forward_and_reverse(state, model_dtype, state_dtype):
    model, (q, qd, tau) = state
    model = model.cast(model_dtype)
    q, qd, tau = (x.astype(state_dtype) for x in (q, qd, tau))
    same = tuple(x.astype(model_dtype) for x in (q, qd, tau))

    for f in (jaxmb.forward_dynamics, jaxmb.inverse_dynamics):
        got = f(model, q, qd, tau)
        assert got.dtype == model_dtype
        np.testing.assert_array_equal(got, f(model, *same))
        batched = fast_jit(jax.vmap(f, in_axes=(None, 0, 0, 0)))
        np.testing.assert_array_equal(batched(model, q[None], qd[None], tau[None]),
                                      batched(model, *(x[None] for x in same)))
    assert jaxmb.mass_matrix(model, q).dtype == model_dtype

    def loss(q, qd, tau):
        return jaxmb.forward_dynamics(model, q, qd, tau).sum()

    grad = fast_jit(jax.grad(loss, argnums=(0, 1, 2)))  # one program per dtype (op by op, a few hundred)
    grads, want = grad(q, qd, tau), grad(*same)
    for g, w in zip(grads, want):
        assert g.dtype == state_dtype  # the cotangent flows back in the argument's own dtype
        np.testing.assert_array_equal(g, w.astype(state_dtype))
    batched = fast_jit(jax.vmap(jax.grad(loss, argnums=2)))(q[None], qd[None], tau[None])
    assert batched.dtype == state_dtype and bool(jnp.all(jnp.isfinite(batched)))


def test_float32_model_with_the_default_float64_zeros_as_velocity():
    """The quickstart's own call with x64 enabled: a float32 model and ``jnp.zeros(model.nv)``."""
    model = assets.quadruped().cast(jnp.float32)
    q = jaxmb.neutral_configuration(model)
    qdd = jaxmb.forward_dynamics(model, q, jnp.zeros(model.nv), jnp.zeros(model.nv))
    assert qdd.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(qdd)))


def test_closed_loops_cast_the_state_too():
    lm = jaxmb.loops.load_urdf(assets.path("four_bar_leg.urdf"))
    lm32 = jax.tree.map(lambda x: x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x, lm)
    y = jnp.zeros(lm.ny)  # float64
    q = jaxmb.loops.solve_configuration(lm32, y).q
    assert q.dtype == jnp.float32
    ydd = jaxmb.loops.forward_dynamics(lm32, q, y, y)
    assert ydd.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(ydd)))


def test_python_lists_are_arrays(state):
    model, (q, qd, tau) = state
    got = jaxmb.forward_dynamics(model, q.tolist(), qd.tolist(), tau.tolist())
    np.testing.assert_array_equal(got, jaxmb.forward_dynamics(model, q, qd, tau))
    inside = jax.jit(lambda tau: jaxmb.forward_dynamics(model, q.tolist(), qd.tolist(), tau))(tau)
    np.testing.assert_allclose(inside, got, rtol=1e-12, atol=1e-12)


def test_ragged_list_is_an_error_naming_the_function_and_argument(state):
    model, (q, qd, tau) = state
    with pytest.raises(TypeError, match=r"forward_dynamics: argument 'qd' must be an array of numbers"):
        jaxmb.forward_dynamics(model, q, [[0.0, 1.0], [2.0]], tau)
