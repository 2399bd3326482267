"""Contact frames on their bodies: the contact slots of a step, their Jacobian rows, the velocities they see
and the forces they send back.

Contact frames ride on operational space (book ch. 10 and 11.5). A contact between geoms ``a`` and ``b`` at the
world point ``x`` with the frame rows ``C = [n; t1; t2]`` has the constraint velocity ``C (v_b(x) - v_a(x))``. Each
side on a moving body is a task frame: the pose ``(R_k* C*, R_k* (x - p_k))`` on body ``k`` with the rows
``d = +-[0 | 1]`` of its linear velocity, and the contact's rows are the sum of its sides'. A joint row ``e_j*``
(a position limit or Coulomb friction of coordinate ``j``) is the unit generalized force of its coordinate.

The solved impulses go back as the generalized force ``J* p / dt`` of all rows: the world force ``C* p / dt`` on
body ``b`` at ``x`` and its opposite on ``a`` (`body_forces`: body-frame external forces ``[(x - p_k) x F; F]``
rotated into body ``k``). The Newton solver's pyramid cone takes a contact's four edges (`pyramid`).
"""

import functools
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxmb.batching import sum_rows
from jaxmb.kinematics import jacobian_rows
from jaxmb.sim.collision import Contacts, collide
from jaxmb.sim.geometry import DEFAULT_FRICTION, geom_poses
from jaxmb.spatial import Transform, cross3, mv


class Sides(NamedTuple):
    """The static sides of the contact slots: ``body`` (m,) the moving body of each side, ``contact`` (m,) its
    contact slot, ``sign`` (m,) +1 for geom b, -1 for geom a; ``rows`` (3 m,) the contact row of each side row,
    by which `jaxmb.batching.sum_rows` sums the sides into their contacts (passing them through where every contact
    has one side, in slot order)."""

    body: tuple
    contact: np.ndarray
    sign: np.ndarray
    rows: np.ndarray


@functools.cache
def sides(geom_body: tuple, pairs) -> Sides:
    """`Sides` of the contact slots of ``pairs`` between geoms on the bodies ``geom_body``."""
    body, contact, sign = [], [], []
    for i, (ga, gb) in enumerate(zip(pairs.contact_a, pairs.contact_b)):
        for g, s in ((gb, 1.0), (ga, -1.0)):
            if geom_body[g] >= 0:
                body.append(int(geom_body[g]))
                contact.append(i)
                sign.append(s)
    contact = np.asarray(contact, int)
    return Sides(tuple(body), contact, np.asarray(sign), (3 * contact[:, None] + np.arange(3)).reshape(-1))


def contacts(scene, T) -> Contacts:
    """The contact slots (nc) of the scene at body poses ``T`` (Transform, nb): the narrow phase of every pair."""
    return collide(scene.geometry, scene.pairs, geom_poses(scene.geometry, T))


def friction(scene):
    """The friction coefficient of each contact slot (nc,): the larger of its two geoms' (MuJoCo's rule), where a
    geom without one (`jaxmb.sim.geometry.UNSET`, a URDF ``<collision>``) takes the other's, and
    `jaxmb.sim.geometry.DEFAULT_FRICTION` where neither has one."""
    f = scene.geometry.friction
    mu = jnp.maximum(f[np.asarray(scene.pairs.contact_a)], f[np.asarray(scene.pairs.contact_b)])
    return jnp.where(mu < 0, DEFAULT_FRICTION, mu)


def side_frames(T, con, sd):
    """World poses (Transform, m) of the sides' frames, columns ``n, t1, t2`` at the contact point, and their
    poses in their bodies' frames."""
    C_t = jnp.swapaxes(con.frame[sd.contact], -1, -2)  # (m, 3, 3) columns n, t1, t2
    x = con.pos[sd.contact]
    body = np.asarray(sd.body)
    R_k, p_k = T.R[body], T.p[body]
    R_kt = jnp.swapaxes(R_k, -1, -2)
    return Transform(C_t, x), Transform(R_kt @ C_t, mv(R_kt, x - p_k))


def side_rows(sd, dtype):
    """``d`` (m, 3, 6): the linear rows of each side's frame velocity, signed."""
    rows = np.eye(6)[3:]
    return jnp.asarray(sd.sign[:, None, None] * rows, dtype)


def contact_jacobian(scene, T, con):
    """The contact rows' Jacobian (3 nc, nv) on the (spanning) tree's velocities: the sum of each contact's sides'
    rows (module docstring)."""
    tree = scene.tree
    sd = sides(scene.geometry.body, scene.pairs)
    world, _ = side_frames(T, con, sd)
    J_rows = jacobian_rows(tree, T, world, np.asarray(sd.body))  # (m, nv, 6)
    J_f = jnp.einsum("mrj,mvj->mrv", side_rows(sd, T.p.dtype), J_rows).reshape(-1, tree.nv)
    return sum_rows(J_f, sd.rows, 3 * scene.nc)


def body_forces(scene, T, con, F):
    """External forces (nb, 6) in body coordinates about the body origins of the world forces ``F`` (nc, 3) on
    geom b at the contact points, and their opposites on geom a."""
    sd = sides(scene.geometry.body, scene.pairs)
    body = np.asarray(sd.body)
    F_side = jnp.asarray(sd.sign, F.dtype)[:, None] * F[sd.contact]
    R_kt = jnp.swapaxes(T.R[body], -1, -2)
    moment = cross3(con.pos[sd.contact] - T.p[body], F_side)
    f = jnp.concatenate([mv(R_kt, moment), mv(R_kt, F_side)], -1)
    return jnp.zeros((scene.tree.nb, 6), F.dtype).at[body].add(f)


def point_velocities(scene, T, V, con):
    """Velocity of geom b relative to geom a at each contact point (nc, 3), world axes, from the body velocities
    ``V`` (nb, 6) in body coordinates."""
    sd = sides(scene.geometry.body, scene.pairs)
    body = np.asarray(sd.body)
    R_k = T.R[body]
    w, v = mv(R_k, V[body, :3]), mv(R_k, V[body, 3:])
    v_side = jnp.asarray(sd.sign, v.dtype)[:, None] * (v + cross3(w, con.pos[sd.contact] - T.p[body]))
    return jnp.zeros((scene.nc, 3), v_side.dtype).at[sd.contact].add(v_side)


def contact_velocities(scene, T, V, con):
    """The relative velocity of each contact (nc, 3) in its frame ``[n, t1, t2]``."""
    return jnp.einsum("cij,cj->ci", con.frame, point_velocities(scene, T, V, con))


def world_forces(con: Contacts, force):
    """Contact forces (nc, 3) in world axes (on geom b; geom a takes the opposite) from the contact-frame ones."""
    return jnp.einsum("cji,cj->ci", con.frame, force)


def pyramid(mu):
    """``E`` (nc, 4, 3): the edges ``n + mu t1, n - mu t1, n + mu t2, n - mu t2`` of each contact's friction pyramid
    in its frame ``[n, t1, t2]``."""
    one, zero = jnp.ones_like(mu), jnp.zeros_like(mu)
    return jnp.stack([jnp.stack([one, mu, zero], -1), jnp.stack([one, -mu, zero], -1),
                      jnp.stack([one, zero, mu], -1), jnp.stack([one, zero, -mu], -1)], 1)


def one_sided(sd: Sides, nc) -> bool:
    """Whether every contact slot has exactly one moving side, in slot order."""
    return len(sd.body) == nc and bool(np.all(sd.contact == np.arange(nc)))


