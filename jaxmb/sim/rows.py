"""The constraint rows of a step, built once, which either solver consumes.

A step's rows come in blocks, in this order: the contacts of the constraint model, ``k`` rows per contact slot in
the directions ``edges`` of its frame ``[n, t1, t2]`` (Coulomb's cone on its normal and tangents, ``k = 3``, or
the Newton solver's four pyramid edges ``n +- mu t_j``, ``k = 4``: `jaxmb.sim.contact_frames.pyramid`), then the
joint rows (each limited coordinate's limit, then each Coulomb friction row: `jaxmb.sim.joint_rows`; then each
ball joint's range, `jaxmb.sim.ball_limits`, then each tendon's limit and friction rows, `jaxmb.sim.tendons`, then the
bilateral rows of the equality constraints, `jaxmb.sim.equality_rows`: rows on several coordinates, whose
``coordinate`` is -1). Each row has
its Jacobian row ``J_i`` on the (spanning) tree's velocities, its reference velocity ``v_star_i`` (the velocity the
row asks for at the step's end), its impulse bounds, and, where the scene states MuJoCo's soft constraints, its
weight ``D_i = 1 / R_i`` (`jaxmb.sim.impedance`).

Reference velocities by jaxmb's rule. A contact's normal row and a limit row take `jaxmb.sim.joint_rows.
target_velocity`: close a gap in one step at most, remove a penetration at the rate ``1/timeconst``. A cone's
tangent rows under the Gauss-Seidel solver ask for no slip: it solves Coulomb's law, in which a sticking contact
does not slide. The Newton solver's soft rows would then stop a sliding contact, or lift a sliding body at ``mu``
times its slip, within one step; their tangent (and edge) targets keep the part of the slip that MuJoCo's reference
acceleration with the damping ``b = 2 / timeconst`` leaves after a step, ``(1 - 2 dt / timeconst)`` of it. jaxmb's
softness ``R`` is a fraction ``regularization`` of each row's diagonal of ``J M^-1 J*``, which each solver has at
hand (the Gauss-Seidel solver's compliance, the Newton solver's metric): `Rows.D` is None then.
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxmb.sim.ball_limits import mujoco_ball_rows, with_ball_rows
from jaxmb.sim.collision import Contacts
from jaxmb.sim.contact_frames import contact_jacobian, friction, pyramid
from jaxmb.sim.equality_rows import drift as equality_drift
from jaxmb.sim.equality_rows import mujoco_rows as equality_mujoco_rows
from jaxmb.sim.equality_rows import with_equality_rows_after
from jaxmb.sim.impedance import mujoco_rows
from jaxmb.sim.joint_rows import JointRows, joint_rows, limit_distances, target_velocity
from jaxmb.sim.tendons import tendon_geometry
from jaxmb.sim.tendons import mujoco_rows as tendon_mujoco_rows
from jaxmb.sim.tendons import with_tendon_rows_after


class Rows(NamedTuple):
    """Every constraint row of a step (module docstring): ``J`` (n, nv) the rows' Jacobian on the (spanning) tree's
    velocities, ``v_star`` (n,) their reference velocities, ``lo``, ``hi`` (s,) the impulse bounds of the scalar
    rows (a pyramid's edges and the joint rows; a cone's three rows are bounded by its friction ``mu`` instead),
    ``mu`` (nc,) the contacts' friction, ``D`` (n,) the rows' weights by MuJoCo's rule or None (jaxmb's rule: the
    solver's), ``edges`` (nc, k, 3) the directions of each contact's rows in its frame, ``contacts`` the contact
    slots (None without contact rows), and ``joints`` the `jaxmb.sim.joint_rows.JointRows` of the joint block."""

    J: jnp.ndarray
    v_star: jnp.ndarray
    lo: jnp.ndarray
    hi: jnp.ndarray
    mu: jnp.ndarray
    D: jnp.ndarray | None
    edges: jnp.ndarray
    contacts: Contacts | None
    joints: JointRows

    @property
    def n_contact(self) -> int:
        """The number of contact rows (``k nc``), the first of ``J``."""
        return self.edges.shape[0] * self.edges.shape[1]


def rows_per_contact(scene) -> int:
    """``k``: 4 for the Newton solver's pyramids, else 3 (a cone's normal and tangents)."""
    return 4 if scene.options.solver == "newton" and scene.options.cone != "elliptic" else 3


def constraint_rows(scene, q, qd, dt, kin) -> Rows | None:
    """The `Rows` of the step at ``q`` with the (spanning) tree's velocities ``qd`` (nv,), the contact slots of the
    `jaxmb.sim.stages.Kinematics` ``kin``; None where the step has no row."""
    dtype = qd.dtype
    joints, ball_dist = with_ball_rows(scene, q, dt, joint_rows(scene, q, dt))
    joints = with_tendon_rows_after(scene, q, dt, joints, kin.T)
    joints, eq_errors = with_equality_rows_after(scene, q, dt, kin.T, joints)
    n_tendon = 0 if scene.tendons is None else scene.tendons.rows
    n_eq = 0 if eq_errors is None else eq_errors.shape[0]
    con = kin.contacts if scene.nc and scene.options.contact == "constraint" else None
    if con is None and not joints.J.shape[0]:
        return None
    newton = scene.options.solver == "newton"
    elliptic = not newton or scene.options.cone == "elliptic"
    k = rows_per_contact(scene)
    J, v_star, lo, hi = [joints.J], [joints.v_star], [joints.lo], [joints.hi]
    mu = jnp.zeros(0, dtype)
    edges = jnp.zeros((0, k, 3), dtype)
    if con is not None:
        nc = scene.nc
        mu = friction(scene)
        edges = jnp.eye(3, dtype=dtype)[None].repeat(nc, 0) if elliptic else pyramid(mu)  # (nc, k, 3)
        J3 = contact_jacobian(scene, kin.T, con).reshape(nc, 3, -1)
        J.insert(0, jnp.einsum("cer,crv->cev", edges, J3).reshape(k * nc, -1))
        target = target_velocity(con.dist, dt, scene.contact.timeconst)[:, None] * edges[:, :, 0]
        if newton:  # the part of the slip that the reference acceleration keeps (module docstring)
            kept = 1.0 - jnp.minimum(2.0 * dt / scene.contact.timeconst, 1.0)
            slip = jnp.einsum("cer,cr->ce", edges.at[:, :, 0].set(0.0), jnp.einsum("crv,v->cr", J3, qd))
            target = target + kept * slip
        v_star.insert(0, target.reshape(-1))
        if not elliptic:
            lo.insert(0, jnp.zeros(k * nc, dtype))
            hi.insert(0, jnp.full(k * nc, jnp.inf, dtype))
    J = jnp.concatenate(J)
    D = None
    v_star = jnp.concatenate(v_star)
    if scene.impedance is not None:  # MuJoCo's soft constraints (`jaxmb.sim.impedance`)
        limit_dist = limit_distances(scene, q)[0] if scene.options.limited else None
        D, v_star = mujoco_rows(scene, dt, None if con is None else con.dist, J @ qd, mu if con is not None else None,
                                elliptic, limit_dist)
        u = J @ qd
        end = u.shape[0] - n_eq  # where the tendons' rows end and the equalities' begin
        if ball_dist is not None:  # the ball rows (`jaxmb.sim.ball_limits`), then the tendons'
            n = ball_dist.shape[0]
            D_b, v_b = mujoco_ball_rows(scene, dt, ball_dist, u[end - n_tendon - n:end - n_tendon])
            D, v_star = jnp.concatenate([D, D_b]), jnp.concatenate([v_star, v_b])
        if n_tendon:  # the tendons' rows (`jaxmb.sim.tendons`)
            geo = tendon_geometry(scene, q, kin.T)
            D_t, v_t = tendon_mujoco_rows(scene.tendons, q, dt, u[end - n_tendon:end], geo)
            D, v_star = jnp.concatenate([D, D_t]), jnp.concatenate([v_star, v_t])
        if n_eq:  # the equalities' rows, last (`jaxmb.sim.equality_rows`)
            jdot_v = equality_drift(scene.equalities, scene.tree, q, qd)
            D_e, v_e = equality_mujoco_rows(scene.equalities, dt, eq_errors, u[end:], jdot_v)
            D, v_star = jnp.concatenate([D, D_e]), jnp.concatenate([v_star, v_e])
    return Rows(J, v_star, jnp.concatenate(lo), jnp.concatenate(hi), mu if elliptic else jnp.zeros(0, dtype), D,
                edges, con, joints)


def joint_coordinates(rows: Rows) -> tuple:
    """The coordinate (static) of each joint row."""
    return tuple(int(j) for j in np.asarray(rows.joints.coordinate))
