"""The three time-stepping schemes of `jaxmb.sim.stepping`, each from ``(q, qd)`` to ``(q+, qd+)`` over ``dt``.

``euler``     semi-implicit (symplectic) Euler: ``qd+ = qd + dt qdd(q, qd)``, then ``q+ = q (+) dt qd+`` on each
              joint's manifold (`jaxmb.integrate`). Constraint impulses are solved for ``qd+``.
``implicit``  the same, with joint damping and the servos' velocity (and, through ``q+ = q + dt qd+``, position)
              gains taken implicitly: ``(M + dt D) (qd+ - qd) = dt f(q, qd)`` with ``D`` their diagonal damping (a
              position servo's stiffness ``kp`` enters ``D`` as ``dt kp``). ``M + dt D`` is the mass matrix with
              ``dt D`` added to the armature, so
              the articulated-body sweep inverts it as it inverts any armature: no matrix is formed. Compliant
              contact forces are implicit too, through their contact-space derivatives
              (`jaxmb.sim.constraints.implicit_compliant_forces`): stiff contact at a large step.
``implicitfast``  ``implicit`` with the velocity gains alone in ``D``, as MuJoCo's ``implicitfast``: the same steps
              as MuJoCo's where ``implicit`` differs from them by ``dt^2 kp`` terms of the position servos.
``rk4``       the classical fourth-order Runge-Kutta method on ``(q, qd)`` in the coordinates of ``q``
              (quaternion rates by `jaxmb.configuration_rate`), quaternions normalized once at the end: fourth order
              on every joint, free bodies included. Constraint forces (contacts of the constraint model, limits,
              Coulomb friction) are solved once at the start of the step, as for ``euler``, and held over the
              stages; compliant contact forces are evaluated at every stage.

A closed-loop scene (`jaxmb.loops.LoopModel`) steps in its own coordinates, the spanning ``q`` and the independent
velocities ``yd`` in the place of ``qd``, with the same three schemes (`jaxmb.sim.closed_loops`); its
configuration is projected back onto the loop constraints at the end of every step.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxmb.configuration import configuration_rate, integrate
from jaxmb.batching import in_cpu_chunks, live_tangents, of_live, vmap_in_cpu_chunks
from jaxmb.dynamics.articulated import articulated_body, articulated_inertias, forward_dynamics, solve_factored
from jaxmb.hinges import hinge_map, joint_poses
from jaxmb.kinematics import body_velocities, forward_kinematics
from jaxmb.loops.articulated import forward_dynamics as loop_forward_dynamics
from jaxmb.loops.embedding import embedding_matrix
from jaxmb.sim.actuators import actuator_forces, implicit_damping, passive_forces
from jaxmb.sim.closed_loops import advance as loop_advance
from jaxmb.sim.closed_loops import is_closed, loop_factors, project, spanning_tree, with_armature
from jaxmb.sim.constraints import (
    ConstraintForces,
    body_forces,
    compliant_forces,
    constraint_forces,
    contacts,
    implicit_compliant_forces,
    world_forces,
)


class Advance(NamedTuple):
    """One step's result: ``q`` (nq,), ``qd`` (nv,) (``yd`` (ny,) of a closed-loop scene), the step's
    `ConstraintForces`, and ``closed`` () whether a closed-loop scene's loops closed at ``q`` (always true for a
    tree)."""

    q: jnp.ndarray
    qd: jnp.ndarray
    constraints: ConstraintForces
    closed: jnp.ndarray


def applied_forces(scene, q, qd, ctrl):
    """Actuator and passive joint forces (nv,) at ``(q, qd)``."""
    smooth = scene.options.joint_friction == "smooth"
    return actuator_forces(scene.actuators, q, qd, ctrl) + passive_forces(scene.joints, q, qd, smooth)


class Solved(NamedTuple):
    """The start of a step: applied joint forces ``tau`` (nv,), body poses ``T``, the `StepFactors` ``ab`` at
    ``(q, qd, tau)``, and the step's `ConstraintForces` ``cf``."""

    tau: jnp.ndarray
    T: object
    ab: object
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
def step_factors(model, q, qd, tau) -> StepFactors:
    """`StepFactors` of a tree from one pass of the articulated-body algorithm (`jaxmb.articulated_body`), batched
    in chunks on the CPU: a smaller program than the three functions that compute them apart. Its derivative is
    theirs (`_factors_apart`): the forward dynamics with its analytic derivative rule, which a derivative through
    the articulated-body sweeps themselves would replace by a larger program."""
    return _one_pass(model, q, qd, tau)


def _one_pass_of_one_state(model, q, qd, tau):
    ab = articulated_body(model, q, qd, tau)
    return StepFactors(ab.qdd, ab.V, ab.G, ab.D)


_one_pass = vmap_in_cpu_chunks(_one_pass_of_one_state)


def _gains_and_D(model, q):
    ai = articulated_inertias(model, q)
    return ai.G, ai.D


_inertias_in_chunks = in_cpu_chunks(_gains_and_D)


def _factors_apart(model, q, qd, tau) -> StepFactors:
    """`StepFactors` from the functions that compute each, each batched by its own rule (`jaxmb.batching`)."""
    G, D = _inertias_in_chunks(model, q)
    return StepFactors(forward_dynamics(model, q, qd, tau), body_velocities(model, q, qd), G, D)


def _step_factors_jvp(primals, tangents):
    """The JVP of `_factors_apart` in the arguments whose tangents are not symbolic zeros (a scene's model is
    usually constant): zero tangents made arrays would be carried through every derivative sweep."""
    live, dots = live_tangents(primals, tangents)
    if not live:
        out = _one_pass(*primals)
        return out, jax.tree.map(jnp.zeros_like, out)
    return jax.jvp(*of_live(_factors_apart, primals, live), dots)


step_factors.defjvp(_step_factors_jvp, symbolic_zeros=True)


def _generalized_forces(scene, model, q, v, ctrl):
    """``(tau, qd)``: the applied forces in the step's coordinates, and the spanning velocity at ``v``: for a tree
    ``applied_forces`` and ``v``; for a closed-loop system ``G* applied_forces`` (ny,) and ``G v``."""
    if not is_closed(model):
        return applied_forces(scene, q, v, ctrl), v
    G = embedding_matrix(model, q)
    qd = G @ v
    return G.T @ applied_forces(scene, q, qd, ctrl), qd


def _accelerations(model, q, v, tau, f_ext=None):
    if is_closed(model):
        return loop_forward_dynamics(model, q, v, tau, f_ext)
    return forward_dynamics(model, q, v, tau, f_ext)


def _solved(scene, model, q, v, ctrl, dt, warm) -> Solved:
    T = forward_kinematics(spanning_tree(model), q)
    tau, _ = _generalized_forces(scene, model, q, v, ctrl)
    if is_closed(model):
        ab = loop_factors(model, q, v, tau)
    else:
        ab = step_factors(model, q, v, tau)
    return Solved(tau, T, ab, constraint_forces(scene, model, q, v, tau, dt, warm, T, ab))


def _constrained_accelerations(scene, model, q, qd, tau, ab, cf):
    """The accelerations under the applied forces ``tau`` and the constraint forces ``cf``: for a tree without
    compliant contact the free ones plus ``M^-1 cf.tau`` by the factored solve (7.18) with the step's ``G, D``; else
    the forward dynamics again, with the compliant forces as external forces."""
    if is_closed(model) or (scene.nc and scene.options.contact == "compliant"):
        return _accelerations(model, q, qd, tau + cf.tau, cf.f_ext)
    return ab.qdd + solve_factored(model, joint_poses(model, q), hinge_map(model), ab.G, ab.D, cf.tau)[0]


def euler(scene, q, qd, ctrl, dt, warm, implicit=False, position_gains=True) -> Advance:
    """Semi-implicit Euler, or with ``implicit`` the implicit-in-velocity step, with the position servos'
    stiffness in it where ``position_gains`` (``implicit``) or not (``implicitfast``) (module docstring)."""
    model = scene.model
    if implicit:
        D = implicit_damping(scene.actuators, scene.joints, dt, position_gains)
        model = with_armature(model, dt * D)
    tau, T, ab, cf = _solved(scene, model, q, qd, ctrl, dt, warm)
    if cf.velocity is not None:
        qd_next = cf.velocity
    else:
        qdd = _constrained_accelerations(scene, model, q, qd, tau, ab, cf)
        if implicit and scene.nc and scene.options.contact == "compliant":
            extra = implicit_compliant_forces(scene, model, q, T, cf.contacts, ab, qdd, dt)
            cf = cf._replace(f_ext=cf.f_ext + body_forces(scene, T, cf.contacts, world_forces(cf.contacts, extra)),
                             force=cf.force + extra)
            qdd = _accelerations(model, q, qd, tau + cf.tau, cf.f_ext)
        qd_next = qd + dt * qdd
    if is_closed(model):
        q_next, closed = loop_advance(model, q, qd_next, dt)
        return Advance(q_next, qd_next, cf, closed)
    return Advance(integrate(model, q, qd_next, dt), qd_next, cf, jnp.asarray(True))


def rk4(scene, q, qd, ctrl, dt, warm) -> Advance:
    """Classical Runge-Kutta (module docstring). A closed-loop scene's stages move its spanning ``q`` at
    ``G(q) yd``, whose exact flow keeps ``phi(q) = 0``; the end of the step projects onto it."""
    model, tree = scene.model, scene.tree
    cf = _solved(scene, model, q, qd, ctrl, dt, warm).cf
    compliant = scene.nc and scene.options.contact == "compliant"

    def rate(q_s, v_s):
        tau, qd_s = _generalized_forces(scene, model, q_s, v_s, ctrl)
        f_ext = cf.f_ext
        if compliant:
            T = forward_kinematics(tree, q_s)
            con = contacts(scene, T)
            V = body_velocities(tree, q_s, qd_s)
            force = compliant_forces(scene, T, V, con)
            f_ext = body_forces(scene, T, con, jnp.einsum("cji,cj->ci", con.frame, force))
        return configuration_rate(tree, q_s, qd_s), _accelerations(model, q_s, v_s, tau + cf.tau, f_ext)

    k1 = rate(q, qd)
    k2 = rate(q + 0.5 * dt * k1[0], qd + 0.5 * dt * k1[1])
    k3 = rate(q + 0.5 * dt * k2[0], qd + 0.5 * dt * k2[1])
    k4 = rate(q + dt * k3[0], qd + dt * k3[1])
    q_next = q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
    qd_next = qd + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    q_next = integrate(tree, q_next, jnp.zeros(tree.nv, qd.dtype), 0.0)  # unit quaternions
    if is_closed(model):
        q_next, closed = project(model, q_next)
        return Advance(q_next, qd_next, cf, closed)
    return Advance(q_next, qd_next, cf, jnp.asarray(True))
