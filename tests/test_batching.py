"""`jaxmb.chunked_vmap`: the same values and gradients as `jax.vmap`, for batches that chunks divide or not, with
shared arguments, and clear errors for what it cannot map. The batching rule of `forward_dynamics`,
`inverse_dynamics` and the other functions it serves (`jaxmb.batching.in_cpu_chunks`): chunks of at most
`CHUNK_STATES` states, the same values and derivatives as state by state, gradients in chunks too. The linear
primitive behind those gradients (`jaxmb.batching.linear_in_cpu_chunks`): the derivatives, transposes and batches
of a plain function."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxmb
from jaxmb.batching import chunks as batching
from jaxmb.testing import random_model, random_state

from checks import FAST_COMPILE_OPTIONS, fast_jit, multiply_reduce_products

BATCH = 7  # chunks of 3 leave a remainder of 1


@pytest.fixture(scope="module")
def problem():
    model = random_model(4, n_bodies=3, floating_base=True)
    q, qd, tau = fast_jit(jax.vmap(random_state, (None, 0)))(model, jax.random.split(jax.random.PRNGKey(1), BATCH))
    return model, q, qd, tau


_VMAP_INVERSE_DYNAMICS = fast_jit(jax.vmap(jaxmb.inverse_dynamics, in_axes=(None, 0, 0, 0)))  # compiled once


@pytest.mark.parametrize("chunk_size", [1, 3, BATCH, 64])
def test_equals_vmap_with_a_shared_model(problem, chunk_size):
    model, q, qd, tau = problem
    want = _VMAP_INVERSE_DYNAMICS(model, q, qd, tau)
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


# -- the batching rule of forward_dynamics and inverse_dynamics (jaxmb.batching.in_cpu_chunks) --

DYNAMICS = {"forward": jaxmb.forward_dynamics, "inverse": jaxmb.inverse_dynamics}


@pytest.fixture
def chunks_of_three(monkeypatch):
    """A batch of `BATCH` states is computed in three chunks of 3 states, the last two padded."""
    monkeypatch.setattr(batching, "CHUNK_STATES", 3)
    monkeypatch.setattr(batching, "CHUNK_STATES_FLOAT64", 3)
    assert batching._chunks(BATCH) == (3, 3)


ONE_STATE = {f: fast_jit(f) for f in DYNAMICS.values()}  # the programs of single states, compiled once each


def _loop(f, model, q, qd, x, f_ext):
    return np.stack([ONE_STATE[f](model, q[i], qd[i], x[i], f_ext[i]) for i in range(len(q))])


def _jaxpr_and_values(f, *args):
    """The jaxpr of ``f`` at ``args``, as text, and ``f(*args)`` compiled as `fast_jit` compiles it, from one
    trace."""
    options = None if os.environ.get("JAXMB_TEST_XLA_DEFAULTS") else FAST_COMPILE_OPTIONS
    with multiply_reduce_products():
        traced = jax.jit(f, compiler_options=options).trace(*args)
        compiled = traced.lower().compile()
    return str(traced.jaxpr), compiled(*args)


@pytest.mark.parametrize("batch", [1, 100, 128, 129, 4096, 4097, 65536])
def test_chunks_are_the_fewest_equal_ones_of_at_most_chunk_states(batch):
    k, chunk = batching._chunks(batch)
    assert chunk <= batching.CHUNK_STATES and k == -(-batch // batching.CHUNK_STATES)
    assert 0 <= k * chunk - batch < k  # less than one state of padding per chunk


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_float64_programs_take_chunks_of_chunk_states_float64(problem, dtype):
    model, q, qd, x = problem
    model, q, qd, x = model.cast(dtype), *(jnp.repeat(a, 20, axis=0).astype(dtype) for a in (q, qd, x))  # 140 states
    jaxpr = str(jax.make_jaxpr(jax.vmap(lambda *a: jaxmb.forward_dynamics(model, *a)))(q, qd, x))
    most = batching.CHUNK_STATES_FLOAT64 if dtype == jnp.float64 else batching.CHUNK_STATES
    assert f"length={-(-len(q) // most)}" in jaxpr  # the lax.map over chunks


@pytest.mark.parametrize("name", DYNAMICS)
def test_batches_in_chunks_equal_state_by_state(problem, chunks_of_three, name):
    model, q, qd, x = problem
    f_ext = jax.random.normal(jax.random.PRNGKey(2), (BATCH, model.nb, 6))
    f = DYNAMICS[name]
    batched = jax.vmap(lambda *a: f(model, *a))
    jaxpr, got = _jaxpr_and_values(batched, q, qd, x, f_ext)
    assert "scan" in jaxpr  # chunked: a lax.map over chunks
    np.testing.assert_allclose(got, _loop(f, model, q, qd, x, f_ext), rtol=1e-12, atol=1e-12)


CHUNKED = {
    "mass_matrix": lambda model, q, qd, x: jaxmb.mass_matrix(model, q),
    "mass_matrix_inverse": lambda model, q, qd, x: jaxmb.mass_matrix_inverse(model, q),
    "task_space": lambda model, q, qd, x: jaxmb.task_space(model, q, model.frame_names[-2:]),
    "operational_space_compliance": lambda model, q, qd, x: jaxmb.operational_space_compliance(
        model, q, model.frame_names[-3:]),
    "inverse_dynamics_derivatives": jaxmb.inverse_dynamics_derivatives,
    "forward_dynamics_derivatives": jaxmb.forward_dynamics_derivatives,
}


@pytest.mark.parametrize("name", CHUNKED)
def test_mass_matrix_task_space_and_derivatives_batch_in_chunks_equal_state_by_state(problem, chunks_of_three,
                                                                                     name):
    model, q, qd, x = problem
    one = fast_jit(lambda *a: CHUNKED[name](model, *a))
    batched = jax.vmap(lambda *a: CHUNKED[name](model, *a))
    jaxpr, got = _jaxpr_and_values(batched, q, qd, x)
    assert "scan" in jaxpr  # chunked: a lax.map over chunks
    for i in range(BATCH):
        jax.tree.map(lambda g, w: np.testing.assert_allclose(g[i], w, rtol=1e-12, atol=1e-12), got,
                     one(q[i], qd[i], x[i]))


@pytest.mark.parametrize("name", DYNAMICS)
def test_small_batches_and_other_backends_are_one_vmap_gradients_too(problem, monkeypatch, name):
    model, q, qd, x = problem
    batched = jax.vmap(lambda *a: DYNAMICS[name](model, *a))
    gradients = jax.vmap(jax.grad(lambda *a: jnp.sum(DYNAMICS[name](model, *a)), argnums=(0, 1, 2)))
    for f in (batched, gradients):
        assert "scan" not in str(jax.make_jaxpr(f)(q, qd, x))
    monkeypatch.setattr(batching, "CHUNK_STATES", 1)
    monkeypatch.setattr(batching, "CHUNK_STATES_FLOAT64", 1)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    for f in (batched, gradients):
        assert "scan" not in str(jax.make_jaxpr(f)(q, qd, x))


@pytest.mark.parametrize("name", DYNAMICS)
def test_batched_models_and_nested_vmaps_in_chunks_equal_state_by_state(problem, chunks_of_three, name):
    model, q, qd, x = problem
    f = DYNAMICS[name]
    scale = jnp.linspace(0.5, 2.0, BATCH)
    heavier = lambda s: model.replace(mass=model.mass * s)  # noqa: E731
    got = fast_jit(jax.vmap(lambda s, q, qd, x: f(heavier(s), q, qd, x)))(scale, q, qd, x)
    want = np.stack([ONE_STATE[f](heavier(scale[i]), q[i], qd[i], x[i]) for i in range(BATCH)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    per_state = jax.vmap(lambda q, qd, x: f(model, q, qd, x))
    nested = fast_jit(jax.vmap(per_state, in_axes=(None, 0, None)))(q, jnp.stack([qd, 2 * qd]), x)
    for j in range(2):
        want = np.stack([ONE_STATE[f](model, q[i], (j + 1) * qd[i], x[i]) for i in range(BATCH)])
        np.testing.assert_allclose(nested[j], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", DYNAMICS)
def test_derivatives_through_chunked_batches_equal_those_of_one_vmap(problem, monkeypatch, name):
    model, q, qd, x = problem
    f = DYNAMICS[name]

    dq = jax.random.normal(jax.random.PRNGKey(3), q.shape)

    def derivatives():
        def batched(model, q, x):
            return jax.vmap(lambda q, qd, x: f(model, q, qd, x))(q, qd, x)

        loss = lambda model, q, x: jnp.sum(batched(model, q, x) ** 2)  # noqa: E731
        # a new program each call (traced under the chunk sizes of the moment), compiled once rather than op by op
        return fast_jit(lambda model, q, x: (jax.grad(loss, argnums=(0, 1, 2))(model, q, x),
                                             jax.jvp(lambda q: batched(model, q, x), (q,), (dq,))))(model, q, x)

    want = derivatives()
    monkeypatch.setattr(batching, "CHUNK_STATES", 1)
    monkeypatch.setattr(batching, "CHUNK_STATES_FLOAT64", 1)
    got = derivatives()
    # Computed in other chunks, hence other fusions and FMA contractions, an entry that cancels terms of the leaf's
    # size differs by rounding of that size: 1e-14 of the largest entry (the gradient in q, 7 states x 12
    # coordinates: 6e-12 on an entry of -4.75, where the leaf's entries reach 7e3: 1e-15 of them).
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-12, atol=max(1e-12, 1e-14 * np.abs(w).max(
        initial=0))), got, want)


@pytest.mark.parametrize("name", DYNAMICS)
def test_gradients_under_vmap_are_computed_in_chunks_and_equal_state_by_state(problem, chunks_of_three, name):
    """``jax.vmap(jax.grad(...))``: the forward call and the transposed tangent map (`linear_in_cpu_chunks`) each run
    in chunks, and the gradients, in the model, the state and ``f_ext``, equal those of single states."""
    model, q, qd, x = problem
    f_ext = jax.random.normal(jax.random.PRNGKey(2), (BATCH, model.nb, 6))
    f = DYNAMICS[name]
    grad = jax.grad(lambda m, *a: jnp.sum(jnp.sin(f(m, *a))), argnums=(0, 1, 2, 3, 4))
    batched = jax.vmap(grad, in_axes=(None, 0, 0, 0, 0))
    jaxpr, got = _jaxpr_and_values(batched, model, q, qd, x, f_ext)
    assert jaxpr.count("scan[") == 2
    one = fast_jit(grad)  # one program for the single states (op by op, the forward case is slow)
    for i in range(BATCH):
        want = one(model, q[i], qd[i], x[i], f_ext[i])
        jax.tree.map(lambda g, w: np.testing.assert_allclose(g[i], w, rtol=1e-12, atol=1e-12), got, want)


@pytest.mark.parametrize("most", [0, 10**9], ids=["moved_in_the_loop", "moved_once"])
def test_outputs_moved_in_the_loop_or_once_for_the_batch_equal_state_by_state(problem, chunks_of_three, monkeypatch,
                                                                              most):
    """Every output of the chunks moved back to batch-first chunk by chunk, or every one once for the whole batch
    (`batching.MOVED_ONCE_MAX`): the same values, mass matrices and gradients (whose residuals then cross from the
    forward call's chunks to the transpose's without a move) as single states."""
    monkeypatch.setattr(batching, "MOVED_ONCE_MAX", most)
    model, q, qd, x = problem
    got = fast_jit(jax.vmap(_each, (None, 0, 0, 0)))(model, q, qd, x)
    for i in range(BATCH):
        jax.tree.map(lambda g, w: np.testing.assert_allclose(g[i], w, rtol=1e-12, atol=1e-12), got,
                     _EACH(model, q[i], qd[i], x[i]))


def _each(model, q, qd, x):
    fd = lambda q, qd, x: jnp.sum(jnp.sin(jaxmb.forward_dynamics(model, q, qd, x)))  # noqa: E731
    return jaxmb.forward_dynamics(model, q, qd, x), jaxmb.mass_matrix(model, q), jax.grad(fd, (0, 1, 2))(q, qd, x)


_EACH = fast_jit(_each)  # a single state's program, the same for both tests


# -- linear maps in chunks (jaxmb.batching.linear_in_cpu_chunks) --

def _matrix(r):
    """A 3x2 matrix that depends nonlinearly on the residual ``r`` (2,)."""
    return jnp.stack([jnp.stack([r[0], r[1] ** 2]), jnp.stack([jnp.sin(r[0]), r[0] * r[1]]), jnp.exp(r)])


def _plain(r, x):
    return {"y": _matrix(r) @ x["a"] + x["b"]}


def _chunked(r, x):
    return batching.linear_in_cpu_chunks(_plain, lambda r, ct: {"a": _matrix(r).T @ ct["y"], "b": ct["y"]}, r, x)


@pytest.fixture
def linear_problem():
    keys = jax.random.split(jax.random.PRNGKey(5), 3)
    r = jax.random.normal(keys[0], (BATCH, 2))
    x = {"a": jax.random.normal(keys[1], (BATCH, 2)), "b": jax.random.normal(keys[2], (BATCH, 3))}
    return r, x


def test_linear_map_has_the_derivatives_of_the_plain_map_to_second_order(linear_problem):
    r, x = linear_problem
    one = (r[0], jax.tree.map(lambda v: v[0], x))
    np.testing.assert_allclose(_chunked(*one)["y"], _plain(*one)["y"], rtol=1e-15)
    check_grads(jax.jit(_chunked), one, order=2, modes=("fwd", "rev"))  # each derivative one program
    loss = lambda f: lambda r, x: jnp.sum(jnp.cos(f(r, x)["y"]))  # noqa: E731
    for derivative in (jax.grad, jax.hessian):
        jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13),
                     jax.jit(derivative(loss(_chunked), argnums=(0, 1)))(*one),
                     jax.jit(derivative(loss(_plain), argnums=(0, 1)))(*one))


def test_linear_map_batches_and_its_gradients_in_chunks_in_either_order(linear_problem, monkeypatch):
    r, x = linear_problem
    monkeypatch.setattr(batching, "CHUNK_STATES", 3)  # chunks of 3 states, the last padded
    monkeypatch.setattr(batching, "CHUNK_STATES_FLOAT64", 3)
    loss = lambda f: lambda r, x: jnp.sum(jnp.cos(f(r, x)["y"]))  # noqa: E731
    shared_x = jax.tree.map(lambda v: v[0], x)
    cases = [(lambda f: jax.vmap(f), x),
             (lambda f: jax.vmap(jax.grad(loss(f), argnums=(0, 1))), x),  # the gradient batched
             (lambda f: jax.grad(loss(jax.vmap(f)), argnums=(0, 1)), x),  # the gradient of the batch
             (lambda f: jax.vmap(jax.grad(loss(f), argnums=(0, 1)), in_axes=(0, None)), shared_x),  # x shared
             (lambda f: jax.grad(loss(jax.vmap(f, in_axes=(0, None))), argnums=(0, 1)), shared_x)]  # ... and summed
    for batched, x in cases:
        jaxpr, got = _jaxpr_and_values(batched(_chunked), r, x)
        assert "scan[" in jaxpr
        jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13),
                     got, jax.jit(batched(_plain))(r, x))


def test_a_transpose_of_the_wrong_structure_is_named():
    bad = lambda r, x: batching.linear_in_cpu_chunks(_plain, lambda r, ct: ct, r, x)  # noqa: E731
    r, x = jnp.ones(2), {"a": jnp.ones(2), "b": jnp.ones(3)}
    with pytest.raises(TypeError, match="the transpose returned"):
        jax.grad(lambda r, x: jnp.sum(bad(r, x)["y"]), argnums=1)(r, x)


@pytest.mark.parametrize("name", DYNAMICS)
def test_an_empty_batch_gives_empty_results_and_gradients(problem, name):
    model, q, qd, x = (a[:0] if i else a for i, a in enumerate(problem))
    batched = jax.vmap(lambda *a: DYNAMICS[name](model, *a))
    gradients = jax.vmap(jax.grad(lambda *a: jnp.sum(DYNAMICS[name](model, *a)), argnums=(0, 1, 2)))
    assert fast_jit(batched)(q, qd, x).shape == (0, model.nv)
    assert [g.shape for g in fast_jit(gradients)(q, qd, x)] == [(0, model.nq), (0, model.nv), (0, model.nv)]
