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
``implicit_coriolis``  MuJoCo's ``implicit``: ``implicitfast`` with the velocity derivative of the Coriolis and
              centrifugal forces too, ``(M + dt D + dt d(C qd)/d qd) (qd+ - qd) = dt f``, a dense solve
              (`implicit_in_velocity`); the constraint rows solved on ``M``, as MuJoCo's.
``rk4``       the classical fourth-order Runge-Kutta tableau as Runge-Kutta-Munthe-Kaas stages (Munthe-Kaas, "High
              order Runge-Kutta methods on manifolds", 1999), which MuJoCo's ``mj_step`` takes: each stage moves
              from the step's start by an increment ``theta`` (`stage_configuration`), a ball or free joint turning
              to ``quat exp(theta)`` at the rate ``dexp^-1_theta(w)`` (`stage_rates`), a free joint's linear
              velocity in its joint frame's axes (`in_joint_axes`): fourth order on every joint, quaternions unit
              at every stage, a body in free flight on its straight line. Constraint forces (contacts of the
              constraint model, limits, Coulomb friction) are solved once at the start of the step, as for
              ``euler``, and held over the stages, except with MuJoCo's soft rows, solved at every stage as
              MuJoCo's; compliant contact forces are evaluated at every stage.

Every scheme takes the applied inputs of `jaxmb.sim.inputs` (generalized forces and body wrenches) beside the
controls. A closed-loop scene (`jaxmb.loops.LoopModel`) steps in its own coordinates, the spanning ``q`` and the
independent velocities ``yd`` in the place of ``qd``, with the same four schemes (`jaxmb.sim.closed_loops`); its
configuration is projected back onto the loop constraints at the end of every step.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.configuration import configuration_rate, integrate
from jaxmb.dynamics.articulated import forward_dynamics, solve_factored
from jaxmb.dynamics.derivatives import inverse_dynamics_derivatives
from jaxmb.hinges import hinge_map
from jaxmb.kinematics import body_velocities
from jaxmb.loops.articulated import forward_dynamics as loop_forward_dynamics
from jaxmb.joints import PLANAR
from jaxmb.rotation import quat_exp, quat_multiply, quat_to_matrix, so3_dexp_inverse
from jaxmb.sim.actuators import implicit_damping
from jaxmb.sim.closed_loops import advance as loop_advance
from jaxmb.sim.closed_loops import is_closed, project, with_armature
from jaxmb.sim.compliant import compliant_contact_forces, implicit_compliant_forces
from jaxmb.sim.constraints import ConstraintForces
from jaxmb.sim.contact_frames import body_forces, world_forces
from jaxmb.sim.inputs import Applied
from jaxmb.sim.stages import Start, actuation, free_motion, kinematics, start, turning_rates
from jaxmb.sim.tendons import tendon_mass
from jaxmb.spatial import mv, skew


class Advance(NamedTuple):
    """One step's result: ``q`` (nq,), ``qd`` (nv,) (``yd`` (ny,) of a closed-loop scene), the step's
    `ConstraintForces`, ``closed`` () whether a closed-loop scene's loops closed at ``q`` (always true for a
    tree), and the `jaxmb.sim.stages.Start` of the step (its kinematics, actuation and free motion), for the step's
    record (`jaxmb.sim.stepping.inspect_step`)."""

    q: jnp.ndarray
    qd: jnp.ndarray
    constraints: ConstraintForces
    closed: jnp.ndarray
    start: Start


def _accelerations(model, q, v, tau, f_ext=None):
    if is_closed(model):
        return loop_forward_dynamics(model, q, v, tau, f_ext)
    return forward_dynamics(model, q, v, tau, f_ext)


def _plus(f, g):
    """The sum of two external forces (nb, 6), either of which may be None (none)."""
    return g if f is None else f if g is None else f + g


def in_joint_axes(model, q, qd, inverse=False):
    """``qd`` (nv,) with each free joint's linear velocity ``v`` (body axes) as ``R v`` in its joint frame's axes,
    ``R`` the rotation of the joint's quaternion at ``q``, normalized (``inverse``: back, ``R* v``). RK4 integrates
    a free joint's linear velocity in these axes, in which a body in free flight keeps it constant, as MuJoCo's free
    joints do (a rotating vector in body axes would lose its length to the method's truncation)."""
    for blk in model.topology.kind_blocks:
        if blk.kind == "free":
            quat = q[blk.q_index[:, 3:]]
            R = quat_to_matrix(quat / jnp.linalg.norm(quat, axis=-1, keepdims=True))
            R = jnp.swapaxes(R, -1, -2) if inverse else R
            qd = qd.at[blk.v_index[:, 3:]].set(mv(R, qd[blk.v_index[:, 3:]]))
    return qd


def stage_configuration(model, q, theta):
    """``q (+) theta`` (nq,): the configuration a Runge-Kutta-Munthe-Kaas stage reaches from ``q`` by the increment
    ``theta`` (nv,). A ball joint turns to ``quat exp(theta)`` (``theta`` a body-axes rotation vector); a free joint
    turns so and moves its origin by ``theta``'s linear part, in its joint frame's axes (`in_joint_axes`); screw and
    planar joints add ``theta`` to their coordinates."""
    for blk in model.topology.kind_blocks:
        qk, th = q[blk.q_index], theta[blk.v_index]
        if blk.kind == "spherical":
            q = q.at[blk.q_index].set(quat_multiply(qk, quat_exp(th)))
        elif blk.kind == "free":
            q = q.at[blk.q_index].set(jnp.concatenate([qk[:, :3] + th[:, 3:],
                                                       quat_multiply(qk[:, 3:], quat_exp(th[:, :3]))], -1))
        else:
            q = q.at[blk.q_index].set(qk + th)
    return q


def stage_rates(model, q_s, theta, w_s):
    """``d theta/dt`` (nv,) at the stage ``q_s = q (+) theta`` (`stage_configuration`) of velocity ``w_s`` (nv,),
    `in_joint_axes`): a rotation vector's ``dexp^-1_theta(w)`` (`jaxmb.rotation.so3_dexp_inverse`), a free
    joint's linear velocity as it is, a planar joint's configuration rate; a screw's velocity. Taken with
    `stage_configuration`, the classical tableau is fourth order on every joint and keeps quaternions unit."""
    rates = w_s
    for blk in model.topology.kind_blocks:
        if blk.kind == "spherical":
            rates = rates.at[blk.v_index].set(so3_dexp_inverse(theta[blk.v_index], w_s[blk.v_index]))
        elif blk.kind == "free":
            turn = blk.v_index[:, :3]
            rates = rates.at[turn].set(so3_dexp_inverse(theta[turn], w_s[turn]))
        elif blk.kind == "planar":
            rates = rates.at[blk.v_index].set(jax.vmap(PLANAR.configuration_rate)(q_s[blk.q_index],
                                                                                  w_s[blk.v_index]))
    return rates


def unit_quaternions(model, q):
    """``q`` (nq,) with each quaternion of its ball and free joints divided by its norm."""
    return integrate(model, q, jnp.zeros(model.nv, q.dtype), 0.0)


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


def _constrained_accelerations(scene, model, q, qd, s: Start, cf):
    """The accelerations under the applied forces of the `Start` ``s`` and the constraint forces ``cf``: for a tree
    without compliant contact the free ones plus ``M^-1 cf.tau`` by the factored solve (7.18) with the step's
    ``G, D``; else the forward dynamics again, with the compliant forces as external forces."""
    if is_closed(model) or (scene.nc and scene.options.contact == "compliant"):
        return _accelerations(model, q, qd, s.actuation.tau + cf.tau, _plus(cf.f_ext, s.actuation.f_applied))
    ab = s.free
    return ab.qdd + solve_factored(model, s.kinematics.X, hinge_map(model), ab.G, ab.D, cf.tau)[0]


def turning_jacobian(model, qd):
    """``d turning_rates / d qd`` (nv, nv): on each free joint ``d (w x v) = -v~ dw + w~ dv``."""
    out = jnp.zeros((model.nv, model.nv), qd.dtype)
    for blk in model.topology.kind_blocks:
        if blk.kind == "free":
            for w_i, v_i in zip(blk.v_index[:, :3], blk.v_index[:, 3:]):
                w, v = qd[w_i], qd[v_i]
                out = out.at[np.ix_(v_i, w_i)].set(-skew(v)).at[np.ix_(v_i, v_i)].set(skew(w))
    return out


def implicit_in_velocity(scene, model, q, qd, act, D, dt, T=None):
    """The accelerations ``a`` (nv,) of MuJoCo's ``implicit`` step under the generalized forces of ``act`` (a
    `jaxmb.sim.stages.Actuation`, the constraint forces included): ``(M - dt K) a = f`` with ``f = tau - ID(q, qd,
    0) + M t`` the smooth forces and ``K = d f / d qd = -diag(D) - d ID / d qd + M d t / d qd`` their velocity
    derivative, ``ID`` Newton-Euler under the applied body forces (`jaxmb.inverse_dynamics_derivatives`) and ``t``
    the free joints' `turning_rates`, so that ``a`` is, as `euler`'s accelerations are, in the axes the step starts
    from: MuJoCo's problem in its coordinates (a free joint's linear velocity in world axes) is this one carried by
    the rotation of each free joint's linear part, which is orthogonal. ``D`` (nv,): `implicit_damping` without
    position gains. M includes the tendons' armature; ``T``: the body poses at ``q``
    (`jaxmb.sim.tendons.tendon_geometry`)."""
    idd = inverse_dynamics_derivatives(model, q, qd, jnp.zeros_like(qd), act.f_applied)
    M = idd.M
    armature = tendon_mass(scene, q, dt, implicit=False, T=T)
    if armature is not None:
        M = M + armature
    A = M + dt * (jnp.diag(D) + idd.dtau_dqd - M @ turning_jacobian(model, qd))
    return jnp.linalg.solve(A, act.tau - idd.tau + M @ turning_rates(model, qd))


def euler(scene, q, qd, ctrl, dt, warm, implicit=False, position_gains=True, coriolis=False,
          applied=Applied()) -> Advance:
    """Semi-implicit Euler, or with ``implicit`` the implicit-in-velocity step, with the position servos'
    stiffness in it where ``position_gains`` (``implicit``) or not (``implicitfast``), and with ``coriolis`` the
    velocity derivative of the Coriolis forces too (``implicit_coriolis``, `implicit_in_velocity`), under the
    controls ``ctrl`` and the `jaxmb.sim.inputs.Applied` inputs (module docstring). A tree's free joints step as
    `euler_positions` says: the accelerations carry their `turning_rates`, so that the step's velocity and its
    constraint rows are in the axes the step starts from.

    jaxmb's rows are solved on the implicit step's matrix ``M + dt D``, so that the constraint forces are implicit
    with the damping. A scene with MuJoCo's soft constraints solves them as MuJoCo does, on ``M`` at the explicit
    accelerations, and takes their force into the implicit step: ``(M + dt D) qdd = f + J* p / dt`` (MuJoCo's
    ``mj_Euler`` with its joint damping, ``mj_implicit``)."""
    model = damped = scene.model
    if implicit:
        D = implicit_damping(scene.actuators, scene.joints, dt, position_gains)
        damped = with_armature(model, dt * D)
    closed = is_closed(model)
    on_M = implicit and (scene.impedance is not None or coriolis)
    if not on_M:
        model = damped
    s = start(scene, model, q, qd, ctrl, dt, warm, applied, turning=not closed, implicit=not on_M)
    cf = s.constraints
    if on_M:
        forced = s.actuation._replace(tau=s.actuation.tau + cf.tau)
        if coriolis:
            qd_next = qd + dt * implicit_in_velocity(scene, model, q, qd, forced, D, dt, s.kinematics.T)
        elif closed:
            qd_next = qd + dt * _accelerations(damped, q, qd, forced.tau, forced.f_applied)
        else:
            qd_next = qd + dt * free_motion(scene, damped, q, qd, forced, dt, turning=True).qdd
    elif cf.velocity is not None:
        qd_next = cf.velocity
    else:
        qdd = _constrained_accelerations(scene, model, q, qd, s, cf)
        if implicit and scene.nc and scene.options.contact == "compliant":
            T, con = s.kinematics.T, s.kinematics.contacts
            extra = implicit_compliant_forces(scene, model, q, T, con, s.free, qdd, dt)
            cf = cf._replace(f_ext=cf.f_ext + body_forces(scene, T, con, world_forces(con, extra)),
                             force=cf.force + extra)
            qdd = _accelerations(model, q, qd, s.actuation.tau + cf.tau, _plus(cf.f_ext, s.actuation.f_applied))
        if not closed and scene.nc and scene.options.contact == "compliant":
            qdd = qdd + turning_rates(model, qd)  # the forward dynamics again: its accelerations in moving axes
        qd_next = qd + dt * qdd
    if closed:
        q_next, loops_closed = loop_advance(model, q, qd_next, dt)
        return Advance(q_next, qd_next, cf, loops_closed, s)
    q_next, qd_next = euler_positions(model, q, qd_next, dt)
    return Advance(q_next, qd_next, cf, jnp.asarray(True), s)


def rk4(scene, q, qd, ctrl, dt, warm, applied=Applied()) -> Advance:
    """Runge-Kutta of order four (module docstring) under the controls ``ctrl`` and the `jaxmb.sim.inputs.Applied`
    inputs, the body wrenches re-expressed at each stage's pose: on an open tree Runge-Kutta-Munthe-Kaas stages
    ``q (+) theta`` (`stage_configuration`, `stage_rates`), as MuJoCo's RK4. A closed-loop scene's stages move its
    spanning ``q`` at ``G(q) yd``, whose exact flow keeps ``phi(q) = 0``, as classical stages in its coordinates;
    the end of the step projects onto it. A scene with MuJoCo's soft constraints (`jaxmb.sim.impedance`) solves
    them at every stage, as MuJoCo's RK4: the stage's accelerations ``(v - v_s) / dt`` of the velocity
    problem at the stage (its minimizer is the accelerations' problem's, whatever the ``dt``), the first stage's
    those of the step's start."""
    model, tree = scene.model, scene.tree
    closed = is_closed(model)
    soft = scene.impedance is not None
    s0 = start(scene, model, q, qd, ctrl, dt, warm, applied, turning=soft and not closed)
    cf = s0.constraints
    compliant = scene.nc and scene.options.contact == "compliant"

    def solved(s: Start, v_s):
        """A stage's accelerations from its solved rows (`euler`'s velocity, in the axes of the stage's start)."""
        qdd = s.free.qdd if s.constraints.velocity is None else (s.constraints.velocity - v_s) / dt
        return qdd if closed else qdd - turning_rates(model, v_s)

    def dynamics(q_s, v_s, s=None):
        """``(qd, dqd/dt)`` at a stage: the joint velocities (a closed loop's ``G yd``) and the accelerations, at
        the unit quaternions of ``q_s`` (`unit_quaternions`), as MuJoCo's kinematics normalize them."""
        q_u = unit_quaternions(tree, q_s)
        if soft:  # the rows solved at the stage
            s = start(scene, model, q_u, v_s, ctrl, dt, warm, applied, turning=not closed) if s is None else s
            return (s.free.G @ v_s if closed else v_s), solved(s, v_s)  # a closed loop's embedding G
        kin = kinematics(scene, q_u) if compliant or applied.xfrc is not None or scene.fluid is not None else None
        act = actuation(scene, model, q_u, v_s, ctrl, applied, None if kin is None else kin.T)
        f_ext = cf.f_ext
        if compliant:
            V = body_velocities(tree, q_u, act.qd)
            f_ext = compliant_contact_forces(scene, kin.T, kin.contacts, V, q_s.dtype)[0]
        return act.qd, _accelerations(model, q_u, v_s, act.tau + cf.tau, _plus(f_ext, act.f_applied))

    def rate(q_s, v_s, s=None):
        """``(dq/dt, dqd/dt)`` at a closed loop's stage: the configuration's rate at ``q_s`` itself, whose
        quaternions the stages move off the unit sphere, and the dynamics."""
        qd_s, qdd = dynamics(q_s, v_s, s)
        return configuration_rate(tree, q_s, qd_s), qdd

    if closed:  # classical stages in the spanning coordinates
        k1 = rate(q, qd, s0 if soft else None)  # the step's start, whose rows are solved
        k2 = rate(q + 0.5 * dt * k1[0], qd + 0.5 * dt * k1[1])
        k3 = rate(q + 0.5 * dt * k2[0], qd + 0.5 * dt * k2[1])
        k4 = rate(q + dt * k3[0], qd + dt * k3[1])
        q_next = unit_quaternions(tree, q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]))
        q_next, loops_closed = project(model, q_next)
        return Advance(q_next, qd + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]), cf, loops_closed, s0)

    def staged(theta, w_s, s=None):
        """``(d theta/dt, dw/dt)`` at the stage ``q (+) theta`` of velocity ``w_s`` (free joints' linear velocities
        in their joint frames' axes, `in_joint_axes`)."""
        q_s = stage_configuration(tree, q, theta)
        v_s = in_joint_axes(tree, q_s, w_s, inverse=True)
        qdd = dynamics(q_s, v_s, s)[1]
        return stage_rates(tree, q_s, theta, w_s), in_joint_axes(tree, q_s, qdd + turning_rates(tree, v_s))

    w = in_joint_axes(tree, q, qd)
    k1 = staged(jnp.zeros_like(w), w, s0 if soft else None)  # the step's start, whose rows are solved
    k2 = staged(0.5 * dt * k1[0], w + 0.5 * dt * k1[1])
    k3 = staged(0.5 * dt * k2[0], w + 0.5 * dt * k2[1])
    k4 = staged(dt * k3[0], w + dt * k3[1])
    q_next = unit_quaternions(tree, stage_configuration(tree, q, dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])))
    w_next = w + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    return Advance(q_next, in_joint_axes(tree, q_next, w_next, inverse=True), cf, jnp.asarray(True), s0)
