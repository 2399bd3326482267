"""`State`, `step` and `rollout`: the simulator's pure functions of one world.

``step(scene, state, ctrl, dt)`` advances one world by ``dt``; batching worlds is ``jax.vmap`` over states (and, for
randomized worlds, over scenes), and several devices are `jaxmb.sharded_vmap`. ``rollout`` runs steps in a
``lax.scan``; with ``checkpoint`` (the default) each step is a ``jax.checkpoint``, so reverse mode through a long
rollout keeps one state per step and recomputes the step's insides, instead of storing every intermediate.

One world's trouble stays in that world: a step whose result is not finite, whose controls are not finite, or
whose loops do not close keeps the world's previous state and records why in its ``diverged`` code
(`NONFINITE_STATE`, `NONFINITE_CONTROL`, `LOOPS_OPEN`; `failures` names them), and a diverged world stays frozen;
the other worlds of a batch go on.

``inspect_step`` returns a step's record for debugging (`StepRecord`: its kinematics and contacts, applied and free
accelerations, the solver's rows, impulses, iterations and residual) beside the next state; no state carries it.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import eager_jit, full_precision
from jaxmb.kinematics import forward_kinematics
from jaxmb.sim.actuators import next_activation, with_activation
from jaxmb.sim.closed_loops import is_closed, project
from jaxmb.sim.contact_frames import contacts, world_forces
from jaxmb.sim.inputs import Applied, applied_inputs
from jaxmb.sim import newton, solver
from jaxmb.sim.integrators import euler, rk4

NONFINITE_STATE = 1
"""`State.diverged` bit: the step produced a non-finite ``q``, ``qd``, activation or solver impulse (a time step
past the stability limit of the scene's stiffness or damping, or a non-finite state given to the step)."""

NONFINITE_CONTROL = 2
"""`State.diverged` bit: the controls or applied inputs (``qfrc``, ``xfrc``) given to the step were not finite (a
policy's NaN). They are not applied."""

LOOPS_OPEN = 4
"""`State.diverged` bit: a closed-loop world's loops did not close at the end of the step (its configuration left
the assemblies, as at a singularity)."""

_FAILURES = ((NONFINITE_STATE, "non-finite state"), (NONFINITE_CONTROL, "non-finite control"),
             (LOOPS_OPEN, "loops open"))


def failures(diverged) -> tuple:
    """The names of the reasons recorded in one world's ``diverged`` code (`State`), on the host: ``()`` for a
    running world."""
    code = int(diverged)
    return tuple(name for bit, name in _FAILURES if code & bit)


class ContactState(NamedTuple):
    """The contact slots of the last step (nc of them, at the configuration the step started from): ``dist`` (nc,)
    signed distance, ``pos`` (nc, 3) world point, ``frame`` (nc, 3, 3) rows ``[n, t1, t2]`` (``n`` from geom a to
    geom b), ``force`` (nc, 3) the force on geom b in that frame (geom a takes the opposite): normal, then
    tangential. `contact_forces` gives it in world axes."""

    dist: jnp.ndarray
    pos: jnp.ndarray
    frame: jnp.ndarray
    force: jnp.ndarray


class State(NamedTuple):
    """One world. ``q`` (nq,), ``qd`` (nv,) (for a closed-loop scene the independent velocities ``yd`` (ny,),
    `jaxmb.sim.closed_loops`), ``t`` () time, ``act`` (na,) the activations of the actuators with activation
    dynamics (`jaxmb.sim.actuators`), ``impulse`` (rows,) the constraint solver's warm
    start, its last impulses (the Newton solver's cones: ``-D w`` before the projection, `jaxmb.sim.newton`; the
    contact forces are ``contact.force``), ``contact`` the last step's `ContactState`, ``diverged`` () int32: zero
    while the world runs, else the bits of why the step that stopped it did (`NONFINITE_STATE`, `NONFINITE_CONTROL`,
    `LOOPS_OPEN`), and the world is frozen from then on."""

    q: jnp.ndarray
    qd: jnp.ndarray
    t: jnp.ndarray
    act: jnp.ndarray
    impulse: jnp.ndarray
    contact: ContactState
    diverged: jnp.ndarray


def init_state(scene, q=None, qd=None, act=None, t=0.0) -> State:
    """The state at ``q`` (default: the scene's initial configuration ``scene.q0``, MuJoCo's ``qpos0`` for a scene
    read from MJCF), ``qd`` (default: zero), activations ``act`` (na,) (default: zero, as MuJoCo's) and time ``t``,
    no impulses; the contact slots at ``q`` with zero forces. A closed-loop scene's ``q`` is projected onto its loop
    constraints (pass a consistent ``q`` to pick the assembly) and its ``qd`` is ``yd`` (ny,). A MuJoCo keyframe:
    `jaxmb.sim.MjcfScene.init_state`."""
    model, tree = scene.model, scene.tree
    dtype = tree.mass.dtype
    nv = model.ny if is_closed(model) else model.nv
    q = jnp.asarray(scene.q0 if q is None else q, dtype)
    qd = jnp.zeros(nv, dtype) if qd is None else jnp.asarray(qd, dtype)
    na = scene.actuators.na
    act = jnp.zeros(na, dtype) if act is None else jnp.asarray(act, dtype)
    if q.shape != (model.nq,) or qd.shape != (nv,) or act.shape != (na,):
        raise ValueError(f"init_state: q must have shape ({model.nq},), qd ({nv},) and act ({na},) for model "
                         f"{model.name!r}, got {q.shape}, {qd.shape} and {act.shape}")
    if is_closed(model):
        q, closed = project(model, q, iterations=20)
        if not isinstance(closed, jax.core.Tracer) and not bool(closed):
            raise ValueError(f"init_state: the loops of {model.name!r} do not close from this q; pass a "
                             "configuration near an assembly (jaxmb.loops.solve_configuration)")
    return State(q, qd, jnp.asarray(t, dtype), act, jnp.zeros(scene.rows, dtype), _contact_state(scene, q),
                 jnp.zeros((), jnp.int32))


@eager_jit
def _contact_state(scene, q) -> ContactState:
    """The contact slots at ``q`` with zero forces: one program where `init_state` is called outside ``jit``."""
    dtype, nc = scene.tree.mass.dtype, scene.nc
    if not nc:
        return ContactState(jnp.zeros(0, dtype), jnp.zeros((0, 3), dtype), jnp.zeros((0, 3, 3), dtype),
                            jnp.zeros((0, 3), dtype))
    con = contacts(scene, forward_kinematics(scene.tree, q))
    return ContactState(con.dist, con.pos, con.frame, jnp.zeros((nc, 3), dtype))


def _check_ctrl(scene, ctrl, dtype):
    if ctrl is None:
        return jnp.zeros(scene.nu, dtype)
    if jnp.shape(ctrl) != (scene.nu,):
        raise ValueError(f"ctrl must have shape ({scene.nu},), one value per actuator {list(scene.actuators.names)}"
                         f", got {jnp.shape(ctrl)}; batch with jax.vmap")
    return ctrl


@full_precision
def _advance(scene, state, ctrl, dt, applied):
    integrator = scene.options.integrator
    if integrator == "rk4":
        return rk4(scene, state.q, state.qd, ctrl, dt, state.impulse, applied)
    return euler(scene, state.q, state.qd, ctrl, dt, state.impulse, implicit=integrator != "euler",
                 position_gains=integrator == "implicit", coriolis=integrator == "implicit_coriolis",
                 applied=applied)


def step(scene, state: State, ctrl, dt, qfrc=None, xfrc=None) -> State:
    """``state`` advanced by ``dt`` under the controls ``ctrl`` (nu,) (None: zeros) with the scene's integrator,
    contact model and constraints (module docstring; `jaxmb.sim.integrators`, `jaxmb.sim.constraints`), and the
    applied inputs of `jaxmb.sim.inputs`: generalized forces ``qfrc`` (nv,) and body wrenches ``xfrc`` (nb, 6),
    ``[torque; force]`` in world axes at each body's centre of mass (None: none)."""
    _check_dt(dt)
    return _step(scene, state, ctrl, dt, qfrc, xfrc)


def _check_dt(dt):
    """A ``dt`` known here that is not a positive finite number is a ValueError (a traced one cannot be checked
    here)."""
    if isinstance(dt, jax.core.Tracer):
        return
    value = np.asarray(dt)
    if not (np.issubdtype(value.dtype, np.number) and np.all(np.isfinite(value)) and np.all(value > 0)):
        raise ValueError(f"dt must be a positive, finite time step, got {dt!r}")


@eager_jit
def _step(scene, state: State, ctrl, dt, qfrc=None, xfrc=None) -> State:
    return _advanced(scene, state, ctrl, dt, qfrc, xfrc)[0]


def _advanced(scene, state: State, ctrl, dt, qfrc, xfrc):
    """``(next state, Advance)``: `step`, and what its integrator returned."""
    ctrl = _check_ctrl(scene, ctrl, state.qd.dtype)
    applied = applied_inputs(scene.tree, qfrc, xfrc, state.qd.dtype)
    ctrl_finite = jnp.all(jnp.isfinite(ctrl))
    for x in applied:
        ctrl_finite = ctrl_finite if x is None else ctrl_finite & jnp.all(jnp.isfinite(x))
    ctrl = jnp.where(ctrl_finite, ctrl, 0.0)  # not applied, and kept out of the discarded step and its derivative
    applied = Applied(*(None if x is None else jnp.where(ctrl_finite, x, 0.0) for x in applied))
    out = _advance(scene, state, with_activation(scene.actuators, ctrl, state.act), dt, applied)
    act = next_activation(scene.actuators, ctrl, state.act, dt)
    con = out.constraints.contacts
    contact = state.contact if con is None else ContactState(con.dist, con.pos, con.frame, out.constraints.force)
    new = State(out.q, out.qd, state.t + dt, act, out.constraints.impulse, contact, state.diverged)
    finite = (jnp.all(jnp.isfinite(new.q)) & jnp.all(jnp.isfinite(new.qd)) & jnp.all(jnp.isfinite(new.act))
              & jnp.all(jnp.isfinite(new.impulse)))
    why = (jnp.where(finite, 0, NONFINITE_STATE) | jnp.where(ctrl_finite, 0, NONFINITE_CONTROL)
           | jnp.where(out.closed, 0, LOOPS_OPEN))
    diverged = jnp.where(state.diverged != 0, state.diverged, why).astype(jnp.int32)
    new = jax.tree.map(lambda old, x: jnp.where(diverged != 0, old, x), state, new)
    return new._replace(diverged=diverged), out


class StepRecord(NamedTuple):
    """What one step computed (`inspect_step`), for a user who debugs a scene:

    ``state``        the next `State` (as `step` returns it)
    ``kinematics``   `jaxmb.sim.stages.Kinematics` at the step's start: joint and body poses, the contact slots
    ``actuation``    `jaxmb.sim.stages.Actuation`: the applied joint forces ``tau`` (nv,) and body wrenches
    ``qdd_free``     (nv,) the accelerations without constraint forces (a free joint's in the axes of the start)
    ``rows``         the step's `jaxmb.sim.rows.Rows`: every row's Jacobian on the (spanning) tree's velocities,
                     reference velocity, bounds, friction and MuJoCo's weights; None where the step had none
    ``problem``      the solver's `jaxmb.sim.solver.Problem` or `jaxmb.sim.newton.Problem` built on them
    ``impulses``     the solver's impulses, in its rows (those of ``rows``, but for ``limit_rows=k`` the contacts,
                     the friction rows and the chosen limits)
    ``tau_constraint``  (nv,) the generalized constraint force ``J* p / dt``
    ``contact_force``   (nc, 3) contact forces in the contact frames
    ``iterations``   () the solver's sweeps or Newton steps (0 without rows)
    ``residual``     () the largest violation of the solver's optimality conditions at its impulses (zero at the
                     solution): the Gauss-Seidel solver's `jaxmb.sim.solver.residuals`, the Newton solver's
                     distance of the impulses from those their velocity asks for (`jaxmb.sim.newton.fixed_point`)
    """

    state: State
    kinematics: object
    actuation: object
    qdd_free: jnp.ndarray
    rows: object
    problem: object
    impulses: jnp.ndarray | None
    tau_constraint: jnp.ndarray
    contact_force: jnp.ndarray
    iterations: jnp.ndarray
    residual: jnp.ndarray


@eager_jit
def inspect_step(scene, state: State, ctrl, dt, qfrc=None, xfrc=None) -> StepRecord:
    """`step` from ``state`` and its `StepRecord`. The record is of the step's start (an RK4 step's first stage)."""
    new, out = _advanced(scene, state, ctrl, dt, qfrc, xfrc)
    cf, s = out.constraints, out.start
    dtype = state.qd.dtype
    iterations, residual = jnp.zeros((), jnp.int32), jnp.zeros((), dtype)
    options = scene.options
    if cf.problem is not None:
        if options.solver == "newton":
            iterations = newton.steps_taken(cf.problem, cf.warm, options.iterations, options.tolerance)
            residual = jnp.max(jnp.abs(cf.solution - newton.fixed_point(cf.problem, cf.solution)), initial=0.0)
        else:
            iterations = solver.sweeps(cf.problem, cf.warm, options.iterations, options.tolerance)[0]
            residual = jnp.max(jnp.stack([jnp.max(jnp.abs(r), initial=0.0)
                                          for r in solver.residuals(cf.problem, cf.solution).values()]))
    return StepRecord(new, s.kinematics, s.actuation, s.free.qdd, cf.rows, cf.problem, cf.solution, cf.tau, cf.force,
                      jnp.asarray(iterations, jnp.int32), residual)


def contact_forces(state: State):
    """The last step's contact forces (nc, 3) in world axes, on geom b of each slot (geom a takes the opposite)."""
    return world_forces(state.contact, state.contact.force)


def rollout(scene, state: State, dt, ctrls=None, policy=None, steps=None, checkpoint=True, qfrcs=None,
            xfrcs=None):
    """``(final state, states)``: ``steps`` steps from ``state``, ``states`` the state after each (a `State` whose
    leaves have a leading axis of ``steps``).

    Controls: ``ctrls`` (steps, nu) one row per step, or ``policy(state) -> ctrl`` (nu,) called at every step (a
    Python function: static here; close over its parameters, or call `rollout` inside your own ``jax.jit``), or
    neither (zero controls; then ``steps`` is needed). Applied inputs (`step`): ``qfrcs`` (steps, nv) and
    ``xfrcs`` (steps, nb, 6), one per step, or None. ``checkpoint``: recompute each step's insides in reverse mode
    (module docstring)."""
    _check_dt(dt)
    return _rollout(scene, state, dt, ctrls=ctrls, policy=policy, steps=steps, checkpoint=checkpoint, qfrcs=qfrcs,
                    xfrcs=xfrcs)


@eager_jit(static_argnames=("policy", "steps", "checkpoint"))
def _rollout(scene, state: State, dt, ctrls=None, policy=None, steps=None, checkpoint=True, qfrcs=None,
             xfrcs=None):
    if ctrls is not None and policy is not None:
        raise ValueError("rollout: pass ctrls or policy, not both")
    for name, xs in (("ctrls", ctrls), ("qfrcs", qfrcs), ("xfrcs", xfrcs)):
        if xs is not None:
            if steps is not None and steps != jnp.shape(xs)[0]:
                raise ValueError(f"rollout: steps={steps} but {name} has {jnp.shape(xs)[0]} rows")
            steps = jnp.shape(xs)[0]
    if steps is None:
        raise ValueError("rollout: give ctrls (steps, nu), or steps with a policy or with zero controls")

    def one(s, inputs):
        ctrl, qfrc, xfrc = inputs
        s = _step(scene, s, policy(s) if policy is not None else ctrl, dt, qfrc, xfrc)
        return s, s

    body = jax.checkpoint(one) if checkpoint else one
    return jax.lax.scan(body, state, (ctrls, qfrcs, xfrcs), length=steps)
