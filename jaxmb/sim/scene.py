"""`Scene`: a model with its geometry, contact pairs, actuators, passive joint terms and contact options.

A scene is a pytree. Its numbers (the model's parameters, geometry sizes and placements, frictions, actuator gains,
damping, contact stiffness) are leaves, so a batch of scenes with randomized values is one ``jax.vmap`` and never a
recompile; its structure (which geoms, which pairs, which coordinates are driven or limited, the integrator, the
contact model, the solver's iteration count) is static. `make_scene` checks everything it can when the scene is
built, and raises `jaxmb.ModelError` naming the geom, body, joint or option at fault.
"""

import dataclasses
from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np

from jaxmb.configuration import neutral_configuration
from jaxmb.errors import ModelError
from jaxmb.model import pytree_dataclass
from jaxmb.sim.actuators import Actuators, JointTerms, joint_terms
from jaxmb.sim.actuators import actuators as gather_actuators
from jaxmb.sim.closed_loops import is_closed, spanning_tree
from jaxmb.sim.equality_rows import Equalities
from jaxmb.sim.equality_rows import check_scene as check_equalities
from jaxmb.sim.equality_rows import equalities as gather_equalities
from jaxmb.sim.fluid import Fluid
from jaxmb.sim.geometry import Geometry, Pairs, geometry, pairs
from jaxmb.sim.impedance import Impedance
from jaxmb.sim.tendons import Tendons, check_scene
from jaxmb.sim.tendons import tendons as gather_tendons

INTEGRATORS = ("euler", "implicit", "implicitfast", "implicit_coriolis", "rk4")
CONTACT_MODELS = ("constraint", "compliant")
JOINT_FRICTION = ("constraint", "smooth")
SOLVERS = ("pgs", "newton")
CONES = ("elliptic", "pyramidal")
REGULARIZATION = {"pgs": 1e-6, "newton": 1e-2}


@pytree_dataclass
@dataclass(frozen=True)
class ContactParams:
    """Contact and constraint numbers (scalars, leaves).

    Compliant contact (Hunt and Crossley, Coefficient of restitution interpreted as damping in vibroimpact, 1975):
    normal force ``k delta^1.5 smax(1 + c ddelta/dt)`` for the penetration ``delta``, friction
    ``-mu f_n v_t / sqrt(|v_t|^2 + v_s^2)``:
        stiffness (k, N/m^1.5), dissipation (c, s/m), slip_velocity (v_s, m/s)
    Constraint contact and joint limits: a penetration (or a limit violation) is removed at the rate
    ``1/timeconst`` (s), and ``regularization`` (relative to the diagonal of ``J M^-1 J*``, a contact's tangent rows
    at least its normal's) softens every row, as MuJoCo's impedance does: it keeps the problem strictly convex where
    contacts are redundant (four corners of a box) at the price of a creep velocity ``regularization x`` the
    velocity the force would otherwise remove.
    """

    stiffness: jnp.ndarray
    dissipation: jnp.ndarray
    slip_velocity: jnp.ndarray
    timeconst: jnp.ndarray
    regularization: jnp.ndarray

    def replace(self, **changes) -> "ContactParams":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Options:
    """The static choices of a scene: ``integrator`` (`INTEGRATORS`), ``contact`` (`CONTACT_MODELS`),
    ``iterations`` of the constraint solver (the most sweeps or Newton steps per step), its stopping ``tolerance``
    and the ``solver`` (`SOLVERS`: `jaxmb.sim.solver`, `jaxmb.sim.newton`), ``joint_friction``
    (`JOINT_FRICTION`), ``cone`` (`CONES`: the Newton solver's friction cone), ``limited`` (the velocity
    coordinates with position limits, as ``(q index, v index)`` pairs), ``friction`` (the velocity coordinates
    with Coulomb friction rows), ``limit_rows`` (the most limit rows a step solves, None: one per limited
    coordinate; `jaxmb.sim.joint_rows`), ``ball_limited`` (the ball joints with a range, as ``(q index, v index)``
    of their quaternion and first velocity coordinate; `jaxmb.sim.ball_limits`)."""

    integrator: str = "implicit"
    contact: str = "constraint"
    iterations: int = 30
    tolerance: float = 1e-10
    solver: str = "pgs"
    joint_friction: str = "constraint"
    cone: str = "elliptic"
    limited: tuple = ()
    friction: tuple = ()
    limit_rows: int | None = None
    ball_limited: tuple = ()


@pytree_dataclass
@dataclass(frozen=True)
class Scene:
    """A model and everything a step needs beside the state (module docstring). ``geometry`` and ``pairs`` are None
    for a scene without contact. ``q0`` (nq,) is the configuration `jaxmb.sim.init_state` starts from by default
    (MuJoCo's ``qpos0``): a leaf, so that a batch of scenes can start from a batch of configurations. ``impedance``
    holds MuJoCo's constraint numbers where the Newton solver's rows are MuJoCo's soft constraints
    (`jaxmb.sim.impedance`), None for jaxmb's rule (``timeconst``, ``regularization``). ``fluid`` is the medium whose
    drag and lift act on the bodies (`jaxmb.sim.fluid`), None for none. ``ball_ranges`` (nbl,) is the largest
    rotation angle (radians) of each ball joint of ``options.ball_limited`` (`jaxmb.sim.ball_limits`), None for
    none. ``tendons`` the fixed tendons (`jaxmb.sim.tendons.Tendons`), None where there are none. ``equalities`` the
    equality constraints built as rows (`jaxmb.sim.equality_rows.Equalities`), None where there are none."""

    model: object
    geometry: Geometry | None
    actuators: Actuators
    joints: JointTerms
    contact: ContactParams
    q0: jnp.ndarray
    impedance: Impedance | None = None
    pairs: Pairs | None = field(default=None, metadata=dict(static=True))
    options: Options = field(default=Options(), metadata=dict(static=True))
    fluid: Fluid | None = None
    ball_ranges: jnp.ndarray | None = None
    tendons: Tendons | None = None
    equalities: Equalities | None = None

    @property
    def tree(self):
        """The tree whose bodies and coordinates the geometry, actuators and limits name: the model, or a
        closed-loop model's spanning tree."""
        return spanning_tree(self.model)

    @property
    def nc(self) -> int:
        """Number of contact slots (fixed; inactive ones carry no force)."""
        return 0 if self.pairs is None else self.pairs.nc

    @property
    def nu(self) -> int:
        return self.actuators.nu

    @property
    def rows(self) -> int:
        """Rows of the constraint impulses a `jaxmb.sim.State` keeps: three per contact slot of the constraint model
        (normal and two tangents; four pyramid edges with ``cone="pyramidal"``), one per limited coordinate, one per
        coordinate with Coulomb friction (constraint option), one per ball joint with a range, then the tendons' limit
        and friction rows (`jaxmb.sim.tendons.tendon_rows`), then the equalities' rows
        (`jaxmb.sim.equality_rows.Equalities.rows`). With ``limit_rows`` the solver takes that many of the joints'
        limit rows a step."""
        per_contact = 4 if self.options.cone == "pyramidal" else 3
        contact = per_contact * self.nc if self.options.contact == "constraint" else 0
        tendon = 0 if self.tendons is None else self.tendons.rows
        equality = 0 if self.equalities is None else self.equalities.rows
        return (contact + len(self.options.limited) + len(self.options.friction) + len(self.options.ball_limited)
                + tendon + equality)

    def replace(self, **changes) -> "Scene":
        return dataclasses.replace(self, **changes)


def make_scene(model, geoms=(), *, pairs_include=None, pairs_exclude=(), exclude_parent_child=True, actuators=(),
               damping=None, frictionloss=None, spring_stiffness=None, spring_reference=None,
               joint_friction="constraint", limits=True, contact="constraint",
               integrator="implicit", iterations=30, tolerance=1e-10, limit_rows=None, stiffness=2e5, dissipation=2.0,
               slip_velocity=1e-3, timeconst=0.02, regularization=None, solver="pgs", cone="elliptic", q0=None,
               fluid=None, ball_ranges=None, tendons=(), implicit_tendons=True, equalities=()):
    """Build and check a `Scene` (module docstring) of ``model``, a `jaxmb.Model` or a closed-loop
    `jaxmb.loops.LoopModel`, whose geometry, actuators, damping and limits sit on its spanning tree
    (`jaxmb.sim.closed_loops`).

    geoms: `jaxmb.sim.geometry` shapes on the model's bodies; pairs_include / pairs_exclude /
    exclude_parent_child: which of them collide (`jaxmb.sim.geometry.pairs`; by default every pair that can).
    actuators: `jaxmb.sim.motor`, `position`, `velocity`, `intvelocity` specs. damping, frictionloss,
    spring_stiffness, spring_reference: per coordinate (a scalar, nv values, or a dict by joint name; springs
    ``-spring_stiffness (q - spring_reference)`` on hinge and slide joints only, `jaxmb.sim.actuators.JointTerms`);
    joint_friction: Coulomb friction as solver rows (``"constraint"``) or
    ``"smooth"``. limits: enforce the model's position limits of one-coordinate joints as unilateral constraints;
    limit_rows: solve at most this many of them a step, those of the coordinates nearest to crossing their limits
    (`jaxmb.sim.joint_rows.nearest_limits`; None: all of them, every step).
    contact: `CONTACT_MODELS`; integrator: `INTEGRATORS`; solver: ``"pgs"``, projected Gauss-Seidel sweeps on
    Coulomb's cone (`jaxmb.sim.solver`), or ``"newton"``, Newton's method on MuJoCo's convex problem
    (`jaxmb.sim.newton`); cone: the friction cone of the Newton solver's contacts, ``"elliptic"`` (Coulomb's) or
    ``"pyramidal"`` (four edges, MuJoCo's default); iterations: the most sweeps (Newton steps) per step;
    tolerance: the solver stops earlier once a sweep (step) changes no impulse (velocity) by more than this
    fraction of the largest (floored at the working precision's round-off); regularization: None for the solver's
    default (`REGULARIZATION`); q0: the initial configuration (nq,) of `jaxmb.sim.init_state` (None: the model's
    neutral configuration; a closed-loop scene's is projected onto its loops when a state starts from it); fluid:
    a `jaxmb.sim.fluid.Fluid` on the spanning tree's bodies (`jaxmb.sim.fluid.fluid`), taken explicitly by every
    integrator; ball_ranges: {ball joint name: the largest angle (radians) its rotation may reach}, enforced
    with ``limits`` by one row each (`jaxmb.sim.ball_limits`; a tree only, every limit row each step); tendons:
    `jaxmb.sim.tendons.fixed_tendon` and `jaxmb.sim.spatial_tendons.spatial_tendon` specs, which actuators with
    ``transmission="tendon"``
    drive (`jaxmb.sim.actuators.on_tendon`); implicit_tendons: the implicit integrators take the tendons' damping and
    their servos' gains into their step as MuJoCo's ``implicitfast`` (False: explicitly, as MuJoCo's Euler;
    `jaxmb.sim.tendons`); equalities: `jaxmb.sim.equality_rows` specs (`connect`, `weld`, `joint_equality`,
    `tendon_equality`), bilateral rows on a tree; the rest: `ContactParams`.
    """
    if integrator not in INTEGRATORS:
        raise ModelError(f"unknown integrator {integrator!r}; choose one of {INTEGRATORS}")
    if contact not in CONTACT_MODELS:
        raise ModelError(f"unknown contact model {contact!r}; choose one of {CONTACT_MODELS}")
    if joint_friction not in JOINT_FRICTION:
        raise ModelError(f"unknown joint_friction {joint_friction!r}; choose one of {JOINT_FRICTION}")
    if solver not in SOLVERS:
        raise ModelError(f"unknown solver {solver!r}; choose one of {SOLVERS}")
    if cone not in CONES:
        raise ModelError(f"unknown cone {cone!r}; choose one of {CONES}")
    if cone == "pyramidal" and solver != "newton":
        raise ModelError("cone='pyramidal' is a choice of solver='newton'; solver='pgs' solves Coulomb's elliptic "
                         "cone")
    if regularization is None:
        regularization = REGULARIZATION[solver]
    if solver == "newton" and not regularization > 0:
        raise ModelError(f"the newton solver needs a positive regularization (the rows' softness), got "
                         f"{regularization!r}")
    if int(iterations) != iterations or iterations < 1:
        raise ModelError(f"iterations must be a positive integer, got {iterations!r}")
    if not np.isfinite(tolerance) or tolerance < 0:
        raise ModelError(f"tolerance must be finite and non-negative, got {tolerance!r}")
    numbers = dict(stiffness=stiffness, dissipation=dissipation, slip_velocity=slip_velocity, timeconst=timeconst,
                   regularization=regularization)
    for name, x in numbers.items():
        if not np.isfinite(x) or x < 0 or (x == 0 and name in ("stiffness", "slip_velocity", "timeconst")):
            raise ModelError(f"{name} must be finite and {'positive' if name != 'dissipation' else 'non-negative'}"
                             f", got {x!r}")
    tree = spanning_tree(model)
    geoms = tuple(geoms)
    geo = geometry(tree, geoms) if geoms else None
    pair_table = pairs(tree, geo, include=pairs_include, exclude=pairs_exclude,
                       exclude_parent_child=exclude_parent_child) if geoms else None
    if pair_table is not None and pair_table.nc == 0:
        pair_table = None
    joints = joint_terms(tree, damping, frictionloss, spring_stiffness, spring_reference)
    limited = _limited_coordinates(tree) if limits else ()
    ball_limited, ball_angles = _ball_limits(model, ball_ranges, limits, limit_rows) if ball_ranges else ((), None)
    if limit_rows is not None:
        if isinstance(limit_rows, bool) or int(limit_rows) != limit_rows or limit_rows < 1:
            raise ModelError(f"limit_rows must be a positive integer (or None: a row for every limited coordinate), "
                             f"got {limit_rows!r}; limits=False enforces no limit")
        if solver == "newton":
            raise ModelError("limit_rows caps the limit rows of solver='pgs'; solver='newton' solves every limit "
                             "row, each at the cost of one armature term")
        if is_closed(model):
            raise ModelError(f"limit_rows: the closed-loop scene of {model.name!r} solves a row for every limited "
                             "coordinate; leave limit_rows at None")
        limit_rows = None if limit_rows >= len(limited) else int(limit_rows)
    friction = ()
    if joint_friction == "constraint" and frictionloss is not None:
        friction = tuple(int(j) for j in np.flatnonzero(np.asarray(joints.frictionloss) > 0))
    dtype = tree.mass.dtype
    q0 = neutral_configuration(tree) if q0 is None else jnp.asarray(q0, dtype)
    if q0.shape != (tree.nq,):
        raise ModelError(f"q0 must have shape ({tree.nq},), the nq of model {model.name!r}, got {q0.shape}")
    params = ContactParams(**{k: jnp.asarray(v, dtype) for k, v in numbers.items()})
    options = Options(integrator, contact, int(iterations), float(tolerance), solver, joint_friction, cone,
                      limited, friction, limit_rows, ball_limited)
    ten = gather_tendons(tree, tendons, bool(implicit_tendons)) if tendons else None
    acts = gather_actuators(tree, actuators, ten)
    if acts.na and integrator == "rk4":
        raise ModelError(f"actuators with activation dynamics {[acts.names[i] for i in acts.stateful]} step with the "
                         "'euler', 'implicit' or 'implicitfast' integrator, not 'rk4'")
    if integrator == "implicit_coriolis":
        _check_implicit_coriolis(model, contact, ten, acts)
    check_scene(ten, acts, model, options)
    eqs = gather_equalities(tree, equalities, ten) if equalities else None
    check_equalities(eqs, model, options)
    ball_angles = None if ball_angles is None else jnp.asarray(ball_angles, dtype)
    return Scene(model, geo, acts, joints, params, q0.astype(dtype), None, pair_table, options, fluid, ball_angles,
                 ten, eqs)


def _check_implicit_coriolis(model, contact, ten, acts):
    """What ``implicit_coriolis`` (`jaxmb.sim.integrators.implicit_in_velocity`) does not take, refused by name:
    closed loops, compliant contact, and the damping and servos of tendons, whose velocity derivatives it leaves
    out."""
    if is_closed(model):
        raise ModelError(f"model {model.name!r}: the 'implicit_coriolis' integrator steps trees; a closed-loop scene "
                         "takes 'implicit', 'implicitfast', 'euler' or 'rk4'")
    if contact == "compliant":
        raise ModelError("the 'implicit_coriolis' integrator takes constraint contact; with contact='compliant' "
                         "choose 'implicit' or 'implicitfast'")
    driven = [] if ten is None else [n for n, b in zip(ten.names, np.asarray(ten.damping)) if b > 0]
    driven += [acts.names[a] for a, t in enumerate(acts.tendon or ()) if t >= 0]
    if driven:
        raise ModelError(f"the 'implicit_coriolis' integrator does not take the damping of tendons or servos on "
                         f"them: {driven}; choose 'implicitfast'")


def _ball_limits(model, ball_ranges, limits, limit_rows):
    """``(ball_limited, angles)`` (`Options.ball_limited`, (nbl,)) of `make_scene`'s ``ball_ranges``, checked, in
    the model's body order; ``((), None)`` without ``limits``."""
    tree = spanning_tree(model)
    if is_closed(model):
        raise ModelError(f"ball_ranges: the closed-loop scene of {model.name!r} takes no ranges of ball joints")
    if limit_rows is not None:
        raise ModelError("ball_ranges: limit_rows caps the coordinate limits; leave it at None with ranges of ball "
                         "joints")
    unknown = [j for j in ball_ranges if j not in tree.joint_names]
    if unknown:
        raise ModelError(f"ball_ranges: model {tree.name!r} has no joints {unknown}")
    out, angles = [], []
    for k in sorted(tree.joint_index(j) for j in ball_ranges):
        name, kind = tree.joint_names[k], tree.topology.kinds[k]
        if kind != "spherical":
            raise ModelError(f"ball_ranges: joint {name!r} is a {kind} joint, not a ball (spherical) joint")
        angle = float(ball_ranges[name])
        if not np.isfinite(angle) or angle < 0:
            raise ModelError(f"ball_ranges: joint {name!r} needs a finite, non-negative angle, got {angle!r}")
        out.append((int(tree.topology.q_offset[k]), int(tree.topology.v_offset[k])))
        angles.append(angle)
    if not limits:
        return (), None
    return tuple(out), np.asarray(angles, float)


def _limited_coordinates(model):
    """``(q index, v index)`` of the one-coordinate joints with a finite lower or upper position limit."""
    topo, out = model.topology, []
    lower, upper = np.asarray(model.q_lower), np.asarray(model.q_upper)
    for k in range(model.nb):
        if topo.nq_body[k] == 1 and topo.nv_body[k] == 1:
            i, j = int(topo.q_offset[k]), int(topo.v_offset[k])
            if np.isfinite(lower[i]) or np.isfinite(upper[i]):
                if lower[i] > upper[i]:
                    raise ModelError(f"joint {model.joint_names[k]!r}: lower limit {lower[i]} above upper {upper[i]}")
                out.append((i, j))
    return tuple(out)

