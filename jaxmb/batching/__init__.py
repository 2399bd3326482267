"""How jaxmb's functions are batched, compiled and sharded: the one package that holds the performance machinery,
so that the algorithm files read as the book's recursions with one line saying how each is batched.

Every public function of jaxmb takes one state. What the transformations a user applies to it then run:

``jax.jit``
    One XLA program. `jit` is ``jax.jit`` with `compile.CPU_COMPILER_OPTIONS` (XLA's older CPU loop emitter and
    512-bit vector loops), the options under which the sweeps compile and run fastest on the CPU; other backends
    ignore them. They are jaxmb's programs' alone: plain ``jax.jit`` compiles with XLA's defaults, unless
    ``JAXMB_XLA_FLAGS=1`` in the environment sets them as the process's XLA flags (`compile.use_cpu_options`).
    Called outside any transformation (a notebook), a public function compiles itself once per argument shapes and
    reuses the program (`eager_jit`), instead of running op by op.
``jax.vmap``
    On the CPU, `forward_dynamics`, `inverse_dynamics`, the mass matrix, its inverse and factors, `task_space`, the
    analytic derivatives and the closed loops' dynamics batch by their own rule (`chunks.in_cpu_chunks`): the batch
    is cut in chunks mapped by ``lax.map``, and each chunk is computed with the batch as the *last* axis of every
    array (`batch_last`), so that every small product is a vector loop over states. Every other function batches
    by JAX's own rules; `chunked_vmap` maps any function a chunk at a time.
    On a GPU, a batch of `forward_dynamics` of a model whose joints below its roots are screw joints runs as fused
    Pallas kernels (`jaxmb.dynamics.fused`); every other function is plain ``jax.vmap``.
    The tree sweeps move rows with two primitives that are each other's transpose (`rows.take_rows`,
    `rows.sum_rows`), lowered without scatters on every backend.
``jax.grad`` / ``jax.jvp``
    Derivatives of a chunked function are chunked too: its tangent map is one primitive whose transpose and
    batching rule map both in chunks (`chunks.linear_in_cpu_chunks`). Forward dynamics differentiates by the
    implicit function theorem on Newton-Euler, never through its three sweeps.
Several devices
    `sharded_vmap` splits a batch over all devices (`jax.shard_map`); on the CPU, after `use_cpu_cores`, one device
    per core, as Pinocchio's ``abaInParallel`` splits a batch over threads.
Precision
    Dense layers (operational space, the mass-matrix inverse, the closed loops) are traced at full float32 precision
    (`full_precision`), so no GPU computes them in TensorFloat-32.

Every use of JAX internals sits in `internals`. Modules: `chunks` (the CPU batching rule), `batch_last` (the
batch-last interpreter), `rows` (row gathers and sums), `compile` (`jit`, `eager_jit`, compiler options),
`precision`, `sharding`, `internals`.
"""

from jaxmb.batching.chunks import (
    chunked_vmap,
    in_cpu_chunks,
    linear_in_cpu_chunks,
    live_tangents,
    of_live,
    vmap_in_cpu_chunks,
)
from jaxmb.batching.compile import computed_once, eager_jit, jit
from jaxmb.batching.precision import full_precision
from jaxmb.batching.rows import place_rows, put_rows, sum_rows, take_rows
from jaxmb.batching.sharding import sharded_vmap, split_batch, use_cpu_cores

__all__ = [
    "chunked_vmap", "computed_once", "eager_jit", "full_precision", "in_cpu_chunks", "jit", "linear_in_cpu_chunks",
    "live_tangents", "of_live", "place_rows", "put_rows", "sharded_vmap", "split_batch", "sum_rows", "take_rows",
    "use_cpu_cores", "vmap_in_cpu_chunks",
]
