"""`jaxmb.sysid.physical` and `jaxmb.sysid.base`: the pseudo-inertia and the log-Cholesky parameters equal
Pinocchio's (``PseudoInertia``, ``LogCholeskyParameters``) and round-trip, the physical test and the nearest physical
body (the projection's optimality conditions), and the base parameters of panda and a random tree (they give the
same joint forces on new states and have full column rank). Float64."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

from checks import assert_close, fast_jit
from jaxmb import sysid, testing
from pinocchio_bridge import load_jaxmb

pytestmark = pytest.mark.filterwarnings("ignore:.*mimic.*:UserWarning")

RTOL = 1e-12

_stacked = fast_jit(sysid.stacked_regressor, static_argnums=(0, 3))


def _random_bodies(seed, n):
    """Standard parameters (n, 10) of random physical bodies."""
    rng = np.random.default_rng(seed)
    m, c, I = (np.asarray(x) for x in zip(*(testing.random_inertia(rng) for _ in range(n))))
    model = testing.random_model(0, n_bodies=n).replace(mass=jnp.asarray(m), com=jnp.asarray(c),
                                                         inertia=jnp.asarray(I))
    return np.asarray(sysid.parameters(model)).reshape(n, 10)


def test_pseudo_inertia_and_log_cholesky_equal_pinocchio():
    rng = np.random.default_rng(0)
    for pi in _random_bodies(1, 5):
        assert_close(sysid.pseudo_inertia(jnp.asarray(pi)), pin.PseudoInertia.FromDynamicParameters(pi).toMatrix(),
                     RTOL)
    for _ in range(5):
        theta = rng.normal(size=10)
        assert_close(sysid.from_log_cholesky(jnp.asarray(theta)),
                     pin.LogCholeskyParameters(theta).toDynamicParameters(), RTOL)


def test_log_cholesky_round_trips():
    pi = jnp.asarray(_random_bodies(2, 6))
    theta = sysid.log_cholesky(pi)  # (6, 10): broadcast over bodies
    assert_close(sysid.from_log_cholesky(theta), pi, RTOL)
    theta = jnp.asarray(np.random.default_rng(3).normal(size=(6, 10)))
    assert_close(sysid.log_cholesky(sysid.from_log_cholesky(theta)), theta, 1e-11)
    assert_close(sysid.from_pseudo_inertia(sysid.pseudo_inertia(pi)), pi, RTOL)


def _body(mass, com, I_C):
    """Standard parameters (10,) of one body from its mass, centre of mass and inertia about it."""
    model = testing.random_model(0, n_bodies=1).replace(mass=jnp.array([mass]), com=jnp.array([com]),
                                                        inertia=jnp.array([I_C]))
    return sysid.parameters(model)


def test_physical_margin_is_positive_exactly_for_physical_bodies():
    assert np.all(sysid.physical_margin(jnp.asarray(_random_bodies(4, 8))) > 0)
    com = [0.1, -0.2, 0.3]
    assert sysid.physical_margin(_body(2.0, com, np.diag([1.0, 1.5, 2.0]))) > 0
    assert sysid.physical_margin(_body(2.0, com, np.diag([1.0, 1.0, 2.1]))) < 0  # triangle inequality broken
    assert sysid.physical_margin(_body(2.0, com, np.diag([1.0, 1.0, -0.1]))) < 0  # a negative moment
    assert sysid.physical_margin(_body(-1.0, com, np.diag([1.0, 1.5, 2.0]))) < 0  # a negative mass


def test_nearest_physical_is_the_projection_on_the_physical_cone():
    pi = jnp.asarray(_random_bodies(5, 4))
    assert_close(sysid.nearest_physical(pi), pi, RTOL)  # physical bodies stay as they are
    bad = jnp.stack([_body(2.0, [0.1, 0.0, 0.2], np.diag([1.0, 1.0, 2.5])),
                     _body(0.5, [0.0, 0.3, 0.0], np.diag([0.2, -0.05, 0.1]))])
    fixed = sysid.nearest_physical(bad)
    J, P = np.asarray(sysid.pseudo_inertia(bad)), np.asarray(sysid.pseudo_inertia(fixed))
    for Jk, Pk in zip(J, P):
        # the projection of Jk on the positive semi-definite cone: Pk >= 0, Pk - Jk >= 0 and <Pk, Pk - Jk> = 0
        assert np.linalg.eigvalsh(Pk)[0] >= -1e-12 and np.linalg.eigvalsh(Pk - Jk)[0] >= -1e-12
        assert abs(np.sum(Pk * (Pk - Jk))) <= 1e-12 * np.sum(Pk * Pk)
        assert np.linalg.norm(Pk - Jk) > 1e-3  # it moved
    assert np.all(sysid.physical_margin(sysid.nearest_physical(bad, margin=1e-6)) >= 1e-6 * (1 - 1e-9))


@functools.cache
def _panda():
    return load_jaxmb("panda")


@pytest.mark.parametrize("case", ["panda", "random_tree"])
def test_base_parameters_give_the_joint_forces_with_full_column_rank(case):
    model = _panda() if case == "panda" else testing.random_model(6, n_bodies=6, joint_mix="revolute")
    W = _stacked(sysid.regressor, model, jax.random.PRNGKey(0), 40)
    base = sysid.base_parameters(W)
    assert base.n_base == np.linalg.matrix_rank(np.asarray(W)) < W.shape[1]
    W_new = np.asarray(_stacked(sysid.regressor, model, jax.random.PRNGKey(1), 20))
    W_base = np.asarray(base.columns(W_new))
    s = np.linalg.svd(W_base, compute_uv=False)
    assert s[-1] > 1e-6 * s[0]  # full column rank on states the structure was not found from
    for seed in range(3):
        pi = jnp.asarray(np.random.default_rng(seed).normal(size=W.shape[1]))
        beta = base.to_base(pi)
        assert_close(W_base @ beta, W_new @ pi, RTOL, scale=max(1.0, float(np.abs(W_new @ pi).max())))
        assert_close(base.to_base(base.from_base(beta)), beta, RTOL)
        assert_close(jnp.asarray(base.base_map()) @ pi, beta, RTOL)
