"""`chunked_vmap`: `jax.vmap` evaluated a chunk of states at a time, for large batches on the CPU.

XLA's CPU runtime allocates each call's scratch memory afresh, with the process's ``malloc``. glibc hands a block
above its mmap threshold (at most 32 MiB) straight from the kernel and gives it back at the end of the call, so
every call touches fresh pages and takes one page fault per 4 KiB of scratch. A batch of 4096 talos states needs
68 MB of scratch for the ABA (in float32; 49 MB for the RNEA): 16 580 page faults per call, on which the kernel
spends about 30 ms of each ~100 ms call. Mapped in chunks of 1024 states, the same batch ran 1.7x (ABA) and 2.2x
(RNEA) faster in one run (benchmarks/README.md, "Scratch memory", with the spread over runs). Where the scratch
of one call stays small (a short robot, a small batch, or the GPU, whose allocator keeps its memory) chunks gain
nothing and a plain `jax.vmap` is as fast or faster.
"""

import jax
import jax.numpy as jnp


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

        def one(states):
            states = iter(states)
            return fun(*(next(states) if a == 0 else arg for arg, a in zip(args, axes)))

        return jax.lax.map(one, jax.tree.map(jnp.asarray, mapped), batch_size=chunk_size)

    return batched
