"""Actuators and passive joint forces: motors, position and velocity servos with force limits, joint damping and
joint springs.

Every actuator drives one velocity coordinate ``j`` with a gear ``g`` and produces the force of MuJoCo's affine
actuator on its length ``g q_j`` and velocity ``g qd_j``, taken back to the joint times ``g``,

    f = clip(gain u + bias_q q_j + bias_qd qd_j, -force_limit, force_limit),     u = clip(ctrl, ctrl_range)

or, with ``transmission="tendon"`` (MuJoCo's ``trntype`` tendon), drives a fixed tendon (`jaxmb.sim.tendons`): the
tendon's length ``L`` and velocity ``J qd`` in the place of ``q_j`` and ``qd_j``, its force back as ``J* f``,

with ``(gain, bias_q, bias_qd)`` (`affine`) from the numbers the user names, by the actuator's static ``kind``:

    motor        (g, 0, 0)                          f = g u
    position     (g kp, -g^2 kp, -g^2 kv)           f = g (kp (u - g q_j) - kv g qd_j)
    intvelocity  (g kp, -g^2 kp, -g^2 kv)           the same, ``u`` an activation that integrates the control
    velocity     (g kv, 0, -g^2 kv)                 f = g kv (u - g qd_j)

A motor's gear is the whole of its scale (MuJoCo's gain of a motor folded into it). An actuator with activation
dynamics (MuJoCo's ``dyntype``) takes its activation ``a`` in the place of ``u``, one entry of the state's ``act``
(na,), and the step moves it toward the clipped control (`next_activation`): ``integrator`` ``da/dt = u``
(`intvelocity`: a position servo whose target integrates the control, a velocity), ``filter`` ``da/dt = (u - a) /
time_constant`` by an Euler step, ``filterexact`` the same first-order lag integrated exactly (`position` with a
``time_constant``), each activation then clipped to its ``act_range``. The numbers ``gear``, ``kp``, ``kv``,
``force_limit``, the ranges and time constants are leaves of the scene, each stored once, so that a batch of scenes
with randomized gains is a ``vmap`` over one leaf and a derivative with respect to a servo's ``kp`` is the
derivative with respect to that leaf; which coordinate each actuator drives and its kind are static.

Passive joint forces (`passive_forces`, `JointTerms`): damping ``-damping qd``, springs ``-spring_stiffness (q -
spring_reference)`` on the coordinate of each hinge and slide joint (MuJoCo's ``stiffness`` and ``springref``), and
the smooth Coulomb friction ``-frictionloss tanh(qd / v_s)``; Coulomb friction is otherwise a constraint of the
contact solver (`jaxmb.sim.constraints`). The implicit integrators take the damping of the joints and of the
servos into their step (`implicit_damping`).
"""

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxmb.errors import ModelError
from jaxmb.model import pytree_dataclass
from jaxmb.sim.tendons import lengths, moments

KINDS = ("motor", "position", "velocity", "intvelocity")
"""The kinds of actuator (module docstring)."""


@dataclass(frozen=True)
class Actuator:
    """One actuator as written by the user (`motor`, `position`, `velocity`, `intvelocity`): plain numbers, checked
    when the scene is built (`actuators`). ``kp`` and ``kv`` are zero where the kind has none. ``joint`` names the
joint it drives, or with ``transmission="tendon"`` (`TRANSMISSIONS`) the tendon (`on_tendon`)."""

    joint: str
    kind: str
    gear: float
    kp: float
    kv: float
    force_limit: float
    ctrl_range: tuple
    coordinate: int = 0
    name: str | None = None
    dyn: str = "none"
    time_constant: float = 0.0
    act_range: tuple = (-np.inf, np.inf)
    transmission: str = "joint"


TRANSMISSIONS = ("joint", "tendon")
"""What an actuator drives: a joint's coordinate, or a fixed tendon's length (module docstring)."""

DYNAMICS = ("none", "integrator", "filter", "filterexact")
"""Activation dynamics of an actuator (MuJoCo's ``dyntype``; module docstring)."""


def motor(joint, gear=1.0, force_limit=None, ctrl_range=None, coordinate=0, name=None) -> Actuator:
    """A torque (or force) source on ``joint``'s velocity coordinate ``coordinate``: ``f = gear u``. ``name``
    (default ``"motor:<joint>"``) names it in the scene and in errors."""
    return Actuator(joint, "motor", gear, 0.0, 0.0, _limit(force_limit), _range(ctrl_range), coordinate, name)


def position(joint, kp, kv=0.0, force_limit=None, ctrl_range=None, gear=1.0, name=None,
             time_constant=None) -> Actuator:
    """A position servo on a one-coordinate joint: ``f = kp (u - q) - kv qd``, ``u`` the target position; with a
    ``gear`` ``g``, ``f = g (kp (u - g q) - kv g qd)`` (module docstring). With a ``time_constant`` the target is
    the control through a first-order lag (``filterexact``, MuJoCo's ``timeconst``)."""
    servo = Actuator(joint, "position", gear, kp, kv, _limit(force_limit), _range(ctrl_range), 0, name)
    if time_constant is None:
        return servo
    return dataclasses.replace(servo, dyn="filterexact", time_constant=time_constant)


def intvelocity(joint, kp, kv=0.0, act_range=None, force_limit=None, ctrl_range=None, gear=1.0,
                name=None) -> Actuator:
    """A position servo whose target ``a`` integrates the control, a velocity (``da/dt = u``, MuJoCo's
    ``intvelocity``): ``f = kp (a - q) - kv qd``, the target clipped to ``act_range`` (the joint's range, say)."""
    servo = position(joint, kp, kv, force_limit, ctrl_range, gear, name)
    return dataclasses.replace(servo, kind="intvelocity", dyn="integrator", act_range=_range(act_range))


def velocity(joint, kv, force_limit=None, ctrl_range=None, gear=1.0, name=None) -> Actuator:
    """A velocity servo on a one-coordinate joint: ``f = kv (u - qd)``, ``u`` the target velocity; with a ``gear``
    ``g``, ``f = g kv (u - g qd)``."""
    return Actuator(joint, "velocity", gear, 0.0, kv, _limit(force_limit), _range(ctrl_range), 0, name)


def on_tendon(actuator: Actuator, tendon=None) -> Actuator:
    """``actuator`` (`motor`, `position`, `velocity`, `intvelocity`) driving the fixed tendon named ``tendon``
    (None: the name it was given for its joint) instead of a joint: its length and velocity are the tendon's, its
    force goes back through the tendon's Jacobian row (module docstring). Named ``"<kind>:<tendon>"`` unless the
    actuator has a name."""
    name = actuator.joint if tendon is None else tendon
    return dataclasses.replace(actuator, joint=name, coordinate=0, transmission="tendon")


def _limit(force_limit):
    return np.inf if force_limit is None else force_limit


def _range(ctrl_range):
    return (-np.inf, np.inf) if ctrl_range is None else tuple(ctrl_range)


@pytree_dataclass
@dataclass(frozen=True)
class Actuators:
    """The scene's actuators (nu of them). Leaves (nu,): ``gear``, ``kp``, ``kv`` (zero where the kind has none),
    ``force_limit``, ``ctrl_lower``, ``ctrl_upper``, ``time_constant``, ``act_lower``, ``act_upper``. Static:
    ``kind`` (nu,) (`KINDS`), ``v_index`` (nu,) the velocity coordinate each drives, ``q_index`` (nu,) its position
    coordinate (-1 for a motor on a multi-coordinate joint), both -1 for an actuator on a tendon, ``names`` (nu,),
    ``dyn`` (nu,) activation dynamics (`DYNAMICS`), ``tendon`` (nu,) the tendon each drives (-1: a joint's
    coordinate; empty: none on a tendon)."""

    gear: jnp.ndarray
    kp: jnp.ndarray
    kv: jnp.ndarray
    force_limit: jnp.ndarray
    ctrl_lower: jnp.ndarray
    ctrl_upper: jnp.ndarray
    time_constant: jnp.ndarray
    act_lower: jnp.ndarray
    act_upper: jnp.ndarray
    kind: tuple = field(metadata=dict(static=True))
    v_index: tuple = field(metadata=dict(static=True))
    q_index: tuple = field(metadata=dict(static=True))
    names: tuple = field(metadata=dict(static=True))
    dyn: tuple = field(metadata=dict(static=True))
    tendon: tuple = field(default=(), metadata=dict(static=True))

    @property
    def nu(self) -> int:
        return len(self.v_index)

    @property
    def stateful(self) -> np.ndarray:
        """The actuators with activation dynamics (na,), in the order of the state's ``act``."""
        return np.flatnonzero(np.asarray(self.dyn) != "none")

    @property
    def na(self) -> int:
        return len(self.stateful)

    def replace(self, **changes) -> "Actuators":
        return dataclasses.replace(self, **changes)


def actuators(model, specs, tendons=None) -> Actuators:
    """Check the actuator ``specs`` against ``model`` (and the scene's `jaxmb.sim.tendons.Tendons` ``tendons``, None
    without) and gather them: a `ModelError` names the actuator whose joint or tendon is missing, whose coordinate
    does not exist, whose servo is on a joint of several coordinates, whose kind or transmission is unknown, or
    whose gear or gains, limits or range are not finite, non-negative or ordered, or whose activation dynamics is
    unknown or has no positive time constant."""
    rows, kind, v_index, q_index, names, dyn, tendon = [], [], [], [], [], [], []
    for i, a in enumerate(specs):
        where = f"actuator {i if a.name is None else repr(a.name)} ({a.kind} on {a.transmission} {a.joint!r})"
        if a.kind not in KINDS:
            raise ModelError(f"{where}: unknown kind {a.kind!r}; choose one of {KINDS}")
        if a.transmission not in TRANSMISSIONS:
            raise ModelError(f"{where}: unknown transmission {a.transmission!r}; choose one of {TRANSMISSIONS}")
        if a.transmission == "tendon":
            if tendons is None:
                raise ModelError(f"{where}: the scene has no tendons")
            try:
                tendon.append(tendons.index(a.joint))
            except KeyError as e:
                raise ModelError(f"{where}: {e.args[0]}") from None
            q_slice = v_slice = slice(-1, 0)
        else:
            tendon.append(-1)
            try:
                q_slice, v_slice = model.joint_coordinates(a.joint)
            except KeyError as e:
                raise ModelError(f"{where}: {e.args[0]}") from None
        n = v_slice.stop - v_slice.start
        if a.kind != "motor" and (n != 1 or q_slice.stop - q_slice.start != 1):
            raise ModelError(f"{where}: a {a.kind} servo needs a joint of one coordinate; this one has {n} "
                             "(drive its coordinates with motors)")
        if not 0 <= a.coordinate < n:
            raise ModelError(f"{where}: coordinate {a.coordinate} out of range for a joint of {n} coordinates")
        numbers = np.array([a.gear, a.kp, a.kv], float)
        if not np.all(np.isfinite(numbers)):
            raise ModelError(f"{where}: gear, kp and kv must be finite, got {numbers.tolist()}")
        if a.kp < 0 or a.kv < 0:
            raise ModelError(f"{where}: servo gains kp, kv must be non-negative, got {a.kp} and {a.kv}")
        if a.kind == "motor" and (a.kp != 0 or a.kv != 0):
            raise ModelError(f"{where}: a motor has no kp or kv (its scale is its gear), got {a.kp} and {a.kv}")
        lo, hi = a.ctrl_range
        if not (a.force_limit > 0) or np.isnan(lo) or np.isnan(hi) or not lo < hi:
            raise ModelError(f"{where}: force_limit must be positive and ctrl_range increasing, got "
                             f"{a.force_limit} and {a.ctrl_range}")
        if a.dyn not in DYNAMICS:
            raise ModelError(f"{where}: unknown activation dynamics {a.dyn!r}; choose one of {DYNAMICS}")
        if a.dyn in ("filter", "filterexact") and not (np.isfinite(a.time_constant) and a.time_constant > 0):
            raise ModelError(f"{where}: a {a.dyn} needs a positive, finite time_constant, got {a.time_constant!r}")
        a_lo, a_hi = a.act_range
        if np.isnan(a_lo) or np.isnan(a_hi) or not a_lo < a_hi:
            raise ModelError(f"{where}: act_range must be increasing, got {a.act_range}")
        rows.append([a.gear, a.kp, a.kv, a.force_limit, lo, hi, a.time_constant, a_lo, a_hi])
        kind.append(a.kind)
        dyn.append(a.dyn)
        v_index.append(v_slice.start + a.coordinate)
        q_index.append(q_slice.start if a.kind != "motor" or n == 1 else -1)
        names.append(a.name if a.name is not None else f"{a.kind}:{a.joint}" + (f"[{a.coordinate}]" if n > 1 else ""))
    values = np.asarray(rows, float).reshape(-1, 9).T
    leaves = [jnp.asarray(v, model.mass.dtype) for v in values]
    return Actuators(*leaves, kind=tuple(kind), v_index=tuple(v_index), q_index=tuple(q_index), names=tuple(names),
                     dyn=tuple(dyn), tendon=tuple(tendon) if any(t >= 0 for t in tendon) else ())


class Affine(NamedTuple):
    """MuJoCo's affine form of the actuators (nu,) each: ``gain``, ``bias_q``, ``bias_qd`` (module docstring)."""

    gain: jnp.ndarray
    bias_q: jnp.ndarray
    bias_qd: jnp.ndarray


def affine(act: Actuators) -> Affine:
    """The `Affine` form of ``act`` from its leaves ``gear``, ``kp``, ``kv`` by each actuator's kind (module
    docstring)."""
    kind = np.asarray(act.kind)
    servo = np.isin(kind, ("position", "intvelocity"))
    g = act.gear
    scale = jnp.where(kind == "motor", 1.0, jnp.where(kind == "velocity", act.kv, act.kp))
    return Affine(g * scale, jnp.where(servo, -g * g * act.kp, 0.0), jnp.where(kind == "motor", 0.0, -g * g * act.kv))


def with_activation(act: Actuators, ctrl, activation):
    """The inputs (nu,) of the force law: ``ctrl`` (nu,), with the activations ``activation`` (na,) in the place
    of the controls of the actuators that have activation dynamics (`actuator_forces` does not clip those)."""
    if not act.na:
        return ctrl
    return ctrl.at[act.stateful].set(activation)


def next_activation(act: Actuators, ctrl, activation, dt):
    """The activations (na,) after a step of ``dt`` from ``activation`` (na,) under the controls ``ctrl`` (nu,)
    (module docstring)."""
    if not act.na:
        return activation
    i = act.stateful
    u = jnp.clip(ctrl[i], act.ctrl_lower[i], act.ctrl_upper[i])
    dyn, tau = np.asarray(act.dyn)[i], act.time_constant[i]
    lag = jnp.where(dyn == "filterexact", -jnp.expm1(-dt / jnp.where(dyn == "filterexact", tau, 1.0)),
                    dt / jnp.where(dyn == "filter", tau, 1.0))
    a = jnp.where(dyn == "integrator", activation + dt * u, activation + lag * (u - activation))
    return jnp.clip(a, act.act_lower[i], act.act_upper[i])


def actuator_forces(act: Actuators, q, qd, ctrl, tendons=None, geometry=None):
    """Joint forces (nv,) of the actuators at ``(q, qd)`` (one state) for the controls ``ctrl`` (nu,), which for
    an actuator with activation dynamics is its activation (`with_activation`), not clipped; ``tendons`` the
    scene's `jaxmb.sim.tendons.Tendons`, which actuators on tendons drive, ``geometry`` their lengths and Jacobian
    rows at ``q`` (`jaxmb.sim.tendons.tendon_geometry`; None: the fixed tendons', from ``q``)."""
    nv = qd.shape[0]
    if not act.nu:
        return jnp.zeros(nv, qd.dtype)
    v, qi = np.asarray(act.v_index), np.asarray(act.q_index)
    u = jnp.clip(ctrl, act.ctrl_lower, act.ctrl_upper)
    if act.na:
        u = u.at[act.stateful].set(ctrl[act.stateful])
    q_j = jnp.where(qi >= 0, q[np.maximum(qi, 0)], 0.0)
    qd_j = qd[np.maximum(v, 0)]
    if act.tendon:  # the tendons' lengths and velocities in the place of coordinates
        ti = np.asarray(act.tendon)
        L, J = (lengths(tendons, q), moments(tendons)) if geometry is None else geometry
        J = J[np.maximum(ti, 0)]
        q_j = jnp.where(ti >= 0, L[np.maximum(ti, 0)], q_j)
        qd_j = jnp.where(ti >= 0, J @ qd, qd_j)
    gain, bias_q, bias_qd = affine(act)
    f = jnp.clip(gain * u + bias_q * q_j + bias_qd * qd_j, -act.force_limit, act.force_limit)
    if not act.tendon:
        return jnp.zeros(nv, qd.dtype).at[v].add(f)
    joint = np.flatnonzero(ti < 0)
    on_tendon = np.flatnonzero(ti >= 0)
    return jnp.zeros(nv, qd.dtype).at[v[joint]].add(f[joint]) + J[on_tendon].T @ f[on_tendon]


def implicit_damping(act: Actuators, joints: "JointTerms", dt, position_gains=True):
    """The diagonal damping ``D`` (nv,) that an implicit-in-velocity step takes implicitly: the joints' damping
    and ``-d f / d qd_j`` of the unsaturated actuators, and with ``position_gains`` also ``-dt d f / d q_j`` of the
    actuators and springs (a position servo's ``g^2 kp`` and a spring's stiffness act through ``q + dt qd``);
    without ``position_gains`` the velocity terms alone, as MuJoCo's ``implicitfast``, which takes springs
    explicitly."""
    D = joints.damping + dt * joints.spring_stiffness if position_gains else joints.damping
    if not act.nu:
        return D
    _, bias_q, bias_qd = affine(act)
    d = -bias_qd - dt * bias_q if position_gains else -bias_qd
    joint = np.flatnonzero(np.asarray(act.v_index) >= 0)  # an actuator on a tendon: `jaxmb.sim.tendons`
    return D.at[np.asarray(act.v_index)[joint]].add(d[joint])


@pytree_dataclass
@dataclass(frozen=True)
class JointTerms:
    """Passive joint terms per velocity coordinate (nv,), leaves: ``damping`` (``f = -damping qd``),
    ``frictionloss`` (the largest Coulomb friction force), ``spring_stiffness`` and ``spring_reference`` (``f =
    -spring_stiffness (q - spring_reference)`` on the coordinate of a hinge or slide joint; zero stiffness on the
    coordinates of other joints), ``friction_velocity`` (scalar: the velocity scale of the smooth friction
    option). Static: ``q_index`` (nv,) the position coordinate of each velocity coordinate of a one-coordinate
    joint, -1 on other joints."""

    damping: jnp.ndarray
    frictionloss: jnp.ndarray
    spring_stiffness: jnp.ndarray
    spring_reference: jnp.ndarray
    friction_velocity: jnp.ndarray
    q_index: tuple = field(metadata=dict(static=True))

    def replace(self, **changes) -> "JointTerms":
        return dataclasses.replace(self, **changes)


def joint_terms(model, damping=None, frictionloss=None, spring_stiffness=None, spring_reference=None,
                friction_velocity=1e-2) -> JointTerms:
    """`JointTerms`, each from a scalar (every coordinate), a sequence of nv, or a dict ``{joint name: value}``; a
    `ModelError` names a negative, non-finite or misshapen value (a spring's reference may be negative), or a
    spring on a joint of several coordinates."""
    topo, q_index, single = model.topology, np.full(model.nv, -1), np.zeros(model.nv, bool)
    for k in range(model.nb):
        if topo.nq_body[k] == 1 and topo.nv_body[k] == 1:
            q_index[int(topo.v_offset[k])] = int(topo.q_offset[k])
            single[int(topo.v_offset[k])] = True
    k = _per_coordinate(model, spring_stiffness, "spring_stiffness")
    multi = _joints_of(model, np.flatnonzero((np.asarray(k) != 0) & ~single))
    if multi:
        raise ModelError(f"spring_stiffness: springs act on hinge and slide joints; joints {multi} have several "
                         "coordinates (give them zero stiffness)")
    return JointTerms(_per_coordinate(model, damping, "damping"), _per_coordinate(model, frictionloss, "frictionloss"),
                      k, _per_coordinate(model, spring_reference, "spring_reference", signed=True),
                      jnp.asarray(friction_velocity, model.mass.dtype), tuple(int(i) for i in q_index))


def _per_coordinate(model, value, what, signed=False):
    out = np.zeros(model.nv)
    if isinstance(value, dict):
        for name, x in value.items():
            try:
                out[model.joint_coordinates(name)[1]] = x
            except KeyError as e:
                raise ModelError(f"{what}: {e.args[0]}") from None
    elif value is not None:
        x = np.asarray(value, float)
        if x.ndim and x.shape != (model.nv,):
            raise ModelError(f"{what}: expected a scalar, a dict by joint name or {model.nv} values, got shape "
                             f"{x.shape}")
        out[:] = x
    bad = ~np.isfinite(out) | (not signed) & (out < 0)
    if bad.any():
        raise ModelError(f"{what} must be finite{'' if signed else ' and non-negative'}, got "
                         f"{out[bad].tolist()} on joints {_joints_of(model, np.flatnonzero(bad))}")
    return jnp.asarray(out, model.mass.dtype)


def _joints_of(model, coordinates):
    """The names of the joints that own the velocity ``coordinates``, each once."""
    topo, out = model.topology, []
    for v in coordinates:
        k = next(b for b in range(model.nb) if topo.v_offset[b] <= v < topo.v_offset[b] + topo.nv_body[b])
        if model.joint_names[k] not in out:
            out.append(model.joint_names[k])
    return out


def passive_forces(joints: JointTerms, q, qd, smooth_friction):
    """Damping and springs, and the smooth Coulomb friction when ``smooth_friction``, (nv,) at ``(q, qd)``."""
    qi = np.asarray(joints.q_index)
    q_j = jnp.where(qi >= 0, q[np.maximum(qi, 0)], 0.0)
    f = -joints.damping * qd - joints.spring_stiffness * (q_j - joints.spring_reference)
    if smooth_friction:
        f = f - joints.frictionloss * jnp.tanh(qd / joints.friction_velocity)
    return f
