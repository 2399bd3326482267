"""Body poses along trajectories, and where a viewer puts each world of a batch and its camera.

A trajectory is ``qs`` (T, nq); a batch of them (B, T, nq); one configuration (nq,) is a trajectory of one frame.
Poses come from `jaxmb.forward_kinematics`, one ``jax.vmap`` over every frame of every trajectory.
"""

from typing import NamedTuple

import jax
import numpy as np

from jaxmb.kinematics import forward_kinematics


class Motion(NamedTuple):
    """World poses of every body in every frame of B trajectories of T frames: ``R`` (B, T, nb, 3, 3), ``p``
    (B, T, nb, 3), numpy float64."""

    R: np.ndarray
    p: np.ndarray


def as_batch(qs, nq) -> np.ndarray:
    """``qs`` (nq,), (T, nq) or (B, T, nq) as (B, T, nq); ValueError naming the shapes otherwise."""
    qs = np.asarray(qs, float)
    if qs.ndim == 0 or qs.shape[-1] != nq or qs.ndim > 3 or 0 in qs.shape:
        raise ValueError(f"qs must have shape (nq,), (T, nq) or (B, T, nq) with nq = {nq} and T, B > 0, got "
                         f"{qs.shape}")
    return qs.reshape((1,) * (3 - qs.ndim) + qs.shape)


def body_motion(model, qs) -> Motion:
    """`Motion` of ``model`` along ``qs`` (`as_batch`), computed in the model's dtype."""
    qs = as_batch(qs, model.nq)
    B, T = qs.shape[:2]
    T_world = jax.jit(jax.vmap(forward_kinematics, (None, 0)))(model, qs.reshape(B * T, -1).astype(model.mass.dtype))
    R = np.asarray(T_world.R, float).reshape(B, T, model.nb, 3, 3)
    return Motion(R, np.asarray(T_world.p, float).reshape(B, T, model.nb, 3))


def reach(drawing) -> float:
    """How far any shape of ``drawing`` on a body reaches from that body's origin (m); world shapes and unbounded
    planes do not count."""
    out = 0.0
    for s in drawing.shapes:
        if s.body < 0 or (s.kind == "plane" and not np.all(s.size[:2] > 0)):
            continue
        if s.kind == "mesh":
            r = np.linalg.norm(s.mesh.vertices, axis=-1).max(initial=0.0)
        elif s.kind == "capsule":
            r = s.size[0] + s.size[1]
        elif s.kind == "cylinder":
            r = np.hypot(s.size[0], s.size[1])
        else:
            r = np.linalg.norm(s.size)
        out = max(out, float(np.linalg.norm(s.placement.p) + r))
    return out


def world_offsets(motion, margin, spacing=None) -> np.ndarray:
    """(B, 3) where each world of a batch sits: side by side along y, ``spacing`` apart (0 overlays them), centred
    on the origin. ``spacing`` None: the width in y that the bodies sweep plus twice ``margin``, and a fifth more."""
    B = motion.p.shape[0]
    if spacing is None:
        y = motion.p[..., 1]
        spacing = 1.2 * (float(y.max() - y.min()) + 2.0 * margin) if y.size else 1.0
    offsets = np.zeros((B, 3))
    offsets[:, 1] = (np.arange(B) - 0.5 * (B - 1)) * float(spacing)
    return offsets


class Bounds(NamedTuple):
    """The box ``lower`` (3,) to ``upper`` (3,) that holds every body origin of every world and frame, grown by the
    shapes' reach."""

    lower: np.ndarray
    upper: np.ndarray

    @property
    def center(self) -> np.ndarray:
        return 0.5 * (self.lower + self.upper)

    @property
    def radius(self) -> float:
        return float(0.5 * np.linalg.norm(self.upper - self.lower))


def bounds(motion, offsets, margin) -> Bounds:
    """The `Bounds` of the bodies of every world (placed at ``offsets`` (B, 3)) in every frame."""
    if motion.p.shape[2] == 0:
        return Bounds(offsets.min(0) - margin, offsets.max(0) + margin)
    points = motion.p + offsets[:, None, None, :]
    flat = points.reshape(-1, 3)
    return Bounds(flat.min(0) - margin, flat.max(0) + margin)
