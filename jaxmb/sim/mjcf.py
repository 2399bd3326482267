"""The simulator scene of an MJCF model (or of anything MuJoCo compiles), read from MuJoCo's compiled model.

`load_mjcf_scene` compiles the source with MuJoCo, loads its dynamics model (`jaxmb.io.mjcf.load_mjcf`), matches
the two (`jaxmb.io.mujoco.mujoco_map`) and reads what a `jaxmb.sim.Scene` takes beside the model:

* geoms, each on the jaxmb body that carries its MuJoCo body (`MujocoMap.pose_on_body`): plane, sphere, capsule and
  box as they are; a cylinder as the capsule of its radius and overall length, an ellipsoid as the sphere of its
  largest radius, a mesh as its bounding box in the geom frame (``geom_aabb``, MuJoCo's compile of the mesh), each
  approximation only where ``drop`` names it; the friction ``geom_friction[:, 0]``, zero for a geom of ``condim``
  1. Geoms with ``contype = conaffinity = 0`` that no ``<pair>`` names are visual and left out; height fields and
  SDF geoms are left out where ``drop`` names them.
* the pairs that collide, by MuJoCo's rules (`contact_pairs`): the explicit ``<pair>`` elements, then every two
  geoms whose ``contype`` and ``conaffinity`` bitmasks meet (``contype1 & conaffinity2 | contype2 & conaffinity1``)
  on different weld bodies, neither excluded by ``<exclude>`` nor, unless the model disables ``filterparent``, a
  body and its parent (neither the world); passed to `jaxmb.sim.make_scene` as ``pairs_include``.
* actuators with a joint transmission on a hinge or slide, or a tendon transmission on a tendon the scene builds,
  a fixed gain and no bias or an affine one that is a motor (no bias), a position servo (``biasprm = [0, -kp,
  -kv]``) or a velocity servo (``biasprm = [0, 0, -kv]``): `jaxmb.sim.motor`, `position`, `velocity` with MuJoCo's gear,
  ``ctrlrange`` where ``ctrllimited`` and ``forcerange`` (symmetric) where ``forcelimited``, named as in MuJoCo (on a
  tendon through `jaxmb.sim.on_tendon`); with their activation dynamics where it is none, ``integrator``
  (``intvelocity``), ``filter`` or ``filterexact`` (``position``'s ``timeconst``), one activation, not
  ``actearly``, with ``actrange`` where ``actlimited``.
* joint damping ``dof_damping`` and friction loss ``dof_frictionloss`` per degree of freedom; the linear springs
  of hinge and slide joints, ``jnt_stiffness`` about ``qpos_spring`` (`jaxmb.sim.actuators.JointTerms`), unless the
  model disables springs; joint limits (in the model) and the ranges of ball joints (``max(range)`` of the
  rotation angle, `jaxmb.sim.ball_limits`) enforced unless the model disables them; the integrator
  (``Euler`` -> ``"euler"``, or ``"implicitfast"`` where joints have damping, which MuJoCo's Euler takes
  implicitly unless the model disables ``eulerdamp``; ``RK4`` -> ``"rk4"``; ``implicitfast`` -> ``"implicitfast"``;
  ``implicit`` -> ``"implicit_coriolis"``, with the Coriolis forces' velocity derivative), the solver's
  ``iterations`` and ``tolerance``, and its problem: MuJoCo's PGS, CG and Newton solvers solve one convex
  problem, jaxmb's ``solver="newton"`` with the file's friction ``cone`` and MuJoCo's soft constraints with the
  file's numbers (`jaxmb.sim.mjcf_impedance`; a closed-loop scene steps with ``solver="pgs"``); the time step
  ``dt``.
* the fluid (``density``, ``viscosity``, ``wind``, ``fluidshape``, ``fluidcoef``): MuJoCo's inertia-box and
  ellipsoid models (`jaxmb.sim.mjcf_fluid`), explicit in every integrator; under ``implicit`` and
  ``implicitfast``, which differentiate them, refused unless ``drop`` names ``"integrator"``.
* fixed tendons (`jaxmb.sim.tendons`, `_tendons`): their joints' coefficients, ranges where limited, dead-band
  springs, damping, friction loss and armature, and their rows' ``solref``, ``solimp``, margins and ``invweight0``
  (`tendon_impedance`); actuators on them. MuJoCo's Euler takes tendon damping explicitly, its ``implicitfast`` into
  the step (`jaxmb.sim.tendons.Tendons.implicit`). Spatial tendons through sites only are built
  (`jaxmb.sim.spatial_tendons`); those with pulleys or wrapping around geoms are refused (``"spatial tendons"``),
  and so are tendons with nonlinear or plastic springs, nonlinear damping or actuator force ranges and spatial
  tendons with armature (``"tendons"``).
* the initial configuration ``qpos0`` (``Scene.q0``) and the keyframes in jaxmb's coordinates (`Keyframe`;
  `MjcfScene.init_state` and `MjcfScene.init_ctrl` reset to them as ``mj_resetDataKeyframe`` does).
* equality constraints (``equalities="rows"``, the default with ``impedance="mujoco"``): each active ``connect``,
  ``weld``, ``joint`` and (on fixed tendons) ``tendon`` equality as MuJoCo's bilateral soft rows on the tree
  (`jaxmb.sim.equality_rows`, `_equality_rows`) with its ``solref``, ``solimp`` and MuJoCo's approximate inverse
  inertias (`equality_impedance`), through free and ball joints too; an inactive one is left out (``"disabled"``);
  ``tendon`` equalities on tendons the scene leaves out and other kinds (``flex``) are refused. With
  ``equalities="embedded"`` (the default with ``impedance=None``) the equality constraints that close a loop of
  one-degree-of-freedom joints, as constraints of a `jaxmb.loops.LoopModel`: ``connect`` -> `jaxmb.loops.loop_closure`
  of kind ``"ball"`` (``"planar"`` where the loop is planar, whose third row would vanish), ``weld`` -> ``"weld"`` (as
  ``connect`` where its ``torquescale`` is zero), ``joint`` -> `jaxmb.loops.coupling` (a linear polynomial) or
  `jaxmb.loops.explicit` (the polynomial). The reference configuration is the pose the file draws (``qpos0``). They
  hold exactly, where MuJoCo's are soft (``solref``, ``solimp``). A constraint that cannot be embedded (one through a
  free or ball joint, one that fixes a joint, an inactive one, a tendon's) is refused unless ``drop`` names
  ``"equalities"``.

Everything else the scene would leave out of the file or change, and what the dynamics model leaves out
(`jaxmb.io.mjcf.not_loaded`), belongs to a category (`CATEGORIES`): `load_mjcf_scene` raises `jaxmb.ModelError`
naming each such element and its category unless its ``drop`` option names that category; what it drops is listed
in `MjcfScene.left_out` and named in one `UserWarning`. What changes no motion (`INERT`: sensors, cameras, lights,
skins, custom data, parts the file disables) is listed and never refused.
"""

import dataclasses
import warnings
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxmb.errors import ModelError
from jaxmb.io.mjcf import (
    JOINT_TYPES,
    compile_mjcf,
    load_mjcf,
    mujoco_module,
    mujoco_names,
    not_loaded,
    unique,
)
from jaxmb.io.mujoco import MujocoMap, mujoco_map
from jaxmb.loops import close_loops, coupling, explicit, loop_closure
from jaxmb.sim.actuators import motor, on_tendon, position, velocity
from jaxmb.sim.closed_loops import is_closed, project, spanning_tree
from jaxmb.sim.equality_rows import connect, joint_equality, tendon_equality, weld, with_equality_impedance
from jaxmb.sim.geometry import box, capsule, plane, sphere
from jaxmb.sim.mjcf_fluid import mjcf_fluid
from jaxmb.sim.mjcf_impedance import mujoco_impedance
from jaxmb.sim.scene import Scene, make_scene
from jaxmb.sim.spatial_tendons import spatial_tendon
from jaxmb.sim.tendons import FixedTendon, TendonImpedance
from jaxmb.sim.stepping import init_state

GEOM_TYPES = {0: "plane", 1: "hfield", 2: "sphere", 3: "capsule", 4: "ellipsoid", 5: "cylinder", 6: "box",
              7: "mesh", 8: "sdf"}
"""MuJoCo's ``mjtGeom`` values and their names."""

INTEGRATORS = {0: "euler", 1: "rk4", 2: "implicit_coriolis", 3: "implicitfast"}
"""The jaxmb integrator of each MuJoCo ``mjtIntegrator``, which steps the scene as MuJoCo's does."""

_THINNEST = 1e-6  # half size given to a flat mesh's bounding box along its flat direction


CATEGORIES = {
    "springs": "joint springs (stiffness)",
    "gravcomp": "gravity compensation of bodies",
    "mocap": "mocap bodies (welded to the world at their pose in the file)",
    "fluid": "fluid forces the scene cannot take as MuJoCo does (an inertia box merged with welded bodies)",
    "armature": "armature of actuators that drive no single hinge or slide",
    "tendons": "fixed tendons with parts the scene cannot build (nonlinear springs or damping, actuator force "
               "ranges, plastic springs)",
    "spatial tendons": "spatial tendons with pulleys or wrapping around geoms (paths through sites only are built)",
    "flexes": "flexes",
    "plugins": "plugins",
    "height fields": "geoms on height fields that collide",
    "sdf": "SDF geoms",
    "meshes": "meshes, collided as their bounding boxes",
    "cylinders": "cylinders, collided as capsules of the same radius and overall length",
    "ellipsoids": "ellipsoids, collided as spheres of their largest radius",
    "condim": "torsional and rolling friction (condim 4, 6)",
    "margins": "contact margins and gaps (built with MuJoCo's soft constraints, the Newton solver's default)",
    "priorities": "geom priorities",
    "pair friction": "the friction and condim of explicit contact pairs",
    "actuators": "actuators the scene cannot take, and joints' actuator force ranges",
    "free-joint damping": "damping and friction loss of free joints' translations that differ along the world's "
                          "and the body's axes",
    "equalities": "equality constraints the scene cannot build (as rows: tendon equalities on tendons left out, "
                  "flex equalities; embedded: those that close no loop jaxmb embeds)",
    "integrator": "integrators without a jaxmb counterpart",
    "other": "anything else the dynamics model leaves out",
    "sensors": "sensors", "cameras": "cameras", "lights": "lights", "skins": "skins",
    "custom data": "custom numeric, text and tuple data",
    "hfield assets": "height-field assets (the geoms on them that collide are under \"height fields\")",
    "disabled": "parts the file disables (its <flag>s), which the scene leaves out as MuJoCo does",
}
"""The categories of what `load_mjcf_scene` leaves out of a file or changes in it, each a name for its ``drop``
option, with what it covers."""

INERT = frozenset(("sensors", "cameras", "lights", "skins", "custom data", "hfield assets", "disabled"))
"""The categories that change no motion: listed in `MjcfScene.left_out`, never refused."""

_NOT_LOADED = (("joint springs", "springs"), ("gravity compensation", "gravcomp"), ("mocap bodies", "mocap"),
               ("fluid forces", "fluid"),
               ("armature of actuators", "armature"), ("tendons", "tendons"), ("flexes", "flexes"),
               ("sensors", "sensors"), ("height fields", "hfield assets"), ("skins", "skins"),
               ("cameras", "cameras"), ("lights", "lights"), ("plugins", "plugins"), ("custom data", "custom data"))
# the category of each entry of `jaxmb.io.mjcf.not_loaded`, by the words it begins with


class LeftOut(NamedTuple):
    """One entry of what a scene leaves out of its file or changes: its ``category`` (a key of `CATEGORIES`) and
    ``what``, the elements by name."""

    category: str
    what: str


class Keyframe(NamedTuple):
    """A MuJoCo keyframe in the scene's coordinates (`MjcfScene.init_state` starts from it): ``q`` (nq,)
    (quaternions normalized), ``qd`` (nv,) (for a closed-loop scene the independent velocities ``yd`` (ny,)),
    ``ctrl`` (nu,) the controls of the scene's actuators, ``act`` (na,) the activations of those with activation
    dynamics, ``time`` MuJoCo's ``key_time``."""

    q: np.ndarray
    qd: np.ndarray
    ctrl: np.ndarray
    act: np.ndarray
    time: float


class MjcfScene(NamedTuple):
    """What `load_mjcf_scene` reads.

    scene          the `jaxmb.sim.Scene` (its model a `jaxmb.Model`, or a `jaxmb.loops.LoopModel` where equality
                   constraints close loops); its ``q0`` is the file's ``qpos0``
    dt             MuJoCo's time step ``opt.timestep``
    keyframes      {name: `Keyframe`}; an unnamed keyframe ``k`` is ``"key<k>"``
    mujoco_map     the `jaxmb.io.mujoco.MujocoMap` between the (spanning) tree and ``mj``
    mj             the compiled ``mujoco.MjModel``
    geom_ids       (ng,) the MuJoCo geom of each scene geom
    actuator_ids   (nu,) the MuJoCo actuator of each scene actuator (``ctrl = ctrl_mujoco[actuator_ids]``)
    equality_ids   the MuJoCo equality constraint of each equality of ``scene.equalities`` (rows), or of each loop
                   constraint of the scene's model (embedded)
    left_out       (`LeftOut`, ...): what the scene leaves out of the file or changes, by category: those the
                   ``drop`` option dropped and those that change no motion (`INERT`)
    solver         which solver the scene steps with (``scene.options.solver``) and why
    """

    scene: Scene
    dt: float
    keyframes: dict
    mujoco_map: MujocoMap
    mj: object
    geom_ids: tuple
    actuator_ids: tuple
    equality_ids: tuple
    left_out: tuple
    solver: str

    def init_state(self, keyframe=None):
        """The `jaxmb.sim.State` MuJoCo's reset gives: ``mj_resetData`` (None: the file's ``qpos0``, at rest, zero
        activations, time zero) or ``mj_resetDataKeyframe`` of the keyframe named ``keyframe`` (its ``qpos``,
        ``qvel``, ``act`` and ``time``; its controls are `init_ctrl`'s)."""
        if keyframe is None:
            return init_state(self.scene)
        key = self._keyframe(keyframe)
        return init_state(self.scene, key.q, key.qd, key.act, key.time)

    def init_ctrl(self, keyframe=None):
        """The controls (nu,) MuJoCo's reset leaves: zero (None), or the ``ctrl`` of the keyframe named
        ``keyframe``."""
        if keyframe is None:
            return jnp.zeros(self.scene.nu, self.scene.q0.dtype)
        return jnp.asarray(self._keyframe(keyframe).ctrl, self.scene.q0.dtype)

    def _keyframe(self, name):
        if name not in self.keyframes:
            raise KeyError(f"the scene of {self.mj!r} has no keyframe {name!r}; its keyframes: {list(self.keyframes)}")
        return self.keyframes[name]


def load_mjcf_scene(source, *, assets=None, drop=(), impedance="mujoco", equalities=None,
                    **make_scene_options) -> MjcfScene:
    """The simulator scene of ``source`` (module docstring): a path to an .xml (or .urdf) file, an MJCF document as
    a string, a ``mujoco.MjSpec`` or a compiled ``mujoco.MjModel``, as `jaxmb.io.mjcf.load_mjcf` takes it;
    ``assets`` ({file name: bytes}) gives MuJoCo the files of a string.

    The scene starts at the file's ``qpos0`` (``scene.q0``) and takes the file's options: integrator, iterations,
    tolerance, and the solver: MuJoCo's solvers (PGS, CG, Newton) all solve one convex problem, which jaxmb's
    ``solver="newton"`` solves with the file's friction cone and, with ``impedance="mujoco"`` (the default),
    MuJoCo's soft constraints with the file's ``solref``, ``solimp``, margins and ``impratio``
    (`jaxmb.sim.mjcf_impedance`); ``impedance=None`` keeps jaxmb's rule (``timeconst``, ``regularization``).
    ``equalities``: ``"rows"``, MuJoCo's equality constraints as its soft rows on the tree
    (`jaxmb.sim.equality_rows`), so that the scene follows ``mj_step``; ``"embedded"``, the loops they close
    embedded exactly (`jaxmb.loops`); None: ``"rows"`` with ``impedance="mujoco"``, else ``"embedded"``.
    `MjcfScene.solver` says which solver and why.
    ``make_scene_options`` (`jaxmb.sim.make_scene`'s keywords) replace what is read from the model: e.g.
    ``integrator="rk4"``, ``solver="pgs"``, ``contact="compliant"``.

    What the scene cannot build as the file asks (`CATEGORIES`) raises `jaxmb.ModelError` naming the source, each
    element and the category, unless ``drop`` names its category (a name, a tuple of names, or ``"all"``): then the
    scene leaves it out (or approximates it), lists it in `MjcfScene.left_out` and names it in one `UserWarning`.
    The categories that change no motion (`INERT`: sensors, cameras, ...) are listed and never refused.

    Raises `jaxmb.ModelError` naming the source and the geom, actuator or option that `jaxmb.sim.make_scene`
    rejects.
    """
    mujoco = mujoco_module()
    mj, source_name = compile_mjcf(source, assets)
    dropping = _drop_option(drop, source_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # its entries are in this function's refusal or warning
        tree = load_mjcf(mj)
    m = mujoco_map(tree, mj)
    names = mujoco_names(mj)
    off = _disabled(mujoco, mj)
    left = [LeftOut(_not_loaded_category(e), e) for e in not_loaded(mj, names)
            if not e.startswith(("equality constraints", "fluid forces", "ranges of ball joints", "tendons"))]
    fluid, fluid_left = mjcf_fluid(mj, tree, m, names)
    left += [LeftOut("fluid", e) for e in fluid_left]
    tendon_specs, tendon_ids = _tendons(mujoco, mj, tree, m, off, left)
    tendon_names = {t: spec.name for t, spec in zip(tendon_ids, tendon_specs)}

    geoms, geom_ids, geom_names = _geoms(mj, tree, m, left)
    chosen = [] if off["contact"] else contact_pairs(mj)
    pairs = _scene_pairs(mj, chosen, geom_ids, geom_names, [g.body for g in geoms], left)
    actuator_left, damping_left = [], []
    specs, actuator_ids = _actuators(mujoco, mj, names, off, actuator_left, tendon_names)
    left += [LeftOut("disabled" if off["actuation"] else "actuators", e) for e in actuator_left]
    damping = None if off["damper"] else _per_coordinate(mj, m, mj.dof_damping, "damping", names, damping_left)
    spring_stiffness, spring_reference = (None, None) if off["spring"] else _springs(mj, m)
    frictionloss = None
    if not off["frictionloss"] and np.any(mj.dof_frictionloss > 0):
        frictionloss = _per_coordinate(mj, m, mj.dof_frictionloss, "friction loss", names, damping_left,
                                       coulomb=True)
    left += [LeftOut("free-joint damping", e) for e in damping_left]
    if equalities is None:
        equalities = "rows" if impedance == "mujoco" else "embedded"
    if equalities not in ("rows", "embedded"):
        raise ModelError(f"{source_name}: equalities must be 'rows' (MuJoCo's soft rows on the tree) or 'embedded' "
                         f"(loops closed exactly), got {equalities!r}")
    model, equality_ids, equality_specs = tree, (), ()
    if not off["equality"] and equalities == "embedded":
        model, equality_ids = _closed_model(mujoco, mj, tree, m, names, left)
    elif not off["equality"]:
        equality_specs, equality_ids = _equality_rows(mujoco, mj, tree, m, names, tendon_names, left)
    elif mj.neq:
        left.append(LeftOut("disabled", _listing("equality constraints (disabled in the model)",
                                                 [mj.equality(e).name or f"equality{e}" for e in range(mj.neq)])))
    integrator = INTEGRATORS.get(int(mj.opt.integrator))
    if integrator is None:
        integrator = "implicitfast"
        left.append(LeftOut("integrator", f"the {_enum_name(mujoco.mjtIntegrator(int(mj.opt.integrator)))} "
                                          "integrator (the scene steps with \"implicitfast\")"))
    elif integrator == "euler" and not off["eulerdamp"] and damping is not None and np.any(damping > 0):
        integrator = "implicitfast"  # MuJoCo's Euler takes the joints' damping implicitly
        damped = [spec.name for spec in specs if spec.kv > 0 and spec.transmission == "joint"]
        if damped:
            left.append(LeftOut("integrator", _listing("the Euler integrator's explicit velocity gains of actuators",
                                                       damped)
                                + " (the scene steps with \"implicitfast\", which takes them implicitly, as it "
                                "takes the joints' damping)"))
    if fluid is not None and int(mj.opt.integrator) in (2, 3) and "integrator" not in make_scene_options:
        left.append(LeftOut("integrator", f"the {_enum_name(mujoco.mjtIntegrator(int(mj.opt.integrator)))} "
                                          "integrator's derivative of the fluid forces (the scene takes them "
                                          "explicitly)"))
    solver, why = _solver(mujoco, mj, is_closed(model), make_scene_options)
    if impedance == "mujoco" and solver == "newton" and make_scene_options.get("contact", "constraint") == "constraint":
        left = [e for e in left if e.category != "margins"]  # MuJoCo's soft constraints take them
    _refuse(left, dropping, source_name)

    options = dict(pairs_include=pairs if geoms else None, actuators=specs, damping=damping,
                   frictionloss=frictionloss, spring_stiffness=spring_stiffness, spring_reference=spring_reference,
                   limits=not off["limit"], integrator=integrator,
                   iterations=int(mj.opt.iterations), tolerance=float(mj.opt.tolerance), solver=solver,
                   q0=_qpos0(mujoco, mj, m, model, source_name), fluid=fluid, ball_ranges=_ball_ranges(mj, m),
                   tendons=tendon_specs,
                   implicit_tendons=int(mj.opt.integrator) != int(mujoco.mjtIntegrator.mjINT_EULER),
                   equalities=equality_specs)
    if solver == "newton":  # MuJoCo's problem: the file's friction cone
        options["cone"] = _cone(mujoco, mj)
    options.update(make_scene_options)
    try:
        scene = make_scene(model, geoms, **options)
        if impedance == "mujoco" and scene.options.solver == "newton" and scene.options.contact == "constraint":
            scene = mujoco_impedance(mj, scene, m, geom_ids)
            scene = tendon_impedance(mj, scene, tendon_ids)
            scene = equality_impedance(mujoco, mj, scene, equality_ids)
        elif impedance not in ("mujoco", None):
            raise ModelError(f"impedance must be 'mujoco' (MuJoCo's soft constraints) or None (jaxmb's rule), got "
                             f"{impedance!r}")
    except ModelError as e:
        raise ModelError(f"{source_name}: {e}") from None
    keyframes = _keyframes(mujoco, mj, m, model, actuator_ids)
    dropped = [e for e in left if e.category not in INERT]
    if dropped:
        warnings.warn(f"{source_name}: dropped from the simulator scene: "
                      + "; ".join(f"[{e.category}] {e.what}" for e in dropped), UserWarning, stacklevel=2)
    return MjcfScene(scene, float(mj.opt.timestep), keyframes, m, mj, tuple(geom_ids), tuple(actuator_ids),
                     tuple(equality_ids), tuple(left), why)


def _drop_option(drop, source_name) -> frozenset:
    """The categories ``drop`` names (`load_mjcf_scene`), checked."""
    if isinstance(drop, str):
        drop = tuple(CATEGORIES) if drop == "all" else (drop,)
    drop = tuple(drop)
    unknown = [d for d in drop if d not in CATEGORIES]
    if unknown:
        raise ModelError(f"{source_name}: drop names no category {unknown}; the categories: {list(CATEGORIES)}, "
                         "or \"all\"")
    return frozenset(drop)


def _not_loaded_category(entry) -> str:
    """The category of an entry of `jaxmb.io.mjcf.not_loaded`."""
    return next((c for words, c in _NOT_LOADED if entry.startswith(words)), "other")


def _refuse(left, dropping, source_name):
    """Raise `jaxmb.ModelError` naming each entry of ``left`` that changes the motion and whose category the user
    does not drop, with the ``drop`` option that would."""
    refused = [e for e in left if e.category not in INERT and e.category not in dropping]
    if not refused:
        return
    categories = tuple(dict.fromkeys(e.category for e in refused))
    raise ModelError(f"{source_name}: the simulator scene cannot build "
                     + "; ".join(f"{e.what} (drop {e.category!r})" for e in refused)
                     + f". Pass load_mjcf_scene(..., drop={categories!r}) to leave them out or approximate them "
                     "(listed in MjcfScene.left_out), or drop=\"all\"")


def _solver(mujoco, mj, closed, make_scene_options):
    """``(solver, why)``: the `jaxmb.sim.make_scene` solver of the scene and the sentence that says why."""
    theirs = _enum_name(mujoco.mjtSolver(int(mj.opt.solver)))
    if "solver" in make_scene_options:
        return make_scene_options["solver"], f"{make_scene_options['solver']!r}: passed to load_mjcf_scene"
    cone = make_scene_options.get("cone") or _cone(mujoco, mj)
    loops = ", the loops embedded exactly (MuJoCo's equality rows are soft)" if closed else ""
    return "newton", (f"'newton': MuJoCo's convex problem, which the file's {theirs} solver solves, on the {cone} "
                      f"cone{loops}")


def _cone(mujoco, mj) -> str:
    """The file's friction cone: ``"elliptic"`` or ``"pyramidal"``."""
    return "elliptic" if int(mj.opt.cone) == int(mujoco.mjtCone.mjCONE_ELLIPTIC) else "pyramidal"


def _qpos0(mujoco, mj, m, model, source_name):
    """The file's ``qpos0`` (quaternions normalized, as MuJoCo's reset) in the scene's coordinates (nq,); for a
    closed-loop ``model``, projected onto its loops (its independent coordinates kept): a file's pose need not close
    them (a ``joint`` equality whose polynomial has a constant term)."""
    qpos0 = np.array(mj.qpos0, float)
    mujoco.mj_normalizeQuat(mj, qpos0)
    q0 = jnp.asarray(m.qpos_to_q(qpos0), spanning_tree(model).mass.dtype)
    if not is_closed(model):
        return q0
    q0, closed = project(model, q0, iterations=20)
    if not bool(closed):
        raise ModelError(f"{source_name}: the loops do not close from the file's qpos0; draw the bodies near an "
                         "assembly of their loops")
    return q0


def _disabled(mujoco, mj) -> dict:
    """Which of the scene's parts the model's ``opt.disableflags`` turn off (``constraint`` turns off contact,
    limits, equality constraints and friction loss together)."""
    flags, bit = int(mj.opt.disableflags), mujoco.mjtDisableBit
    on = lambda b: bool(flags & int(b))
    constraint = on(bit.mjDSBL_CONSTRAINT)
    return dict(contact=constraint or on(bit.mjDSBL_CONTACT), limit=constraint or on(bit.mjDSBL_LIMIT),
                equality=constraint or on(bit.mjDSBL_EQUALITY),
                frictionloss=constraint or on(bit.mjDSBL_FRICTIONLOSS), damper=on(bit.mjDSBL_DAMPER),
                spring=on(bit.mjDSBL_SPRING), eulerdamp=on(bit.mjDSBL_EULERDAMP),
                actuation=on(bit.mjDSBL_ACTUATION), clampctrl=on(bit.mjDSBL_CLAMPCTRL))


def _listing(what, items):
    return f"{what} {', '.join(repr(n) for n in items)}"


def _enum_name(value):
    """``"joint"`` of ``mjtTrn.mjTRN_JOINT``: a MuJoCo enum value's name without its prefix, in lower case."""
    return value.name.split("_", 1)[1].lower()


# -- geoms and pairs ----------------------------------------------------------------------------------------------


def geom_names(mj) -> list:
    """The scene's name of each MuJoCo geom: MuJoCo's, else ``"geom<id>"`` (with a suffix where taken)."""
    given = [mj.geom(g).name for g in range(mj.ngeom)]
    taken = {n for n in given if n}
    return [n or unique(f"geom{g}", taken) for g, n in enumerate(given)]


def _geoms(mj, tree, m, left):
    """``(geoms, MuJoCo ids, names of all MuJoCo geoms)``: the `jaxmb.sim.geometry` shapes of the geoms that can
    collide (module docstring); what is replaced or left out goes to ``left``."""
    names = geom_names(mj)
    paired = {int(g) for g in mj.pair_geom1} | {int(g) for g in mj.pair_geom2}
    geoms, ids = [], []
    replaced = {"cylinder": [], "ellipsoid": [], "mesh": []}
    unsupported = {"hfield": [], "sdf": []}
    for g in range(mj.ngeom):
        if mj.geom_contype[g] == 0 and mj.geom_conaffinity[g] == 0 and g not in paired:
            continue  # visual
        kind = GEOM_TYPES[int(mj.geom_type[g])]
        if kind in unsupported:
            unsupported[kind].append(names[g])
            continue
        b, T = m.pose_on_body(int(mj.geom_bodyid[g]), mj.geom_pos[g], mj.geom_quat[g])
        body = None if b < 0 else tree.body_names[b]
        R, p = np.asarray(T.R), np.asarray(T.p)
        size = np.asarray(mj.geom_size[g], float)
        friction = 0.0 if mj.geom_condim[g] == 1 else float(mj.geom_friction[g, 0])
        named = dict(name=names[g], friction=friction)
        if kind == "plane":
            geom = plane(body, R[:, 2], p, **named)
        elif kind == "sphere":
            geom = sphere(body, size[0], p, **named)
        elif kind == "ellipsoid":
            geom = sphere(body, size.max(), p, **named)
        elif kind == "capsule":
            geom = capsule(body, size[0], size[1], p, R, **named)
        elif kind == "cylinder":
            geom = capsule(body, size[0], max(size[1] - size[0], 0.0), p, R, **named)
        elif kind == "box":
            geom = box(body, size, p, R, **named)
        else:  # mesh: its bounding box in the geom frame, (centre, half sizes)
            centre, half = np.asarray(mj.geom_aabb[g, :3], float), np.asarray(mj.geom_aabb[g, 3:], float)
            geom = box(body, np.maximum(half, _THINNEST), p + R @ centre, R, **named)
        if kind in replaced:
            replaced[kind].append(names[g])
        geoms.append(geom)
        ids.append(g)
    for kind, category, what in (
            ("cylinder", "cylinders", "cylinders replaced by capsules of the same radius and overall length"),
            ("ellipsoid", "ellipsoids", "ellipsoids replaced by spheres of their largest radius"),
            ("mesh", "meshes", "meshes replaced by their bounding boxes")):
        if replaced[kind]:
            left.append(LeftOut(category, _listing(what, replaced[kind])))
    for kind, category in (("hfield", "height fields"), ("sdf", "sdf")):
        if unsupported[kind]:
            left.append(LeftOut(category, _listing(f"geoms of kind {kind} (no jaxmb shape)", unsupported[kind])))
    condim = [names[g] for g in ids if mj.geom_condim[g] > 3]
    if condim:
        left.append(LeftOut("condim", _listing("torsional and rolling friction (condim 4, 6) of geoms", condim)))
    margin = [names[g] for g in ids if mj.geom_margin[g] != 0 or mj.geom_gap[g] != 0]
    if margin:
        left.append(LeftOut("margins", _listing("contact margins and gaps of geoms", margin)))
    priority = [names[g] for g in ids if mj.geom_priority[g] != 0]
    if priority:
        left.append(LeftOut("priorities", _listing("priorities of geoms (a pair's friction is the larger of its two "
                                                   "geoms')", priority)))
    return geoms, ids, names


def contact_pairs(mj) -> list:
    """``[(geom1, geom2, pair)]``: the MuJoCo geom pairs that MuJoCo checks for contact, by its rules (module
    docstring): each explicit ``<pair>`` (``pair`` its index), then each other pair of geoms whose bitmasks meet,
    on different weld bodies, not excluded and (with ``filterparent``) not parent and child (``pair`` -1).
    Plane-plane and plane-height-field pairs, which MuJoCo never collides, are left out."""
    mujoco = mujoco_module()
    out, seen = [], set()
    for k in range(mj.npair):
        g1, g2 = int(mj.pair_geom1[k]), int(mj.pair_geom2[k])
        out.append((g1, g2, k))
        seen.add(frozenset((g1, g2)))
    filterparent = not int(mj.opt.disableflags) & int(mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
    excluded = {frozenset((int(s) >> 16, int(s) & 0xFFFF)) for s in mj.exclude_signature}
    weld, parent = np.asarray(mj.body_weldid), np.asarray(mj.body_parentid)
    contype, conaffinity = np.asarray(mj.geom_contype), np.asarray(mj.geom_conaffinity)
    never = {frozenset(("plane",)), frozenset(("plane", "hfield"))}
    for g1 in range(mj.ngeom):
        meets = np.flatnonzero((contype[g1] & conaffinity) | (contype & conaffinity[g1]))
        for g2 in meets[meets > g1]:
            g2 = int(g2)
            b1, b2 = int(mj.geom_bodyid[g1]), int(mj.geom_bodyid[g2])
            w1, w2 = weld[b1], weld[b2]
            if w1 == w2 or frozenset((b1, b2)) in excluded or frozenset((g1, g2)) in seen:
                continue
            if filterparent and w1 != 0 and w2 != 0 and (w1 == weld[parent[w2]] or w2 == weld[parent[w1]]):
                continue
            kinds = frozenset(GEOM_TYPES.get(int(mj.geom_type[g]), "") for g in (g1, g2))
            if kinds in never:
                continue
            out.append((g1, g2, -1))
    return out


def _scene_pairs(mj, chosen, geom_ids, names, bodies, left):
    """``pairs_include`` (geom names) of the chosen MuJoCo pairs whose geoms are both in the scene and can
    collide in jaxmb (not both fixed to the world, not two planes); the explicit pairs whose friction or condim
    the scene cannot give go to ``left``."""
    body = dict(zip(geom_ids, bodies))
    out, friction = [], []
    for g1, g2, k in chosen:
        if g1 not in body or g2 not in body or (body[g1] is None and body[g2] is None):
            continue
        if mj.geom_type[g1] == 0 and mj.geom_type[g2] == 0:
            continue
        out.append((names[g1], names[g2]))
        if k >= 0:
            mu = [0.0 if mj.geom_condim[g] == 1 else float(mj.geom_friction[g, 0]) for g in (g1, g2)]
            if mj.pair_dim[k] != 3 or not np.isclose(mj.pair_friction[k, 0], max(mu)):
                friction.append(mj.pair(k).name or f"{names[g1]}-{names[g2]}")
    if friction:
        left.append(LeftOut("pair friction", _listing("friction and condim of contact pairs (their geoms' larger "
                                                      "friction, condim 3, instead)", friction)))
    return out


# -- actuators ----------------------------------------------------------------------------------------------------


def _actuators(mujoco, mj, names, off, left, tendon_names):
    """``(specs, MuJoCo ids)`` of the actuators the scene takes (module docstring); the others, each with why, go
    to ``left``."""
    if off["actuation"]:
        if mj.nu:
            left.append(_listing("actuators (actuation disabled in the model)",
                                 [mj.actuator(a).name or f"actuator{a}" for a in range(mj.nu)]))
        return [], []
    specs, ids, dropped = [], [], []
    for a in range(mj.nu):
        label = mj.actuator(a).name or f"actuator{a}"
        spec = _actuator(mujoco, mj, names, a, label, off, tendon_names)
        if isinstance(spec, str):
            dropped.append(f"{label!r} ({spec})")
        else:
            specs.append(spec)
            ids.append(a)
    if dropped:
        left.append("actuators " + ", ".join(dropped))
    frc = [names.joints[j] for j in range(mj.njnt) if mj.jnt_actfrclimited[j]]
    if frc:
        left.append(_listing("actuator force ranges of joints", frc))
    return specs, ids


def _actuator(mujoco, mj, names, a, label, off, tendon_names):
    """The `jaxmb.sim.actuators` spec of MuJoCo actuator ``a``, or why the scene cannot take it (a string);
    ``tendon_names`` {MuJoCo tendon: name} of the scene's tendons."""
    trn, dyn = int(mj.actuator_trntype[a]), int(mj.actuator_dyntype[a])
    gaintype, biastype = int(mj.actuator_gaintype[a]), int(mj.actuator_biastype[a])
    j = int(mj.actuator_trnid[a, 0])
    on_a_tendon = trn == mujoco.mjtTrn.mjTRN_TENDON
    if on_a_tendon:
        if j not in tendon_names:
            return f"on the tendon {mj.tendon(j).name or f'tendon{j}'!r}, which the scene leaves out"
    elif trn not in (mujoco.mjtTrn.mjTRN_JOINT, mujoco.mjtTrn.mjTRN_JOINTINPARENT):
        return f"{_enum_name(mujoco.mjtTrn(trn))} transmission"
    elif JOINT_TYPES[mj.jnt_type[j]] not in ("hinge", "slide"):
        return f"on the {JOINT_TYPES[mj.jnt_type[j]]} joint {names.joints[j]!r}"
    dyn_name = {mujoco.mjtDyn.mjDYN_NONE: "none", mujoco.mjtDyn.mjDYN_INTEGRATOR: "integrator",
                mujoco.mjtDyn.mjDYN_FILTER: "filter", mujoco.mjtDyn.mjDYN_FILTEREXACT: "filterexact"}.get(dyn)
    if dyn_name is None:
        return f"{_enum_name(mujoco.mjtDyn(dyn))} activation dynamics"
    if dyn_name != "none" and (mj.actuator_actearly[a] or mj.actuator_actnum[a] != 1):
        return "activation dynamics that act early or have several activations"
    if dyn_name in ("filter", "filterexact") and not mj.actuator_dynprm[a, 0] > 0:
        return "a filter of zero time constant"
    if gaintype != mujoco.mjtGain.mjGAIN_FIXED or biastype not in (mujoco.mjtBias.mjBIAS_NONE,
                                                                  mujoco.mjtBias.mjBIAS_AFFINE):
        return "a gain or bias that is not fixed or affine"
    gain = float(mj.actuator_gainprm[a, 0])
    bias = np.zeros(3)
    if biastype == mujoco.mjtBias.mjBIAS_AFFINE:
        bias = np.asarray(mj.actuator_biasprm[a, :3], float)
    gear = float(mj.actuator_gear[a, 0])
    ctrl_range = None
    if mj.actuator_ctrllimited[a] and not off["clampctrl"]:
        ctrl_range = tuple(float(x) for x in mj.actuator_ctrlrange[a])
    force_limit = None
    if mj.actuator_forcelimited[a]:
        lo, hi = (float(x) for x in mj.actuator_forcerange[a])
        if lo != -hi:
            return f"the asymmetric force range [{lo:g}, {hi:g}]"
        force_limit = abs(gear) * hi
    joint = tendon_names[j] if on_a_tendon else names.joints[j]
    common = dict(force_limit=force_limit, ctrl_range=ctrl_range, name=label)
    if not bias.any():
        spec = motor(joint, gear * gain, **common)
    elif bias[0] == 0 and bias[1] == -gain and bias[2] <= 0:
        if not on_a_tendon and mj.qpos0[mj.jnt_qposadr[j]] != 0:
            return f"a position servo on joint {joint!r}, whose reference position is not zero"
        spec = position(joint, gain, -bias[2], gear=gear, **common)
    elif bias[0] == 0 and bias[1] == 0 and bias[2] == -gain:
        spec = velocity(joint, gain, gear=gear, **common)
    else:
        return f"a general actuator (gain {gain:g}, bias {bias.tolist()}) that is no motor, position or velocity servo"
    if on_a_tendon:  # its length the tendon's (MuJoCo's, qpos0 included: `jaxmb.sim.tendons`)
        spec = on_tendon(spec, joint)
    if dyn_name == "none":
        return spec
    act_range = tuple(float(x) for x in mj.actuator_actrange[a]) if mj.actuator_actlimited[a] else (-np.inf, np.inf)
    return dataclasses.replace(spec, dyn=dyn_name, time_constant=float(mj.actuator_dynprm[a, 0]), act_range=act_range)


# -- tendons ------------------------------------------------------------------------------------------------------


def _tendons(mujoco, mj, tree, m, off, left):
    """``(specs, MuJoCo ids)``: the `jaxmb.sim.tendons.FixedTendon` of each fixed tendon (its joints' coefficients
    ``wrap_prm``, its length at jaxmb's zero from ``qpos0``, ``tendon_range`` where limited, ``tendon_stiffness``
    about ``tendon_lengthspring``, ``tendon_damping``, ``tendon_frictionloss``, each unless the file disables it,
    ``tendon_armature``), and the `jaxmb.sim.spatial_tendons.SpatialTendon` of each spatial tendon through sites
    only (each site's point in its jaxmb body's frame, the same numbers but ``armature``); the spatial tendons with
    pulleys or wrapping and what a tendon has beyond these go to ``left``."""
    specs, ids, spatial, beyond = [], [], [], []
    taken = set()
    for t in range(mj.ntendon):
        label = unique(mj.tendon(t).name or f"tendon{t}", taken)
        adr, num = int(mj.tendon_adr[t]), int(mj.tendon_num[t])
        wraps = range(adr, adr + num)
        kinds = {int(mj.wrap_type[w]) for w in wraps}
        through_sites = kinds == {int(mujoco.mjtWrap.mjWRAP_SITE)}
        if kinds != {int(mujoco.mjtWrap.mjWRAP_JOINT)} and not through_sites:
            spatial.append(label)
            continue
        parts = [what for what, x in (("stiffnesspoly", mj.tendon_stiffnesspoly[t]),
                                      ("dampingpoly", mj.tendon_dampingpoly[t]),
                                      ("actuatorfrcrange", mj.tendon_actfrclimited[t]),
                                      ("springyield", mj.tendon_springyield[t])) if np.any(x != 0)]
        if through_sites and mj.tendon_armature[t] != 0:
            parts.append("armature on a spatial tendon")
        if parts:
            beyond.append(f"{label!r} ({', '.join(parts)})")
            continue
        limited = mj.tendon_limited[t] and not off["limit"]
        if through_sites:
            sites = []
            for w in wraps:
                s = int(mj.wrap_objid[w])
                i, pose = m.pose_on_body(int(mj.site_bodyid[s]), mj.site_pos[s], mj.site_quat[s])
                sites.append((None if i < 0 else tree.body_names[i], tuple(float(x) for x in pose.p)))
            specs.append(spatial_tendon(
                label, sites, tuple(float(x) for x in mj.tendon_range[t]) if limited else None,
                0.0 if off["spring"] else float(mj.tendon_stiffness[t]),
                tuple(float(x) for x in mj.tendon_lengthspring[t]),
                0.0 if off["damper"] else float(mj.tendon_damping[t]),
                0.0 if off["frictionloss"] else float(mj.tendon_frictionloss[t])))
            ids.append(t)
            continue
        joints = {}
        length0 = 0.0
        for w in wraps:
            j, coef = int(mj.wrap_objid[w]), float(mj.wrap_prm[w])
            name = m.joint_names[j]
            joints[name] = joints.get(name, 0.0) + coef
            length0 += coef * float(mj.qpos0[mj.jnt_qposadr[j]])
        specs.append(FixedTendon(
            label, tuple(joints.items()), tuple(float(x) for x in mj.tendon_range[t]) if limited else (-np.inf, np.inf),
            0.0 if off["spring"] else float(mj.tendon_stiffness[t]), tuple(float(x) for x in mj.tendon_lengthspring[t]),
            0.0 if off["damper"] else float(mj.tendon_damping[t]),
            0.0 if off["frictionloss"] else float(mj.tendon_frictionloss[t]), length0, float(mj.tendon_armature[t])))
        ids.append(t)
    if spatial:
        left.append(LeftOut("spatial tendons", _listing("spatial tendons with pulleys or wrapping around geoms",
                                                        spatial)))
    if beyond:
        left.append(LeftOut("tendons", "fixed tendons " + ", ".join(beyond)))
    return specs, ids


def tendon_impedance(mj, scene, tendon_ids):
    """``scene`` with MuJoCo's numbers of its tendon rows (`jaxmb.sim.tendons.TendonImpedance`): each limited
    tendon's ``tendon_solref_lim``, ``tendon_solimp_lim``, ``tendon_margin``, each tendon with friction's
    ``tendon_solref_fri``, ``tendon_solimp_fri``, every tendon's ``tendon_invweight0``."""
    ten = scene.tendons
    if ten is None:
        return scene
    ids = np.asarray(tendon_ids, int)
    li, fi = ids[np.asarray(ten.limited, int)], ids[np.asarray(ten.friction, int)]
    numbers = (mj.tendon_solref_lim[li].reshape(-1, 2), mj.tendon_solimp_lim[li].reshape(-1, 5), mj.tendon_margin[li],
               mj.tendon_solref_fri[fi].reshape(-1, 2), mj.tendon_solimp_fri[fi].reshape(-1, 5),
               mj.tendon_invweight0[ids])
    dtype = ten.coef.dtype
    imp = TendonImpedance(*(jnp.asarray(np.asarray(x, float), dtype) for x in numbers))
    return scene.replace(tendons=ten.replace(impedance=imp))


# -- joints -------------------------------------------------------------------------------------------------------


def _per_coordinate(mj, m, values, what, names, left, coulomb=False):
    """MuJoCo's per-dof ``values`` (nv,) in jaxmb's coordinate order. MuJoCo applies a free joint's translational
    values along the world axes, jaxmb along the body's: the same forces for equal damping, other forces for
    unequal damping or for Coulomb friction (``coulomb``) that is not zero, so those joints go to ``left``."""
    out = np.zeros(mj.nv)
    out[m.v_index] = np.asarray(values, float)
    odd = []
    for j in range(mj.njnt):
        if JOINT_TYPES[mj.jnt_type[j]] == "free":
            v = np.asarray(values[mj.jnt_dofadr[j]:mj.jnt_dofadr[j] + 3], float)
            if np.ptp(v) > 0 or (coulomb and v.any()):
                odd.append(names.joints[j])
    if odd:
        left.append(_listing(f"{what} of the translation of free joints (applied along the body's axes)", odd))
    return out


def _ball_ranges(mj, m):
    """{jaxmb joint: angle} of the limited ball joints: MuJoCo's ``max(jnt_range)`` (radians), the one bound it
    enforces (`jaxmb.sim.ball_limits`); None where none is limited."""
    out = {m.joint_names[j]: float(np.max(mj.jnt_range[j])) for j in range(mj.njnt)
           if JOINT_TYPES[mj.jnt_type[j]] == "ball" and mj.jnt_limited[j]}
    return out or None


def _springs(mj, m):
    """``(spring_stiffness, spring_reference)`` (nv,) each in jaxmb's coordinate order: MuJoCo's ``jnt_stiffness``
    and ``qpos_spring`` (less ``qpos0``, jaxmb's zero) on the coordinate of each hinge and slide joint with a
    linear spring; ``(None, None)`` where none has one. The springs of ball and free joints and the nonlinear ones
    (``stiffnesspoly``) are named by `jaxmb.io.mjcf.not_loaded`."""
    stiffness, reference = np.zeros(mj.nv), np.zeros(mj.nv)
    for j in range(mj.njnt):
        if mj.jnt_stiffness[j] == 0 or np.any(mj.jnt_stiffnesspoly[j] != 0):
            continue
        if JOINT_TYPES[mj.jnt_type[j]] in ("hinge", "slide"):
            v, a = m.v_index[mj.jnt_dofadr[j]], mj.jnt_qposadr[j]
            stiffness[v] = mj.jnt_stiffness[j]
            reference[v] = mj.qpos_spring[a] - mj.qpos0[a]
    if not stiffness.any():
        return None, None
    return stiffness, reference


# -- equality constraints -----------------------------------------------------------------------------------------


def polynomial(x, coef):
    """``coef[0] + coef[1] x + ... + coef[4] x^4`` (1,) of ``x`` (1,): MuJoCo's joint equality."""
    return jnp.polyval(coef[::-1], x)


def _closed_model(mujoco, mj, tree, m, names, left):
    """``(model, MuJoCo ids)``: ``tree`` closed by the equality constraints that map (module docstring) as a
    `jaxmb.loops.LoopModel` (``tree`` itself where none does), with the pose the file draws (``qpos0``, where MuJoCo
    computes the anchors) as the reference configuration; the others, each with why, go to ``left``."""
    qpos0 = np.array(mj.qpos0, float)
    mujoco.mj_normalizeQuat(mj, qpos0)
    q_ref = jnp.asarray(m.qpos_to_q(qpos0), tree.mass.dtype)
    constraints, ids, dropped = [], [], []
    for e in range(mj.neq):
        label = mj.equality(e).name or f"equality{e}"
        c = _equality(mujoco, mj, tree, m, names, e, q_ref)
        if isinstance(c, str):
            dropped.append(f"{label!r} ({c})")
            continue
        try:
            close_loops(tree, constraints + [c], q_reference=q_ref)
        except ModelError as err:
            dropped.append(f"{label!r} ({err})")
            continue
        constraints.append(c)
        ids.append(e)
    if dropped:
        left.append(LeftOut("equalities", "equality constraints " + ", ".join(dropped)))
    if not constraints:
        return tree, ()
    return close_loops(tree, constraints, q_reference=q_ref, name=tree.name), tuple(ids)


def _equality_ends(mujoco, mj, m, tree, e):
    """``((a, Pa), (b, Pb))``: the two ends of MuJoCo's connect or weld equality ``e``, each the jaxmb body it is on
    (None: the world) and its frame ``(R, p)`` in that body, at ``qpos0``: sites as they are; a connect's anchor
    in body 1 and the same point in body 2; a weld's body-2 anchor ``data[0:3]`` meeting body 1's point
    ``data[3:6]``, body 2 turned by ``relpose`` from body 1."""
    data = np.asarray(mj.eq_data[e], float)
    o1, o2 = int(mj.eq_obj1id[e]), int(mj.eq_obj2id[e])
    if int(mj.eq_objtype[e]) == mujoco.mjtObj.mjOBJ_SITE:
        ends = [(int(mj.site_bodyid[s]), mj.site_pos[s], mj.site_quat[s]) for s in (o1, o2)]
    elif int(mj.eq_type[e]) == mujoco.mjtEq.mjEQ_CONNECT:
        ends = [(o1, data[0:3], (1.0, 0.0, 0.0, 0.0)), (o2, data[3:6], (1.0, 0.0, 0.0, 0.0))]
    else:
        ends = [(o1, data[3:6], data[6:10]), (o2, data[0:3], (1.0, 0.0, 0.0, 0.0))]
    frames = []
    for b, pos, quat in ends:
        i, T = m.pose_on_body(b, pos, quat)
        frames.append((None if i < 0 else tree.body_names[i], (np.asarray(T.R), np.asarray(T.p))))
    return frames


def _equality(mujoco, mj, tree, m, names, e, q_ref):
    """The `jaxmb.loops` constraint of MuJoCo equality ``e``, or why it has none (a string)."""
    eq = mujoco.mjtEq
    kind = int(mj.eq_type[e])
    if not mj.eq_active0[e]:
        return "inactive at the start"
    data = np.asarray(mj.eq_data[e], float)
    if kind in (eq.mjEQ_CONNECT, eq.mjEQ_WELD):
        (a, Pa), (b, Pb) = _equality_ends(mujoco, mj, m, tree, e)
        if a == b:
            return "both ends are on one body" if a is not None else "both ends are fixed to the world"
        if kind == eq.mjEQ_WELD and data[10] != 0:
            return loop_closure(a, b, Pa, Pb, kind="weld")
        return _ball_or_planar(tree, loop_closure(a, b, Pa, Pb, kind="ball"), q_ref)
    if kind == eq.mjEQ_JOINT:
        j1, j2 = int(mj.eq_obj1id[e]), int(mj.eq_obj2id[e])
        if j2 < 0:
            return f"it fixes joint {names.joints[j1]!r}, a loop of no joint"
        coef = data[:5]
        if not coef[2:].any():
            return coupling(names.joints[j1], names.joints[j2], coef[1], coef[0])
        return explicit([names.joints[j1]], [names.joints[j2]], polynomial, (coef,))
    return f"a {_enum_name(mujoco.mjtEq(kind))} equality"


def _ball_or_planar(tree, closure, q_ref):
    """``closure`` (a ball joint's three rows, MuJoCo's ``connect``), or, where its loop is planar, the planar
    closure of its two in-plane rows: the third row of a planar loop vanishes identically and would leave the
    constraint Jacobian short of rank. The loop counts as planar where one direction (in frame a's axes) is
    orthogonal to every column of the Jacobian at the reference configuration and at a configuration turned from
    it by 0.3 on each of the loop's coordinates."""
    try:
        bound = closure.bind(tree)
    except ModelError:
        return closure  # close_loops says why
    K = np.asarray(bound.jacobian(tree, bound.params, q_ref))
    U, s, _ = np.linalg.svd(K)
    if len(s) < 3 or s[2] > 1e-9 * s[0] or s[1] <= 1e-9 * s[0]:
        return closure
    n = U[:, 2]
    turned = q_ref.at[jnp.asarray(bound.coordinates)].add(0.3)
    K2 = np.asarray(bound.jacobian(tree, bound.params, turned))
    if np.abs(n @ K2).max() > 1e-9 * np.abs(K2).max():
        return closure
    return loop_closure(closure.a, closure.b, closure.placement_a, closure.placement_b, kind="planar", axis=n)


def _equality_rows(mujoco, mj, tree, m, names, tendon_names, left):
    """``(specs, MuJoCo ids)``: the `jaxmb.sim.equality_rows` spec of each active equality on the tree (module
    docstring); the inactive ones go to ``left`` as disabled, those the rows cannot build, each with why, as
    ``"equalities"``. An equality whose two ends are on one jaxmb body (bodies welded together) has a zero Jacobian,
    no force in MuJoCo: it is left out."""
    specs, ids, inactive, dropped = [], [], [], []
    for e in range(mj.neq):
        label = mj.equality(e).name or f"equality{e}"
        if not mj.eq_active0[e]:
            inactive.append(label)
            continue
        spec = _equality_spec(mujoco, mj, tree, m, names, tendon_names, e, label)
        if isinstance(spec, str):
            dropped.append(f"{label!r} ({spec})")
        elif spec is not None:
            specs.append(spec)
            ids.append(e)
    if inactive:
        left.append(LeftOut("disabled", _listing("equality constraints inactive at the start", inactive)))
    if dropped:
        left.append(LeftOut("equalities", "equality constraints " + ", ".join(dropped)))
    return tuple(specs), tuple(ids)


def _equality_spec(mujoco, mj, tree, m, names, tendon_names, e, label):
    """The `jaxmb.sim.equality_rows` spec of MuJoCo equality ``e``, None where it acts on nothing (both ends on one
    body), or why the rows cannot build it (a string)."""
    eq = mujoco.mjtEq
    kind = int(mj.eq_type[e])
    data = np.asarray(mj.eq_data[e], float)
    o1, o2 = int(mj.eq_obj1id[e]), int(mj.eq_obj2id[e])
    if kind in (eq.mjEQ_CONNECT, eq.mjEQ_WELD):
        (a, Pa), (b, Pb) = _equality_ends(mujoco, mj, m, tree, e)
        if a == b:
            return None
        if kind == eq.mjEQ_CONNECT:
            return connect(label, a, b, Pa[1], Pb[1])
        return weld(label, a, b, Pa, Pb, torquescale=float(data[10]))
    if kind in (eq.mjEQ_JOINT, eq.mjEQ_TENDON):
        coef = tuple(float(c) for c in data[:5])
        if kind == eq.mjEQ_JOINT:
            joints = [m.joint_names[j] if j >= 0 else None for j in (o1, o2)]  # (MuJoCo's: hinges and slides)
            return joint_equality(label, *joints, polycoef=coef)
        missing = [mj.tendon(t).name or f"tendon{t}" for t in (o1, o2) if t >= 0 and t not in tendon_names]
        if missing:
            return f"on tendons {missing}, which the scene leaves out"
        spatial = [mj.tendon(t).name or f"tendon{t}" for t in (o1, o2)
                   if t >= 0 and int(mj.wrap_type[mj.tendon_adr[t]]) != int(mujoco.mjtWrap.mjWRAP_JOINT)]
        if spatial:
            return f"on spatial tendons {spatial} (tendon equalities couple fixed tendons)"
        return tendon_equality(label, tendon_names[o1], tendon_names.get(o2), polycoef=coef)
    return f"a {_enum_name(mujoco.mjtEq(kind))} equality"


def equality_impedance(mujoco, mj, scene, equality_ids):
    """``scene`` with MuJoCo's numbers of its equality rows (`jaxmb.sim.equality_rows.EqualityImpedance`): each
    equality's ``eq_solref`` and ``eq_solimp``, and each row's ``diagApprox``: the two bodies' ``body_invweight0``
    (translational on the position rows, rotational on a weld's rotation rows), the two joints' ``dof_invweight0``
    or the two tendons' ``tendon_invweight0``."""
    eqs = scene.equalities
    if eqs is None:
        return scene
    ids = np.asarray(equality_ids, int)
    weight = []
    for e in ids:
        kind, o1, o2 = int(mj.eq_type[e]), int(mj.eq_obj1id[e]), int(mj.eq_obj2id[e])
        if kind in (mujoco.mjtEq.mjEQ_CONNECT, mujoco.mjtEq.mjEQ_WELD):
            if int(mj.eq_objtype[e]) == mujoco.mjtObj.mjOBJ_SITE:
                o1, o2 = int(mj.site_bodyid[o1]), int(mj.site_bodyid[o2])
            tran, rot = (mj.body_invweight0[o1, k] + mj.body_invweight0[o2, k] for k in (0, 1))
            weight += [tran] * 3 + ([rot] * 3 if kind == mujoco.mjtEq.mjEQ_WELD else [])
        elif kind == mujoco.mjtEq.mjEQ_JOINT:
            weight.append(sum(mj.dof_invweight0[mj.jnt_dofadr[j]] for j in (o1, o2) if j >= 0))
        else:
            weight.append(sum(mj.tendon_invweight0[t] for t in (o1, o2) if t >= 0))
    return with_equality_impedance(scene, mj.eq_solref[ids].reshape(-1, 2), mj.eq_solimp[ids].reshape(-1, 5),
                                   np.asarray(weight, float))


# -- keyframes ----------------------------------------------------------------------------------------------------


def _keyframes(mujoco, mj, m, model, actuator_ids):
    """{name: `Keyframe`} of the model's keyframes in the scene's coordinates."""
    out, taken = {}, set()
    for k in range(mj.nkey):
        qpos = np.array(mj.key_qpos[k], float)
        mujoco.mj_normalizeQuat(mj, qpos)
        q = m.qpos_to_q(qpos)
        qd = m.qvel_to_qd(q, mj.key_qvel[k])
        if is_closed(model):
            qd = qd[np.asarray(model.y_v_index, int)]
        ctrl = np.asarray(mj.key_ctrl[k], float)[np.asarray(actuator_ids, int)]
        act = np.array([mj.key_act[k, mj.actuator_actadr[a]] for a in actuator_ids if mj.actuator_dyntype[a]], float)
        name = unique(mj.key(k).name or f"key{k}", taken)
        out[name] = Keyframe(q, qd, ctrl, act, float(mj.key_time[k]))
    return out
