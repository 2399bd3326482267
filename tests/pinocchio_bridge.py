"""Bridge between jaxmb and Pinocchio for the oracle tests: robot files, models and state converters.

Conventions bridged here:

* Joint order: jaxmb numbers bodies (= joints) breadth first (`Model.joint_names`, coordinates at
  ``topology.q_offset / v_offset``); Pinocchio depth first (``pm.names[jid]``, ``pm.joints[jid].idx_q / idx_v``).
* Free base: jaxmb joint ``"root"``, ``q = [p, w, x, y, z]``, ``qd = [omega; v]``; Pinocchio joint
  ``"root_joint"``, ``q = [p, x, y, z, w]``, ``v = [v; omega]``. Both velocities are in the body (local) frame.
* Spherical joints: quaternion ``[w, x, y, z]`` vs ``[x, y, z, w]``; planar: ``[x, y, theta]`` vs
  ``[x, y, cos, sin]`` (velocities ``[vx, vy, wz]`` in the body frame in both).
* ``continuous`` joints: one angle in jaxmb, ``(cos, sin)`` in Pinocchio (nq=2, nv=1).
* Spatial vectors: jaxmb ``[angular; linear]``, Pinocchio ``[linear; angular]``.

Velocities, accelerations and generalized forces map by one permutation ``P`` (pin.nv x nv, orthogonal):
``v_pin = P v``, ``tau_pin = P tau``, ``M_pin = P M P^T``, ``J_pin = S J P^T`` with ``S`` the spatial half swap.
"""

import functools
import glob
import os
import site
import sys
import warnings
from pathlib import Path

import jax
import numpy as np
import pinocchio as pin

import jaxmb
from jaxmb import spatial
from jaxmb.batching.compile import supported_options

# Short names for the robots of example-robot-data used by the tests (paths under the robots directory).
ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "z1": "z1_description/urdf/z1.urdf",
    "kinova": "kinova_description/robots/kinova.urdf",  # continuous joints
    "xarm7": "xarm_description/urdf/xarm7.urdf",
    "go1": "go1_description/urdf/go1.urdf",
    "anymal_b": "anymal_b_simple_description/robots/anymal.urdf",
    "anymal_c": "anymal_c_simple_description/urdf/anymal.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "a1": "a1_description/urdf/a1.urdf",
    "talos_full_v2": "talos_data/robots/talos_full_v2.urdf",
    "g1_29dof": "g1_description/urdf/g1_29dof_rev_1_0.urdf",
    "icub": "icub_description/robots/icub.urdf",
    "allegro": "allegro_hand_description/urdf/allegro_right_hand.urdf",
    "double_pendulum_continuous": "double_pendulum_description/urdf/double_pendulum_continuous.urdf",
    "pr2": "pr2_description/urdf/pr2.urdf",  # continuous, prismatic and mimic joints
    "tiago_pro": "tiago_pro_description/robots/tiago_pro.urdf",
}

PIN_ROOT_JOINT = "root_joint"
JAXMB_ROOT_JOINT = "root"


@functools.lru_cache(maxsize=None)
def robots_dir() -> Path:
    """The ``robots`` directory of example-robot-data (``<prefix>/share/example-robot-data/robots``)."""
    candidates = []
    for base in list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path:
        candidates.append(Path(base) / "cmeel.prefix")
    # next to the installed pinocchio package: .../cmeel.prefix/lib/pythonX.Y/site-packages/pinocchio
    pin_path = Path(pin.__file__).resolve()
    candidates += [p for p in pin_path.parents if p.name == "cmeel.prefix"]
    for prefix in candidates:
        d = prefix / "share" / "example-robot-data" / "robots"
        if d.is_dir():
            return d
    raise FileNotFoundError("example-robot-data is not installed (no cmeel.prefix/share/example-robot-data/robots)")


def urdf_path(name) -> Path:
    """The URDF file of a robot: a short name from `ROBOTS`, a path relative to `robots_dir`, or a file name
    (``"z1.urdf"``) found anywhere under it."""
    rel = ROBOTS.get(name, name)
    p = robots_dir() / rel
    if p.is_file():
        return p
    hits = sorted(glob.glob(str(robots_dir() / "**" / os.path.basename(rel)), recursive=True))
    if len(hits) == 1:
        return Path(hits[0])
    raise FileNotFoundError(f"no unique URDF {name!r} under {robots_dir()} (found {hits})")


def load_jaxmb(name, floating_base=False):
    """jaxmb model of a robot; the expected triangle-inequality inertia warnings are silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*triangle inequality.*", category=UserWarning)
        return jaxmb.load_urdf(urdf_path(name), floating_base=floating_base)


def load_pinocchio(name, floating_base=False):
    """Pinocchio model of the same file; a free base is a ``JointModelFreeFlyer`` named ``"root_joint"``.
    Mimic joints are independent joints (Pinocchio's default, as in jaxmb)."""
    path = str(urdf_path(name))
    if floating_base:
        return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(path)


def load_pair(name, floating_base=False):
    """(jaxmb model, Pinocchio model, `Bridge`) of one robot."""
    model, pm = load_jaxmb(name, floating_base), load_pinocchio(name, floating_base)
    return model, pm, Bridge(model, pm)


# -- compiling jaxmb quickly in tests -----------------------------------------------------------------------------

# jaxmb's programs are large (1-3.5 MB of HLO per robot for all algorithms), and XLA's CPU backend spends most of
# the test time optimizing them. These options turn off LLVM optimizations and the CPU fusion emitters: compiling is
# 3-5x faster, and no arithmetic changes (no fast-math). ``JAXMB_TEST_XLA_DEFAULTS=1`` restores XLA's defaults.
FAST_COMPILE_OPTIONS = supported_options({
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
})  # those this jaxlib knows


def compile_fast(jitted, *args):
    """``jitted`` (a `jax.jit` function) compiled for ``args`` with `FAST_COMPILE_OPTIONS`; call it with the
    non-static arguments.

    The small products are lowered in their multiply-reduce form (`jaxmb.spatial`'s form for GPUs), which compiles
    in half the time of the CPU form's unrolled sums: the oracle checks the recursions, and
    tests/test_spatial.py proves the two forms of each product equal (the other test modules run the CPU form).
    ``JAXMB_TEST_XLA_DEFAULTS=1`` traces the CPU form too."""
    if os.environ.get("JAXMB_TEST_XLA_DEFAULTS"):
        return jitted.lower(*args).compile()
    spatial.UNROLLED_ON_CPU = False
    try:
        lowered = jitted.lower(*args)
    finally:
        spatial.UNROLLED_ON_CPU = True
    return lowered.compile(FAST_COMPILE_OPTIONS)


def run_fast(fn, *args):
    """``jax.jit(fn)(*args)``, compiled with `FAST_COMPILE_OPTIONS`."""
    return compile_fast(jax.jit(fn), *args)(*args)


# -- spatial vectors -------------------------------------------------------------------------------------------


def swap_spatial(x, axis=-1):
    """``[a; b] -> [b; a]`` along ``axis`` (length 6): jaxmb ``[w; v]`` <-> Pinocchio ``[v; w]``. Its own inverse."""
    x = np.asarray(x)
    if x.shape[axis] != 6:
        raise ValueError(f"axis {axis} of a spatial array must have length 6, got shape {x.shape}")
    return np.concatenate([np.take(x, [3, 4, 5], axis), np.take(x, [0, 1, 2], axis)], axis)


def motion_from_pin(m: "pin.Motion"):
    """A `pin.Motion` as a jaxmb spatial motion ``[w; v]`` (6,)."""
    return np.concatenate([np.asarray(m.angular), np.asarray(m.linear)])


def motion_to_pin(x) -> "pin.Motion":
    x = np.asarray(x, float)
    return pin.Motion(x[3:], x[:3])


def force_from_pin(f: "pin.Force"):
    """A `pin.Force` as a jaxmb spatial force ``[n; f]`` (6,)."""
    return np.concatenate([np.asarray(f.angular), np.asarray(f.linear)])


def force_to_pin(x) -> "pin.Force":
    x = np.asarray(x, float)
    return pin.Force(x[3:], x[:3])


def pose_from_pin(M: "pin.SE3"):
    """(R (3, 3), p (3,)) of a `pin.SE3`."""
    return np.asarray(M.rotation), np.asarray(M.translation)


# -- the bridge --------------------------------------------------------------------------------------------------


def _joint_kind_of_pin(jm):
    """The joint family of a Pinocchio joint model: free, spherical, planar, unbounded (cos/sin) or 1-dof."""
    name = jm.shortname()
    if name == "JointModelFreeFlyer":
        return "free"
    if name in ("JointModelSpherical", "JointModelSphericalZYX"):
        return "spherical" if name == "JointModelSpherical" else "spherical_zyx"
    if name == "JointModelPlanar":
        return "planar"
    if name.startswith("JointModelRUB") or name == "JointModelRevoluteUnboundedUnaligned":
        return "unbounded"
    if jm.nq == 1 and jm.nv == 1:
        return "scalar"
    return name


class Bridge:
    """Converters between the states of a jaxmb model and a Pinocchio model built from the same URDF.

    Attributes:
        jid (nb,): Pinocchio joint id of each jaxmb body (joint); ``body_of_jid`` the inverse (-1 for universe).
        P (pin.nv, nv): ``v_pin = P v``; orthogonal, so ``v = P.T v_pin`` and ``M_pin = P M P.T``.
        v_perm (pin.nv,): ``v_pin = v[v_perm]``.
    All converters take arrays with any leading batch axes.
    """

    def __init__(self, model, pm):
        self.model, self.pm = model, pm
        topo = model.topology
        if pm.nv != model.nv or pm.njoints - 1 != model.nb:
            raise ValueError(f"{model.name}: jaxmb nv={model.nv}, nb={model.nb} but Pinocchio nv={pm.nv}, "
                             f"joints={pm.njoints - 1}")
        self.jid = np.zeros(model.nb, int)
        self.kind = []
        v_perm = np.full(pm.nv, -1)
        for i, jname in enumerate(model.joint_names):
            pname = PIN_ROOT_JOINT if (jname == JAXMB_ROOT_JOINT and topo.kinds[i] == "free") else jname
            if not pm.existJointName(pname):
                raise ValueError(f"{model.name}: Pinocchio has no joint {pname!r} (jaxmb joint {jname!r})")
            j = pm.getJointId(pname)
            jm = pm.joints[j]
            kind = _joint_kind_of_pin(jm)
            expected = {"free": "free", "spherical": "spherical", "planar": "planar"}.get(kind, "screw")
            if topo.kinds[i] != expected or jm.nv != topo.nv_body[i]:
                raise ValueError(f"{model.name}: joint {jname!r} is {topo.kinds[i]} in jaxmb but "
                                 f"{jm.shortname()} in Pinocchio")
            self.jid[i] = j
            self.kind.append(kind)
            lv = np.arange(jm.nv)
            if kind == "free":
                lv = np.array([3, 4, 5, 0, 1, 2])  # pin [v; w] <- jaxmb [w; v]
            v_perm[jm.idx_v + np.arange(jm.nv)] = topo.v_offset[i] + lv
        assert sorted(v_perm) == list(range(model.nv))
        self.v_perm = v_perm
        self.v_perm_inv = np.argsort(v_perm)
        self.P = np.eye(model.nv)[v_perm]
        self.body_of_jid = np.full(pm.njoints, -1)
        self.body_of_jid[self.jid] = np.arange(model.nb)

    # -- configurations ----------------------------------------------------------------------------------------

    def q_to_pin(self, q):
        """jaxmb configuration (..., nq) -> Pinocchio configuration (..., pin.nq)."""
        q = np.asarray(q, float)
        topo, out = self.model.topology, np.zeros(q.shape[:-1] + (self.pm.nq,))
        for i, kind in enumerate(self.kind):
            jm = self.pm.joints[int(self.jid[i])]
            qi = q[..., topo.q_offset[i] : topo.q_offset[i] + topo.nq_body[i]]
            if kind == "free":
                x = np.concatenate([qi[..., :3], qi[..., 4:7], qi[..., 3:4]], -1)
            elif kind == "spherical":
                x = np.concatenate([qi[..., 1:4], qi[..., 0:1]], -1)
            elif kind == "planar":
                x = np.stack([qi[..., 0], qi[..., 1], np.cos(qi[..., 2]), np.sin(qi[..., 2])], -1)
            elif kind == "unbounded":
                x = np.stack([np.cos(qi[..., 0]), np.sin(qi[..., 0])], -1)
            elif kind == "scalar":
                x = qi
            else:
                raise NotImplementedError(f"joint {self.pm.names[int(self.jid[i])]!r}: {kind}")
            out[..., jm.idx_q : jm.idx_q + jm.nq] = x
        return out

    def q_from_pin(self, q_pin):
        """Pinocchio configuration (..., pin.nq) -> jaxmb configuration (..., nq)."""
        q_pin = np.asarray(q_pin, float)
        topo, out = self.model.topology, np.zeros(q_pin.shape[:-1] + (self.model.nq,))
        for i, kind in enumerate(self.kind):
            jm = self.pm.joints[int(self.jid[i])]
            x = q_pin[..., jm.idx_q : jm.idx_q + jm.nq]
            if kind == "free":
                qi = np.concatenate([x[..., :3], x[..., 6:7], x[..., 3:6]], -1)
            elif kind == "spherical":
                qi = np.concatenate([x[..., 3:4], x[..., 0:3]], -1)
            elif kind == "planar":
                qi = np.stack([x[..., 0], x[..., 1], np.arctan2(x[..., 3], x[..., 2])], -1)
            elif kind == "unbounded":
                qi = np.arctan2(x[..., 1:2], x[..., 0:1])
            elif kind == "scalar":
                qi = x
            else:
                raise NotImplementedError(f"joint {self.pm.names[int(self.jid[i])]!r}: {kind}")
            out[..., topo.q_offset[i] : topo.q_offset[i] + topo.nq_body[i]] = qi
        return out

    # -- velocities, accelerations, generalized forces -------------------------------------------------------------

    def v_to_pin(self, v):
        """jaxmb velocity, acceleration or generalized force (..., nv) -> Pinocchio's (..., nv)."""
        return np.asarray(v, float)[..., self.v_perm]

    def v_from_pin(self, v_pin):
        return np.asarray(v_pin, float)[..., self.v_perm_inv]

    tau_to_pin, tau_from_pin = v_to_pin, v_from_pin

    def matrix_from_pin(self, M_pin):
        """A (pin.nv, pin.nv) matrix on velocities (mass matrix) in jaxmb's order: ``P.T M_pin P``."""
        return self.P.T @ np.asarray(M_pin) @ self.P

    def jacobian_from_pin(self, J_pin):
        """A Pinocchio Jacobian (..., 6, pin.nv) ``[v; w]`` rows as a jaxmb Jacobian (..., 6, nv) ``[w; v]``."""
        return swap_spatial(np.asarray(J_pin) @ self.P, axis=-2)

    def jacobian_to_pin(self, J):
        return swap_spatial(np.asarray(J), axis=-2) @ self.P.T

    # -- per-body quantities ---------------------------------------------------------------------------------------

    def fext_to_pin(self, f_ext):
        """jaxmb external forces (nb, 6) (body frame, ``[n; f]``) -> Pinocchio's list of `pin.Force` per joint
        (njoints, local joint frame, universe first). Body frame == joint frame in both libraries."""
        f_ext = np.asarray(f_ext, float)
        out = [pin.Force.Zero() for _ in range(self.pm.njoints)]
        for i, j in enumerate(self.jid):
            out[int(j)] = force_to_pin(f_ext[i])
        return out

    def fext_from_pin(self, forces):
        return np.stack([force_from_pin(forces[int(j)]) for j in self.jid])

    def body_motions_from_pin(self, motions):
        """Pinocchio per-joint motions (``data.v``, ``data.a``) as jaxmb (nb, 6) in body order."""
        return np.stack([motion_from_pin(motions[int(j)]) for j in self.jid])

    def body_poses_from_pin(self, placements):
        """Pinocchio per-joint placements (``data.oMi``) as jaxmb body poses (R (nb, 3, 3), p (nb, 3))."""
        return (np.stack([np.asarray(placements[int(j)].rotation) for j in self.jid]),
                np.stack([np.asarray(placements[int(j)].translation) for j in self.jid]))

    # -- frames ----------------------------------------------------------------------------------------------------

    def frame_id(self, name):
        """Pinocchio frame id of a jaxmb frame (a URDF link name; links merged by fixed joints included)."""
        if self.pm.existFrame(name, pin.BODY):
            return self.pm.getFrameId(name, pin.BODY)
        if self.pm.existFrame(name):
            return self.pm.getFrameId(name)
        raise KeyError(f"{self.model.name}: Pinocchio has no frame {name!r}")

    def frame_body(self, name):
        """jaxmb body index that a Pinocchio frame is attached to (-1: the world / universe)."""
        return int(self.body_of_jid[self.pm.frames[self.frame_id(name)].parentJoint])

    def merged_frames(self):
        """Names of the links merged into a body by fixed joints (frames in both libraries, not jaxmb bodies)."""
        m = self.model
        return [n for n, b in zip(m.frame_names, m.frame_body) if b >= 0 and n not in m.body_names]
