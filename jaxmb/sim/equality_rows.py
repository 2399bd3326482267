"""Equality constraints as bilateral constraint rows, MuJoCo's (``mj_instantiateEquality``): each equality is a few
rows with a position error ``r`` and its Jacobian ``J`` on the tree's velocities, softened by the equality's
``solref`` and ``solimp``.

Kinds, with frame ``a`` fixed to body ``a`` and frame ``b`` to body ``b`` (either may be the world), ``p_a``, ``p_b``
their origins and ``R_a``, ``R_b`` their axes in the world:

    connect   3 rows   r = p_a - p_b                       J = J_v(p_a) - J_v(p_b)
    weld      6 rows   the connect's three, then           r = s vec(q_e),  q_e the quaternion of R_b* R_a (w >= 0)
                                                            J = s/2 (w I - [vec q_e]x) R_b* (J_w(a) - J_w(b))
    joint     1 row    r = x_1 - poly(x_2)                 J = J_1 - poly'(x_2) J_2
    tendon    1 row    the same with tendon lengths

``J_v(p)`` is the world-axes velocity of the point ``p`` on its body, ``J_w`` the body's world angular velocity,
``s`` the weld's ``torquescale``. A weld's rotation rows are the vector part of the error quaternion, whose rate is
``1/2 (w I - [v]x) R_b* (omega_a - omega_b)``; MuJoCo's quaternion may carry the other sign, which flips a row with
its error and its impulse and leaves the motion as it is. A scalar equality couples ``x_1 = q_1`` (hinge or slide
coordinates, zero at MuJoCo's ``qpos0``) or tendon lengths less their ``length0``, by ``poly(x) = c_0 + c_1 x + ... +
c_4 x^4``; without a second object it fixes ``x_1 = c_0``. In MuJoCo's frames: ``connect`` has frame ``a`` at
``anchor`` on ``body1`` and ``b`` at the same point at ``qpos0`` on ``body2``; ``weld`` frame ``b`` at body2's
anchor with body2's axes and ``a`` at the matching point of body1 turned by ``relpose``; on sites, the sites.

Rows (`equality_rows`): after every other row (`jaxmb.sim.rows`), in the equalities' order, each equality's rows in
the order above; bilateral (``lo = -inf``, ``hi = inf``), on several coordinates (``coordinate`` -1: the Newton
solver takes the dense metric, the Gauss-Seidel solver the rows' compliance by the factored solve). MuJoCo's soft
rows (`mujoco_rows`, `jaxmb.sim.impedance`): the impedance ``d`` of the norm of the equality's errors ``|r|``
(margin 0), ``K``, ``B`` from its ``solref``, the reference acceleration ``a_ref = -B u - K d r - Jdot v`` of the
error's second derivative ``J a + Jdot v`` (MuJoCo subtracts the rate of a connect's or weld's Jacobian, `drift`;
a scalar row's is taken as zero), and ``R = (1 - d) / d A_ii`` with each row's approximate inverse
inertia (MuJoCo's: ``body_invweight0`` of the two bodies, translational on the position rows and rotational on a
weld's rotation rows, ``dof_invweight0`` or ``tendon_invweight0`` of the two objects), every row active. jaxmb's rule
(`equality_targets`) asks for ``v_star = -r / max(timeconst, dt)``: the error decays at ``1/timeconst``.

The placements, torque scales, polynomials and MuJoCo's numbers are leaves (`Equalities`); which bodies, coordinates
and kinds are static.
"""

import dataclasses
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.configuration import configuration_rate
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.errors import ModelError
from jaxmb.kinematics import forward_kinematics, jacobian_rows
from jaxmb.model import pytree_dataclass
from jaxmb.sim.closed_loops import is_closed
from jaxmb.sim.impedance import _MINVAL, SOLIMP, SOLREF, impedance, stiffness_damping
from jaxmb.sim.joint_rows import JointRows, concat
from jaxmb.spatial import Transform

KINDS = ("connect", "weld", "joint", "tendon")
_ROWS = {"connect": 3, "weld": 6, "joint": 1, "tendon": 1}


@dataclass(frozen=True)
class EqualitySpec:
    """One equality constraint as written by the user (`connect`, `weld`, `joint_equality`, `tendon_equality`):
    plain numbers, checked by `equalities`."""

    name: str
    kind: str
    bodies: tuple = (None, None)
    placements: tuple = ()
    torquescale: float = 1.0
    objects: tuple = ()
    polycoef: tuple = (0.0, 1.0, 0.0, 0.0, 0.0)


def _placement(x):
    if x is None:
        return np.eye(3), np.zeros(3)
    if not (isinstance(x, tuple) and len(x) == 2 and np.shape(x[0]) == (3, 3)):  # a point
        return np.eye(3), np.asarray(x, float)
    R, p = x
    return np.asarray(R, float), np.asarray(p, float)


def connect(name, body_a, body_b, anchor_a, anchor_b) -> EqualitySpec:
    """A ``connect`` equality ``name`` (module docstring): the point ``anchor_a`` (3,) of body ``body_a`` (a body
    name, None: the world) on the point ``anchor_b`` (3,) of ``body_b``, in their bodies' frames."""
    return EqualitySpec(name, "connect", (body_a, body_b), (_placement(anchor_a), _placement(anchor_b)))


def weld(name, body_a, body_b, placement_a, placement_b, torquescale=1.0) -> EqualitySpec:
    """A ``weld`` equality ``name``: frame ``placement_a`` ``(R (3, 3), p (3,))`` on ``body_a`` held on
    ``placement_b`` on ``body_b`` (None: the world), the rotation rows scaled by ``torquescale``."""
    return EqualitySpec(name, "weld", (body_a, body_b), (_placement(placement_a), _placement(placement_b)),
                        float(torquescale))


def joint_equality(name, joint1, joint2=None, polycoef=(0.0, 1.0, 0.0, 0.0, 0.0)) -> EqualitySpec:
    """A ``joint`` equality ``name``: ``q_1 = poly(q_2)`` of two hinges or slides (coefficients ``polycoef`` (5,)
    from the constant up), or ``q_1 = polycoef[0]`` without ``joint2``."""
    return EqualitySpec(name, "joint", objects=(joint1, joint2), polycoef=tuple(float(c) for c in polycoef))


def tendon_equality(name, tendon1, tendon2=None, polycoef=(0.0, 1.0, 0.0, 0.0, 0.0)) -> EqualitySpec:
    """A ``tendon`` equality ``name``: ``L_1 - length0_1 = poly(L_2 - length0_2)`` of two fixed tendons
    (`jaxmb.sim.tendons`), or ``L_1 - length0_1 = polycoef[0]`` without ``tendon2``."""
    return EqualitySpec(name, "tendon", objects=(tendon1, tendon2), polycoef=tuple(float(c) for c in polycoef))


@pytree_dataclass
@dataclass(frozen=True)
class EqualityImpedance:
    """MuJoCo's numbers of the equality rows (leaves): ``solref`` (ne, 2), ``solimp`` (ne, 5) per equality,
    ``weight`` (rows,) each row's approximate inverse inertia."""

    solref: jnp.ndarray
    solimp: jnp.ndarray
    weight: jnp.ndarray

    def replace(self, **changes) -> "EqualityImpedance":
        return dataclasses.replace(self, **changes)


@pytree_dataclass
@dataclass(frozen=True)
class Equalities:
    """The scene's equality constraints (ne of them; module docstring). Leaves, per anchored equality (``connect``
    and ``weld``, na): ``R_a``, ``R_b`` (na, 3, 3), ``p_a``, ``p_b`` (na, 3) the frames on their bodies,
    ``torquescale`` (na,) (unused by a connect); per scalar equality (ns): ``polycoef`` (ns, 5); per term of a
    scalar's objects (nw): ``coef`` (nw,) (a joint's 1, a tendon's wrap coefficients: an object's value ``x = sum
    coef q`` is zero at ``q = 0``, MuJoCo's ``qpos0``); ``impedance`` MuJoCo's numbers or None (jaxmb's rule).
    Static: ``names``, ``kinds`` (ne,), ``body_a``, ``body_b`` (na,) the jaxmb bodies (-1: the world),
    ``welds`` the anchored equalities that are welds, ``term_object`` (nw,) the object of each term (``2 s + k``
    for object ``k`` of scalar ``s``), ``q_index``, ``v_index`` (nw,), ``paired`` (ns,) whether a scalar has a second
    object, ``nv``."""

    R_a: jnp.ndarray
    p_a: jnp.ndarray
    R_b: jnp.ndarray
    p_b: jnp.ndarray
    torquescale: jnp.ndarray
    polycoef: jnp.ndarray
    coef: jnp.ndarray
    impedance: EqualityImpedance | None
    names: tuple = field(metadata=dict(static=True))
    kinds: tuple = field(metadata=dict(static=True))
    body_a: tuple = field(metadata=dict(static=True))
    body_b: tuple = field(metadata=dict(static=True))
    welds: tuple = field(metadata=dict(static=True))
    term_object: tuple = field(metadata=dict(static=True))
    q_index: tuple = field(metadata=dict(static=True))
    v_index: tuple = field(metadata=dict(static=True))
    paired: tuple = field(metadata=dict(static=True))
    nv: int = field(metadata=dict(static=True))

    @property
    def ne(self) -> int:
        return len(self.names)

    @property
    def rows(self) -> int:
        """The constraint rows of the equalities: 3 per connect, 6 per weld, 1 per joint or tendon equality."""
        return sum(_ROWS[k] for k in self.kinds)

    def replace(self, **changes) -> "Equalities":
        return dataclasses.replace(self, **changes)


def equalities(model, specs, tendons=None) -> Equalities:
    """Check the `EqualitySpec` ``specs`` against ``model`` (a tree) and its fixed ``tendons``
    (`jaxmb.sim.tendons.Tendons` or None) and gather them: a `ModelError` names the equality whose body, joint or
    tendon is missing, whose joint is not a hinge or slide, whose two ends are on one body, or whose numbers are not
    finite."""
    anchored, scalars, names, kinds = [], [], [], []
    coef, term_object, q_index, v_index, paired = [], [], [], [], []
    for s in specs:
        where = f"equality {s.name!r}"
        if s.name in names:
            raise ModelError(f"{where}: two equalities of one name")
        if s.kind not in KINDS:
            raise ModelError(f"{where}: unknown kind {s.kind!r}; the kinds: {KINDS}")
        if s.kind in ("connect", "weld"):
            bodies = []
            for b in s.bodies:
                if b is not None and b not in model.body_names:
                    raise ModelError(f"{where}: model {model.name!r} has no body {b!r}")
                bodies.append(-1 if b is None else model.body_index(b))
            if bodies[0] == bodies[1]:
                raise ModelError(f"{where}: both ends are on one body ({s.bodies[0]!r}); it constrains nothing")
            numbers = np.concatenate([np.ravel(x) for pl in s.placements for x in pl] + [[s.torquescale]])
            if not np.all(np.isfinite(numbers)):
                raise ModelError(f"{where}: the placements and torquescale must be finite")
            anchored.append((bodies, s.placements, s.torquescale, s.kind == "weld"))
        else:
            first, second = s.objects
            if first is None:
                raise ModelError(f"{where}: a {s.kind} equality needs its first {s.kind}")
            for k, obj in enumerate(s.objects):
                if obj is None:
                    continue
                for c, qi, vi in _terms(model, tendons, s.kind, obj, where):
                    coef.append(c)
                    term_object.append(2 * len(scalars) + k)
                    q_index.append(qi)
                    v_index.append(vi)
            if len(s.polycoef) != 5 or not np.all(np.isfinite(s.polycoef)):
                raise ModelError(f"{where}: polycoef must be five finite numbers, got {s.polycoef}")
            scalars.append(s.polycoef)
            paired.append(second is not None)
        names.append(s.name)
        kinds.append(s.kind)
    dtype = model.mass.dtype
    na = len(anchored)
    R_a = np.asarray([a[1][0][0] for a in anchored], float).reshape(na, 3, 3)
    p_a = np.asarray([a[1][0][1] for a in anchored], float).reshape(na, 3)
    R_b = np.asarray([a[1][1][0] for a in anchored], float).reshape(na, 3, 3)
    p_b = np.asarray([a[1][1][1] for a in anchored], float).reshape(na, 3)
    leaves = (R_a, p_a, R_b, p_b, np.asarray([a[2] for a in anchored], float),
              np.asarray(scalars, float).reshape(-1, 5), np.asarray(coef, float))
    return Equalities(*(jnp.asarray(x, dtype) for x in leaves), None, tuple(names), tuple(kinds),
                      tuple(a[0][0] for a in anchored), tuple(a[0][1] for a in anchored),
                      tuple(k for k, a in enumerate(anchored) if a[3]), tuple(term_object), tuple(q_index),
                      tuple(v_index), tuple(paired), int(model.nv))


def _terms(model, tendons, kind, obj, where):
    """``[(coef, q index, v index)]`` of a scalar equality's joint or fixed tendon ``obj``."""
    if kind == "joint":
        try:
            q_slice, v_slice = model.joint_coordinates(obj)
        except KeyError as e:
            raise ModelError(f"{where}: {e.args[0]}") from None
        if q_slice.stop - q_slice.start != 1 or v_slice.stop - v_slice.start != 1:
            raise ModelError(f"{where}: joint {obj!r} is not a hinge or slide (a joint equality couples "
                             "one-coordinate joints)")
        return [(1.0, q_slice.start, v_slice.start)]
    if tendons is None or obj not in tendons.names:
        raise ModelError(f"{where}: the scene has no fixed tendon {obj!r}")
    t = tendons.index(obj)
    if t in tendons.site_tendon:
        raise ModelError(f"{where}: tendon {obj!r} is a spatial tendon; tendon equalities couple fixed tendons")
    return [(float(c), qi, vi) for c, tt, qi, vi in zip(np.asarray(tendons.coef), tendons.tendon, tendons.q_index,
                                                         tendons.v_index) if tt == t]


def _order(eq: Equalities):
    """``(index, group)`` (rows,) static: where each row sits in the blocks ``[anchored translations (3 na), weld
    rotations (3 nw), scalars (ns)]`` in the equalities' order, and the equality of each row."""
    na, nw = len(eq.body_a), len(eq.welds)
    index, group, a, s = [], [], 0, 0
    for e, kind in enumerate(eq.kinds):
        if kind in ("connect", "weld"):
            index += [3 * a + i for i in range(3)]
            if kind == "weld":
                w = eq.welds.index(a)
                index += [3 * na + 3 * w + i for i in range(3)]
            a += 1
        else:
            index.append(3 * na + 3 * nw + s)
            s += 1
        group += [e] * _ROWS[kind]
    return np.asarray(index, int), np.asarray(group, int)


def _world_frames(eq: Equalities, T: Transform, bodies, R, p):
    """World axes (n, 3, 3) and origins (n, 3) of frames ``(R, p)`` (n, ...) on ``bodies`` (static; -1: the
    world), from the body poses ``T``."""
    b = np.asarray(bodies, int)
    moving = jnp.asarray(b >= 0)
    R_body = jnp.where(moving[:, None, None], T.R[np.maximum(b, 0)], jnp.eye(3, dtype=R.dtype))
    p_body = jnp.where(moving[:, None], T.p[np.maximum(b, 0)], 0.0)
    return R_body @ R, p_body + jnp.einsum("nij,nj->ni", R_body, p)


def _point_jacobians(model, T, bodies, points):
    """``(J_w, J_v)`` (n, 3, nv): the world angular velocity of ``bodies`` (static; -1: the world, zero) and the
    world velocity of the world ``points`` (n, 3) on them."""
    b = np.asarray(bodies, int)
    frames = Transform(jnp.broadcast_to(jnp.eye(3, dtype=points.dtype), (len(b), 3, 3)), points)
    rows = jacobian_rows(model, T, frames, np.maximum(b, 0))  # (n, nv, 6) [w; v], world axes
    rows = jnp.where(jnp.asarray(b >= 0)[:, None, None], rows, 0.0)
    return jnp.swapaxes(rows[..., :3], 1, 2), jnp.swapaxes(rows[..., 3:], 1, 2)


def _skew(v):
    z = jnp.zeros_like(v[..., 0])
    return jnp.stack([jnp.stack([z, -v[..., 2], v[..., 1]], -1), jnp.stack([v[..., 2], z, -v[..., 0]], -1),
                      jnp.stack([-v[..., 1], v[..., 0], z], -1)], -2)


def errors(eq: Equalities, model, q, T=None):
    """``(r, J)``: the equalities' position errors (rows,) and their Jacobian (rows, nv) at ``q`` of ``model`` (a
    tree) with its body poses ``T`` (None: computed), in the rows' order (module docstring)."""
    dtype = q.dtype
    T = forward_kinematics(model, q) if T is None else T
    blocks_r, blocks_J = [], []
    na = len(eq.body_a)
    if na:
        R_a, p_a = _world_frames(eq, T, eq.body_a, eq.R_a.astype(dtype), eq.p_a.astype(dtype))
        R_b, p_b = _world_frames(eq, T, eq.body_b, eq.R_b.astype(dtype), eq.p_b.astype(dtype))
        Jw_a, Jv_a = _point_jacobians(model, T, eq.body_a, p_a)
        Jw_b, Jv_b = _point_jacobians(model, T, eq.body_b, p_b)
        blocks_r.append((p_a - p_b).reshape(-1))
        blocks_J.append((Jv_a - Jv_b).reshape(3 * na, -1))
        if eq.welds:
            w_ = np.asarray(eq.welds, int)
            E = jnp.swapaxes(R_b[w_], -1, -2) @ R_a[w_]  # R_b* R_a
            w = 0.5 * jnp.sqrt(jnp.maximum(1.0 + jnp.trace(E, axis1=-2, axis2=-1), _MINVAL))
            v = jnp.stack([E[:, 2, 1] - E[:, 1, 2], E[:, 0, 2] - E[:, 2, 0], E[:, 1, 0] - E[:, 0, 1]], -1) / (
                4.0 * w[:, None])
            s = eq.torquescale[w_].astype(dtype)
            rate = 0.5 * (w[:, None, None] * jnp.eye(3, dtype=dtype) - _skew(v)) @ jnp.swapaxes(R_b[w_], -1, -2)
            blocks_r.append((s[:, None] * v).reshape(-1))
            blocks_J.append((s[:, None, None] * rate @ (Jw_a[w_] - Jw_b[w_])).reshape(3 * len(w_), -1))
    ns = eq.polycoef.shape[0]
    if ns:
        obj = np.asarray(eq.term_object, int)
        coef = eq.coef.astype(dtype)
        x = jnp.zeros(2 * ns, dtype).at[obj].add(coef * q[np.asarray(eq.q_index, int)]).reshape(ns, 2)
        Jx = jnp.zeros((2 * ns, eq.nv), dtype).at[obj, np.asarray(eq.v_index, int)].add(coef).reshape(ns, 2, -1)
        c = eq.polycoef.astype(dtype)
        paired = jnp.asarray(eq.paired)
        x2 = x[:, 1]
        poly = c[:, 0] + jnp.where(paired, x2 * (c[:, 1] + x2 * (c[:, 2] + x2 * (c[:, 3] + x2 * c[:, 4]))), 0.0)
        slope = jnp.where(paired, c[:, 1] + x2 * (2 * c[:, 2] + x2 * (3 * c[:, 3] + x2 * 4 * c[:, 4])), 0.0)
        blocks_r.append(x[:, 0] - poly)
        blocks_J.append(Jx[:, 0] - slope[:, None] * Jx[:, 1])
    index, _ = _order(eq)
    return jnp.concatenate(blocks_r)[index], jnp.concatenate(blocks_J)[index]


def equality_rows(scene, q, dt, T) -> tuple:
    """``(rows, r)``: the `jaxmb.sim.joint_rows.JointRows` of the scene's equalities at ``q`` with the body poses
    ``T`` (jaxmb's targets, `equality_targets`; bilateral; ``coordinate`` -1) and their errors ``r`` (rows,)."""
    eq, dtype = scene.equalities, q.dtype
    r, J = errors(eq, scene.tree, q, T)
    n = r.shape[0]
    return JointRows(J, equality_targets(r, dt, scene.contact.timeconst), jnp.full(n, -jnp.inf, dtype),
                     jnp.full(n, jnp.inf, dtype), np.full(n, -1), jnp.ones(n, dtype)), r


def equality_targets(r, dt, timeconst):
    """jaxmb's ``v_star = -r / max(timeconst, dt)`` (module docstring)."""
    return -r / jnp.maximum(timeconst, dt)


def with_equality_rows_after(scene, q, dt, T, rows: JointRows) -> tuple:
    """``(rows + the equality rows, their errors)`` (`equality_rows`), or ``(rows, None)`` without equalities."""
    if scene.equalities is None or not scene.equalities.rows:
        return rows, None
    eqs, r = equality_rows(scene, q, dt, T)
    return concat(rows, eqs), r


def drift(eq: Equalities, model, q, qd):
    """``Jdot v`` (rows,) of the connect and weld rows at ``(q, qd)`` of ``model`` (a tree), zero on the scalar
    rows, as MuJoCo takes it (module docstring): the rate of ``J(q) v`` at a fixed MuJoCo velocity ``v``, whose free
    joints' translations are in the world's axes: the rate of ``J(q) qd`` along ``dq/dt`` less ``J`` of the free
    joints' `jaxmb.sim.stages.turning_rates`."""
    # (a late import: jaxmb.sim.stages imports the rows through the constraints)
    from jaxmb.sim.stages import turning_rates

    anchored = np.repeat([k in ("connect", "weld") for k in eq.kinds], [_ROWS[k] for k in eq.kinds])
    J, rate = jax.jvp(lambda x: errors(eq, model, x)[1], (q,), (configuration_rate(model, q, qd),))
    return jnp.where(jnp.asarray(anchored), rate @ qd - J @ turning_rates(model, qd), 0.0)


def mujoco_rows(eq: Equalities, dt, r, u, jdot_v):
    """``(D, v_star)`` (rows,) of the equality rows by MuJoCo's rule (module docstring) at the errors ``r``, the
    row velocities ``u`` and their `drift` ``jdot_v`` (rows,): the reference acceleration is that of ``r``, ``J a +
    Jdot v``."""
    imp = eq.impedance
    if imp is None:
        raise ModelError(f"equalities {list(eq.names)}: MuJoCo's soft constraints need the equality rows' numbers; "
                         "give them by jaxmb.sim.equality_rows.with_equality_impedance")
    _, group = _order(eq)
    dtype = u.dtype
    square = jnp.zeros(eq.ne, dtype).at[group].add(r * r)[group]
    norm = jnp.where(square > 0, jnp.sqrt(jnp.where(square > 0, square, 1.0)), 0.0)  # (no NaN in a derivative at 0)
    solref, solimp = imp.solref[group].astype(dtype), imp.solimp[group].astype(dtype)
    d = impedance(solimp, norm)
    K, B = stiffness_damping(solref, solimp, dt)
    R = jnp.maximum(_MINVAL, (1 - d) / d * imp.weight.astype(dtype))
    return 1 / R, (1 - dt * B) * u - dt * (K * d * r + jdot_v)


def with_equality_impedance(scene, solref=SOLREF, solimp=SOLIMP, weight=None):
    """``scene`` with MuJoCo's numbers of its equality rows (`EqualityImpedance`): ``solref`` (2,) or (ne, 2),
    ``solimp`` (5,) or (ne, 5), ``weight`` (rows,) each row's approximate inverse inertia (default: the diagonal of
    ``J M^-1 J*`` at the scene's ``q0``)."""
    eq = scene.equalities
    dtype = eq.coef.dtype
    if weight is None:
        J = np.asarray(errors(eq, scene.tree, scene.q0)[1], float)
        weight = np.einsum("rv,vw,rw->r", J, np.linalg.inv(np.asarray(mass_matrix(scene.tree, scene.q0), float)), J)
    numbers = (np.broadcast_to(np.asarray(solref, float), (eq.ne, 2)),
               np.broadcast_to(np.asarray(solimp, float), (eq.ne, 5)), np.asarray(weight, float).reshape(eq.rows))
    for x in numbers:
        if not np.all(np.isfinite(x)):
            raise ModelError(f"equalities {list(eq.names)}: MuJoCo's constraint numbers must be finite, got "
                             f"{x.tolist()}")
    return scene.replace(equalities=eq.replace(impedance=EqualityImpedance(*(jnp.asarray(x, dtype)
                                                                             for x in numbers))))


def check_scene(eq: Equalities | None, model, options, where="the scene"):
    """Raise `ModelError` where the scene cannot take its equality rows: a closed-loop model (its loops are embedded;
    rows are built on trees) or the capped limit rows of ``limit_rows``."""
    if eq is None:
        return
    if is_closed(model):
        raise ModelError(f"{where}: equality rows {list(eq.names)} on the closed-loop model {model.name!r}: rows are "
                         "built on trees (embed the loops, or build them as rows on the tree)")
    if options.limit_rows is not None:
        raise ModelError(f"{where}: limit_rows caps the joints' limit rows; with the equality rows {list(eq.names)} "
                         "leave it at None")
