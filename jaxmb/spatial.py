"""Spatial algebra (book ch. 1-2), for one body; batch with `jax.vmap`.

Conventions, fixed once for the whole library:

* Spatial vectors are angular first: a velocity is ``V = [w; v]`` (1.20), a force ``f = [n; f]`` (1.46).
  Pinocchio orders them linear first; `jaxmb.io.pinocchio` has the converters.
* A rigid transform is a `Transform` ``(R, p)``: the pose of a child frame in a parent frame. ``R`` (3, 3)
  maps child coordinates to parent coordinates; ``p`` (3,) is the child origin in parent coordinates.
* With the child ``k`` and its parent ``P``, Jain's operators act as (1.31, 1.41)::

      phi(P, k)  f(k) -> f(P):  moves a force from the child to the parent       (force transform)
      phi*(P, k) V(P) -> V(k):  moves a velocity from the parent to the child     (Featherstone's X_up)

  They are applied from ``(R, p)`` without forming 6x6 matrices.

Small matrix products (`mm`, `mv`, `dot`) are never batched `dot_general`s. They are JAX primitives of their own,
lowered per backend. On the CPU they are sums over the inner index of elementwise products, with no reduction op:
XLA turns them into vectorized elementwise loops, where a broadcast-multiply-`reduce` of 3x3 or 6x6 matrices runs
as scalar loops (benchmarks/findings.md, "Where the time goes"). On a GPU the broadcast-multiply-`reduce` form is as
fast forward, faster in reverse mode and compiles faster, so it is kept there. Being primitives, their derivatives
are products again (``d(A B) = dA B + A dB``, transposed as ``ct B*`` and ``A* ct``): automatic differentiation
through the unrolled sums would turn every slice into a pad and every broadcast into a reduction (benchmarks/
findings.md, "Small products as primitives").
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxmb.batching import internals

UNROLLED_ON_CPU = True
"""Lower the small products for the CPU backend as reduction-free sums; False lowers them as on other backends
(faster to compile: the Pinocchio oracle tests use it)."""


def swap(A):
    """``A*``: the last two axes swapped, ``(..., m, n) -> (..., n, m)``."""
    return jax.lax.transpose(A, tuple(range(A.ndim - 2)) + (A.ndim - 1, A.ndim - 2))


def _slice(x, k, axis):
    return jax.lax.slice_in_dim(x, k, k + 1, axis=axis)


def _expand(x, shape, dims=None):
    return jax.lax.broadcast_in_dim(x, shape, tuple(range(len(shape))) if dims is None else dims)


def _cast_to(x, dtype, shape):
    """``x`` as ``dtype``, broadcast to ``shape`` by numpy's rules."""
    x = x if x.dtype == dtype else jax.lax.convert_element_type(x, dtype)
    return x if x.shape == shape else _expand(x, shape, tuple(range(len(shape) - x.ndim, len(shape))))


def _sum(terms):
    return functools.reduce(jax.lax.add, terms)  # no ``0 +`` term, as the builtin `sum` would add


# The unrolled forms are written in `lax` (slices of width one, broadcasts of their unit axes), not with numpy
# indexing: they are traced again at every lowering of a product, and numpy indexing's tracing took half of it.


def _mm_unrolled(A, B):
    shape = A.shape[:-1] + B.shape[-1:]
    return _sum([jax.lax.mul(_expand(_slice(A, k, -1), shape), _expand(_slice(B, k, -2), shape))
                 for k in range(A.shape[-1])])


def _mm_reduced(A, B):
    return (A[..., :, :, None] * B[..., None, :, :]).sum(-2)


def _mv_unrolled(A, x):
    shape, lead = A.shape[:-1] + (1,), x.ndim - 1
    column = _sum([jax.lax.mul(_slice(A, k, -1), _expand(_slice(x, k, -1), shape, tuple(range(lead)) + (lead + 1,)))
                   for k in range(A.shape[-1])])
    return jax.lax.reshape(column, A.shape[:-1])


def _mv_reduced(A, x):
    return (A * x[..., None, :]).sum(-1)


def _dot_unrolled(a, b):
    return jax.lax.reshape(_sum([jax.lax.mul(_slice(a, i, -1), _slice(b, i, -1)) for i in range(a.shape[-1])]),
                           a.shape[:-1])


def _dot_reduced(a, b):
    return (a * b).sum(-1)


def _product(name, unrolled, reduced, core_ndims, out_shape, transpose_lhs, transpose_rhs):
    """A bilinear product as a primitive: both lowerings, derivatives by `transpose_lhs`/`transpose_rhs`
    (cotangent, other operand -> cotangent of this operand), and batching over leading axes."""
    p = internals.primitive(
        name, reduced, lambda x, y: jax.ShapeDtypeStruct(out_shape(x.shape, y.shape), x.dtype),  # eager: reduced
        cpu=lambda x, y: (unrolled if UNROLLED_ON_CPU else reduced)(x, y))
    internals.bilinear(p, lambda ct, x, y: transpose_lhs(ct, y), lambda ct, x, y: transpose_rhs(ct, x))

    def batch(args, dims):
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        args = [internals.bdim_at_front(a, d, size) for a, d in zip(args, dims)]
        return p.bind(*args), 0

    internals.batching_rule(p, batch)

    def apply(x, y):
        x, y = jnp.asarray(x), jnp.asarray(y)
        dtype = jnp.result_type(x, y)
        lead = jnp.broadcast_shapes(x.shape[: x.ndim - core_ndims[0]], y.shape[: y.ndim - core_ndims[1]])
        return p.bind(_cast_to(x, dtype, lead + x.shape[x.ndim - core_ndims[0] :]),
                      _cast_to(y, dtype, lead + y.shape[y.ndim - core_ndims[1] :]))

    return apply


mm = _product("jaxmb_mm", _mm_unrolled, _mm_reduced, (2, 2), lambda a, b: a[:-1] + b[-1:],
              lambda ct, B: mm(ct, swap(B)), lambda ct, A: mm(swap(A), ct))
mm.__doc__ = """Matrix product ``A @ B`` of small matrices, ``(..., m, k) x (..., k, n) -> (..., m, n)``."""

mv = _product("jaxmb_mv", _mv_unrolled, _mv_reduced, (2, 1), lambda a, x: a[:-1],
              lambda ct, x: ct[..., :, None] * x[..., None, :], lambda ct, A: mv(swap(A), ct))
mv.__doc__ = """Matrix-vector product ``A @ x``, ``(..., m, k) x (..., k) -> (..., m)``."""

dot = _product("jaxmb_dot", _dot_unrolled, _dot_reduced, (1, 1), lambda a, b: a[:-1],
               lambda ct, b: ct[..., None] * b, lambda ct, a: ct[..., None] * a)
dot.__doc__ = """``sum_i a_i b_i`` over the last axis, ``(..., k) x (..., k) -> (...)``."""


def skew(l):
    """The tilde matrix ``l~`` with ``l~ x = l x x`` (1.9), ``(3,) -> (3, 3)``."""
    x, y, z = l[..., 0], l[..., 1], l[..., 2]
    o, nx, ny, nz = jnp.zeros_like(x), jax.lax.neg(x), jax.lax.neg(y), jax.lax.neg(z)
    return jnp.stack([jnp.stack([o, nz, y], -1), jnp.stack([z, o, nx], -1), jnp.stack([ny, x, o], -1)], -2)


# -- cross products (1.23, 1.25) ------------------------------------------------------------------------------


def cross3(a, b):
    """``a x b`` of 3-vectors, ``(..., 3) x (..., 3) -> (..., 3)`` with broadcasting, as slices and one
    concatenate along the last axis (`jnp.cross` moves the axis to the front and back: a transpose per call)."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    dtype, shape = jnp.result_type(a, b), jnp.broadcast_shapes(a.shape, b.shape)
    a0, a1, a2 = (_slice(_cast_to(a, dtype, shape), i, -1) for i in range(3))
    b0, b1, b2 = (_slice(_cast_to(b, dtype, shape), i, -1) for i in range(3))
    mul, sub = jax.lax.mul, jax.lax.sub
    return jax.lax.concatenate([sub(mul(a1, b2), mul(a2, b1)), sub(mul(a2, b0), mul(a0, b2)),
                                sub(mul(a0, b1), mul(a1, b0))], len(shape) - 1)


def inverse3(C):
    """``(C^-1, det C)`` of 3x3 matrices (..., 3, 3): the rows of the inverse are the cross products of the
    columns over ``det C``."""
    c0, c1, c2 = C[..., :, 0], C[..., :, 1], C[..., :, 2]
    rows = jnp.stack([cross3(c1, c2), cross3(c2, c0), cross3(c0, c1)], -2)
    det = dot(c0, rows[..., 0, :])
    return rows / det[..., None, None], det


def cross_motion(V, m):
    """``V~ m``: the motion cross product of two 6-vectors (Featherstone's ``V x m``)."""
    w, v = V[..., :3], V[..., 3:]
    return jnp.concatenate([cross3(w, m[..., :3]), cross3(w, m[..., 3:]) + cross3(v, m[..., :3])], -1)


def cross_force(V, f):
    """``V-bar f = -(V~)* f``: the force cross product (Featherstone's ``V x* f``); ``b = V-bar M V`` (2.28)."""
    w, v = V[..., :3], V[..., 3:]
    return jnp.concatenate([cross3(w, f[..., :3]) + cross3(v, f[..., 3:]), cross3(w, f[..., 3:])], -1)


# -- rigid transforms (1.29-1.41) -----------------------------------------------------------------------------


class Transform(NamedTuple):
    """Pose of a child frame in its parent frame: ``R`` (..., 3, 3) child-to-parent rotation, ``p`` (..., 3)."""

    R: jnp.ndarray
    p: jnp.ndarray

    @staticmethod
    def identity(dtype=jnp.float32):
        return Transform(jnp.eye(3, dtype=dtype), jnp.zeros(3, dtype))


def compose(A: Transform, B: Transform) -> Transform:
    """Pose of frame c in frame a, from b in a (``A``) and c in b (``B``) (1.5)."""
    return Transform(mm(A.R, B.R), A.p + mv(A.R, B.p))


def inverse(A: Transform) -> Transform:
    """Pose of the parent in the child frame."""
    Rt = swap(A.R)
    return Transform(Rt, -mv(Rt, A.p))


def transform_point(A: Transform, x):
    """Child-frame point ``x`` (..., 3) in parent coordinates."""
    return mv(A.R, x) + A.p


def phi_star(A: Transform, V):
    """``V(k) = phi*(P, k) V(P)``: a motion vector from parent to child coordinates (1.33, 1.41)."""
    Rt = swap(A.R)
    w, v = V[..., :3], V[..., 3:]
    return jnp.concatenate([mv(Rt, w), mv(Rt, v - cross3(A.p, w))], -1)


def phi_star_inv(A: Transform, V):
    """``V(P) = phi^{-*}(P, k) V(k)``: a motion vector from child to parent coordinates."""
    w, v = mv(A.R, V[..., :3]), mv(A.R, V[..., 3:])
    return jnp.concatenate([w, v + cross3(A.p, w)], -1)


def phi(A: Transform, f):
    """``f(P) = phi(P, k) f(k)``: a force from child to parent coordinates (1.47)."""
    n, F = mv(A.R, f[..., :3]), mv(A.R, f[..., 3:])
    return jnp.concatenate([n + cross3(A.p, F), F], -1)


def phi_congruence(A: Transform, P):
    """``phi(P, k) P(k) phi*(P, k)``: a symmetric 6x6 inertia-like matrix from child to parent (2.12, 6.28).

    In blocks, with ``phi = [[1, p~], [0, 1]] diag(R, R)``, ``P = [[Pa, Pb], [Pb*, Pc]]`` (symmetric; its lower-left
    block is not read) and the rotated blocks ``X' = R X R*``::

        phi P phi* = [[Pa' + p~ Pb'* + Pb' p~* + p~ Pc' p~*,  Pb' + p~ Pc'],
                      [(Pb' + p~ Pc')*,                       Pc'        ]]

    Ten 3x3 products, symmetric by construction: with the products as primitives, on the XLA CPU backend, as fast
    as two dense 6x6 products forward and faster in reverse mode (benchmarks/findings.md, "Small products as
    primitives"). `jaxmb.spatial_scalar.phi_congruence` is its twin on lists of scalars.
    """
    R, T = A.R, skew(A.p)
    Pa, Pb, Pc = (mm(mm(R, X), swap(R)) for X in (P[..., :3, :3], P[..., :3, 3:], P[..., 3:, 3:]))
    TPc = mm(T, Pc)
    TPbt = mm(T, swap(Pb))
    top_left = Pa + TPbt + swap(TPbt) + mm(TPc, swap(T))
    top_right = Pb + TPc
    return jnp.concatenate([jnp.concatenate([top_left, top_right], -1),
                            jnp.concatenate([swap(top_right), Pc], -1)], -2)


def phi_star_congruence(A: Transform, Y):
    """``phi*(P, k) Y(P) phi(P, k)``: a symmetric 6x6 compliance-like matrix from parent to child (10.16)."""
    Phi = phi_matrix(A)
    return mm(mm(swap(Phi), Y), Phi)


def phi_matrix(A: Transform):
    """The dense 6x6 force transform ``phi(P, k) = [[R, p~R], [0, R]]`` (1.31), for tests and teaching."""
    z = jnp.zeros_like(A.R)
    return jnp.concatenate(
        [jnp.concatenate([A.R, mm(skew(A.p), A.R)], -1), jnp.concatenate([z, A.R], -1)], -2
    )


# -- spatial inertia (2.7-2.17) -------------------------------------------------------------------------------


def spatial_inertia(mass, com, I_c):
    """Spatial inertia about the body origin from mass (), centre of mass (3,) and rotational inertia about the
    centre of mass (3, 3), by the parallel-axis theorem (2.11):

        M = [[J_c - m c~ c~, m c~], [-m c~, m 1]]
    """
    cx = skew(com)
    m = mass[..., None, None]
    J = I_c - m * mm(cx, cx)
    top = jnp.concatenate([J, m * cx], -1)
    bottom = jnp.concatenate([-m * cx, m * jnp.eye(3, dtype=I_c.dtype)], -1)
    return jnp.concatenate([top, bottom], -2)


def kinetic_energy(M, V):
    """``1/2 V* M V`` (2.14) of a body with spatial inertia ``M`` (6, 6) and velocity ``V`` (6,)."""
    return 0.5 * dot(V, mv(M, V))
