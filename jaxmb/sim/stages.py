"""The stages of a step before its constraints, each a function whose result has fields, computed once and read by
the stages after it:

    kinematics   joint poses ``X``, body poses ``T``, the contact slots of the narrow phase   (`kinematics`)
    actuation    actuator and passive joint forces, applied generalized forces and body wrenches, fluid forces
    free motion  one articulated-body pass: free accelerations, body velocities, factors ``G, D`` (`free_motion`)

then the constraint rows and their solve (`jaxmb.sim.constraints.constraint_forces`), then the integrator's update
(`jaxmb.sim.integrators`). `start` runs them in this order: the beginning of every step and of every RK4 stage that
solves its rows.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxmb.batching import in_cpu_chunks, live_tangents, of_live, vmap_in_cpu_chunks
from jaxmb.dynamics.articulated import articulated_body, articulated_inertias, forward_dynamics
from jaxmb.hinges import joint_poses
from jaxmb.kinematics import body_velocities, forward_kinematics
from jaxmb.loops.embedding import embedding_matrix
from jaxmb.sim.actuators import actuator_forces, passive_forces
from jaxmb.sim.closed_loops import is_closed, loop_factors
from jaxmb.sim.collision import Contacts
from jaxmb.sim.constraints import ConstraintForces, constraint_forces
from jaxmb.sim.contact_frames import contacts
from jaxmb.sim.fluid import with_fluid
from jaxmb.sim.inputs import Applied, with_applied
from jaxmb.sim.tendons import tendon_geometry
from jaxmb.sim.tendons import passive_forces as tendon_passive_forces
from jaxmb.sim.tendons import with_tendon_mass
from jaxmb.spatial import Transform, cross3


class Kinematics(NamedTuple):
    """Where the bodies are: the joint poses ``X`` (Transform, nb) of the (spanning) tree at ``q``, the body poses
    ``T`` (Transform, nb) in the world, and the contact slots (`jaxmb.sim.Contacts`, nc; None without geometry)."""

    X: Transform
    T: Transform
    contacts: Contacts | None


def kinematics(scene, q) -> Kinematics:
    """`Kinematics` of the scene at ``q``: joint and body poses, then the narrow phase of every contact pair."""
    tree = scene.tree
    T = forward_kinematics(tree, q)
    return Kinematics(joint_poses(tree, q), T, contacts(scene, T) if scene.nc else None)


class Actuation(NamedTuple):
    """The applied forces of a step in its coordinates: ``tau`` (nv,) the actuator and passive joint forces plus
    the applied generalized forces (``G* tau`` (ny,) for a closed-loop scene), ``qd`` (nv,) the (spanning) tree's
    velocity, and ``f_applied`` (nb, 6) the applied body wrenches in body coordinates (None without them)."""

    tau: jnp.ndarray
    qd: jnp.ndarray
    f_applied: jnp.ndarray | None


def joint_forces(scene, q, qd, ctrl, T=None):
    """Actuator and passive joint and tendon forces (nv,) at ``(q, qd)``, the tendons' lengths and Jacobian rows
    from the body poses ``T`` at ``q`` (`jaxmb.sim.tendons.tendon_geometry`; None: computed from ``q``)."""
    smooth = scene.options.joint_friction == "smooth"
    geo = None if scene.tendons is None else tendon_geometry(scene, q, T)
    tau = actuator_forces(scene.actuators, q, qd, ctrl, scene.tendons, geo) + passive_forces(scene.joints, q, qd,
                                                                                              smooth)
    return tau if scene.tendons is None else tau + tendon_passive_forces(scene.tendons, q, qd, geo)


def actuation(scene, model, q, v, ctrl, applied: Applied, T) -> Actuation:
    """`Actuation` at ``(q, v)`` under the controls ``ctrl``, the `jaxmb.sim.inputs.Applied` inputs and the scene's
    fluid (`jaxmb.sim.fluid`), whose body wrenches act at the body poses ``T`` (None without either): ``v`` is
    ``qd`` for a tree, the independent velocities ``yd`` of a closed-loop ``model``, whose forces are taken to them
    by its embedding ``G``."""
    f_applied = with_applied(None, scene.tree, T, applied)
    if not is_closed(model):
        tau = joint_forces(scene, q, v, ctrl, T)
        f_applied = with_fluid(f_applied, scene, scene.tree, T, q, v)
        return Actuation(tau if applied.qfrc is None else tau + applied.qfrc, v, f_applied)
    G = embedding_matrix(model, q)
    qd = G @ v
    tau = joint_forces(scene, q, qd, ctrl, T)
    f_applied = with_fluid(f_applied, scene, scene.tree, T, q, qd)
    return Actuation(G.T @ (tau if applied.qfrc is None else tau + applied.qfrc), qd, f_applied)


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


def turning_rates(model, qd):
    """``[0; w x v]`` (nv,) on each free joint's coordinates ``qd = [w; v]``, zero elsewhere: how fast the body-frame
    linear velocity of a body moving on a straight line changes by the turning of its axes alone, since
    ``d/dt (R v) = R (dv/dt + w x v)``. Added to the accelerations, it makes a step's velocity ``u`` the velocity in
    the axes the step starts from (`jaxmb.sim.integrators.euler_positions`)."""
    out = jnp.zeros_like(qd)
    for blk in model.topology.kind_blocks:
        if blk.kind == "free":
            w, v = qd[blk.v_index[:, :3]], qd[blk.v_index[:, 3:]]
            out = out.at[blk.v_index[:, 3:]].set(cross3(w, v))
    return out


def free_motion(scene, model, q, v, act: Actuation, dt, turning=False, implicit=True, T=None):
    """The free motion at ``(q, v)`` under the `Actuation` ``act``: `StepFactors` of a tree (its free accelerations
    those of the mass matrix with the tendons' term, `jaxmb.sim.tendons.with_tendon_mass`, whose implicit part is
    left out where ``implicit`` is False, at the body poses ``T``; its free joints' `turning_rates` added to ``qdd``
    where ``turning``),
    `jaxmb.sim.closed_loops.LoopFactors` of a closed-loop ``model``."""
    if is_closed(model):
        return loop_factors(model, q, v, act.tau, act.f_applied)
    ab = with_tendon_mass(scene, model, q, step_factors(model, q, v, act.tau, act.f_applied), dt, implicit,
                          T)
    return ab._replace(qdd=ab.qdd + turning_rates(model, v)) if turning else ab


class Start(NamedTuple):
    """The stages of a step up to its constraint forces: `Kinematics`, `Actuation`, the free motion (`free_motion`)
    and the `jaxmb.sim.constraints.ConstraintForces`."""

    kinematics: Kinematics
    actuation: Actuation
    free: StepFactors
    constraints: ConstraintForces


def start(scene, model, q, v, ctrl, dt, warm, applied: Applied, turning=False, implicit=True) -> Start:
    """The `Start` of a step from ``(q, v)`` under the controls ``ctrl`` and the applied inputs, its rows solved
    from the warm start ``warm`` (module docstring). ``model`` is the scene's model, or the one whose armature
    carries the implicit damping (``implicit``: and the tendons' implicit term with it)."""
    kin = kinematics(scene, q)
    act = actuation(scene, model, q, v, ctrl, applied, kin.T)
    free = free_motion(scene, model, q, v, act, dt, turning, implicit, kin.T)
    return Start(kin, act, free, constraint_forces(scene, model, q, v, dt, warm, kin, free))
