"""Converters between a jaxmb model and the MuJoCo model it was loaded from: coordinates, velocities,
accelerations, forces, mass matrix, bias forces and bodies (plain numpy, host side).

`mujoco_map` matches the two models by joint name (MuJoCo's names as `jaxmb.io.mjcf.mujoco_names` gives them), so
it serves a model from `jaxmb.io.mjcf.load_mjcf` and a model from `jaxmb.load_urdf` beside MuJoCo's compile of the
same URDF alike; ``joint_names`` renames joints that the two sides name differently (a free joint added on each
side, say). Each MuJoCo joint must meet a jaxmb joint of its kind (hinge: revolute or continuous, slide: prismatic,
ball: spherical, free: free) and together they must cover all of jaxmb's coordinates.

Conventions, per joint (jaxmb | MuJoCo):

* hinge, slide: ``q = qpos - qpos0`` (``qpos0`` is the joint's ``ref``); velocities, accelerations and forces
  are the same numbers.
* ball: ``q = qpos = [w, x, y, z]``; ``qd = qvel``, the angular velocity in the body frame.
* free: ``q = qpos = [p, w, x, y, z]``, the body's pose in the world; jaxmb's ``qd = [omega; v]`` is the body's
  spatial velocity in its own frame, MuJoCo's ``qvel = [v_W; omega]`` has the origin's velocity in *world* axes
  and the angular velocity in body axes. So ``v = R^T v_W``, with ``R`` the body's rotation, and the map depends
  on ``q``.

Together ``qd = T(q) qvel`` with ``T = blockdiag(R^T on each free joint's v) P``, ``P`` the constant permutation
(`MujocoMap.P`, which is ``T`` for a model without free joints). ``T`` is orthogonal, so forces map by the same
matrix: ``tau = T qfrc``, ``qfrc = T^T tau``, and ``M_mujoco = T^T M T``. Differentiating ``qd = T qvel`` gives
the accelerations ``qdd = T qacc + c``, where ``c = Tdot qvel`` is ``-omega x v`` on each free joint's ``v`` and
zero elsewhere (`MujocoMap.acceleration_offset`). The equations of motion ``M qdd + C = tau`` in MuJoCo's
coordinates then read ``T^T M T qacc + T^T (C + M c) = qfrc``: MuJoCo's bias force ``qfrc_bias`` is
``T^T (C + M c)``, jaxmb's inverse dynamics at ``qdd = c`` (`MujocoMap.bias_to_mujoco`).

The state converters take leading batch axes (``q`` (..., nq), ``qvel`` (..., nv), ``M`` (..., nv, nv)).
"""

from typing import NamedTuple

import numpy as np

from jaxmb.errors import ModelError
from jaxmb.io.mjcf import JOINT_TYPES, body_offset, mujoco_names, quat_matrix
from jaxmb.spatial import Transform

KINDS = {"hinge": ("revolute", "continuous"), "slide": ("prismatic",), "ball": ("spherical",), "free": ("free",)}
"""The jaxmb joint types each MuJoCo joint type can meet."""


class MujocoMap(NamedTuple):
    """Coordinate and body maps between a jaxmb model and a compiled MuJoCo model (module docstring).

    joint_names (njnt,)       the jaxmb joint of each MuJoCo joint
    q_index (nq,) int         ``q[q_index] = qpos - q_offset``
    q_offset (nq,)            MuJoCo's ``qpos0`` on hinge and slide coordinates, zero elsewhere
    v_index (nv,) int         ``(P qvel)[v_index] = qvel``: where each MuJoCo degree of freedom sits in jaxmb's
                              ``qd`` (a free joint's ``[v_W; omega]`` goes to jaxmb's ``[omega; v]``)
    free_q (nfree,) int       where each free joint's quaternion starts in ``q``
    free_v (nfree,) int       where each free joint's ``[omega; v]`` starts in ``qd``
    body_index (nbody,) int   the jaxmb body that carries each MuJoCo body (-1: the world), the body it is merged
                              into for a body welded to its parent
    body_placement            `Transform` (nbody, 3, 3), (nbody, 3): the pose of each MuJoCo body frame in the
                              frame of its jaxmb body (``body_index``)
    """

    joint_names: tuple
    q_index: np.ndarray
    q_offset: np.ndarray
    v_index: np.ndarray
    free_q: np.ndarray
    free_v: np.ndarray
    body_index: np.ndarray
    body_placement: Transform

    @property
    def P(self) -> np.ndarray:
        """(nv, nv) the permutation with ``T(q) = blockdiag(R^T on the free joints' v) P``; ``qd = P qvel`` for a
        model without free joints."""
        n = len(self.v_index)
        P = np.zeros((n, n))
        P[self.v_index, np.arange(n)] = 1.0
        return P

    def qpos_to_q(self, qpos):
        qpos = np.asarray(qpos, float)
        q = np.empty_like(qpos)
        q[..., self.q_index] = qpos - self.q_offset
        return q

    def q_to_qpos(self, q):
        return np.asarray(q, float)[..., self.q_index] + self.q_offset

    def _rotations(self, q):
        return [quat_matrix(np.asarray(q, float)[..., i:i + 4]) for i in self.free_q]

    @staticmethod
    def _batched(q, x):
        """``x`` (..., nv) as a new array broadcast to the batch axes of ``q`` and ``x`` together."""
        x = np.asarray(x, float)
        batch = np.broadcast_shapes(np.shape(q)[:-1], x.shape[:-1])
        return np.array(np.broadcast_to(x, batch + x.shape[-1:]))

    def qvel_to_qd(self, q, qvel):
        """``qd = T(q) qvel``; ``q`` is jaxmb's configuration."""
        qvel = self._batched(q, qvel)
        qd = np.empty_like(qvel)
        qd[..., self.v_index] = qvel
        for R, i in zip(self._rotations(q), self.free_v):
            qd[..., i + 3:i + 6] = np.einsum("...ji,...j->...i", R, qd[..., i + 3:i + 6])
        return qd

    def qd_to_qvel(self, q, qd):
        """``qvel = T(q)^T qd``."""
        x = self._batched(q, qd)
        for R, i in zip(self._rotations(q), self.free_v):
            x[..., i + 3:i + 6] = np.einsum("...ij,...j->...i", R, x[..., i + 3:i + 6])
        return x[..., self.v_index]

    def velocity_map(self, q):
        """``T(q)`` (..., nv, nv) with ``qd = T qvel``."""
        n = len(self.v_index)
        return np.swapaxes(self.qvel_to_qd(np.asarray(q, float)[..., None, :], np.eye(n)), -1, -2)

    def acceleration_offset(self, qd):
        """``c = Tdot qvel`` (..., nv), jaxmb's acceleration where MuJoCo's is zero: ``-omega x v`` on each free
        joint's ``v`` (the rate of ``R^T`` in ``v = R^T v_W``), zero elsewhere."""
        qd = np.asarray(qd, float)
        c = np.zeros_like(qd)
        for i in self.free_v:
            c[..., i + 3:i + 6] = -np.cross(qd[..., i:i + 3], qd[..., i + 3:i + 6])
        return c

    def qacc_to_qdd(self, q, qd, qacc):
        """``qdd = T qacc + c`` from MuJoCo's ``qacc`` at jaxmb's state ``(q, qd)``."""
        return self.qvel_to_qd(q, qacc) + self.acceleration_offset(qd)

    def qdd_to_qacc(self, q, qd, qdd):
        """``qacc = T^T (qdd - c)``."""
        return self.qd_to_qvel(q, np.asarray(qdd, float) - self.acceleration_offset(qd))

    def qfrc_to_tau(self, q, qfrc):
        """``tau = T qfrc`` (``T^-T = T``: ``T`` is orthogonal) from a MuJoCo generalized force (``qfrc_applied``,
        ``qfrc_actuator``, ...)."""
        return self.qvel_to_qd(q, qfrc)

    def tau_to_qfrc(self, q, tau):
        """``qfrc = T^T tau``."""
        return self.qd_to_qvel(q, tau)

    def mass_matrix_to_mujoco(self, q, M):
        """``T^T M T`` (..., nv, nv): MuJoCo's mass matrix (``mj_fullM``) from jaxmb's ``M`` at ``q``."""
        T = self.velocity_map(q)
        return np.swapaxes(T, -1, -2) @ np.asarray(M, float) @ T

    def bias_to_mujoco(self, q, qd, bias, M):
        """``T^T (C + M c)`` (..., nv): MuJoCo's ``qfrc_bias`` from jaxmb's bias force ``C`` (`jaxmb.bias_forces`)
        and mass matrix ``M`` at ``(q, qd)``; equally ``tau_to_qfrc(q, inverse_dynamics(model, q, qd, c))``."""
        c = self.acceleration_offset(qd)
        return self.tau_to_qfrc(q, np.asarray(bias, float) + np.einsum("...ij,...j->...i", M, c))

    def pose_on_body(self, body, pos, quat):
        """``(jaxmb body index, Transform)``: a pose given in the frame of MuJoCo body ``body`` (a geom's
        ``geom_pos, geom_quat``, a site's, a camera's) as a pose in the frame of its jaxmb body (-1: the world)."""
        R, p = self.body_placement.R[body], self.body_placement.p[body]
        return int(self.body_index[body]), Transform(R @ quat_matrix(quat), p + R @ np.asarray(pos, float))


def mujoco_map(model, mj, joint_names=None) -> MujocoMap:
    """The `MujocoMap` between the jaxmb ``model`` and the compiled MuJoCo model ``mj``, matched by joint name.

    ``joint_names``: {MuJoCo joint name: jaxmb joint name} where they differ; MuJoCo's unnamed joints are named as
    `jaxmb.io.mjcf.mujoco_names` says (the free joint of body ``base`` is ``"base_free"``). The jaxmb frame of a
    MuJoCo body with joints is taken at the anchor of its last joint (`jaxmb.io.mjcf.body_offset`), as
    `jaxmb.io.mjcf.load_mjcf` places it; a model loaded from a URDF agrees, since MuJoCo's URDF compiler puts every
    joint at its body's origin.

    Raises `jaxmb.ModelError` where a MuJoCo joint has no jaxmb joint of that name and kind, a jaxmb joint is left
    unmatched, or a free joint is not a root placed at the world origin (its coordinates would not be MuJoCo's).
    """
    names = mujoco_names(mj)
    rename = dict(joint_names or {})
    unknown = sorted(set(rename) - set(names.joints))
    if unknown:
        raise ModelError(f"{model.name}: joint_names renames {unknown}, which MuJoCo's model does not have (its "
                         f"joints are {list(names.joints)})")
    jnames = tuple(rename.get(n, n) for n in names.joints)
    q_index, q_offset, v_index = np.full(mj.nq, -1), np.zeros(mj.nq), np.full(mj.nv, -1)
    free_q, free_v = [], []
    for j, name in enumerate(jnames):
        kind = JOINT_TYPES[mj.jnt_type[j]]
        where = f"{model.name}: MuJoCo {kind} joint {names.joints[j]!r}"
        if name not in model.joint_names:
            raise ModelError(f"{where} has no jaxmb joint {name!r} (pass joint_names={{MuJoCo name: jaxmb name}} "
                             f"where they differ; jaxmb's joints are {list(model.joint_names)})")
        i = model.joint_index(name)
        if model.joint_types[i] not in KINDS[kind]:
            raise ModelError(f"{where} meets jaxmb joint {name!r} of type {model.joint_types[i]!r}, expected one "
                             f"of {KINDS[kind]}")
        qs, vs = model.joint_coordinates(name)
        qa, da = int(mj.jnt_qposadr[j]), int(mj.jnt_dofadr[j])
        q_index[qa:qa + qs.stop - qs.start] = np.arange(qs.start, qs.stop)
        v = np.arange(vs.start, vs.stop)
        if kind == "free":
            _check_free_root(model, i, where)
            v = np.concatenate([v[3:], v[:3]])  # MuJoCo [v_W; omega] -> jaxmb [omega; v]
            free_q.append(qs.start + 3)
            free_v.append(vs.start)
        elif kind in ("hinge", "slide"):
            q_offset[qa] = mj.qpos0[qa]
        v_index[da:da + len(v)] = v
    unmatched = sorted(set(model.joint_names) - set(jnames))
    if unmatched or mj.nq != model.nq or mj.nv != model.nv:
        raise ModelError(f"{model.name}: jaxmb joints {unmatched} have no MuJoCo joint (nq {model.nq} vs MuJoCo's "
                         f"{mj.nq}, nv {model.nv} vs {mj.nv}); pass joint_names where the names differ")
    body_index, placement = _body_map(model, mj, jnames)
    return MujocoMap(jnames, q_index, q_offset, v_index, np.array(free_q, int), np.array(free_v, int), body_index,
                     placement)


def _check_free_root(model, i, where):
    R, p = np.asarray(model.X_tree.R[i]), np.asarray(model.X_tree.p[i])
    if model.topology.parent[i] != -1 or np.abs(R - np.eye(3)).max() > 1e-12 or np.abs(p).max() > 1e-12:
        raise ModelError(f"{where}: its jaxmb joint must join a root body to the world at the origin, so that its "
                         "coordinates are the body's pose in the world as MuJoCo's are")


def _body_map(model, mj, jnames):
    """``(body_index (nbody,), body_placement)`` (`MujocoMap`): a body with joints is the jaxmb body its last
    joint moves, its frame translated by ``-body_offset``; a body without joints lies in its parent's."""
    index = np.full(mj.nbody, -1)
    R, p = np.tile(np.eye(3), (mj.nbody, 1, 1)), np.zeros((mj.nbody, 3))
    for b in range(1, mj.nbody):
        n = int(mj.body_jntnum[b])
        if n:
            index[b] = model.joint_index(jnames[int(mj.body_jntadr[b]) + n - 1])
            p[b] = -body_offset(mj, b)
        else:
            a = int(mj.body_parentid[b])
            index[b] = index[a]
            R[b] = R[a] @ quat_matrix(mj.body_quat[b])
            p[b] = p[a] + R[a] @ np.asarray(mj.body_pos[b], float)
    return index, Transform(R, p)
