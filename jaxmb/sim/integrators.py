"""The four time-stepping schemes of `jaxmb.sim.stepping`, each from ``(q, qd)`` to ``(q+, qd+)`` over ``dt``.

``euler``     semi-implicit (symplectic) Euler: ``qd+ = qd + dt qdd(q, qd)``, then ``q+ = q (+) dt qd+`` on each
              joint's manifold (`jaxmb.integrate`); a free joint's origin moves on its straight line and its linear
              velocity keeps its direction in the joint frame (`euler_positions`), as MuJoCo's, whose free joints
              carry their linear velocity in world axes. Constraint impulses are solved for ``qd+``.
``implicit``  the same, with joint damping and the servos' velocity (and, through ``q+ = q + dt qd+``, position)
              gains taken implicitly: ``(M + dt D) (qd+ - qd) = dt f(q, qd)`` with ``D`` their diagonal damping (a
              position servo's stiffness ``kp`` and a joint spring's stiffness enter ``D`` as ``dt kp``,
              `jaxmb.sim.actuators.implicit_damping`). ``M + dt D`` is the mass matrix with ``dt D`` added to the
              armature, so the articulated-body sweep inverts it as it inverts any armature: no matrix is formed.
              Compliant contact forces are implicit too, through their contact-space derivatives
              (`jaxmb.sim.compliant.implicit_compliant_forces`): stiff contact at a large step.
``implicitfast``  ``implicit`` with the velocity gains and joint damping alone in ``D``, as MuJoCo's
              ``implicitfast``: the same steps as MuJoCo's where ``implicit`` differs from them by ``dt^2 kp`` terms.
``rk4``       the classical fourth-order Runge-Kutta method on ``(q, qd)`` in the coordinates of ``q``
              (quaternion rates by `jaxmb.configuration_rate`), a free joint's linear velocity in its joint frame's
              axes (`in_joint_axes`), quaternions normalized once at the end: fourth order on every joint, free
              bodies included, and a body in free flight on its straight line. Constraint forces (contacts of the
              constraint model, limits, Coulomb friction) are solved once at the start of the step, as for
              ``euler``, and held over the stages; compliant contact forces are evaluated at every stage.

Every scheme takes the applied inputs of `jaxmb.sim.inputs` (generalized forces and body wrenches) beside the
controls. A closed-loop scene (`jaxmb.loops.LoopModel`) steps in its own coordinates, the spanning ``q`` and the
independent velocities ``yd`` in the place of ``qd``, with the same four schemes (`jaxmb.sim.closed_loops`); its
configuration is projected back onto the loop constraints at the end of every step.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxmb.batching import in_cpu_chunks, live_tangents, of_live, vmap_in_cpu_chunks
from jaxmb.configuration import configuration_rate, integrate
from jaxmb.dynamics.articulated import (
    articulated_body,
    articulated_inertias,
    forward_dynamics,
    solve_factored,
)
from jaxmb.hinges import hinge_map, joint_poses
from jaxmb.kinematics import body_velocities, forward_kinematics
from jaxmb.loops.articulated import forward_dynamics as loop_forward_dynamics
from jaxmb.loops.embedding import embedding_matrix
from jaxmb.rotation import quat_exp, quat_to_matrix
from jaxmb.sim.actuators import actuator_forces, implicit_damping, passive_forces
from jaxmb.sim.closed_loops import advance as loop_advance
from jaxmb.sim.closed_loops import (
    is_closed,
    loop_factors,
    project,
    spanning_tree,
    with_armature,
)
from jaxmb.sim.compliant import compliant_forces, implicit_compliant_forces
from jaxmb.sim.constraints import ConstraintForces, constraint_forces
from jaxmb.sim.contact_frames import body_forces, contacts, world_forces
from jaxmb.sim.inputs import Applied, with_applied
from jaxmb.sim.tendons import passive_forces as tendon_passive_forces
from jaxmb.sim.tendons import with_tendon_mass
from jaxmb.spatial import cross3, mv


class Advance(NamedTuple):
    """One step's result: ``q`` (nq,), ``qd`` (nv,) (``yd`` (ny,) of a closed-loop scene), the step's
    `ConstraintForces`, and ``closed`` () whether a closed-loop scene's loops closed at ``q`` (always true for a
    tree)."""

    q: jnp.ndarray
    qd: jnp.ndarray
    constraints: ConstraintForces
    closed: jnp.ndarray


def applied_forces(scene, q, qd, ctrl):
    """Actuator and passive joint and tendon forces (nv,) at ``(q, qd)``."""
    smooth = scene.options.joint_friction == "smooth"
    tau = actuator_forces(scene.actuators, q, qd, ctrl, scene.tendons) + passive_forces(scene.joints, q, qd, smooth)
    return tau if scene.tendons is None else tau + tendon_passive_forces(scene.tendons, q, qd)


class Solved(NamedTuple):
    """The start of a step: applied joint forces ``tau`` (nv,), body poses ``T``, the `StepFactors` ``ab`` at
    ``(q, qd, tau, f_applied)``, the applied body wrenches ``f_applied`` (nb, 6) in body coordinates (None without
    them), and the step's `ConstraintForces` ``cf``."""

    tau: jnp.ndarray
    T: object
    ab: object
    f_applied: jnp.ndarray | None
    cf: ConstraintForces


class StepFactors(NamedTuple):
    """What the constraints take of the articulated-body algorithm at ``(q, qd, tau)``: the free accelerations
    ``qdd`` (nv,), the body velocities ``V`` (nb, 6), and the factors ``G``, ``D`` (nv, 6) of ``q``
    (`jaxmb.ArticulatedInertias`)."""

    qdd: jnp.ndarray
    V: jnp.ndarray
    G: jnp.ndarray
    D: jnp.ndarray


@jax.custom_jvp
def step_factors(model, q, qd, tau, f_ext) -> StepFactors:
    """`StepFactors` of a tree under the joint forces ``tau`` (nv,) and the external forces ``f_ext`` (nb, 6) or
    None from one pass of the articulated-body algorithm (`jaxmb.articulated_body`), batched
    in chunks on the CPU: a smaller program than the three functions that compute them apart. Its derivative is
    theirs (`_factors_apart`): the forward dynamics with its analytic derivative rule, which a derivative through
    the articulated-body sweeps themselves would replace by a larger program."""
    return _one_pass(model, q, qd, tau, f_ext)


def _one_pass_of_one_state(model, q, qd, tau, f_ext):
    ab = articulated_body(model, q, qd, tau, f_ext)
    return StepFactors(ab.qdd, ab.V, ab.G, ab.D)


_one_pass = vmap_in_cpu_chunks(_one_pass_of_one_state)


def _gains_and_D(model, q):
    ai = articulated_inertias(model, q)
    return ai.G, ai.D


_inertias_in_chunks = in_cpu_chunks(_gains_and_D)


def _factors_apart(model, q, qd, tau, f_ext) -> StepFactors:
    """`StepFactors` from the functions that compute each, each batched by its own rule (`jaxmb.batching`)."""
    G, D = _inertias_in_chunks(model, q)
    return StepFactors(forward_dynamics(model, q, qd, tau, f_ext), body_velocities(model, q, qd), G, D)


def _step_factors_jvp(primals, tangents):
    """The JVP of `_factors_apart` in the arguments whose tangents are not symbolic zeros (a scene's model is
    usually constant): zero tangents made arrays would be carried through every derivative sweep."""
    live, dots = live_tangents(primals, tangents)
    if not live:
        out = _one_pass(*primals)
        return out, jax.tree.map(jnp.zeros_like, out)
    return jax.jvp(*of_live(_factors_apart, primals, live), dots)


step_factors.defjvp(_step_factors_jvp, symbolic_zeros=True)


def _generalized_forces(scene, model, q, v, ctrl, qfrc=None):
    """``(tau, qd)``: the applied forces in the step's coordinates, and the spanning velocity at ``v``: for a tree
    ``applied_forces`` plus the applied generalized forces ``qfrc`` (nv,) (None: none) and ``v``; for a
    closed-loop system ``G*`` of those (ny,) and ``G v``."""
    if not is_closed(model):
        tau = applied_forces(scene, q, v, ctrl)
        return (tau if qfrc is None else tau + qfrc), v
    G = embedding_matrix(model, q)
    qd = G @ v
    tau = applied_forces(scene, q, qd, ctrl)
    return G.T @ (tau if qfrc is None else tau + qfrc), qd


def _accelerations(model, q, v, tau, f_ext=None):
    if is_closed(model):
        return loop_forward_dynamics(model, q, v, tau, f_ext)
    return forward_dynamics(model, q, v, tau, f_ext)


def _plus(f, g):
    """The sum of two external forces (nb, 6), either of which may be None (none)."""
    return g if f is None else f if g is None else f + g


def turning_rates(model, qd):
    """``[0; w x v]`` (nv,) on each free joint's coordinates ``qd = [w; v]``, zero elsewhere: how fast the body-frame
    linear velocity of a body moving on a straight line changes by the turning of its axes alone, since
    ``d/dt (R v) = R (dv/dt + w x v)``. Added to the accelerations, it makes a step's velocity ``u`` the velocity in
    the axes the step starts from (`euler_positions`)."""
    out = jnp.zeros_like(qd)
    for blk in model.topology.kind_blocks:
        if blk.kind == "free":
            w, v = qd[blk.v_index[:, :3]], qd[blk.v_index[:, 3:]]
            out = out.at[blk.v_index[:, 3:]].set(cross3(w, v))
    return out


def in_joint_axes(model, q, qd, inverse=False):
    """``qd`` (nv,) with each free joint's linear velocity ``v`` (body axes) as ``R v`` in its joint frame's axes,
    ``R`` the rotation of the joint's quaternion at ``q``, normalized (RK4's stages move it off the unit sphere)
    (``inverse``: back, ``R* v``). RK4 integrates a free joint's linear velocity
    in these axes, in which a body in free flight keeps it constant, as MuJoCo's free joints do (a rotating vector in
    body axes would lose its length to the method's truncation)."""
    for blk in model.topology.kind_blocks:
        if blk.kind == "free":
            quat = q[blk.q_index[:, 3:]]
            R = quat_to_matrix(quat / jnp.linalg.norm(quat, axis=-1, keepdims=True))
            R = jnp.swapaxes(R, -1, -2) if inverse else R
            qd = qd.at[blk.v_index[:, 3:]].set(mv(R, qd[blk.v_index[:, 3:]]))
    return qd


def euler_positions(model, q, u, dt):
    """``(q+, qd+)``: the semi-implicit Euler step of a tree's configuration from ``q`` at the step's velocity ``u``
    (nv,). Each joint moves at the constant ``u`` on its manifold (`jaxmb.integrate`), except a free joint, whose
    origin moves on the straight line ``p + dt R u_v`` while its axes turn by ``exp(dt u_w)``, and whose linear
    velocity is then re-expressed in the turned axes, ``v+ = exp(dt u_w)* u_v``: the velocity in the joint frame
    is unchanged, as in MuJoCo, whose free joints keep their linear velocity in world axes. A body in free flight
    keeps its momentum and moves on its straight line; the body-twist exponential would move it on a helix and grow
    its speed."""
    q_next = integrate(model, q, u, dt)
    for blk in model.topology.kind_blocks:
        if blk.kind == "free":
            p, quat = q[blk.q_index[:, :3]], q[blk.q_index[:, 3:]]
            w, v = u[blk.v_index[:, :3]], u[blk.v_index[:, 3:]]
            q_next = q_next.at[blk.q_index[:, :3]].set(p + dt * mv(quat_to_matrix(quat), v))
            turn = quat_to_matrix(quat_exp(dt * w))
            u = u.at[blk.v_index[:, 3:]].set(mv(jnp.swapaxes(turn, -1, -2), v))
    return q_next, u


def _solved(scene, model, q, v, ctrl, dt, warm, applied, turning=False) -> Solved:
    T = forward_kinematics(spanning_tree(model), q)
    tau, _ = _generalized_forces(scene, model, q, v, ctrl, applied.qfrc)
    f_applied = with_applied(None, scene.tree, T, applied)
    if is_closed(model):
        ab = loop_factors(model, q, v, tau, f_applied)
    else:
        ab = step_factors(model, q, v, tau, f_applied)
        ab = with_tendon_mass(scene, model, q, ab, dt)  # the tendons' term of the mass matrix
        if turning:
            ab = ab._replace(qdd=ab.qdd + turning_rates(model, v))
    return Solved(tau, T, ab, f_applied, constraint_forces(scene, model, q, v, tau, dt, warm, T, ab))


def _constrained_accelerations(scene, model, q, qd, tau, ab, f_applied, cf):
    """The accelerations under the applied forces ``tau`` and ``f_applied`` and the constraint forces ``cf``: for a
    tree without compliant contact the free ones ``ab.qdd`` plus ``M^-1 cf.tau`` by the factored solve (7.18)
    with the step's ``G, D``; else the forward dynamics again, with the compliant forces as external forces."""
    if is_closed(model) or (scene.nc and scene.options.contact == "compliant"):
        return _accelerations(model, q, qd, tau + cf.tau, _plus(cf.f_ext, f_applied))
    return ab.qdd + solve_factored(model, joint_poses(model, q), hinge_map(model), ab.G, ab.D, cf.tau)[0]


def euler(scene, q, qd, ctrl, dt, warm, implicit=False, position_gains=True, applied=Applied()) -> Advance:
    """Semi-implicit Euler, or with ``implicit`` the implicit-in-velocity step, with the position servos'
    stiffness in it where ``position_gains`` (``implicit``) or not (``implicitfast``), under the controls ``ctrl``
    and the `jaxmb.sim.inputs.Applied` inputs (module docstring). A tree's free joints step as
    `euler_positions` says: the accelerations carry their `turning_rates`, so that the step's velocity and its
    constraint rows are in the axes the step starts from."""
    model = scene.model
    if implicit:
        D = implicit_damping(scene.actuators, scene.joints, dt, position_gains)
        model = with_armature(model, dt * D)
    closed = is_closed(model)
    tau, T, ab, f_applied, cf = _solved(scene, model, q, qd, ctrl, dt, warm, applied, turning=not closed)
    if cf.velocity is not None:
        qd_next = cf.velocity
    else:
        qdd = _constrained_accelerations(scene, model, q, qd, tau, ab, f_applied, cf)
        if implicit and scene.nc and scene.options.contact == "compliant":
            extra = implicit_compliant_forces(scene, model, q, T, cf.contacts, ab, qdd, dt)
            cf = cf._replace(f_ext=cf.f_ext + body_forces(scene, T, cf.contacts, world_forces(cf.contacts, extra)),
                             force=cf.force + extra)
            qdd = _accelerations(model, q, qd, tau + cf.tau, _plus(cf.f_ext, f_applied))
        if not closed and scene.nc and scene.options.contact == "compliant":
            qdd = qdd + turning_rates(model, qd)  # the forward dynamics again: its accelerations in moving axes
        qd_next = qd + dt * qdd
    if closed:
        q_next, loops_closed = loop_advance(model, q, qd_next, dt)
        return Advance(q_next, qd_next, cf, loops_closed)
    q_next, qd_next = euler_positions(model, q, qd_next, dt)
    return Advance(q_next, qd_next, cf, jnp.asarray(True))


def stages_on_the_manifold(tree, q, qd, dt, accelerations):
    """``(q+, qd+)``: MuJoCo's RK4 step of a tree from ``(q, qd)``, ``accelerations(q_s, qd_s)`` (nv,) at a stage.
    The velocities ``w`` are MuJoCo's (a free joint's linear velocity in its joint frame's axes, `in_joint_axes`);
    stage ``i`` is at ``q (+) c_i dt w_(i-1)`` and the step ends at ``q (+) dt (w_1 + 2 w_2 + 2 w_3 + w_4) / 6``,
    each ``(+)`` a step of `euler_positions` from ``q``: on every joint's manifold, as MuJoCo's ``mj_integratePos``
    (the classical method in the coordinates of ``q`` moves a quaternion off the unit sphere at its stages)."""
    w = in_joint_axes(tree, q, qd)

    def at(h, w_s):
        return euler_positions(tree, q, in_joint_axes(tree, q, w_s, inverse=True), h)[0]

    def acc(q_s, w_s):
        v_s = in_joint_axes(tree, q_s, w_s, inverse=True)
        return in_joint_axes(tree, q_s, accelerations(q_s, v_s) + turning_rates(tree, v_s))

    a1 = acc(q, w)
    w2 = w + 0.5 * dt * a1
    a2 = acc(at(0.5 * dt, w), w2)
    w3 = w + 0.5 * dt * a2
    a3 = acc(at(0.5 * dt, w2), w3)
    w4 = w + dt * a3
    a4 = acc(at(dt, w3), w4)
    q_next = at(dt, (w + 2 * w2 + 2 * w3 + w4) / 6)
    w_next = w + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
    return q_next, in_joint_axes(tree, q_next, w_next, inverse=True)


def rk4(scene, q, qd, ctrl, dt, warm, applied=Applied()) -> Advance:
    """Classical Runge-Kutta (module docstring) under the controls ``ctrl`` and the `jaxmb.sim.inputs.Applied`
    inputs, the body wrenches re-expressed at each stage's pose. A closed-loop scene's stages move its spanning
    ``q`` at ``G(q) yd``, whose exact flow keeps ``phi(q) = 0``; the end of the step projects onto it. A scene with
    MuJoCo's soft constraints (`jaxmb.sim.impedance`) steps as MuJoCo's RK4: it solves them at every stage, the
    stage's accelerations ``(v - v_s) / dt`` of the velocity problem at the stage (its minimizer is the
    accelerations' problem's, whatever the ``dt``), and a tree's stages move on the joints' manifolds
    (`stages_on_the_manifold`)."""
    model, tree = scene.model, scene.tree
    cf = _solved(scene, model, q, qd, ctrl, dt, warm, applied).cf
    compliant = scene.nc and scene.options.contact == "compliant"

    def rate(q_s, v_s):
        if scene.impedance is not None:  # the rows solved at the stage, for the velocity in its axes (`euler`)
            closed = is_closed(model)
            _, _, ab, _, stage = _solved(scene, model, q_s, v_s, ctrl, dt, warm, applied, turning=not closed)
            qdd = ab.qdd if stage.velocity is None else (stage.velocity - v_s) / dt
            if closed:
                return configuration_rate(tree, q_s, ab.G @ v_s), qdd  # a closed loop's embedding G
            return configuration_rate(tree, q_s, v_s), qdd - turning_rates(model, v_s)
        tau, qd_s = _generalized_forces(scene, model, q_s, v_s, ctrl, applied.qfrc)
        f_ext = cf.f_ext
        if compliant or applied.xfrc is not None:
            T = forward_kinematics(tree, q_s)
        if compliant:
            con = contacts(scene, T)
            V = body_velocities(tree, q_s, qd_s)
            force = compliant_forces(scene, T, V, con)
            f_ext = body_forces(scene, T, con, jnp.einsum("cji,cj->ci", con.frame, force))
        f_ext = with_applied(f_ext, tree, T, applied) if applied.xfrc is not None else f_ext
        return configuration_rate(tree, q_s, qd_s), _accelerations(model, q_s, v_s, tau + cf.tau, f_ext)

    if scene.impedance is not None and not is_closed(model):
        q_next, qd_next = stages_on_the_manifold(tree, q, qd, dt, lambda q_s, v_s: rate(q_s, v_s)[1])
        return Advance(q_next, qd_next, cf, jnp.asarray(True))
    if is_closed(model):
        staged = rate
    else:  # free joints' linear velocities in their joint frames' axes (`in_joint_axes`)
        def staged(q_s, w_s):
            v_s = in_joint_axes(tree, q_s, w_s, inverse=True)
            q_rate, qdd = rate(q_s, v_s)
            for blk in tree.topology.kind_blocks:  # dp/dt = R v, exactly the velocity integrated
                if blk.kind == "free":
                    q_rate = q_rate.at[blk.q_index[:, :3]].set(w_s[blk.v_index[:, 3:]])
            return q_rate, in_joint_axes(tree, q_s, qdd + turning_rates(tree, v_s))

    w = qd if is_closed(model) else in_joint_axes(tree, q, qd)
    k1 = staged(q, w)
    k2 = staged(q + 0.5 * dt * k1[0], w + 0.5 * dt * k1[1])
    k3 = staged(q + 0.5 * dt * k2[0], w + 0.5 * dt * k2[1])
    k4 = staged(q + dt * k3[0], w + dt * k3[1])
    q_next = q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
    w_next = w + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    q_next = integrate(tree, q_next, jnp.zeros(tree.nv, qd.dtype), 0.0)  # unit quaternions
    if is_closed(model):
        q_next, closed = project(model, q_next)
        return Advance(q_next, w_next, cf, closed)
    return Advance(q_next, in_joint_axes(tree, q_next, w_next, inverse=True), cf, jnp.asarray(True))
