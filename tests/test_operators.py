"""The spatial operator layer on random trees, in float64: articulated-body quantities, the innovations
factorization, the mass-matrix inverse and log-determinant, inter-body forces and hybrid dynamics.

Each identity test is named by its equation in Jain's book (for the inter-body forces, A. Jain, "Computing Inter-
Body Constraint Forces in Recursive Multibody Dynamics", 2018, eq. 18). The dense operators come from
`jaxmb.operators` (numpy stacking of blocks computed by the recursions); the matrices they are compared with come
from other recursions (CRBA, the ancestor walks of `innovations_factors`, the O(N) solves), so each test compares
two independent routes. """

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import checks
import jaxmb
from jaxmb.dynamics.ab_steps import solve_log_det
from jaxmb.dynamics.factorization import _common_ancestor_terms
from jaxmb.testing import random_model, random_state

RTOL = 1e-10

MODEL_SPECS = {
    "chain-revolute": dict(seed=1, n_bodies=5, joint_mix="revolute", floating_base=False, branching=0.0),
    "tree-screw": dict(seed=16, n_bodies=6, joint_mix="screw", floating_base=False, branching=0.7),
    "floating-mixed": dict(seed=41, n_bodies=7, joint_mix="mixed", floating_base=True, branching=0.4),
}
ALL = list(MODEL_SPECS)
N_STATES = 2


assert_close = functools.partial(checks.assert_close, rtol=RTOL)


def _evaluate(model, q, qd, u, f_ext, mask):
    ab = jaxmb.articulated_body(model, q, qd, u, f_ext)
    L, D = jaxmb.innovations_factors(model, q)
    return {
        "ab": ab,
        "inertias": jaxmb.articulated_inertias(model, q),
        "M": jaxmb.mass_matrix(model, q),
        "C": jaxmb.bias_forces(model, q, qd, f_ext),
        "L": L,
        "D": D,
        "L_inv": jaxmb.innovations_factor_inverse(model, q),
        "M_inv": jaxmb.mass_matrix_inverse(model, q),
        "M_inv_columns": jax.lax.map(lambda e: jaxmb.mass_matrix_inverse_times(model, q, e), jnp.eye(model.nv)).T,
        "M_inv_u": jaxmb.mass_matrix_inverse_times(model, q, u),
        "log_det": jaxmb.log_det_mass_matrix(model, q),
        "f_eq18": jaxmb.interbody_forces(model, q, qd, u, f_ext),
        "f_rnea": jaxmb.body_forces(model, q, qd, ab.qdd, f_ext),
        "hybrid": jaxmb.hybrid_dynamics(model, q, qd, u, mask, f_ext),
        "hybrid_free": jaxmb.hybrid_dynamics(model, q, qd, u, jnp.zeros(model.nv, bool), f_ext),
        "hybrid_prescribed": jaxmb.hybrid_dynamics(model, q, qd, u, jnp.ones(model.nv, bool), f_ext),
        "inverse_dynamics": jaxmb.inverse_dynamics(model, q, qd, u, f_ext),
        "A_g": jaxmb.centroidal_momentum_matrix(model, q),
        "h_G": jaxmb.centroidal_momentum(model, q, qd),
    }


# one program per model, called for each state (a program for the batch, through the batching rules of the sweeps,
# takes longer to compile; tests/test_batching.py checks those rules); compiled quickly (`checks.fast_jit`):
# compiling dominates this module
_EVALUATE = checks.fast_jit(_evaluate)


@functools.cache
def evaluated(name):
    """(model, [(state, outputs)]) for a few random states, one compiled program per model."""
    model = random_model(**MODEL_SPECS[name])
    states = [_draw(model, jax.random.PRNGKey(2000 * (ALL.index(name) + 1) + i)) for i in range(N_STATES)]
    results = [(s, jax.tree.map(np.asarray, _EVALUATE(model, *s))) for s in states]
    return model, results


@checks.fast_jit  # one program per model instead of op by op
def _draw(model, key):
    """A random state (q, qd, u), external forces and a mask of prescribed coordinates."""
    q, qd, u = random_state(model, key)
    f_ext = jax.random.normal(jax.random.fold_in(key, 7), (model.nb, 6), jnp.float64)
    mask = jax.random.bernoulli(jax.random.fold_in(key, 8), 0.5, (model.nv,))
    return q, qd, u, f_ext, mask


@functools.cache
def _dense_operators(name, i):
    model, results = evaluated(name)
    return checks.dense_operators(model, results[i][0][0])


def operator_cases(name):
    """(model, state, outputs, dense operators at the state's q) for each state; the dense operators are
    computed once per state, for all tests."""
    model, results = evaluated(name)
    for i, (state, out) in enumerate(results):
        yield model, state, out, _dense_operators(name, i)


def _blocks(A):
    n = A.shape[0] // 6
    return [A[6 * k : 6 * k + 6, 6 * k : 6 * k + 6] for k in range(n)]


# -- articulated-body quantities (ch. 6) -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_articulated_inertias_are_the_sweeps_at_any_velocity_and_forces(name):
    """`articulated_inertias(q)` (pass 1 without residual forces) gives the q-only fields of `articulated_body` at a
    state with velocities, forces and external forces."""
    for _, _, out, _ in operator_cases(name):
        for field, value in out["inertias"]._asdict().items():
            assert_close(value, getattr(out["ab"], field))


@pytest.mark.parametrize("name", ALL)
def test_6_14_H_G_is_identity(name):
    for model, _, _, ops in operator_cases(name):
        assert_close(ops.H @ ops.G, np.eye(model.nv))


@pytest.mark.parametrize("name", ALL)
def test_6_17_tau_G_is_G_and_tau_star_H_star_is_H_star(name):
    for model, _, _, ops in operator_cases(name):
        tau = np.eye(6 * model.nb) - ops.tau_bar  # tau = G H
        assert_close(tau, ops.G @ ops.H)
        assert_close(tau @ ops.G, ops.G)
        assert_close(tau.T @ ops.H.T, ops.H.T)
        assert_close(tau @ tau, tau)  # tau is a projector (Ex 6.1)


@pytest.mark.parametrize("name", ALL)
def test_6_18_tau_bar_annihilates_G_and_H_star(name):
    for model, _, _, ops in operator_cases(name):
        assert_close(ops.tau_bar @ ops.G, np.zeros_like(ops.G))
        assert_close(ops.tau_bar.T @ ops.H.T, np.zeros_like(ops.H.T))


@pytest.mark.parametrize("name", ALL)
def test_6_25_P_plus_forms_agree_and_are_symmetric(name):
    for _, _, _, ops in operator_cases(name):
        tb, P = ops.tau_bar, ops.P
        assert_close(ops.P_plus, tb @ P)
        assert_close(ops.P_plus, P @ tb.T)
        assert_close(ops.P_plus, tb @ P @ tb.T)
        assert_close(ops.P_plus, ops.P_plus.T)


@pytest.mark.parametrize("name", ALL)
def test_6_26_P_plus_annihilates_H(name):
    for _, _, _, ops in operator_cases(name):
        assert_close(ops.H @ ops.P_plus, np.zeros_like(ops.H))
        assert_close(ops.P_plus @ ops.H.T, np.zeros_like(ops.H.T))


@pytest.mark.parametrize("name", ALL)
def test_6_31_R_above_P_above_M_and_P_above_P_plus(name):
    """R(k) >= P(k) >= M(k) and P(k) >= P+(k) >= 0 in the order of symmetric matrices."""
    for _, _, _, ops in operator_cases(name):
        for R, P, M, P_plus in zip(*map(_blocks, (ops.R, ops.P, ops.M, ops.P_plus))):
            scale = np.abs(R).max()
            for upper, lower in ((R, P), (P, M), (P, P_plus), (P_plus, 0 * P)):
                assert np.linalg.eigvalsh(upper - lower).min() >= -1e-12 * scale


# -- Riccati operator identities (ch. 7 and 9) -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_7_7_and_9_36_body_inertias_from_P(name):
    """M = P - E_psi P E_psi* = P - E_phi P E_psi*."""
    for _, _, _, ops in operator_cases(name):
        assert_close(ops.M, ops.P - ops.E_psi @ ops.P @ ops.E_psi.T)
        assert_close(ops.M, ops.P - ops.E_phi @ ops.P @ ops.E_psi.T)


@pytest.mark.parametrize("name", ALL)
def test_7_10_psi_inverse_minus_phi_inverse_is_K_H(name):
    for _, _, _, ops in operator_cases(name):
        assert_close(np.linalg.inv(ops.psi) - np.linalg.inv(ops.phi), ops.K @ ops.H)


@pytest.mark.parametrize("name", ALL)
def test_7_13_H_psi_M_psi_star_H_star_is_D(name):
    for _, _, out, ops in operator_cases(name):
        assert_close(ops.H @ ops.psi @ ops.M @ ops.psi.T @ ops.H.T, ops.D)
        assert_close(out["D"], ops.D)


@pytest.mark.parametrize("name", ALL)
def test_9_38_to_9_48_tree_operator_identities(name):
    """The SPO identities of Lemma 9.8-9.10 (9.38-9.48), with A = phi."""
    for model, _, _, ops in operator_cases(name):
        I6, Iv = np.eye(6 * model.nb), np.eye(model.nv)
        H, phi, psi, K, G, P, M = ops.H, ops.phi, ops.psi, ops.K, ops.G, ops.P, ops.M
        tau_bar, E_psi = ops.tau_bar, ops.E_psi
        tau = I6 - tau_bar
        phi_t, psi_t = phi - I6, psi - I6
        assert_close(H @ tau, H)  # H tau = H
        assert_close(H @ tau_bar, np.zeros_like(H))  # H tau_bar = 0
        assert_close(Iv + H @ phi @ K, H @ phi @ G)  # I + H phi K = H phi G
        assert_close(H @ phi @ tau_bar, H @ phi @ E_psi)  # H phi tau_bar = H phi E_psi
        assert_close(H @ phi @ tau, H @ phi @ np.linalg.inv(psi))  # H phi tau = H phi psi^-1
        assert_close(phi @ M @ psi.T, P + phi_t @ P + P @ psi_t.T)  # (9.42) phi M psi* = P + phi~ P + P psi~*
        assert_close(psi @ M @ psi.T, P + psi_t @ P + P @ psi_t.T)  # psi M psi* = P + psi~ P + P psi~*
        assert_close((Iv - H @ psi @ K) @ H @ phi, H @ psi)  # [I - H psi K] H phi = H psi
        assert_close(phi @ K @ (Iv - H @ psi @ K), psi @ K)  # phi K [I - H psi K] = psi K
        assert_close((Iv + H @ phi @ K) @ H @ psi, H @ phi)  # [I + H phi K] H psi = H phi
        assert_close(phi @ M @ phi.T, P + phi_t @ P + P @ phi_t.T + phi @ K @ ops.D @ K.T @ phi.T)
        assert_close(phi @ M @ phi.T @ H.T, (I6 + phi @ K @ H) @ P @ phi.T @ H.T)


# -- the innovations factorization (7.14-7.18, Lemma 9.11) ------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_7_14_innovations_factorization(name):
    """M = [I + H phi K] D [I + H phi K]*, L from the ancestor walk equal to the dense I + H phi K."""
    for model, _, out, ops in operator_cases(name):
        assert_close(out["L"], np.eye(model.nv) + ops.H @ ops.phi @ ops.K)
        assert_close(out["L"] @ out["D"] @ out["L"].T, out["M"])


@pytest.mark.parametrize("name", ALL)
def test_7_17_inverse_factor(name):
    """[I + H phi K]^-1 = I - H psi K: the psi walk equals the dense operator and the inverse of L."""
    for model, _, out, ops in operator_cases(name):
        assert_close(out["L_inv"], np.eye(model.nv) - ops.H @ ops.psi @ ops.K)
        assert_close(out["L_inv"] @ out["L"], np.eye(model.nv))


@pytest.mark.parametrize("name", ALL)
def test_7_18_mass_matrix_inverse_three_ways(name):
    """M^-1 = [I - H psi K]* D^-1 [I - H psi K] == M^-1 e_j by O(N) solves == inv(M)."""
    for _, _, out, _ in operator_cases(name):
        M_inv = np.linalg.inv(out["M"])
        scale = np.abs(M_inv).max()
        assert_close(out["M_inv"], M_inv, scale=scale)
        assert_close(out["M_inv_columns"], M_inv, scale=scale)
        assert_close(out["M_inv"], out["M_inv"].T, scale=scale)


def test_7_18_mass_matrix_inverse_of_a_bushy_tree_sums_over_common_ancestors_only():
    """On a bushy tree with multi-coordinate joints, M^-1(a, b) sums L^-1(k, a) [D^-1 L^-1](k, b) over the
    coordinates k common to the ancestors of a and b (gathered terms, not the dense product): it equals the dense
    L^-* D^-1 L^-1 and inverts M."""
    model = random_model(1, n_bodies=14, joint_mix="mixed", branching=1.0)
    assert _common_ancestor_terms(model.topology) is not None
    assert {"spherical", "planar"} <= set(model.topology.kinds)
    q = random_state(model, jax.random.PRNGKey(5))[0]
    M, M_inv, L_inv, (_, D) = jax.tree.map(np.asarray, checks.fast_jit(lambda q: (
        jaxmb.mass_matrix(model, q), jaxmb.mass_matrix_inverse(model, q), jaxmb.innovations_factor_inverse(model, q),
        jaxmb.innovations_factors(model, q)))(q))
    scale = np.abs(M_inv).max()
    assert_close(M_inv, L_inv.T @ np.linalg.solve(D, L_inv), scale=scale)
    assert_close(M_inv @ M, np.eye(model.nv), scale=scale * np.abs(M).max())


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_inverse_times_is_a_solve(name):
    for (q, qd, u, *_), out in evaluated(name)[1]:
        assert_close(out["M_inv_u"], np.linalg.solve(out["M"], u))


def test_mass_matrix_inverse_times_derivatives_match_central_differences():
    """`mass_matrix_inverse_times` takes its derivatives from forward dynamics at rest (implicit function theorem),
    not from its own sweeps: JVP and VJP in ``q`` and ``x`` against central differences."""
    model, results = evaluated("floating-mixed")
    (q, _, u, *_), _ = results[0]
    checks.check_grads(lambda q, x: jaxmb.mass_matrix_inverse_times(model, q, x), (q, u), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name", ALL)
def test_9_53_log_det_is_sum_of_log_det_D(name):
    for _, out in evaluated(name)[1]:
        sign, log_det = np.linalg.slogdet(out["M"])
        assert sign > 0
        assert_close(out["log_det"], log_det)
        assert_close(out["ab"].log_det_D.sum(), log_det)


@pytest.fixture(scope="module")
def log_det_gradients():
    model = random_model(**MODEL_SPECS["tree-screw"])
    grad_recursive = checks.fast_jit(jax.grad(jaxmb.log_det_mass_matrix, argnums=1))
    grad_dense = checks.fast_jit(jax.grad(lambda m, q: jnp.linalg.slogdet(jaxmb.mass_matrix(m, q))[1], argnums=1))
    log_det = checks.fast_jit(jaxmb.log_det_mass_matrix)
    return model, grad_recursive, grad_dense, log_det


def test_gradient_of_log_det_matches_finite_differences_and_dense_route(log_det_gradients):
    model, grad_recursive, grad_dense, log_det = log_det_gradients
    q = jaxmb.random_configuration(model, jax.random.PRNGKey(5))
    g = np.asarray(grad_recursive(model, q))
    assert_close(g, grad_dense(model, q))
    h = 1e-6
    fd = np.array([(log_det(model, q + h * e) - log_det(model, q - h * e)) / (2 * h) for e in np.eye(model.nq)])
    assert_close(g, fd, rtol=1e-7)


# -- inter-body forces (Jain 2018, eq. 18) -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_eq_18_interbody_forces_two_forms_and_newton_euler_agree(name):
    """f = P(alpha - a) + z = P+ alpha+ + z+ = the Newton-Euler sweep at the forward-dynamics qdd."""
    for _, out in evaluated(name)[1]:
        ab = out["ab"]
        form2 = np.einsum("kij,kj->ki", ab.P_plus, ab.alpha_plus) + ab.z_plus
        assert_close(out["f_eq18"], form2)
        assert_close(out["f_eq18"], out["f_rnea"])


@pytest.mark.parametrize("name", ALL)
def test_hinge_projection_of_interbody_forces_is_tau(name):
    """H(k) f(k) = T(k)."""
    model, results = evaluated(name)
    for (q, qd, u, *_), out in results:
        H = np.asarray(jaxmb.hinges.hinge_map(model))
        f = out["f_eq18"][model.topology.dof_body]
        assert_close(np.sum(H * f, -1), u)


def test_root_forces_carry_the_weight_of_a_robot_standing_still():
    """Fixed base, qd = 0, tau = gravity compensation: the forces the world exerts on the root bodies sum, about
    the world origin, to the weight of the robot lifted at its centre of mass: [-m c x g; -m g]."""
    model = jaxmb.assets.quadruped()
    model = model.cast(jnp.float64)
    q = jaxmb.random_configuration(model, jax.random.PRNGKey(3))

    @checks.fast_jit  # one program instead of op by op
    def evaluate(model, q):
        zero = jnp.zeros(model.nv)
        tau = jaxmb.gravity_forces(model, q)
        return (jaxmb.forward_dynamics(model, q, zero, tau),
                jaxmb.interbody_forces(model, q, zero, tau, reference="world"),
                jaxmb.interbody_forces(model, q, zero, tau, reference="world_aligned"),
                jaxmb.total_mass(model), jaxmb.center_of_mass(model, q))

    qdd, f, f_aligned, m, c = evaluate(model, q)
    assert_close(qdd, np.zeros(model.nv))
    roots = model.topology.parent < 0
    g = model.gravity
    assert_close(f[roots].sum(0), jnp.concatenate([-m * jnp.cross(c, g), -m * g]))
    assert_close(f_aligned[roots, 3:].sum(0), -m * g)


# -- hybrid dynamics (ch. 16) --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_hybrid_with_all_coordinates_free_is_forward_dynamics(name):
    for (q, qd, u, *_), out in evaluated(name)[1]:
        qdd, tau = out["hybrid_free"]
        assert_close(qdd, out["ab"].qdd)
        assert_close(tau, u)


@pytest.mark.parametrize("name", ALL)
def test_hybrid_with_all_coordinates_prescribed_is_inverse_dynamics(name):
    for (q, qd, u, *_), out in evaluated(name)[1]:
        qdd, tau = out["hybrid_prescribed"]
        assert_close(qdd, u)
        assert_close(tau, out["inverse_dynamics"])


@pytest.mark.parametrize("name", ALL)
def test_hybrid_with_mixed_mask_matches_partitioned_dense_solve(name):
    """Free coordinates f, prescribed p: qdd_f = M_ff^-1 (u_f - C_f - M_fp u_p), tau = M qdd + C."""
    for (q, qd, u, f_ext, mask), out in evaluated(name)[1]:
        p = np.asarray(mask)
        f = ~p
        M, C = out["M"], out["C"]
        qdd = np.where(p, u, 0.0)
        qdd[f] = np.linalg.solve(M[np.ix_(f, f)], u[f] - C[f] - M[np.ix_(f, p)] @ u[p])
        tau = M @ qdd + C
        assert_close(out["hybrid"][0], qdd)
        assert_close(out["hybrid"][1], tau)


def test_hybrid_mask_change_does_not_recompile():
    model = random_model(**MODEL_SPECS["floating-mixed"])
    hybrid = jax.jit(jaxmb.hybrid_dynamics, compiler_options=checks.FAST_COMPILE_OPTIONS)
    q, qd, u = random_state(model, jax.random.PRNGKey(0))
    for seed in range(3):
        mask = jax.random.bernoulli(jax.random.PRNGKey(seed), 0.5, (model.nv,))
        hybrid(model, q, qd, u, mask)
    assert hybrid._cache_size() == 1


def test_hybrid_rejects_a_mask_of_the_wrong_shape():
    model = random_model(**MODEL_SPECS["chain-revolute"])
    q, qd, u = random_state(model, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="prescribed"):
        jaxmb.hybrid_dynamics(model, q, qd, u, jnp.zeros(model.nv + 1, bool))


# -- centroidal momentum ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_centroidal_momentum_matrix_times_qd_is_centroidal_momentum(name):
    for (q, qd, *_), out in evaluated(name)[1]:
        assert_close(out["A_g"] @ qd, out["h_G"])


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_small_solves_equal_dense_solve_and_slogdet(n):
    """The per-joint solve of ``D(k)`` (a division, an unrolled ``L D L*``, or 3x3 blocks for six coordinates)
    against numpy, on well and badly conditioned (1e6) symmetric positive definite matrices."""
    rng = np.random.default_rng(n)
    for cond in (10.0, 1e6):
        Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
        D = Q @ np.diag(np.geomspace(1.0, cond, n)) @ Q.T
        x = rng.standard_normal((n, 7))
        y, log_det = jax.jit(solve_log_det)(D, x)
        np.testing.assert_allclose(D @ np.asarray(y), x, rtol=0, atol=1e-14 * cond * np.abs(x).max())
        np.testing.assert_allclose(log_det, np.linalg.slogdet(D)[1], rtol=0, atol=1e-15 * n * cond)
