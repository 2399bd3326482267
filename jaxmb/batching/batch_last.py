"""`vmap_batch_last`: a jaxpr evaluated for a batch of states held with the batch as the *last* axis of every array.

`jax.vmap` puts the batch first: a body's 6x6 inertia of a batch is (B, 6, 6), and the small products of the sweeps
(`jaxmb.spatial.mm`, unrolled on the CPU into sums of products of slices) then read and write rows of 6 or 3
numbers, which XLA's CPU loops cannot vectorize. With the batch last, (6, 6, B), every slice of an operand is a
contiguous run of B numbers and every product a vector loop over the batch, the structure-of-arrays layout of
hand-written batched dynamics, without one array per entry (benchmarks/findings.md, "Batch last").

The interpreter walks the jaxpr once and emits each equation for batch-last operands:

* elementwise primitives, `broadcast_in_dim`, `reshape`, `concatenate`, `pad`, `select_n`, `stack`, slices,
  transposes, reductions, `split`, `squeeze` and `jaxmb.batching.rows` act on the leading axes and leave the batch last
  (an operand shared by all states is broadcast where a batched one meets it);
* `jaxmb.spatial`'s products become sums of products of slices over the leading axes;
* in float32, ``sin``, ``cos`` and ``tan`` end in a division by an exact one, so that XLA computes them once
  instead of in every consumer (`_RECOMPUTED`);
* `jit` and `custom_jvp_call` are inlined, and `lax.scan` is scanned again with its body interpreted, so the batch
  stays last inside chain segments;
* any other primitive goes through `jax.vmap` with the batch moved last again (`gather` on ``q``, for example).

An equation none of whose operands depends on the batch is emitted once, unbatched, and one that no output
depends on is not emitted (`internals.without_dead_code`). What an equation becomes carries its source line and name scope
(`internals.source_context`), so XLA dumps and profiles of a batch-last program name jaxmb's lines (benchmarks/findings.md, "Where
the compile time goes"). Derivatives of the result are those of the operations emitted, and the same as of
``jax.vmap`` of the jaxpr.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxmb.batching import internals
from jaxmb.batching.compile import computed_once


def _spread(x, size):
    """An unbatched operand (...) as a batched one (..., size)."""
    x = jnp.asarray(x)
    return lax.broadcast_in_dim(x, x.shape + (size,), tuple(range(x.ndim)))


def _all_batched(vals, batched, size):
    return [v if b else _spread(v, size) for v, b in zip(vals, batched)]


def _slice(x, k, axis):
    return lax.slice_in_dim(x, k, k + 1, axis=axis)


def _mm(A, B):
    """``A @ B`` over axes (-3, -2) of batch-last operands (..., m, k, size) x (..., k, n, size)."""
    shape = A.shape[:-2] + B.shape[-2:]
    dims = tuple(range(len(shape)))
    return functools.reduce(lax.add, [lax.mul(lax.broadcast_in_dim(_slice(A, k, -2), shape, dims),
                                              lax.broadcast_in_dim(_slice(B, k, -3), shape, dims))
                                      for k in range(A.shape[-2])])


def _mv(A, x):
    """``A @ x`` of batch-last operands (..., m, k, size) x (..., k, size) -> (..., m, size)."""
    shape = A.shape[:-2] + A.shape[-1:]
    dims = tuple(range(len(shape)))
    return functools.reduce(lax.add, [lax.mul(lax.reshape(_slice(A, k, -2), shape),
                                              lax.broadcast_in_dim(_slice(x, k, -2), shape, dims))
                                      for k in range(A.shape[-2])])


def _dot(a, b):
    """``sum_i a_i b_i`` of batch-last operands (..., k, size) -> (..., size)."""
    shape = a.shape[:-2] + a.shape[-1:]
    return functools.reduce(lax.add, [lax.reshape(lax.mul(_slice(a, i, -2), _slice(b, i, -2)), shape)
                                      for i in range(a.shape[-2])])


_PRODUCTS = {"jaxmb_mm": _mm, "jaxmb_mv": _mv, "jaxmb_dot": _dot}

_RECOMPUTED = ("sin", "cos", "tan")
"""Transcendentals that XLA's CPU fusion counts as cheap and so recomputes in every consumer, once per element of a
broadcast: the joint rotations ``1 + sin a~ + (1 - cos) a~ a~`` evaluated sine and cosine once per entry of each
3x3 matrix. In float32 each is emitted ending in a division by an exact one (`jaxmb.batching.compile.computed_once`),
and XLA does not fuse a division into a consumer that reuses its elements, so each is computed once per state. That
made the ABA and CRBA faster in float32 and the ABA slower in float64, where it is not done (benchmarks/findings.md,
"Computed once")."""


def _rule(eqn, vals, batched, size):
    """``(outs, outs_batched)`` of ``eqn`` for batch-last ``vals``, at least one of them batched."""
    p, params = eqn.primitive, dict(eqn.params)
    name = p.name
    if name in ("pjit", "jit"):
        return _interpret(params["jaxpr"], vals, batched, size)
    if name in ("custom_jvp_call", "custom_vjp_call"):
        return _interpret(params["call_jaxpr"], vals, batched, size)
    if name == "scan":
        return _scan(vals, batched, size, params)
    outs = _batched_rule(eqn, vals, batched, size)
    return outs, [True] * len(outs)


def _to_shape(x, b, shape, size):
    """An operand of an elementwise primitive whose one-state output has ``shape``: a one-state scalar stays a
    scalar when it is not batched, and is broadcast to ``shape`` when it is."""
    if np.ndim(x) - b == len(shape):
        return x if b else _spread(x, size)
    return lax.broadcast_in_dim(x, shape + (size,), (len(shape),)) if b else x


def _batched_rule(eqn, vals, batched, size):
    p, params = eqn.primitive, dict(eqn.params)
    name = p.name
    if name in _PRODUCTS:
        return [_PRODUCTS[name](*_all_batched(vals, batched, size))]
    if name in _RECOMPUTED and vals[0].dtype == np.float32:
        return [computed_once(p.bind(*vals, **params))]
    if internals.is_elementwise(p) or name == "select_n":
        shape = eqn.outvars[0].aval.shape
        return _listed(p, p.bind(*[_to_shape(v, b, shape, size) for v, b in zip(vals, batched)], **params))
    (x, *rest), (bx, *brest) = vals, batched
    if name == "broadcast_in_dim" and not any(brest):
        shape = params["shape"]
        return [lax.broadcast_in_dim(x, shape + (size,), params["broadcast_dimensions"] + (len(shape),))]
    if name == "reshape" and not any(brest) and params.get("dimensions") is None:
        return [lax.reshape(x, params["new_sizes"] + (size,))]
    if name in ("concatenate", "stack", "add_any"):
        return _listed(p, p.bind(*_all_batched(vals, batched, size), **params))
    if name == "pad" and bx and not any(brest):
        return [lax.pad(x, rest[0], tuple(params["padding_config"]) + ((0, 0, 0),))]
    if name == "slice" and bx:
        strides = params["strides"]
        return [lax.slice(x, params["start_indices"] + (0,), params["limit_indices"] + (size,),
                          None if strides is None else strides + (1,))]
    if name == "transpose" and bx:
        return [lax.transpose(x, params["permutation"] + (x.ndim - 1,))]
    if name in ("squeeze", "split", "unstack", "reduce_sum", "reduce_max", "reduce_min", "cumsum",
                "jaxmb_take_rows", "jaxmb_sum_rows", "convert_element_type", "copy") and bx:
        return _listed(p, p.bind(x, **params))
    return _by_vmap(p, params, vals, batched, size)


def _listed(p, out):
    return list(out) if p.multiple_results else [out]


def _by_vmap(p, params, vals, batched, size):
    """Any other primitive, batched by `jax.vmap` with the batch last on the way in and out."""
    fun = lambda *xs: p.bind(*xs, **params)  # noqa: E731
    out = jax.vmap(fun, in_axes=[-1 if b else None for b in batched], out_axes=-1, axis_size=size)(*vals)
    return _listed(p, out)


def _flags(jaxpr, batched):
    """Which outputs of ``jaxpr`` (a Jaxpr) `_interpret` returns batched, given which inputs are."""
    env = dict(zip(jaxpr.invars, batched))
    read = lambda v: env.get(v, False) if isinstance(v, internals.Var) else False  # noqa: E731
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        if not any(ins):
            outs = [False] * len(eqn.outvars)
        elif name in ("pjit", "jit"):
            outs = _flags(eqn.params["jaxpr"].jaxpr, ins)
        elif name in ("custom_jvp_call", "custom_vjp_call"):
            outs = _flags(eqn.params["call_jaxpr"].jaxpr, ins)
        elif name == "scan":
            outs = _scan_flags(eqn.params, ins)
        else:
            outs = [True] * len(eqn.outvars)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def _scan_counts(params):
    """``(num_consts, num_carry)`` of a scan equation: parameters of their own up to jax 0.10, the lengths of the
    first two groups of its ``ft_in`` flat tree (consts, carry, xs) from jax 0.11."""
    if "num_consts" in params:
        return params["num_consts"], params["num_carry"]
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts), len(carry)


def _scan_flags(params, ins):
    """The batched flags of the carries (the fixed point over the body) and of the outputs of a scan."""
    n_consts, n_carry = _scan_counts(params)
    body = params["jaxpr"].jaxpr
    consts, carry, xs = ins[:n_consts], list(ins[n_consts : n_consts + n_carry]), ins[n_consts + n_carry :]
    while True:
        outs = _flags(body, consts + carry + xs)
        new = [c or o for c, o in zip(carry, outs[:n_carry])]
        if new == carry:
            return carry + outs[n_carry:]
        carry = new


def _scan(vals, batched, size, params):
    jaxpr, num_consts, num_carry = params["jaxpr"], *_scan_counts(params)
    flags = _scan_flags(params, batched)
    carry_b, ys_b = flags[:num_carry], flags[num_carry:]
    consts, init, xs = vals[:num_consts], vals[num_consts : num_consts + num_carry], vals[num_consts + num_carry :]
    consts_b, xs_b = batched[:num_consts], batched[num_consts + num_carry :]
    init = [v if b0 or not b else _spread(v, size) for v, b0, b in zip(init, batched[num_consts:], carry_b)]

    def body(carry, x):
        outs, outs_b = _interpret(jaxpr, list(consts) + list(carry) + list(x),
                                  list(consts_b) + carry_b + list(xs_b), size)
        outs = [v if ob or not b else _spread(v, size) for v, ob, b in zip(outs, outs_b, carry_b + ys_b)]
        return outs[:num_carry], outs[num_carry:]

    carry, ys = lax.scan(body, init, xs, length=params["length"], reverse=params["reverse"], unroll=params["unroll"])
    return list(carry) + list(ys), flags


def _interpret(closed, vals, batched, size):
    """``(outs, outs_batched)`` of the closed jaxpr ``closed`` at ``vals``, batched ones with the batch last."""
    jaxpr = closed.jaxpr
    env = {}

    def read(v):
        return (v.val, False) if isinstance(v, internals.Literal) else env[v]

    for var, c in zip(jaxpr.constvars, closed.consts):
        env[var] = (c, False)
    for var, x, b in zip(jaxpr.invars, vals, batched):
        env[var] = (x, b)
    for eqn in jaxpr.eqns:
        ins, ins_b = zip(*map(read, eqn.invars)) if eqn.invars else ((), ())
        with internals.source_context(eqn):
            if any(ins_b):
                outs, outs_b = _rule(eqn, list(ins), list(ins_b), size)
            else:
                outs = _listed(eqn.primitive, eqn.primitive.bind(*ins, **eqn.params))
                outs_b = [False] * len(outs)
        for var, out, b in zip(eqn.outvars, outs, outs_b):
            env[var] = (out, b)
    return [read(v)[0] for v in jaxpr.outvars], [read(v)[1] for v in jaxpr.outvars]


def vmap_batch_last(closed, in_batched, axis_size, moved=False):
    """``jax.vmap`` of the closed jaxpr ``closed`` over ``axis_size`` states, computed with the batch last.

    Args:
        closed: a ClosedJaxpr of one state.
        in_batched: per argument, whether it carries the batch (as its leading axis, as under `jax.vmap`).
        axis_size: the number of states.
        moved: the batched arguments carry the batch as their last axis already, and the outputs keep it there:
            a caller that maps chunks moves the batch of each (`jaxmb.batching`).
    Returns:
        a function of the arguments returning the list of outputs, every one with the batch as its leading axis
        (its last axis when ``moved``).
    """

    closed = internals.without_dead_code(closed)

    def batched(*args):
        if not moved:
            args = [jnp.moveaxis(x, 0, -1) if b else x for x, b in zip(args, in_batched)]
        outs, outs_b = _interpret(closed, args, list(in_batched), axis_size)
        if moved:
            return [y if b else _spread(y, axis_size) for y, b in zip(outs, outs_b)]
        return [jnp.moveaxis(y, -1, 0) if b else jnp.broadcast_to(y, (axis_size,) + jnp.shape(y))
                for y, b in zip(outs, outs_b)]

    return batched
