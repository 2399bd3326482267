"""`jaxmb.batching.batch_last.vmap_batch_last`: the values and derivatives of `jax.vmap` for the sweeps of the dynamics and
for the primitives they do not use, with the batch kept as the last axis from the inputs to the outputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmb.batching import batch_last
from jaxmb.batching.batch_last import vmap_batch_last
from jaxmb.dynamics.articulated import articulated_body
from jaxmb.dynamics.inverse import joint_forces
from jaxmb.testing import random_model, random_state

from checks import equations, fast_jit

BATCH = 5


@pytest.fixture(scope="module")
def problem():
    """A floating base with a serial limb (a chain segment, swept by `lax.scan`) and a branching rest."""
    model = random_model(3, n_bodies=7, floating_base=True, branching=0.3)
    states = jax.vmap(lambda k: random_state(model, k))(jax.random.split(jax.random.PRNGKey(0), BATCH))
    assert any(seg.last - seg.first > 1 for seg in model.topology.segments)
    return model, states


def _both(f, args, in_batched):
    """``(jax.vmap, vmap_batch_last)`` of ``f`` at ``args`` (batched ones with a leading batch axis), in one
    program (op by op, the articulated-body sweep alone runs for tens of seconds)."""
    one = [a[0] if b else a for a, b in zip(args, in_batched)]
    closed = jax.make_jaxpr(f)(*one)

    def both(*args):
        want = jax.vmap(jax.extend.core.jaxpr_as_fun(closed), in_axes=[0 if b else None for b in in_batched])(*args)
        return want, vmap_batch_last(closed, in_batched, BATCH)(*args)

    return fast_jit(both)(*args)


def _assert_equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def _sweeps(model):
    rnea = lambda q, qd, qdd: joint_forces(model, q, qd, qdd, None)  # noqa: E731
    return {
        "articulated body": lambda q, qd, tau: articulated_body(model, q, qd, tau),
        "newton-euler": rnea,
        "its jvp": lambda q, qd, qdd: jax.jvp(lambda q, qd: rnea(q, qd, qdd), (q, qd), (2 * q, qd))[1],
        "its vjp": lambda q, qd, qdd: jax.vjp(lambda q, qd: rnea(q, qd, qdd), q, qd)[1](qdd),
    }


@pytest.mark.parametrize("name", ["articulated body", "newton-euler", "its jvp", "its vjp"])
def test_sweeps_and_their_derivatives_equal_vmap(problem, name):
    model, states = problem
    _assert_equal(*reversed(_both(_sweeps(model)[name], states, [True] * 3)))


def test_sweeps_keep_the_batch_last_without_falling_back_to_vmap(problem, monkeypatch):
    """Every primitive of the sweeps has its own batch-last rule, and the only transposes that move the batch axis
    (of size `BATCH`, last) are those of the arguments and results."""
    model, states = problem

    def refuse(p, *_):
        raise AssertionError(f"{p.name} went through jax.vmap")

    monkeypatch.setattr(batch_last, "_by_vmap", refuse)
    for f in _sweeps(model).values():
        closed = jax.make_jaxpr(f)(*(s[0] for s in states))
        emitted = jax.make_jaxpr(vmap_batch_last(closed, [True] * 3, BATCH))(*states)
        moves = [e for e in equations(emitted.jaxpr) if e.primitive.name == "transpose"
                 and e.invars[0].aval.shape[-1] == BATCH
                 and e.params["permutation"][-1] != len(e.params["permutation"]) - 1]
        assert len(moves) <= len(closed.in_avals) + len(closed.out_avals)


@jax.jit
def _inner(x, s):
    return jnp.cumsum(x * s)


@jax.custom_jvp
def _soft(x):
    return jnp.log1p(jnp.exp(x))


_soft.defjvp(lambda p, t: (_soft(p[0]), t[0] / (1 + jnp.exp(-p[0]))))


def _mixed(x, s, shared):
    """Shared arrays meeting per-state scalars, a select on a scalar predicate, a carry that the batch reaches only
    inside a scan, a nested jit, a custom JVP, and primitives that go through `jax.vmap` (a matrix product, a
    gather); one output does not depend on the batch."""
    y = shared * s + jnp.where(s > 0, x, -x)  # (3,): shared (3,) times a per-state scalar
    y = jax.lax.select(s > 0, y, 2 * y)

    def step(c, row):
        return c * 0.5 + row * s, c.sum()

    c, seq = jax.lax.scan(step, jnp.ones(3), jnp.stack([y, shared, x]))
    z = jnp.outer(shared, y) @ c + _inner(x, s)[jnp.array([2, 0])].sum()
    return z, seq, _soft(y), shared.sum() * 2


def test_shared_operands_scalars_carries_and_fallbacks_equal_vmap():
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    x, s = jax.random.normal(keys[0], (BATCH, 3)), jax.random.normal(keys[1], (BATCH,))
    shared = jax.random.normal(keys[2], (3,))
    want, got = _both(_mixed, (x, s, shared), [True, True, False])
    _assert_equal(got, want)
    want, got = _both(_mixed, (x, s[0], shared), [True, False, False])
    _assert_equal(got, want)


def test_derivatives_through_batch_last_equal_those_through_vmap():
    keys = jax.random.split(jax.random.PRNGKey(2), 3)
    x, s, shared = jax.random.normal(keys[0], (BATCH, 3)), jax.random.normal(keys[1], (BATCH,)), jnp.ones(3)
    closed = jax.make_jaxpr(_mixed)(x[0], s[0], shared)

    def loss(batched):
        return lambda x, s: sum(jnp.sum(jnp.sin(y)) for y in batched(x, s, shared))

    plain = jax.vmap(jax.extend.core.jaxpr_as_fun(closed), in_axes=(0, 0, None))
    last = vmap_batch_last(closed, [True, True, False], BATCH)
    want = jax.grad(loss(plain), argnums=(0, 1))(x, s)
    _assert_equal(jax.grad(loss(last), argnums=(0, 1))(x, s), want)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_sines_computed_once_equal_those_of_vmap_bit_for_bit(dtype):
    """In float32 ``sin``, ``cos`` and ``tan`` are emitted divided by an exact one (`batch_last._RECOMPUTED`), so
    that XLA computes them once rather than in every consumer: the same numbers, at zeros, large angles and
    non-finite ones too; in float64 they are emitted as they are."""
    x = jnp.array([[0.0, -0.0, 1.0, -2.5], [1e4, -3e7, np.pi, np.inf], [-np.inf, np.nan, 0.5, 7.0]], dtype)
    axis = jnp.array([0.0, 0.6, 0.8], dtype)

    def f(a):
        return jnp.sin(a), jnp.cos(a), jnp.tan(a), jnp.sin(a)[:, None] * axis + (1 - jnp.cos(a))[:, None]

    closed = jax.make_jaxpr(f)(x[0])
    want = jax.jit(jax.vmap(f))(x)
    got = jax.jit(vmap_batch_last(closed, [True], len(x)))(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    emitted = jax.make_jaxpr(vmap_batch_last(closed, [True], len(x)))(x)
    divisions = [e for e in equations(emitted.jaxpr) if e.primitive.name == "div"]
    transcendentals = [e for e in closed.jaxpr.eqns if e.primitive.name in batch_last._RECOMPUTED]
    assert len(divisions) == (len(transcendentals) if dtype == jnp.float32 else 0) and len(transcendentals) == 5


def _scoped_step(x):
    with jax.named_scope("scoped_step"):
        y = jnp.sin(x) * x
    return jax.lax.scan(lambda c, _: (jnp.cos(c) * c, None), y, None, length=2)[0]


def test_emitted_operations_carry_the_source_line_and_scope_of_the_one_state_ones():
    """XLA dumps and profiles of a batch-last program name jaxmb's lines (`batch_last._source_of`), in scan bodies
    too, rather than the interpreter's."""
    from jax._src import source_info_util

    x = jnp.ones((BATCH, 3), jnp.float64)
    closed = jax.make_jaxpr(_scoped_step)(x[0])
    emitted = jax.make_jaxpr(vmap_batch_last(closed, [True], BATCH))(x)
    ops = [e for e in equations(emitted.jaxpr) if e.primitive.name in ("sin", "cos", "mul")]
    assert [e.primitive.name for e in ops] == ["sin", "mul", "cos", "mul"]
    for i, e in enumerate(ops):
        assert source_info_util.summarize(e.source_info).split(":")[0] == __file__
        assert ("scoped_step" in str(e.source_info.name_stack)) == (i < 2)


def _with_dead_ends(x):
    unused = jnp.exp(x)  # noqa: F841  (an output of no one)
    c, ys = jax.lax.scan(lambda c, _: (c * 2.0, (jnp.tanh(c), jnp.log1p(c * c))), x, None, length=3)
    return c, ys[1]


def test_equations_that_no_output_depends_on_are_not_emitted():
    x = jnp.linspace(0.1, 1.0, BATCH * 3).reshape(BATCH, 3)
    closed = jax.make_jaxpr(_with_dead_ends)(x[0])
    emitted = jax.make_jaxpr(vmap_batch_last(closed, [True], BATCH))(x)
    names = {e.primitive.name for e in equations(emitted.jaxpr)}
    assert {"scan", "log1p"} <= names and not names & {"exp", "tanh"}
    _assert_equal(vmap_batch_last(closed, [True], BATCH)(x), jax.vmap(_with_dead_ends)(x))
