"""Every use of JAX's internals in jaxmb: its primitives' registrations and the few private functions the batching
machinery reads, each behind a small function here, so that a new JAX version breaks (or is shimmed) in this one
module.

Defining primitives (`primitive`, `linear`, `bilinear`, `jvp_rule`, `transpose_rule`, `batching_rule`) goes through
``jax.extend`` and ``jax.interpreters``; `outside_transformations`, `source_context` and `without_dead_code` read
``jax._src``, as does `backends_started`, each with a fallback that is correct, only slower or less informative,
where a JAX lacks it.
"""

import contextlib
import functools

import jax
from jax.extend import core
from jax.interpreters import ad, batching, mlir

try:
    from jax._src.core import trace_state_clean as _trace_state_clean
except ImportError:  # a JAX without it: every call runs as written (op by op when eager), never wrongly compiled
    _trace_state_clean = None
try:
    from jax._src.xla_bridge import backends_are_initialized as _backends_are_initialized
except ImportError:  # a JAX without it: the backends are taken as started, and the process's flags left alone
    _backends_are_initialized = None
try:
    from jax._src import source_info_util as _source_info
except ImportError:  # a JAX without it: what the batch-last interpreter emits is named after the interpreter
    _source_info = None
try:
    from jax._src.interpreters.partial_eval import dce_jaxpr as _dce_jaxpr
except ImportError:  # a JAX without it: dead equations are emitted too, and XLA removes them
    _dce_jaxpr = None

Zero = ad.Zero
"""The symbolic zero tangent or cotangent of a primitive's rules."""
instantiate_zeros = ad.instantiate_zeros
is_undefined_primal = ad.is_undefined_primal
bdim_at_front = batching.bdim_at_front
jaxpr_as_fun = core.jaxpr_as_fun
ClosedJaxpr = core.ClosedJaxpr
Literal = core.Literal
Var = core.Var


def primitive(name, impl, abstract_eval, *, cpu=None, multiple_results=False):
    """A new primitive ``name`` evaluated by ``impl(*args, **params)`` eagerly and lowered as ``impl`` on every
    backend, or as ``cpu`` (a function of the same signature, traced at each lowering, so it may read module flags)
    on the CPU. ``abstract_eval(*avals, **params)`` returns the output's shape and dtype
    (`jax.ShapeDtypeStruct`-like, or a list of them with ``multiple_results``)."""
    p = core.Primitive(name)
    p.multiple_results = multiple_results

    def aval(shaped):
        return jax.core.ShapedArray(shaped.shape, shaped.dtype)

    p.def_impl(impl)
    p.def_abstract_eval(lambda *avals, **params: (
        [aval(a) for a in abstract_eval(*avals, **params)] if multiple_results
        else aval(abstract_eval(*avals, **params))))
    mlir.register_lowering(p, mlir.lower_fun(impl, multiple_results=multiple_results))
    if cpu is not None:
        mlir.register_lowering(p, mlir.lower_fun(cpu, multiple_results=multiple_results), "cpu")
    return p


def linear(p, transpose):
    """``p`` is linear in its one operand; ``transpose(ct, **params)`` returns its cotangent (a list of one)."""
    ad.deflinear(p, transpose)


def bilinear(p, transpose_lhs, transpose_rhs):
    """``p(x, y)`` is bilinear; ``transpose_lhs(ct, x, y)`` and ``transpose_rhs(ct, x, y)`` are the cotangents of
    ``x`` and ``y``."""
    ad.defbilinear(p, transpose_lhs, transpose_rhs)


def jvp_rule(p, rule):
    """``rule(primals, tangents, **params) -> (outputs, output tangents)``."""
    ad.primitive_jvps[p] = rule


def transpose_rule(p, rule):
    """``rule(cotangents, *args, **params) -> cotangents of the args`` (None for those that are not linear)."""
    ad.primitive_transposes[p] = rule


def batching_rule(p, rule):
    """``rule(args, dims, **params) -> (outputs, output dims)``."""
    batching.primitive_batchers[p] = rule


_ELEMENTWISE_BATCHERS = ("broadcast_batcher", "vectorized_batcher")


def is_elementwise(p):
    """Whether JAX batches the primitive ``p`` as an elementwise operation (its batching rule is JAX's broadcasting
    or vectorized batcher), so that it acts the same on any layout of its operands' axes."""
    rule = batching.fancy_primitive_batchers.get(p)
    if rule is None:
        rule = batching.primitive_batchers.get(p)
    return isinstance(rule, functools.partial) and rule.func.__name__ in _ELEMENTWISE_BATCHERS


def outside_transformations():
    """Whether JAX traces nothing now: no ``jit``, ``vmap``, ``grad`` or ``scan`` is under way."""
    return _trace_state_clean is not None and _trace_state_clean()


def backends_started():
    """Whether JAX has started its backends (the first operation, or ``jax.devices()``, starts them): XLA reads its
    ``XLA_FLAGS`` then, once per process."""
    return _backends_are_initialized is None or _backends_are_initialized()


def source_context(eqn):
    """The context in which what the jaxpr equation ``eqn`` becomes is emitted under ``eqn``'s own source line and
    name scope, as `jax.core.eval_jaxpr` does: XLA dumps and profiles of a re-interpreted jaxpr then name jaxmb's
    lines instead of the interpreter's."""
    if _source_info is None:
        return contextlib.nullcontext()
    name_stack = _source_info.current_name_stack() + eqn.source_info.name_stack
    return _source_info.user_context(eqn.source_info.traceback, name_stack=name_stack)


def without_dead_code(closed):
    """The closed jaxpr ``closed`` without the equations that no output depends on (scan bodies included)."""
    if _dce_jaxpr is None:
        return closed
    jaxpr, _ = _dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars), instantiate=True)
    return core.ClosedJaxpr(jaxpr, closed.consts)
