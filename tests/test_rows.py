"""The row primitives of the sweeps (`jaxmb.batching.rows`): `take_rows` and `sum_rows` equal numpy's indexing and
``np.add.at`` in both lowerings (the CPU's, a gathered block per number of summands, and the GPU's, a gather per
rank), are each other's transpose, batch along any axis, and keep the dynamics and their gradients free of scatters
in both forms (XLA's CPU backend runs a scatter as a loop over its indices). `put_rows` is ``x.at[idx].set(v)``
without a scatter, in value, gradient and batch; `place_rows` assembles pieces in row order."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxmb
from jaxmb.batching import rows
from jaxmb.testing import random_model

from checks import FAST_COMPILE_OPTIONS

INDICES = {  # (index array, rows of the other side)
    "repeats_and_gaps": (np.array([0, 0, 2, 4, 4, 4, 1]), 6),
    "permutation": (np.array([3, 0, 2, 1]), 4),
    "contiguous": (np.array([2, 3, 4]), 7),
    "one_parent": (np.zeros(5, int), 1),
    "empty": (np.zeros(0, int), 3),
}


@contextlib.contextmanager
def gpu_form(on):
    rows.GPU_FORM_ON_CPU = on
    try:
        yield
    finally:
        rows.GPU_FORM_ON_CPU = False


@pytest.fixture(params=["cpu_form", "gpu_form"])
def form(request):
    with gpu_form(request.param == "gpu_form"):
        yield request.param


@pytest.mark.parametrize("name", list(INDICES))
def test_take_and_sum_equal_numpy(name, form):
    idx, n = INDICES[name]
    x = np.random.default_rng(0).normal(size=(n, 3, 2))
    y = np.random.default_rng(1).normal(size=(len(idx), 3, 2))
    expected = np.zeros((n, 3, 2))
    np.add.at(expected, idx, y)
    for run in (lambda f, *a: f(*a), lambda f, *a: jax.jit(f)(*a)):
        np.testing.assert_allclose(run(lambda x: rows.take_rows(x, idx), x), x[idx], rtol=0, atol=0)
        np.testing.assert_allclose(run(lambda y: rows.sum_rows(y, idx, n), y), expected, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("name", list(INDICES))
def test_take_and_sum_are_each_others_transpose(name, form):
    idx, n = INDICES[name]
    x = jnp.asarray(np.random.default_rng(2).normal(size=(n, 4)))
    y = jnp.asarray(np.random.default_rng(3).normal(size=(len(idx), 4)))
    take = jax.jit(lambda x: rows.take_rows(x, idx))
    total = jax.jit(lambda y: rows.sum_rows(y, idx, n))
    # <take x, y> = <x, sum y>
    np.testing.assert_allclose(jnp.vdot(take(x), y), jnp.vdot(x, total(y)), rtol=1e-13, atol=1e-13)
    (take_t,) = jax.linear_transpose(take, x)(y)
    np.testing.assert_allclose(take_t, total(y), rtol=1e-15, atol=1e-15)
    if len(idx):
        check_grads(lambda x: rows.take_rows(x, idx) ** 2, (x,), 2, modes=("fwd", "rev"))
        check_grads(lambda y: rows.sum_rows(y, idx, n) ** 2, (y,), 2, modes=("fwd", "rev"))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_rows_batch_along_any_axis(axis, form):
    idx, n = INDICES["repeats_and_gaps"]
    y = np.random.default_rng(4).normal(size=(len(idx), 3, 2))
    batched = np.moveaxis(np.stack([y, 2 * y, -y]), 0, axis)
    out = jax.jit(jax.vmap(lambda y: rows.sum_rows(y, idx, n), in_axes=axis, out_axes=axis))(batched)
    loop = np.stack([rows.sum_rows(y * s, idx, n) for s in (1, 2, -1)])
    np.testing.assert_allclose(np.moveaxis(out, axis, 0), loop, rtol=1e-15, atol=1e-15)


def test_sum_rows_checks_its_index_length():
    with pytest.raises(ValueError, match="3 rows but 7 indices"):
        rows.sum_rows(np.zeros((3, 2)), INDICES["repeats_and_gaps"][0], 6)


@pytest.mark.parametrize("idx", [[4, 1], [0], [5, 4, 3, 2, 1, 0], []], ids=["two", "first", "all", "none"])
def test_put_rows_equals_at_set_with_its_gradient_and_no_scatter(idx):
    x = jax.random.normal(jax.random.PRNGKey(0), (6, 2))
    v = jax.random.normal(jax.random.PRNGKey(1), (len(idx), 2))
    want = x.at[np.asarray(idx, int)].set(v)
    np.testing.assert_array_equal(rows.put_rows(x, idx, v), want)
    check_grads(lambda x, v: rows.put_rows(x, idx, v), (x, v), 2, modes=["fwd", "rev"])
    batched = jax.jit(jax.vmap(lambda x, v: rows.put_rows(x, idx, v)))
    np.testing.assert_array_equal(batched(jnp.stack([x, 2 * x]), jnp.stack([v, 3 * v]))[1],
                                  (2 * x).at[np.asarray(idx, int)].set(3 * v))
    grad = jax.grad(lambda x, v: jnp.sum(jnp.sin(jax.vmap(lambda x, v: rows.put_rows(x, idx, v))(x, v))), (0, 1))
    assert "scatter" not in jax.jit(grad).lower(jnp.stack([x] * 3), jnp.stack([v] * 3)).as_text()


def test_put_rows_names_repeated_rows_and_wrong_shapes():
    with pytest.raises(ValueError, match="distinct and within 0..5"):
        rows.put_rows(np.zeros((6, 2)), [1, 1], np.zeros((2, 2)))
    with pytest.raises(ValueError, match="distinct and within 0..5"):
        rows.put_rows(np.zeros((6, 2)), [6], np.zeros((1, 2)))
    with pytest.raises(ValueError, match=r"\(2, 3\) values for 2 rows of \(6, 2\)"):
        rows.put_rows(np.zeros((6, 2)), [0, 1], np.zeros((2, 3)))


def test_place_rows_puts_each_part_row_where_at_says():
    parts = [jnp.arange(6.0).reshape(3, 2), -jnp.ones((2, 2))]
    at = [4, 0, 2, 1, 3]
    want = np.zeros((5, 2))
    want[at] = np.concatenate(parts)
    np.testing.assert_array_equal(rows.place_rows(parts, at), want)
    with pytest.raises(ValueError, match="not a permutation of 0..2"):
        rows.place_rows([jnp.zeros((3, 2))], [0, 0, 2])


@pytest.fixture(scope="module")
def tree():
    model = random_model(5, n_bodies=9, joint_mix="mixed", floating_base=True, branching=0.5)
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    state = (jaxmb.random_configuration(model, k[0]), jax.random.normal(k[1], (model.nv,)),
             jax.random.normal(k[2], (model.nv,)))
    return model, state


def test_dynamics_agree_in_both_forms(tree):
    model, (q, qd, tau) = tree
    fns = (lambda q, qd, tau: jaxmb.forward_dynamics(model, q, qd, tau),
           lambda q, qd, tau: jaxmb.inverse_dynamics(model, q, qd, tau),
           lambda q, qd, tau: jaxmb.mass_matrix(model, q))
    for fn in fns:  # compiled without LLVM optimization: the arithmetic is the same
        cpu = jax.jit(fn, compiler_options=FAST_COMPILE_OPTIONS)(q, qd, tau)
        with gpu_form(True):
            gpu = jax.jit(lambda *a: fn(*a), compiler_options=FAST_COMPILE_OPTIONS)(q, qd, tau)  # a new lowering
        np.testing.assert_allclose(gpu, cpu, rtol=1e-12, atol=1e-12)


def test_dynamics_and_their_gradient_have_no_scatter(tree, form):
    model, (q, qd, tau) = tree
    grad = jax.grad(lambda q, qd, tau: jaxmb.forward_dynamics(model, q, qd, tau).sum(), argnums=(0, 1, 2))
    fns = (grad, lambda q, qd, tau: jaxmb.inverse_dynamics(model, q, qd, tau),
           lambda q, qd, tau: jaxmb.mass_matrix(model, q))
    text = "".join(jax.jit(f).lower(q, qd, tau).as_text() for f in fns)
    assert "scatter" not in text
    assert "gather" in text or "slice" in text
