"""`full_precision`: every dot product a function traces computed in full float32 on every backend.

JAX computes a float32 dot product (``@``, `jnp.einsum`, `jnp.matmul`, the products inside `jnp.linalg.solve`) at
its *default* precision, and that default leans to speed: TensorFloat-32 (10 mantissa bits, a relative error of
about 1e-3) on NVIDIA GPUs since Ampere, bfloat16 passes on TPUs. jaxmb's sweeps multiply with their own small
products (`jaxmb.spatial.mm`, `mv`, `dot`: elementwise, never a ``dot_general``), so the AB, Newton-Euler and
composite-body algorithms are exact in float32 everywhere. The dense layers above them are not: the operational
space quantities, the mass-matrix inverse, and the closed loops' embedding, Newton solves and cluster sweeps.

Their public functions are wrapped in `full_precision`, which traces them under
``jax.default_matmul_precision("highest")``: each ``dot_general`` they bind records ``precision=HIGHEST`` in the
jaxpr, so it holds under `jit`, `vmap`, `grad` (a transposed product keeps its precision) and inside the caller's
own ``jit``. The CPU computes float32 products in full precision either way and compiles the same program.
`tests/test_precision.py` walks the jaxprs of every such function, and of their gradients.
"""

import functools

import jax


def full_precision(fun):
    """``fun`` traced with every dot product at ``jax.lax.Precision.HIGHEST`` (the module docstring)."""

    @functools.wraps(fun)
    def at_full_precision(*args, **kwargs):
        with jax.default_matmul_precision("highest"):
            return fun(*args, **kwargs)

    return at_full_precision
