"""Static row selections and row sums: the data movement of the sweeps, as a pair of primitives that are each
other's transpose.

    take_rows(x, idx):     y[j] = x[idx[j]]                 a body gathers its parent's row (`down`)
    sum_rows(x, idx, n):   y[i] = sum_{j: idx[j] = i} x[j]  a parent receives the sum over its children (`up`)
    put_rows(x, idx, v):   x with the rows idx replaced by v  (``x.at[idx].set(v)``, as one `take_rows`)
    place_rows(parts, at): y[at[j]] = concat(parts)[j]          pieces assembled in row order (one `take_rows`)

``idx`` is a static index array (numpy), known from the topology. The transpose of `take_rows` is `sum_rows` and
the transpose of `sum_rows` is `take_rows` (the adjoint of the `up` sweep is a `down` sweep, Lemmas 9.1-9.2); JAX's
own rules would transpose every gather into a scatter-add. Both primitives batch along any axis and are linear, so
their derivatives are themselves.

Lowering, per backend (benchmarks/findings.md, "Where the time goes"):

* GPU (and any backend but the CPU): `sum_rows` is a few gathers and adds, without a scatter. The children of each
  parent are listed in a padded table, one row per child rank, with a zero row for missing children; each rank is
  gathered and the ranks are added. Contiguous index ranges become slices. The scatter-adds of
  `jax.ops.segment_sum` took a large share of the GPU's ABA.
* CPU: `sum_rows` gathers the rows with the same number c of summands as one block, cut into (m, c, ...) and
  summed over c (`_sum_by_count_impl`): a block per summand count, not per rank, so nothing is padded. XLA's CPU
  backend runs a scatter as a loop over its indices, several kernels per index, one per child of every parent in
  every chunk. `take_rows` is always a gather, never a slice: a gather writes its rows first, which is the layout
  that `lax.scan` wants for its inputs.
"""

import functools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jaxmb.batching import internals


GPU_FORM_ON_CPU = False
"""Lower for the CPU backend as for the GPU (slices and gathers, no scatter): the tests check that form on a CPU."""


def _contiguous(idx):
    return len(idx) > 0 and idx[-1] - idx[0] == len(idx) - 1 and bool(np.all(np.diff(idx) == 1))


def _take(x, idx, axis, slices=True):
    idx = np.asarray(idx, dtype=np.int32)
    if slices and _contiguous(idx):
        return jax.lax.slice_in_dim(x, int(idx[0]), int(idx[0]) + len(idx), axis=axis)
    return jnp.take(x, idx, axis=axis, mode="clip", unique_indices=len(set(idx.tolist())) == len(idx),
                    indices_are_sorted=bool(np.all(np.diff(idx) >= 0)))


def children_table(idx, n):
    """The padded table (R, n) of the rows j with ``idx[j] = i`` for each i, by rank; ``len(idx)`` marks a pad."""
    idx = np.asarray(idx, dtype=int)
    counts = np.bincount(idx, minlength=n) if len(idx) else np.zeros(n, int)
    table = np.full((int(counts.max(initial=0)), n), len(idx))
    rank = np.zeros(n, int)
    for j, i in enumerate(idx):
        table[rank[i], i] = j
        rank[i] += 1
    return table


def _take_impl(x, *, idx, n, axis, slices=True):
    if len(idx) == n and np.array_equal(idx, np.arange(n)):
        return x
    return _take(x, idx, axis, slices)


def _sum_impl(x, *, idx, n, axis):
    idx = np.asarray(idx, dtype=int)
    if len(idx) == n and np.array_equal(idx, np.arange(n)):
        return x
    table = children_table(idx, n)
    shape = list(x.shape)
    if not len(table):
        shape[axis] = n
        return jnp.zeros(shape, x.dtype)
    if np.any(table == len(idx)):
        shape[axis] = 1
        x = jnp.concatenate([x, jnp.zeros(shape, x.dtype)], axis)
    return sum(_take(x, rank, axis) for rank in table)


def _sum_by_count_impl(x, *, idx, n, axis):
    """`sum_rows` without a scatter: the rows i with the same number c of summands are gathered as one block
    (m_c c, ...), cut into (m_c, c, ...) and summed over the c axis; the blocks, and zeros for the rows without
    summands, are put in row order by one more gather (none where they already are)."""
    idx = np.asarray(idx, dtype=int)
    if len(idx) == n and np.array_equal(idx, np.arange(n)):
        return x
    counts = np.bincount(idx, minlength=n) if len(idx) else np.zeros(n, int)
    order = np.argsort(idx, kind="stable")  # the summands, row by row
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    blocks, rows = [], []
    for c in np.unique(counts):
        at = np.flatnonzero(counts == c)
        shape = list(x.shape)
        if c == 0:
            shape[axis] = len(at)
            blocks.append(jnp.zeros(shape, x.dtype))
        else:
            taken = _take(x, order[(first[at][:, None] + np.arange(c)).reshape(-1)], axis)
            shape[axis : axis + 1] = [len(at), c]
            taken = taken.reshape(shape)
            blocks.append(functools.reduce(jax.lax.add, [jax.lax.index_in_dim(taken, j, axis + 1, keepdims=False)
                                                         for j in range(c)]))
        rows.append(at)
    y = jnp.concatenate(blocks, axis) if len(blocks) > 1 else blocks[0]
    return _take_impl(y, idx=tuple(np.argsort(np.concatenate(rows))), n=n, axis=axis)


def _shape(x, axis, rows):
    return x.shape[:axis] + (rows,) + x.shape[axis + 1 :]


take_p = internals.primitive(
    "jaxmb_take_rows", _take_impl, lambda x, *, idx, n, axis: jax.ShapeDtypeStruct(_shape(x, axis, len(idx)), x.dtype),
    cpu=lambda x, **params: _take_impl(x, slices=GPU_FORM_ON_CPU, **params))
sum_p = internals.primitive(
    "jaxmb_sum_rows", _sum_impl, lambda x, *, idx, n, axis: jax.ShapeDtypeStruct(_shape(x, axis, n), x.dtype),
    cpu=lambda x, **params: (_sum_impl if GPU_FORM_ON_CPU else _sum_by_count_impl)(x, **params))
internals.linear(take_p, lambda ct, *, idx, n, axis: [sum_p.bind(ct, idx=idx, n=n, axis=axis)])
internals.linear(sum_p, lambda ct, *, idx, n, axis: [take_p.bind(ct, idx=idx, n=n, axis=axis)])


def _batch(p, args, dims, *, idx, n, axis):
    (x,), (d,) = args, dims
    return p.bind(x, idx=idx, n=n, axis=axis + (d <= axis)), d


internals.batching_rule(take_p, partial(_batch, take_p))
internals.batching_rule(sum_p, partial(_batch, sum_p))


def _static(idx):
    return tuple(int(i) for i in np.asarray(idx).reshape(-1))


def take_rows(x, idx):
    """``x[idx]`` along the first axis of every leaf of the pytree ``x``, for a static index array ``idx`` (k,):
    (m, ...) -> (k, ...)."""
    idx = _static(idx)
    return jax.tree.map(lambda a: take_p.bind(jnp.asarray(a), idx=idx, n=jnp.shape(a)[0], axis=0), x)


def sum_rows(x, idx, n):
    """``y[i] = sum_{j: idx[j] = i} x[j]`` along the first axis of every leaf of the pytree ``x``, for a static
    index array ``idx`` (m,): (m, ...) -> (n, ...)."""
    idx = _static(idx)

    def one(a):
        a = jnp.asarray(a)
        if a.shape[0] != len(idx):
            raise ValueError(f"sum_rows: {a.shape[0]} rows but {len(idx)} indices")
        return sum_p.bind(a, idx=idx, n=int(n), axis=0)

    return jax.tree.map(one, x)


def put_rows(x, idx, values):
    """``x.at[idx].set(values)`` for a static index array ``idx`` (k,) of distinct rows: (n, ...) with (k, ...) ->
    (n, ...), as one `take_rows` of ``[x; values]``. A scatter with indices runs on XLA's CPU backend as a loop
    over them, a batch of states included; this is a gather, and its transpose a `sum_rows`."""
    x = jnp.asarray(x)
    values = jnp.asarray(values).astype(x.dtype)
    idx = np.asarray(_static(idx), dtype=int)
    n = x.shape[0]
    if len(set(idx.tolist())) != len(idx) or np.any((idx < 0) | (idx >= n)):
        raise ValueError(f"put_rows: the rows {idx.tolist()} must be distinct and within 0..{n - 1}")
    if values.shape != (len(idx),) + x.shape[1:]:
        raise ValueError(f"put_rows: {values.shape} values for {len(idx)} rows of {x.shape}")
    source = np.arange(n)
    source[idx] = n + np.arange(len(idx))
    if np.array_equal(np.sort(idx), np.arange(n)):  # every row replaced: a permutation of the values alone
        return take_rows(values, source - n)
    return take_rows(jnp.concatenate([x, values]), source)


def place_rows(parts, at):
    """The rows of ``parts`` (arrays (k_i, ...), concatenated) put in the rows ``at`` (a permutation of
    ``0..sum k_i - 1``) of the result: ``y[at[j]] = concatenate(parts)[j]``, by one `take_rows` where a scatter
    per part would be a loop over a batch's states on XLA's CPU backend."""
    at = np.asarray(at, dtype=int).reshape(-1)
    if not np.array_equal(np.sort(at), np.arange(len(at))):
        raise ValueError(f"place_rows: the rows {at.tolist()} are not a permutation of 0..{len(at) - 1}")
    return take_rows(jnp.concatenate(parts) if len(parts) > 1 else parts[0], np.argsort(at))
