"""Spatial tendons through sites: lengths and Jacobian rows of paths of straight segments between points fixed to
bodies, as MuJoCo's spatial tendons without wrapping objects or pulleys.

A spatial tendon ``t`` through the sites ``s_0, ..., s_n`` (points ``r_i`` fixed to bodies ``b_i``, or to the world)
has the length

    L_t(q) = sum_i |p_(i+1) - p_i|,        p_i = R_(b_i) r_i + o_(b_i)       (the sites' world positions)

and the Jacobian row ``J_t = dL_t/dq = sum_i e_i* (Jv_(i+1) - Jv_i)``, ``e_i`` the unit direction of segment ``i``
and ``Jv_i`` (3, nv) the world velocity Jacobian of site ``i`` (`jaxmb.jacobian_rows`). Both are read from the step's
body poses ``T`` (`jaxmb.sim.stages.kinematics`). The tendon's passive forces, limit and friction rows and actuators
are the fixed tendons' (`jaxmb.sim.tendons`) with this ``L`` and ``J``; ``J`` depends on ``q``.
"""

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from jaxmb.kinematics import jacobian_rows
from jaxmb.spatial import Transform


@dataclass(frozen=True)
class SpatialTendon:
    """One spatial tendon as written by the user (`spatial_tendon`): plain numbers, checked by
    `jaxmb.sim.tendons.tendons`."""

    name: str
    sites: tuple
    range: tuple
    stiffness: float
    springlength: tuple
    damping: float
    frictionloss: float
    armature: float = 0.0


def spatial_tendon(name, sites, range=None, stiffness=0.0, springlength=(0.0, 0.0), damping=0.0,
                   frictionloss=0.0) -> SpatialTendon:
    """A spatial tendon ``name`` along the straight segments between ``sites`` (at least two ``(body, point)``, the
    body's name or None for the world, the point (3,) in the body's frame), with a length ``range`` (lower, upper)
    (None: not limited), a spring of ``stiffness`` with the dead band ``springlength`` (a length, or (lo, hi)),
    ``damping`` and the Coulomb friction ``frictionloss`` (`jaxmb.sim.tendons`)."""
    if np.ndim(springlength) == 0:
        springlength = (springlength, springlength)
    sites = tuple((b, tuple(float(x) for x in np.ravel(p))) for b, p in sites)
    return SpatialTendon(name, sites, (-np.inf, np.inf) if range is None else tuple(range), stiffness,
                         tuple(springlength), damping, frictionloss)


def site_points(tendons, T: Transform):
    """The sites' world positions (ns, 3) from the body poses ``T`` (Transform, nb)."""
    b = np.asarray(tendons.site_body, int)
    moving = jnp.asarray(b >= 0)
    R = jnp.where(moving[:, None, None], T.R[np.maximum(b, 0)], jnp.eye(3, dtype=T.p.dtype))
    o = jnp.where(moving[:, None], T.p[np.maximum(b, 0)], 0.0)
    return o + jnp.einsum("nij,nj->ni", R, tendons.site_point)


def segments(tendons):
    """``(a, b, tendon)`` (static, nseg each): the first and second site of each segment and its tendon: consecutive
    sites of one tendon."""
    t = np.asarray(tendons.site_tendon, int)
    a = np.flatnonzero(t[:-1] == t[1:])
    return a, a + 1, t[a]


def path_lengths_and_moments(tendons, model, T: Transform):
    """``(L, J)``: the spatial tendons' lengths (nt,) and Jacobian rows (nt, nv) (zero for the fixed tendons) at the
    body poses ``T`` of ``model`` (module docstring)."""
    p = site_points(tendons, T)
    b = np.asarray(tendons.site_body, int)
    frames = Transform(jnp.broadcast_to(jnp.eye(3, dtype=p.dtype), (len(b), 3, 3)), p)
    rows = jacobian_rows(model, T, frames, np.maximum(b, 0))[..., 3:]  # (ns, nv, 3): the sites' world velocities
    rows = jnp.where(jnp.asarray(b >= 0)[:, None, None], rows, 0.0)
    a, c, t = segments(tendons)
    d = p[c] - p[a]
    length = jnp.sqrt(jnp.sum(d * d, -1))
    e = d / length[:, None]
    J_seg = jnp.einsum("sk,svk->sv", e, rows[c] - rows[a])
    nt = tendons.nt
    L = jnp.zeros(nt, p.dtype).at[t].add(length)
    J = jnp.zeros((nt, J_seg.shape[1]), p.dtype).at[t].add(J_seg)
    return L, J
