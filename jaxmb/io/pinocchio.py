"""Converters between jaxmb and Pinocchio: the states, spatial vectors, poses, Jacobians and mass matrices of one
robot modelled in both (`PinocchioMap`), and the models themselves (`to_pinocchio`, `from_pinocchio`).

Pinocchio (the ``pin`` package) is an optional dependency, imported when a converter first needs it.

==========================  ==================================  ==========================================
                            jaxmb                               Pinocchio
==========================  ==================================  ==========================================
joint (body) order          breadth first (`jaxmb.topology`)    depth first (joint ids)
spatial vectors             ``[angular; linear]``               ``[linear; angular]``
quaternions                 ``[w, x, y, z]``                    ``[x, y, z, w]``
free joint                  ``q = [p, w, x, y, z]``,            ``q = [p, x, y, z, w]``,
                            ``qd = [omega; v]`` (body frame)    ``v = [v; omega]`` (local frame)
continuous joint            one angle (nq = 1)                  ``(cos, sin)`` (nq = 2), nv = 1
planar joint                ``q = [x, y, theta]``               ``q = [x, y, cos, sin]``, same velocities
==========================  ==================================  ==========================================

A jaxmb body is the Pinocchio joint of the same name (the body's joint in ``model.joint_names``) and the body frame
is that joint's frame. The free base is named ``"root"`` in jaxmb (`jaxmb.load_urdf` with ``floating_base=True``) and
``"root_joint"`` in Pinocchio (its URDF reader's name), a pair every converter takes as ``free_base_names``.

Velocities, accelerations and generalized forces map by one permutation ``P`` (pin.nv, nv), ``v_pin = P v``, which
is orthogonal, so ``v = P* v_pin``, ``M_pin = P M P*`` and, with ``S`` the exchange of the two halves of a spatial
vector, ``J_pin = S J P*``. The state converters take arrays with any leading batch axes and give numpy float64
arrays (what Pinocchio takes); inside `jax.jit`, `jax.vmap` or `jax.grad` the array converters (configurations,
velocities, matrices, Jacobians, `swap_spatial`) are traced like any jaxmb function.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb import joints
from jaxmb.errors import ModelError
from jaxmb.model import Model, ModelBuilder
from jaxmb.spatial import Transform

FREE_BASE_NAMES = ("root", "root_joint")
"""The default ``(jaxmb name, Pinocchio name)`` of a free joint at the root."""

UNLIMITED = np.finfo(np.float64).max
"""Pinocchio's bound for a coordinate without limits; jaxmb's is infinity."""


def pinocchio_module():
    """The ``pinocchio`` module, or an ImportError that says how to install it."""
    try:
        import pinocchio
    except ImportError as e:
        raise ImportError("jaxmb.io.pinocchio needs Pinocchio, an optional dependency: install the extra, "
                          "`pip install 'jaxmb[pinocchio]'`, or the package itself, `pip install pin`") from e
    return pinocchio


def _traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _host_or_traced(x):
    """A traced array as it is (jax.numpy then computes on it); anything else as a numpy float64 array."""
    return x if _traced(x) else np.asarray(x, np.float64)


def _last_axis(x, n, what):
    if x.ndim < 1 or x.shape[-1] != n:
        raise ValueError(f"{what} must have shape (..., {n}), got {x.shape}")


# -- spatial vectors and poses -----------------------------------------------------------------------------------------


def swap_spatial(x, axis=-1):
    """``[a; b] -> [b; a]`` along ``axis`` (of length 6): jaxmb's ``[angular; linear]`` to Pinocchio's
    ``[linear; angular]`` and back (it is its own inverse). ``x`` (..., 6, ...) -> the same shape."""
    x = _host_or_traced(x)
    if x.ndim == 0 or x.shape[axis] != 6:
        raise ValueError(f"axis {axis} of a spatial array must have length 6, got shape {x.shape}")
    return (jnp if _traced(x) else np).roll(x, 3, axis=axis)


def _spatial_to_pin(cls, x):
    x = np.asarray(x, np.float64)
    _last_axis(x, 6, "a spatial vector")
    if x.ndim > 1:
        return [_spatial_to_pin(cls, y) for y in x]
    return cls(x[3:], x[:3])


def _spatial_from_pin(cls, x):
    if isinstance(x, cls):
        return np.concatenate([np.asarray(x.angular), np.asarray(x.linear)])
    return np.stack([_spatial_from_pin(cls, y) for y in x])


def motion_to_pin(x):
    """A jaxmb spatial motion ``[w; v]`` (6,) as a ``pin.Motion``; (n, 6) as a list of them."""
    return _spatial_to_pin(pinocchio_module().Motion, x)


def motion_from_pin(m):
    """A ``pin.Motion`` as a jaxmb spatial motion ``[w; v]`` (6,); a sequence of them (``data.v``) as (n, 6)."""
    return _spatial_from_pin(pinocchio_module().Motion, m)


def force_to_pin(x):
    """A jaxmb spatial force ``[n; f]`` (6,) as a ``pin.Force``; (n, 6) as a list of them."""
    return _spatial_to_pin(pinocchio_module().Force, x)


def force_from_pin(f):
    """A ``pin.Force`` as a jaxmb spatial force ``[n; f]`` (6,); a sequence of them (``data.f``) as (n, 6)."""
    return _spatial_from_pin(pinocchio_module().Force, f)


def pose_to_pin(T: Transform):
    """A jaxmb `Transform` (R (3, 3), p (3,)) as a ``pin.SE3`` (the same pose of a child frame in its parent);
    one with a leading axis, (n, 3, 3) and (n, 3), as a list of them."""
    R, p = np.asarray(T.R, np.float64), np.asarray(T.p, np.float64)
    if R.shape[-2:] != (3, 3) or p.shape != R.shape[:-1]:
        raise ValueError(f"a pose has R (..., 3, 3) and p (..., 3), got {R.shape} and {p.shape}")
    if p.ndim > 1:
        return [pose_to_pin(Transform(r, t)) for r, t in zip(R, p)]
    return pinocchio_module().SE3(R, p)


def pose_from_pin(M) -> Transform:
    """A ``pin.SE3`` as a jaxmb `Transform` of numpy arrays (R (3, 3), p (3,)); a sequence of them (``data.oMi``,
    ``data.oMf``) as one with a leading axis."""
    if isinstance(M, pinocchio_module().SE3):
        return Transform(np.array(M.rotation), np.array(M.translation))
    poses = [pose_from_pin(x) for x in M]
    return Transform(np.stack([T.R for T in poses]), np.stack([T.p for T in poses]))


# -- joint layouts -----------------------------------------------------------------------------------------------------


class JointLayout(NamedTuple):
    """Where one joint's coordinates sit in each library, in joint-local indices: ``q_pin[k] = q[q_order[k]]``
    where ``q_order[k] >= 0``; where Pinocchio stores the cosine and sine of the angle ``q[angle]``, at
    ``cos_sin`` and ``cos_sin + 1``, ``q_order`` is -1. ``v_pin[k] = v[v_order[k]]``."""

    q_order: tuple
    v_order: tuple
    angle: int | None = None
    cos_sin: int | None = None


LAYOUTS = {
    "free": JointLayout((0, 1, 2, 4, 5, 6, 3), (3, 4, 5, 0, 1, 2)),
    "spherical": JointLayout((1, 2, 3, 0), (0, 1, 2)),
    "planar": JointLayout((0, 1, -1, -1), (0, 1, 2), angle=2, cos_sin=2),
    "unbounded": JointLayout((-1, -1), (0,), angle=0, cos_sin=0),
    "scalar": JointLayout((0,), (0,)),
}
"""The layout of each family of Pinocchio joints (`pin_layout`); "unbounded" is a revolute joint without limits
stored as ``(cos, sin)`` (a jaxmb continuous joint), "scalar" any other one-coordinate joint."""

_SCALAR_JOINTS = {f"JointModel{a}{x}" for a in "RPH" for x in "XYZ"} | {
    "JointModelRevoluteUnaligned", "JointModelPrismaticUnaligned", "JointModelHelicalUnaligned"}
_UNBOUNDED_JOINTS = {"JointModelRUBX", "JointModelRUBY", "JointModelRUBZ", "JointModelRevoluteUnboundedUnaligned"}
_JAXMB_KIND = {"free": "free", "spherical": "spherical", "planar": "planar", "unbounded": "screw", "scalar": "screw"}


def pin_layout(joint_model) -> str | None:
    """The `LAYOUTS` key of a Pinocchio joint model, or None for a joint that jaxmb lacks (SphericalZYX,
    Translation, Universal, Composite, Mimic, ...)."""
    name = joint_model.shortname()
    if name in _SCALAR_JOINTS:
        return "scalar"
    if name in _UNBOUNDED_JOINTS:
        return "unbounded"
    return {"JointModelFreeFlyer": "free", "JointModelSpherical": "spherical", "JointModelPlanar": "planar"}.get(name)


def _pin_name(model, i, free_base_names):
    """The Pinocchio name of jaxmb joint ``i``: its own, but for the free base's."""
    name = model.joint_names[i]
    if name == free_base_names[0] and model.topology.kinds[i] == "free" and model.topology.parent[i] < 0:
        return free_base_names[1]
    return name


# -- the map between the coordinates of two models ---------------------------------------------------------------------


class PinocchioMap:
    """Converters between the states of a jaxmb `Model` and a Pinocchio model of the same robot, whose joints are
    matched by name (``free_base_names``: the free base's ``(jaxmb, Pinocchio)`` names).

    Attributes:
        model, pin_model: the two models.
        joint_ids (nb,): the Pinocchio joint id of each jaxmb body (its joint); ``body_of_joint`` (pin.njoints,)
            the inverse, -1 for Pinocchio's ``universe``.
        layouts (nb,): the `LAYOUTS` key of each body's joint.
        P (pin.nv, nv): ``v_pin = P v``; orthogonal, so ``v = P* v_pin`` and ``M_pin = P M P*``.
        v_perm (pin.nv,): ``v_pin = v[v_perm]``.

    Raises `ModelError` where the models differ: sizes, joint names, joint kinds or the tree.
    """

    def __init__(self, model: Model, pin_model, free_base_names=FREE_BASE_NAMES):
        pm, topo = pin_model, model.topology
        self.model, self.pin_model = model, pm
        where = f"jaxmb model {model.name!r} and Pinocchio model {pm.name!r}"
        if pm.nv != model.nv or pm.njoints - 1 != model.nb:
            raise ModelError(f"{where}: jaxmb has {model.nb} joints and nv={model.nv}, Pinocchio {pm.njoints - 1} "
                             f"joints and nv={pm.nv}: not the same robot")
        self.joint_ids = np.zeros(model.nb, int)
        layouts = []
        q_src = np.full(pm.nq, -1)  # into [q, cos(q[angles]), sin(q[angles])]
        q_back = np.full(model.nq, -1)  # into [q_pin, atan2(q_pin[cos_at + 1], q_pin[cos_at])]
        angles, cos_at = [], []
        v_perm = np.full(pm.nv, -1)
        for i, jname in enumerate(model.joint_names):
            pname = _pin_name(model, i, free_base_names)
            if not pm.existJointName(pname):
                raise ModelError(f"{where}: Pinocchio has no joint {pname!r} (jaxmb joint {jname!r})")
            j = pm.getJointId(pname)
            jm = pm.joints[j]
            layout = pin_layout(jm)
            if layout is None or _JAXMB_KIND[layout] != topo.kinds[i]:
                raise ModelError(f"{where}: joint {jname!r} is a {topo.kinds[i]} joint in jaxmb but a "
                                 f"{jm.shortname()} in Pinocchio")
            parent = topo.parent[i]
            if pm.parents[j] != (0 if parent < 0 else pm.getJointId(_pin_name(model, parent, free_base_names))):
                raise ModelError(f"{where}: joint {jname!r} has parent {pm.names[pm.parents[j]]!r} in Pinocchio "
                                 f"but {'the world' if parent < 0 else repr(model.joint_names[parent])} in jaxmb")
            self.joint_ids[i] = j
            layouts.append(layout)
            L, a, b = LAYOUTS[layout], topo.q_offset[i], jm.idx_q
            for k, src in enumerate(L.q_order):
                if src >= 0:
                    q_src[b + k], q_back[a + src] = a + src, b + k
            if L.angle is not None:
                angles.append(a + L.angle)
                cos_at.append(b + L.cos_sin)
            v_perm[jm.idx_v + np.arange(jm.nv)] = topo.v_offset[i] + np.asarray(L.v_order)
        n = len(angles)
        q_src[cos_at] = model.nq + np.arange(n)
        q_src[np.asarray(cos_at, int) + 1] = model.nq + n + np.arange(n)
        q_back[angles] = pm.nq + np.arange(n)
        self.layouts = tuple(layouts)
        self._q_src, self._q_back = q_src, q_back
        self._angles, self._cos_at = np.asarray(angles, int), np.asarray(cos_at, int)
        self.v_perm = v_perm
        self._v_perm_inv = np.argsort(v_perm)
        self.P = np.eye(model.nv)[v_perm]
        self.body_of_joint = np.full(pm.njoints, -1)
        self.body_of_joint[self.joint_ids] = np.arange(model.nb)

    # -- configurations ------------------------------------------------------------------------------------------------

    def q_to_pin(self, q):
        """A jaxmb configuration (..., nq) as Pinocchio's (..., pin.nq): quaternions reordered, each continuous
        angle and planar ``theta`` as its ``(cos, sin)``."""
        q = _host_or_traced(q)
        _last_axis(q, self.model.nq, "q")
        xp = jnp if _traced(q) else np
        theta = q[..., self._angles]
        return xp.concatenate([q, xp.cos(theta), xp.sin(theta)], -1)[..., self._q_src]

    def q_from_pin(self, q_pin):
        """A Pinocchio configuration (..., pin.nq) as jaxmb's (..., nq); an angle is ``atan2(sin, cos)``, in
        ``(-pi, pi]``."""
        q_pin = _host_or_traced(q_pin)
        _last_axis(q_pin, self.pin_model.nq, "q_pin")
        xp = jnp if _traced(q_pin) else np
        theta = xp.arctan2(q_pin[..., self._cos_at + 1], q_pin[..., self._cos_at])
        return xp.concatenate([q_pin, theta], -1)[..., self._q_back]

    def q_limits_to_pin(self, limit, unlimited):
        """Position limits (..., nq) in jaxmb's coordinates as Pinocchio's (..., pin.nq): infinite bounds and those
        of the cosines and sines become ``unlimited`` (``-UNLIMITED`` for lower, ``UNLIMITED`` for upper bounds)."""
        limit = np.clip(np.asarray(limit, np.float64), -UNLIMITED, UNLIMITED)
        _last_axis(limit, self.model.nq, "a limit")
        fill = np.full(limit.shape[:-1] + (2 * len(self._angles),), float(unlimited))
        return np.concatenate([limit, fill], -1)[..., self._q_src]

    # -- velocities, accelerations, generalized forces -----------------------------------------------------------------

    def v_to_pin(self, v):
        """A jaxmb velocity, acceleration or generalized force (..., nv) as Pinocchio's (..., pin.nv): ``P v``."""
        v = _host_or_traced(v)
        _last_axis(v, self.model.nv, "v")
        return v[..., self.v_perm]

    def v_from_pin(self, v_pin):
        """A Pinocchio velocity, acceleration or generalized force (..., pin.nv) as jaxmb's: ``P* v_pin``."""
        v_pin = _host_or_traced(v_pin)
        _last_axis(v_pin, self.pin_model.nv, "v_pin")
        return v_pin[..., self._v_perm_inv]

    tau_to_pin, tau_from_pin = v_to_pin, v_from_pin

    def matrix_to_pin(self, M):
        """A matrix on velocities (..., nv, nv), such as the mass matrix, in Pinocchio's order: ``P M P*``."""
        M = _host_or_traced(M)
        _last_axis(M, self.model.nv, "a matrix on velocities")
        return M[..., self.v_perm, :][..., :, self.v_perm]

    def matrix_from_pin(self, M_pin):
        """A Pinocchio matrix on velocities (..., pin.nv, pin.nv) in jaxmb's order: ``P* M_pin P``."""
        M_pin = _host_or_traced(M_pin)
        _last_axis(M_pin, self.pin_model.nv, "a matrix on velocities")
        return M_pin[..., self._v_perm_inv, :][..., :, self._v_perm_inv]

    def jacobian_to_pin(self, J):
        """A jaxmb Jacobian (..., 6, nv), rows ``[angular; linear]``, as Pinocchio's (..., 6, pin.nv), rows
        ``[linear; angular]``: ``S J P*``. Both give a frame's velocity in the same frame (jaxmb's ``"local"`` and
        ``"world_aligned"`` are Pinocchio's ``LOCAL`` and ``LOCAL_WORLD_ALIGNED``)."""
        J = _host_or_traced(J)
        _last_axis(J, self.model.nv, "a Jacobian")
        return swap_spatial(J, axis=-2)[..., self.v_perm]

    def jacobian_from_pin(self, J_pin):
        """A Pinocchio Jacobian (..., 6, pin.nv) as jaxmb's (..., 6, nv): ``S J_pin P``."""
        J_pin = _host_or_traced(J_pin)
        _last_axis(J_pin, self.pin_model.nv, "a Jacobian")
        return swap_spatial(J_pin, axis=-2)[..., self._v_perm_inv]

    # -- per-body quantities of one state ------------------------------------------------------------------------------

    def body_forces_to_pin(self, f):
        """Spatial forces on the bodies (nb, 6), jaxmb's ``f_ext`` (body frames, ``[n; f]``), as Pinocchio's list of
        ``pin.Force`` per joint (pin.njoints, local joint frames, a zero force on the universe first)."""
        f = np.asarray(f, np.float64)
        if f.shape != (self.model.nb, 6):
            raise ValueError(f"body forces must have shape ({self.model.nb}, 6), got {f.shape}")
        pin = pinocchio_module()
        out = [pin.Force.Zero() for _ in range(self.pin_model.njoints)]
        for i, j in enumerate(self.joint_ids):
            out[j] = force_to_pin(f[i])
        return out

    def body_forces_from_pin(self, forces):
        """Pinocchio's forces per joint (``data.f``, or a list as `body_forces_to_pin` gives) as jaxmb's (nb, 6)."""
        return np.stack([force_from_pin(forces[int(j)]) for j in self.joint_ids])

    def body_motions_from_pin(self, motions):
        """Pinocchio's motions per joint (``data.v``, ``data.a``) as jaxmb body motions (nb, 6) ``[w; v]``."""
        return np.stack([motion_from_pin(motions[int(j)]) for j in self.joint_ids])

    def body_poses_from_pin(self, placements) -> Transform:
        """Pinocchio's joint placements (``data.oMi``) as jaxmb body poses, a `Transform` (nb, 3, 3), (nb, 3)."""
        return pose_from_pin([placements[int(j)] for j in self.joint_ids])

    # -- frames --------------------------------------------------------------------------------------------------------

    def frame_id(self, name):
        """The Pinocchio frame id of a jaxmb frame or body: the ``BODY`` frame of that name, else any frame of it."""
        pin, pm = pinocchio_module(), self.pin_model
        if pm.existFrame(name, pin.FrameType.BODY):
            return pm.getFrameId(name, pin.FrameType.BODY)
        if pm.existFrame(name):
            return pm.getFrameId(name)
        raise KeyError(f"Pinocchio model {pm.name!r} has no frame {name!r}")

    def frame_body(self, name):
        """The jaxmb body that Pinocchio's frame ``name`` is fixed to (-1: the world)."""
        return int(self.body_of_joint[self.pin_model.frames[self.frame_id(name)].parentJoint])


# -- models ------------------------------------------------------------------------------------------------------------


def _coordinate_axis(axis):
    """The index of the coordinate axis that ``axis`` (3,) is, exactly, or None."""
    for k in range(3):
        if np.array_equal(axis, np.eye(3)[k]):
            return k
    return None


def _pin_joint_model(pin, model, i, axis, coef):
    """The Pinocchio joint model of jaxmb body ``i``'s joint (``axis``, ``coef`` its numpy parameters)."""
    kind, name, jtype = model.topology.kinds[i], model.joint_names[i], model.joint_types[i]
    where = f"jaxmb model {model.name!r}: joint {name!r}"
    if kind == "free":
        return pin.JointModelFreeFlyer()
    if kind == "spherical":
        return pin.JointModelSpherical()
    if kind == "planar":
        if not np.allclose(axis, (0.0, 0.0, 1.0), rtol=0.0, atol=1e-12):
            raise ModelError(f"{where} is planar in the plane normal to {axis.tolist()}: Pinocchio's planar joint "
                             "moves in its joint frame's xy-plane, so rotate the joint's placement (and the body's "
                             "frame) to make the normal z")
        return pin.JointModelPlanar()
    k = _coordinate_axis(axis)
    c_w, c_v = coef
    if c_w == 1.0 and c_v == 0.0 and jtype != "helical":
        if jtype == "continuous":
            return _unbounded_revolute(pin, axis) if k is None else getattr(pin, f"JointModelRUB{'XYZ'[k]}")()
        return pin.JointModelRevoluteUnaligned(axis) if k is None else getattr(pin, f"JointModelR{'XYZ'[k]}")()
    if c_w == 0.0 and c_v == 1.0:
        return pin.JointModelPrismaticUnaligned(axis) if k is None else getattr(pin, f"JointModelP{'XYZ'[k]}")()
    if c_w == 1.0:
        if k is None:
            return pin.JointModelHelicalUnaligned(axis, float(c_v))
        return getattr(pin, f"JointModelH{'XYZ'[k]}")(float(c_v))
    raise ModelError(f"{where} is a screw joint with coefficients (c_w, c_v) = ({c_w}, {c_v}): Pinocchio's screw "
                     "joints turn by q (c_w = 1: revolute, helical) or slide by q (c_w, c_v) = (0, 1)")


def _unbounded_revolute(pin, axis):
    """A ``JointModelRevoluteUnboundedUnaligned`` about ``axis``. Its Python constructor takes no axis, so it is made
    by Pinocchio's URDF reader from a one-joint robot, which normalizes the axis."""
    xyz = " ".join(repr(float(a)) for a in axis)
    urdf = (f'<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="continuous"><parent link="a"/>'
            f'<child link="b"/><axis xyz="{xyz}"/></joint></robot>')
    return pin.buildModelFromXML(urdf).joints[1]


def to_pinocchio(model: Model, free_base_names=FREE_BASE_NAMES):
    """A Pinocchio model of ``model``, the same robot in Pinocchio's coordinates (`PinocchioMap` converts states).

    Each jaxmb body becomes a Pinocchio joint of the joint's name (the free base's named by ``free_base_names``),
    added depth first, with the joint's placement, the body's inertia and the joint's armature and position limits
    (infinite ones as Pinocchio's ``UNLIMITED``). Each body's frame is a ``BODY`` frame on its joint, next to the
    joint's ``JOINT`` frame; every other jaxmb frame (links merged by fixed joints, frames added to a builder) an
    ``OP_FRAME`` on its body's joint, or on the universe for a frame fixed to the world. Gravity and the name are
    the model's. Joints: revolute ``R{X,Y,Z}`` or ``RevoluteUnaligned``, continuous ``RUB{X,Y,Z}`` or
    ``RevoluteUnboundedUnaligned``, prismatic ``P{X,Y,Z}`` or ``PrismaticUnaligned``, helical ``H{X,Y,Z}`` or
    ``HelicalUnaligned``, ``Spherical``, ``Planar`` and ``FreeFlyer``. Raises `ModelError` naming the joint for
    one that Pinocchio lacks: a planar joint whose plane is not its joint frame's xy-plane, or a screw joint with
    other coefficients than those of these.
    """
    pin = pinocchio_module()
    topo = model.topology
    R, p = np.asarray(model.X_tree.R, np.float64), np.asarray(model.X_tree.p, np.float64)
    axis, coef = np.asarray(model.axis, np.float64), np.asarray(model.coef, np.float64)
    mass, com = np.asarray(model.mass, np.float64), np.asarray(model.com, np.float64)
    inertia = np.asarray(model.inertia, np.float64)
    pm = pin.Model()
    pm.name = model.name
    pm.gravity = pin.Motion(np.asarray(model.gravity, np.float64), np.zeros(3))
    children = [[] for _ in range(model.nb)]
    for i, parent in enumerate(topo.parent):
        if parent >= 0:
            children[parent].append(i)
    joint_id, joint_frame = {}, {}
    stack = [i for i in reversed(range(model.nb)) if topo.parent[i] < 0]
    while stack:  # depth first: Pinocchio keeps each subtree's velocities contiguous
        i = stack.pop()
        parent = topo.parent[i]
        jm = _pin_joint_model(pin, model, i, axis[i], coef[i])
        j = pm.addJoint(0 if parent < 0 else joint_id[parent], jm, pin.SE3(R[i], p[i]),
                        _pin_name(model, i, free_base_names))
        body = pin.Inertia(float(mass[i]), com[i], inertia[i])
        pm.appendBodyToJoint(j, body, pin.SE3.Identity())
        pm.inertias[j] = body  # exactly: appending adds it to the joint's zero inertia, which rounds the com
        joint_id[i], joint_frame[i] = j, pm.addJointFrame(j, 0 if parent < 0 else joint_frame[parent])
        stack += reversed(children[i])
    FR, Fp = np.asarray(model.frame_placement.R, np.float64), np.asarray(model.frame_placement.p, np.float64)
    for k, (name, body) in enumerate(zip(model.frame_names, model.frame_body)):
        j, parent_frame = (0, 0) if body < 0 else (joint_id[body], joint_frame[body])
        kind = pin.FrameType.BODY if body >= 0 and name == model.body_names[body] else pin.FrameType.OP_FRAME
        pm.addFrame(pin.Frame(name, j, parent_frame, pin.SE3(FR[k], Fp[k]), kind))
    pmap = PinocchioMap(model, pm, free_base_names)
    pm.lowerPositionLimit = pmap.q_limits_to_pin(model.q_lower, -UNLIMITED)
    pm.upperPositionLimit = pmap.q_limits_to_pin(model.q_upper, UNLIMITED)
    pm.armature = pmap.v_to_pin(model.armature)
    return pm


def _motion_subspace(pin, pm, jm):
    """``S`` (6,) of a one-coordinate Pinocchio joint, ``[linear; angular]`` (constant for these joints)."""
    data = jm.createData()
    jm.calc(data, pin.neutral(pm))
    return np.asarray(data.S, np.float64).reshape(6)


def _jaxmb_joint(pin, pm, j, layout):
    """The jaxmb joint of Pinocchio joint ``j``, with its position limits and without a name."""
    jm, name = pm.joints[j], pm.joints[j].shortname()
    if layout == "free":
        joint = joints.free()
    elif layout == "spherical":
        joint = joints.spherical()
    elif layout == "planar":
        joint = joints.planar()
    else:
        S = _motion_subspace(pin, pm, jm)
        v, w = S[:3], S[3:]
        if layout == "unbounded":
            joint = joints.continuous(w)
        elif name.startswith("JointModelP"):
            joint = joints.prismatic(v)
        elif name.startswith("JointModelH"):
            joint = joints.helical(w, pitch=float(v @ w))
        else:
            joint = joints.revolute(w)
    L = LAYOUTS[layout]
    lower, upper = np.full(joint.kind.nq, -np.inf), np.full(joint.kind.nq, np.inf)
    for k, src in enumerate(L.q_order):
        if src >= 0:
            lower[src], upper[src] = pm.lowerPositionLimit[jm.idx_q + k], pm.upperPositionLimit[jm.idx_q + k]
    lower[lower <= -UNLIMITED], upper[upper >= UNLIMITED] = -np.inf, np.inf
    if np.all(np.isinf(lower)) and np.all(np.isinf(upper)):
        return joint
    return dataclasses.replace(joint, lower=tuple(lower.tolist()), upper=tuple(upper.tolist()))


def from_pinocchio(pin_model, free_base_names=FREE_BASE_NAMES, **builder_options) -> Model:
    """A jaxmb `Model` of a Pinocchio model (built with `jaxmb.ModelBuilder`): ``to_pinocchio`` undone.

    Each Pinocchio joint moves one body with the joint's inertia (all bodies appended to it), placement, armature
    and position limits (Pinocchio's ``UNLIMITED`` as infinite); a free joint at the root named
    ``free_base_names[1]`` is named ``free_base_names[0]``. The body takes the name of the first ``BODY`` frame at
    its joint's frame (placement the identity), else the joint's. Every other ``BODY`` and ``OP_FRAME`` frame is a
    jaxmb frame on its joint's body (or fixed to the world). Bodies and frames are added in Pinocchio's frame order,
    so the model of ``to_pinocchio(model)`` numbers bodies, coordinates and frames as ``model`` does.

    A Pinocchio planar joint moves in its joint frame's xy-plane (a jaxmb planar joint of normal z), an unbounded
    revolute one is continuous. Raises `ModelError` naming the joint for one jaxmb lacks (``SphericalZYX``,
    ``Translation``, ``Universal``, ``Composite``, ``Mimic``, ...). ``builder_options`` are keyword arguments of
    `ModelBuilder`, such as its option for physically impossible inertias.
    """
    pin = pinocchio_module()
    pm = pin_model
    source = f"Pinocchio model {pm.name!r}"
    layouts = {}
    for j in range(1, pm.njoints):
        layouts[j] = pin_layout(pm.joints[j])
        if layouts[j] is None:
            raise ModelError(f"{source}: joint {pm.names[j]!r} is a {pm.joints[j].shortname()}, which jaxmb lacks "
                             "(its joints: revolute, continuous, prismatic, helical, spherical, planar, free)")
    body_name = {}
    for f in pm.frames:
        if f.type == pin.FrameType.BODY and f.parentJoint > 0 and f.placement.isIdentity():
            body_name.setdefault(f.parentJoint, f.name)
    for j in range(1, pm.njoints):
        body_name.setdefault(j, pm.names[j])

    b = ModelBuilder(pm.name or "model", gravity=np.asarray(pm.gravity.linear), source=source,
                     **builder_options)

    def add_joint_body(j):
        parent, jm, Y = pm.parents[j], pm.joints[j], pm.inertias[j]
        name = pm.names[j]
        if parent == 0 and layouts[j] == "free" and name == free_base_names[1]:
            name = free_base_names[0]
        armature = np.empty(jm.nv)
        armature[list(LAYOUTS[layouts[j]].v_order)] = np.asarray(pm.armature)[jm.idx_v : jm.idx_v + jm.nv]
        X = pm.jointPlacements[j]
        b.add_body(body_name[j], None if parent == 0 else body_name[parent], _jaxmb_joint(pin, pm, j, layouts[j]),
                   joint_name=name, placement=(np.array(X.rotation), np.array(X.translation)), mass=Y.mass,
                   com=np.array(Y.lever), inertia=np.array(Y.inertia), armature=armature)

    added = set()
    for f in pm.frames:
        j = f.parentJoint
        if f.type == pin.FrameType.BODY and j > 0 and body_name[j] == f.name and j not in added:
            add_joint_body(j)
            added.add(j)
        elif f.type in (pin.FrameType.BODY, pin.FrameType.OP_FRAME):
            placement = (np.array(f.placement.rotation), np.array(f.placement.translation))
            b.add_body(f.name, None if j == 0 else body_name[j], joints.fixed(), placement=placement)
    for j in range(1, pm.njoints):
        if j not in added:
            add_joint_body(j)
    return b.build()
