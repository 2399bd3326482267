"""`jit`: `jax.jit` with the XLA options under which jaxmb's programs compile fastest and run fastest on the CPU.

XLA's CPU backend emits each fused loop either through its MLIR *fusion emitters* (the default since 2025) or
through its older direct LLVM emitter. On jaxmb's sweeps the older emitter compiles 1.5-2x faster and runs as fast
or faster: the talos ABA at batch 4096 in float32 compiles in ~4.2 s instead of ~6.6 s, its gradient in ~16 s
instead of ~26 s, the RNEA and CRBA in half the time (benchmarks/README.md, "Compile time"). Its loops over the
batch (`jaxmb.batching.batch_last`) are vectorized 256 bits wide by default; 512 bits wide, the talos ABA ran 15-20 %
faster in float32 and in float64, and as much on the same CPU held to AVX2, whose 256-bit registers then take
each vector in two halves (benchmarks/README.md, "512-bit vectors, and outputs moved once"). The options are
handed to `jax.jit` as ``compiler_options``, so they apply to that one program and never change the process's
global XLA flags; other backends ignore them.

`eager_jit` decorates the public functions: called outside any JAX transformation (in a notebook, say), a function
runs as one program compiled by `jit` and cached, instead of op by op, where each operation compiles a program of
its own (talos' forward dynamics: 19 s to the first result and 0.4 s a call op by op, 3 s and 0.7 ms compiled).
Inside ``jax.jit``, ``vmap``, ``grad`` or ``scan`` it is the function as written, so the caller's program is the
same with or without it.

`computed_once` keeps XLA's CPU fusion from recomputing an array in every consumer that reads it more than once.
"""

import functools
import inspect

import jax
import numpy as np

from jaxmb.batching import internals


def computed_once(x):
    """``x`` divided by an exact one, ``1 + 0 x``, which no simplifier folds. XLA's CPU fusion counts products and
    sums as cheap and fuses them into every consumer, once per element the consumer reads, where it does not fuse a
    division into a consumer that reuses its elements: ``x`` is then computed once and stored (the joint rotations'
    sines and cosines, the mass matrix's entries before the gather that mirrors them; benchmarks/README.md,
    "Computed once"). The value is ``x`` wherever ``x`` is finite, and so are its derivatives."""
    one = jax.lax.add(jax.lax.mul(x, jax.lax.full_like(x, 0)), jax.lax.full_like(x, 1))
    return jax.lax.div(x, one)


CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_cpu_prefer_vector_width": 512}
"""XLA debug options `jit` adds for each program (where this jaxlib knows them): the older loop emitter, and vector
loops 512 bits wide (in two 256-bit halves on a CPU without AVX-512)."""


@functools.lru_cache(maxsize=None)
def _accepts(key, value):
    """Whether this jaxlib's XLA accepts the debug option ``key=value`` (one tiny compile, once per process)."""
    try:
        jax.jit(lambda x: x + 1, compiler_options={key: value}).lower(np.float32(0)).compile()
    except Exception:  # an XLA without the option rejects it by name
        return False
    return True


def supported_options(options):
    """The entries of ``options`` (a dict of XLA debug options) that this jaxlib knows; the others are dropped, so a
    program compiles with XLA's defaults for them where a jaxlib without one would fail to compile it."""
    return {key: value for key, value in options.items() if _accepts(key, value)}


def jit(fun=None, **jit_kwargs):
    """`jax.jit` with `CPU_COMPILER_OPTIONS` added to ``compiler_options`` (the caller's own options win).

    Use it wherever ``jax.jit`` would go, also as a decorator, bare or with arguments::

        fd = jaxmb.jit(jax.vmap(jaxmb.forward_dynamics, in_axes=(None, 0, 0, 0)))

        @functools.partial(jaxmb.jit, static_argnames="n")
        def rollout(model, q, qd, n): ...
    """
    if fun is None:
        return functools.partial(jit, **jit_kwargs)
    options = supported_options(CPU_COMPILER_OPTIONS) | dict(jit_kwargs.pop("compiler_options", None) or {})
    return jax.jit(fun, compiler_options=options or None, **jit_kwargs)


def _hashable(value):
    """A static argument as a hashable value: lists and numpy arrays as tuples (frames, axes)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


def eager_jit(fun=None, *, static_argnames=()):
    """Decorator of a public function: outside JAX transformations, each call runs ``fun`` compiled by `jit`
    (one program per argument shapes and static arguments, cached); inside them, ``fun`` itself is traced.

    ``static_argnames`` names the arguments that select what is computed (frame names, axes, a reference): they
    are hashed, lists and numpy arrays as tuples. A compiled program cannot be nested in a caller's ``jit``
    (its ``compiler_options`` are refused there), hence the test of the trace state rather than of the arguments:
    a call with constant arguments inside a caller's ``jit`` is traced into it.
    """
    if fun is None:
        return functools.partial(eager_jit, static_argnames=static_argnames)
    compiled = functools.cache(lambda: jit(fun, static_argnames=static_argnames))  # at the first call, not import
    signature = inspect.signature(fun)

    @functools.wraps(fun)
    def call(*args, **kwargs):
        if not internals.outside_transformations():
            return fun(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)  # every argument by position: jit caches by how each was passed
        bound.apply_defaults()
        for name in static_argnames:
            bound.arguments[name] = _hashable(bound.arguments[name])
        return compiled()(*bound.args, **bound.kwargs)

    return call
