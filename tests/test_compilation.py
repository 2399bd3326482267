"""`jaxmb.jit`: `jax.jit` with jaxmb's CPU compiler options, which importing jaxmb also gives plain `jax.jit`. Same results as `jax.jit`, the same calling forms,
and the caller's own options taking precedence. `eager_jit`: every public state function compiles its calls made
outside JAX transformations, once per shape, and is traced as written inside them."""

import functools
import inspect
import logging
import os
import subprocess
import sys

import jax
import jaxlib.version
import numpy as np
import pytest

import jaxmb
import jaxmb.loops
from jaxmb.batching import compile as compilation, internals
from jaxmb.batching.compile import CPU_COMPILER_OPTIONS, eager_jit, supported_options
from jaxmb.batching.internals import outside_transformations
from jaxmb.testing import random_model, random_state

MODEL_QUERIES = {"total_mass", "neutral_configuration"}  # functions of the model alone: nothing to compile


def test_installed_jaxlib_accepts_the_cpu_options():
    """If a jaxlib drops an option, `jit` silently compiles with XLA's defaults: this test is what notices."""
    assert supported_options(CPU_COMPILER_OPTIONS) == CPU_COMPILER_OPTIONS


def test_forward_dynamics_equals_jax_jit():
    model = random_model(3, n_bodies=6, floating_base=True)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    q, qd, tau = jax.jit(jax.vmap(random_state, (None, 0)))(model, keys)  # one program, not op by op
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
    own = {name: not value if isinstance(value, bool) else value // 2 for name, value in CPU_COMPILER_OPTIONS.items()}
    assert float(jaxmb.jit(lambda x: x + 1, compiler_options=own)(1.0)) == 2.0  # XLA takes the override
    seen = []
    monkeypatch.setattr(jax, "jit", lambda fun, **kwargs: seen.append(kwargs["compiler_options"]))
    jaxmb.jit(abs, compiler_options=own | {"xla_cpu_enable_fast_math": False})
    jaxmb.jit(abs)
    assert seen == [own | {"xla_cpu_enable_fast_math": False}, CPU_COMPILER_OPTIONS]


def test_installed_jax_tells_whether_it_is_tracing():
    """If a JAX release drops the private name `eager_jit` reads, eager calls silently run op by op again: this
    test is what notices."""
    assert outside_transformations()
    inside = []

    def record(x):
        inside.append(outside_transformations())
        return x

    for transformation, x in ((jax.jit, 1.0), (jax.vmap, np.ones(2)), (jax.grad, 1.0)):
        transformation(record)(x)
    assert inside == [False, False, False]


@pytest.fixture(scope="module")
def small():
    model = random_model(5, n_bodies=4, floating_base=True)
    return model, random_state(model, jax.random.PRNGKey(1))


def test_every_public_state_function_compiles_its_eager_calls():
    """Each function of ``jaxmb`` and ``jaxmb.loops`` taking a model and a state is an `eager_jit` wrapper (all
    such wrappers share one code object)."""
    wrapper = eager_jit(lambda: None).__code__
    for namespace in (jaxmb, jaxmb.loops):
        for name, fun in vars(namespace).items():
            if not inspect.isfunction(fun) or name in MODEL_QUERIES:
                continue
            if next(iter(inspect.signature(fun).parameters), None) in ("model", "lm"):
                assert fun.__code__ is wrapper, f"{namespace.__name__}.{name} is not decorated with eager_jit"


def test_eager_calls_compile_one_program_once(small, caplog):
    """Op by op, the first call would compile a program per operation; compiled, it compiles one, and calls with
    new values of the same shapes reuse it."""
    model, (q, qd, tau) = small
    supported_options(CPU_COMPILER_OPTIONS)  # its probe compiles once per process
    q_new = q + 0.1
    with jax.log_compiles(True), caplog.at_level(logging.WARNING):
        first = jaxmb.forward_dynamics(model, q, qd, tau)
        again = jaxmb.forward_dynamics(model, q_new, qd, tau)
    compiled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Finished XLA compilation")]
    assert len(compiled) == 1 and "forward_dynamics" in compiled[0], compiled
    for result, q_ in ((first, q), (again, q_new)):
        np.testing.assert_allclose(result, jax.jit(jaxmb.forward_dynamics)(model, q_, qd, tau), rtol=1e-12,
                                   atol=1e-12)


def test_static_arguments_may_be_lists_or_arrays(small, caplog):
    """Frames as a list and axes as a numpy array, by keyword, run the program of the tuples they hold given by
    position."""
    model, (q, _, _) = small
    frames = list(model.frame_names[-2:])
    as_lists = jaxmb.operational_space_compliance(model, q, frames, axes=np.arange(3, 6))
    with jax.log_compiles(True), caplog.at_level(logging.WARNING):
        as_tuples = jaxmb.operational_space_compliance(model, q, tuple(frames), (3, 4, 5))
    assert not [r for r in caplog.records if r.getMessage().startswith("Finished XLA compilation")], caplog.text
    np.testing.assert_array_equal(as_lists, as_tuples)


def test_inside_transformations_the_function_is_traced_as_written(small):
    """A caller's program holds the sweeps themselves, not a nested compiled call (whose CPU options a caller's
    ``jit`` would refuse), also when every argument is a constant of the caller's ``jit``."""
    model, (q, qd, tau) = small
    jaxpr = jax.make_jaxpr(jaxmb.forward_dynamics)(model, q, qd, tau)
    assert "forward_dynamics" not in [e.params.get("name") for e in jaxpr.eqns]
    np.testing.assert_allclose(jax.jit(lambda: jaxmb.forward_dynamics(model, q, qd, tau))(),
                               jaxmb.forward_dynamics(model, q, qd, tau), rtol=1e-12, atol=1e-12)


def _flags_after(code, **env):
    """``XLA_FLAGS`` printed by a fresh Python process that runs ``code`` (which imports jaxmb)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAXMB_XLA_FLAGS")} | env
    out = subprocess.run([sys.executable, "-c", code + "\nimport os; print(os.environ.get('XLA_FLAGS', ''))"],
                         env=environ, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


CPU_FLAGS = [f"--{k}={str(v).lower()}" for k, v in CPU_COMPILER_OPTIONS.items()]


def test_importing_jaxmb_leaves_the_process_flags_to_other_jax_code():
    assert _flags_after("import jaxmb") == ""
    assert _flags_after("import jaxmb", JAXMB_XLA_FLAGS="0") == ""


def test_cpu_options_opt_in_and_the_users_own_flags_win():
    flags = _flags_after("import jaxmb", JAXMB_XLA_FLAGS="1")
    assert all(flag in flags.split() for flag in CPU_FLAGS), flags
    own = "--xla_cpu_prefer_vector_width=256"
    flags = _flags_after("import jaxmb", XLA_FLAGS=own, JAXMB_XLA_FLAGS="1").split()
    assert own in flags and "--xla_cpu_prefer_vector_width=512" not in flags
    assert "--xla_cpu_use_fusion_emitters=false" in flags


def test_cpu_options_left_out_on_a_jaxlib_not_known_to_accept_them(monkeypatch):
    """XLA aborts the process on a flag it does not know: on a newer jaxlib, only `jit`'s per-program options."""
    monkeypatch.setattr(internals, "backends_started", lambda: False)  # as at import, before JAX starts
    monkeypatch.setenv("JAXMB_XLA_FLAGS", "1")
    for version, changed in (("0.11.2", False), ("0.10.2", True)):
        monkeypatch.setenv("XLA_FLAGS", "")
        monkeypatch.setattr(jaxlib.version, "__version__", version)
        assert compilation.use_cpu_options() is changed
        assert (os.environ["XLA_FLAGS"] != "") is changed


def test_cpu_options_leave_a_started_jax_alone():
    """XLA reads its flags when JAX starts its backends: changing them afterwards would only mislead."""
    assert _flags_after("import jax; jax.devices(); import jaxmb") == ""
