"""Joint armature (`Model.armature`, reflected rotor inertia) in float64: every algorithm sees the mass matrix
``M(q) + diag(armature)``.

Random trees with armature (fixed and floating base, the full joint mix) check the identities between the
algorithms, as tests/test_identities.py and tests/test_operators.py do without armature: one jitted program per
model computes every quantity at a state, called for each, compiled with `pinocchio_bridge.FAST_COMPILE_OPTIONS`.
Pinocchio (``pin_model.armature``) is the oracle on two robots of example-robot-data, and a geared pendulum the
closed form.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import checks
import jaxmb
from jaxmb import joints
from jaxmb.testing import random_model, random_state
from pinocchio_bridge import compile_fast, load_pair, run_fast

RTOL = 1e-10  # float64, relative to the magnitude of the expected value
PIN_RTOL = 1e-9  # relative to the norm of Pinocchio's result, as tests/test_pinocchio_oracle.py

MODEL_SPECS = {  # small: compile time dominates
    # revolute, helical, planar and spherical joints on a fixed base, branched
    "fixed-mixed": dict(seed=1, n_bodies=4, joint_mix="mixed", floating_base=False, branching=0.7, armature=True),
    # a free base (armature on its six coordinates too), then helical, planar, revolute, prismatic, branched
    "floating-mixed": dict(seed=41, n_bodies=5, joint_mix="mixed", floating_base=True, branching=0.4, armature=True),
}
ALL = list(MODEL_SPECS)
N_STATES = 2

assert_close = functools.partial(checks.assert_close, rtol=RTOL)


def _task_frames(model):
    return model.body_names[-2:]


def _evaluate(model, q, qd, u, mask, frames):
    """Everything the tests compare at one state: ``u`` is qdd for inverse dynamics, tau for forward dynamics."""
    ID = jaxmb.inverse_dynamics(model, q, qd, u)
    L, D = jaxmb.innovations_factors(model, q)
    masks = jnp.stack([mask, jnp.zeros_like(mask), jnp.ones_like(mask)])  # mixed, all free, all prescribed
    return {
        "ID": ID,
        "C": jaxmb.bias_forces(model, q, qd),
        "dID_dqdd": jax.lax.map(lambda e: jax.jvp(lambda a: jaxmb.inverse_dynamics(model, q, qd, a), (u,), (e,))[1],
                                jnp.eye(model.nv, dtype=u.dtype)).T,  # jax.jacfwd, a column at a time
        "FD_ID": jaxmb.forward_dynamics(model, q, qd, ID),
        "FD": jaxmb.forward_dynamics(model, q, qd, u),
        "M": jaxmb.mass_matrix(model, q),
        "M_rigid": jaxmb.mass_matrix(model.replace(armature=jnp.zeros_like(model.armature)), q),
        "L": L,
        "D": D,
        "M_inv": jaxmb.mass_matrix_inverse(model, q),
        "M_inv_u": jaxmb.mass_matrix_inverse_times(model, q, u),
        "log_det": jaxmb.log_det_mass_matrix(model, q),
        "KE": jaxmb.kinetic_energy(model, q, qd),
        "f": jaxmb.interbody_forces(model, q, qd, u),
        "hybrid": jax.lax.map(lambda m: jaxmb.hybrid_dynamics(model, q, qd, u, m), masks),
        "task": jaxmb.task_space(model, q, frames),
    }


_EVALUATE = jax.jit(_evaluate, static_argnames="frames")


@functools.cache
def evaluated(name):
    """(model, [(state, outputs)]): one program per model, compiled for one state and called for each (a program
    for the batch, through the batching rules of the sweeps, takes longer to compile)."""
    model = random_model(**MODEL_SPECS[name])
    states = [_draw(model, jax.random.PRNGKey(3000 * (ALL.index(name) + 1) + i)) for i in range(N_STATES)]
    one = compile_fast(_EVALUATE, model, *states[0], _task_frames(model))
    return model, [(tuple(np.asarray(x) for x in s), jax.tree.map(np.asarray, one(model, *s))) for s in states]


@checks.fast_jit  # one program per model instead of op by op
def _draw(model, key):
    """A random state (q, qd, u) and a mask of prescribed coordinates."""
    q, qd, u = random_state(model, key)
    return q, qd, u, jax.random.bernoulli(jax.random.fold_in(key, 8), 0.5, (model.nv,))


def scale_fd(out, x):
    """Error scale for accelerations obtained by solving with M: cond(M) |x|."""
    return np.linalg.cond(out["M"]) * max(1.0, np.abs(x).max())


# -- the mass matrix and the equations of motion ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_random_models_have_positive_armature_on_every_coordinate(name):
    model, _ = evaluated(name)
    assert model.armature.shape == (model.nv,)
    assert np.all(np.asarray(model.armature) > 0)


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_is_rigid_mass_matrix_plus_diag_armature(name):
    """mass_matrix of the model == mass_matrix of the model without armature + diag(armature)."""
    model, results = evaluated(name)
    for _, out in results:
        assert_close(out["M"], out["M_rigid"] + np.diag(model.armature))


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_is_jacobian_of_inverse_dynamics(name):
    """M(q) + diag(armature) == d ID / d qdd."""
    for _, out in evaluated(name)[1]:
        assert_close(out["dID_dqdd"], out["M"])


@pytest.mark.parametrize("name", ALL)
def test_inverse_dynamics_is_M_qdd_plus_bias_forces(name):
    """ID = M qdd + C, with C = bias_forces unchanged by the armature (qdd = 0)."""
    for (q, qd, qdd, _), out in evaluated(name)[1]:
        assert_close(out["ID"], out["M"] @ qdd + out["C"])


@pytest.mark.parametrize("name", ALL)
def test_forward_dynamics_inverts_inverse_dynamics(name):
    """FD(q, qd, ID(q, qd, qdd)) == qdd: the armature in D(k) of the articulated-body sweep matches ID's."""
    for (q, qd, qdd, _), out in evaluated(name)[1]:
        assert_close(out["FD_ID"], qdd, scale=scale_fd(out, qdd))


@pytest.mark.parametrize("name", ALL)
def test_forward_dynamics_equals_dense_solve(name):
    for (q, qd, tau, _), out in evaluated(name)[1]:
        expected = np.linalg.solve(out["M"], tau - out["C"])
        assert_close(out["FD"], expected, scale=scale_fd(out, expected))


@pytest.mark.parametrize("name", ALL)
def test_kinetic_energy_is_half_qd_M_qd(name):
    """1/2 qd* (M + diag(armature)) qd == body kinetic energy + rotor energy 1/2 sum armature qd^2."""
    for (q, qd, *_), out in evaluated(name)[1]:
        assert_close(out["KE"], 0.5 * qd @ out["M"] @ qd)


# -- the innovations factorization -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_innovations_factors_reproduce_M(name):
    """M = L D L* (7.14) with D(k) = H P H* + diag(armature)."""
    for _, out in evaluated(name)[1]:
        assert_close(out["L"] @ out["D"] @ out["L"].T, out["M"])


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_inverse_and_solve(name):
    """M^-1 (7.18) and the O(N) M^-1 x against the dense inverse of M with the armature."""
    for (q, qd, u, _), out in evaluated(name)[1]:
        M_inv = np.linalg.inv(out["M"])
        assert_close(out["M_inv"], M_inv, scale=np.abs(M_inv).max())
        assert_close(out["M_inv_u"], M_inv @ u, scale=scale_fd(out, M_inv @ u))


@pytest.mark.parametrize("name", ALL)
def test_log_det_mass_matrix_is_slogdet(name):
    """log det (M + diag(armature)) = sum_k log det D(k) (9.53)."""
    for _, out in evaluated(name)[1]:
        sign, log_det = np.linalg.slogdet(out["M"])
        assert sign > 0
        assert_close(out["log_det"], log_det)


# -- forces, hybrid dynamics, operational space ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_interbody_forces_project_to_tau_minus_rotor_torque(name):
    """H(k) f(k) = T(k) - armature(k) qdd(k): the rotor torque does not cross the joint."""
    model, results = evaluated(name)
    H = np.asarray(jaxmb.hinges.hinge_map(model))
    for (q, qd, tau, _), out in results:
        f = out["f"][model.topology.dof_body]
        assert_close(np.sum(H * f, -1), tau - np.asarray(model.armature) * out["FD"])


@pytest.mark.parametrize("name", ALL)
def test_hybrid_dynamics_matches_partitioned_dense_solve(name):
    """Free f, prescribed p: qdd_f = M_ff^-1 (u_f - C_f - M_fp u_p), tau = M qdd + C, M with the armature; all
    coordinates free is forward dynamics, all prescribed inverse dynamics."""
    for (q, qd, u, mask), out in evaluated(name)[1]:
        (qdd, tau), (qdd_free, tau_free), (qdd_pres, tau_pres) = (
            [x[i] for x in out["hybrid"]] for i in range(3))
        p = np.asarray(mask)
        f = ~p
        M, C = out["M"], out["C"]
        expected = np.where(p, u, 0.0)
        expected[f] = np.linalg.solve(M[np.ix_(f, f)], u[f] - C[f] - M[np.ix_(f, p)] @ u[p])
        assert_close(qdd, expected, scale=scale_fd(out, expected))
        assert_close(tau, M @ expected + C, scale=scale_fd(out, M @ expected + C))
        assert_close(qdd_free, out["FD"], scale=scale_fd(out, out["FD"]))
        assert_close(tau_free, u)
        assert_close(qdd_pres, u)
        assert_close(tau_pres, out["ID"])


@pytest.mark.parametrize("name", ALL)
def test_operational_space_compliance_is_J_Minv_Jstar(name):
    """Lambda^-1 = J M^-1 J* (10.6) and M^-1 J* from the column sweeps, M with the armature."""
    for _, out in evaluated(name)[1]:
        ts = out["task"]
        Minv_Jt = np.linalg.solve(out["M"], ts.J.T)
        assert_close(ts.Minv_Jt, Minv_Jt, scale=scale_fd(out, Minv_Jt))
        assert_close(ts.Lambda_inv, ts.J @ Minv_Jt, scale=scale_fd(out, ts.J @ Minv_Jt))


# -- the armature as a model parameter -----------------------------------------------------------------------------


@functools.cache
def small_model():
    return random_model(3, n_bodies=3, joint_mix="screw", armature=True)


def test_armature_is_a_leaf_for_cast_vmap_and_grad():
    """``cast`` converts it; ``vmap`` over a batch of models with different armatures adds each one's diagonal;
    d KE / d armature = qd^2 / 2 and d ID / d armature = qdd."""
    model = small_model()
    assert model.cast(jnp.float32).armature.dtype == jnp.float32
    q, qd, qdd = random_state(model, jax.random.PRNGKey(0))
    armatures = jnp.stack([jnp.zeros(model.nv), model.armature, 2.0 * model.armature])
    models = jax.vmap(lambda a: model.replace(armature=a))(armatures)
    M = jax.jit(jax.vmap(jaxmb.mass_matrix, in_axes=(0, None)))(models, q)
    for i in range(3):
        assert_close(M[i], M[0] + np.diag(armatures[i]))
    energy_and_forces = lambda a: (jaxmb.kinetic_energy(model.replace(armature=a), q, qd),
                                   jaxmb.inverse_dynamics(model.replace(armature=a), q, qd, qdd))
    dKE, dID = jax.jit(jax.jacrev(energy_and_forces))(model.armature)
    assert_close(dKE, 0.5 * qd**2)
    assert_close(dID, np.diag(qdd))


def test_dense_mass_matrix_is_H_phi_M_phi_star_H_star_plus_armature():
    """M = H phi M phi* H* + diag(armature) (9.3), the last term the `DenseOperators.armature` field."""
    model = small_model()
    q, _, _ = random_state(model, jax.random.PRNGKey(1))
    ops = checks.dense_operators(model, q)
    assert_close(ops.armature, np.diag(model.armature))
    assert_close(jax.jit(jaxmb.mass_matrix)(model, q), ops.H @ ops.phi @ ops.M @ ops.phi.T @ ops.H.T + ops.armature)


# -- building ----------------------------------------------------------------------------------------------------------


def _builder():
    b = jaxmb.ModelBuilder("armature")
    inertia = dict(mass=1.0, com=(0.1, 0.0, -0.3), inertia=np.diag([0.02, 0.03, 0.01]))
    return b, inertia


def test_builder_assembles_armature_in_coordinate_order():
    """Bodies added depth first come out breadth first; each joint's armature follows its coordinates, a scalar
    fills them all, None gives zeros, and a fixed joint adds none."""
    b, inertia = _builder()
    given = {"root": [0.5], "a": [1.0, 2.0, 3.0], "a2": 4.0, "b": None}
    b.add_body("root", None, joints.revolute((0, 1, 0)), armature=given["root"], **inertia)
    b.add_body("a", "root", joints.spherical(), placement=(np.eye(3), (0, 0, -0.5)), armature=given["a"], **inertia)
    b.add_body("a2", "a", joints.prismatic((1, 0, 0)), placement=(np.eye(3), (0, 0, -0.5)), armature=given["a2"],
               **inertia)
    b.add_body("tool", "a2", joints.fixed(), placement=(np.eye(3), (0, 0, -0.1)), **inertia)
    b.add_body("b", "root", joints.revolute((1, 0, 0)), placement=(np.eye(3), (0, 0.3, 0)), **inertia)
    model = b.build()
    topo = model.topology
    assert model.body_names != tuple(given)  # reordered: the test checks the assembly, not the insertion order
    for i, name in enumerate(model.body_names):
        nv = topo.nv_body[i]
        expected = np.broadcast_to(np.asarray(given[name] if given[name] is not None else 0.0, float), (nv,))
        np.testing.assert_array_equal(model.armature[topo.v_offset[i] : topo.v_offset[i] + nv], expected)


@pytest.mark.parametrize("joint, armature, message", [
    (joints.revolute(), -0.1, "non-negative"),
    (joints.revolute(), [0.1, 0.2], "sequence of 1,"),
    (joints.spherical(), [0.1, 0.2], "sequence of 3,"),
    (joints.revolute(), np.nan, "finite"),
    (joints.spherical(), [0.1, -1.0, 0.1], "non-negative"),
    (joints.fixed(), 0.1, "fixed joint"),
], ids=["negative", "too-long", "too-short", "nan", "one-negative", "fixed"])
def test_bad_armature_raises_model_error_naming_the_body(joint, armature, message):
    b, inertia = _builder()
    b.add_body("base", None, joints.revolute(), **inertia)
    with pytest.raises(jaxmb.ModelError, match=f"'link'.*{message}"):
        b.add_body("link", "base", joint, armature=armature, **inertia)


def test_armature_keeps_a_massless_joint_regular():
    """A rotor on a massless link: D(k) = H R H* + armature is regular, so the model builds."""
    b, _ = _builder()
    b.add_body("rotor", None, joints.revolute(), armature=0.2)
    model = b.build()
    assert_close(jaxmb.mass_matrix(model, jnp.zeros(1)), [[0.2]])


# -- closed form: a pendulum driven through a gearbox -----------------------------------------------------------------


def test_geared_pendulum_closed_form():
    """A link on a fixed revolute joint about y, com at distance l below it, driven by a rotor of inertia J_r
    through a gear ratio N: (I_link + N^2 J_r) qdd = tau - m g l sin q, KE = 1/2 (I_link + N^2 J_r) qd^2."""
    m, l, I_yy, g, N, J_r = 1.3, 0.4, 0.02, 9.81, 50.0, 3e-5
    b = jaxmb.ModelBuilder("geared-pendulum", gravity=(0, 0, -g))
    b.add_body("link", None, joints.revolute((0, 1, 0)), mass=m, com=(0, 0, -l),
               inertia=np.diag([0.03, I_yy, 0.01]), armature=N**2 * J_r)
    model = b.build()
    inertia = I_yy + m * l**2 + N**2 * J_r

    @jax.jit
    def evaluate(q, qd, tau, qdd):
        q, qd, tau, qdd = (jnp.atleast_1d(x) for x in (q, qd, tau, qdd))
        return (jaxmb.mass_matrix(model, q)[0, 0], jaxmb.forward_dynamics(model, q, qd, tau)[0],
                jaxmb.inverse_dynamics(model, q, qd, qdd)[0], jaxmb.kinetic_energy(model, q, qd))

    for q, qd, tau, qdd in [(0.3, -1.2, 0.7, 2.0), (2.5, 0.4, -1.1, -0.5)]:
        M, FD, ID, KE = evaluate(q, qd, tau, qdd)
        assert_close(M, inertia)
        assert_close(FD, (tau - m * g * l * np.sin(q)) / inertia)
        assert_close(ID, inertia * qdd + m * g * l * np.sin(q))
        assert_close(KE, 0.5 * inertia * qd**2)


# -- Pinocchio as the oracle -------------------------------------------------------------------------------------------

PIN_ROBOTS = [("panda", False), ("solo12", True)]


def _oracle_evaluate(model, q, qd, qdd, tau):
    return (jaxmb.mass_matrix(model, q), jaxmb.inverse_dynamics(model, q, qd, qdd),
            jaxmb.forward_dynamics(model, q, qd, tau))


_ORACLE = jax.jit(_oracle_evaluate)  # compiled for one state, called for each


def _relative(x, y):
    return np.linalg.norm(np.asarray(x) - y) / np.linalg.norm(y)


@pytest.mark.filterwarnings("ignore:.*triangle inequality.*:UserWarning")
@pytest.mark.parametrize("robot, floating", PIN_ROBOTS, ids=[f"{r}-{'free' if f else 'fixed'}" for r, f in PIN_ROBOTS])
def test_armature_matches_pinocchio(robot, floating):
    """crba, rnea and aba of Pinocchio with ``pin_model.armature`` set to the same random positive vector."""
    model, pm, br = load_pair(robot, floating)
    np.testing.assert_array_equal(model.armature, np.zeros(model.nv))  # URDFs carry no armature
    rng = np.random.default_rng(len(robot))
    armature = rng.uniform(0.01, 0.5, model.nv)
    model = model.replace(armature=jnp.asarray(armature))
    pm.armature = br.v_to_pin(armature)
    data = pm.createData()

    n = 3
    keys = jnp.stack([jax.random.PRNGKey(s) for s in range(n)])
    q = np.asarray(run_fast(jax.vmap(jaxmb.random_configuration, in_axes=(None, 0)), model, keys))
    qd, qdd, tau = (rng.standard_normal((n, model.nv)) for _ in range(3))
    one = compile_fast(_ORACLE, model, q[0], qd[0], qdd[0], tau[0])
    M, ID, FD = (np.stack(x) for x in zip(*(one(model, q[s], qd[s], qdd[s], tau[s]) for s in range(n))))
    for s in range(n):
        qp, vp = br.q_to_pin(q[s]), br.v_to_pin(qd[s])
        M_pin = pin.crba(pm, data, qp)
        M_pin = br.matrix_from_pin(np.triu(M_pin) + np.triu(M_pin, 1).T)
        assert _relative(M[s], M_pin) <= PIN_RTOL
        assert _relative(M[s] - np.diag(armature), M_pin) > 1e3 * PIN_RTOL  # the armature matters
        ID_pin = br.tau_from_pin(pin.rnea(pm, data, qp, vp, br.v_to_pin(qdd[s])))
        assert _relative(ID[s], ID_pin) <= PIN_RTOL
        FD_pin = br.v_from_pin(pin.aba(pm, data, qp, vp, br.tau_to_pin(tau[s])))
        assert _relative(FD[s], FD_pin) <= PIN_RTOL
