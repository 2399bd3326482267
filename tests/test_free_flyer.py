"""Free-flying trees (book ch. 17) on random trees, in float64: Alg 17.3 (regular and dual sweeps) against the
articulated-body algorithm, Lemma 17.1's second form (17.12), (17.5), Lemma 17.5 (``Upsilon^-1 = P + S`` against
the dense ``J M^-1 J*`` at every body and against `jaxmb.upsilon`), re-rooting's invariants (17.45, 17.46, 17.48),
and the errors for models these algorithms do not take.

One floating tree with every joint kind (free, revolute, prismatic, helical, spherical, planar), without and with
armature on every coordinate: one program (`evaluate`) computes everything the tests compare, compiled once and
called for both."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import checks
from jaxmb.dynamics.articulated import articulated_body
from jaxmb.dynamics.energy import kinetic_energy
from jaxmb.dynamics.free_flyer import base_invariant_forward_dynamics, dual_articulated_body, \
    operational_space_inertias
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.dynamics.opspace import upsilon
from jaxmb.errors import ModelError
from jaxmb.hinges import hinge_map
from jaxmb.reroot import body_frame_changes, reroot, rerooted_state
from jaxmb.spatial import Transform, phi_star_congruence
from jaxmb.testing import random_model, random_state

RTOL = 1e-11

TREE = dict(seed=17, n_bodies=6, joint_mix="mixed", floating_base=True)  # every joint kind
MODELS = {"floating-mixed": TREE, "floating-mixed-armature": dict(TREE, armature=True)}  # one tree: one program
SCREW_PATH_BODY = "b4"  # hangs from the free base by a helical and a revolute joint


@functools.cache
def model(name):
    return random_model(**MODELS[name])


@checks.fast_jit
def _evaluate(m, q, qd, tau, f_ext):
    ab = articulated_body(m, q, qd, tau, f_ext)
    return {
        "ab": ab,
        "fd": base_invariant_forward_dynamics(m, q, qd, tau, f_ext),
        "dual": dual_articulated_body(m, q, qd, tau, f_ext),
        "Lambda": operational_space_inertias(m, q),
        "upsilon": upsilon(m, q),
        "M": mass_matrix(m, q),
        "H": hinge_map(m),
    }


def _batched(m, q, qd, tau):
    states = (jnp.stack([q, q]), jnp.stack([qd, -qd]), jnp.stack([tau, 2 * tau]))
    return (jax.vmap(lambda q, qd, tau: base_invariant_forward_dynamics(m, q, qd, tau).qdd)(*states),
            jnp.stack([articulated_body(m, *(x[i] for x in states)).qdd for i in range(2)]))


@functools.cache
def evaluated(name):
    m = model(name)
    q, qd, tau = random_state(m, jax.random.PRNGKey(3))
    f_ext = jax.random.normal(jax.random.PRNGKey(4), (m.nb, 6), q.dtype)
    return m, q, tau, jax.device_get(_evaluate(m, q, qd, tau, f_ext))


@pytest.mark.parametrize("name", list(MODELS))
def test_alg_17_3_equals_articulated_body_algorithm(name):
    _, _, _, out = evaluated(name)
    checks.assert_close(out["fd"].qdd, out["ab"].qdd, RTOL)
    checks.assert_close(out["fd"].alpha, out["ab"].alpha, RTOL)


@pytest.mark.parametrize("name", list(MODELS))
def test_17_12_dual_accelerations_below_the_roots(name):
    m, _, _, out = evaluated(name)
    body = m.topology.dof_body
    qdd_dual = out["dual"].nu_dl - np.sum(out["dual"].G_dl * out["ab"].alpha[body], 1)  # nu_dl - G_dl* alpha
    below = m.topology.parent[body] >= 0
    checks.assert_close(qdd_dual[below], out["ab"].qdd[below], RTOL)


def test_17_5_dual_inertia_annihilates_the_hinge_and_vanishes_at_the_free_root():
    m, _, tau, out = evaluated("floating-mixed")
    S = out["dual"].S
    for k in range(m.nb):
        checks.assert_close(S[k] @ out["H"][m.topology.dof_body == k].T, np.zeros((6, m.topology.nv_body[k])), RTOL,
                            scale=np.abs(S[k]).max())  # S(k) H*(k) = 0
    checks.assert_close(S[0], np.zeros((6, 6)), RTOL)
    checks.assert_close(out["dual"].z_dl[0], -np.asarray(tau[:6]), RTOL)


@pytest.mark.parametrize("name", list(MODELS))
def test_lemma_17_5_inverse_of_P_plus_S_is_dense_J_Minv_Jt_at_every_body(name):
    m, q, _, out = evaluated(name)
    ops = checks.dense_operators(m, q)
    J = ops.phi.T @ ops.H.T  # body velocities phi* H* qd, (6nb, nv)
    Omega = J @ np.linalg.solve(out["M"], J.T)
    for k in range(m.nb):
        block = Omega[6 * k : 6 * k + 6, 6 * k : 6 * k + 6]
        checks.assert_close(np.linalg.inv(out["Lambda"][k]), block, RTOL, scale=np.abs(block).max())
        checks.assert_close(out["Lambda"][k] @ out["upsilon"][k], np.eye(6), RTOL)


def test_vmap_equals_one_state_at_a_time():
    m = random_model(seed=8, n_bodies=3, joint_mix="screw", floating_base=True)
    batched, one_by_one = checks.fast_jit(_batched)(m, *random_state(m, jax.random.PRNGKey(1)))
    checks.assert_close(batched, one_by_one, RTOL)


# -- re-rooting -------------------------------------------------------------------------------------------------


@functools.cache
def rerooted(name, body):
    m = model(name)
    m = m.replace(armature=m.armature.at[:6].set(0.0))  # a re-rooted tree has no joint for a base's rotors
    new = reroot(m, body)
    q, qd, _ = random_state(m, jax.random.PRNGKey(5))

    def evaluate(q, qd):
        q2, qd2 = rerooted_state(m, new, q, qd)
        J = jax.jacfwd(lambda v: rerooted_state(m, new, q, v)[1])(qd)
        return dict(J=J, M=mass_matrix(m, q), M2=mass_matrix(new, q2), K=kinetic_energy(m, q, qd),
                    K2=kinetic_energy(new, q2, qd2), U=upsilon(m, q), U2=upsilon(new, q2))

    return m, new, jax.device_get(checks.fast_jit(evaluate)(q, qd))


def test_reroot_invariants_17_45_17_46_17_48():
    b = SCREW_PATH_BODY
    m, new, out = rerooted("floating-mixed-armature", b)
    assert new.topology.parent[new.body_index(b)] == -1 and new.joint_names[new.body_index(b)] == "root"
    checks.assert_close(out["J"].T @ out["M2"] @ out["J"], out["M"], RTOL)  # (17.45)
    checks.assert_close(out["K2"], out["K"], RTOL)  # (17.46)
    R, p = body_frame_changes(m, b)
    order = np.array([m.body_index(n) for n in new.body_names])
    U = jax.jit(phi_star_congruence)(Transform(jnp.asarray(R[order]), jnp.asarray(p[order])), out["U"][order])
    checks.assert_close(out["U2"], U, RTOL)  # (17.48): Upsilon at every body, in its new frame


def test_reroot_errors_name_the_problem():
    m = model("floating-mixed")
    with pytest.raises(ModelError, match="no body 'nowhere'"):
        reroot(m, "nowhere")
    spherical = m.body_names[m.joint_types.index("spherical")]
    with pytest.raises(ModelError, match="revolute, prismatic or helical"):
        reroot(m, spherical)
    fixed = random_model(seed=2, n_bodies=3, joint_mix="revolute")
    with pytest.raises(ModelError, match="free-flying"):
        reroot(fixed, "b2")
    with pytest.raises(ModelError, match="takes a tree"):
        reroot(object(), "b2")
    with pytest.raises(ModelError, match="has armature"):
        reroot(model("floating-mixed-armature"), SCREW_PATH_BODY)


def test_free_flyer_algorithms_refuse_a_fixed_base():
    fixed = random_model(seed=2, n_bodies=3, joint_mix="revolute")
    zero = jnp.zeros(fixed.nv)
    with pytest.raises(ModelError, match="free joint"):
        base_invariant_forward_dynamics(fixed, zero, zero, zero)
    with pytest.raises(ModelError, match="free joint"):
        operational_space_inertias(fixed, zero)
