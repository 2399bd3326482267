"""The spatial algebra on lists of scalars, for kernels of one state per lane (`jaxmb.dynamics.fused`).

A Triton kernel of one state per lane wants straight-line code on scalars: the concatenates and slices of
`jaxmb.spatial`, which works on stacked arrays, would only be built and taken apart again inside it. Here every
symbol of the book is a Python list of scalars (a 6-vector is a list of 6, a 3x3 or 6x6 matrix a list of rows), and
a scalar is anything with ``+``, ``-`` and ``*``: in a kernel an array of the states of one block, in the tests an
array of random states. The Python floats ``0.0`` and ``1.0`` are constants known while tracing: products with them
and sums with zero are folded away, so a hinge row ``[0, 0, 1, 0, 0, 0]`` costs one multiply, not six.

Each operation is the twin of the function of the same name in `jaxmb.spatial` (``phi_star`` of ``phi_star``,
``mv`` of ``mv``, ...), with the same conventions (angular first; a `jaxmb.spatial.Transform` ``(R, p)`` is the pose
of the child in the parent, here with ``R`` a list of rows and ``p`` a list) and the same equation numbers;
`tests/test_spatial_scalar.py` ties each to its twin.
"""

import functools

import jax.numpy as jnp

from jaxmb.spatial import Transform

# -- scalars, folding the constants 0.0 and 1.0 while tracing ------------------------------------------------------


def is_constant(x, c):
    """Whether ``x`` is the Python float ``c``, a constant known while tracing."""
    return isinstance(x, float) and x == c


def mul(a, b):
    """``a b``, folded where a factor is the constant 0 or 1."""
    if is_constant(a, 0.0) or is_constant(b, 0.0):
        return 0.0
    if is_constant(a, 1.0):
        return b
    if is_constant(b, 1.0):
        return a
    return a * b


def add(*terms):
    """The sum of ``terms`` from left to right, leaving out the constant zeros (0 if all are)."""
    terms = [t for t in terms if not is_constant(t, 0.0)]
    return functools.reduce(lambda s, t: s + t, terms) if terms else 0.0


def neg(a):
    """``-a``, folded for the constant 0."""
    return 0.0 if is_constant(a, 0.0) else -a


def sub(a, b):
    """``a - b``, as ``a + (-b)``."""
    return add(a, neg(b))


# -- vectors and small matrices ---------------------------------------------------------------------------------------


def dot(u, v):
    """``sum_i u_i v_i`` (`jaxmb.spatial.dot`)."""
    return add(*map(mul, u, v))


def column(A, j):
    """Column ``j`` of the matrix ``A`` (a list of rows)."""
    return [row[j] for row in A]


def swap(A):
    """``A*``, the transpose (`jaxmb.spatial.swap`)."""
    return [column(A, j) for j in range(len(A[0]))]


def mv(A, x):
    """``A x`` (`jaxmb.spatial.mv`)."""
    return [dot(row, x) for row in A]


def mm(A, B):
    """``A B`` (`jaxmb.spatial.mm`)."""
    return [[dot(row, column(B, j)) for j in range(len(B[0]))] for row in A]


def vadd(u, v):
    """``u + v`` of vectors, entry by entry."""
    return [add(a, b) for a, b in zip(u, v)]


def madd(A, B):
    """``A + B`` of matrices, entry by entry."""
    return [[add(a, b) for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]


def eye(n):
    """The n x n identity, of the constants 0 and 1."""
    return [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]


def symmetric(entry, n):
    """The n x n symmetric matrix whose entry (i, j), i <= j, is ``entry(i, j)``: each computed once and shared by
    (i, j) and (j, i)."""
    S = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            S[i][j] = S[j][i] = entry(i, j)
    return S


def rotated(R, A, is_symmetric):
    """``R A R*`` of 3x3 matrices (``mm(mm(R, A), swap(R))``), each entry pair computed once when ``A`` is
    symmetric."""
    RA = mm(R, A)
    if is_symmetric:
        return symmetric(lambda i, j: dot(RA[i], R[j]), 3)
    return [[dot(RA[i], R[j]) for j in range(3)] for i in range(3)]


def blocks(P):
    """The 3x3 blocks ``A, B, C`` of the 6x6 ``P = [[A, B], [B*, C]]``; its lower-left block is not read."""
    return [row[:3] for row in P[:3]], [row[3:] for row in P[:3]], [row[3:] for row in P[3:]]


def from_blocks(A, B, C):
    """The 6x6 ``[[A, B], [B*, C]]``, symmetric for symmetric ``A`` and ``C``."""
    return [A[i] + B[i] for i in range(3)] + [column(B, i) + C[i] for i in range(3)]


def skew(l):
    """The tilde matrix ``l~`` with ``l~ x = l x x`` (1.9) (`jaxmb.spatial.skew`)."""
    return [[0.0, neg(l[2]), l[1]], [l[2], 0.0, neg(l[0])], [neg(l[1]), l[0], 0.0]]


# -- cross products (1.23, 1.25) ------------------------------------------------------------------------------------


def cross3(a, b):
    """``a x b`` of 3-vectors (`jaxmb.spatial.cross3`)."""
    return [sub(mul(a[1], b[2]), mul(a[2], b[1])), sub(mul(a[2], b[0]), mul(a[0], b[2])),
            sub(mul(a[0], b[1]), mul(a[1], b[0]))]


def cross_motion(V, m):
    """``V~ m``: the motion cross product of two 6-vectors (`jaxmb.spatial.cross_motion`)."""
    w, v = V[:3], V[3:]
    return cross3(w, m[:3]) + vadd(cross3(w, m[3:]), cross3(v, m[:3]))


def cross_force(V, f):
    """``V-bar f = -(V~)* f``: the force cross product; ``b = V-bar M V`` (2.28) (`jaxmb.spatial.cross_force`)."""
    w, v = V[:3], V[3:]
    return vadd(cross3(w, f[:3]), cross3(v, f[3:])) + cross3(w, f[3:])


# -- rigid transforms (1.29-1.41): X = Transform(R, p), the pose of the child frame in its parent's ----------------


def compose(A, B):
    """Pose of frame c in frame a, from b in a (``A``) and c in b (``B``) (1.5) (`jaxmb.spatial.compose`)."""
    return Transform(mm(A.R, B.R), vadd(A.p, mv(A.R, B.p)))


def phi_star(X, V):
    """``V(k) = phi*(P, k) V(P)``: a motion vector from parent to child coordinates (1.33, 1.41)
    (`jaxmb.spatial.phi_star`)."""
    w, v = V[:3], V[3:]
    Rt = swap(X.R)
    return mv(Rt, w) + mv(Rt, [sub(a, b) for a, b in zip(v, cross3(X.p, w))])


def phi(X, f):
    """``f(P) = phi(P, k) f(k)``: a force from child to parent coordinates (1.47) (`jaxmb.spatial.phi`)."""
    n, F = mv(X.R, f[:3]), mv(X.R, f[3:])
    return vadd(n, cross3(X.p, F)) + F


def phi_congruence(X, P):
    """``phi(P, k) P(k) phi*(P, k)``: a symmetric 6x6 inertia-like matrix from child to parent (2.12, 6.28), by 3x3
    blocks as `jaxmb.spatial.phi_congruence`, each entry pair of a symmetric block computed once."""
    Pa, Pb, Pc = blocks(P)
    Pa, Pb, Pc = rotated(X.R, Pa, True), rotated(X.R, Pb, False), rotated(X.R, Pc, True)
    T = skew(X.p)
    TPc, TPbt = mm(T, Pc), mm(T, swap(Pb))
    top_left = symmetric(lambda i, j: add(Pa[i][j], TPbt[i][j], TPbt[j][i], dot(TPc[i], T[j])), 3)
    return from_blocks(top_left, madd(Pb, TPc), Pc)


# -- joints ---------------------------------------------------------------------------------------------------------


def screw_transform(q, axis, coef):
    """The pose of a screw joint's child in its parent (`jaxmb.joints`, kind ``screw``): a rotation by ``c_w q``
    about the unit ``axis`` by Rodrigues' formula ``1 + sin a~ + (1 - cos) a~ a~`` (`jaxmb.rotation
    .axis_angle_to_matrix`) and a translation ``c_v q`` along it; ``coef = (c_w, c_v)``."""
    ax = skew(axis)
    angle = mul(coef[0], q)
    s, c = jnp.sin(angle), jnp.cos(angle)
    R = madd(madd(eye(3), [[mul(s, x) for x in row] for row in ax]),
             [[mul(1.0 - c, x) for x in row] for row in mm(ax, ax)])
    return Transform(R, [mul(a, mul(coef[1], q)) for a in axis])
