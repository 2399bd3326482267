"""The range of a ball joint as one constraint row, MuJoCo's: the joint's rotation angle against its range.

A ball joint's quaternion ``[w; v]`` (normalized) turns by the angle ``theta = 2 atan2(|v|, w)`` (taken into
``(-pi, pi]``) about the axis ``v / |v|``; MuJoCo's ``mju_quat2Vel`` gives the rotation vector ``theta v / |v|``,
its length the angle ``|theta|`` and its direction ``u``. The limit row (MuJoCo's ``mjCNSTR_LIMIT_JOINT`` of a
ball joint) has

    dist = range - |theta|        the distance to the range (negative beyond it), ``range`` the larger of MuJoCo's two
                                  numbers (MuJoCo takes ``max(range)``; the lower one is unused)
    J    = -u*                    on the joint's three velocity coordinates (its body-frame angular velocity), so that
                                  ``J qd = -d|theta|/dt``: a positive row velocity moves back into the range

and one impulse ``p >= 0``. The rows follow the coordinate limits and joint-friction rows of `jaxmb.sim.joint_rows`
(`with_ball_rows`); jaxmb's target is `jaxmb.sim.joint_rows.target_velocity` of ``dist``, MuJoCo's
(`mujoco_ball_rows`) its soft row with the joint's ``solref``, ``solimp`` and ``margin`` and the approximate
inverse inertia ``dof_invweight0`` of the joint's first coordinate. A row is active where ``dist`` is below its
margin (MuJoCo's) or always (jaxmb's, whose impulse is zero where the row is apart).

The ranges are leaves (``Scene.ball_ranges``, radians); which joints have one is static
(``Options.ball_limited``). A row through three coordinates is not one coordinate's armature, so the Newton solver
takes a scene with ball-joint ranges on the dense metric (`jaxmb.sim.newton.DenseMetric`) and the Gauss-Seidel
solver takes the rows' compliance from the factored solve (`jaxmb.sim.compliance.with_rows_by_solve`).
"""

import jax.numpy as jnp
import numpy as np

from jaxmb.sim.impedance import _soft
from jaxmb.sim.joint_rows import JointRows, concat, target_velocity


def ball_angles(scene, q):
    """``(dist, u)``: each limited ball joint's distance to its range (nbl,) and its rotation direction ``u``
    (nbl, 3) at ``q`` (module docstring); ``u`` is zero at the identity, where the direction is undefined."""
    qi = np.asarray([i for i, _ in scene.options.ball_limited], int)
    quat = q[qi[:, None] + np.arange(4)]
    quat = quat / jnp.linalg.norm(quat, axis=-1, keepdims=True)
    w, v = quat[:, 0], quat[:, 1:]
    s2 = jnp.sum(v * v, -1)
    turned = s2 > 0
    s = jnp.where(turned, jnp.sqrt(jnp.where(turned, s2, 1.0)), 0.0)
    theta = 2.0 * jnp.arctan2(s, w)
    theta = jnp.where(theta > jnp.pi, theta - 2.0 * jnp.pi, theta)
    axis = v / jnp.where(turned, s, 1.0)[:, None]
    u = jnp.sign(theta)[:, None] * axis
    return scene.ball_ranges - jnp.abs(theta), u


def ball_rows(scene, q, dt) -> tuple:
    """``(rows, dist)``: the `jaxmb.sim.joint_rows.JointRows` of the limited ball joints at ``q`` (jaxmb's targets;
    ``coordinate`` -1: each row spans three) and their distances (nbl,)."""
    nv, dtype = scene.tree.nv, q.dtype
    dist, u = ball_angles(scene, q)
    n = dist.shape[0]
    vi = np.asarray([j for _, j in scene.options.ball_limited], int)
    J = jnp.zeros((n, nv), dtype).at[np.arange(n)[:, None], vi[:, None] + np.arange(3)].set(-u)
    return JointRows(J, target_velocity(dist, dt, scene.contact.timeconst), jnp.zeros(n, dtype),
                     jnp.full(n, jnp.inf, dtype), np.full(n, -1), jnp.ones(n, dtype)), dist


def with_ball_rows(scene, q, dt, rows):
    """``(rows + the ball rows, ball distances)`` (`ball_rows`), or ``(rows, None)`` for a scene without ranges of
    ball joints."""
    if not scene.options.ball_limited:
        return rows, None
    balls, dist = ball_rows(scene, q, dt)
    return concat(rows, balls), dist


def mujoco_ball_rows(scene, dt, dist, u):
    """``(D, v_star)`` (nbl,) of the ball rows by MuJoCo's rule (module docstring) at the distances ``dist`` and
    the row velocities ``u`` (nbl,)."""
    imp = scene.impedance
    vi = np.asarray([j for _, j in scene.options.ball_limited], int)
    R, v_star = _soft(imp.ball_solref, imp.ball_solimp, dist, imp.ball_margin, u, dt, imp.dof_weight[vi])
    return jnp.where(dist < imp.ball_margin, 1 / R, 0.0), v_star


