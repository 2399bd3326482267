"""Batches on the CPU a chunk of states at a time, each chunk with the batch as the last axis of its arrays:
`in_cpu_chunks`, the batching rule of `forward_dynamics`, `inverse_dynamics`, `mass_matrix`, `mass_matrix_inverse`,
`task_space` and the analytic derivatives, for the functions and for their derivatives (`linear_in_cpu_chunks`),
and `chunked_vmap` for any function. The closed loops' forward dynamics is batched in chunks too, each chunk by
`jax.vmap` (``batch_last=False``): its dense cluster steps gain nothing from the batch-last layout.

Under `jax.vmap` a batch of 6x6 inertias is (B, 6, 6), and the unrolled small products of the sweeps read and write
rows of 3 or 6 numbers, which XLA's CPU loops do not vectorize. Held as (6, 6, B), every operand of a product is a
run of B contiguous numbers (`jaxmb.batching.batch_last`). Such vector loops run best on chunks of about `CHUNK_STATES`
states, whose arrays stay in the core's caches from one loop to the next; the batch is mapped over chunks by a
`jax.lax.map` (benchmarks/findings.md, "Batch last"). Chunks also keep each call's scratch memory small: XLA maps
scratch above glibc's mmap threshold afresh at every call and takes a page fault per 4 KiB of it.

A gradient of a chunked function is chunked as well: its tangent map is bound as `linear_p`, whose transpose and
batching rules map both the map and its transpose in chunks (`linear_in_cpu_chunks`). Other backends get
`jax.vmap`.
"""

import functools

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap
from jax.custom_derivatives import SymbolicZero

from jaxmb.batching import internals
from jaxmb.batching.batch_last import vmap_batch_last

CHUNK_STATES = 128
"""The most states in one batch-last chunk on the CPU, in float32: the size at which the ABA ran fastest on panda,
go1, talos, a 128-body chain and a 128-body binary tree, its arrays staying in the core's caches from one loop to
the next (benchmarks/findings.md, "Batch last")."""

CHUNK_STATES_FLOAT64 = 32
"""The most states in one batch-last chunk of a float64 program, whose arrays are twice as large: the talos ABA,
CRBA and Newton-Euler ran fastest so (benchmarks/findings.md, "Batch last in float64")."""

CHUNK_STATES_VMAP = 512
"""The most states in one chunk computed by `jax.vmap` (``batch_last=False``: the closed loops' forward dynamics and
its derivatives), the size at which the four-bar leg, the belt leg, the geared chain and the quadruped with rotors
ran fastest in float64; one `vmap` of the whole batch ran slower (benchmarks/findings.md, "Closed loops in chunks")."""


MOVED_ONCE_MAX = 1024
"""The most numbers per state of an output of a batch-last chunk that `_map_in_chunks` moves back to batch-first
once for the whole batch, after the loop over chunks, as it moves the inputs; larger ones are moved chunk by chunk,
while the chunk is in the cache. Moved once, the residuals that a gradient's forward sweep hands to its backward
sweep (both in chunks) are not moved at all: XLA cancels the move out with the move back in. The dynamics and
their gradients ran faster so, but the mass matrix and its inverse (thousands of numbers per state) slower, hence
the bound (benchmarks/findings.md, "512-bit vectors, and outputs moved once")."""


def _with_states(args, batched, states):
    """``args`` with each entry flagged in ``batched`` replaced, in order, by the next of ``states``."""
    states = iter(states)
    return [next(states) if b else x for x, b in zip(args, batched)]


def batch_axes(in_axes, args, caller):
    """``in_axes`` as a tuple, 0 or None for each of ``args``; a ``ValueError`` naming ``caller`` where it is not one,
    or where no argument is batched."""
    axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    if len(axes) != len(args) or any(a not in (0, None) for a in axes):
        raise ValueError(f"{caller}: in_axes must be 0, None or one of them per argument ({len(args)} arguments), "
                         f"got {in_axes!r}")
    if all(a is None for a in axes):
        raise ValueError(f"{caller}: no argument is batched (in_axes has no 0)")
    return axes


def padded_with_last(x, pad):
    """``x`` (a pytree of arrays, batch leading) with ``pad`` copies of its last state appended."""
    return jax.tree.map(lambda leaf: jnp.concatenate([leaf, jnp.repeat(leaf[-1:], pad, 0)]), x)


def chunked_vmap(fun, in_axes=0, chunk_size=1024):
    """``jax.vmap(fun, in_axes)``, computed ``chunk_size`` states at a time: a `jax.lax.map` over chunks, each chunk
    one `vmap` (the last one shorter when ``chunk_size`` does not divide the batch).

    Args:
        fun: a function of one state (any pytrees in, any pytree out).
        in_axes: 0 or None for every positional argument, or a tuple of them, one per argument: the batch axis of
            each argument (None: shared by all states, as the model usually is). Batched arguments carry the batch
            as their leading axis.
        chunk_size: the number of states per chunk.
    Returns:
        the batched function; its outputs have the batch as their leading axis, as with `jax.vmap`.

    `forward_dynamics` and `inverse_dynamics` need no ``chunked_vmap``: their own batching rule
    (`vmap_in_cpu_chunks`) picks chunks under ``jax.vmap``.
    """
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunked_vmap: chunk_size must be a positive integer, not {chunk_size!r}")

    def batched(*args):
        axes = batch_axes(in_axes, args, "chunked_vmap")
        mapped = tuple(arg for arg, a in zip(args, axes) if a == 0)
        one = lambda states: fun(*_with_states(args, [a == 0 for a in axes], states))  # noqa: E731
        return jax.lax.map(one, jax.tree.map(jnp.asarray, mapped), batch_size=chunk_size)

    return batched


def live_tangents(primals, tangents):
    """``(live, dots)``: the indices of the flattened ``primals`` whose tangents are not symbolic zeros, and those
    tangents. Derivatives taken in them alone spend no work on zero derivatives."""
    flat_dot = jax.tree.leaves(tangents, is_leaf=lambda t: isinstance(t, SymbolicZero))
    live = [i for i, t in enumerate(flat_dot) if not isinstance(t, SymbolicZero)]
    return live, [flat_dot[i] for i in live]


def of_live(fun, primals, live):
    """``(fun_of_live, live_primals)``: ``fun`` as a function of the leaves ``live`` of its flattened arguments
    ``primals`` (the others held at their values), and those leaves."""
    flat, tree = jax.tree.flatten(primals)

    def fun_of_live(*xs):
        leaves = list(flat)
        for i, x in zip(live, xs):
            leaves[i] = x
        return fun(*jax.tree.unflatten(tree, leaves))

    return fun_of_live, [flat[i] for i in live]


def _chunks(axis_size, most=None):
    """``(k, chunk)``: the fewest equal chunks of a batch of ``axis_size`` states with at most ``most`` each
    (default `CHUNK_STATES`)."""
    k = -(-axis_size // (most or CHUNK_STATES))
    return k, -(-axis_size // k)


def _most_states(closed):
    """`CHUNK_STATES_FLOAT64` for a program with a float64 output, else `CHUNK_STATES`."""
    return CHUNK_STATES_FLOAT64 if any(a.dtype == jnp.float64 for a in closed.out_avals) else CHUNK_STATES


def _map_in_chunks(closed, axis_size, in_batched, leaves, batch_last=True):
    """The closed jaxpr ``closed`` of one state over a batch of ``axis_size`` states, the leaves flagged in
    ``in_batched`` carrying it as their leading axis. On the CPU the batch is padded to equal chunks (`_chunks`) by
    repeating its last state, mapped by `jax.lax.map`, each chunk computed with the batch last
    (`jaxmb.batching.batch_last.vmap_batch_last`, chunks of at most `CHUNK_STATES` states, `CHUNK_STATES_FLOAT64` in
    float64) or, without ``batch_last``, by `jax.vmap` (chunks of `CHUNK_STATES_VMAP`), and cut back; other backends,
    and an empty batch, get one `jax.vmap`. Every output is batched."""
    call = internals.jaxpr_as_fun(closed)
    axes = [0 if b else None for b in in_batched]
    if jax.default_backend() != "cpu" or axis_size == 0:
        return jax.vmap(call, in_axes=axes, axis_size=axis_size)(*leaves)
    k, chunk = _chunks(axis_size, _most_states(closed) if batch_last else CHUNK_STATES_VMAP)
    if batch_last:
        one = vmap_batch_last(closed, in_batched, chunk, moved=k > 1)
    else:
        one = jax.vmap(call, in_axes=axes, axis_size=chunk)
    if k == 1:
        return one(*leaves)
    pad = k * chunk - axis_size  # copies of the last state, cut off below
    mapped = [x for x, b in zip(leaves, in_batched) if b]
    mapped = [padded_with_last(x, pad) if pad else x for x in mapped]
    mapped = [x.reshape((k, chunk) + x.shape[1:]) for x in mapped]
    if batch_last:
        mapped = [jnp.moveaxis(x, 1, -1) for x in mapped]  # once for the whole batch, not per chunk
    in_loop = [batch_last and a.size > MOVED_ONCE_MAX for a in closed.out_avals]  # else once for the whole batch

    def chunk_of_outputs(states):
        ys = one(*_with_states(leaves, in_batched, states))
        return [jnp.moveaxis(y, -1, 0) if i else y for y, i in zip(ys, in_loop)]

    ys = jax.lax.map(chunk_of_outputs, mapped)
    ys = [jnp.moveaxis(y, -1, 1) if batch_last and not i else y for y, i in zip(ys, in_loop)]
    return [y.reshape((k * chunk,) + y.shape[2:])[:axis_size] for y in ys]


def vmap_in_cpu_chunks(fun, batch_last=True, batched=None):
    """``fun`` (of one state) with a `jax.custom_batching.custom_vmap` rule: `_map_in_chunks`, so on the CPU a batch
    is computed a chunk of states at a time, with the batch last, and other backends get plain `jax.vmap`, unless
    ``batched`` gives the batch.

    ``fun`` is traced once per call, to a jaxpr that both the unbatched call and the rule evaluate. A
    ``custom_vmap`` function has no reverse mode: use this inside a `jax.custom_jvp` (`in_cpu_chunks`).

    Args:
        fun: a function of one state; its arguments are pytrees of arrays.
        batch_last: compute each chunk with the batch last (`jaxmb.batching.batch_last`), else by `jax.vmap`: for functions
            of dense matrices and solves, which the batch-last interpreter does not make faster (the closed loops).
        batched: ``batched(axis_size, flags, *args)``, ``fun``'s own batched form, tried first: ``flags`` has the
            structure of ``args`` with True on each batched leaf, the batched leaves carry the batch as their
            leading axis; it returns the batched output, or None where it does not apply (the fused forward
            dynamics on a GPU, `jaxmb.dynamics.fused`).
    """

    def batched_in_chunks(*args):
        leaves, tree = jax.tree.flatten(args)
        closed, out_shape = jax.make_jaxpr(lambda *xs: fun(*jax.tree.unflatten(tree, xs)), return_shape=True)(*leaves)
        call = internals.jaxpr_as_fun(closed)
        chunked = custom_vmap(call)

        @chunked.def_vmap
        def rule(axis_size, in_batched, *leaves):
            if not any(in_batched):  # the JVP of a batched call whose primals are not batched
                return call(*leaves), [False] * len(closed.out_avals)
            y = None if batched is None else batched(
                axis_size, jax.tree.unflatten(tree, in_batched), *jax.tree.unflatten(tree, leaves))
            if y is not None:
                y = jax.tree.leaves(y)
                return y, [True] * len(y)
            y = _map_in_chunks(closed, axis_size, in_batched, leaves, batch_last)
            return y, [True] * len(y)

        return jax.tree.unflatten(jax.tree.structure(out_shape), chunked(*leaves))

    return functools.wraps(fun)(batched_in_chunks)


def in_cpu_chunks(fun, vjp=None, batch_last=True):
    """`vmap_in_cpu_chunks` of ``fun``, differentiable: a `jax.custom_jvp` whose tangent is the JVP of ``fun``
    itself, over the arguments whose tangents are not symbolic zeros, bound as a `linear_in_cpu_chunks` map whose
    transpose is the VJP of ``fun``. So derivatives, in any mode and order, are exactly those of ``fun``, and
    `jax.vmap` batches them in chunks too, with the batch last.

    Args:
        vjp: ``vjp(primals, live, ct) -> [cotangent, ...]``, the cotangents of the leaves ``live`` of the flattened
            ``primals`` (the arguments of ``fun``) for the output cotangent ``ct``, in place of `jax.vjp` of ``fun``
            (a hand-written adjoint, itself differentiable).
        batch_last: as for `vmap_in_cpu_chunks`, for the function and its derivatives.
    """
    chunked = vmap_in_cpu_chunks(fun, batch_last)
    f = jax.custom_jvp(chunked)

    def f_jvp(primals, tangents):
        y = chunked(*primals)
        live, dots = live_tangents(primals, tangents)
        if not live:
            return y, jax.tree.map(jnp.zeros_like, y)

        def jvp(res, lin):
            fun_of_live, at = of_live(fun, res, live)
            return jax.jvp(fun_of_live, at, lin)[1]

        def transpose(res, ct):
            if vjp is not None:
                return list(vjp(res, live, ct))
            fun_of_live, at = of_live(fun, res, live)
            return list(jax.vjp(fun_of_live, *at)[1](ct))

        return y, linear_in_cpu_chunks(jvp, transpose, primals, dots, batch_last)

    f.defjvp(f_jvp, symbolic_zeros=True)
    return f


# -- linear maps batched in chunks, with their transposes: the derivatives of the chunked functions --

def _linear_impl(*args, jaxpr, **_):
    return internals.jaxpr_as_fun(jaxpr)(*args)


linear_p = internals.primitive("jaxmb_linear_in_cpu_chunks", _linear_impl, lambda *_, jaxpr, **__: jaxpr.out_avals,
                               multiple_results=True)
"""``linear_p.bind(*res, *lin, jaxpr, transpose, n_res, batch_last)``: the closed ``jaxpr`` of one call, linear in
its arguments after the first ``n_res`` (the residuals). ``transpose()`` gives the closed jaxpr of its transpose, a
function of ``(*res, *cotangents)``; ``batch_last`` is `_map_in_chunks`'s, for its batching rule."""


def linear_in_cpu_chunks(fun, fun_t, res, lin, batch_last=True):
    """``fun(res, lin)``, linear in ``lin``, transposed by ``fun_t(res, ct)``, and batched in chunks on the CPU the
    way `vmap_in_cpu_chunks` batches a function, as are its transpose and their own derivatives.

    Reverse mode transposes a function's derivative, and the transpose is batched op by op, where no `custom_vmap`
    rule reaches it. So `in_cpu_chunks` binds its tangent map as this primitive (`linear_p`), whose transpose is
    ``fun_t`` and whose batching rule maps both in chunks: `jax.vmap` of a gradient computes the gradient's sweeps
    a chunk at a time as well.

    Args:
        fun: ``fun(res, lin) -> pytree``, linear in ``lin``.
        fun_t: ``fun_t(res, ct) -> pytree like lin``, the transpose of ``fun`` in ``lin``.
        res, lin: pytrees of arrays. Neither function may close over traced values: pass them in ``res``.
        batch_last: as for `vmap_in_cpu_chunks`.
    """
    res_leaves, res_tree = jax.tree.flatten(res)
    lin_leaves, lin_tree = jax.tree.flatten(lin)
    n_res, out_tree = len(res_leaves), []
    res_avals, lin_avals = _avals(res_leaves), _avals(lin_leaves)

    def flat_fun(*xs):
        out = fun(jax.tree.unflatten(res_tree, xs[:n_res]), jax.tree.unflatten(lin_tree, xs[n_res:]))
        out_tree.append(jax.tree.structure(out))
        return jax.tree.leaves(out)

    jaxpr = jax.make_jaxpr(flat_fun)(*res_avals, *lin_avals)

    @functools.cache
    def transpose():
        def flat_fun_t(*xs):
            ct = fun_t(jax.tree.unflatten(res_tree, xs[:n_res]), jax.tree.unflatten(out_tree[0], xs[n_res:]))
            if jax.tree.structure(ct) != lin_tree:
                raise TypeError(f"linear_in_cpu_chunks: the transpose returned {jax.tree.structure(ct)}, not the "
                                f"structure of the linear arguments, {lin_tree}")
            return jax.tree.leaves(ct)

        return jax.make_jaxpr(flat_fun_t)(*res_avals, *_avals(jaxpr.out_avals))

    out = linear_p.bind(*res_leaves, *lin_leaves, jaxpr=jaxpr, transpose=transpose, n_res=n_res,
                        batch_last=batch_last)
    return jax.tree.unflatten(out_tree[0], out)


def _avals(xs):
    """The shapes and dtypes of ``xs``, to trace with: the values themselves may be tracers of other
    transformations."""
    return [jax.ShapeDtypeStruct(jnp.shape(x), x.dtype) for x in xs]


def _linear_jvp(primals, tangents, *, jaxpr, transpose, n_res, batch_last):
    """Linear in ``lin``: ``d fun = fun(res, d lin) + (d fun / d res) d res``, the second term (of second and
    higher derivatives) by plain autodiff of the jaxpr."""
    params = dict(jaxpr=jaxpr, transpose=transpose, n_res=n_res, batch_last=batch_last)
    y = linear_p.bind(*primals, **params)
    res, lin = primals[:n_res], primals[n_res:]
    res_dot, lin_dot = tangents[:n_res], tangents[n_res:]
    if all(type(t) is internals.Zero for t in lin_dot):
        dy = [jnp.zeros(a.shape, a.dtype) for a in jaxpr.out_avals]
    else:
        dy = linear_p.bind(*res, *map(internals.instantiate_zeros, lin_dot), **params)
    live = [i for i, t in enumerate(res_dot) if type(t) is not internals.Zero]
    if live:
        call = internals.jaxpr_as_fun(jaxpr)
        _, dy_res = jax.jvp(*of_live(lambda *res: call(*res, *lin), tuple(res), live), [res_dot[i] for i in live])
        dy = [a + b for a, b in zip(dy, dy_res)]
    return y, dy


def _linear_transpose(cts, *args, jaxpr, transpose, n_res, batch_last):
    res, lin = args[:n_res], args[n_res:]
    if any(internals.is_undefined_primal(x) for x in res):
        raise ValueError("linear_in_cpu_chunks: transposed in a residual argument, in which it is not linear")
    cts = [internals.instantiate_zeros(ct) if type(ct) is internals.Zero else ct for ct in cts]
    lin_cts = linear_p.bind(*res, *cts, jaxpr=transpose(), transpose=lambda: jaxpr, n_res=n_res,
                            batch_last=batch_last)
    return [None] * n_res + [ct if internals.is_undefined_primal(x) else None for x, ct in zip(lin, lin_cts)]


def _linear_batch(args, dims, *, jaxpr, transpose, n_res, batch_last):
    """Both the map and its transpose batched by `_map_in_chunks`; the transpose sums the cotangents of the
    linear arguments that are not batched."""
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    args = [x if d is None else jnp.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    in_batched = [d is not None for d in dims]
    batched_aval = lambda a: jax.ShapeDtypeStruct((size, *a.shape), a.dtype)  # noqa: E731
    batched_jaxpr = jax.make_jaxpr(lambda *xs: _map_in_chunks(jaxpr, size, in_batched, xs, batch_last))(
        *_avals(args))

    @functools.cache
    def batched_transpose():
        res_batched, lin_batched = in_batched[:n_res], in_batched[n_res:]

        def transposed(*xs):
            cts = _map_in_chunks(transpose(), size, res_batched + [True] * len(jaxpr.out_avals), xs, batch_last)
            return [ct if b else ct.sum(0) for ct, b in zip(cts, lin_batched)]

        return jax.make_jaxpr(transposed)(*_avals(args[:n_res]), *map(batched_aval, jaxpr.out_avals))

    out = linear_p.bind(*args, jaxpr=batched_jaxpr, transpose=batched_transpose, n_res=n_res,
                        batch_last=batch_last)
    return out, [0] * len(out)


internals.jvp_rule(linear_p, _linear_jvp)
internals.transpose_rule(linear_p, _linear_transpose)
internals.batching_rule(linear_p, _linear_batch)
