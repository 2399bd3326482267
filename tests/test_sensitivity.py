"""Sensitivities (book ch. 18) on random trees, in float64: the mass-matrix sensitivity (18.36) and the rates of
Alg 18.1 against forward-mode autodiff, (18.66) summed from Alg 18.1 one coordinate at a time, and the O(N)
gradient of log det M (the custom derivative of `jaxmb.dynamics.sensitivity.log_det_mass_matrix`) against
automatic differentiation through the articulated-body sweep, in q and in every model parameter, both modes.

One program per model (`evaluate`) computes everything the tests compare."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import checks
from jaxmb.configuration import configuration_rate, integrate
from jaxmb.dynamics import factorization, sensitivity
from jaxmb.dynamics.articulated import articulated_inertias
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.hinges import hinge_map
from jaxmb.testing import random_model, random_state

RTOL = 1e-11

MODELS = {
    "screw-tree": dict(seed=3, n_bodies=5, joint_mix="screw", branching=0.6),
    "floating-mixed-armature": dict(seed=5, n_bodies=5, joint_mix="mixed", floating_base=True, armature=True),
}


@functools.cache
def model(name):
    return random_model(**MODELS[name])


def _evaluate(m, q, qd):
    out = {}
    ld_sweep = lambda m, q: factorization.log_det_mass_matrix(m, q)  # noqa: E731
    ld = lambda m, q: sensitivity.log_det_mass_matrix(m, q)  # noqa: E731
    out["value"], out["value_sweep"] = ld(m, q), ld_sweep(m, q)
    out["gradient"] = sensitivity.log_det_mass_matrix_gradient(m, q)
    out["tangent_jacfwd"] = jax.jacfwd(lambda v: ld_sweep(m, integrate(m, q, v, 1.0)))(jnp.zeros(m.nv))
    out["dq_rule_fwd"] = jax.jacfwd(ld, 1)(m, q)
    out["dmodel_rule"], out["dq_rule_rev"] = jax.grad(ld, (0, 1))(m, q)
    out["dmodel_sweep"], out["dq_sweep"] = jax.grad(ld_sweep, (0, 1))(m, q)
    rates = sensitivity.articulated_inertia_rates(m, q, qd)
    out["D_dot"] = rates.D_dot
    out["D_dot_jvp"] = jax.jvp(lambda q: articulated_inertias(m, q).D, (q,), (configuration_rate(m, q, qd),))[1]
    out["H"] = hinge_map(m)
    if m.nq == m.nv:  # screw joints: d/dq is the tangent derivative
        out["dM_dq"] = jax.jacfwd(lambda q: mass_matrix(m, q))(q)
        eye = jnp.eye(m.nv, dtype=q.dtype)
        D_dot_i = jax.vmap(lambda e: sensitivity.articulated_inertia_rates(m, q, e).D_dot[:, 0])(eye)  # (18.54)
        out["sum_18_66"] = jnp.sum(D_dot_i / articulated_inertias(m, q).D[:, 0], 1)  # sum_k Tr{D^-1 H lam_i H*}
    return out


@functools.cache
def evaluated(name):
    m = model(name)
    q, qd, _ = random_state(m, jax.random.PRNGKey(7))
    return m, q, jax.device_get(checks.fast_jit(_evaluate)(m, q, qd))


@pytest.mark.parametrize("name", list(MODELS))
def test_log_det_gradient_in_tangent_coordinates_equals_jacfwd_through_the_sweep(name):
    m, q, out = evaluated(name)
    checks.assert_close(out["gradient"], out["tangent_jacfwd"], RTOL)
    checks.assert_close(out["value"], out["value_sweep"], RTOL)


@pytest.mark.parametrize("name", list(MODELS))
def test_log_det_custom_derivative_equals_autodiff_in_q_forward_and_reverse(name):
    _, _, out = evaluated(name)
    checks.assert_close(out["dq_rule_fwd"], out["dq_sweep"], RTOL)
    checks.assert_close(out["dq_rule_rev"], out["dq_sweep"], RTOL)


@pytest.mark.parametrize("name", list(MODELS))
def test_log_det_custom_derivative_equals_autodiff_in_every_model_parameter(name):
    _, _, out = evaluated(name)
    for rule, sweep in zip(jax.tree.leaves(out["dmodel_rule"]), jax.tree.leaves(out["dmodel_sweep"])):
        checks.assert_close(rule, sweep, RTOL)
    assert np.abs(out["dmodel_sweep"].armature).max() > 0 or name == "screw-tree"


def test_free_base_pose_does_not_move_log_det():
    m, _, out = evaluated("floating-mixed-armature")
    assert np.abs(out["gradient"][:6]).max() < 1e-13  # M does not depend on the base's pose


@pytest.mark.parametrize("name", list(MODELS))
def test_alg_18_1_D_dot_equals_jvp_of_D(name):
    _, _, out = evaluated(name)
    checks.assert_close(out["D_dot"], out["D_dot_jvp"], RTOL)


def test_18_66_sum_of_rates_equals_log_det_gradient():
    _, _, out = evaluated("screw-tree")
    checks.assert_close(out["sum_18_66"], out["tangent_jacfwd"], RTOL)


def test_18_36_mass_matrix_sensitivity_equals_jacfwd():
    """``M_theta_i = H phi [X_i phi M + M phi* X_i*] phi* H*`` with ``X_i = H~^w_(=i) + E_phi H-bar^v_(=i)``."""
    m, q, out = evaluated("screw-tree")
    ops = checks.dense_operators(m, q)
    H, n6 = out["H"], 6 * m.nb

    def skew(x):
        return np.array([[0, -x[2], x[1]], [x[2], 0, -x[0]], [-x[1], x[0], 0]])

    for i in range(m.nv):
        k = m.topology.dof_body[i]
        Hw, Hv_bar = np.zeros((n6, n6)), np.zeros((n6, n6))
        Hw[6 * k : 6 * k + 3, 6 * k : 6 * k + 3] = Hw[6 * k + 3 : 6 * k + 6, 6 * k + 3 : 6 * k + 6] = skew(H[i, :3])
        Hv_bar[6 * k : 6 * k + 3, 6 * k + 3 : 6 * k + 6] = skew(H[i, 3:])  # [0; h_v]-bar = [[0, h_v~], [0, 0]]
        X = Hw + ops.E_phi @ Hv_bar
        dM = ops.H @ ops.phi @ (X @ ops.phi @ ops.M + ops.M @ ops.phi.T @ X.T) @ ops.phi.T @ ops.H.T
        checks.assert_close(dM, out["dM_dq"][:, :, i], RTOL)
