"""The comparison every test module uses: max absolute error relative to the magnitude of the expected value."""

import numpy as np
from jax.extend.core import ClosedJaxpr, Jaxpr


def assert_close(actual, expected, rtol, scale=None):
    """``max |actual - expected| <= rtol * scale``, ``scale`` defaulting to ``max(1, max |expected|)``."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if scale is None:
        scale = max(1.0, float(np.max(np.abs(expected))))
    err = float(np.max(np.abs(actual - expected)))
    assert err <= rtol * scale, f"max error {err:.3e} > {rtol:.1e} * scale {scale:.3e}"


def equations(jaxpr):
    """Every equation of ``jaxpr`` and of the jaxprs nested in its equations' parameters (scans, calls, rules)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                if isinstance(sub, (ClosedJaxpr, Jaxpr)):
                    yield from equations(sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub)


# -- compiling test programs quickly --------------------------------------------------------------------------------
#
# For test programs whose run time does not matter: the same options as tests/pinocchio_bridge.py's
# `compile_fast` (no LLVM optimization, no CPU fusion emitters; no arithmetic changes, no fast-math), and
# jaxmb's small products lowered in their multiply-reduce form, which compiles in about half the time of the
# CPU form (tests/test_spatial.py proves the two forms equal). ``JAXMB_TEST_XLA_DEFAULTS=1`` restores both.

import contextlib  # noqa: E402
import functools  # noqa: E402
import os  # noqa: E402

from jaxmb.batching.compile import supported_options  # noqa: E402

FAST_COMPILE_OPTIONS = supported_options({
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
})  # those this jaxlib knows


def _xla_defaults():
    return bool(os.environ.get("JAXMB_TEST_XLA_DEFAULTS"))


def fast_compile_environment():
    """``os.environ`` with `FAST_COMPILE_OPTIONS` (but the fusion emitters', which `jaxmb.jit` sets per program)
    appended to ``XLA_FLAGS``, for the processes the tests start that compile programs they call a few times: the
    demo and the benchmark scripts on tiny batches, the notebooks' kernels and
    the two-device process of tests/test_parallel.py."""
    env = dict(os.environ)
    if _xla_defaults():
        return env
    flags = [f"--{k}={str(v).lower()}" for k, v in FAST_COMPILE_OPTIONS.items() if k != "xla_cpu_use_fusion_emitters"]
    env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""), *flags]).strip()
    return env


@contextlib.contextmanager
def multiply_reduce_products():
    """Programs lowered inside this block use the multiply-reduce form of jaxmb's small products."""
    from jaxmb import spatial

    if _xla_defaults():
        yield
        return
    spatial.UNROLLED_ON_CPU = False
    try:
        yield
    finally:
        spatial.UNROLLED_ON_CPU = True


def fast_jit(fn=None, **jit_kwargs):
    """`jax.jit` compiled with `FAST_COMPILE_OPTIONS` and lowered with `multiply_reduce_products` (usable as a
    decorator). The options travel with the program through `jax.jvp` (wrap such calls in
    `multiply_reduce_products` too, to lower their programs in the cheaper form), but `jax.vjp` of it fails: JAX
    takes compiler options on top-level programs only. Jit the derivative itself (``fast_jit(jax.grad(f))``), or,
    for `check_grads`, give it a `jax.jit` function called in `multiply_reduce_products`."""
    import jax

    if fn is None:
        return functools.partial(fast_jit, **jit_kwargs)
    if _xla_defaults():
        return jax.jit(fn, **jit_kwargs)
    jitted = jax.jit(fn, compiler_options=FAST_COMPILE_OPTIONS, **jit_kwargs)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        with multiply_reduce_products():
            return jitted(*args, **kwargs)

    return call


@functools.cache
def _fast_blocks():
    import jaxmb.operators

    return fast_jit(jaxmb.operators._blocks.__wrapped__)


def dense_operators(model, q):
    """`jaxmb.operators.dense_operators` with the program of the blocks it stacks compiled by `fast_jit`; the
    stacking is unchanged."""
    from unittest import mock

    import jaxmb.operators

    with mock.patch.object(jaxmb.operators, "_blocks", _fast_blocks()):
        return jaxmb.operators.dense_operators(model, q)


@functools.cache
def derivative_programs(f):
    """``f``, its JVP ``(args, tangents) -> (out, tangent_out)`` and its VJP ``(args, cotangent) -> cotangents``,
    each one program compiled by `fast_jit` (the derivatives are taken inside the programs, where its options are
    allowed); one triple per ``f``, so that calls at other points of the same shapes reuse the programs."""
    import jax

    return (fast_jit(f), fast_jit(lambda args, tangents: jax.jvp(f, args, tangents)),
            fast_jit(lambda args, cotangent: jax.vjp(f, *args)[1](cotangent)))


def check_grads(f, args, atol=None, rtol=None, eps=None):
    """`jax.test_util.check_grads` of order 1 in both modes: its own checks (`check_jvp`, `check_vjp`: one random
    direction against central differences) on the programs of `derivative_programs`. ``check_grads(jax.jit(f),
    ...)`` compiles four programs with XLA's default options (``f``, the JVP and both halves of the VJP); this
    compiles three in the cheaper form. ``f``: a plain function of the arrays (pytrees) ``args``."""
    from jax.test_util import check_jvp, check_vjp

    primal, jvp, vjp = derivative_programs(f)
    tolerances = dict(atol=atol, rtol=rtol, **({} if eps is None else {"eps": eps}))
    check_jvp(primal, jvp, tuple(args), **tolerances)
    check_vjp(primal, lambda *a: (primal(*a), lambda ct: vjp(a, ct)), tuple(args), **tolerances)
