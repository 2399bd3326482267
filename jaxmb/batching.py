"""Batches on the CPU a chunk of states at a time: `chunked_vmap` for any function, and `in_cpu_chunks`, the
batching rule of `forward_dynamics` and `inverse_dynamics`, which picks chunks by itself.

XLA's CPU runtime allocates each call's scratch memory afresh, with the process's ``malloc``. glibc hands a block
above its mmap threshold (at most 32 MiB) straight from the kernel and gives it back at the end of the call, so
every call touches fresh pages and takes one page fault per 4 KiB of scratch. A batch of 4096 talos states needs
81 MB of scratch for the ABA in float32: about 19 800 page faults per call, on which the kernel spends about a
third of the call. Mapped in chunks of 1024 states, the same batch runs about 1.5x faster (12 against 17-20
us/state; benchmarks/README.md, "Scratch memory"). Where the scratch of one call stays under the threshold (a
short robot, a small batch, or the GPU, whose allocator keeps its memory) chunks gain nothing and a plain
`jax.vmap` is as fast or faster.

Scratch grows linearly with the batch (to the byte, on panda, go1 and talos), so an algorithm states its scratch
per state from the model's shapes, and `in_cpu_chunks` gives its `jax.vmap` the fewest equal chunks that stay under
the threshold.
"""

import functools
import math

import jax
import jax.extend
import jax.numpy as jnp
from jax.custom_batching import custom_vmap
from jax.custom_derivatives import SymbolicZero

MMAP_THRESHOLD = 32 * 2**20
"""glibc's largest mmap threshold (bytes): scratch above it is mapped afresh by every call."""

CHUNK_SCRATCH = 24 * 2**20
"""The scratch (bytes) one chunk of `vmap_in_cpu_chunks` is sized for, a margin under `MMAP_THRESHOLD`."""


def _with_states(args, batched, states):
    """``args`` with each entry flagged in ``batched`` replaced, in order, by the next of ``states``."""
    states = iter(states)
    return [next(states) if b else x for x, b in zip(args, batched)]


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
        axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        if len(axes) != len(args) or any(a not in (0, None) for a in axes):
            raise ValueError(f"chunked_vmap: in_axes {in_axes!r} must be 0, None, or one of them per argument "
                             f"({len(args)} arguments)")
        if all(a is None for a in axes):
            raise ValueError("chunked_vmap: at least one argument must be batched (in_axes 0)")
        mapped = tuple(arg for arg, a in zip(args, axes) if a == 0)
        one = lambda states: fun(*_with_states(args, [a == 0 for a in axes], states))  # noqa: E731
        return jax.lax.map(one, jax.tree.map(jnp.asarray, mapped), batch_size=chunk_size)

    return batched


def jvp_of_nonzero(fun, primals, tangents):
    """``jax.jvp(fun, primals, tangents)`` over the leaves whose tangent is not a symbolic zero: ``(y, dy)``, with
    ``dy`` None if all are. Leaves without a tangent stay constants, so no work is spent on their zero
    derivatives."""
    flat, tree = jax.tree.flatten(primals)
    flat_dot = jax.tree.leaves(tangents, is_leaf=lambda t: isinstance(t, SymbolicZero))
    live = [i for i, t in enumerate(flat_dot) if not isinstance(t, SymbolicZero)]
    if not live:
        return fun(*primals), None

    def of_live(*xs):
        leaves = list(flat)
        for i, x in zip(live, xs):
            leaves[i] = x
        return fun(*jax.tree.unflatten(tree, leaves))

    return jax.jvp(of_live, tuple(flat[i] for i in live), tuple(flat_dot[i] for i in live))


def _chunks(axis_size, per_state):
    """``(k, chunk)``: the fewest equal chunks of a batch whose scratch (bytes) would exceed `MMAP_THRESHOLD`, so
    that each stays under `CHUNK_SCRATCH`; ``(1, axis_size)`` where the batch needs no chunks."""
    if axis_size * per_state <= MMAP_THRESHOLD:
        return 1, axis_size
    k = min(axis_size, math.ceil(axis_size * per_state / CHUNK_SCRATCH))
    return k, -(-axis_size // k)


def vmap_in_cpu_chunks(fun, scratch_per_state):
    """``fun`` (of one state) with a `jax.custom_batching.custom_vmap` rule: on the CPU, a batch whose scratch
    would exceed `MMAP_THRESHOLD` is padded to equal chunks (`_chunks`) by repeating its last state, mapped by
    `jax.lax.map`, each chunk one `jax.vmap`, and cut back; other backends and smaller batches get plain `jax.vmap`.

    ``fun`` is traced once per call, to a jaxpr that both the unbatched call and the rule evaluate. A
    ``custom_vmap`` function has no reverse mode: use this inside a `jax.custom_jvp` (`in_cpu_chunks`).

    Args:
        fun: a function of one state; its arguments are pytrees of arrays.
        scratch_per_state: ``scratch_per_state(*args) -> int``, the bytes of XLA scratch one state of a batched
            call needs, from the shapes of the unbatched arguments.
    """

    def batched_in_chunks(*args):
        leaves, tree = jax.tree.flatten(args)
        closed, out_shape = jax.make_jaxpr(lambda *xs: fun(*jax.tree.unflatten(tree, xs)), return_shape=True)(*leaves)
        call = jax.extend.core.jaxpr_as_fun(closed)
        per_state = scratch_per_state(*args)
        chunked = custom_vmap(call)

        @chunked.def_vmap
        def rule(axis_size, in_batched, *leaves):
            k, chunk = _chunks(axis_size, per_state)
            if k == 1 or jax.default_backend() != "cpu":
                y = jax.vmap(call, in_axes=[0 if b else None for b in in_batched])(*leaves)
            else:
                pad = k * chunk - axis_size  # copies of the last state, cut off below
                mapped = [x for x, b in zip(leaves, in_batched) if b]
                mapped = [jnp.concatenate([x, jnp.repeat(x[-1:], pad, 0)]) if pad else x for x in mapped]
                ys = jax.lax.map(lambda states: call(*_with_states(leaves, in_batched, states)), mapped,
                                 batch_size=chunk)
                y = [y[:axis_size] for y in ys]
            return y, [True] * len(y)

        return jax.tree.unflatten(jax.tree.structure(out_shape), chunked(*leaves))

    return functools.wraps(fun)(batched_in_chunks)


def in_cpu_chunks(fun, scratch_per_state):
    """`vmap_in_cpu_chunks` of ``fun``, differentiable: a `jax.custom_jvp` whose rule is the JVP of ``fun`` itself
    (over the arguments whose tangents are not symbolic zeros), so that derivatives, in any mode and order, are
    exactly those of ``fun``, batched by plain `jax.vmap`."""
    f = jax.custom_jvp(vmap_in_cpu_chunks(fun, scratch_per_state))

    def f_jvp(primals, tangents):
        y, dy = jvp_of_nonzero(fun, primals, tangents)
        return y, jax.tree.map(jnp.zeros_like, y) if dy is None else dy

    f.defjvp(f_jvp, symbolic_zeros=True)
    return f
