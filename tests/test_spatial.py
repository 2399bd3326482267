"""Spatial algebra and rotation identities (book ch. 1-2).

Every function is checked on a batch of random arguments (fixed seeds) against the dense 6x6 or 3x3 matrix form of
the same operator, or against an algebraic identity the operator must satisfy. float64, tolerance RTOL.
"""

import functools
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.linalg import expm
from jax.test_util import check_grads

import checks
from jaxmb import rotation, spatial
from jaxmb.spatial import Transform

RTOL = 1e-12  # float64; these are a few flops deep
N = 16  # random samples per test


assert_close = functools.partial(checks.assert_close, rtol=RTOL)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def random_rotations(rng, n=N):
    q = rng.normal(size=(n, 4))
    return np.asarray(rotation.quat_to_matrix(jnp.asarray(q / np.linalg.norm(q, axis=1, keepdims=True))))


def random_transforms(rng, n=N):
    return Transform(jnp.asarray(random_rotations(rng, n)), jnp.asarray(rng.normal(size=(n, 3))))


def random_inertias(rng, n=N):
    """(mass, com, I_c) with I_c symmetric positive definite."""
    mass = rng.uniform(0.5, 3.0, n)
    com = rng.normal(size=(n, 3)) * 0.3
    L = rng.normal(size=(n, 3, 3)) * 0.3
    I_c = L @ np.swapaxes(L, -1, -2) + 0.01 * np.eye(3)
    return jnp.asarray(mass), jnp.asarray(com), jnp.asarray(I_c)


def tilde(l):
    """Reference 3x3 tilde matrix (1.9), written out."""
    l = np.asarray(l)
    o = np.zeros(l.shape[:-1])
    x, y, z = l[..., 0], l[..., 1], l[..., 2]
    return np.stack([np.stack([o, -z, y], -1), np.stack([z, o, -x], -1), np.stack([-y, x, o], -1)], -2)


def motion_cross_matrix(V):
    """Reference ``V~ = [[w~, 0], [v~, w~]]`` (1.23) as a dense (..., 6, 6) matrix."""
    V = np.asarray(V)
    w, v = tilde(V[..., :3]), tilde(V[..., 3:])
    return np.concatenate([np.concatenate([w, np.zeros_like(w)], -1), np.concatenate([v, w], -1)], -2)


def phi_reference(A):
    """Reference ``phi(P, k) = [[R, p~ R], [0, R]]`` (1.31) as a dense matrix."""
    R, p = np.asarray(A.R), np.asarray(A.p)
    return np.concatenate([np.concatenate([R, tilde(p) @ R], -1), np.concatenate([np.zeros_like(R), R], -1)], -2)


def matvec(A, x):
    return np.einsum("...ij,...j->...i", A, x)


def dot(a, b):
    return np.sum(np.asarray(a) * np.asarray(b), -1)


# -- small products ------------------------------------------------------------------------------------------------


FORMS = {
    "sums-of-slices": (spatial._mm_unrolled, spatial._mv_unrolled, spatial._dot_unrolled),
    "multiply-reduce": (spatial._mm_reduced, spatial._mv_reduced, spatial._dot_reduced),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_both_forms_of_the_small_products_are_matrix_products(rng, form):
    """Both lowerings of mm, mv, dot (the CPU one without reductions, the other backends' broadcast-reduce) are
    the matrix products, for 3x3, 6x6 and non-square operands."""
    mm, mv, dot_ = FORMS[form]
    for m, k, n in [(3, 3, 3), (6, 6, 6), (2, 6, 4)]:
        A, B, x = rng.normal(size=(N, m, k)), rng.normal(size=(N, k, n)), rng.normal(size=(N, k))
        assert_close(mm(jnp.asarray(A), jnp.asarray(B)), A @ B)
        assert_close(mv(jnp.asarray(A), jnp.asarray(x)), np.einsum("nik,nk->ni", A, x))
        assert_close(dot_(jnp.asarray(x), jnp.asarray(x[::-1])), np.einsum("nk,nk->n", x, x[::-1]))


def test_small_product_primitives_under_jit_vmap_and_broadcasting(rng):
    A, B, x = rng.normal(size=(N, 6, 4)), rng.normal(size=(4, 3)), rng.normal(size=(N, 4))
    assert_close(jax.jit(spatial.mm)(A, B), A @ B)  # B broadcast over A's leading axis
    assert_close(jax.vmap(spatial.mv, (0, None))(A, x[0]), A @ x[0])
    assert_close(jax.jit(jax.vmap(jax.vmap(spatial.dot)))(A, A[::-1]), np.sum(A * A[::-1], -1))


@pytest.mark.parametrize("product", ["mm", "mv", "dot"])
def test_small_product_derivatives_are_products(rng, product):
    """The primitives' derivative rules (d(A B) = dA B + A dB, transposed) agree with finite differences in both
    modes, to second order, with a broadcast operand too."""
    A, B, x = rng.normal(size=(3, 6, 4)), rng.normal(size=(4, 5)), rng.normal(size=(3, 4))
    f, args, unbatched = {"mm": (spatial.mm, (A, B), B), "mv": (spatial.mv, (A, x), x[0]),
                          "dot": (spatial.dot, (x, x[::-1]), x[0])}[product]
    check_grads(f, args, order=2, modes=("fwd", "rev"))
    check_grads(jax.vmap(f, (0, None)), (args[0], unbatched), order=1, modes=("fwd", "rev"))


# -- 3-vectors and cross products (1.9, 1.23-1.27) ----------------------------------------------------------------


def test_skew_is_cross_product_matrix(rng):
    l, x = rng.normal(size=(2, N, 3))
    S = spatial.skew(jnp.asarray(l))
    assert_close(S, tilde(l))
    assert_close(matvec(S, x), np.cross(l, x))
    assert_close(S, -np.swapaxes(S, -1, -2))


def test_cross3_is_numpy_cross_with_broadcasting(rng):
    a, b = rng.normal(size=(N, 3)), rng.normal(size=(N, 3))
    assert_close(spatial.cross3(jnp.asarray(a), jnp.asarray(b)), np.cross(a, b))
    assert_close(jax.jit(spatial.cross3)(a[0], b), np.cross(a[0], b))  # a broadcast over b's leading axis
    assert_close(jax.vmap(spatial.cross3, (None, 0))(a[0], b), np.cross(a[0], b))
    mixed = spatial.cross3(jnp.asarray(a[0], jnp.float32), jnp.asarray(b))  # numpy's type promotion
    assert mixed.dtype == jnp.float64
    assert_close(mixed, np.cross(a[0].astype(np.float32), b))


def test_swap_transposes_the_last_two_axes(rng):
    A = rng.normal(size=(2, N, 3, 6))
    assert_close(spatial.swap(jnp.asarray(A)), np.swapaxes(A, -1, -2))


def test_cross_motion_is_dense_motion_cross_matrix(rng):
    """cross_motion(V, m) == V~ m with V~ = [[w~, 0], [v~, w~]] (1.23)."""
    V, m = rng.normal(size=(2, N, 6))
    assert_close(spatial.cross_motion(jnp.asarray(V), jnp.asarray(m)), matvec(motion_cross_matrix(V), m))


def test_cross_force_is_minus_transpose_of_cross_motion(rng):
    """cross_force(V, f) == V-bar f with V-bar = -(V~)* (1.25; the corrected form of 1.26)."""
    V, f = rng.normal(size=(2, N, 6))
    expected = matvec(-np.swapaxes(motion_cross_matrix(V), -1, -2), f)
    assert_close(spatial.cross_force(jnp.asarray(V), jnp.asarray(f)), expected)


def test_cross_motion_lie_algebra_identities(rng):
    """(1.24): A~A = 0; A~B = -B~A; Jacobi A~(B~C) + B~(C~A) + C~(A~B) = 0; (A~B)~ = A~B~ - B~A~."""
    A, B, C = (jnp.asarray(x) for x in rng.normal(size=(3, N, 6)))
    cm = spatial.cross_motion
    assert_close(cm(A, A), np.zeros((N, 6)))
    assert_close(cm(A, B), -cm(B, A))
    assert_close(cm(A, cm(B, C)) + cm(B, cm(C, A)) + cm(C, cm(A, B)), np.zeros((N, 6)))
    lhs = motion_cross_matrix(cm(A, B))
    tA, tB = motion_cross_matrix(A), motion_cross_matrix(B)
    assert_close(lhs, tA @ tB - tB @ tA)


def test_cross_force_identities(rng):
    """(1.26): z* z-bar x = 0 for every x (z-bar* z = 0), and z-bar z = [0; w~v]; (1.27c): A* B~ C = B* C-bar A."""
    z, x, A, B, C = rng.normal(size=(5, N, 6))
    zj = jnp.asarray(z)
    assert_close(dot(z, spatial.cross_force(zj, jnp.asarray(x))), np.zeros(N))
    expected = np.concatenate([np.zeros((N, 3)), np.cross(z[:, :3], z[:, 3:])], -1)
    assert_close(spatial.cross_force(zj, zj), expected)
    lhs = dot(A, spatial.cross_motion(jnp.asarray(B), jnp.asarray(C)))
    assert_close(lhs, dot(B, spatial.cross_force(jnp.asarray(C), jnp.asarray(A))))


def test_gyroscopic_force_does_no_work(rng):
    """V* b == 0 with b = V-bar M V (2.28, 2.29)."""
    mass, com, I_c = random_inertias(rng)
    M = spatial.spatial_inertia(mass, com, I_c)
    V = jnp.asarray(rng.normal(size=(N, 6)))
    b = spatial.cross_force(V, spatial.mv(M, V))
    assert np.abs(np.asarray(b)).max() > 1e-2
    assert_close(dot(V, b), np.zeros(N))


# -- rigid transforms (1.29-1.41) -----------------------------------------------------------------------------


def test_phi_matrix_block_form(rng):
    """phi_matrix == [[R, p~ R], [0, R]] (1.31)."""
    A = random_transforms(rng)
    assert_close(spatial.phi_matrix(A), phi_reference(A))


def test_phi_and_phi_star_apply_phi_matrix(rng):
    """phi(A, f) == phi f; phi_star(A, V) == phi* V (1.33, 1.41, 1.47); phi_star_inv(A, V) == phi^-* V."""
    A = random_transforms(rng)
    V, f = rng.normal(size=(2, N, 6))
    P = phi_reference(A)
    assert_close(spatial.phi(A, jnp.asarray(f)), matvec(P, f))
    assert_close(spatial.phi_star(A, jnp.asarray(V)), matvec(np.swapaxes(P, -1, -2), V))
    assert_close(spatial.phi_star_inv(A, jnp.asarray(V)), np.linalg.solve(np.swapaxes(P, -1, -2), V[..., None])[..., 0])


def test_phi_star_inv_inverts_phi_star(rng):
    A = random_transforms(rng)
    V = jnp.asarray(rng.normal(size=(N, 6)))
    assert_close(spatial.phi_star_inv(A, spatial.phi_star(A, V)), V)
    assert_close(spatial.phi_star(A, spatial.phi_star_inv(A, V)), V)


def test_power_is_invariant_under_phi_and_phi_star(rng):
    """f(P)* V(P) == f(k)* V(k) with f(P) = phi(P, k) f(k) and V(k) = phi*(P, k) V(P): the force transform is the
    dual of the velocity transform (1.47)."""
    A = random_transforms(rng)
    f_k, V_P = (jnp.asarray(x) for x in rng.normal(size=(2, N, 6)))
    assert_close(dot(spatial.phi(A, f_k), V_P), dot(f_k, spatial.phi_star(A, V_P)))


def test_phi_star_preserves_cross_products(rng):
    """phi*(x, y) V~(x) = V~(y) phi*(x, y) (1.35): phi* maps V~ m to (phi* V)~ (phi* m), and phi maps the force
    cross product V-bar f to (phi^-* V)-bar (phi f)."""
    A = random_transforms(rng)
    V, m = (jnp.asarray(x) for x in rng.normal(size=(2, N, 6)))
    lhs = spatial.phi_star(A, spatial.cross_motion(V, m))
    assert_close(lhs, spatial.cross_motion(spatial.phi_star(A, V), spatial.phi_star(A, m)))
    lhs = spatial.phi(A, spatial.cross_force(V, m))
    assert_close(lhs, spatial.cross_force(spatial.phi_star_inv(A, V), spatial.phi(A, m)))


def homogeneous(A):
    R, p = np.asarray(A.R), np.asarray(A.p)
    top = np.concatenate([R, p[..., None]], -1)
    bottom = np.broadcast_to(np.array([0.0, 0.0, 0.0, 1.0]), R.shape[:-2] + (1, 4))
    return np.concatenate([top, bottom], -2)


def test_compose_and_inverse_group_laws(rng):
    """compose is the product of homogeneous matrices (1.5), associative, with inverse as the group inverse;
    phi(x, z) = phi(x, y) phi(y, z) and phi^-1(x, y) = phi(y, x) (Lemma 1.1, 1.32)."""
    A, B, C = random_transforms(rng), random_transforms(rng), random_transforms(rng)
    AB = spatial.compose(A, B)
    assert_close(homogeneous(AB), homogeneous(A) @ homogeneous(B))
    lhs, rhs = spatial.compose(AB, C), spatial.compose(A, spatial.compose(B, C))
    assert_close(lhs.R, rhs.R)
    assert_close(lhs.p, rhs.p)
    for X in (spatial.compose(A, spatial.inverse(A)), spatial.compose(spatial.inverse(A), A)):
        assert_close(X.R, np.broadcast_to(np.eye(3), (N, 3, 3)))
        assert_close(X.p, np.zeros((N, 3)))
    assert_close(homogeneous(spatial.inverse(A)), np.linalg.inv(homogeneous(A)))
    assert_close(spatial.phi_matrix(AB), phi_reference(A) @ phi_reference(B))
    assert_close(spatial.phi_matrix(spatial.inverse(A)), np.linalg.inv(phi_reference(A)))
    identity = Transform.identity(jnp.float64)
    assert_close(spatial.phi_matrix(identity), np.eye(6))


def test_transform_point_composes(rng):
    A, B = random_transforms(rng), random_transforms(rng)
    x = jnp.asarray(rng.normal(size=(N, 3)))
    expected = spatial.transform_point(A, spatial.transform_point(B, x))
    assert_close(spatial.transform_point(spatial.compose(A, B), x), expected)
    assert_close(spatial.transform_point(A, x), matvec(np.asarray(A.R), np.asarray(x)) + np.asarray(A.p))


def test_phi_congruence_is_dense_product(rng):
    """phi_congruence(A, P) == phi P phi* for symmetric P (2.12, 6.28), and it stays symmetric."""
    A = random_transforms(rng)
    L = rng.normal(size=(N, 6, 6))
    P = L @ np.swapaxes(L, -1, -2)
    out = spatial.phi_congruence(A, jnp.asarray(P))
    Phi = phi_reference(A)
    assert_close(out, Phi @ P @ np.swapaxes(Phi, -1, -2))
    assert_close(out, np.swapaxes(np.asarray(out), -1, -2))


# -- spatial inertia and energy (2.7-2.17) ------------------------------------------------------------------------


def test_spatial_inertia_block_form(rng):
    """M = [[J, m c~], [-m c~, m 1]] with J = J_c - m c~ c~ (2.7, 2.11); J(origin) >= J(C)."""
    mass, com, I_c = random_inertias(rng)
    M = np.asarray(spatial.spatial_inertia(mass, com, I_c))
    m, cx = np.asarray(mass)[:, None, None], tilde(com)
    assert_close(M[:, :3, :3], np.asarray(I_c) - m * cx @ cx)
    assert_close(M[:, :3, 3:], m * cx)
    assert_close(M[:, 3:, :3], -m * cx)
    assert_close(M[:, 3:, 3:], m * np.eye(3))
    assert np.linalg.eigvalsh(M[:, :3, :3] - np.asarray(I_c)).min() >= -1e-12
    assert np.linalg.eigvalsh(M).min() > 0


def test_spatial_inertia_parallel_axis(rng):
    """M(x) = phi(x, C) M(C) phi*(x, C) with M(C) = diag(J_c, m 1) (2.10, 2.12), also for a centre-of-mass frame
    rotated by R (then J_c is R* I_c R in its own axes)."""
    mass, com, I_c = random_inertias(rng)
    R = jnp.asarray(random_rotations(rng))
    Jc_local = jnp.swapaxes(R, -1, -2) @ I_c @ R
    M_C = np.zeros((N, 6, 6))
    M_C[:, :3, :3] = np.asarray(Jc_local)
    M_C[:, 3:, 3:] = np.asarray(mass)[:, None, None] * np.eye(3)
    expected = spatial.phi_congruence(Transform(R, com), jnp.asarray(M_C))
    assert_close(spatial.spatial_inertia(mass, com, I_c), expected)


def test_kinetic_energy_and_momentum_are_frame_invariant(rng):
    """KE = 1/2 V* M V is the same about any point (2.14); h(P) = phi(P, k) h(k) (2.16, 2.17), with
    M(P) = phi M(k) phi* and V(k) = phi* V(P)."""
    mass, com, I_c = random_inertias(rng)
    M_k = spatial.spatial_inertia(mass, com, I_c)
    A = random_transforms(rng)
    V_P = jnp.asarray(rng.normal(size=(N, 6)))
    V_k = spatial.phi_star(A, V_P)
    M_P = spatial.phi_congruence(A, M_k)
    ke_k = spatial.kinetic_energy(M_k, V_k)
    assert_close(ke_k, 0.5 * np.einsum("ni,nij,nj->n", V_k, M_k, V_k))
    assert_close(spatial.kinetic_energy(M_P, V_P), ke_k)
    assert_close(spatial.mv(M_P, V_P), spatial.phi(A, spatial.mv(M_k, V_k)))


def test_composite_inertia_of_two_bodies(rng):
    """Inertias moved to a common frame add up (Sect. 2.1.3): the sum has the total mass and the combined centre
    of mass, read back from its blocks."""
    (m1, c1, I1), (m2, c2, I2) = random_inertias(rng), random_inertias(rng)
    A = random_transforms(rng)  # pose of body 2 in body 1
    total = spatial.spatial_inertia(m1, c1, I1) + spatial.phi_congruence(A, spatial.spatial_inertia(m2, c2, I2))
    total = np.asarray(total)
    m = np.asarray(m1 + m2)
    assert_close(total[:, 3:, 3:], m[:, None, None] * np.eye(3))
    c2_in_1 = spatial.transform_point(A, c2)
    c = (np.asarray(m1)[:, None] * np.asarray(c1) + np.asarray(m2)[:, None] * np.asarray(c2_in_1)) / m[:, None]
    assert_close(total[:, :3, 3:], m[:, None, None] * tilde(c))


# -- rotations and quaternions ------------------------------------------------------------------------------------


def random_quaternions(rng, n=N):
    q = rng.normal(size=(n, 4))
    return jnp.asarray(q / np.linalg.norm(q, axis=1, keepdims=True))


def elementary(axis, angle):
    """Rotation about a coordinate axis, written out."""
    c, s = np.cos(angle), np.sin(angle)
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    R = np.eye(3)
    R[i, i], R[i, j], R[j, i], R[j, j] = c, -s, s, c
    return R


def test_quat_to_matrix_is_a_rotation(rng):
    """R R* = 1, det R = 1; R(q) == R(-q); [cos t/2, 0, 0, sin t/2] is the rotation by t about z."""
    q = random_quaternions(rng)
    R = np.asarray(rotation.quat_to_matrix(q))
    assert_close(R @ np.swapaxes(R, -1, -2), np.broadcast_to(np.eye(3), R.shape))
    assert_close(np.linalg.det(R), np.ones(N))
    assert_close(rotation.quat_to_matrix(-q), R)
    t = 0.7
    qz = jnp.array([np.cos(t / 2), 0.0, 0.0, np.sin(t / 2)])
    assert_close(rotation.quat_to_matrix(qz), elementary(2, t))


def test_quat_multiply_matches_matrix_product(rng):
    """R(a (x) b) == R(a) R(b) (Hamilton product, scalar first); [1, 0, 0, 0] is the identity; associative."""
    a, b, c = random_quaternions(rng), random_quaternions(rng), random_quaternions(rng)
    ab = rotation.quat_multiply(a, b)
    assert_close(rotation.quat_to_matrix(ab), rotation.quat_to_matrix(a) @ rotation.quat_to_matrix(b))
    assert_close(np.linalg.norm(ab, axis=-1), np.ones(N))
    one = jnp.broadcast_to(jnp.array([1.0, 0.0, 0.0, 0.0]), a.shape)
    assert_close(rotation.quat_multiply(one, a), a)
    assert_close(rotation.quat_multiply(a, one), a)
    assert_close(rotation.quat_multiply(ab, c), rotation.quat_multiply(a, rotation.quat_multiply(b, c)))
    # i j = k
    i, j = jnp.array([0.0, 1.0, 0.0, 0.0]), jnp.array([0.0, 0.0, 1.0, 0.0])
    assert_close(rotation.quat_multiply(i, j), np.array([0.0, 0.0, 0.0, 1.0]))


def test_axis_angle_to_matrix_is_matrix_exponential(rng):
    """Rodrigues: R(n, t) == expm(t n~); R n == n."""
    n = rng.normal(size=(N, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    t = rng.uniform(-4, 4, N)
    R = rotation.axis_angle_to_matrix(jnp.asarray(n), jnp.asarray(t))
    assert_close(R, np.stack([expm(jnp.asarray(tilde(t[i] * n[i]))) for i in range(N)]))
    assert_close(matvec(np.asarray(R), n), n)


@pytest.mark.parametrize("angle", [0.0, 1e-9, 1e-5, 1e-4 * (1 - 1e-9), 1e-4 * (1 + 1e-9), 1e-3, 0.5, 3.0, 7.0])
def test_quat_exp_matches_axis_angle(rng, angle):
    """quat_exp(t n) == [cos t/2, sin(t/2) n], a unit quaternion whose matrix is axis_angle_to_matrix(n, t), on
    both sides of the small-angle branch."""
    n = rng.normal(size=3)
    n /= np.linalg.norm(n)
    q = rotation.quat_exp(jnp.asarray(angle * n))
    assert_close(q, np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * n]), rtol=1e-15)
    assert_close(np.linalg.norm(q), 1.0, rtol=1e-15)
    assert_close(rotation.quat_to_matrix(q), rotation.axis_angle_to_matrix(jnp.asarray(n), jnp.asarray(angle)))


def test_quat_exp_gradient_is_finite_at_zero():
    """d quat_exp / dr at r = 0 is [0; 1/2 I] in forward and reverse mode (no NaN from |r|), and the gradient is
    continuous across the small-angle branch."""
    expected = np.concatenate([np.zeros((1, 3)), 0.5 * np.eye(3)])
    zero = jnp.zeros(3)
    jacfwd, jacrev = jax.jit(jax.jacfwd(rotation.quat_exp)), jax.jit(jax.jacrev(rotation.quat_exp))
    assert_close(jacfwd(zero), expected)
    assert_close(jacrev(zero), expected)
    n = jnp.asarray([0.48, -0.6, 0.64])
    assert_close(jacfwd(0.99999e-4 * n), jacfwd(1.00001e-4 * n), rtol=1e-8)
    assert_close(jacrev(1e-7 * n), jacfwd(1e-7 * n))
    check_grads(jax.jit(rotation.quat_exp), (0.3 * n,), order=1, modes=("fwd", "rev"))


def test_rpy_to_matrix_is_product_of_elementary_rotations(rng):
    """URDF roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    rpy = rng.uniform(-np.pi, np.pi, (N, 3))
    R = rotation.rpy_to_matrix(jnp.asarray(rpy))
    expected = np.stack([elementary(2, y) @ elementary(1, p) @ elementary(0, r) for r, p, y in rpy])
    assert_close(R, expected)


def test_quaternion_order_adapters_round_trip(rng):
    q = random_quaternions(rng)
    assert_close(rotation.xyzw_to_wxyz(rotation.wxyz_to_xyzw(q)), q)
    assert_close(rotation.wxyz_to_xyzw(jnp.array([1.0, 2.0, 3.0, 4.0])), np.array([2.0, 3.0, 4.0, 1.0]))
    assert_close(rotation.xyzw_to_wxyz(jnp.array([2.0, 3.0, 4.0, 1.0])), np.array([1.0, 2.0, 3.0, 4.0]))
