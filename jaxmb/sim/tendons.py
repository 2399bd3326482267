"""Fixed and spatial tendons: lengths that are linear combinations of hinge and slide coordinates, or of paths
through sites (`jaxmb.sim.spatial_tendons`), with their passive forces, limits and Coulomb friction, as MuJoCo's
fixed and spatial tendons.

A fixed tendon ``t`` has the length

    L_t(q) = length0_t + sum_w coef_w q_(j_w)          (its wraps ``w``, each on one hinge or slide coordinate)

and the Jacobian row ``J_t = dL_t/dq`` (`moments`), constant: ``coef_w`` at the velocity coordinate of each wrap.
``length0`` is the length at ``q = 0`` (MuJoCo's ``tendon_length0``: jaxmb's zero of a hinge or slide is MuJoCo's
``qpos0``). A spatial tendon's length and Jacobian row are its path's, read from the step's body poses, and ``J_t``
depends on ``q`` (`tendon_geometry`); everything below takes ``L`` and ``J`` at the step's configuration. A scalar
force ``f_t`` along the tendon is the generalized force ``J_t* f_t``.

Passive forces (`passive_forces`, MuJoCo's ``qfrc_passive``): a spring with a dead band, ``f = stiffness (lo - L)``
below ``springlength = [lo, hi]``, ``stiffness (hi - L)`` above it and zero inside, and damping ``-damping J qd``.
Euler and RK4 take them explicitly (MuJoCo's Euler takes only the joints' damping implicitly); the implicit
integrators take the tendons' damping and the velocity gains of the servos on them into their step (`Tendons.implicit`,
`mass_weights`) as MuJoCo's ``implicitfast`` does, ``(M + dt J* B J) (qd+ - qd) = dt f``, ``implicit`` their
position gains too (a servo's ``g^2 kp``, a spring's stiffness outside its dead band, through ``q + dt qd``). ``M``
here is the mass matrix with the joints' implicit damping as armature (`jaxmb.sim.integrators`), factored by the
articulated-body sweep, and the nt tendons' term is added by the push-through identity ``(M + J* W J)^-1 = M^-1 -
M^-1 J* W (1 + A W)^-1 J M^-1``, ``A = J M^-1 J*`` (nt, nt) (`with_tendon_mass`); the Newton solver's metric is
the dense ``M + J* W J``. A tendon's ``armature`` (MuJoCo's) is an inertia of its length, ``J* armature J`` in the
mass matrix of every integrator, taken by the same identity. The rows are solved with these terms in the metric,
as the joints' implicit damping is; MuJoCo solves them with ``M`` and applies the implicit terms after, which differs
while a friction row sticks.

Rows (`tendon_rows`): a limited tendon's limit row toward its nearer bound, at the distance ``L - lower`` (Jacobian
``+J_t``) or ``upper - L`` (``-J_t``), pushing away from it; a tendon with ``frictionloss`` a friction row ``J_t``
whose impulse is within ``+-frictionloss dt``. Beside the joints' rows (`jaxmb.sim.joint_rows`) they take
jaxmb's targets (`jaxmb.sim.joint_rows.target_velocity`) or MuJoCo's soft constraints (`TendonImpedance`,
`mujoco_rows`: the tendon's ``solref``, ``solimp``, ``margin`` of its limit and friction and its ``invweight0``).
The rows are on several coordinates: the Gauss-Seidel solver takes their compliance from the factored solve
(`jaxmb.sim.compliance.with_rows_by_solve`), the Newton solver the dense mass matrix (`jaxmb.sim.newton.DenseMetric`).

Actuators on tendons (MuJoCo's ``trntype`` tendon, `jaxmb.sim.actuators`) take the tendon's length and velocity
``J_t qd`` in the place of a coordinate's, and their force goes back as ``J_t* f``.

The numbers are leaves (`Tendons`); which coordinates each tendon spans and which tendons are limited or have
friction are static.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxmb.dynamics.articulated import solve_factored
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.errors import ModelError
from jaxmb.hinges import hinge_map, joint_poses
from jaxmb.kinematics import forward_kinematics
from jaxmb.model import pytree_dataclass
from jaxmb.sim.closed_loops import is_closed
from jaxmb.sim.impedance import SOLIMP, SOLREF, _soft
from jaxmb.sim.joint_rows import JointRows, concat, no_joint_rows, target_velocity
from jaxmb.sim.spatial_tendons import SpatialTendon, path_lengths_and_moments


@dataclass(frozen=True)
class FixedTendon:
    """One fixed tendon as written by the user (`fixed_tendon`): plain numbers, checked by `tendons`."""

    name: str
    joints: tuple
    range: tuple
    stiffness: float
    springlength: tuple
    damping: float
    frictionloss: float
    length0: float
    armature: float = 0.0


def fixed_tendon(name, joints, range=None, stiffness=0.0, springlength=None, damping=0.0, frictionloss=0.0,
                 length0=0.0, armature=0.0) -> FixedTendon:
    """A fixed tendon ``name`` of length ``length0 + sum coef q_j`` over ``joints`` ({hinge or slide joint name:
    coef}), with a position ``range`` (lower, upper) (None: not limited), a spring of ``stiffness`` with the dead
    band ``springlength`` (a length, or (lo, hi); None: ``length0``, the length at ``q = 0``), ``damping``, the
    Coulomb friction ``frictionloss`` and the ``armature``, an inertia of its length (module docstring)."""
    if springlength is None:
        springlength = (length0, length0)
    elif np.ndim(springlength) == 0:
        springlength = (springlength, springlength)
    return FixedTendon(name, tuple(dict(joints).items()), (-np.inf, np.inf) if range is None else tuple(range),
                       stiffness, tuple(springlength), damping, frictionloss, length0, armature)


@pytree_dataclass
@dataclass(frozen=True)
class TendonImpedance:
    """MuJoCo's constraint numbers of the tendon rows (leaves; `jaxmb.sim.impedance`): ``limit_solref`` (nl, 2),
    ``limit_solimp`` (nl, 5), ``limit_margin`` (nl,) per limited tendon (`Tendons.limited`), ``friction_solref``
    (nf, 2), ``friction_solimp`` (nf, 5) per tendon with friction (`Tendons.friction`), ``weight`` (nt,) each
    tendon's ``invweight0``, its rows' approximate inverse inertia."""

    limit_solref: jnp.ndarray
    limit_solimp: jnp.ndarray
    limit_margin: jnp.ndarray
    friction_solref: jnp.ndarray
    friction_solimp: jnp.ndarray
    weight: jnp.ndarray


@pytree_dataclass
@dataclass(frozen=True)
class Tendons:
    """The scene's fixed tendons (nt of them, nw wraps; module docstring). Leaves: ``coef`` (nw,) each wrap's
    coefficient; (nt,) each: ``length0``, ``lower``, ``upper`` (the range, +-inf where not limited),
    ``stiffness``, ``spring_lower``, ``spring_upper`` (the spring's dead band), ``damping``, ``frictionloss``,
    ``armature``;
    ``impedance`` MuJoCo's numbers of the rows (`TendonImpedance`, None for jaxmb's rule). Static: ``tendon``
    (nw,) the tendon of each wrap, ``q_index``, ``v_index`` (nw,) its position and velocity coordinates, ``names``
    (nt,), ``limited`` the tendons with a limit row, ``friction`` those with a friction row, ``nv``, ``implicit``
    whether the implicit integrators take the tendons' damping into their step (module docstring; False: it is
    explicit under every integrator, as under MuJoCo's Euler), ``inertial`` whether the mass matrix takes the
    tendons' armature ``J* armature J`` (a tendon built with armature). The spatial tendons'
    (`jaxmb.sim.spatial_tendons`) sites: ``site_point`` (ns, 3) each site's point in its body's frame (a leaf, None
    without spatial tendons), static ``site_body`` (ns,) its body (-1: the world) and ``site_tendon`` (ns,) its
    tendon, the sites of a tendon consecutive in path order; their ``length0`` is 0."""

    coef: jnp.ndarray
    length0: jnp.ndarray
    lower: jnp.ndarray
    upper: jnp.ndarray
    stiffness: jnp.ndarray
    spring_lower: jnp.ndarray
    spring_upper: jnp.ndarray
    damping: jnp.ndarray
    frictionloss: jnp.ndarray
    armature: jnp.ndarray
    impedance: TendonImpedance | None
    tendon: tuple = field(metadata=dict(static=True))
    q_index: tuple = field(metadata=dict(static=True))
    v_index: tuple = field(metadata=dict(static=True))
    names: tuple = field(metadata=dict(static=True))
    limited: tuple = field(metadata=dict(static=True))
    friction: tuple = field(metadata=dict(static=True))
    nv: int = field(metadata=dict(static=True))
    implicit: bool = field(default=True, metadata=dict(static=True))
    inertial: bool = field(default=False, metadata=dict(static=True))
    site_point: jnp.ndarray | None = None
    site_body: tuple = field(default=(), metadata=dict(static=True))
    site_tendon: tuple = field(default=(), metadata=dict(static=True))

    @property
    def nt(self) -> int:
        return len(self.names)

    @property
    def rows(self) -> int:
        """The constraint rows of the tendons: one per limited tendon, one per tendon with friction."""
        return len(self.limited) + len(self.friction)

    def index(self, name) -> int:
        if name not in self.names:
            raise KeyError(f"no tendon {name!r}; the tendons: {list(self.names)}")
        return self.names.index(name)

    def replace(self, **changes) -> "Tendons":
        return dataclasses.replace(self, **changes)


def tendons(model, specs, implicit=True) -> Tendons:
    """Check the `FixedTendon` and `jaxmb.sim.spatial_tendons.SpatialTendon` ``specs`` against ``model`` (a tree)
    and gather them, with `Tendons.implicit` ``implicit``: a `ModelError` names the tendon whose joint is missing or
    not a hinge or slide, whose body is missing, whose path has fewer than two sites, whose coefficients, points or
    numbers are not finite, whose stiffness, damping or friction is negative, whose range or dead band is not
    ordered, or a spatial tendon with armature."""
    coef, tendon, q_index, v_index, rows, names = [], [], [], [], [], []
    site_point, site_body, site_tendon = [], [], []
    for t, s in enumerate(specs):
        where = f"tendon {s.name!r}"
        if s.name in names:
            raise ModelError(f"{where}: two tendons of one name")
        if isinstance(s, SpatialTendon):
            if len(s.sites) < 2:
                raise ModelError(f"{where}: a spatial tendon needs at least two sites, got {len(s.sites)}")
            if s.armature:
                raise ModelError(f"{where}: armature on a spatial tendon (whose Jacobian depends on q) is not built; "
                                 "leave it at 0")
            for body, point in s.sites:
                if body is not None and body not in model.body_names:
                    raise ModelError(f"{where}: model {model.name!r} has no body {body!r}")
                if len(point) != 3 or not np.all(np.isfinite(point)):
                    raise ModelError(f"{where}: a site's point must be three finite numbers, got {point}")
                site_point.append(point)
                site_body.append(-1 if body is None else model.body_index(body))
                site_tendon.append(t)
        elif not s.joints:
            raise ModelError(f"{where}: a fixed tendon needs at least one joint")
        for joint, c in getattr(s, "joints", ()):
            try:
                q_slice, v_slice = model.joint_coordinates(joint)
            except KeyError as e:
                raise ModelError(f"{where}: {e.args[0]}") from None
            if q_slice.stop - q_slice.start != 1 or v_slice.stop - v_slice.start != 1:
                raise ModelError(f"{where}: joint {joint!r} is not a hinge or slide (a fixed tendon spans coordinates "
                                 "of one-coordinate joints)")
            if not np.isfinite(c):
                raise ModelError(f"{where}: the coefficient of joint {joint!r} must be finite, got {c!r}")
            coef.append(float(c))
            tendon.append(t)
            q_index.append(q_slice.start)
            v_index.append(v_slice.start)
        length0 = getattr(s, "length0", 0.0)
        numbers = np.array([length0, *s.springlength, s.stiffness, s.damping, s.frictionloss, s.armature], float)
        if not np.all(np.isfinite(numbers)) or min(s.stiffness, s.damping, s.frictionloss, s.armature) < 0:
            raise ModelError(f"{where}: length0, springlength, stiffness, damping, frictionloss and armature must be "
                             f"finite, the last four non-negative, got {numbers.tolist()}")
        lo, hi = s.range
        if np.isnan(lo) or np.isnan(hi) or not lo < hi:
            raise ModelError(f"{where}: range must be increasing, got {s.range}")
        if not s.springlength[0] <= s.springlength[1]:
            raise ModelError(f"{where}: springlength must be ordered (lo <= hi), got {s.springlength}")
        rows.append([length0, lo, hi, s.stiffness, *s.springlength, s.damping, s.frictionloss, s.armature])
        names.append(s.name)
    values = np.asarray(rows, float).reshape(-1, 9)
    limited = tuple(int(t) for t in np.flatnonzero(np.isfinite(values[:, 1]) | np.isfinite(values[:, 2])))
    friction = tuple(int(t) for t in np.flatnonzero(values[:, 7] > 0))
    dtype = model.mass.dtype
    return Tendons(jnp.asarray(coef, dtype), *(jnp.asarray(v, dtype) for v in values.T), None, tuple(tendon),
                   tuple(q_index), tuple(v_index), tuple(names), limited, friction, int(model.nv), implicit,
                   bool(np.any(values[:, 8] > 0)),
                   jnp.asarray(np.asarray(site_point, float).reshape(-1, 3), dtype) if site_point else None,
                   tuple(site_body), tuple(site_tendon))


def _fixed_lengths(tendons: Tendons, q):
    terms = tendons.coef * q[np.asarray(tendons.q_index, int)]
    return tendons.length0 + jnp.zeros(tendons.nt, q.dtype).at[np.asarray(tendons.tendon, int)].add(terms)


def _fixed_moments(tendons: Tendons):
    J = jnp.zeros((tendons.nt, tendons.nv), tendons.coef.dtype)
    return J.at[np.asarray(tendons.tendon, int), np.asarray(tendons.v_index, int)].add(tendons.coef)


def _spatial(tendons: Tendons, what):
    if tendons.site_tendon:
        raise ModelError(f"tendons {list(tendons.names)}: {what} of spatial tendons depend on the body poses; take "
                         "them from jaxmb.sim.tendons.tendon_geometry")


def lengths(tendons: Tendons, q):
    """The fixed tendons' lengths ``L`` (nt,) at ``q`` (nq,) (module docstring); `tendon_geometry` where there are
    spatial tendons."""
    _spatial(tendons, "the lengths")
    return _fixed_lengths(tendons, q)


def moments(tendons: Tendons):
    """The fixed tendons' Jacobian rows ``J = dL/dq`` (nt, nv): each wrap's coefficient at its velocity coordinate;
    `tendon_geometry` where there are spatial tendons."""
    _spatial(tendons, "the Jacobian rows")
    return _fixed_moments(tendons)


class TendonGeometry(NamedTuple):
    """The tendons' lengths ``L`` (nt,) and Jacobian rows ``J = dL/dq`` (nt, nv) at one configuration."""

    L: jnp.ndarray
    J: jnp.ndarray


def tendon_geometry(scene, q, T=None) -> TendonGeometry:
    """The `TendonGeometry` of the scene's fixed and spatial tendons at ``q`` (nq,), the spatial ones' from the body
    poses ``T`` (`jaxmb.sim.stages.Kinematics`; None: computed from ``q``)."""
    ten = scene.tendons
    L, J = _fixed_lengths(ten, q), _fixed_moments(ten).astype(q.dtype)
    if ten.site_tendon:
        T = forward_kinematics(scene.tree, q) if T is None else T
        L_path, J_path = path_lengths_and_moments(ten, scene.tree, T)
        L, J = L + L_path, J + J_path
    return TendonGeometry(L, J)


def _fixed_geometry(tendons: Tendons, q, geo):
    return TendonGeometry(lengths(tendons, q), moments(tendons)) if geo is None else geo


def tendon_forces(tendons: Tendons, q, qd, geo=None):
    """The passive forces along the tendons (nt,) at ``(q, qd)``: the dead-band spring and the damping (module
    docstring), from their `TendonGeometry` ``geo`` (None: the fixed tendons', from ``q``)."""
    L, J = _fixed_geometry(tendons, q, geo)
    spring = tendons.stiffness * (jnp.maximum(tendons.spring_lower - L, 0.0) - jnp.maximum(L - tendons.spring_upper,
                                                                                              0.0))
    return spring - tendons.damping * (J @ qd)


def passive_forces(tendons: Tendons, q, qd, geo=None):
    """The tendons' passive generalized forces ``J* f`` (nv,) at ``(q, qd)`` (`tendon_forces`)."""
    geo = _fixed_geometry(tendons, q, geo)
    return geo.J.T @ tendon_forces(tendons, q, qd, geo)


def limit_distances(tendons: Tendons, q, geo=None):
    """``(dist, sign)`` (nl,) of each limited tendon (`Tendons.limited`): its distance to its nearer bound (1e6
    where both are infinite), +1 at the lower bound, -1 at the upper (``geo`` as in `tendon_forces`)."""
    li = np.asarray(tendons.limited, int)
    L = _fixed_geometry(tendons, q, geo).L[li]
    to_lower, to_upper = L - tendons.lower[li], tendons.upper[li] - L
    at_lower = to_lower <= to_upper
    dist = jnp.where(at_lower, to_lower, to_upper)
    return jnp.where(jnp.isfinite(dist), dist, 1e6), jnp.where(at_lower, 1.0, -1.0).astype(q.dtype)


def tendon_rows(scene, q, dt, T=None) -> JointRows:
    """The limit rows then the friction rows of the scene's tendons (module docstring) at ``q`` and the body poses
    ``T`` (`tendon_geometry`), jaxmb's targets; their ``coordinate`` is -1 (no one coordinate). No rows without
    tendons."""
    ten, dtype = scene.tendons, q.dtype
    if ten is None or not ten.rows:
        return no_joint_rows(scene.tree.nv, dtype)
    geo = tendon_geometry(scene, q, T)
    J = geo.J.astype(dtype)
    li, fi = np.asarray(ten.limited, int), np.asarray(ten.friction, int)
    out = []
    if len(li):
        dist, sign = limit_distances(ten, q, geo)
        out.append(JointRows(sign[:, None] * J[li], target_velocity(dist, dt, scene.contact.timeconst),
                             jnp.zeros(len(li), dtype), jnp.full(len(li), jnp.inf, dtype), np.full(len(li), -1), sign))
    if len(fi):
        bound = ten.frictionloss[fi].astype(dtype) * dt
        out.append(JointRows(J[fi], jnp.zeros(len(fi), dtype), -bound, bound, np.full(len(fi), -1),
                             jnp.ones(len(fi), dtype)))
    return concat(*out)


def mujoco_rows(tendons: Tendons, q, dt, u, geo=None):
    """``(D, v_star)`` (rows,) of the tendon rows (`tendon_rows`' order) by MuJoCo's rule (`jaxmb.sim.impedance`),
    ``u`` (rows,) their velocities ``J v``, ``geo`` as in `tendon_forces`: a limit row takes part where its distance
    is below its margin, a friction row always."""
    imp = tendons.impedance
    if imp is None:
        raise ModelError(f"tendons {list(tendons.names)}: MuJoCo's soft constraints need the tendon rows' numbers; "
                         "give them by jaxmb.sim.tendons.with_tendon_impedance")
    li, fi = np.asarray(tendons.limited, int), np.asarray(tendons.friction, int)
    D, v_star = [], []
    if len(li):
        dist = limit_distances(tendons, q, geo)[0]
        R, v = _soft(imp.limit_solref, imp.limit_solimp, dist, imp.limit_margin, u[:len(li)], dt, imp.weight[li])
        D.append(jnp.where(dist < imp.limit_margin, 1 / R, 0.0))
        v_star.append(v)
    if len(fi):
        n = len(fi)
        R, v = _soft(imp.friction_solref, imp.friction_solimp, jnp.zeros(n, u.dtype), 0.0, u[len(li):], dt,
                     imp.weight[fi], spring=False)
        D.append(1 / R)
        v_star.append(v)
    return jnp.concatenate(D).astype(u.dtype), jnp.concatenate(v_star).astype(u.dtype)


def with_tendon_impedance(scene, solref=SOLREF, solimp=SOLIMP, margin=0.0, weight=None):
    """``scene`` with MuJoCo's numbers of its tendon rows (`TendonImpedance`): ``solref`` (2,) or (nt, 2),
    ``solimp`` (5,) or (nt, 5), ``margin`` () or (nt,) for every limit and friction row (a limit's margin),
    ``weight`` (nt,) each tendon's ``invweight0`` (default: MuJoCo's, the diagonal of ``J M^-1 J*`` at the scene's
    ``q0``)."""
    ten = scene.tendons
    nt, dtype = ten.nt, ten.coef.dtype
    if weight is None:
        J = np.asarray(tendon_geometry(scene, scene.q0).J, float)
        weight = np.einsum("tv,vw,tw->t", J, np.linalg.inv(np.asarray(mass_matrix(scene.tree, scene.q0), float)), J)
    solref = np.broadcast_to(np.asarray(solref, float), (nt, 2))
    solimp = np.broadcast_to(np.asarray(solimp, float), (nt, 5))
    margin = np.broadcast_to(np.asarray(margin, float), (nt,))
    li, fi = np.asarray(ten.limited, int), np.asarray(ten.friction, int)
    numbers = (solref[li], solimp[li], margin[li], solref[fi], solimp[fi], np.asarray(weight, float))
    for x in numbers:
        if not np.all(np.isfinite(x)):
            raise ModelError(f"tendons {list(ten.names)}: MuJoCo's constraint numbers must be finite, got {x.tolist()}")
    imp = TendonImpedance(*(jnp.asarray(x, dtype) for x in numbers))
    return scene.replace(tendons=ten.replace(impedance=imp))


def with_tendon_rows_after(scene, q, dt, rows: JointRows, T=None) -> JointRows:
    """The Newton solver's scalar ``rows`` with the tendon rows (`tendon_rows`, at the body poses ``T``) after them;
    ``rows`` where the scene has none."""
    if scene.tendons is None or not scene.tendons.rows:
        return rows
    return concat(rows, tendon_rows(scene, q, dt, T))


def mass_weights(scene, q, dt, implicit=True, T=None):
    """``W`` (nt,): the tendons' term ``J* W J`` of the step's mass matrix at ``q`` (module docstring): their
    armature, and under the implicit integrators (unless ``implicit`` is False: the matrix a scene with MuJoCo's
    soft constraints solves its rows on, `jaxmb.sim.integrators.euler`) ``dt`` times the tendons' damping and the
    velocity gains ``g^2 kv`` of the servos on them, under ``implicit`` also ``dt^2`` times their position gains
    ``g^2 kp`` and the springs' stiffness outside their dead bands (the lengths at the body poses ``T``,
    `tendon_geometry`). None where the step has no such term."""
    from jaxmb.sim.actuators import affine  # (jaxmb.sim.actuators imports this module)

    ten, act, integrator = scene.tendons, scene.actuators, scene.options.integrator
    if ten is None:
        return None
    if not (implicit and ten.implicit) or integrator not in ("implicit", "implicitfast"):
        return ten.armature if ten.inertial else None
    b = ten.damping
    position_gains = integrator == "implicit"
    if position_gains:
        L = tendon_geometry(scene, q, T).L
        b = b + dt * ten.stiffness * ((L < ten.spring_lower) | (L > ten.spring_upper))
    if act.tendon:
        on = np.flatnonzero(np.asarray(act.tendon) >= 0)
        _, bias_q, bias_qd = affine(act)
        d = -bias_qd[on] - (dt * bias_q[on] if position_gains else 0.0)
        b = b.at[np.asarray(act.tendon)[on]].add(d)
    return dt * b + (ten.armature if ten.inertial else 0.0)


def with_tendon_mass(scene, model, q, ab, dt, implicit=True, T=None):
    """The articulated-body quantities ``ab`` (`jaxmb.sim.integrators.StepFactors`) of ``model`` (its armature
    the joints' implicit damping) with the free accelerations of ``M + J* W J`` (`mass_weights`), by the
    push-through identity with the factored solve (module docstring); ``ab`` itself where the step has no tendon
    term. RK4 takes the tendons' armature with MuJoCo's soft constraints, whose rows it solves at every stage.
    ``T``: the body poses at ``q`` (`tendon_geometry`)."""
    W = mass_weights(scene, q, dt, implicit, T)
    if W is None:
        return ab
    if scene.options.integrator == "rk4" and scene.impedance is None:
        raise ModelError(f"tendons {list(scene.tendons.names)}: under 'rk4' the armature of tendons needs MuJoCo's "
                         "soft constraints (its stages solve their rows); choose them or another integrator")
    J = tendon_geometry(scene, q, T).J.astype(q.dtype)
    X, H = joint_poses(model, q), hinge_map(model)
    MinvJ = jnp.stack([solve_factored(model, X, H, ab.G, ab.D, j)[0] for j in J])  # (nt, nv): rows J M^-1
    A = J @ MinvJ.T
    y = jnp.linalg.solve(jnp.eye(J.shape[0], dtype=q.dtype) + A * W[None, :], J @ ab.qdd)
    return ab._replace(qdd=ab.qdd - MinvJ.T @ (W * y))


def tendon_mass(scene, q, dt, implicit=True, T=None):
    """``J* W J`` (nv, nv) of `mass_weights`, or None: what the Newton solver's dense metric adds to the mass
    matrix. ``T``: the body poses at ``q`` (`tendon_geometry`)."""
    W = mass_weights(scene, q, dt, implicit, T)
    if W is None:
        return None
    J = tendon_geometry(scene, q, T).J.astype(q.dtype)
    return J.T @ (W[:, None] * J)


def dense_rows(scene) -> bool:
    """Whether the Newton solver takes the dense mass matrix for the scene's tendons: tendon rows are on several
    coordinates, and the tendons' term of the mass matrix couples them (`mass_weights`,
    `jaxmb.sim.newton.DenseMetric`)."""
    ten = scene.tendons
    return ten is not None and (ten.rows > 0 or ten.inertial or (ten.implicit and scene.options.integrator in (
        "implicit", "implicitfast")))


def check_scene(tendons: Tendons | None, act, model, options, where="the scene"):
    """Raise `ModelError` where the scene cannot take its tendons: a closed-loop model, the capped limit rows of
    ``limit_rows``, Coulomb friction on tendons with ``joint_friction="smooth"``, or the tendons' term of the mass
    matrix (`mass_weights`: armature, the implicit integrators' damping) with the Gauss-Seidel solver or compliant
    contact."""
    if tendons is None:
        return
    names = list(tendons.names)
    if is_closed(model):
        raise ModelError(f"{where}: tendons {names} on the closed-loop model {model.name!r}: tendons are built on "
                         "trees")
    if tendons.rows and options.limit_rows is not None:
        raise ModelError(f"{where}: limit_rows caps the joints' limit rows; with the rows of tendons {names} leave it "
                         "at None")
    if options.joint_friction == "smooth" and tendons.friction:
        raise ModelError(f"{where}: tendons {[names[t] for t in tendons.friction]} have Coulomb friction, which is "
                         "a constraint row: joint_friction='constraint'")
    gains = np.asarray(act.kv) + (np.asarray(act.kp) if options.integrator == "implicit" else 0.0)
    driven = [names[t] for t, g in zip(act.tendon, gains) if t >= 0 and g > 0] if act.tendon else []
    damped = [n for n, b in zip(names, np.asarray(tendons.damping)) if b > 0] + driven
    if tendons.implicit and options.integrator in ("implicit", "implicitfast") and damped and (
            options.solver != "newton" or options.contact == "compliant"):
        raise ModelError(f"{where}: the {options.integrator} integrator takes the damping of tendons "
                         f"{sorted(set(damped))} into its step with solver='newton' and constraint contact; choose "
                         "them, or the 'euler' or 'rk4' integrator")
    heavy = [n for n, a in zip(names, np.asarray(tendons.armature)) if a > 0]
    if heavy and (options.solver != "newton" or options.contact == "compliant"):
        raise ModelError(f"{where}: the armature of tendons {heavy} is a term of the mass matrix that the step takes "
                         "with solver='newton' and constraint contact; choose them")
