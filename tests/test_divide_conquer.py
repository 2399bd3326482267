"""Divide-and-conquer forward dynamics of serial chains (`jaxmb.forward_dynamics_dc`, book Lemma 10.6, Alg 10.6)
against the articulated-body algorithm, in float64.

Random chains of 1 to 33 bodies (odd and non-power-of-two lengths, so that subsystems pass through assembly
levels unpaired), on a fixed and on a free base, with screw joints or the full joint mix, armature on every
coordinate and external forces. One program per chain (`checks.fast_jit`) computes both algorithms for a batch of
states, with and without external forces; it takes the model as an argument, so a changed armature reuses it.
"""

import functools
import math

import checks
import jax
import jax.numpy as jnp
import pytest

import jaxmb
from jaxmb.dynamics.divide_conquer import _plan
from jaxmb.testing import random_model, random_state

RTOL = 1e-10  # float64, relative to the magnitude of the expected value
# float32 against the float64 ABA: measured 2e-6 .. 1.3e-3 on chains of 3 to 33 bodies (the float32 ABA: 3e-7 ..
# 3e-5). The assembly subtracts compliances, (10.48), and loses more than the AB algorithm (Featherstone 1999, II).
FLOAT32_RTOL = 5e-3
N_STATES = 2

SPECS = {  # bodies, base, joint mix; every spec with armature
    "1-free": dict(n_bodies=1, floating_base=True, joint_mix="screw"),
    "2-fixed-mixed": dict(n_bodies=2, floating_base=False, joint_mix="mixed"),
    "3-free-mixed": dict(n_bodies=3, floating_base=True, joint_mix="mixed"),
    "7-fixed-screw": dict(n_bodies=7, floating_base=False, joint_mix="screw"),
    "16-fixed-mixed": dict(n_bodies=16, floating_base=False, joint_mix="mixed"),
    "33-free-screw": dict(n_bodies=33, floating_base=True, joint_mix="screw"),
}

assert_close = functools.partial(checks.assert_close, rtol=RTOL)


@functools.cache
def _model(name):
    return random_model(list(SPECS).index(name), branching=0.0, armature=True, **SPECS[name])


@functools.partial(checks.fast_jit, static_argnums=(1, 2))  # one program instead of op by op
def _states(model, n=N_STATES, seed=0):
    q, qd, tau = jax.vmap(lambda k: random_state(model, k))(jax.random.split(jax.random.PRNGKey(seed), n))
    f_ext = jax.random.normal(jax.random.PRNGKey(seed + 1), (n, model.nb, 6), q.dtype)
    return q, qd, tau, f_ext


def _both(model, q, qd, tau, f_ext):
    return (jaxmb.forward_dynamics_dc(model, q, qd, tau, f_ext), jaxmb.forward_dynamics(model, q, qd, tau, f_ext),
            jaxmb.forward_dynamics_dc(model, q, qd, tau), jaxmb.forward_dynamics(model, q, qd, tau))


@pytest.fixture(scope="module")
def both():
    """jit(vmap) of both algorithms over states, the model an argument."""
    return checks.fast_jit(jax.vmap(_both, in_axes=(None, 0, 0, 0, 0)))


@pytest.mark.parametrize("name", list(SPECS))
def test_equals_articulated_body_algorithm(name, both):
    model = _model(name)
    dc, aba, dc_free, aba_free = both(model, *_states(model))
    for s in range(N_STATES):
        assert_close(dc[s], aba[s])
        assert_close(dc_free[s], aba_free[s])


def test_armature_enters_as_in_articulated_body_algorithm(both):
    model = _model("16-fixed-mixed")
    states = _states(model)
    rigid = model.replace(armature=jnp.zeros_like(model.armature))
    dc, aba, _, _ = both(rigid, *states)
    assert_close(dc, aba)
    dc_armature = both(model, *states)[0]
    assert float(jnp.max(jnp.abs(dc_armature - dc))) > 1e-3 * float(jnp.max(jnp.abs(dc)))  # the armature matters


@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 33])
def test_assembly_takes_ceil_log2_n_levels(n):
    model = random_model(0, n_bodies=n, joint_mix="screw", branching=0.0)
    assert len(_plan(model.topology, model.body_names).levels) == math.ceil(math.log2(n))


@pytest.fixture(scope="module")
def small():
    """A two-body screw chain and one state, for the costlier transforms."""
    model = random_model(11, n_bodies=2, joint_mix="screw", branching=0.0, armature=True)
    q, qd, tau, f_ext = (x[0] for x in _states(model, 1, seed=3))
    return model, q, qd, tau, f_ext


def test_jit_equals_eager(small):
    model, *state = small
    eager = jaxmb.forward_dynamics_dc(model, *state)
    assert_close(checks.fast_jit(jaxmb.forward_dynamics_dc)(model, *state), eager)


def test_vmap_equals_loop(small):
    model = small[0]
    states = _states(model, 3, seed=5)
    batched = checks.fast_jit(jax.vmap(jaxmb.forward_dynamics_dc, in_axes=(None, 0, 0, 0, 0)))(model, *states)
    one = checks.fast_jit(jaxmb.forward_dynamics_dc)
    for s in range(3):
        assert_close(batched[s], one(model, *(x[s] for x in states)))


def test_float32_within_documented_tolerance(both):
    model = _model("3-free-mixed")
    states = _states(model)
    expected = both(model, *states)[1]
    dc = checks.fast_jit(jax.vmap(jaxmb.forward_dynamics_dc, in_axes=(None, 0, 0, 0, 0)))
    single = dc(model.cast(jnp.float32), *(x.astype(jnp.float32) for x in states))
    assert single.dtype == jnp.float32
    checks.assert_close(single, expected, rtol=FLOAT32_RTOL)


def test_check_grads(small):
    """Forward and reverse mode with respect to the state, the external forces and the body masses."""
    model, q, qd, tau, f_ext = small

    def dynamics(q, qd, tau, f_ext, mass):
        return jaxmb.forward_dynamics_dc(model.replace(mass=mass), q, qd, tau, f_ext)

    checks.check_grads(dynamics, (q, qd, tau, f_ext, model.mass))


def test_branched_tree_raises_value_error_naming_the_body():
    model = random_model(0, n_bodies=4, joint_mix="screw", parents=[-1, 0, 1, 1])
    q, qd, tau = random_state(model, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="body 'b1' has 2 children"):
        jax.jit(jaxmb.forward_dynamics_dc)(model, q, qd, tau)
