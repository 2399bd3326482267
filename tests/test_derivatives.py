"""The analytic Jacobians of `jaxmb.dynamics.derivatives` against forward-mode autodiff along `jaxmb.integrate` on
random trees of every joint kind, against the algorithms they differentiate, and against Pinocchio's
``computeRNEADerivatives`` / ``computeABADerivatives`` on real robots."""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxmb
from checks import assert_close, fast_jit
from jaxmb.testing import random_model, random_state
from pinocchio_bridge import compile_fast, load_pair

pytestmark = pytest.mark.filterwarnings("ignore:.*triangle inequality.*:UserWarning")

MODELS = {
    "screw_chain": dict(seed=0, n_bodies=6, joint_mix="screw", branching=0.0),
    "mixed_tree": dict(seed=2, n_bodies=8, joint_mix="mixed", branching=0.7),
    "mixed_free_base_armature": dict(seed=1, n_bodies=7, joint_mix="mixed", floating_base=True, armature=True),
}


def _along(model, f, q):
    """``f(q, x, y)`` as a function of a tangent step ``dq`` at ``q`` (`jaxmb.integrate`), for autodiff."""
    return lambda dq, x, y, f_ext: f(model, jaxmb.integrate(model, q, dq, 1.0), x, y, f_ext)


@fast_jit
def _analytic_and_autodiff(model, q, qd, x, f_ext):
    zero = jnp.zeros(model.nv, qd.dtype)
    out = {}
    for name, f, analytic in (("inverse", jaxmb.inverse_dynamics, jaxmb.inverse_dynamics_derivatives),
                              ("forward", jaxmb.forward_dynamics, jaxmb.forward_dynamics_derivatives)):
        out[name] = analytic(model, q, qd, x, f_ext)
        g = _along(model, f, q)
        out[name + "_autodiff"] = (g(zero, qd, x, f_ext),) + jax.jacfwd(g, argnums=(0, 1, 2))(zero, qd, x, f_ext)
    out["inverse_dynamics"] = jaxmb.inverse_dynamics(model, q, qd, x, f_ext)
    out["mass_matrix"] = jaxmb.mass_matrix(model, q)
    out["mass_matrix_inverse"] = jaxmb.mass_matrix_inverse(model, q)
    return out


_random_state = fast_jit(random_state)  # one program per model instead of op by op


@pytest.fixture(scope="module", params=list(MODELS), ids=list(MODELS))
def case(request):
    model = random_model(**MODELS[request.param])
    q, qd, x = _random_state(model, jax.random.PRNGKey(7))
    f_ext = jax.random.normal(jax.random.PRNGKey(8), (model.nb, 6))
    return model, _analytic_and_autodiff(model, q, qd, x, f_ext)


def test_inverse_dynamics_derivatives_equal_autodiff_along_the_manifold(case):
    _, out = case
    for analytic, autodiff in zip(out["inverse"], out["inverse_autodiff"]):
        assert_close(analytic, autodiff, 1e-12, scale=np.abs(autodiff).max())


def test_forward_dynamics_derivatives_equal_autodiff_along_the_manifold(case):
    _, out = case
    for analytic, autodiff in zip(out["forward"], out["forward_autodiff"]):
        assert_close(analytic, autodiff, 1e-11, scale=np.abs(autodiff).max())


def test_derivatives_carry_the_values_they_differentiate(case):
    _, out = case
    assert_close(out["inverse"].tau, out["inverse_dynamics"], 1e-13)
    assert_close(out["inverse"].M, out["mass_matrix"], 1e-13)
    assert_close(out["forward"].dqdd_dtau, out["mass_matrix_inverse"], 1e-12)
    assert_close(out["forward"].dqdd_dtau @ out["mass_matrix"], np.eye(len(out["mass_matrix"])), 1e-12)


def test_free_base_columns_are_body_frame_tangents():
    """Moving the free base along its body-frame x axis (``integrate``) is column 3 of ``d tau/d q``; moving the
    quaternion's coordinates is not what the columns mean (nq = 7, nv = 6)."""
    model = random_model(**MODELS["mixed_free_base_armature"])
    q, qd, qdd = _random_state(model, jax.random.PRNGKey(3))
    e = jnp.zeros(model.nv).at[3].set(1.0)
    h = 1e-6

    @fast_jit  # one program instead of op by op
    def both(q, qd, qdd):
        step = lambda s: jaxmb.inverse_dynamics(model, jaxmb.integrate(model, q, e, s), qd, qdd)  # noqa: E731
        return jaxmb.inverse_dynamics_derivatives(model, q, qd, qdd).dtau_dq, (step(h) - step(-h)) / (2 * h)

    dtau_dq, central = both(q, qd, qdd)
    assert_close(dtau_dq[:, 3], central, 1e-8, scale=np.abs(dtau_dq[:, 3]).max())
    assert dtau_dq.shape == (model.nv, model.nv) and model.nq > model.nv


def test_derivatives_in_float32_follow_float64():
    model = random_model(**MODELS["mixed_tree"])
    q, qd, qdd = _random_state(model, jax.random.PRNGKey(5))
    derivatives = fast_jit(jaxmb.inverse_dynamics_derivatives)  # one program per dtype
    d64 = derivatives(model, q, qd, qdd)
    m32 = model.cast(jnp.float32)
    d32 = derivatives(m32, *(x.astype(jnp.float32) for x in (q, qd, qdd)))
    for a, b in zip(d32, d64):
        assert a.dtype == jnp.float32
        assert_close(a, b, 2e-5, scale=np.abs(b).max())


def test_derivatives_are_differentiable_and_batch():
    """Second derivatives by autodiff through the analytic ones are finite at rest (q neutral, qd = 0), and
    ``vmap`` equals a loop."""
    model = random_model(**MODELS["mixed_free_base_armature"])
    q = jaxmb.neutral_configuration(model)
    zero = jnp.zeros(model.nv)
    dq_squared = lambda qd: jnp.sum(jaxmb.forward_dynamics_derivatives(model, q, qd, zero).dqdd_dq ** 2)
    g = fast_jit(jax.grad(dq_squared))(zero)
    assert np.all(np.isfinite(g))
    keys = jax.random.split(jax.random.PRNGKey(4), 3)
    states = fast_jit(jax.vmap(random_state, (None, 0)))(model, keys)
    derivatives = lambda q, qd, qdd: jaxmb.inverse_dynamics_derivatives(model, q, qd, qdd)
    batched = fast_jit(jax.vmap(derivatives))(*states)
    one_state = fast_jit(derivatives)  # compiled once, called per state (op by op, each call compiles anew)
    for i in range(3):
        one = one_state(*(s[i] for s in states))
        for a, b in zip(batched, one):
            assert_close(a[i], b, 1e-13, scale=np.abs(b).max())


# -- Pinocchio ------------------------------------------------------------------------------------------------------

ROBOTS = [("talos_full_v2", True), ("panda", False), ("kinova", True)]  # kinova: continuous joints


def _jaxmb_side(model, q, qd, qdd, tau, f_ext):
    return (jaxmb.inverse_dynamics_derivatives(model, q, qd, qdd, f_ext),
            jaxmb.forward_dynamics_derivatives(model, q, qd, tau, f_ext))


_JAXMB_SIDE = jax.jit(_jaxmb_side)


@pytest.fixture(scope="module", params=ROBOTS, ids=[f"{r}-{'free' if f else 'fixed'}" for r, f in ROBOTS])
def robot(request):
    model, pm, br = load_pair(*request.param)
    rng = np.random.default_rng(11)
    q = jaxmb.random_configuration(model, jax.random.PRNGKey(11))
    qd, qdd, tau = (rng.standard_normal(model.nv) for _ in range(3))
    f_ext = rng.standard_normal((model.nb, 6))
    args = (model, q, jnp.asarray(qd), jnp.asarray(qdd), jnp.asarray(tau), jnp.asarray(f_ext))
    ours = compile_fast(_JAXMB_SIDE, *args)(*args)
    d = pm.createData()
    qp, fext = br.q_to_pin(np.asarray(q)), br.body_forces_to_pin(f_ext)
    rnea = [np.array(m) for m in pin.computeRNEADerivatives(pm, d, qp, br.v_to_pin(qd), br.v_to_pin(qdd), fext)]
    aba = [np.array(m) for m in pin.computeABADerivatives(pm, d, qp, br.v_to_pin(qd), br.v_to_pin(tau), fext)]
    qdd_pin = pin.aba(pm, pm.createData(), qp, br.v_to_pin(qd), br.v_to_pin(tau), fext)
    yield ours, br, rnea, aba, br.v_from_pin(qdd_pin)
    jax.clear_caches()


def _symmetric(upper):
    return np.triu(upper) + np.triu(upper, 1).T


def _rel(x, y):
    return np.linalg.norm(np.asarray(x) - y) / np.linalg.norm(y)


def test_inverse_dynamics_derivatives_match_pinocchio(robot):
    (ours, _), br, (dq, dv, da), _, _ = robot
    assert _rel(ours.dtau_dq, br.matrix_from_pin(dq)) < 1e-9
    assert _rel(ours.dtau_dqd, br.matrix_from_pin(dv)) < 1e-9
    assert _rel(ours.M, br.matrix_from_pin(_symmetric(da))) < 1e-9


def test_forward_dynamics_derivatives_match_pinocchio(robot):
    (_, ours), br, _, (dq, dv, dtau), qdd = robot
    assert _rel(ours.qdd, qdd) < 1e-9
    assert _rel(ours.dqdd_dq, br.matrix_from_pin(dq)) < 1e-9
    assert _rel(ours.dqdd_dqd, br.matrix_from_pin(dv)) < 1e-9
    assert _rel(ours.dqdd_dtau, br.matrix_from_pin(_symmetric(dtau))) < 1e-9
