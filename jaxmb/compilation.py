"""`jit`: `jax.jit` with the XLA options under which jaxmb's programs compile fastest on the CPU.

XLA's CPU backend emits each fused loop either through its MLIR *fusion emitters* (the default since 2025) or
through its older direct LLVM emitter. On jaxmb's sweeps the older emitter compiles 1.5-2x faster and runs as fast
or faster: the talos ABA at batch 4096 in float32 compiles in ~4.2 s instead of ~6.6 s, its gradient in ~16 s
instead of ~26 s, the RNEA and CRBA in half the time (benchmarks/README.md, "Compile time"). The options are
handed to `jax.jit` as ``compiler_options``, so they apply to that one program and never change the process's
global XLA flags; other backends ignore them.
"""

import functools

import jax
import numpy as np

CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}
"""XLA debug options `jit` adds for each program (where this jaxlib knows them)."""


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
