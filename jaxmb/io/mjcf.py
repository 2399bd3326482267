"""MJCF loading through MuJoCo's compiler: the dynamics model of a compiled ``mujoco.MjModel`` as a `jaxmb.Model`.

MuJoCo's own compiler reads the source (an MJCF or URDF file, an MJCF string, a ``mujoco.MjSpec``, or an already
compiled ``mujoco.MjModel``), so defaults, includes, frames, ``fromto``, inertias computed from geoms and every
other compile-time rule are MuJoCo's. The loader then reads the compiled arrays (``body_*``, ``jnt_*``,
``dof_armature``, ``site_*``, ``opt.gravity``) into a `jaxmb.model.ModelBuilder`.

Frames. MuJoCo turns a body about the anchor ``jnt_pos`` of its hinge or ball joint, given in the body frame; jaxmb
turns a body about its joint frame's origin. So the jaxmb frame of a MuJoCo body with joints sits at the anchor of
its last hinge or ball joint (`body_offset`): the MuJoCo body frame is the jaxmb body frame translated by
``-body_offset``. Centres of mass, child placements and sites are expressed relative to it, so the dynamics are
MuJoCo's. A slide or free joint needs no anchor and leaves the frame at the MuJoCo body origin.

Joints. ``hinge`` -> `jaxmb.joints.revolute`, ``slide`` -> ``prismatic``, ``ball`` -> ``spherical``, ``free`` ->
``free``. A hinge or slide coordinate is measured from MuJoCo's reference position: ``q = qpos - qpos0`` (``qpos0``
is the joint's ``ref``, 0 unless the file sets one), so ``q = 0`` is the pose the file draws; ranges of limited
hinges and slides become ``q_lower, q_upper`` in the same coordinate. Armature is ``dof_armature`` plus the
armature of the actuators that drive a hinge or slide directly, reflected through their gear (``gear^2
actuator_armature``, as MuJoCo adds it to the mass matrix).

Several joints on one MuJoCo body become a chain of jaxmb bodies, one per joint, with the same motion: the bodies of
the first joints are massless and named ``"<body>/<joint>"``; the last one carries the body's inertia and the MuJoCo
body's name. A body without joints is welded to its parent (a fixed joint, merged by the builder) and stays a frame
of that name; a site becomes a frame (`jaxmb.model.ModelBuilder.add_frame`) of its name.

Names (`mujoco_names`): MuJoCo's names where it has them. An unnamed body is ``"body<id>"``; an unnamed joint is
``"<body>_<type>"`` (the unnamed free joint of body ``torso`` is ``"torso_free"``); an unnamed site is
``"<body>_site"``; a site whose name a body already has is ``"<site>_site"``; clashes with other names take a
suffix ``_2``, ``_3``, ...

``floating_base``: None loads the model as compiled; True joins every body welded to the world (a top-level body
without joints that carries mass) to it by a free joint, named like an unnamed free joint; False welds every
top-level free joint's body to the world at its pose in the file.

What the dynamics model leaves out is said, never dropped silently: one `UserWarning` lists what is neither loaded
nor read by the simulator scene (springs of ball and free joints, ball-joint ranges, tendons, equality constraints,
flexes, sensors, ...), and ``Model.notes`` records it with what the scene reads from the same MuJoCo model (geoms,
actuators, keyframes, damping, friction loss, the springs of hinge and slide joints).
"""

import os
import warnings
from typing import NamedTuple

import numpy as np

from jaxmb import joints
from jaxmb.errors import ModelError
from jaxmb.model import Model, ModelBuilder

MJCF_STRING = "<mjcf string>"


def mujoco_module():
    """The ``mujoco`` module, or an ImportError that says how to install it (an optional dependency)."""
    try:
        import mujoco
    except ImportError as e:
        raise ImportError("jaxmb.io.mjcf needs MuJoCo, an optional dependency: install the extra, "
                          "`pip install 'jaxmb[mujoco]'`, or the package itself, `pip install mujoco`") from e
    return mujoco


def load_mjcf(source, *, floating_base=None, gravity=None, assets=None) -> Model:
    """The dynamics model of an MJCF (or URDF) model compiled by MuJoCo, as a `Model` (module docstring).

    ``source``: a path to an .xml (or .urdf) file, an MJCF document as a string, a ``mujoco.MjSpec`` or a compiled
    ``mujoco.MjModel``. Load files from their path so that MuJoCo finds the meshes they name; ``assets`` ({file
    name: bytes}) gives MuJoCo the files of a string. ``floating_base``: None, True or False (module docstring).
    ``gravity`` (3,): physical gravity; None takes MuJoCo's ``opt.gravity`` (zero where the model disables
    gravity).

    Raises `jaxmb.ModelError` naming the file and MuJoCo's message where the file is missing or MuJoCo's compiler
    rejects it.
    """
    mj, name = compile_mjcf(source, assets)
    return _read(mj, name, floating_base, gravity)


def compile_mjcf(source, assets=None):
    """``(mujoco.MjModel, name)``: ``source`` (as `load_mjcf` takes it) compiled by MuJoCo, and the name errors
    give it (the path, ``"<mjcf string>"``, ``"<MjSpec 'name'>"``, ``"<MjModel 'name'>"``)."""
    mujoco = mujoco_module()
    if isinstance(source, mujoco.MjModel):
        return source, f"<MjModel {model_name(source)!r}>"
    if isinstance(source, mujoco.MjSpec):
        name = f"<MjSpec {source.modelname!r}>"
        return _compiled(name, source.compile), name
    if isinstance(source, str) and source.lstrip().startswith("<"):
        return _compiled(MJCF_STRING, mujoco.MjModel.from_xml_string, source, assets), MJCF_STRING
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise ModelError(f"{path}: cannot read the file (no such file)")
        return _compiled(path, mujoco.MjModel.from_xml_path, path, assets), path
    raise TypeError(f"load_mjcf takes a path, an MJCF string, a mujoco.MjSpec or a mujoco.MjModel, got "
                    f"{type(source).__name__}")


def _compiled(name, compile_, *args):
    mujoco = mujoco_module()
    try:
        return compile_(*args)
    except (ValueError, mujoco.FatalError) as e:
        message = " ".join(str(e).split())
        raise ModelError(f"{name}: MuJoCo's compiler rejected the model: {message}") from None


def model_name(mj) -> str:
    """The compiled model's name (``<mujoco model=...>``)."""
    return bytes(mj.names).split(b"\0", 1)[0].decode()


# -- names and frames ---------------------------------------------------------------------------------------------

JOINT_TYPES = ("free", "ball", "slide", "hinge")  # MuJoCo's mjtJoint values 0-3


class MujocoNames(NamedTuple):
    """The names jaxmb gives the objects of a compiled MuJoCo model (module docstring).

    bodies (nbody,)        each MuJoCo body (``"world"`` for body 0): a jaxmb body or frame of that name
    joints (njnt,)         each MuJoCo joint: the jaxmb joint of that name
    joint_bodies (njnt,)   the jaxmb body each joint moves: ``"<body>/<joint>"`` but for a body's last joint, which
                           moves the body of the MuJoCo body's name
    sites (nsite,)         each site: the jaxmb frame of that name
    """

    bodies: tuple
    joints: tuple
    joint_bodies: tuple
    sites: tuple


def unique(base, taken, alternative=None):
    """``base`` if not in ``taken``, else ``alternative`` (when given) or the first free of ``base_2``,
    ``base_3``, ...; the name returned is added to ``taken`` (a set)."""
    name = base
    if name in taken and alternative is not None:
        name = base = alternative
    k = 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _names(mj, kind, n):
    return [getattr(mj, kind)(i).name for i in range(n)]


def mujoco_names(mj) -> MujocoNames:
    """The jaxmb names of the bodies, joints and sites of the compiled model ``mj`` (module docstring)."""
    given = _names(mj, "body", mj.nbody)
    taken = {n for n in given if n}
    bodies = ["world"] + [n or unique(f"body{b}", taken) for b, n in enumerate(given) if b > 0]
    given = _names(mj, "joint", mj.njnt)
    joint_taken = {n for n in given if n}
    jnames = [n or unique(f"{bodies[mj.jnt_bodyid[j]]}_{JOINT_TYPES[mj.jnt_type[j]]}", joint_taken)
              for j, n in enumerate(given)]
    joint_bodies = []
    for j in range(mj.njnt):
        b = int(mj.jnt_bodyid[j])
        last = j == mj.body_jntadr[b] + mj.body_jntnum[b] - 1
        joint_bodies.append(bodies[b] if last else unique(f"{bodies[b]}/{jnames[j]}", taken))
    sites = []
    for s, n in enumerate(_names(mj, "site", mj.nsite)):
        sites.append(unique(n, taken, f"{n}_site") if n else unique(f"{bodies[mj.site_bodyid[s]]}_site", taken))
    return MujocoNames(tuple(bodies), tuple(jnames), tuple(joint_bodies), tuple(sites))


def joint_anchor(mj, j) -> np.ndarray:
    """(3,) where the frame of the jaxmb body moved by MuJoCo joint ``j`` sits in its MuJoCo body's frame (as that
    frame stands after the joints before ``j``): the anchor ``jnt_pos`` of a hinge or ball, about which it turns;
    the origin for a slide or free joint."""
    if JOINT_TYPES[mj.jnt_type[j]] in ("hinge", "ball"):
        return np.array(mj.jnt_pos[j], float)
    return np.zeros(3)


def body_offset(mj, b) -> np.ndarray:
    """(3,) the origin of the jaxmb frame of MuJoCo body ``b`` in the MuJoCo body frame: the anchor of its last
    joint (`joint_anchor`), zero for a body without joints. The MuJoCo body frame is the jaxmb frame translated by
    ``-body_offset``."""
    n = int(mj.body_jntnum[b])
    return joint_anchor(mj, int(mj.body_jntadr[b]) + n - 1) if n else np.zeros(3)


def quat_matrix(quat) -> np.ndarray:
    """Rotation matrices (..., 3, 3) of MuJoCo quaternions ``[w, x, y, z]`` (..., 4), normalized first as MuJoCo
    normalizes them."""
    quat = np.asarray(quat, float)
    w, x, y, z = np.moveaxis(quat / np.linalg.norm(quat, axis=-1, keepdims=True), -1, 0)
    rows = [[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]
    return np.stack([np.stack(r, -1) for r in rows], -2)


def _compose(A, B):
    return A[0] @ B[0], A[1] + A[0] @ B[1]


def _translation(p):
    return np.eye(3), np.asarray(p, float)


# -- the dynamics model -------------------------------------------------------------------------------------------


def _read(mj, source, floating_base, gravity) -> Model:
    """The `Model` of the compiled ``mj`` (`load_mjcf`, whose caller its warning points at); ``source`` names it in
    errors and messages."""
    mujoco = mujoco_module()
    names = mujoco_names(mj)
    if gravity is None:
        off = mj.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY
        gravity = np.zeros(3) if off else np.array(mj.opt.gravity, float)
    builder = ModelBuilder(model_name(mj) or "mjcf", gravity=gravity, source=source)
    armature = _armature(mj)
    joint_taken = set(names.joints)
    for b in range(1, mj.nbody):
        jnts = list(range(mj.body_jntadr[b], mj.body_jntadr[b] + mj.body_jntnum[b]))
        top = mj.body_parentid[b] == 0
        if top and floating_base is False and jnts and JOINT_TYPES[mj.jnt_type[jnts[0]]] == "free":
            builder.note(f"floating_base=False: body {names.bodies[b]!r} is welded to the world at its pose in the "
                         f"file instead of joint {names.joints[jnts[0]]!r}")
            jnts = []
        parent = None if top else names.bodies[mj.body_parentid[b]]
        placement = _compose(_translation(-body_offset(mj, mj.body_parentid[b])),
                             (quat_matrix(mj.body_quat[b]), np.array(mj.body_pos[b], float)))
        mass, com, inertia = _inertia(mj, b)
        if not jnts and top and floating_base and mj.body_subtreemass[b] > 0 and mj.body_mocapid[b] < 0:
            free = unique(f"{names.bodies[b]}_free", joint_taken)
            builder.note(f"floating_base=True: body {names.bodies[b]!r} is joined to the world by the free joint "
                         f"{free!r}")
            builder.add_body(names.bodies[b], None, joints.free(), joint_name=free, mass=mass, com=com,
                             inertia=inertia)
        elif not jnts:
            builder.add_body(names.bodies[b], parent, joints.fixed(), placement=placement, mass=mass, com=com,
                             inertia=inertia)
        else:
            _add_chain(builder, mj, names, b, jnts, parent, placement, armature)
    for s in range(mj.nsite):
        b = int(mj.site_bodyid[s])
        placement = _compose(_translation(-body_offset(mj, b)),
                             (quat_matrix(mj.site_quat[s]), np.array(mj.site_pos[s], float)))
        builder.add_frame(names.sites[s], None if b == 0 else names.bodies[b], placement)
    for j in range(mj.njnt):
        if JOINT_TYPES[mj.jnt_type[j]] in ("hinge", "slide") and mj.qpos0[mj.jnt_qposadr[j]] != 0:
            builder.note(f"joint {names.joints[j]!r} has the reference position ref = "
                         f"{mj.qpos0[mj.jnt_qposadr[j]]:g}: its coordinate is q = qpos - ref")
    dropped = not_loaded(mj, names)
    if dropped:
        message = (f"{source}: not loaded by the dynamics model (the simulator scene, jaxmb.sim.load_mjcf_scene, "
                   "takes ranges of ball joints, fluid forces, fixed tendons and equality constraints): "
                   + "; ".join(dropped))
        warnings.warn(message, UserWarning, stacklevel=3)
        builder.note(message)
    scene = read_by_scene(mj)
    if scene:
        builder.note("read by the simulator scene, not part of the dynamics model: " + ", ".join(scene))
    return builder.build()


def _inertia(mj, b):
    """``(mass, com (3,), rotational inertia about the com (3, 3))`` of MuJoCo body ``b`` in its jaxmb frame."""
    R = quat_matrix(mj.body_iquat[b])
    inertia = R @ np.diag(np.asarray(mj.body_inertia[b], float)) @ R.T
    return float(mj.body_mass[b]), np.array(mj.body_ipos[b], float) - body_offset(mj, b), inertia


def _add_chain(builder, mj, names, b, jnts, parent, placement, armature):
    """Add MuJoCo body ``b`` moved by its joints ``jnts``: one jaxmb body per joint, the last carrying the mass.
    ``placement``: the MuJoCo body frame at zero joint coordinates in the jaxmb frame of its parent."""
    mass, com, inertia = _inertia(mj, b)
    previous = np.zeros(3)
    for k, j in enumerate(jnts):
        kind = JOINT_TYPES[mj.jnt_type[j]]
        anchor = joint_anchor(mj, j)
        last = k == len(jnts) - 1
        if kind == "free":  # the free joint's coordinates are the body's pose in the world (MuJoCo: top-level)
            placement_k = None
        elif k == 0:
            placement_k = _compose(placement, _translation(anchor))
        else:
            placement_k = _translation(anchor - previous)
        builder.add_body(names.joint_bodies[j], parent, _joint(mj, j, kind), joint_name=names.joints[j],
                         placement=placement_k, mass=mass if last else 0.0, com=com if last else np.zeros(3),
                         inertia=inertia if last else None, armature=armature[j])
        parent, previous = names.joint_bodies[j], anchor


def _joint(mj, j, kind):
    if kind == "free":
        return joints.free()
    if kind == "ball":
        return joints.spherical()
    lower = upper = None
    if mj.jnt_limited[j]:
        lower, upper = np.asarray(mj.jnt_range[j], float) - mj.qpos0[mj.jnt_qposadr[j]]
    make = joints.revolute if kind == "hinge" else joints.prismatic
    return make(tuple(np.asarray(mj.jnt_axis[j], float)), lower, upper)


def _armature(mj):
    """Per joint, the armature (nv of the joint,) in jaxmb's coordinate order: ``dof_armature`` (a free joint's
    ``[linear; angular]`` reordered ``[angular; linear]``), plus ``gear^2 actuator_armature`` of the actuators that
    drive a hinge or slide directly."""
    dof = np.array(mj.dof_armature, float)
    for a in range(mj.nu):
        if _drives_scalar_joint(mj, a):
            dof[mj.jnt_dofadr[mj.actuator_trnid[a, 0]]] += mj.actuator_gear[a, 0] ** 2 * mj.actuator_armature[a]
    out = []
    for j in range(mj.njnt):
        adr, kind = int(mj.jnt_dofadr[j]), JOINT_TYPES[mj.jnt_type[j]]
        nv = {"free": 6, "ball": 3}.get(kind, 1)
        a = dof[adr:adr + nv]
        out.append(np.concatenate([a[3:], a[:3]]) if kind == "free" else a)
    return out


def _drives_scalar_joint(mj, a):
    mujoco = mujoco_module()
    return (mj.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
            and JOINT_TYPES[mj.jnt_type[mj.actuator_trnid[a, 0]]] in ("hinge", "slide"))


# -- what the dynamics model leaves out ---------------------------------------------------------------------------


def _listing(what, names):
    """``"what 'a', 'b'"``, or ``"what (N, unnamed)"`` where MuJoCo has no names for some of them."""
    named = [n for n in names if n]
    if len(named) == len(names):
        return f"{what} {', '.join(repr(n) for n in named)}"
    return f"{what} ({len(names)}, unnamed)"


def not_loaded(mj, names) -> list:
    """What the compiled ``mj`` holds that neither the dynamics model nor the simulator scene takes, one entry per
    kind of thing, naming them."""
    out = []
    springs = [names.joints[j] for j in range(mj.njnt)
               if mj.jnt_stiffness[j] != 0 and JOINT_TYPES[mj.jnt_type[j]] not in ("hinge", "slide")]
    if springs:
        out.append(_listing("joint springs (stiffness) of ball and free joints", springs))
    nonlinear = [names.joints[j] for j in range(mj.njnt) if np.any(mj.jnt_stiffnesspoly[j] != 0)]
    if nonlinear:
        out.append(_listing("nonlinear joint springs (stiffnesspoly) of joints", nonlinear))
    balls = [names.joints[j] for j in range(mj.njnt) if JOINT_TYPES[mj.jnt_type[j]] == "ball" and mj.jnt_limited[j]]
    if balls:
        out.append(_listing("ranges of ball joints", balls))
    gravcomp = [names.bodies[b] for b in range(mj.nbody) if mj.body_gravcomp[b] != 0]
    if gravcomp:
        out.append(_listing("gravity compensation of bodies", gravcomp))
    mocap = [names.bodies[b] for b in range(mj.nbody) if mj.body_mocapid[b] >= 0]
    if mocap:
        out.append(_listing("mocap bodies", mocap) + " (welded to the world at their pose in the file)")
    if mj.opt.density > 0 or mj.opt.viscosity > 0:
        out.append(f"fluid forces (density {mj.opt.density:g}, viscosity {mj.opt.viscosity:g})")
    armature = [_names(mj, "actuator", mj.nu)[a] for a in range(mj.nu)
                if mj.actuator_armature[a] != 0 and not _drives_scalar_joint(mj, a)]
    if armature:
        out.append(_listing("armature of actuators that drive no single hinge or slide", armature))
    for what, kind, n in (("tendons", "tendon", mj.ntendon), ("equality constraints", "equality", mj.neq),
                          ("flexes", "flex", mj.nflex), ("sensors", "sensor", mj.nsensor),
                          ("height fields", "hfield", mj.nhfield), ("skins", "skin", mj.nskin),
                          ("cameras", "camera", mj.ncam), ("lights", "light", mj.nlight)):
        if n:
            out.append(_listing(what, _names(mj, kind, n)))
    if mj.nplugin:
        out.append(f"plugins ({mj.nplugin})")
    custom = mj.nnumeric + mj.ntext + mj.ntuple
    if custom:
        out.append(f"custom data ({custom}: numeric, text, tuple)")
    return out


def read_by_scene(mj) -> list:
    """What the simulator scene reads from the compiled ``mj`` (counts): geoms and their meshes, contact pairs and
    exclusions, actuators, keyframes, joint damping, friction loss and the springs of hinge and slide joints."""
    counts = (("geoms", mj.ngeom), ("meshes", mj.nmesh), ("contact pairs", mj.npair),
              ("contact exclusions", mj.nexclude), ("actuators", mj.nu), ("keyframes", mj.nkey),
              ("degrees of freedom with damping", int(np.count_nonzero(mj.dof_damping))),
              ("degrees of freedom with friction loss", int(np.count_nonzero(mj.dof_frictionloss))),
              ("hinge and slide joints with springs", sum(
                  1 for j in range(mj.njnt) if mj.jnt_stiffness[j] != 0 and not np.any(mj.jnt_stiffnesspoly[j] != 0)
                  and JOINT_TYPES[mj.jnt_type[j]] in ("hinge", "slide"))))
    return [f"{what} ({n})" for what, n in counts if n]
