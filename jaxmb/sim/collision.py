"""Contacts between pairs of geoms (`jaxmb.sim.geometry`): signed distances, points and contact frames.

Every pair of kinds yields a fixed number of contacts (`CONTACTS`), so `collide` has static shapes and is
jit-, vmap- and grad-able. A contact slot that has no contact (fewer box-box clip points than slots, say) has
``dist = FAR``, finite, so a solver's masks keep gradients finite. Every function here is differentiable with
finite gradients everywhere, coincident centres and parallel axes included: norms and normalizations are guarded
(`_normalize`), and every division by a quantity that can vanish is taken on a guarded denominator.

Conventions, for every pair ``(a, b)`` (``a`` of the lower kind, `jaxmb.sim.geometry.KINDS`):

* ``dist``: signed distance between the two surfaces, negative in penetration. For a penetration it is the depth
  along the contact normal: exact for every pair but two. Capsule-box uses the deepest point of the capsule's
  axis (exact while the capsule is apart, or while the separating direction is the normal of the box face nearest
  that point, as in shallow contacts). Box-box uses the separating-axis test (Gottschalk, Lin and Manocha, OBBTree,
  1996): exact in penetration and for face contacts, a lower bound for boxes apart whose nearest features are
  edges or corners not separated along one of the 15 axes.
* ``pos``: the world point midway between the two surfaces along the normal.
* ``frame`` rows ``[n, t1, t2]``: ``n`` the unit normal from ``a`` to ``b`` (a motion of ``b`` relative to ``a``
  along ``n`` separates them), completed to a right-handed orthonormal frame by `contact_frame`.

Per pair: plane-x: ``n`` is the plane's normal. Sphere-x and capsule-x: ``n`` runs from the nearest point of
``a``'s centre (segment) to that of ``b``; where these coincide, ``n`` is a fixed fallback (sphere-sphere: world
``z``; sphere-capsule: the capsule's local ``x``; capsule-capsule: ``ua x ub``, else capsule ``a``'s local ``x``;
sphere or capsule in a box: out of the nearest box face). Box-box: the separating axis of least penetration,
oriented from ``a`` to ``b``.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.spatial import Transform, cross3

FAR = 1e6
"""``dist`` of an empty contact slot: far above any contact margin, finite so that gradients stay finite."""

CONTACTS = {
    ("plane", "sphere"): 1,
    ("plane", "capsule"): 2,
    ("plane", "box"): 4,
    ("sphere", "sphere"): 1,
    ("sphere", "capsule"): 1,
    ("sphere", "box"): 1,
    ("capsule", "capsule"): 2,
    ("capsule", "box"): 2,
    ("box", "box"): 8,
}
"""Contacts that each pair of kinds yields (fixed, some slots may be empty)."""

_PARALLEL = 1e-6  # sin^2 of the angle under which two capsule axes count as parallel
_MUJOCO_MINVAL = 1e-15  # MuJoCo's mjMINVAL: its capsule-capsule test counts a smaller determinant as parallel
_EDGE = 1e-6  # |ua x ub| under which two box edges are parallel (no separating axis)
_GOLDEN_STEPS = 64  # golden-section steps of capsule-box: the bracket shrinks to 0.618^64 ~ 4e-14 of the axis


class Contacts(NamedTuple):
    """nc contacts: ``dist`` (nc,) signed distance, ``pos`` (nc, 3) world point midway between the surfaces,
    ``frame`` (nc, 3, 3) rows ``[n, t1, t2]``, ``n`` the normal from geom a to geom b (module docstring)."""

    dist: jnp.ndarray
    pos: jnp.ndarray
    frame: jnp.ndarray


def contact_frame(n):
    """Rows ``[n, t1, t2]`` (..., 3, 3): a right-handed orthonormal frame from the unit normal ``n`` (..., 3).

    The tangents are those of Duff et al., Building an Orthonormal Basis, Revisited (2017): the rotation that
    takes the world ``z`` (or ``-z``) to ``n`` by the shortest arc, applied to ``x`` and ``+-y``. They are smooth in
    ``n`` over each half ``n_z >= 0``, ``n_z < 0`` (no tangent field is smooth over the whole sphere); a normal
    ``+z`` gets ``t1 = x, t2 = y``, and ``-z`` gets ``t1 = x, t2 = -y``. No division can vanish."""
    x, y, z = n[..., 0], n[..., 1], n[..., 2]
    s = jnp.where(z >= 0, 1.0, -1.0).astype(n.dtype)
    a = -1.0 / (s + z)
    b = x * y * a
    t1 = jnp.stack([1.0 + s * x * x * a, s * b, -s * x], -1)
    t2 = jnp.stack([b, s + y * y * a, -y], -1)
    return jnp.stack([n, t1, t2], -2)


def _normalize(v, fallback):
    """(``v / |v|``, ``|v|``) over the last axis; ``fallback`` and 0 where ``|v|`` is under the dtype's epsilon,
    with finite gradients there (the double-where of `jaxmb.rotation.safe_norm`)."""
    sq = jnp.sum(v * v, -1, keepdims=True)
    ok = sq > jnp.finfo(v.dtype).eps ** 2
    length = jnp.sqrt(jnp.where(ok, sq, 1.0))
    return jnp.where(ok, v / length, fallback), jnp.where(ok, length, 0.0)[..., 0]


def _sign(x):
    """+1 where ``x >= 0``, else -1 (never 0)."""
    return jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype)


def _contacts(dist, pos, n):
    return Contacts(dist, pos, contact_frame(n))


def _balls(ca, ra, cb, rb, fallback):
    """Contact of the balls (ca, ra) and (cb, rb), batched over leading axes: (dist, pos, n)."""
    n, length = _normalize(cb - ca, fallback)
    dist = length - ra - rb
    return dist, ca + n * (ra + 0.5 * dist)[..., None], n


def _take(x, idx):
    return jax.tree.map(lambda y: y[idx], x)


# -- plane ---------------------------------------------------------------------------------------------------


def _plane_points(pose_a, points, radius):
    """Contacts of the plane ``pose_a`` with balls of ``radius`` at ``points`` (k, 3)."""
    n = pose_a.R[:, 2]
    height = (points - pose_a.p) @ n
    dist = height - radius
    pos = points - (radius + 0.5 * dist)[:, None] * n
    return _contacts(dist, pos, jnp.broadcast_to(n, points.shape))


def plane_sphere(pose_a, size_a, pose_b, size_b) -> Contacts:
    """Plane a, sphere b: one contact below the centre. -> (1,)."""
    return _plane_points(pose_a, pose_b.p[None], size_b[0])


def plane_capsule(pose_a, size_a, pose_b, size_b) -> Contacts:
    """Plane a, capsule b: the balls at both ends of the axis, so that a capsule lying flat rests on two points.
    -> (2,)."""
    ends = pose_b.p + jnp.stack([-size_b[1], size_b[1]])[:, None] * pose_b.R[:, 2]
    return _plane_points(pose_a, ends, size_b[0])


_CORNERS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)


def plane_box(pose_a, size_a, pose_b, size_b) -> Contacts:
    """Plane a, box b: the four corners lowest along the plane's normal (a box on a face rests on its four
    corners; on an edge or a corner, the extra corners report their own, larger, distances). -> (4,)."""
    corners = pose_b.p + (jnp.asarray(_CORNERS, size_b.dtype) * size_b) @ pose_b.R.T
    c = _plane_points(pose_a, corners, jnp.zeros((), size_b.dtype))
    _, idx = jax.lax.top_k(-c.dist, 4)
    return _take(c, idx)


# -- sphere --------------------------------------------------------------------------------------------------


def sphere_sphere(pose_a, size_a, pose_b, size_b) -> Contacts:
    """Two spheres: one contact on the line of centres. -> (1,)."""
    z = jnp.zeros(3, pose_a.p.dtype).at[2].set(1.0)
    return _contacts(*(x[None] for x in _balls(pose_a.p, size_a[0], pose_b.p, size_b[0], z)))


def sphere_capsule(pose_a, size_a, pose_b, size_b) -> Contacts:
    """Sphere a, capsule b: the ball of the capsule's axis point nearest the centre (Ericson, Real-Time Collision
    Detection, 2004, 5.1.2). -> (1,)."""
    u, h = pose_b.R[:, 2], size_b[1]
    q = pose_b.p + jnp.clip((pose_a.p - pose_b.p) @ u, -h, h) * u
    return _contacts(*(x[None] for x in _balls(pose_a.p, size_a[0], q, size_b[0], pose_b.R[:, 0])))


def _ball_box(c, r, pose_b, h):
    """Contact of the ball (c (..., 3), r) with the box (pose_b, half sizes h), a from the ball to the box:
    (dist, pos, n). Outside: the nearest box point (Ericson 2004, 5.1.4); centre inside: out of the nearest face."""
    x = (c - pose_b.p) @ pose_b.R  # centre in box coordinates
    q = jnp.clip(x, -h, h)
    depth = h - jnp.abs(x)
    inside = jnp.all(depth >= 0, -1, keepdims=True)
    face = jax.nn.one_hot(jnp.argmin(depth, -1), 3, dtype=x.dtype)
    side = _sign(x)
    n_in = -side * face  # the ball leaves through the nearest face; the box moves the other way
    n_out, gap = _normalize(q - x, n_in)
    n_local = jnp.where(inside, n_in, n_out)
    on_box = jnp.where(inside, jnp.where(face > 0, side * h, x), q)
    dist = jnp.where(inside[..., 0], -jnp.sum(face * depth, -1), gap) - r
    n = n_local @ pose_b.R.T
    on_ball = c + r * n
    return dist, 0.5 * (on_ball + pose_b.p + on_box @ pose_b.R.T), n


def sphere_box(pose_a, size_a, pose_b, size_b) -> Contacts:
    """Sphere a, box b: one contact at the box point nearest the centre, or, for a centre inside, out of the
    nearest face. -> (1,)."""
    return _contacts(*(x[None] for x in _ball_box(pose_a.p, size_a[0], pose_b, size_b)))


# -- capsule -------------------------------------------------------------------------------------------------


def _segments(pa, ua, ha, pb, ub, hb):
    """Parameters (s, t) of the nearest points ``pa + s ua``, ``pb + t ub`` of two segments (|s| <= ha,
    |t| <= hb, unit directions), and whether the segments are parallel (Ericson 2004, 5.1.9; parallel: s = 0)."""
    r = pa - pb
    b, c, f = ua @ ub, ua @ r, ub @ r
    denom = 1.0 - b * b
    parallel = denom < _PARALLEL
    s = jnp.where(parallel, 0.0, (b * f - c) / jnp.where(parallel, 1.0, denom))
    s = jnp.clip(s, -ha, ha)
    t = f + s * b
    t_clipped = jnp.clip(t, -hb, hb)
    s = jnp.where(t == t_clipped, s, jnp.clip(t_clipped * b - c, -ha, ha))
    return s, t_clipped, parallel


def capsule_capsule(pose_a, size_a, pose_b, size_b) -> Contacts:
    """Two capsules as MuJoCo's narrow phase takes them: the balls of two axis points, one contact unless the axes
    are parallel.

    With the axes ``a = ha ua``, ``b = hb ub`` and the points ``pa + x1 a``, ``pb + x2 b`` (``|x1|, |x2| <= 1``),
    the axes' nearest points are clipped to the segments one parameter after the other (``x1`` clipped and ``x2``
    taken nearest to its point, then ``x2`` clipped and ``x1`` taken nearest to its point): the second slot is
    empty. Parallel axes (MuJoCo's determinant under ``1e-15``) get the two nearest of the four ends of one axis with
    their nearest points on the other, and rest on two points. -> (2,)."""
    (ra, ha), (rb, hb) = (size_a[0], size_a[1]), (size_b[0], size_b[1])
    pa, pb = pose_a.p, pose_b.p
    a, b = pose_a.R[:, 2] * ha, pose_b.R[:, 2] * hb
    dif = pa - pb
    ma, mb, mc = a @ a, -(a @ b), b @ b
    u, v = -(a @ dif), b @ dif
    det = ma * mc - mb * mb
    parallel = jnp.abs(det) < _MUJOCO_MINVAL
    ma, mc = jnp.maximum(ma, _MUJOCO_MINVAL), jnp.maximum(mc, _MUJOCO_MINVAL)
    safe = jnp.where(parallel, 1.0, det)
    x1, x2 = (mc * u - mb * v) / safe, (ma * v - mb * u) / safe
    x2 = jnp.where(x1 > 1, (v - mb) / mc, jnp.where(x1 < -1, (v + mb) / mc, x2))
    x1 = jnp.clip(x1, -1.0, 1.0)
    x1 = jnp.where(x2 > 1, jnp.clip((u - mb) / ma, -1, 1), jnp.where(x2 < -1, jnp.clip((u + mb) / ma, -1, 1), x1))
    x2 = jnp.clip(x2, -1.0, 1.0)
    one = jnp.ones_like(x1)
    ends_1 = jnp.stack([one, -one, jnp.clip((u - mb) / ma, -1, 1), jnp.clip((u + mb) / ma, -1, 1)])
    ends_2 = jnp.stack([jnp.clip((v - mb) / mc, -1, 1), jnp.clip((v + mb) / mc, -1, 1), one, -one])
    s_all, t_all = jnp.concatenate([x1[None], ends_1]), jnp.concatenate([x2[None], ends_2])
    fallback, _ = _normalize(cross3(a, b), pose_a.R[:, 0])
    dist, pos, n = _balls(pa + s_all[:, None] * a, ra, pb + t_all[:, None] * b, rb, fallback)
    _, nearest_ends = jax.lax.top_k(-dist[1:], 2)
    idx = jnp.where(parallel, nearest_ends + 1, jnp.array([0, 0]))
    dist = jnp.where(parallel, dist[idx], jnp.stack([dist[0], FAR]))
    return _contacts(dist, pos[idx], n[idx])


def _point_box_distance(x, h):
    """Signed distance of the point ``x`` (box coordinates) to the box of half sizes ``h``: convex in ``x``."""
    q = jnp.clip(x, -h, h)
    depth = h - jnp.abs(x)
    _, gap = _normalize(x - q, jnp.zeros_like(x))
    return jnp.where(jnp.all(depth >= 0), -jnp.min(depth), gap)


def capsule_box(pose_a, size_a, pose_b, size_b) -> Contacts:
    """Capsule a, box b: two contacts, each the ball of an axis point against the box (`sphere_box`).

    The axis point of least signed distance to the box minimizes a convex function of its parameter on the
    segment; a golden-section search (Kiefer, Sequential minimax search for a maximum, 1953) finds it, outside the
    derivative (the distance is stationary there, or the point is an end). With the two ends it makes three
    candidates; the two nearest are kept, an end winning ties, so that a capsule lying on a face rests on its two
    ends. Penetration depths are those of the deepest axis point (module docstring). -> (2,)."""
    r, hl = size_a[0], size_a[1]
    u = pose_a.R[:, 2]
    x0 = jax.lax.stop_gradient((pose_a.p - pose_b.p) @ pose_b.R)
    d = jax.lax.stop_gradient(u @ pose_b.R * hl)
    h = jax.lax.stop_gradient(size_b)
    f = lambda w: _point_box_distance(x0 + w * d, h)
    g = (5.0**0.5 - 1.0) / 2.0  # a Python float: weakly typed, so it keeps the operands' dtype

    def step(_, state):
        lo, hi, x1, f1, x2, f2 = state  # lo < x1 < x2 < hi
        left = f1 < f2  # the minimum lies in [lo, x2], else in [x1, hi]
        lo, hi = jnp.where(left, lo, x1), jnp.where(left, x2, hi)
        kept, f_kept = jnp.where(left, x1, x2), jnp.where(left, f1, f2)  # the probe inside the new bracket
        new = jnp.where(left, hi - g * (hi - lo), lo + g * (hi - lo))
        f_new = f(new)
        return (lo, hi, jnp.where(left, new, kept), jnp.where(left, f_new, f_kept),
                jnp.where(left, kept, new), jnp.where(left, f_kept, f_new))

    one = jnp.ones((), x0.dtype)
    x1, x2 = one - 2.0 * g * one, -one + 2.0 * g * one
    lo, hi, *_ = jax.lax.fori_loop(0, _GOLDEN_STEPS, step, (-one, one, x1, f(x1), x2, f(x2)))
    w = jnp.stack([0.5 * (lo + hi), -one, one])
    dist, pos, n = _ball_box(pose_a.p + (w * hl)[:, None] * u, r, pose_b, size_b)
    scale = jax.lax.stop_gradient(r + hl + jnp.max(size_b))
    rank = dist.at[0].add(jnp.sqrt(jnp.finfo(dist.dtype).eps) * scale)  # ends win ties
    _, idx = jax.lax.top_k(-rank, 2)
    return _contacts(dist[idx], pos[idx], n[idx])


# -- box-box -------------------------------------------------------------------------------------------------

_SQUARE = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]], float)  # a face's corners in cyclic order


def _face_contacts(ref, h_ref, k, u, inc, h_inc):
    """Clip the face of box ``inc`` most opposed to ``u`` against face ``k`` (outward normal ``u``) of box ``ref``
    (Sutherland-Hodgman clipping, written as its fixed set of candidate vertices). -> dist (8,), pos (8, 3).

    The clipped polygon's vertices are among: the incident corners inside the reference face, the reference
    corners inside the incident face (projected along ``u``), and the crossings of their edges (4 + 4 + 16
    candidates, at most 8 of them vertices). Each point lies on the incident face; its distance is its height over
    the reference face. The 8 deepest valid candidates are kept."""
    k1, k2 = (k + 1) % 3, (k + 2) % 3
    t1, t2 = ref.R[:, k1], ref.R[:, k2]
    e = jnp.stack([h_ref[k1], h_ref[k2]])
    c_ref = ref.p + h_ref[k] * u
    proj = u @ inc.R
    j = jnp.argmax(jnp.abs(proj))
    j1, j2 = (j + 1) % 3, (j + 2) % 3
    c_inc = inc.p - _sign(proj[j]) * h_inc[j] * inc.R[:, j]
    w = jnp.stack([inc.R[:, j1] * h_inc[j1], inc.R[:, j2] * h_inc[j2]])  # (2, 3) half edges of the incident face
    basis = jnp.stack([t1, t2], 1)  # (3, 2): 3-D -> reference face coordinates

    square = jnp.asarray(_SQUARE, w.dtype)
    corners = c_inc + square @ w  # (4, 3)
    xy = (corners - c_ref) @ basis  # (4, 2)
    slack = 1.0 + 1e-9
    in_ref = lambda p: jnp.all(jnp.abs(p) <= e * slack, -1)

    # reference corners inside the incident face: solve c + alpha w0 + beta w1 = corner in face coordinates
    W = w @ basis  # (2, 2) rows: projected half edges
    det = W[0, 0] * W[1, 1] - W[0, 1] * W[1, 0]
    det = jnp.where(jnp.abs(det) > jnp.finfo(det.dtype).tiny ** 0.5, det, 1.0)
    rel = square * e - (c_inc - c_ref) @ basis  # (4, 2)
    alpha = (rel[:, 0] * W[1, 1] - rel[:, 1] * W[1, 0]) / det
    beta = (W[0, 0] * rel[:, 1] - W[0, 1] * rel[:, 0]) / det
    ref_corners = c_inc + alpha[:, None] * w[0] + beta[:, None] * w[1]
    ref_ok = (jnp.abs(alpha) <= slack) & (jnp.abs(beta) <= slack)

    # crossings of incident edges (corner m to m+1) with the lines x = +-e0 and y = +-e1 of the reference face
    start, end = xy, jnp.roll(xy, -1, 0)
    p0, p1 = corners, jnp.roll(corners, -1, 0)
    cross_pts, cross_ok = [], []
    for axis in (0, 1):
        other = 1 - axis
        for side in (1.0, -1.0):
            delta = end[:, axis] - start[:, axis]
            moving = jnp.abs(delta) > jnp.finfo(delta.dtype).eps * e[axis]
            tau = (side * e[axis] - start[:, axis]) / jnp.where(moving, delta, 1.0)
            along = start[:, other] + tau * (end[:, other] - start[:, other])
            cross_ok.append(moving & (tau >= 0) & (tau <= 1) & (jnp.abs(along) <= e[other] * slack))
            cross_pts.append(p0 + tau[:, None] * (p1 - p0))

    points = jnp.concatenate([corners, ref_corners] + cross_pts)  # (24, 3)
    ok = jnp.concatenate([in_ref(xy), ref_ok] + cross_ok)
    height = (points - c_ref) @ u
    rank = jnp.where(ok, height, FAR)
    _, idx = jax.lax.top_k(-rank, 8)
    dist = rank[idx]
    return dist, points[idx] - 0.5 * height[idx][:, None] * u


def box_box(pose_a, size_a, pose_b, size_b) -> Contacts:
    """Two boxes: up to 8 contacts, by the separating-axis test (Gottschalk, Lin and Manocha, OBBTree, 1996).

    Of the 15 candidate axes (3 face normals of each box and the 9 cross products of their edges), the one of
    largest separation (least penetration) gives the normal. A face axis: the incident face of the other box is
    clipped against the reference face (`_face_contacts`), up to 8 points. An edge axis (taken only when it beats
    every face axis by a relative 1e-6, so that face contacts win ties): one contact midway between the nearest
    points of the two supporting edges, the other 7 slots empty (``dist = FAR``). -> (8,)."""
    A, B, ha, hb = pose_a.R, pose_b.R, size_a, size_b
    d = pose_b.p - pose_a.p
    edge_axes = cross3(A.T[:, None, :], B.T[None, :, :]).reshape(9, 3)
    edge_axes, edge_len = _normalize(edge_axes, jnp.zeros_like(edge_axes))
    axes = jnp.concatenate([A.T, B.T, edge_axes])  # (15, 3) unit rows
    usable = jnp.concatenate([jnp.ones(6, bool), edge_len > _EDGE])
    along = axes @ d
    sep = jnp.abs(along) - jnp.abs(axes @ A) @ ha - jnp.abs(axes @ B) @ hb
    sep = jnp.where(usable, sep, -FAR)
    normals = axes * _sign(along)[:, None]  # oriented from a to b

    k = jnp.argmax(sep[:6])
    n_face = normals[k]
    ref_a = k < 3
    pick = lambda x, y: jax.tree.map(lambda p, q: jnp.where(ref_a, p, q), x, y)
    ref, inc = pick(pose_a, pose_b), pick(pose_b, pose_a)
    h_ref, h_inc = pick(ha, hb), pick(hb, ha)
    u = jnp.where(ref_a, n_face, -n_face)  # outward normal of the reference face, towards the other box
    face_dist, face_pos = _face_contacts(ref, h_ref, k % 3, u, inc, h_inc)

    m = jnp.argmax(sep[6:])
    i, j = m // 3, m % 3
    n_edge = normals[6 + m]
    oh_i, oh_j = jax.nn.one_hot(i, 3, dtype=d.dtype), jax.nn.one_hot(j, 3, dtype=d.dtype)
    c_a = pose_a.p + A @ (_sign(n_edge @ A) * ha * (1.0 - oh_i))  # A's edge along A_i furthest along n
    c_b = pose_b.p - B @ (_sign(n_edge @ B) * hb * (1.0 - oh_j))  # B's edge along B_j furthest along -n
    ua, ub = A @ oh_i, B @ oh_j
    s, t, _ = _segments(c_a, ua, ha @ oh_i, c_b, ub, hb @ oh_j)
    edge_pos = 0.5 * (c_a + s * ua + c_b + t * ub)
    scale = jnp.maximum(jnp.max(ha), jnp.max(hb))
    use_edge = sep[6 + m] > sep[k] + 1e-6 * scale

    empty = jnp.full(7, FAR, d.dtype)
    dist = jnp.where(use_edge, jnp.concatenate([sep[6 + m][None], empty]), face_dist)
    pos = jnp.where(use_edge, jnp.concatenate([edge_pos[None], jnp.broadcast_to(edge_pos, (7, 3))]), face_pos)
    n = jnp.where(use_edge, n_edge, n_face)
    return _contacts(dist, pos, jnp.broadcast_to(n, (8, 3)))


# -- all pairs -----------------------------------------------------------------------------------------------

PAIR_FUNCTIONS = {
    ("plane", "sphere"): plane_sphere,
    ("plane", "capsule"): plane_capsule,
    ("plane", "box"): plane_box,
    ("sphere", "sphere"): sphere_sphere,
    ("sphere", "capsule"): sphere_capsule,
    ("sphere", "box"): sphere_box,
    ("capsule", "capsule"): capsule_capsule,
    ("capsule", "box"): capsule_box,
    ("box", "box"): box_box,
}
"""The contact function of each pair of kinds, ``(pose_a, size_a, pose_b, size_b) -> Contacts`` for one pair
(poses Transform (3, 3), (3,); sizes (3,)); batch with `jax.vmap`."""


def collide(geometry, pairs, poses: Transform) -> Contacts:
    """The contacts of every pair (`jaxmb.sim.geometry.pairs`), (nc,), in the order of ``pairs.contact_pair``.

    ``poses``: the geoms' world poses (ng) (`jaxmb.sim.geometry.geom_poses`). Pairs of one kind are batched
    together with `jax.vmap`, and their contacts put back in pair order."""
    dtype = geometry.size.dtype
    if not pairs.a:
        return Contacts(jnp.zeros((0,), dtype), jnp.zeros((0, 3), dtype), jnp.zeros((0, 3, 3), dtype))
    groups = {}
    for k, (a, b) in enumerate(zip(pairs.a, pairs.b)):
        groups.setdefault((geometry.kind[a], geometry.kind[b]), []).append(k)
    parts, slots = [], []
    for kinds, ks in groups.items():
        ia = np.array([pairs.a[k] for k in ks])
        ib = np.array([pairs.b[k] for k in ks])
        c = jax.vmap(PAIR_FUNCTIONS[kinds])(_take(poses, ia), geometry.size[ia], _take(poses, ib),
                                             geometry.size[ib])
        parts.append(jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), c))
        slots += [pairs.offset[k] + i for k in ks for i in range(pairs.count[k])]
    out = jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)
    order = np.argsort(np.asarray(slots))
    return out if np.array_equal(order, np.arange(len(order))) else _take(out, order)
