"""The two level-scheduled tree sweeps every recursion in jaxmb is written with.

* `down` (base to tips): each body gathers its parent's value. The book calls this a *scatter*, ``y = A* x``
  (Lemma 9.2): ``y(k) = A*(parent k, k) y(parent k) + x(k)``.
* `up` (tips to base): each body's contribution is scatter-added into its parent. The book calls this a
  *gather*, ``y = A x`` (Lemma 9.1): ``y(k) = sum_{children j} A(k, j) y(j) + x(k)``.

This library names the sweeps by direction (down/up) to sidestep the clash between the book's and the GPU's
meaning of scatter and gather.

The loop runs over depth levels in Python (static and short: depth, not body count, is the sequential length);
each level is one `vmap` of the per-body ``step`` over a contiguous range of bodies. Steps are written for one
body, as the book's recursion. The world is a virtual parent row: `down` hands ``root`` to the first level, `up`
drops what the first level sends to the world. A sweep cuts its inputs into the levels' ranges with one
`lax.split`, whose transpose is one concatenate: with a slice per level, a gradient would pad each level's
cotangent to all nb rows and add the pads.

Runs of levels in which every body has at most one child (the limbs of a robot, a long chain) are *chain
segments* (`jaxmb.topology.Segment`): one `lax.scan` over their levels, each chain in a fixed slot, so the
step is traced and compiled once per run instead of once per level: a chain's compile time does not grow with its
length, at the same throughput (benchmarks/findings.md, "Chain segments").

Arguments come in two shapes: ``args`` have a leading body axis (nb, ...), ``dofs`` a leading velocity-coordinate
axis (nv, ...). A step that takes ``dofs`` sees them per body as (nv_k, ...); the level is then split into its
groups of equal nv_k (`jaxmb.topology.Group`) and the step also gives per-body coordinate outputs.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import sum_rows, take_rows
from jaxmb.spatial import dot, phi
from jaxmb.topology import Topology


def _split_rows(x, bounds):
    """The pytree ``x`` (n, ...) cut into the row ranges ``bounds`` [(start, stop), ...] that tile ``0:n``, by one
    `lax.split` per leaf. Its transpose is one concatenate; a slice's transpose would be a pad to all n rows, and a
    gradient would add one such full-size pad per level."""
    sizes = [stop - start for start, stop in bounds]
    if len(sizes) == 1:
        return [x]
    leaves, tree = jax.tree.flatten(x)
    cut = [jax.lax.split(a, sizes) for a in leaves]
    return [jax.tree.unflatten(tree, [c[i] for c in cut]) for i in range(len(sizes))]


def _pieces(topo, args, dofs):
    """Per segment, the rows its steps read: ``[(args_rows, dofs_rows), ...]``, one pair per group of a one-level
    segment (one for the whole level when there are no ``dofs``) and one for a chain segment's whole range."""
    parts = []
    for seg in topo.segments:
        first, last = topo.levels[seg.first], topo.levels[seg.last - 1]
        if seg.last - seg.first == 1 and dofs:
            parts.append([((g.start, g.stop), (g.v_start, g.v_stop)) for g in first.groups])
        else:
            parts.append([((first.start, last.stop), (first.groups[0].v_start, last.groups[-1].v_stop))])
    flat = [p for seg_parts in parts for p in seg_parts]
    a = _split_rows(args, [p[0] for p in flat])
    d = _split_rows(dofs, [p[1] for p in flat]) if dofs else [()] * len(flat)
    pieces, i = [], 0
    for seg_parts in parts:
        pieces.append(list(zip(a[i : i + len(seg_parts)], d[i : i + len(seg_parts)])))
        i += len(seg_parts)
    return pieces


def _per_body_dofs(x, group):
    """A group's (nv_group, ...) coordinate rows as (bodies, nv_k, ...)."""
    n = group.stop - group.start
    return jax.tree.map(lambda a: a.reshape((n, group.nv) + a.shape[1:]), x)


def _concat(parts):
    return jax.tree.map(lambda *a: jnp.concatenate(a, 0), *parts) if len(parts) > 1 else parts[0]


def _flatten_dofs(x):
    return jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), x)


def _level(step, lvl, carried, pieces, dofs):
    """Run ``step`` over one level: one vmap, or one per group of equal nv when coordinates are involved
    (``pieces``: the level's rows from `_pieces`)."""
    if not dofs:
        return jax.vmap(step)(carried, *pieces[0][0])
    outs = []
    groups = _split_rows(carried, [(g.start - lvl.start, g.stop - lvl.start) for g in lvl.groups])
    for g, carried_g, (args_g, dofs_g) in zip(lvl.groups, groups, pieces):
        outs.append(jax.vmap(step)(carried_g, *args_g, *_per_body_dofs(dofs_g, g)))
    *body, dof = zip(*outs)
    return (*(_concat(list(b)) for b in body), _concat([_flatten_dofs(d) for d in dof]))


# -- chain segments: runs of levels swept by one lax.scan, each chain in a fixed slot (jaxmb.topology.Segment) --


def _to_slots(topo, seg, args, dofs):
    """A chain segment's inputs per level, from its rows (`_pieces`): ``args`` as (L, W, ...), ``dofs`` as
    (L, W, nv, ...)."""
    first = topo.levels[seg.first]
    body, dof = seg.body.reshape(-1) - first.start, seg.dofs.reshape(-1) - first.groups[0].v_start
    a = jax.tree.map(lambda x: take_rows(x, body).reshape(seg.body.shape + x.shape[1:]), args)
    d = jax.tree.map(lambda x: take_rows(x, dof).reshape(seg.dofs.shape + x.shape[1:]), dofs)
    return a, d


def _from_slots(seg, body_out, dof_out=None):
    """A chain segment's outputs in body order (nb_seg, ...), and coordinate order (nv_seg, ...)."""
    body = jax.tree.map(lambda y: take_rows(y.reshape((-1,) + y.shape[2:]), seg.body_slot), body_out)
    if dof_out is None:
        return body
    return body, jax.tree.map(lambda y: take_rows(y.reshape((-1,) + y.shape[3:]), seg.dof_slot), dof_out)


# The segment sweeps are jitted on (topology, segment, step) so that calls outside `jit` (eager, or under `vmap` or
# `grad` alone) run one cached program per segment rather than compiling a new `scan` at every call.


@partial(jax.jit, static_argnums=(0, 1, 2))
def _scan_down(topo, s, step, carried, args, dofs):
    """`down` over chain segment ``s``; ``carried`` (W, ...) is what the first level's slots gather."""
    seg = topo.segments[s]

    def level(carried, x):
        out = jax.vmap(step)(carried, *x[0], *x[1])
        return (out[0] if dofs else out), out

    _, out = jax.lax.scan(level, carried, _to_slots(topo, seg, args, dofs))
    return _from_slots(seg, *out) if dofs else _from_slots(seg, out)


@partial(jax.jit, static_argnums=(0, 1, 2))
def _scan_up(topo, s, step, acc, args, dofs):
    """`up` over chain segment ``s``; ``acc`` (W, ...) is what the last level's slots receive. Returns what the
    first level sends to its parents, then the outputs."""
    seg = topo.segments[s]

    def level(acc, x):
        (a, d), real = x
        res = jax.vmap(step)(acc, *a, *d)
        sent = jax.tree.map(lambda t: jnp.where(real.reshape((-1,) + (1,) * (t.ndim - 1)), t, 0), res[0])
        return sent, res[1:]  # pads send nothing

    sent, res = jax.lax.scan(level, acc, (_to_slots(topo, seg, args, dofs), seg.real), reverse=True)
    return (sent, *_from_slots(seg, *res)) if dofs else (sent, _from_slots(seg, *res))


def _broadcast(x, n):
    return jax.tree.map(lambda r: jnp.broadcast_to(r, (n,) + jnp.shape(r)), x)


def _one_body(step, carried, args, dofs):
    """The shapes of ``step``'s outputs for one body with one coordinate (`jax.eval_shape`): what a sweep over no
    bodies (a model with no movable joint) returns, with `_no_rows`."""
    body = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), args)
    dof = jax.tree.map(lambda a: jax.ShapeDtypeStruct((1,) + a.shape[1:], a.dtype), dofs)
    return jax.eval_shape(step, carried, *body, *dof)


def _no_rows(shapes, per_dof=False):
    """Zero rows of one body's (``per_dof``: one body's coordinates') output ``shapes``."""
    return jax.tree.map(lambda a: jnp.zeros((0,) + a.shape[int(per_dof):], a.dtype), shapes)


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
    if not topo.nb:
        out = _one_body(step, root, args, dofs)
        return (_no_rows(out[0]), _no_rows(out[1], True)) if dofs else _no_rows(out)
    values, dof_outs, prev = [], [], None
    for s, (seg, pieces) in enumerate(zip(topo.segments, _pieces(topo, args, dofs))):
        lvl = topo.levels[seg.first]
        carried = _broadcast(root, lvl.stop - lvl.start) if prev is None else take_rows(prev, lvl.parent)
        if seg.last - seg.first == 1:
            out = _level(step, lvl, carried, pieces, dofs)
        else:
            out = _scan_down(topo, s, step, carried, *pieces[0])
        body = out[0] if dofs else out
        n_last = topo.levels[seg.last - 1].stop - topo.levels[seg.last - 1].start
        prev = jax.tree.map(lambda v: v[len(v) - n_last :], body)
        values.append(body)
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
    if not topo.nb:
        out = _one_body(step, zero, args, dofs)
        return (_no_rows(out[1]), _no_rows(out[2], True)) if dofs else _no_rows(out[1])
    outs, dof_outs, sent = [], [], None
    pieces = _pieces(topo, args, dofs)
    for s in reversed(range(len(topo.segments))):
        seg = topo.segments[s]
        last = topo.levels[seg.last - 1]
        n = last.stop - last.start
        acc = _broadcast(zero, n) if sent is None else sum_rows(sent, topo.levels[seg.last].parent, n)
        if seg.last - seg.first == 1:
            res = _level(step, last, acc, pieces[s], dofs)
        else:
            gather = np.where(seg.real[-1], seg.body[-1] - last.start, 0)  # a pad receives any body's sum
            res = _scan_up(topo, s, step, take_rows(acc, gather), *pieces[s][0])
        sent = res[0]
        outs.insert(0, res[1])
        if dofs:
            dof_outs.insert(0, res[2])
    return (_concat(outs), _concat(dof_outs)) if dofs else _concat(outs)


def _plus(children, own):
    total = jax.tree.map(jnp.add, children, own)
    return total, total


def subtree_sums(topo: Topology, zero, x):
    """``y(k) = sum of x(j) over the subtree of k`` (nb, ...) for the pytree ``x`` (nb, ...) of quantities in one
    common frame: an `up` sweep whose step sends its total to the parent unchanged (in one frame the congruences of
    (9.16) are identities). ``zero`` is one body's zero."""
    return up(topo, _plus, zero, x)


def ancestor_walk(topo: Topology, X, H, F, G=None):
    """The entries ``H(i) A(i, k) F_j`` of every coordinate column j, for the coordinates i of each ancestor-or-self
    of j's body k, walking all columns up one level per step (the off-diagonal recursion of Lemma 9.3, Alg 9.3).

    Args:
        X: joint poses (Transform, nb).   H (nv, 6): hinge map rows.
        F (nv, 6): column j as a force-like 6-vector in the coordinates of its own body k.
        G (nv, 6) or None: the Kalman gains by coordinate (`ArticulatedBody.G`). The edge operator is
            ``phi(parent, m)`` (None) or, after the first step, ``psi(parent, m) = phi(parent, m) tau_bar(m)``,
            with ``tau_bar(m) F = F - G(m) H(m) F`` (6.16) summed over the coordinates of m: for a one-coordinate
            joint, 12 numbers read per column instead of the 36 of ``tau_bar(m)``.
    Returns:
        the entries, in the order indexed by ``topo.ancestor_index``.
    """
    if G is not None:
        pad = jnp.zeros((1, 6), G.dtype)
        G, H_pad = jnp.concatenate([G, pad]), jnp.concatenate([H, pad])  # row nv: a missing coordinate
    values = []
    for s, w in enumerate(topo.ancestor_walk):
        if s:
            F = F[w.keep :]
            if G is not None and s > 1:
                coords = _coordinates(topo, w.moved)
                HF = [dot(take_rows(H_pad, d), F)[:, None] for d in coords]
                F = F - sum(take_rows(G, d) * h for d, h in zip(coords, HF))  # tau_bar(m) F = F - G(m) H(m) F
            F = phi(take_rows(X, w.moved), F)  # to the next ancestor's frame
        values.append(dot(take_rows(H, w.rows), take_rows(F, w.cols - w.start)))  # H(i) A(i, k) F_j
    return values


def _coordinates(topo, bodies):
    """The velocity coordinates of ``bodies`` (m,) by rank: (max nv, m), ``nv`` where a body has fewer."""
    n = topo.nv_body[bodies]
    rank = np.arange(n.max(initial=0))[:, None]
    return np.where(rank < n, topo.v_offset[bodies] + rank, topo.nv)
