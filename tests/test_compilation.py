"""`jaxmb.jit`: `jax.jit` with jaxmb's CPU compiler options. Same results as `jax.jit`, the same calling forms,
and the caller's own options taking precedence."""

import functools

import jax
import numpy as np

import jaxmb
from jaxmb.compilation import CPU_COMPILER_OPTIONS, supported_options
from jaxmb.testing import random_model, random_state


def test_installed_jaxlib_accepts_the_cpu_options():
    """If a jaxlib drops an option, `jit` silently compiles with XLA's defaults: this test is what notices."""
    assert supported_options(CPU_COMPILER_OPTIONS) == CPU_COMPILER_OPTIONS


def test_forward_dynamics_equals_jax_jit():
    model = random_model(3, n_bodies=6, floating_base=True)
    q, qd, tau = jax.vmap(lambda k: random_state(model, k))(jax.random.split(jax.random.PRNGKey(0), 2))
    fd = jax.vmap(jaxmb.forward_dynamics, in_axes=(None, 0, 0, 0))
    np.testing.assert_allclose(jaxmb.jit(fd)(model, q, qd, tau), jax.jit(fd)(model, q, qd, tau), rtol=1e-12,
                               atol=1e-12)


def test_decorator_forms_and_static_arguments():
    @jaxmb.jit
    def double(x):
        return 2 * x

    @functools.partial(jaxmb.jit, static_argnames="n")
    def power(x, n):
        return x**n

    assert float(double(1.5)) == 3.0
    assert float(power(2.0, n=3)) == 8.0
    assert float(jaxmb.jit(static_argnums=1)(lambda x, n: x * n)(2.0, 4)) == 8.0


def test_callers_compiler_options_win(monkeypatch):
    own = {name: not value for name, value in CPU_COMPILER_OPTIONS.items()}
    assert float(jaxmb.jit(lambda x: x + 1, compiler_options=own)(1.0)) == 2.0  # XLA takes the override
    seen = []
    monkeypatch.setattr(jax, "jit", lambda fun, **kwargs: seen.append(kwargs["compiler_options"]))
    jaxmb.jit(abs, compiler_options=own | {"xla_cpu_enable_fast_math": False})
    jaxmb.jit(abs)
    assert seen == [own | {"xla_cpu_enable_fast_math": False}, CPU_COMPILER_OPTIONS]
