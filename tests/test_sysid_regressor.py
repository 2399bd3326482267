"""`jaxmb.sysid.regressor`: ``Y pi`` is inverse dynamics (random trees, panda, talos), ``Y`` is Pinocchio's
``computeJointTorqueRegressor``, the joint columns are the armature and friction forces, and the energy rows give
`jaxmb.kinetic_energy` and `jaxmb.potential_energy`. Float64, random parameters and states with fixed seeds."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxmb
from checks import assert_close, fast_jit
from jaxmb import sysid, testing
from pinocchio_bridge import load_pair

pytestmark = pytest.mark.filterwarnings("ignore:.*mimic.*:UserWarning")

RTOL = 1e-12  # relative to max(1, the largest magnitude of the expected value)


@fast_jit
def _evaluate(model, q, qd, qdd):
    """The regressor, inverse dynamics, the energies and their rows, for one state."""
    return dict(Y=sysid.regressor(model, q, qd, qdd), pi=sysid.parameters(model),
                tau=jaxmb.inverse_dynamics(model, q, qd, qdd),
                rows=sysid.energy_regressors(model, q, qd),
                T=jaxmb.kinetic_energy(model, q, qd), U=jaxmb.potential_energy(model, q))


def _random_parameters(model, seed):
    """``model`` with every body's mass, centre of mass and inertia about it drawn at random (physical)."""
    rng = np.random.default_rng(seed)
    mass, com, inertia = zip(*(testing.random_inertia(rng) for _ in range(model.nb)))
    return model.replace(mass=jnp.asarray(mass), com=jnp.asarray(com), inertia=jnp.asarray(inertia))


def _check_linear(model, seeds=(0, 1)):
    for seed in seeds:
        q, qd, qdd = testing.random_state(model, jax.random.PRNGKey(seed))
        out = _evaluate(model, q, qd, qdd)
        assert out["Y"].shape == (model.nv, sysid.N_BODY * model.nb)
        assert_close(out["Y"] @ out["pi"] + model.armature * qdd, out["tau"], RTOL)
        T_rows, U_rows = out["rows"]
        assert_close(T_rows @ out["pi"] + 0.5 * jnp.sum(model.armature * qd * qd), out["T"], RTOL)
        assert_close(U_rows @ out["pi"], out["U"], RTOL)


@pytest.mark.parametrize("floating_base", [False, True])
def test_regressor_times_parameters_is_inverse_dynamics_on_random_trees(floating_base):
    model = testing.random_model(3, n_bodies=7, floating_base=floating_base, armature=True)
    _check_linear(model)


@functools.cache
def _robot(name, floating_base):
    model, pm, pmap = load_pair(name, floating_base)
    return _random_parameters(model, 7), pm, pmap


@pytest.mark.parametrize("name, floating_base", [("panda", False), ("talos_full_v2", True)])
def test_regressor_is_inverse_dynamics_and_pinocchio_regressor_on_robots(name, floating_base):
    model, pm, pmap = _robot(name, floating_base)
    _check_linear(model, seeds=(0,))
    # Pinocchio's model given the same random parameters, body by body (its joints in its own order)
    for j in range(1, pm.njoints):
        pm.inertias[j] = pin.Inertia.FromDynamicParameters(
            np.asarray(sysid.parameters(model)).reshape(model.nb, 10)[pmap.body_of_joint[j]])
    data = pm.createData()
    columns = (sysid.N_BODY * pmap.body_of_joint[1:, None] + np.arange(sysid.N_BODY)).reshape(-1)
    for seed in (1, 2):
        q, qd, qdd = testing.random_state(model, jax.random.PRNGKey(seed))
        Y = np.asarray(_evaluate(model, q, qd, qdd)["Y"])
        Y_pin = pin.computeJointTorqueRegressor(pm, data, pmap.q_to_pin(np.asarray(q)), pmap.v_to_pin(np.asarray(qd)),
                                                pmap.v_to_pin(np.asarray(qdd)))
        assert_close(Y[pmap.v_perm][:, columns], Y_pin, RTOL)  # rows and columns in Pinocchio's order
        tau_pin = pin.rnea(pm, data, pmap.q_to_pin(np.asarray(q)), pmap.v_to_pin(np.asarray(qd)),
                           pmap.v_to_pin(np.asarray(qdd)))
        assert_close(Y_pin @ np.concatenate([pm.inertias[j].toDynamicParameters() for j in range(1, pm.njoints)]),
                     tau_pin, RTOL)


def test_with_parameters_inverts_parameters():
    model = testing.random_model(5, n_bodies=5)
    back = sysid.with_parameters(model, sysid.parameters(model))
    for name in ("mass", "com", "inertia"):
        assert_close(getattr(back, name), 0.5 * (model.inertia + np.swapaxes(model.inertia, 1, 2))
                     if name == "inertia" else getattr(model, name), RTOL)


def test_joint_columns_are_armature_and_friction_forces():
    qd = jnp.array([0.3, -2.0, 0.0])
    qdd = jnp.array([1.5, 0.2, -0.7])
    armature, viscous, coulomb = jnp.array([0.1, 0.2, 0.3]), jnp.array([1.0, 2.0, 3.0]), jnp.array([0.5, 0.6, 0.7])
    theta = jnp.concatenate([armature, viscous, coulomb])
    expected = armature * qdd + viscous * qd + coulomb * jnp.sign(qd)
    assert_close(sysid.joint_columns(qd, qdd) @ theta, expected, RTOL)
    smooth = sysid.joint_columns(qd, qdd, coulomb_smoothing=0.1) @ theta
    assert_close(smooth, armature * qdd + viscous * qd + coulomb * jnp.tanh(qd / 0.1), RTOL)
    assert float(jnp.abs(smooth - expected).max()) > 1e-3  # the smoothing changes the force near rest


def test_regressor_batches_with_vmap():
    model = testing.random_model(3, n_bodies=7, armature=True)  # the structure `_evaluate` compiled for above
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    q, qd, qdd = jax.vmap(testing.random_state, in_axes=(None, 0))(model, keys)
    Y = fast_jit(jax.vmap(sysid.regressor, in_axes=(None, 0, 0, 0)))(model, q, qd, qdd)
    for i in range(3):
        assert_close(Y[i], _evaluate(model, q[i], qd[i], qdd[i])["Y"], RTOL)
