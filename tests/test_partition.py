"""Partitioned hinges (`jaxmb.partitioning`; Jain, "Partitioning of Recursive Multibody Dynamics", 2022).

Two random trees: one of jaxmb's own joint kinds (free base, spherical, planar, screw), whose unpartitioned model
is a jaxmb `Model`, and one built by `PartitionBuilder` with universal, gimbal, spherical, planar, free and screw
joints, whose unpartitioned model is the dense operator form of eq. (1) over its real bodies, with ``H_bar(k)`` and
``a_bar(k)`` taken by automatic differentiation of the joints' poses (independent of condition 5).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from checks import assert_close, check_grads, fast_jit
from jaxmb import joints
from jaxmb.errors import ModelError
from jaxmb.hinges import body_inertias, joint_poses
from jaxmb.partitioning import (
    PartitionBuilder,
    angles_to_quaternion,
    block_ldl,
    from_partitioned,
    gimbal,
    gimbal_lock,
    partition_model,
    partitioned_dynamics,
    quaternion_to_angles,
    to_partitioned,
    to_partitioned_forces,
    universal,
    unpartitioned_bodies,
    unpartitioned_coriolis,
    unpartitioned_hinge_maps,
)
from jaxmb.rotation import quat_to_matrix
from jaxmb.spatial import Transform, compose, cross_force, cross_motion, inverse, mv, phi, phi_star, swap
from jaxmb.testing import random_inertia, random_model, random_state

SEQUENCES = ("xyz", "xzy", "yxz", "yzx", "zxy", "zyx")


@functools.cache
def kinds_model():
    """A jaxmb model with a free base and spherical, planar and screw joints, and its partition."""
    model = random_model(11, 7, joint_mix=("revolute", "spherical", "planar", "prismatic", "spherical", "helical"),
                         floating_base=True)
    assert {"free", "spherical", "planar", "screw"} <= set(model.topology.kinds)
    return model, partition_model(model, sequence="zyx")


@functools.cache
def chain_partition():
    """A tree built partitioned: universal, gimbal, spherical, screw, planar and free joints, random parents."""
    rng = np.random.default_rng(5)
    kinds = [universal((1, 0, 0), (0, 1, 0)), gimbal("zxy"), joints.spherical(), joints.revolute(rng.normal(size=3)),
             joints.planar(rng.normal(size=3)), universal((0, 0, 1), (1, 1, 0)), joints.free(),
             joints.prismatic(rng.normal(size=3))]
    b = PartitionBuilder("chains")
    for i, joint in enumerate(kinds):
        m, c, I = random_inertia(rng)
        b.add_body(f"b{i}", None if i == 0 else f"b{rng.integers(0, i)}", joint, joint_name=f"j{i}",
                   placement=(np.asarray(quat_to_matrix(angles_to_quaternion(jnp.asarray(rng.uniform(-3, 3, 3)), "xyz"))),
                              rng.uniform(-0.5, 0.5, 3)), mass=m, com=c, inertia=I)
    return b.build(sequence="yxz")


def well_conditioned(model, key):
    """A random configuration of a partitioned model with every angle within 0.4 pi of zero: middle angles of
    gimbals at least 0.1 pi from their lock, where the accelerations stay of the size of the forces."""
    return 0.4 * jaxmb.random_configuration(model, key)


def random_forces(key, n):
    return jax.random.normal(key, (n, 6))


# -- the unpartitioned model of eq. (1), dense, with H_bar and a_bar by automatic differentiation -----------------


class Unpartitioned(NamedTuple):
    qdd: jnp.ndarray
    V: jnp.ndarray
    alpha: jnp.ndarray
    f: jnp.ndarray
    M: jnp.ndarray
    H_bar: jnp.ndarray  # (N, 6, nv): joint r's columns in body r's frame, zero elsewhere
    a_bar: jnp.ndarray


def _unpartitioned_tree(partition):
    pmap, topo = partition.map, partition.model.topology
    owner = {b: r for r, j in enumerate(pmap.joints) for b in j.bodies}
    parent = [owner.get(int(topo.parent[j.bodies[0]]), -1) for j in pmap.joints]
    columns = np.zeros((len(pmap.joints), partition.model.nv))
    for r, j in enumerate(pmap.joints):
        columns[r, topo.v_offset[list(j.bodies)]] = 1
    return parent, columns


def _vee(A):
    return jnp.stack([A[..., 2, 1], A[..., 0, 2], A[..., 1, 0]], -1)


@fast_jit
def unpartitioned_reference(partition, q, qd, tau, f_ext) -> Unpartitioned:
    """Eq. (1) over the real bodies in the sub-hinges' coordinates: ``V = phi* H_bar* qd``,
    ``M_bar qdd = tau - sum_k J_k* (M(k) beta(k) + b(k))``, ``alpha = J qdd + beta``, ``f = phi (M alpha + b)``;
    ``H_bar(k)`` the body-frame derivative of joint k's pose in its parent, ``a_bar(k) = V(k) x H_bar* qd +
    H_bar_dot* qd`` (the child-frame derivative)."""
    model = partition.model
    parent, columns = _unpartitioned_tree(partition)
    real = np.asarray(partition.map.body)
    N = len(real)

    def relative(q):
        T = jaxmb.forward_kinematics(model, q)
        T = Transform(T.R[real], T.p[real])
        I = Transform.identity(q.dtype)
        Tp = Transform(jnp.stack([I.R if p < 0 else T.R[p] for p in parent]),
                       jnp.stack([I.p if p < 0 else T.p[p] for p in parent]))
        return compose(inverse(Tp), T)

    def hinge(q):
        X = relative(q)
        dR, dp = jax.jacfwd(lambda x: tuple(relative(x)))(q)
        w = _vee(jnp.einsum("nki,nklc->ncil", X.R, dR))  # R* dR/dq_c
        v = jnp.einsum("nki,nkc->nci", X.R, dp)  # R* dp/dq_c
        return jnp.swapaxes(jnp.concatenate([w, v], -1), 1, 2) * columns[:, None, :]

    X = relative(q)
    H, H_dot = jax.jvp(hinge, (q,), (qd,))
    vJ, cJ = H @ qd, H_dot @ qd
    gravity = jnp.concatenate([jnp.zeros(3), -model.gravity])
    J, V, beta = [None] * N, [None] * N, [None] * N
    for r in range(N):
        Xr = Transform(X.R[r], X.p[r])
        J[r] = H[r] + (0 if parent[r] < 0 else phi_star(Xr, J[parent[r]].T).T)
        V[r] = J[r] @ qd
        a_bar = cross_motion(V[r], vJ[r]) + cJ[r]
        beta[r] = phi_star(Xr, gravity if parent[r] < 0 else beta[parent[r]]) + a_bar
    J, V, beta = jnp.stack(J), jnp.stack(V), jnp.stack(beta)
    M = body_inertias(model)[real]
    b = cross_force(V, mv(M, V)) - f_ext
    M_bar = jnp.einsum("nki,nkl,nlj->ij", J, M, J)
    qdd = jnp.linalg.solve(M_bar, tau - jnp.einsum("nki,nk->i", J, mv(M, beta) + b))
    alpha = jnp.einsum("nki,i->nk", J, qdd) + beta
    f = list(mv(M, alpha) + b)
    for r in range(N - 1, -1, -1):
        if parent[r] >= 0:
            f[parent[r]] = f[parent[r]] + phi(Transform(X.R[r], X.p[r]), f[r])
    a_bar = cross_motion(V, vJ) + cJ
    return Unpartitioned(qdd, V, alpha, jnp.stack(f), M_bar, H, a_bar)


# -- the programs shared by the tests -------------------------------------------------------------------------


@fast_jit
def partitioned_quantities(partition, q, qd, tau, f_ext):
    """What the partitioned model computes at the partitioned state: the sweep, eq. (18) forces, mass matrix,
    kinetic energy and condition (5)."""
    model = partition.model
    ab = jaxmb.articulated_body(model, q, qd, tau, f_ext)
    return dict(qdd=ab.qdd, V=ab.V, alpha=ab.alpha, f=mv(ab.P, ab.alpha - ab.a) + ab.z,
                M=jaxmb.mass_matrix(model, q), T=jaxmb.kinetic_energy(model, q, qd),
                H_bar=unpartitioned_hinge_maps(partition, q), a_bar=unpartitioned_coriolis(partition, q, qd),
                ldl=block_ldl(partition, q), X=joint_poses(model, q))


dynamics = fast_jit(partitioned_dynamics)


@fast_jit
def kinds_quantities(partition, model, q, qd, tau, f_ext):
    """Everything the tests of the jaxmb-kinds model compare, from its unpartitioned state, in one program: the
    maps there and back, the unpartitioned model's sweep, the partitioned model's at the mapped state, the
    dynamics through the partition, and ``S`` (nv, nv_p) with ``qd = S qd_p``, the Jacobian of the map back."""
    ab = jaxmb.articulated_body(model, q, qd, tau, f_ext)
    state = to_partitioned(partition, q, qd)
    S = jax.jacfwd(lambda v: from_partitioned(partition, state.q, v).qd)(jnp.zeros(partition.model.nv, q.dtype))
    return dict(
        state=state, back=from_partitioned(partition, state.q, state.qd), rate=jaxmb.configuration_rate(model, q, qd),
        ref=dict(qdd=ab.qdd, V=ab.V, alpha=ab.alpha, f=mv(ab.P, ab.alpha - ab.a) + ab.z, D=ab.D,
                 M=jaxmb.mass_matrix(model, q), T=jaxmb.kinetic_energy(model, q, qd), X=joint_poses(model, q)),
        out=partitioned_dynamics(partition, q, qd, tau, f_ext), S=S, X=joint_poses(partition.model, state.q),
        M=jaxmb.mass_matrix(partition.model, state.q), T=jaxmb.kinetic_energy(partition.model, state.q, state.qd),
        ldl=block_ldl(partition, state.q), lock=gimbal_lock(partition, state.q))


def kinds_state(seed):
    model, partition = kinds_model()
    q, qd, tau = random_state(model, jax.random.PRNGKey(seed))
    return model, partition, q, qd, tau, random_forces(jax.random.PRNGKey(seed + 100), model.nb)


def kinds_at(seed, q=None):
    """`kinds_quantities` at the random state ``seed`` (its configuration replaced by ``q`` if given)."""
    model, partition, q_seed, qd, tau, f_ext = kinds_state(seed)
    return kinds_quantities(partition, model, q_seed if q is None else q, qd, tau, f_ext)


# -- tests ---------------------------------------------------------------------------------------------------


@fast_jit
def sequence_round_trips(angles):
    """Per sequence, for angles (n, 3): the quaternions, the angles read back, their quaternions, and the
    Jacobian of the angles in the quaternion."""
    out = {}
    for sequence in SEQUENCES:
        quat = jax.vmap(lambda a: angles_to_quaternion(a, sequence))(angles)
        again = jax.vmap(lambda x: quaternion_to_angles(x, sequence))(quat)
        out[sequence] = (quat, again, jax.vmap(lambda a: angles_to_quaternion(a, sequence))(again),
                         jax.vmap(jax.jacfwd(lambda x: quaternion_to_angles(x, sequence)))(quat))
    return out


def test_rotation_sequences_round_trip_to_rounding_at_every_attitude_including_gimbal_lock():
    rng = np.random.default_rng(0)
    angles = np.concatenate([rng.uniform(-3, 3, (4, 3)) * [1, 0.5, 1], [[0.3, np.pi / 2, -0.2],
                             [1.0, -np.pi / 2 + 1e-9, 0.4], [-2.0, -np.pi / 2, 0.0]]])
    for sequence, (quat, again, quat_again, jac) in sequence_round_trips(jnp.asarray(angles)).items():
        assert_close(jax.vmap(quat_to_matrix)(quat_again), jax.vmap(quat_to_matrix)(quat), 1e-15)
        assert_close(again[:4], angles[:4], 1e-14)
        assert np.all(np.isfinite(jac))


def test_partitioned_model_has_one_coordinate_per_body_and_massless_sub_bodies():
    for partition in (kinds_model()[1], chain_partition()):
        model, pmap = partition.model, partition.map
        assert set(model.topology.kinds) == {"screw"} and model.nq == model.nv == model.nb
        real = set(pmap.body)
        for j in pmap.joints:
            assert j.bodies[-1] == model.body_index(j.body) and [model.joint_index(s) for s in j.sub_joints] == list(j.bodies)
            assert all(model.topology.parent[b] == a for a, b in zip(j.bodies, j.bodies[1:]))
        massless = [b for b in range(model.nb) if b not in real]
        assert not np.any(np.asarray(model.mass)[massless]) and not np.any(np.asarray(model.inertia)[massless])
        assert sorted(b for j in pmap.joints for b in j.bodies) == list(range(model.nb))
    model, partition = kinds_model()
    for j in partition.map.joints:  # the unpartitioned layout is the model's own
        q, v = model.joint_coordinates(j.name)
        assert j.q == tuple(range(q.start, q.stop)) and j.v == tuple(range(v.start, v.stop))


def test_state_maps_round_trip_and_poses_agree():
    model, partition, q, qd, _, _ = kinds_state(1)
    x = kinds_at(1)
    state, back, X, X_p = x["state"], x["back"], x["ref"]["X"], x["X"]
    assert not np.any(state.locked)
    assert_close(back.q, q, 1e-14)  # random quaternions have w >= 0, as the map back gives them
    assert_close(back.qd, qd, 1e-13)
    # phi_bar(k+1, k) = phi(k+1, k') phi(k', k) (condition 5): the sub-hinges compose to the joint's pose
    for j in partition.map.joints:
        T = functools.reduce(compose, [Transform(X_p.R[b], X_p.p[b]) for b in j.bodies])
        k = model.body_index(j.body)
        assert_close(T.R, X.R[k], 1e-14)
        assert_close(T.p, X.p[k], 1e-14)
    # the rates are the planar and position rates of the unpartitioned coordinates
    for j in partition.map.joints:
        sub = np.asarray(j.bodies)
        if j.type in ("planar", "screw"):
            assert_close(state.qd[sub], x["rate"][np.asarray(j.q)], 1e-13)
        if j.type == "free":
            assert_close(state.qd[sub[:3]], x["rate"][np.asarray(j.q)[:3]], 1e-13)


def test_partitioned_and_unpartitioned_models_give_the_same_qdd_V_alpha_and_forces_eq_4():
    """Free base, spherical, planar and screw joints against jaxmb's unpartitioned model, with gravity and
    external forces; results mapped back."""
    x = kinds_at(2)
    out, ref = x["out"], x["ref"]
    assert not np.any(out.locked)
    assert_close(out.qdd, ref["qdd"], 1e-11)
    assert_close(out.V, ref["V"], 1e-13)
    assert_close(out.alpha, ref["alpha"], 1e-11)
    assert_close(out.f, ref["f"], 1e-11)


def test_universal_gimbal_planar_free_joints_match_the_dense_unpartitioned_model_eq_4():
    partition = chain_partition()
    model = partition.model
    k = jax.random.split(jax.random.PRNGKey(3), 4)
    q, qd, tau = well_conditioned(model, k[0]), jax.random.normal(k[1], (model.nv,)), jax.random.normal(k[2], (model.nv,))
    f_real = random_forces(k[3], len(partition.map.body))
    f_ext = jnp.zeros((model.nb, 6)).at[np.asarray(partition.map.body)].set(f_real)
    ref = unpartitioned_reference(partition, q, qd, tau, f_real)
    out = partitioned_quantities(partition, q, qd, tau, f_ext)
    assert_close(out["qdd"], ref.qdd, 1e-11)
    for name in ("V", "alpha", "f"):
        assert_close(unpartitioned_bodies(partition, out[name]), getattr(ref, name), 1e-11)
    # the mass matrix and kinetic energy of the two models, in the same coordinates
    assert_close(out["M"], ref.M, 1e-12)
    assert_close(out["T"], 0.5 * qd @ ref.M @ qd, 1e-12)


def test_condition_5_hinge_maps_and_coriolis_terms_equal_their_autodiff_values():
    partition = chain_partition()
    model = partition.model
    k = jax.random.split(jax.random.PRNGKey(4), 3)
    q, qd = well_conditioned(model, k[0]), jax.random.normal(k[1], (model.nv,))
    ref = unpartitioned_reference(partition, q, qd, jnp.zeros(model.nv), jnp.zeros((len(partition.map.body), 6)))
    out = partitioned_quantities(partition, q, qd, jnp.zeros(model.nv), None)
    for g, H_bar, a_bar in zip(partition.map.groups, out["H_bar"], out["a_bar"]):
        sub = np.asarray(g.sub)
        for i, r in enumerate(g.joints):
            assert_close(H_bar[i], ref.H_bar[r][:, sub[i]].T, 1e-13)
            assert_close(a_bar[i], ref.a_bar[r], 1e-12)
    assert {g.type for g in partition.map.groups} == {"universal", "gimbal", "spherical", "screw", "planar", "free"}


def test_sub_hinge_forces_are_the_body_force_moved_across_the_massless_bodies():
    """With ``M(k') = 0``: ``f(k') = phi(k', k) f(k)`` and ``H(k') f(k') = tau(k')`` (Jain 2018, 2022)."""
    partition = chain_partition()
    model = partition.model
    k = jax.random.split(jax.random.PRNGKey(5), 3)
    q, qd, tau = well_conditioned(model, k[0]), jax.random.normal(k[1], (model.nv,)), jax.random.normal(k[2], (model.nv,))
    out = partitioned_quantities(partition, q, qd, tau, None)
    f, X = out["f"], out["X"]
    H = jaxmb.hinges.hinge_map(model)
    for j in partition.map.joints:
        for a, b in zip(j.bodies, j.bodies[1:]):
            assert_close(f[a], phi(Transform(X.R[b], X.p[b]), f[b]), 1e-12)
        for b in j.bodies:
            assert_close(H[b] @ f[b], tau[b], 1e-12)


def test_block_ldl_of_the_unpartitioned_D_is_the_partitioned_sweep():
    """``D_bar(k) = H_bar P H_bar* = L diag(D) L*``; and for the joints jaxmb has, ``D_bar = S* D(k) S``."""
    partition = kinds_model()[1]
    x = kinds_at(6)
    for g, ldl in zip(partition.map.groups, x["ldl"]):
        assert_close(ldl.D_bar, jnp.einsum("mij,mj,mkj->mik", ldl.L, ldl.D, ldl.L), 1e-13)
        assert np.all(np.asarray(ldl.D) > 0) and np.allclose(np.diagonal(ldl.L, 0, 1, 2), 1)
        assert not np.any(np.tril(np.asarray(ldl.L), -1))
        for i, r in enumerate(g.joints):
            j = partition.map.joints[r]
            v = np.asarray(j.v)
            D = x["ref"]["D"][v][:, : len(v)]  # D(k) of the quaternion, planar or free joint
            S_k = x["S"][np.ix_(v, np.asarray(j.bodies))]
            assert_close(ldl.D_bar[i], S_k.T @ D @ S_k, 1e-12)
    partition = chain_partition()
    zero = jnp.zeros(partition.model.nv)
    for ldl in partitioned_quantities(partition, well_conditioned(partition.model, jax.random.PRNGKey(7)), zero,
                                      zero, None)["ldl"]:
        assert_close(ldl.D_bar, jnp.einsum("mij,mj,mkj->mik", ldl.L, ldl.D, ldl.L), 1e-13)


def test_mass_matrix_and_kinetic_energy_are_invariant_under_the_coordinate_map():
    x = kinds_at(8)
    assert_close(x["M"], x["S"].T @ x["ref"]["M"] @ x["S"], 1e-12)
    assert_close(x["T"], x["ref"]["T"], 1e-12)


def test_gimbal_lock_is_flagged_and_gives_no_nan():
    model, partition, q, qd, _, _ = kinds_state(9)
    spherical = partition.map.joints[[j.type for j in partition.map.joints].index("spherical")]
    r = partition.map.joints.index(spherical)

    def with_middle_angle(t2):
        quat = angles_to_quaternion(jnp.array([0.4, t2, -0.7]), partition.map.sequence)
        return q.at[np.asarray(spherical.q)].set(quat)

    x = kinds_at(9, with_middle_angle(np.pi / 2))
    state = x["state"]
    assert state.locked[r] and np.sum(state.locked) == 1 and np.array_equal(x["lock"].locked, state.locked)
    assert x["lock"].volume[r] < 1e-8 and x["out"].locked[r]
    assert np.all(np.isfinite(state.q)) and np.all(np.isfinite(state.qd))
    # the first sub-hinge's D (the Schur complement) vanishes at the lock, relative to the last one's
    group = next(g for g in partition.map.groups if g.type == "spherical")
    D = x["ldl"][partition.map.groups.index(group)].D[list(group.joints).index(r)]
    assert abs(D[0]) < 1e-12 * abs(D[-1])
    # near the lock the maps stay exact (to the conditioning 1/cos t2 = 1e4), and unlocked
    x = kinds_at(9, with_middle_angle(np.pi / 2 - 1e-4))
    assert not np.any(x["state"].locked)
    assert_close(x["back"].qd, qd, 1e-11)
    assert_close(x["out"].qdd, x["ref"]["qdd"], 1e-8)


def test_massless_leaves_and_chains_without_massive_descendants_are_rejected_at_build_time():
    def builder():
        b = PartitionBuilder("bad")
        b.add_body("base", None, joints.revolute(), mass=1.0, inertia=np.eye(3))
        return b

    b = builder()
    b.add_body("leaf", "base", universal(), joint_name="wrist")
    with pytest.raises(ModelError, match="'wrist'.*'leaf'"):
        b.build()
    b = builder()
    b.add_body("link", "base", gimbal(), joint_name="shoulder")
    b.add_body("tip", "link", joints.revolute(), joint_name="elbow")
    with pytest.raises(ModelError, match="'shoulder'.*'link'"):
        b.build()
    b = builder()
    b.add_body("link", "base", joints.spherical(), joint_name="shoulder")
    b.add_body("tip", "link", joints.revolute(), joint_name="elbow", mass=1.0, com=(0, 0, 0.2), inertia=np.eye(3))
    b.build()  # a massless body with a massive descendant is fine
    b = builder()
    b.add_body("link", "base", joints.spherical(), joint_name="shoulder")
    b.add_body("cap", "link", joints.fixed())
    with pytest.raises(ModelError, match="'shoulder'.*'link'"):
        b.build()
    with pytest.raises(ModelError, match="parallel"):
        universal((1, 0, 0), (2, 0, 0))
    with pytest.raises(ModelError, match="sequence"):
        gimbal("zxz")
    model = random_model(3, 4, joint_mix=("spherical",), armature=True)
    with pytest.raises(ModelError, match="armature"):
        partition_model(model)
    with pytest.raises(ModelError, match="sequence"):
        partition_model(kinds_model()[0], sequence="xy")


def test_maps_and_dynamics_jit_vmap_and_grad():
    model, partition, q, qd, tau, f_ext = kinds_state(10)
    _, _, q2, qd2, tau2, f2 = kinds_state(11)
    batched = jax.vmap(dynamics, (None, 0, 0, 0, 0))(partition, jnp.stack([q, q2]), jnp.stack([qd, qd2]),
                                                     jnp.stack([tau, tau2]), jnp.stack([f_ext, f2]))
    for i, seed in enumerate((10, 11)):
        one = kinds_at(seed)["out"]
        for a, b in zip(batched[:-1], one[:-1]):
            assert_close(a[i], b, 1e-12)
        assert np.array_equal(batched.locked[i], one.locked)
    x = kinds_at(10)
    state = x["state"]
    eager = from_partitioned(partition, state.q, state.qd)
    assert_close(eager.q, x["back"].q, 1e-15)
    assert_close(eager.qd, x["back"].qd, 1e-15)
    tau_p = to_partitioned_forces(partition, state.q, tau).tau
    assert_close(tau_p @ state.qd, tau @ qd, 1e-12)  # power is invariant

    def round_trip(q_p, qd_p, qdd_p):
        back = from_partitioned(partition, q_p, qd_p, qdd_p)
        again = to_partitioned(partition, back.q, back.qd)
        return again.q, again.qd, back.qdd

    check_grads(round_trip, (state.q, state.qd, tau_p), atol=1e-6, rtol=1e-6)
