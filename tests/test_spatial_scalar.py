"""The spatial algebra on lists of scalars (`jaxmb.spatial_scalar`) equals its array twin in `jaxmb.spatial`.

Each operation is run on a batch of random states, a scalar being the array of one entry over the batch, and
compared with the function of the same name in `jaxmb.spatial` (or `jaxmb.joints`, `jax.numpy`) on the stacked
arrays, float64 to RTOL. Every test runs twice: on dense inputs, and with random entries replaced by the constants
0.0 and 1.0, which the scalar form folds while tracing (a kernel's hinge rows and identity blocks), so that both
the folded and the general paths are tied to the twin.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import checks
from jaxmb import rotation, spatial
from jaxmb import spatial_scalar as ss
from jaxmb.joints import KINDS
from jaxmb.spatial import Transform

RTOL = 1e-13  # float64, relative to the largest entry; a few flops deep
N = 32  # states per test

assert_close = functools.partial(checks.assert_close, rtol=RTOL)


# -- between stacked arrays (N, ...) and lists of scalars (N,) --------------------------------------------------------


def to_list(x):
    """An array (N, ...) as nested lists of its entries (N,), the leading axis the states."""
    x = jnp.asarray(x)
    return x if x.ndim == 1 else [to_list(x[:, i]) for i in range(x.shape[1])]


def to_array(x):
    """Nested lists of scalars (arrays (N,) or Python floats) as an array (N, ...)."""
    if isinstance(x, (list, tuple)):
        return jnp.stack([to_array(e) for e in x], 1)
    return jnp.broadcast_to(jnp.asarray(x, jnp.float64), (N,))


class Inputs:
    """Random arguments, each as the stacked array for `jaxmb.spatial` and the list form for `jaxmb.spatial_scalar`.
    With ``constants``, a random third of the entries are the Python floats 0.0 or 1.0 in the list form (the same
    values in the array), the same entry for every state."""

    def __init__(self, seed, constants):
        self.rng, self.constants = np.random.default_rng(seed), constants

    def _pair(self, x):
        x = np.array(x)
        lst = to_list(jnp.asarray(x))
        if not self.constants:
            return jnp.asarray(x), lst
        shape = x.shape[1:]
        for index in np.ndindex(*shape):
            if self.rng.uniform() < 1 / 3:
                c = float(self.rng.integers(2))
                x[(slice(None),) + index] = c
                node = lst
                for i in index[:-1]:
                    node = node[i]
                node[index[-1]] = c
        return jnp.asarray(x), lst

    def array(self, *shape):
        return self._pair(self.rng.normal(size=(N,) + shape))

    def symmetric(self, n):
        A = self.rng.normal(size=(N, n, n))
        A = A + np.swapaxes(A, 1, 2)
        x, lst = self._pair(A)
        if self.constants:  # the same constants in (i, j) and (j, i): the list form stays symmetric
            upper = np.triu(np.ones((n, n), bool))
            x = jnp.where(upper, x, jnp.swapaxes(x, 1, 2))
            lst = [[lst[min(i, j)][max(i, j)] for j in range(n)] for i in range(n)]
        return x, lst

    def rotation(self):
        q = self.rng.normal(size=(N, 4))
        R = rotation.quat_to_matrix(jnp.asarray(q / np.linalg.norm(q, axis=1, keepdims=True)))
        return R, to_list(R)

    def transform(self):
        (R, R_l), (p, p_l) = self.rotation(), self.array(3)
        return Transform(R, p), Transform(R_l, p_l)


@pytest.fixture(params=[False, True], ids=["dense", "with-constants"])
def inputs(request):
    return Inputs(0, request.param)


# -- scalars --------------------------------------------------------------------------------------------------------


def test_scalar_arithmetic_equals_numpy_arithmetic(inputs):
    (a, a_l), (b, b_l), (c, c_l) = inputs.array(8), inputs.array(8), inputs.array(8)
    for i in range(8):
        assert_close(to_array(ss.mul(a_l[i], b_l[i])), a[:, i] * b[:, i])
        assert_close(to_array(ss.add(a_l[i], b_l[i], c_l[i])), a[:, i] + b[:, i] + c[:, i])
        assert_close(to_array(ss.neg(a_l[i])), -a[:, i])
        assert_close(to_array(ss.sub(a_l[i], b_l[i])), a[:, i] - b[:, i])


def test_products_with_constants_fold_while_tracing():
    x = jnp.ones(N)
    assert ss.mul(0.0, x) == 0.0 and isinstance(ss.mul(x, 0.0), float)
    assert ss.mul(1.0, x) is x and ss.mul(x, 1.0) is x
    assert ss.add(0.0, x, 0.0) is x and ss.add(0.0, 0.0) == 0.0
    assert ss.neg(0.0) == 0.0 and isinstance(ss.neg(0.0), float)
    assert ss.dot([0.0, 1.0, 0.0], [x, x, x]) is x


# -- vectors and small matrices ---------------------------------------------------------------------------------------


def test_dot_equals_spatial_dot(inputs):
    (u, u_l), (v, v_l) = inputs.array(6), inputs.array(6)
    assert_close(to_array(ss.dot(u_l, v_l)), spatial.dot(u, v))


def test_swap_equals_spatial_swap(inputs):
    A, A_l = inputs.array(3, 6)
    assert_close(to_array(ss.swap(A_l)), spatial.swap(A))


def test_mv_equals_spatial_mv(inputs):
    (A, A_l), (x, x_l) = inputs.array(6, 6), inputs.array(6)
    assert_close(to_array(ss.mv(A_l, x_l)), spatial.mv(A, x))


def test_mm_equals_spatial_mm(inputs):
    (A, A_l), (B, B_l) = inputs.array(3, 4), inputs.array(4, 5)
    assert_close(to_array(ss.mm(A_l, B_l)), spatial.mm(A, B))


def test_vadd_and_madd_equal_array_sums(inputs):
    (u, u_l), (v, v_l) = inputs.array(6), inputs.array(6)
    (A, A_l), (B, B_l) = inputs.array(3, 3), inputs.array(3, 3)
    assert_close(to_array(ss.vadd(u_l, v_l)), u + v)
    assert_close(to_array(ss.madd(A_l, B_l)), A + B)


def test_eye_equals_the_identity():
    assert_close(to_array(ss.eye(6)), jnp.broadcast_to(jnp.eye(6), (N, 6, 6)))


def test_symmetric_mirrors_the_upper_triangle(inputs):
    A, A_l = inputs.array(6, 6)
    got = to_array(ss.symmetric(lambda i, j: A_l[i][j], 6))
    assert_close(got, jnp.triu(A) + jnp.swapaxes(jnp.triu(A, 1), 1, 2))


def test_rotated_equals_spatial_congruence(inputs):
    (R, R_l), (A, A_l), (S, S_l) = inputs.rotation(), inputs.array(3, 3), inputs.symmetric(3)
    assert_close(to_array(ss.rotated(R_l, A_l, False)), spatial.mm(spatial.mm(R, A), spatial.swap(R)))
    assert_close(to_array(ss.rotated(R_l, S_l, True)), spatial.mm(spatial.mm(R, S), spatial.swap(R)))


def test_from_blocks_inverts_blocks(inputs):
    P, P_l = inputs.symmetric(6)
    A, B, C = ss.blocks(P_l)
    assert_close(to_array(A), P[:, :3, :3])
    assert_close(to_array(B), P[:, :3, 3:])
    assert_close(to_array(C), P[:, 3:, 3:])
    assert_close(to_array(ss.from_blocks(A, B, C)), P)


def test_skew_equals_spatial_skew(inputs):
    l, l_l = inputs.array(3)
    assert_close(to_array(ss.skew(l_l)), spatial.skew(l))


# -- cross products -------------------------------------------------------------------------------------------------


def test_cross3_equals_spatial_cross3(inputs):
    (a, a_l), (b, b_l) = inputs.array(3), inputs.array(3)
    assert_close(to_array(ss.cross3(a_l, b_l)), spatial.cross3(a, b))


def test_cross_motion_equals_spatial_cross_motion(inputs):
    (V, V_l), (m, m_l) = inputs.array(6), inputs.array(6)
    assert_close(to_array(ss.cross_motion(V_l, m_l)), spatial.cross_motion(V, m))


def test_cross_force_equals_spatial_cross_force(inputs):
    (V, V_l), (f, f_l) = inputs.array(6), inputs.array(6)
    assert_close(to_array(ss.cross_force(V_l, f_l)), spatial.cross_force(V, f))


# -- rigid transforms -----------------------------------------------------------------------------------------------


def test_compose_equals_spatial_compose(inputs):
    (A, A_l), (B, B_l) = inputs.transform(), inputs.transform()
    got, expected = ss.compose(A_l, B_l), spatial.compose(A, B)
    assert_close(to_array(got.R), expected.R)
    assert_close(to_array(got.p), expected.p)


def test_phi_star_equals_spatial_phi_star(inputs):
    (X, X_l), (V, V_l) = inputs.transform(), inputs.array(6)
    assert_close(to_array(ss.phi_star(X_l, V_l)), spatial.phi_star(X, V))


def test_phi_equals_spatial_phi(inputs):
    (X, X_l), (f, f_l) = inputs.transform(), inputs.array(6)
    assert_close(to_array(ss.phi(X_l, f_l)), spatial.phi(X, f))


def test_phi_congruence_equals_spatial_phi_congruence(inputs):
    (X, X_l), (P, P_l) = inputs.transform(), inputs.symmetric(6)
    assert_close(to_array(ss.phi_congruence(X_l, P_l)), spatial.phi_congruence(X, P))


# -- joints ---------------------------------------------------------------------------------------------------------


def test_screw_transform_equals_the_screw_joints_transform(inputs):
    (q, q_l), (coef, coef_l) = inputs.array(1), inputs.array(2)
    axis = inputs.rng.normal(size=(N, 3))
    axis = jnp.asarray(axis / np.linalg.norm(axis, axis=1, keepdims=True))
    got = ss.screw_transform(q_l[0], to_list(axis), coef_l)
    expected = jax.vmap(KINDS["screw"].transform)(q, axis, coef)
    assert_close(to_array(got.R), expected.R)
    assert_close(to_array(got.p), expected.p)
