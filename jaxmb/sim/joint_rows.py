"""Scalar constraint rows on coordinates: the position limits and the Coulomb friction of joints, and jaxmb's
reference velocity of a row at a distance.

A joint row ``e_j*`` (a position limit or Coulomb friction of coordinate ``j``) is the unit generalized force of its
coordinate. Its impulse goes back as the joint force ``e_j* p_j / dt``.

Targets. A contact at distance ``dist`` asks for ``v_n+ >= -dist / dt`` while apart (it may close the gap in this
step and no more: no impact velocity, no bounce) and ``v_n+ >= -dist / timeconst`` in penetration (the
penetration decays at the rate ``1/timeconst``); a limit row the same with the distance to the nearer limit
(`target_velocity`). MuJoCo's rule for the same rows is `jaxmb.sim.impedance`.

Limit rows. A scene's limits are one row per limited coordinate, each toward its nearer limit, and most of them
are far from it: their rows carry no impulse, yet each costs a compliance column and a place in every sweep. A
scene built with ``limit_rows = k`` (`jaxmb.sim.make_scene`) solves ``k`` of them a step, those of the coordinates
nearest to crossing (`nearest_limits`: the smallest margins ``e* v_free - v_star`` at the step's free velocities),
as MuJoCo solves the limits it finds active.
The chosen rows' compliance is `jaxmb.sim.compliance.with_rows_by_solve`.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class JointRows(NamedTuple):
    """Scalar rows on coordinates: ``J`` (k, nv) the signed unit rows ``sign_i e_v_i*`` of the velocity
    ``coordinate`` (k,) (static) with ``sign`` (k,), ``v_star`` (k,) targets, ``lo``, ``hi`` (k,) impulse
    bounds."""

    J: jnp.ndarray
    v_star: jnp.ndarray
    lo: jnp.ndarray
    hi: jnp.ndarray
    coordinate: np.ndarray
    sign: jnp.ndarray


def limit_distances(scene, q):
    """``(dist, sign)`` (nl,) of each limited coordinate (`Options.limited`): its distance to its nearer bound
    (1e6 where both are infinite), and +1 at the lower bound, -1 at the upper."""
    model, limited = scene.tree, scene.options.limited
    qi = np.asarray([i for i, _ in limited])
    lower, upper, qj = model.q_lower[qi], model.q_upper[qi], q[qi]
    to_lower, to_upper = qj - lower, upper - qj
    at_lower = to_lower <= to_upper
    dist = jnp.where(at_lower, to_lower, to_upper)
    return jnp.where(jnp.isfinite(dist), dist, 1e6), jnp.where(at_lower, 1.0, -1.0).astype(q.dtype)


def limit_rows(scene, q, dt) -> JointRows:
    """The limit row of every limited coordinate: toward its nearer limit, pushing away from it."""
    model, limited = scene.tree, scene.options.limited
    dtype = q.dtype
    if not limited:
        return no_joint_rows(model.nv, dtype)
    vi = np.asarray([j for _, j in limited])
    dist, sign = limit_distances(scene, q)
    return JointRows(sign[:, None] * jnp.asarray(np.eye(model.nv)[vi], dtype),
                     target_velocity(dist, dt, scene.contact.timeconst), jnp.zeros(len(vi), dtype),
                     jnp.full(len(vi), jnp.inf, dtype), vi, sign)


def friction_rows(scene, dt, dtype) -> JointRows:
    """The Coulomb friction row of every coordinate with one: its impulse within ``+-frictionloss dt``."""
    model, fi = scene.tree, np.asarray(scene.options.friction, int)
    bound = scene.joints.frictionloss[fi].astype(dtype) * dt
    return JointRows(jnp.asarray(np.eye(model.nv)[fi], dtype), jnp.zeros(len(fi), dtype), -bound, bound, fi,
                     jnp.ones(len(fi), dtype))


def joint_rows(scene, q, dt) -> JointRows:
    """Limit rows (`limit_rows`) then Coulomb friction rows (`friction_rows`) of the scene."""
    return concat(limit_rows(scene, q, dt), friction_rows(scene, dt, q.dtype))


def concat(*rows) -> JointRows:
    return JointRows(*(jnp.concatenate(x) for x in zip(*(r[:4] for r in rows))),
                     np.concatenate([r.coordinate for r in rows]), jnp.concatenate([r.sign for r in rows]))


def split(rows: JointRows, n) -> tuple:
    """``(first, rest)``: the first ``n`` of ``rows`` and the others."""
    head = JointRows(*(x[:n] for x in rows[:4]), rows.coordinate[:n], rows.sign[:n])
    return head, JointRows(*(x[n:] for x in rows[:4]), rows.coordinate[n:], rows.sign[n:])


def no_joint_rows(nv, dtype) -> JointRows:
    z = jnp.zeros((0,), dtype)
    return JointRows(jnp.zeros((0, nv), dtype), z, z, z, np.zeros(0, int), z)


def nearest_limits(rows: JointRows, qd_free, k):
    """The indices (k,) of the ``k`` limit ``rows`` nearest to crossing: the smallest margins ``e* qd_free -
    v_star`` (``qd_free`` (nv,) the velocities the step reaches without constraint forces), which are negative where
    the row would be violated without its impulse. A limit still ``dist`` away has the margin ``(dist + dt e*
    qd_free) / dt``: the free step's distance to it at the step's end."""
    margin = rows.J @ qd_free - rows.v_star
    return jax.lax.top_k(-jax.lax.stop_gradient(margin), k)[1]


def chosen_limits(limits: JointRows, S) -> JointRows:
    """The limit rows that the one-hot rows ``S`` (k, limits) pick (products, not a gather under ``vmap``); their
    coordinates, chosen in the step, are not static (-1)."""
    k = S.shape[0]
    return JointRows(S @ limits.J, S @ limits.v_star, jnp.zeros(k, S.dtype), jnp.full(k, jnp.inf, S.dtype),
                     np.full(k, -1), S @ limits.sign)


def target_velocity(dist, dt, timeconst):
    """``v_star``: close a gap in one step at most; remove a penetration at the rate ``1/timeconst``."""
    return -dist / jnp.where(dist > 0, dt, jnp.maximum(timeconst, dt))


