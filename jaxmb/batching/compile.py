"""`jit`: `jax.jit` with the XLA options under which jaxmb's programs compile fastest and run fastest on the CPU.

XLA's CPU backend emits each fused loop either through its MLIR *fusion emitters* or through its older direct LLVM
emitter. On jaxmb's sweeps the older emitter compiles faster and runs as fast or faster (benchmarks/findings.md,
"Compile time"). The loops over the batch (`jaxmb.batching.batch_last`) run faster vectorized 512 bits wide than at
the default 256, on CPUs with AVX-512 and on those held to AVX2, whose registers then take each vector in two halves
(benchmarks/findings.md, "512-bit vectors, and outputs moved once"). `jit` hands the options to `jax.jit` as
``compiler_options``, for that one program, and so do the compiled calls of jaxmb's public functions
(`eager_jit`). The options are scoped to jaxmb's programs: set as the process's ``XLA_FLAGS`` they would also
compile other JAX code in the process, and an optax update of a small network runs slower under them
(benchmarks/findings.md, "Compile time"). A process that runs jaxmb alone can take them for every ``jax.jit`` with
``JAXMB_XLA_FLAGS=1`` in its environment (`use_cpu_options`, called when jaxmb is imported). Other backends ignore
them.

`eager_jit` decorates the public functions: their state enters in the model's dtype (`as_state`), and called outside
any JAX transformation (in a notebook, say), a function runs as one program compiled by `jit` and cached, instead of
op by op, where each operation compiles a program of its own and the first result takes many times longer
(benchmarks/findings.md, "Eager calls"). Inside ``jax.jit``, ``vmap``, ``grad`` or ``scan`` it is the function as
written, so the caller's program is the same with or without it.

`computed_once` keeps XLA's CPU fusion from recomputing an array in every consumer that reads it more than once.
"""

import functools
import inspect
import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import internals


def computed_once(x):
    """``x`` divided by an exact one, ``1 + 0 x``, which no simplifier folds. XLA's CPU fusion counts products and
    sums as cheap and fuses them into every consumer, once per element the consumer reads, where it does not fuse a
    division into a consumer that reuses its elements: ``x`` is then computed once and stored (the joint rotations'
    sines and cosines, the mass matrix's entries before the gather that mirrors them; benchmarks/findings.md,
    "Computed once"). The value is ``x`` wherever ``x`` is finite, and so are its derivatives."""
    one = jax.lax.add(jax.lax.mul(x, jax.lax.full_like(x, 0)), jax.lax.full_like(x, 1))
    return jax.lax.div(x, one)


CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_cpu_prefer_vector_width": 512}
"""XLA debug options `jit` adds for each program (where this jaxlib knows them): the older loop emitter, and vector
loops 512 bits wide (in two 256-bit halves on a CPU without AVX-512)."""


FLAGS_KNOWN_BEFORE = (0, 11)
"""The first jaxlib release whose XLA is not known to accept every `CPU_COMPILER_OPTIONS` as a process flag (0.11.2
has no ``xla_cpu_use_fusion_emitters``). XLA aborts the whole process, at the start of its first backend, on a name
in ``XLA_FLAGS`` it does not know, so `use_cpu_options` sets the flags only on the releases before this one, on
which the test suite ran; `jit` checks each option per program and works on any release."""


OPT_IN = "JAXMB_XLA_FLAGS"
"""The environment variable that, set to ``1``, lets `use_cpu_options` add `CPU_COMPILER_OPTIONS` to the process's
XLA flags."""


def use_cpu_options():
    """Add `CPU_COMPILER_OPTIONS` to the process's ``XLA_FLAGS`` where the environment sets `OPT_IN` to ``1``, so
    that plain ``jax.jit`` compiles every program of the process as `jit` does (module docstring: by default the
    options are jaxmb's programs' alone). Called when jaxmb is imported; it changes nothing without `OPT_IN`, when
    JAX has already started its backends (XLA has read its flags then: use `jit`), on a jaxlib from
    `FLAGS_KNOWN_BEFORE` on, or for an option the flags already name (the user's value wins). The options touch only
    XLA's CPU backend. Returns whether the flags were changed."""
    if os.environ.get(OPT_IN, "0") != "1" or internals.backends_started() or not _flags_known():
        return False
    flags = os.environ.get("XLA_FLAGS", "")
    added = [f"--{key}={str(value).lower()}" for key, value in CPU_COMPILER_OPTIONS.items() if f"--{key}=" not in flags]
    if added:
        os.environ["XLA_FLAGS"] = " ".join([flags.strip()] + added).strip()
    return bool(added)


def _flags_known():
    """Whether the installed jaxlib is older than `FLAGS_KNOWN_BEFORE` (read from its version, without starting
    XLA)."""
    from jaxlib import version

    return tuple(int(part) for part in version.__version__.split(".")[:2]) < FLAGS_KNOWN_BEFORE


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


def model_dtype(model):
    """The floating-point dtype of a model's parameters (its first floating leaf), or None if it has none."""
    for leaf in jax.tree.leaves(model):
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and jnp.issubdtype(dtype, jnp.floating):
            return dtype
    return None


def _as_array(value, function, name):
    """A list or tuple of numbers as a numpy array; a ``TypeError`` naming the function and argument otherwise."""
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{function}: argument {name!r} must be an array of numbers, not {type(value).__name__} "
                        f"({e})") from None


def as_state(function, bound, static_argnames):
    """The arguments ``bound`` (an `inspect.BoundArguments` of a public function whose first argument is the model)
    as the state the recursions expect: Python lists and tuples of numbers as arrays, and every floating-point
    array in the model's dtype. A state in another precision than the model (a float64 velocity with a float32
    model, a float32 policy's torques with a float64 model) is cast at entry; its derivatives flow back in its own
    dtype, since a cast's transpose casts the cotangent back. Python scalars stay weakly typed."""
    names = list(bound.arguments)
    dtype = model_dtype(bound.arguments[names[0]])
    for name in names[1:]:
        value = bound.arguments[name]
        if name in static_argnames or value is None:
            continue
        if type(value) in (list, tuple):
            value = _as_array(value, function, name)
        if dtype is not None:
            value = jax.tree.map(lambda x: _in_dtype(x, dtype), value)
        bound.arguments[name] = value
    return bound


def _in_dtype(x, dtype):
    x_dtype = getattr(x, "dtype", None)
    if x_dtype is None or x_dtype == dtype or not jnp.issubdtype(x_dtype, jnp.floating):
        return x
    return x.astype(dtype)


def eager_jit(fun=None, *, static_argnames=()):
    """Decorator of a public function of ``(model, state..., static options)``: its state enters as the recursions
    expect it (`as_state`: lists as arrays, floating arrays in the model's dtype), and outside JAX transformations
    each call runs ``fun`` compiled by `jit` (one program per argument shapes and static arguments, cached); inside
    them, ``fun`` itself is traced.

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
        bound = as_state(fun.__name__, signature.bind(*args, **kwargs), static_argnames)
        if not internals.outside_transformations():
            return fun(*bound.args, **bound.kwargs)
        bound.apply_defaults()  # every argument by position: jit caches by how each was passed
        for name in static_argnames:
            bound.arguments[name] = _hashable(bound.arguments[name])
        return compiled()(*bound.args, **bound.kwargs)

    return call
