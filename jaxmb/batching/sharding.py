"""A batch spread over all the machine's devices: `sharded_vmap` computes one shard of the states on each device,
concurrently, each shard one `jax.vmap`; `split_batch` places a batch on the devices as it splits it;
`use_cpu_cores` gives JAX one CPU device per core, so that on the CPU the devices are the cores.

A program XLA compiles for the CPU does most of its work on one core, whatever the cores the process may use
(benchmarks/findings.md, "All cores"). Pinocchio's ``abaInParallel`` splits its batch over threads instead, one block
of states each. `sharded_vmap` does the same with JAX's own means: `jax.shard_map` over a mesh of the devices, one
program per device on its own states, no communication between them. On a machine with several GPUs the devices
are the GPUs; with one device it is `jax.vmap`.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxmb.batching.chunks import batch_axes, padded_with_last

AXIS = "states"
"""The name of the device mesh's one axis, along which the batch is split."""


def use_cpu_cores(cores=None):
    """Give JAX one CPU device per core, so that `sharded_vmap` spreads a batch over the cores.

    Call it right after ``import jax``, before JAX's first operation: JAX fixes its devices then, and raises a
    ``RuntimeError`` that says so when it is called later. ``jax.devices()`` lists the cores' devices afterwards;
    arrays are still made on the first of them, and a plain ``jit`` still runs there.

    Args:
        cores: the number of CPU devices (default: the cores this process may run on).
    """
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    jax.config.update("jax_num_cpu_devices", int(cores))


def _mesh(devices):
    return Mesh(np.array(list(devices or jax.devices())), (AXIS,))


def split_batch(tree, devices=None):
    """The arrays of ``tree`` (each with the batch as its leading axis) placed on ``devices`` (default: all devices of
    JAX's default backend), split along the batch as `sharded_vmap` splits it.

    A `sharded_vmap` function called on arrays held by one device first moves them, at every call; its outputs
    come back split, ready for the next call of a rollout, which then moves nothing. The batch must divide evenly over the devices.
    """
    mesh = _mesh(devices)
    n = mesh.devices.size
    uneven = sorted(size for size in _leading_sizes(tree, "split_batch") if size % n)
    if uneven:
        raise ValueError(f"split_batch: a batch of {uneven[0]} states does not divide evenly over {n} devices")
    return jax.device_put(tree, NamedSharding(mesh, PartitionSpec(AXIS)))


def _leading_sizes(tree, caller):
    """The lengths of the leading axes of the arrays of ``tree``; a ``ValueError`` for an array without one."""
    shapes = [jnp.shape(leaf) for leaf in jax.tree.leaves(tree)]
    if any(len(shape) == 0 for shape in shapes):
        raise ValueError(f"{caller}: a batched argument holds a scalar, which has no batch axis to split")
    return {shape[0] for shape in shapes}


def _batch_size(args, axes):
    sizes = set().union(*(_leading_sizes(x, "sharded_vmap") for x, a in zip(args, axes) if a == 0))
    if len(sizes) != 1:
        raise ValueError(f"sharded_vmap: the batched arguments have different batch sizes {sorted(sizes)}"
                         if sizes else "sharded_vmap: the batched arguments hold no arrays")
    return sizes.pop()


def sharded_vmap(fun, in_axes=0, devices=None):
    """``jax.vmap(fun, in_axes)`` with the batch split evenly over ``devices``, each device computing its shard of
    states with `jax.vmap` of ``fun`` (so jaxmb's batching rules, chunks on the CPU, apply within each shard).

    The batch is padded to a multiple of the number of devices by repeating its last state; the outputs are cut
    back. The shards share nothing, so the map does not track which values vary over the devices
    (``check_vma=False``): jaxmb's batching rules make constants that that check would reject. Derivatives are those
    of `jax.vmap`, including with respect to arguments shared by all states (``in_axes`` None).

    Args:
        fun: a function of one state (pytrees of arrays in, a pytree of arrays out).
        in_axes: 0 or None for every positional argument, or a tuple of them, one per argument: 0 for an argument
            batched along its leading axis, None for one shared by all states.
        devices: the devices to split the batch over (default: all devices of JAX's default backend; on the CPU,
            one per core after `use_cpu_cores`).
    Returns:
        the batched function; its outputs have the batch as their leading axis, as with `jax.vmap`.
    """

    def batched(*args):
        axes = batch_axes(in_axes, args, "sharded_vmap")
        mapped = jax.vmap(fun, in_axes=axes)
        size = _batch_size(args, axes)
        mesh = _mesh(devices)
        if mesh.devices.size == 1 or size == 0:
            return mapped(*args)
        pad = -size % mesh.devices.size
        args = [padded_with_last(x, pad) if a == 0 and pad else x for x, a in zip(args, axes)]
        specs = tuple(PartitionSpec(AXIS) if a == 0 else PartitionSpec() for a in axes)
        ys = jax.shard_map(mapped, mesh=mesh, in_specs=specs, out_specs=PartitionSpec(AXIS), check_vma=False)(*args)
        return jax.tree.map(lambda y: y[:size], ys)

    return batched
