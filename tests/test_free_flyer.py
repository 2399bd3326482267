"""Free-flying trees (book ch. 17) on random trees, in float64: Alg 17.3 (regular and dual sweeps) against the
articulated-body algorithm, Lemma 17.1's second form (17.12), (17.5), Lemma 17.5 (``Upsilon^-1 = P + S`` against
the dense ``J M^-1 J*`` at every body and against `jaxmb.upsilon`), re-rooting with every joint kind reversed
(17.45, 17.46, 17.48, the same motion and forward dynamics), and the errors for models these algorithms do not take.

One floating tree with every joint kind (free, revolute, prismatic, helical, spherical, planar), without and with
armature on every coordinate: one program (`evaluate`) computes everything the tests compare, compiled once and
called for both. Re-rooting has a tree of its own, with every kind on the path to the new base (`reroot_tree`), and
one program for all its checks."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import checks
from jaxmb import joints
from jaxmb.configuration import configuration_rate
from jaxmb.dynamics.articulated import articulated_body
from jaxmb.dynamics.energy import kinetic_energy
from jaxmb.dynamics.free_flyer import base_invariant_forward_dynamics, dual_articulated_body, \
    operational_space_inertias
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.dynamics.opspace import upsilon
from jaxmb.errors import ModelError
from jaxmb.hinges import hinge_map
from jaxmb.kinematics import body_velocities, forward_kinematics
from jaxmb.model import ModelBuilder
from jaxmb.reroot import body_frame_changes, reroot, rerooted_state
from jaxmb.rotation import rpy_to_matrix
from jaxmb.spatial import Transform, compose, phi_star, phi_star_congruence
from jaxmb.testing import random_inertia, random_model, random_state

RTOL = 1e-11

TREE = dict(seed=17, n_bodies=6, joint_mix="mixed", floating_base=True)  # every joint kind
MODELS = {"floating-mixed": TREE, "floating-mixed-armature": dict(TREE, armature=True)}  # one tree: one program


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


INF = np.inf
REROOT_BASE = "b5"  # the path to it reverses a spherical, a planar, a free, a helical and a prismatic joint
REROOT_RTOL = 1e-12


def reroot_tree():
    """A floating tree whose path from the (placed) free base ``b0`` to ``REROOT_BASE`` holds every joint kind:
    ``b0 -spherical- b1 -planar- b2 -free- b3 -helical- b4 -prismatic- b5``, with limits and armature where they carry
    over to the reversed joint (a spherical joint's quaternion, the planar angle, a screw; equal armature on the
    rotations of the spherical and free joints, on the planar rotation only); off it a spherical (on b1), a planar
    (on b3) and a free joint (on b0) with armature on every coordinate."""
    rng = np.random.default_rng(23)
    equal = (0.05,) * 3 + (0.0,) * 3
    spec = [
        ("b0", None, joints.free(), None),
        ("b1", "b0", dataclasses.replace(joints.spherical(), lower=(-INF, -0.9, -INF, -0.8),
                                         upper=(INF, 0.7, INF, INF)), 0.1),
        ("b2", "b1", dataclasses.replace(joints.planar(rng.normal(size=3)), lower=(-INF, -INF, -2.0),
                                         upper=(INF, INF, 2.5)), (0.0, 0.0, 0.07)),
        ("b3", "b2", joints.free(), equal),
        ("b4", "b3", joints.helical(rng.normal(size=3), 0.1, -2.0, 2.5), 0.03),
        ("b5", "b4", joints.prismatic(rng.normal(size=3)), 0.02),
        ("b6", "b1", joints.spherical(), (0.01, 0.02, 0.03)),
        ("b7", "b3", joints.planar(rng.normal(size=3)), (0.01, 0.02, 0.03)),
        ("b8", "b0", joints.free(), 0.04),
    ]
    b = ModelBuilder("reroot-tree")
    for name, parent, joint, armature in spec:
        mass, com, inertia = random_inertia(rng)
        placement = (np.asarray(rpy_to_matrix(rng.uniform(-np.pi, np.pi, 3))), rng.uniform(-0.5, 0.5, 3))
        b.add_body(name, parent, joint, placement=placement, mass=mass, com=com, inertia=inertia, armature=armature)
    return b.build()


@functools.cache
def rerooted():
    """The tree, re-rooted at ``REROOT_BASE``, and one program's values on both at a random state: ``J_RG``, ``M``,
    ``K_e``, ``Upsilon``, body poses and velocities, and ``qdd'`` from the re-rooted tree's forward dynamics with
    ``tau' = J_RG^-* tau`` (equal power) against ``qdd`` mapped, ``d/dt (J_RG qd) = J_RG qdd + J_RG_dot qd``."""
    m = reroot_tree()
    new = reroot(m, REROOT_BASE)
    q, qd, tau = random_state(m, jax.random.PRNGKey(5))

    def evaluate(q, qd, tau):
        q2, qd2 = rerooted_state(m, new, q, qd)
        J = jax.jacfwd(lambda v: rerooted_state(m, new, q, v)[1])(qd)
        qdd = articulated_body(m, q, qd, tau).qdd
        _, qdd_mapped = jax.jvp(lambda q, v: rerooted_state(m, new, q, v)[1], (q, qd),
                                (configuration_rate(m, q, qd), qdd))
        return dict(J=J, qd2=qd2, M=mass_matrix(m, q), M2=mass_matrix(new, q2), K=kinetic_energy(m, q, qd),
                    K2=kinetic_energy(new, q2, qd2), U=upsilon(m, q), U2=upsilon(new, q2), T=forward_kinematics(m, q),
                    T2=forward_kinematics(new, q2), V=body_velocities(m, q, qd), V2=body_velocities(new, q2, qd2),
                    qdd_mapped=qdd_mapped, qdd2=articulated_body(new, q2, qd2, jnp.linalg.solve(J.T, tau)).qdd)

    R, p = body_frame_changes(m, REROOT_BASE)
    order = np.array([m.body_index(n) for n in new.body_names])
    E = Transform(jnp.asarray(R[order]), jnp.asarray(p[order]))  # new body frames in the old, in new body order
    return m, new, qd, E, order, jax.device_get(checks.fast_jit(evaluate)(q, qd, tau))


def test_reroot_invariants_17_45_17_46_17_48():
    m, new, qd, E, order, out = rerooted()
    assert new.topology.parent[new.body_index(REROOT_BASE)] == -1
    assert new.joint_names[new.body_index(REROOT_BASE)] == m.joint_names[0]
    checks.assert_close(out["J"] @ qd, out["qd2"], REROOT_RTOL)  # qd' = J_RG qd
    checks.assert_close(out["J"].T @ out["M2"] @ out["J"], out["M"], REROOT_RTOL)  # (17.45), armature included
    checks.assert_close(out["K2"], out["K"], REROOT_RTOL)  # (17.46)
    U = jax.jit(phi_star_congruence)(E, out["U"][order])
    checks.assert_close(out["U2"], U, REROOT_RTOL)  # (17.48): Upsilon at every body, in its new frame


def test_reroot_same_motion_poses_velocities_and_forward_dynamics():
    _, _, _, E, order, out = rerooted()
    T = jax.jit(compose)(Transform(out["T"].R[order], out["T"].p[order]), E)
    checks.assert_close(out["T2"].R, T.R, REROOT_RTOL)  # every body frame's world pose
    checks.assert_close(out["T2"].p, T.p, REROOT_RTOL)
    checks.assert_close(out["V2"], jax.jit(phi_star)(E, out["V"][order]), REROOT_RTOL)  # V' = phi*(E) V
    checks.assert_close(out["qdd2"], out["qdd_mapped"], REROOT_RTOL)


def test_reroot_carries_limits_and_armature_of_reversed_joints():
    m, new, _, _, _, _ = rerooted()
    for name, sign in [("b1", [1, -1, -1, -1]), ("b2", [1, 1, -1]), ("b4", [1])]:  # q'_i = sign_i q_i
        q_old, v_old = m.joint_coordinates(name)
        q_new, v_new = new.joint_coordinates(name)
        flip = np.asarray(sign) < 0
        lower, upper = np.asarray(m.q_lower[q_old]), np.asarray(m.q_upper[q_old])
        np.testing.assert_array_equal(new.q_lower[q_new], np.where(flip, -upper, lower))
        np.testing.assert_array_equal(new.q_upper[q_new], np.where(flip, -lower, upper))
        np.testing.assert_array_equal(new.armature[v_new], m.armature[v_old])


def test_reroot_errors_name_the_problem():
    m = model("floating-mixed")
    with pytest.raises(ModelError, match="no body 'nowhere'"):
        reroot(m, "nowhere")
    fixed = random_model(seed=2, n_bodies=3, joint_mix="revolute")
    with pytest.raises(ModelError, match="free-flying"):
        reroot(fixed, "b2")
    with pytest.raises(ModelError, match="takes a tree"):
        reroot(object(), "b2")
    armature = model("floating-mixed-armature")
    with pytest.raises(ModelError, match="root joint 'root' has armature"):
        reroot(armature, "b1")
    spherical = m.joint_names[m.joint_types.index("spherical")]  # below a helical joint, armature unequal
    with pytest.raises(ModelError, match=f"spherical joint {spherical!r}, whose armature does not carry over"):
        reroot(armature.replace(armature=armature.armature.at[:6].set(0.0)), m.body_names[m.joint_index(spherical)])
    planar = m.joint_names[m.joint_types.index("planar")]
    x_limited = m.q_lower.at[m.joint_coordinates(planar)[0].start].set(-1.0)
    with pytest.raises(ModelError, match=f"planar joint {planar!r}, whose limits do not carry over"):
        body_frame_changes(m.replace(q_lower=x_limited), m.body_names[m.joint_index(planar)])


def test_free_flyer_algorithms_refuse_a_fixed_base():
    fixed = random_model(seed=2, n_bodies=3, joint_mix="revolute")
    zero = jnp.zeros(fixed.nv)
    with pytest.raises(ModelError, match="free joint"):
        base_invariant_forward_dynamics(fixed, zero, zero, zero)
    with pytest.raises(ModelError, match="free joint"):
        operational_space_inertias(fixed, zero)
