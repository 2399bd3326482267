"""Sensitivities (book ch. 18) on random trees, in float64: the mass-matrix sensitivity (18.36) and the rates of
Alg 18.1 against forward-mode autodiff, (18.66) summed from Alg 18.1 one coordinate at a time, and the O(N)
gradient of log det M (the custom derivative of `jaxmb.dynamics.sensitivity.log_det_mass_matrix`) against
automatic differentiation through the articulated-body sweep, in q and in every model parameter, both modes, and
its Hessian in q.

A floating tree with every joint kind and armature on every coordinate carries the general checks; a screw tree,
whose coordinates are their own tangent coordinates, those in ``d/dq`` ((18.36), (18.66)). One program per tree
computes everything the tests compare."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

import checks
from jaxmb.configuration import configuration_rate, integrate
from jaxmb.dynamics import factorization, sensitivity
from jaxmb.dynamics.articulated import articulated_inertias
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.hinges import hinge_map
from jaxmb.testing import random_model, random_state

RTOL = 1e-11

TREE = dict(seed=17, n_bodies=6, joint_mix="mixed", floating_base=True, armature=True)  # every joint kind
SCREW_TREE = dict(seed=3, n_bodies=5, joint_mix="screw", branching=0.6)  # d/dq is the tangent derivative


def _log_det_sweep(m, q):
    return factorization.log_det_mass_matrix(m, q)


def _tangent_jacfwd(m, q):
    """``d log det M / d theta`` by forward-mode autodiff through `jaxmb.integrate` and the articulated-body sweep."""
    return jax.jacfwd(lambda v: _log_det_sweep(m, integrate(m, q, v, 1.0)))(jnp.zeros(m.nv))


@checks.fast_jit
def _evaluate(m, q, qd):
    """Everything the tests compare on the tree with every joint kind."""
    out = {}
    ld = lambda m, q: sensitivity.log_det_mass_matrix(m, q)  # noqa: E731
    out["value"], out["value_sweep"] = ld(m, q), _log_det_sweep(m, q)
    out["gradient"] = sensitivity.log_det_mass_matrix_gradient(m, q)
    out["tangent_jacfwd"] = _tangent_jacfwd(m, q)
    out["dq_rule_fwd"] = jax.jacfwd(ld, 1)(m, q)
    out["dmodel_rule"], out["dq_rule_rev"] = jax.grad(ld, (0, 1))(m, q)
    out["dmodel_sweep"], out["dq_sweep"] = jax.grad(_log_det_sweep, (0, 1))(m, q)
    out["hessian_rule"], out["hessian_sweep"] = jax.hessian(ld, 1)(m, q), jax.hessian(_log_det_sweep, 1)(m, q)
    out["D_dot"] = sensitivity.articulated_inertia_rates(m, q, qd).D_dot
    out["D_dot_jvp"] = jax.jvp(lambda q: articulated_inertias(m, q).D, (q,), (configuration_rate(m, q, qd),))[1]
    return out


@checks.fast_jit
def _evaluate_screw(m, q):
    """The screw tree's sensitivities in ``q`` itself: ``dM/dq`` and (18.66) summed from Alg 18.1 at ``qd = e_i``
    (18.54), with the reference gradient."""
    eye = jnp.eye(m.nv, dtype=q.dtype)
    D_dot_i = jax.vmap(lambda e: sensitivity.articulated_inertia_rates(m, q, e).D_dot[:, 0])(eye)  # (18.54)
    return dict(dM_dq=jax.jacfwd(lambda q: mass_matrix(m, q))(q), H=hinge_map(m), tangent_jacfwd=_tangent_jacfwd(m, q),
                sum_18_66=jnp.sum(D_dot_i / articulated_inertias(m, q).D[:, 0], 1))  # sum_k Tr{D^-1 H lam_i H*}


@functools.cache
def evaluated():
    m = random_model(**TREE)
    q, qd, _ = random_state(m, jax.random.PRNGKey(7))
    return m, q, jax.device_get(_evaluate(m, q, qd))


@functools.cache
def evaluated_screw():
    m = random_model(**SCREW_TREE)
    q, _, _ = random_state(m, jax.random.PRNGKey(7))
    return m, q, jax.device_get(_evaluate_screw(m, q))


def test_log_det_gradient_in_tangent_coordinates_equals_jacfwd_through_the_sweep():
    _, _, out = evaluated()
    checks.assert_close(out["gradient"], out["tangent_jacfwd"], RTOL)
    checks.assert_close(out["value"], out["value_sweep"], RTOL)


def test_log_det_custom_derivative_equals_autodiff_in_q_forward_and_reverse():
    _, _, out = evaluated()
    checks.assert_close(out["dq_rule_fwd"], out["dq_sweep"], RTOL)
    checks.assert_close(out["dq_rule_rev"], out["dq_sweep"], RTOL)


def test_log_det_custom_derivative_equals_autodiff_in_every_model_parameter():
    _, _, out = evaluated()
    for rule, sweep in zip(jax.tree.leaves(out["dmodel_rule"]), jax.tree.leaves(out["dmodel_sweep"])):
        checks.assert_close(rule, sweep, RTOL)
    assert np.abs(out["dmodel_sweep"].armature).max() > 0


def test_log_det_custom_derivative_has_the_hessian_of_autodiff_in_every_direction_of_q():
    """Quaternion coordinates included, off the unit sphere as well: the rule is the derivative of the sweep as a
    function of ``q`` in R^nq."""
    _, _, out = evaluated()
    checks.assert_close(out["hessian_rule"], out["hessian_sweep"], RTOL)


def test_free_base_pose_does_not_move_log_det():
    _, _, out = evaluated()
    assert np.abs(out["gradient"][:6]).max() < 1e-13  # M does not depend on the base's pose


def test_alg_18_1_D_dot_equals_jvp_of_D():
    _, _, out = evaluated()
    checks.assert_close(out["D_dot"], out["D_dot_jvp"], RTOL)


def test_18_66_sum_of_rates_equals_log_det_gradient():
    _, _, out = evaluated_screw()
    checks.assert_close(out["sum_18_66"], out["tangent_jacfwd"], RTOL)


def test_18_36_mass_matrix_sensitivity_equals_jacfwd():
    """``M_theta_i = H phi [X_i phi M + M phi* X_i*] phi* H*`` with ``X_i = H~^w_(=i) + E_phi H-bar^v_(=i)``."""
    m, q, out = evaluated_screw()
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
