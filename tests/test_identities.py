"""Dynamics identities on random trees, in float64 (book ch. 2-5 and 9).

Every test computes one quantity twice by independent routes: the O(N) recursions against dense operator
products, automatic differentiation of energies and kinematics, or energy and momentum balance along a
trajectory. The trees are small random models with fixed seeds (`jaxmb.testing.random_model`) covering chains and
branched trees, 1-dof screw joints only and the full joint mix (revolute, prismatic, helical, spherical, planar),
fixed and floating bases.

Compiling dominates the cost, so `evaluate` computes every quantity the tests compare in one jitted program per
model (called for each state), and the tests only compare its outputs.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import checks
import jaxmb
from jaxmb.rotation import quat_to_matrix
from jaxmb.testing import random_model, random_state

# float64 tolerance, relative to the magnitude of the expected value (or an explicit scale)
RTOL = 1e-10

MODEL_SPECS = {  # sizes kept small: compile time grows with the number of tree levels and joint groups
    # 5 revolute joints in a chain
    "chain-revolute": dict(seed=1, n_bodies=5, joint_mix="revolute", floating_base=False, branching=0.0),
    # revolute, prismatic and helical joints, branched, depth 4
    "tree-screw": dict(seed=16, n_bodies=6, joint_mix="screw", floating_base=False, branching=0.7),
    # free base, then helical, planar, revolute, spherical, prismatic, planar; branched, depth 4
    "floating-mixed": dict(seed=41, n_bodies=7, joint_mix="mixed", floating_base=True, branching=0.4),
}
ALL = list(MODEL_SPECS)
ONE_DOF = ["chain-revolute", "tree-screw"]  # q-space == v-space: plain gradients with respect to q apply
N_STATES = 2


class Case(NamedTuple):
    model: jaxmb.Model
    states: list  # [(q, qd, qdd_or_tau, f_ext)]


@functools.cache
def get_case(name) -> Case:
    model = random_model(**MODEL_SPECS[name])
    return Case(model, [_draw(model, jax.random.PRNGKey(1000 * (ALL.index(name) + 1) + i)) for i in range(N_STATES)])


@checks.fast_jit  # one program per model instead of op by op
def _draw(model, key):
    """A random state (q, qd, u) and external forces."""
    q, qd, u = random_state(model, key)
    return q, qd, u, jax.random.normal(jax.random.fold_in(key, 7), (model.nb, 6), jnp.float64)


def zero_gravity(model):
    return model.replace(gravity=jnp.zeros(3))


assert_close = functools.partial(checks.assert_close, rtol=RTOL)


def vee(S):
    """The vector of a skew-symmetric 3x3 matrix (inverse of the tilde operator), from its skew part."""
    A = 0.5 * (S - S.T)
    return jnp.stack([A[2, 1], A[0, 2], A[1, 0]])


# -- everything the tests compare, for one model at each state -----------------------------------------------------
#
# Compiling the recursions dominates the cost of this module, so each library function is traced once or twice
# in total: the variants a test needs (with and without gravity, with and without f_ext, several tangents) are
# mapped with `jax.lax.map` (traced once, unbatched), and one program per model is called for each of its states.


def _frame_quantities(model, q, qd, rate, name):
    out = {ref: jaxmb.jacobian(model, q, name, ref) for ref in ("local", "world_aligned", "world")}
    out["velocity_local"] = jaxmb.frame_velocity(model, q, qd, name)
    out["velocity_world"] = jaxmb.frame_velocity(model, q, qd, name, "world")
    out["bias_local"] = jaxmb.frame_bias_acceleration(model, q, qd, name)
    out["bias_world_aligned"] = jaxmb.frame_bias_acceleration(model, q, qd, name, "world_aligned")
    i = model.frame_names.index(name)
    pose = lambda q: jax.tree.map(lambda a: a[i], jaxmb.frame_poses(model, q))
    out["pose"], out["pose_rate"] = jax.jvp(pose, (q,), (rate,))
    # d/dt of the frame velocities at qdd = 0: Jdot qd in frame coordinates and world-aligned
    velocity = lambda ref: lambda q, qd: jaxmb.frame_velocity(model, q, qd, name, ref)
    out["Jdot_qd_local"] = jax.jvp(velocity("local"), (q, qd), (rate, jnp.zeros_like(qd)))[1]
    out["Jdot_qd_world_aligned"] = jax.jvp(velocity("world_aligned"), (q, qd), (rate, jnp.zeros_like(qd)))[1]
    return out


def _evaluate(model, q, qd, u, f_ext, frames):
    """All quantities at one state: ``u`` serves as qdd for inverse dynamics and as tau for forward dynamics.
    Time derivatives are taken along dq/dt = configuration_rate(q, qd) with `jax.jvp`."""
    out = {}
    g, g0 = model.gravity, jnp.zeros_like(model.gravity)
    gravities = jnp.stack([g, g0])
    with_gravity = lambda gravity: model.replace(gravity=gravity)
    rate = jaxmb.configuration_rate(model, q, qd)
    zero = jnp.zeros_like(qd)

    # inverse dynamics and its by-products, [with gravity, without]
    ID = jax.lax.map(lambda gr: jaxmb.inverse_dynamics(with_gravity(gr), q, qd, u), gravities)
    C = jax.lax.map(lambda gr: jaxmb.bias_forces(with_gravity(gr), q, qd), gravities)
    out["ID"], out["C"], out["C_zero_gravity"] = ID[0], C[0], C[1]
    out["ID_fext"] = jaxmb.inverse_dynamics(model, q, qd, u, f_ext)
    out["C_fext"] = jaxmb.bias_forces(model, q, qd, f_ext)
    out["g"] = jaxmb.gravity_forces(model, q)
    out["dID_dqdd"] = jax.jacfwd(lambda a: jaxmb.inverse_dynamics(model, q, qd, a, f_ext))(u)

    # forward dynamics: without f_ext for [FD(ID(u)), FD0(ID0(u)), FD(u), FD0(0)]; with f_ext for
    # [FD(ID(u, f_ext), f_ext), FD(u, f_ext)]
    taus = jnp.stack([ID[0], ID[1], u, zero])
    fd = lambda gr, tau: jaxmb.forward_dynamics(with_gravity(gr), q, qd, tau)
    FD = jax.lax.map(lambda x: fd(*x), (gravities[jnp.array([0, 1, 0, 1])], taus))
    FD_f = jax.lax.map(lambda tau: jaxmb.forward_dynamics(model, q, qd, tau, f_ext), jnp.stack([out["ID_fext"], u]))
    out["FD_ID[gravity]"], out["FD_ID[zero_gravity]"], out["FD"], qdd_free = FD
    out["FD_ID[gravity+f_ext]"], out["FD_fext"] = FD_f

    # mass matrix, its time derivative (tangent `rate`) and its partial derivatives (tangents e_i), one jvp
    mass_matrix = lambda q: jaxmb.mass_matrix(model, q)
    out["M"] = mass_matrix(q)
    # and along each joint's motion: q moved as `integrate` moves it by velocity coordinate k
    along_joints = jax.vmap(lambda e: jaxmb.configuration_rate(model, q, e))(jnp.eye(model.nv, dtype=q.dtype))
    tangents = jnp.concatenate([rate[None], jnp.eye(model.nq, dtype=q.dtype), along_joints])
    dM = jax.lax.map(lambda t: jax.jvp(mass_matrix, (q,), (t,))[1], tangents)
    out["Mdot"], out["dM_dq"] = dM[0], jnp.moveaxis(dM[1 : 1 + model.nq], 0, -1)  # dM_dq[i, j, k] = dM(i, j)/dq(k)
    out["dM_along_joints"] = jnp.moveaxis(dM[1 + model.nq :], 0, -1)  # [i, j, k]: along velocity coordinate k
    out["R"] = jaxmb.composite_inertias(model, q)

    # energies and their rates along [the free motion, the forced motion, dq = e_i]
    energies = lambda m: lambda q, qd: jnp.stack([jaxmb.kinetic_energy(m, q, qd), jaxmb.potential_energy(m, q)])
    out["KE"], out["PE"] = energies(model)(q, qd)
    tq = jnp.concatenate([jnp.stack([rate, rate]), jnp.eye(model.nq, dtype=q.dtype)])
    tv = jnp.concatenate([jnp.stack([qdd_free, out["FD_fext"]]), jnp.zeros((model.nq, model.nv), q.dtype)])
    dE = jax.lax.map(lambda t: jax.jvp(energies(model), (q, qd), t)[1], (tq, tv))
    out["energy_rate[free]"] = dE[0, 0]  # dKE/dt; the free motion is without gravity
    out["energy_rate[forced]"] = dE[1, 0] + dE[1, 1]
    out["PE_rate"], out["PE_grad"] = dE[0, 1], dE[2:, 1]

    # kinematics; rates along (configuration_rate(q, qd), u)
    def kinematics(q, qd):
        return (jaxmb.body_velocities(model, q, qd), jaxmb.forward_kinematics(model, q),
                jaxmb.center_of_mass(model, q))

    (out["V"], out["T"], out["com"]), (out["V_rate"], out["T_rate"], out["com_rate"]) = jax.jvp(
        kinematics, (q, qd), (rate, u))
    out["J"] = jaxmb.jacobians(model, q)
    out["Jdot_qd"] = jaxmb.bias_accelerations(model, q, qd)
    out["h"] = jaxmb.spatial_momentum(model, q, qd)
    out["total_mass"] = jaxmb.total_mass(model)
    out["frames"] = {name: _frame_quantities(model, q, qd, rate, name) for name in frames}
    return out


# `_evaluate` at one state, called for each (a program for the batch, through the batching rules of the sweeps, takes
# longer to compile; tests/test_batching.py checks those rules against single states); compiled without LLVM
# optimization, as it runs once, and lowered with the CPU form of the small products (the Pinocchio oracle runs the
# other form).
evaluate = jax.jit(_evaluate, static_argnames="frames", compiler_options=checks.FAST_COMPILE_OPTIONS)


def frame_names(model):
    """The frames the frame tests use: the frame named after the last (deepest) body, moved to a random
    placement on it by `_with_random_frames`."""
    return (model.body_names[-1],)


def _with_random_frames(model, seed=5):
    """The model with every frame moved to a random placement on its body (body dynamics are unchanged)."""
    rng = np.random.default_rng(seed)
    nf = len(model.frame_names)
    quats = rng.normal(size=(nf, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    R = jax.vmap(quat_to_matrix)(jnp.asarray(quats))
    placement = type(model.frame_placement)(R, jnp.asarray(rng.uniform(-0.5, 0.5, (nf, 3))))
    return model.replace(frame_placement=placement)


@functools.cache
def evaluated(name):
    """(model, [(state, quantities)]) for a model of MODEL_SPECS, quantities as numpy arrays."""
    case = get_case(name)
    model = _with_random_frames(case.model)
    return model, [(tuple(np.asarray(x) for x in state),
                    jax.tree.map(np.asarray, evaluate(model, *state, frames=frame_names(model))))
                   for state in case.states]


# -- equations of motion ------------------------------------------------------------------------------------------


def scale_fd(out, x):
    """Error scale for accelerations obtained by solving with M: cond(M) |x|."""
    return np.linalg.cond(out["M"]) * max(1.0, np.abs(x).max())


@pytest.mark.parametrize("variant", ["gravity", "gravity+f_ext", "zero_gravity"])
@pytest.mark.parametrize("name", ALL)
def test_forward_dynamics_inverts_inverse_dynamics(name, variant):
    """FD(q, qd, ID(q, qd, qdd)) == qdd (Alg 5.2 and 7.2), with f_ext and without g."""
    for (q, qd, qdd, f_ext), out in evaluated(name)[1]:
        assert_close(out[f"FD_ID[{variant}]"], qdd, scale=scale_fd(out, qdd))


@pytest.mark.parametrize("name", ALL)
def test_forward_dynamics_equals_dense_solve(name):
    """FD == solve(M, tau - C(q, qd)) with C = bias_forces, which holds gravity and -J* f_ext (5.24, 5.36)."""
    for (q, qd, tau, f_ext), out in evaluated(name)[1]:
        for fd, C in ((out["FD"], out["C"]), (out["FD_fext"], out["C_fext"])):
            expected = np.linalg.solve(out["M"], tau - C)
            assert_close(fd, expected, scale=scale_fd(out, expected))


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_is_jacobian_of_inverse_dynamics(name):
    """M(q) == d ID(q, qd, qdd, f_ext) / d qdd (5.24, T = M qdd + C)."""
    for _, out in evaluated(name)[1]:
        assert_close(out["dID_dqdd"], out["M"])


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_equals_dense_H_phi_M_phi_star_H_star(name):
    """M == H phi M phi* H* + diag(armature) from the dense stacked operators (4.6, 9.3)."""
    model, results = evaluated(name)
    for (q, *_), out in results:
        ops = checks.dense_operators(model, q)
        assert_close(out["M"], ops.H @ ops.phi @ ops.M @ ops.phi.T @ ops.H.T + ops.armature)


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_is_symmetric_positive_definite(name):
    """M = M* > 0."""
    for _, out in evaluated(name)[1]:
        M = out["M"]
        assert_close(M, M.T)
        assert np.linalg.eigvalsh(0.5 * (M + M.T)).min() > 0


def _block_diagonal(blocks):
    out = np.zeros((6 * len(blocks), 6 * len(blocks)))
    for k, b in enumerate(blocks):
        out[6 * k : 6 * k + 6, 6 * k : 6 * k + 6] = b
    return out


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_trace_is_sum_of_composite_hinge_inertias(name):
    """tr M == sum_k tr(H(k) R(k) H*(k)) with R(k) the composite body inertias (4.21)."""
    model, results = evaluated(name)
    for (q, *_), out in results:
        H = checks.dense_operators(model, q).H
        assert_close(np.trace(out["M"]), np.trace(H @ _block_diagonal(out["R"]) @ H.T))


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_independent_of_common_ancestor_joints(name):
    """dM(i, j) == 0 along the motion of every joint at or above both bodies of coordinates i and j (Remark 4.1 and
    Ex 4.6, for trees: M(i, j) = H(i) phi(i, j) R(j) H*(j) for i above j does not see the joint of body i or of its
    ancestors). M must depend on some other joints. Along the joints' motions, as `integrate` moves q: off the unit
    sphere a quaternion's "rotation" is no rotation, and what M does there is no property of the tree."""
    model, results = evaluated(name)
    topo = model.topology
    common = np.zeros((model.nv, model.nv, model.nv), bool)
    for i in range(model.nv):
        for j in range(model.nv):
            above = set(topo.ancestors(topo.dof_body[i])) & set(topo.ancestors(topo.dof_body[j]))
            common[i, j] = np.isin(topo.dof_body, sorted(above))
    for _, out in results:
        dM = out["dM_along_joints"]
        scale = np.abs(dM).max()
        assert np.abs(dM[common]).max() <= RTOL * scale
        assert np.abs(dM[~common]).max() > 1e-3 * scale


@pytest.mark.parametrize("name", ALL)
def test_kinetic_energy_is_half_qd_M_qd(name):
    """1/2 qd* M(q) qd == 1/2 sum_k V(k)* M(k) V(k) (2.14)."""
    for (q, qd, *_), out in evaluated(name)[1]:
        assert_close(out["KE"], 0.5 * qd @ out["M"] @ qd)


@pytest.mark.parametrize("name", ALL)
def test_kinetic_energy_and_momentum_match_body_motion(name):
    """KE and spatial momentum from the world motion of each body's centre of mass and rotation, obtained by
    differentiating forward kinematics (no spatial algebra): KE = sum 1/2 m |c'|^2 + 1/2 w* I_w w, linear
    momentum = sum m c', angular momentum about the world origin = sum I_w w + m c x c' (2.14, 2.16)."""
    model, results = evaluated(name)
    m, com, I_c = (np.asarray(x) for x in (model.mass, model.com, model.inertia))
    for _, out in results:
        R, p, Rdot, pdot = out["T"].R, out["T"].p, out["T_rate"].R, out["T_rate"].p
        c = np.einsum("kij,kj->ki", R, com) + p
        cdot = np.einsum("kij,kj->ki", Rdot, com) + pdot
        w = np.stack([vee(Rdot[k] @ R[k].T) for k in range(model.nb)])
        I_w = np.einsum("kij,kjl,kml->kim", R, I_c, R)
        ke = 0.5 * np.sum(m * np.sum(cdot**2, -1)) + 0.5 * np.einsum("ki,kij,kj->", w, I_w, w)
        assert_close(out["KE"], ke)
        linear = np.sum(m[:, None] * cdot, 0)
        angular = np.sum(np.einsum("kij,kj->ki", I_w, w) + m[:, None] * np.cross(c, cdot), 0)
        assert_close(out["h"], np.concatenate([angular, linear]))


@pytest.mark.parametrize("name", ONE_DOF)
def test_gravity_forces_are_potential_gradient(name):
    """gravity_forces(q) == dPE/dq (pins the sign of the gravity term)."""
    for _, out in evaluated(name)[1]:
        assert np.abs(out["PE_grad"]).max() > 1e-3
        assert_close(out["g"], out["PE_grad"])


@pytest.mark.parametrize("name", ALL)
def test_gravity_forces_are_potential_directional_derivative(name):
    """gravity_forces(q) . qd == d/dt PE(q(t)) with dq/dt = configuration_rate(q, qd): the gravity force is the
    differential of the potential on the configuration manifold (quaternion joints included)."""
    for (q, qd, *_), out in evaluated(name)[1]:
        assert abs(out["PE_rate"]) > 1e-3
        assert_close(out["g"] @ qd, out["PE_rate"])


@pytest.mark.parametrize("name", ALL)
def test_Mdot_minus_2C_is_skew(name):
    """qd* (Mdot - 2 C) qd == 0 (4.33), as qd* Mdot qd == 2 qd* c(q, qd) with c = bias_forces - gravity_forces
    and Mdot the derivative of M along dq/dt = configuration_rate(q, qd). It holds for quasi-velocities too: it
    is the power balance dKE/dt = qd* tau at zero gravity."""
    for (q, qd, *_), out in evaluated(name)[1]:
        lhs = qd @ out["Mdot"] @ qd
        assert abs(lhs) > 1e-3
        assert_close(lhs, 2.0 * qd @ (out["C"] - out["g"]))
        assert_close(lhs, 2.0 * qd @ out["C_zero_gravity"])


@pytest.mark.parametrize("name", ONE_DOF)
def test_bias_forces_equal_lagrangian_coriolis(name):
    """Newton-Euler C(q, qd) - g(q) == Mdot qd - 1/2 d/dq (qd* M qd) (Lagrange's equations): the whole
    vector, not only its projection on qd."""
    for (q, qd, *_), out in evaluated(name)[1]:
        lagrange = out["Mdot"] @ qd - 0.5 * np.einsum("i,ijk,j->k", qd, out["dM_dq"], qd)
        assert_close(out["C"] - out["g"], lagrange)
        assert_close(out["C_zero_gravity"], lagrange)


@pytest.mark.parametrize("name", ALL)
def test_power_balance(name):
    """d/dt (KE + PE) == qd* tau + sum_k V(k)* f_ext(k) along the forward-dynamics trajectory (4.34), with
    gravity and random tau, f_ext; and dKE/dt == 0 without gravity, joint forces and external forces."""
    for (q, qd, tau, f_ext), out in evaluated(name)[1]:
        power = qd @ tau + np.sum(out["V"] * f_ext)
        assert_close(out["energy_rate[forced]"], power, scale=max(1.0, abs(power)))
        scale = np.abs(out["C_zero_gravity"]).max() * np.abs(qd).max()
        assert_close(out["energy_rate[free]"], 0.0, scale=scale)


@pytest.mark.parametrize("name", ALL)
def test_external_forces_enter_through_jacobian_transpose(name):
    """ID(q, qd, qdd, f_ext) == ID(q, qd, qdd) - sum_k J(k)* f_ext(k), body-frame Jacobians, f_ext in body
    coordinates about the body origins (5.36)."""
    for (q, qd, qdd, f_ext), out in evaluated(name)[1]:
        assert_close(out["ID_fext"], out["ID"] - np.einsum("kin,ki->n", out["J"], f_ext))
        assert_close(out["C_fext"], out["C"] - np.einsum("kin,ki->n", out["J"], f_ext))


# -- kinematics ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_jacobian_maps_rates_to_body_velocities(name):
    """J(k) qd == V(k) for every body (3.53 vs Alg 3.2)."""
    for (q, qd, *_), out in evaluated(name)[1]:
        assert_close(np.einsum("kin,n->ki", out["J"], qd), out["V"])


@pytest.mark.parametrize("name", ALL)
def test_body_velocity_is_derivative_of_forward_kinematics(name):
    """V(k) == [vee(R* dR/dt); R* dp/dt] with (R, p) the world pose of body k (Alg 3.1 vs 3.2, 3.19)."""
    for _, out in evaluated(name)[1]:
        R, Rdot, pdot = out["T"].R, out["T_rate"].R, out["T_rate"].p
        RtRdot = np.einsum("kji,kjl->kil", R, Rdot)
        assert_close(RtRdot, -np.swapaxes(RtRdot, -1, -2))  # R stays a rotation
        expected = np.concatenate([np.stack([vee(S) for S in RtRdot]), np.einsum("kji,kj->ki", R, pdot)], -1)
        assert_close(out["V"], expected)


@pytest.mark.parametrize("name", ALL)
def test_body_acceleration_is_J_qdd_plus_bias_acceleration(name):
    """d/dt V(k) (body-coordinate components, along dq/dt = configuration_rate(q, qd), dqd/dt = qdd) ==
    J(k) qdd + bias_accelerations(k): the body-frame derivative of V(k) is the spatial acceleration alpha(k) at
    zero gravity (5.2, 5.8, 5.26)."""
    for (q, qd, qdd, _), out in evaluated(name)[1]:
        assert_close(np.einsum("kin,n->ki", out["J"], qdd) + out["Jdot_qd"], out["V_rate"])


@pytest.mark.parametrize("name", ALL)
def test_frame_jacobians_consistent_across_references(name):
    """For a frame at a random placement S on body b: local == phi*(b, frame) J(b) column by column;
    world_aligned == R_f local blockwise, and world_aligned qd == [vee(dR_f/dt R_f*); dp_f/dt] from the frame's
    world pose; world == world_aligned moved to the world origin, and equals the world-frame Jacobian of body b
    itself (a rigid body has one spatial velocity field); frame_velocity == jacobian qd."""
    model, results = evaluated(name)
    for (q, qd, *_), out in results:
        T = out["T"]
        for frame in frame_names(model):
            i = model.frame_names.index(frame)
            b = model.frame_body[i]
            fq = out["frames"][frame]
            S_R, S_p = np.asarray(model.frame_placement.R[i]), np.asarray(model.frame_placement.p[i])
            Jb = out["J"][b]
            local = np.concatenate([S_R.T @ Jb[:3], S_R.T @ (Jb[3:] - np.cross(S_p, Jb[:3].T).T)])
            assert_close(fq["local"], local)
            R_f, p_f = fq["pose"].R, fq["pose"].p
            assert_close(fq["world_aligned"], np.concatenate([R_f @ local[:3], R_f @ local[3:]]))
            assert_close(fq["world_aligned"] @ qd,
                         np.concatenate([vee(fq["pose_rate"].R @ R_f.T), fq["pose_rate"].p]))
            w = R_f @ local[:3]
            assert_close(fq["world"], np.concatenate([w, R_f @ local[3:] + np.cross(p_f, w.T).T]))
            wb = T.R[b] @ Jb[:3]
            assert_close(fq["world"], np.concatenate([wb, T.R[b] @ Jb[3:] + np.cross(T.p[b], wb.T).T]))
            assert_close(fq["velocity_local"], local @ qd)
            assert_close(fq["velocity_world"], fq["world"] @ qd)


@pytest.mark.parametrize("name", ALL)
def test_frame_bias_acceleration_is_frame_Jdot_qd(name):
    """frame_bias_acceleration == d/dt (J_frame qd) at qdd = 0 in frame coordinates; the world-aligned form is
    the local one rotated to world axes, and the classical acceleration of the frame origin
    d^2 p_f/dt^2 = d/dt (world-aligned linear velocity) == R_f (a[3:] + w x v), as `bias_accelerations`
    documents (a, w, v local)."""
    model, results = evaluated(name)
    for _, out in results:
        for frame in frame_names(model):
            fq = out["frames"][frame]
            assert_close(fq["bias_local"], fq["Jdot_qd_local"])
            R_f, a, v = fq["pose"].R, fq["bias_local"], fq["velocity_local"]
            assert_close(fq["bias_world_aligned"], np.concatenate([R_f @ a[:3], R_f @ a[3:]]))
            assert_close(fq["Jdot_qd_world_aligned"][:3], R_f @ a[:3])
            assert_close(fq["Jdot_qd_world_aligned"][3:], R_f @ (a[3:] + np.cross(v[:3], v[3:])))


# -- composite bodies, centre of mass and momentum --------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_composite_inertias_are_diagonal_blocks_of_phi_M_phi_star(name):
    """R(k) == (phi M phi*)(k, k): the inertia of the subtree of k about body k's frame, by the spatial
    parallel-axis theorem (2.12, 4.10, 9.16)."""
    model, results = evaluated(name)
    for (q, *_), out in results:
        ops = checks.dense_operators(model, q)
        full = ops.phi @ ops.M @ ops.phi.T
        for k in range(model.nb):
            assert_close(out["R"][k], full[6 * k : 6 * k + 6, 6 * k : 6 * k + 6])


@pytest.mark.parametrize("name", ALL)
def test_phi_M_phi_star_decomposition(name):
    """phi M phi* == R + phi~ R + R phi~* with R = diag(R(k)) and phi~ = phi - I (4.10; holds on trees)."""
    model, results = evaluated(name)
    for (q, *_), out in results:
        ops = checks.dense_operators(model, q)
        R = _block_diagonal(out["R"])
        phi_tilde = ops.phi - np.eye(len(ops.phi))
        assert_close(ops.phi @ ops.M @ ops.phi.T, R + phi_tilde @ R + R @ phi_tilde.T)


@pytest.mark.parametrize("name", ALL)
def test_center_of_mass_is_mass_weighted_average(name):
    """center_of_mass == sum_k m(k) c_world(k) / sum_k m(k) with c_world from forward kinematics; total_mass."""
    model, results = evaluated(name)
    m = np.asarray(model.mass)
    for _, out in results:
        assert_close(out["total_mass"], m.sum())
        c = np.einsum("kij,kj->ki", out["T"].R, model.com) + out["T"].p
        assert_close(out["com"], (m[:, None] * c).sum(0) / m.sum())


@pytest.mark.parametrize("name", ALL)
def test_linear_momentum_is_total_mass_times_com_velocity(name):
    """Linear part of the spatial momentum == total mass * d/dt centre of mass (Ex 4.1)."""
    for _, out in evaluated(name)[1]:
        assert_close(out["h"][3:], out["total_mass"] * out["com_rate"])


# -- simulation: conservation laws ---------------------------------------------------------------------------


@checks.fast_jit
def _rk4(model, q, qd, dt, n_steps):
    """Integrate (q, qd)' = (configuration_rate(q, qd), FD(q, qd, 0)) over n_steps classical RK4 steps (no
    renormalization); the four stages are a `lax.scan`, so the program holds forward dynamics once."""
    tau = jnp.zeros_like(qd)
    a = jnp.array([0.0, 0.5, 0.5, 1.0])  # stage i evaluates at y + a_i dt k_{i-1}
    b = jnp.array([1.0, 2.0, 2.0, 1.0]) / 6.0

    def stage(carry, ab):
        (q, qd), (kq, kv), (sq, sv) = carry
        ai, bi = ab
        x, v = q + ai * dt * kq, qd + ai * dt * kv
        kq, kv = jaxmb.configuration_rate(model, x, v), jaxmb.forward_dynamics(model, x, v, tau)
        return ((q, qd), (kq, kv), (sq + bi * kq, sv + bi * kv)), None

    def step(_, state):
        q, qd = state
        zeros = (jnp.zeros_like(q), jnp.zeros_like(qd))
        (_, _, (sq, sv)), _ = jax.lax.scan(stage, ((q, qd), zeros, zeros), (a, b))
        return q + dt * sq, qd + dt * sv

    q, qd = jax.lax.fori_loop(0, n_steps, step, (q, qd))
    return jaxmb.kinetic_energy(model, q, qd), jaxmb.spatial_momentum(model, q, qd)


def test_free_floating_tree_conserves_momentum_and_energy():
    """A free-floating tree (free base, all joint kinds) without gravity, joint forces or external forces keeps
    its spatial momentum about the world origin and its kinetic energy. RK4 conserves
    neither exactly, so the drift over a fixed horizon must vanish as O(dt^4): halving dt divides it by ~16."""
    model, results = evaluated("floating-mixed")
    model = model.replace(gravity=jnp.zeros(3))
    (q, qd, *_), out = results[0]
    ke0, h0 = out["KE"], out["h"]  # neither depends on gravity
    horizon, n = 1.0, 100
    errors = []
    for steps in (n, 2 * n):
        ke, h = _rk4(model, q, qd, horizon / steps, steps)
        errors.append((abs(float(ke - ke0)) / ke0, float(jnp.abs(h - h0).max() / jnp.abs(h0).max())))
    (e_ke, e_h), (e_ke2, e_h2) = errors
    assert e_ke2 < 1e-6 and e_h2 < 1e-6, errors
    assert e_ke / e_ke2 > 10, errors
    assert e_h / e_h2 > 10, errors
