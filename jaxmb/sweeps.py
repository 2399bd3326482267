"""The two level-scheduled tree sweeps every recursion in jaxmb is written with.

* `down` (base to tips): each body gathers its parent's value. The book calls this a *scatter*, ``y = A* x``
  (Lemma 9.2): ``y(k) = A*(parent k, k) y(parent k) + x(k)``.
* `up` (tips to base): each body's contribution is scatter-added into its parent. The book calls this a
  *gather*, ``y = A x`` (Lemma 9.1): ``y(k) = sum_{children j} A(k, j) y(j) + x(k)``.

This library names the sweeps by direction (down/up) to sidestep the clash between the book's and the GPU's
meaning of scatter and gather.

The loop runs over depth levels in Python (static and short: depth, not body count, is the sequential length);
each level is one `vmap` of the per-body ``step`` over a contiguous slice of bodies. Steps are written for one
body, as the book's recursion. The world is a virtual parent row: `down` hands ``root`` to the first level, `up`
drops what the first level sends to the world.

Arguments come in two shapes: ``args`` have a leading body axis (nb, ...), ``dofs`` a leading velocity-coordinate
axis (nv, ...). A step that takes ``dofs`` sees them per body as (nv_k, ...); the level is then split into its
groups of equal nv_k (`jaxmb.topology.Group`) and the step also returns per-body coordinate outputs.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.spatial import Transform, dot, mv, phi
from jaxmb.topology import Topology


def _take(x, idx):
    """``x[idx]`` for a static index array, as a slice where ``idx`` is contiguous."""
    if len(idx) and np.array_equal(idx, np.arange(idx[0], idx[0] + len(idx))):
        return jax.tree.map(lambda a: a[idx[0] : idx[0] + len(idx)], x)
    return jax.tree.map(lambda a: a[idx], x)


def _segment_sum(x, idx, n):
    """``y[i] = sum_{idx[j] = i} x[j]`` for a static index array ``idx``, ``y`` of length ``n``."""
    if len(idx) == n and np.array_equal(idx, np.arange(n)):
        return x
    sorted_ = bool(np.all(np.diff(idx) >= 0))
    return jax.tree.map(lambda a: jax.ops.segment_sum(a, idx, n, indices_are_sorted=sorted_), x)


def _rows(x, start, stop):
    return jax.tree.map(lambda a: a[start:stop], x)


def _per_body_dofs(x, group):
    """Rows ``v_start:v_stop`` of a (nv, ...) pytree, as (bodies, nv_k, ...)."""
    n = group.stop - group.start
    return jax.tree.map(lambda a: a[group.v_start : group.v_stop].reshape((n, group.nv) + a.shape[1:]), x)


def _concat(parts):
    return jax.tree.map(lambda *a: jnp.concatenate(a, 0), *parts) if len(parts) > 1 else parts[0]


def _flatten_dofs(x):
    return jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), x)


def _level(step, lvl, carried, args, dofs):
    """Run ``step`` over one level: one vmap, or one per group of equal nv when coordinates are involved."""
    if not dofs:
        return jax.vmap(step)(carried, *_rows(args, lvl.start, lvl.stop))
    outs = []
    for g in lvl.groups:
        local = (g.start - lvl.start, g.stop - lvl.start)
        outs.append(jax.vmap(step)(_rows(carried, *local), *_rows(args, g.start, g.stop), *_per_body_dofs(dofs, g)))
    *body, dof = zip(*outs)
    return (*(_concat(list(b)) for b in body), _concat([_flatten_dofs(d) for d in dof]))


def down(topo: Topology, step, root, *args, dofs=()):
    """Base-to-tips sweep.

    Args:
        step: ``step(parent_value, *args_k) -> value_k``, or with ``dofs``
            ``step(parent_value, *args_k, *dofs_k) -> (value_k, dof_out_k)``.
        root: the world's value (a pytree for one body), handed to the first level.
        args: pytrees with leading axis nb.   dofs: pytrees with leading axis nv.
    Returns:
        values (nb, ...), and with ``dofs`` also the coordinate outputs (nv, ...).
    """
    values, dof_outs, prev = [], [], None
    for lvl in topo.levels:
        n = lvl.stop - lvl.start
        if lvl.parent is None:
            carried = jax.tree.map(lambda r: jnp.broadcast_to(r, (n,) + jnp.shape(r)), root)
        else:
            carried = _take(prev, lvl.parent)
        out = _level(step, lvl, carried, args, dofs)
        prev = out[0] if dofs else out
        values.append(prev)
        if dofs:
            dof_outs.append(out[1])
    return (_concat(values), _concat(dof_outs)) if dofs else _concat(values)


def up(topo: Topology, step, zero, *args, dofs=()):
    """Tips-to-base sweep.

    Args:
        step: ``step(children_sum, *args_k) -> (to_parent_k, out_k)``, or with ``dofs``
            ``step(children_sum, *args_k, *dofs_k) -> (to_parent_k, out_k, dof_out_k)``; ``to_parent_k`` is
            already in the parent's frame, and the parent receives the sum over its children.
        zero: the children sum of a body without children (a pytree of zeros for one body).
        args: pytrees with leading axis nb.   dofs: pytrees with leading axis nv.
    Returns:
        outs (nb, ...), and with ``dofs`` also the coordinate outputs (nv, ...).
    """
    outs, dof_outs, sent = [], [], None
    for li in reversed(range(len(topo.levels))):
        lvl = topo.levels[li]
        n = lvl.stop - lvl.start
        if sent is None:
            acc = jax.tree.map(lambda z: jnp.broadcast_to(z, (n,) + jnp.shape(z)), zero)
        else:
            acc = _segment_sum(sent, topo.levels[li + 1].parent, n)
        res = _level(step, lvl, acc, args, dofs)
        sent = res[0]
        outs.insert(0, res[1])
        if dofs:
            dof_outs.insert(0, res[2])
    return (_concat(outs), _concat(dof_outs)) if dofs else _concat(outs)


def ancestor_walk(topo: Topology, X, H, F, tau_bar=None):
    """The entries ``H(i) A(i, k) F_j`` of every coordinate column j, for the coordinates i of each ancestor-or-self
    of j's body k, walking all columns up one level per step (the off-diagonal recursion of Lemma 9.3, Alg 9.3).

    Args:
        X: joint poses (Transform, nb).   H (nv, 6): hinge map rows.
        F (nv, 6): column j as a force-like 6-vector in the coordinates of its own body k.
        tau_bar (nb, 6, 6) or None: the edge operator is ``phi(parent, m)`` (None) or, after the first step,
            ``psi(parent, m) = phi(parent, m) tau_bar(m)``; the first step always uses ``phi``.
    Returns:
        the entries, in the order indexed by ``topo.ancestor_index`` (or ``topo.mass_matrix_index`` mirrored).
    """
    values = []
    for s, w in enumerate(topo.ancestor_walk):
        if s:
            F = F[w.keep :]
            if tau_bar is not None and s > 1:
                F = mv(tau_bar[w.moved], F)
            F = phi(Transform(X.R[w.moved], X.p[w.moved]), F)  # to the next ancestor's frame
        values.append(dot(H[w.rows], F[w.cols - w.start]))  # H(i) A(i, k) F_j
    return values
