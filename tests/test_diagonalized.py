"""Diagonalized Lagrangian dynamics (book ch. 19) on random trees, in float64: ``M = m m*`` (19.21) with ``m*``
the Jacobian of ``eta``, the round trips of Tables 19.1-19.2, ``l = m^-1``, ``eta* C(q, eta) = 0`` (19.18) and
Alg 19.3 against the time derivative of ``xi`` and ``eta`` along the articulated-body algorithm's motion, with and
without armature.

One floating tree with every joint kind (free, revolute, prismatic, helical, spherical, planar), and the same tree
with armature on every coordinate: one program (`evaluate`) computes everything the tests compare, compiled once
and called for both models, with gravity and external forces and without either."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import checks
from jaxmb.configuration import configuration_rate
from jaxmb.dynamics.articulated import forward_dynamics
from jaxmb.dynamics.diagonalized import diagonalized_dynamics, diagonalized_velocities, normalized_forces, \
    velocities_from_eta, velocities_from_xi
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.testing import random_model, random_state

RTOL = 1e-11

TREE = dict(seed=17, n_bodies=6, joint_mix="mixed", floating_base=True)  # every joint kind
MODELS = {"floating-mixed": TREE, "floating-mixed-armature": dict(TREE, armature=True)}  # one tree: one program


@checks.fast_jit
def _evaluate(m, q, qd, tau, f_ext):
    velocities = lambda q, qd: diagonalized_velocities(m, q, qd)  # noqa: E731
    v = velocities(q, qd)
    qdd = forward_dynamics(m, q, qd, tau, f_ext)
    _, rates = jax.jvp(velocities, (q, qd), (configuration_rate(m, q, qd), qdd))
    return {
        "v": v, "rates": rates, "alg_19_3": diagonalized_dynamics(m, q, qd, tau, f_ext),
        "M": mass_matrix(m, q),
        "m_star": jax.jacfwd(lambda x: velocities(q, x).eta)(qd),
        "l": jax.jacfwd(lambda t: normalized_forces(m, q, t))(tau),
        "qd_from_eta": velocities_from_eta(m, q, v.eta), "qd_from_xi": velocities_from_xi(m, q, v.xi),
        "zeta": normalized_forces(m, q, tau),
    }


@functools.cache
def evaluated(name):
    """``(model, qd, tau, outputs)``, and ``outputs["without_gravity"]``: the outputs of the same program for the
    model without gravity and without external forces."""
    m = random_model(**MODELS[name])
    q, qd, tau = random_state(m, jax.random.PRNGKey(2))
    f_ext = jax.random.normal(jax.random.PRNGKey(6), (m.nb, 6), q.dtype)
    out = jax.device_get(_evaluate(m, q, qd, tau, f_ext))
    still = m.replace(gravity=jnp.zeros(3, q.dtype))
    out["without_gravity"] = jax.device_get(_evaluate(still, q, qd, tau, jnp.zeros_like(f_ext)))
    return m, qd, tau, out


@pytest.mark.parametrize("name", list(MODELS))
def test_19_21_mass_matrix_is_m_m_star(name):
    _, _, _, out = evaluated(name)
    checks.assert_close(out["m_star"].T @ out["m_star"], out["M"], RTOL)
    checks.assert_close(out["l"] @ out["m_star"].T, np.eye(len(out["M"])), RTOL)  # l = m^-1


@pytest.mark.parametrize("name", list(MODELS))
def test_table_19_1_round_trips_and_kinetic_energy(name):
    _, qd, _, out = evaluated(name)
    checks.assert_close(out["qd_from_eta"], qd, RTOL)
    checks.assert_close(out["qd_from_xi"], qd, RTOL)
    checks.assert_close(out["v"].eta @ out["v"].eta, qd @ out["M"] @ qd, RTOL)


@pytest.mark.parametrize("name", list(MODELS))
def test_19_18_coriolis_term_does_no_work(name):
    """``eta* C(q, eta) = 0`` with ``C = zeta - eta_dot`` (no gravity, no external force)."""
    _, qd, tau, out = evaluated(name)
    eta, eta_dot = out["without_gravity"]["alg_19_3"].eta, out["without_gravity"]["alg_19_3"].eta_dot
    checks.assert_close(eta @ (out["zeta"] - eta_dot), 0.0, RTOL, scale=np.abs(eta).max() * np.abs(eta_dot).max())
    checks.assert_close(eta @ out["zeta"], qd @ tau, RTOL)  # the power of the forces


@pytest.mark.parametrize("name", list(MODELS))
def test_alg_19_3_equals_the_rates_along_the_articulated_body_motion(name):
    """With armature on every coordinate too, where ``xi`` is not ``G* V`` (module docstring of
    `jaxmb.dynamics.diagonalized`)."""
    m, _, _, out = evaluated(name)
    assert np.all(np.asarray(m.armature) > 0) == name.endswith("armature")
    checks.assert_close(out["alg_19_3"].xi, out["v"].xi, RTOL)
    checks.assert_close(out["alg_19_3"].xi_dot, out["rates"].xi, RTOL)
    checks.assert_close(out["alg_19_3"].eta_dot, out["rates"].eta, RTOL)
