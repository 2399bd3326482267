"""Contact and joint constraints of one step: the contact-space compliance by the operational-space sweeps, the
rows of joint limits and joint friction, compliant contact forces, and the forces that go back to the bodies.

Contact frames ride on operational space (book ch. 10 and 11.5). A contact between geoms ``a`` and ``b`` at the
world point ``x`` with the frame rows ``C = [n; t1; t2]`` has the constraint velocity ``C (v_b(x) - v_a(x))``. Each
side on a moving body is a task frame: the pose ``(R_k* C*, R_k* (x - p_k))`` on body ``k`` with the rows
``d = +-[0 | 1]`` of its linear velocity, and the contact's rows are the sum of its sides'. A joint row ``e_j*``
(a position limit or Coulomb friction of coordinate ``j``) is the unit generalized force of its coordinate. The
compliance ``A = J M^-1 J*`` of all rows comes from the innovations factorization ``M^-1 = [I - H psi K]* D^-1
[I - H psi K]`` (7.18): each row's column of ``[I - H psi K] J*`` is nonzero only on the path from its body to the
root, and is recorded there by walking it up that path with the articulated-body factors ``P, D, G`` of the state
(`jaxmb.dynamics.compliance`), so ``A = Y* D^-1 Y`` in O(N + depth x rows). ``M`` and ``M^-1`` are never
formed. A closed-loop scene's rows are the same rows on the spanning tree's velocities, taken to its independent
ones and their compliance by `jaxmb.sim.closed_loops.loop_space`.

The solved impulses go back as the generalized force ``J* p / dt`` of all rows (the world force ``C* p / dt`` on
body ``b`` at ``x`` and its opposite on ``a``, and the joint forces ``e_j* p_j / dt``), whose accelerations
``M^-1 J* p / dt`` the integrator adds to the free ones by the factored solve (7.18) with the same ``G, D``: one
up and one down sweep, no articulated inertia computed twice. Compliant contact forces, which the RK4 stages
recompute where the bodies are, go back as body-frame external forces ``[(x - p_k) x F; F]`` rotated into body
``k``.

Targets. A contact at distance ``dist`` asks for ``v_n+ >= -dist / dt`` while apart (it may close the gap in this
step and no more: no impact velocity, no bounce) and ``v_n+ >= -dist / timeconst`` in penetration (the
penetration decays at the rate ``1/timeconst``); a limit row the same with the distance to the nearer limit.

Limit rows. A scene's limits are one row per limited coordinate, each toward its nearer limit, and most of them
are far from it: their rows carry no impulse, yet each costs a compliance column and a place in every sweep. A
scene built with ``limit_rows = k`` (`jaxmb.sim.make_scene`) solves ``k`` of them a step, those of the coordinates
nearest to crossing (`nearest_limits`: the smallest margins ``e* v_free - v_star`` at the step's free velocities),
as MuJoCo solves the limits it finds active. Which rows those are is decided in the step, so their compliance
columns ``M^-1 e`` come from the factored solve (7.18), one up and one down sweep each, and their couplings from
the other rows' Jacobian: ``A_ck = J_c M^-1 e``. The step is the uncapped one wherever at most ``k`` limits
engage; beyond that the least urgent wait for a later step.

Newton rows. A scene with ``solver="newton"`` (`newton_forces`, `jaxmb.sim.newton`) takes each contact as
Coulomb's elliptic cone on its three rows ``C`` (normal and tangents; ``cone="elliptic"``) or as the four edges
``E C`` of its friction pyramid (`pyramid`), and every limit and friction row, and needs no compliance: the Newton
solver's Hessian is the mass matrix with the active rows added as body inertias, each contact row's ``d = [r x u;
u]`` in its body's coordinates (``u`` the row's direction, ``r`` the contact point). A tangent row's target (an
edge's: its normal's plus this) is the part of its velocity that the slip makes, less the fraction ``2 dt /
timeconst`` of it that MuJoCo's reference acceleration (its damping ``b = 2 / timeconst``) removes in a step:
without it a sliding contact would stop slipping, or lift a sliding body at ``mu`` times its slip, within one
step.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import sum_rows
from jaxmb.dynamics.articulated import articulated_inertias, solve_factored
from jaxmb.dynamics.compliance import unit_forces, walk_columns
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.hinges import body_inertias, hinge_map, joint_poses
from jaxmb.kinematics import jacobian_rows
from jaxmb.sim.closed_loops import is_closed, loop_space
from jaxmb.sim.collision import Contacts, collide
from jaxmb.sim.geometry import DEFAULT_FRICTION, geom_poses
from jaxmb.sim.impedance import mujoco_rows
from jaxmb.sim.newton import DenseMetric, TreeMetric
from jaxmb.sim.newton import Problem as NewtonProblem
from jaxmb.sim.newton import solution as newton_solution
from jaxmb.sim.solver import Problem, solve
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


def _side_frames(T, con, sd):
    """World poses (Transform, m) of the sides' frames, columns ``n, t1, t2`` at the contact point, and their
    poses in their bodies' frames."""
    C_t = jnp.swapaxes(con.frame[sd.contact], -1, -2)  # (m, 3, 3) columns n, t1, t2
    x = con.pos[sd.contact]
    body = np.asarray(sd.body)
    R_k, p_k = T.R[body], T.p[body]
    R_kt = jnp.swapaxes(R_k, -1, -2)
    return Transform(C_t, x), Transform(R_kt @ C_t, mv(R_kt, x - p_k))


def _side_rows(sd, dtype):
    """``d`` (m, 3, 6): the linear rows of each side's frame velocity, signed."""
    rows = np.eye(6)[3:]
    return jnp.asarray(sd.sign[:, None, None] * rows, dtype)


def contact_jacobian(scene, T, con):
    """The contact rows' Jacobian (3 nc, nv) on the (spanning) tree's velocities: the sum of each contact's sides'
    rows (module docstring)."""
    tree = scene.tree
    sd = sides(scene.geometry.body, scene.pairs)
    world, _ = _side_frames(T, con, sd)
    J_rows = jacobian_rows(tree, T, world, np.asarray(sd.body))  # (m, nv, 6)
    J_f = jnp.einsum("mrj,mvj->mrv", _side_rows(sd, T.p.dtype), J_rows).reshape(-1, tree.nv)
    return sum_rows(J_f, sd.rows, 3 * scene.nc)


def contact_space(scene, model, q, T, con, ab):
    """``(J, A)``: the contact rows' Jacobian (3 nc, nv) and compliance ``J M^-1 J*`` (3 nc, 3 nc) (module
    docstring), from the articulated-body quantities ``ab`` of ``model`` at ``q``; for a closed-loop ``model``
    the rows on ``yd`` and their compliance (`jaxmb.sim.closed_loops.loop_space`)."""
    return row_space(scene, model, q, T, con, ab, _no_joint_rows(scene.tree.nv, T.p.dtype))


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


def compliant_law(c, mu, dist, v):
    """The compliant contact force (3,) in the contact frame ``[n, t1, t2]`` of one contact at the signed distance
    ``dist`` with the relative velocity ``v`` (3,) in that frame (`ContactParams` ``c``, friction ``mu``): smooth in
    both, zero apart. The smooth maximum keeps the Hunt-Crossley force from pulling when the surfaces separate fast.
    The implicit step differentiates the law, and reverse mode differentiates that again: ``delta^1.5`` is
    evaluated where it touches only, so that its infinite second derivative at ``delta = 0`` never meets a zero."""
    touching = dist < 0
    depth = jnp.where(touching, jnp.where(touching, -dist, 1.0) ** 1.5, 0.0)  # delta^1.5: no infinite second
    s = 1.0 - c.dissipation * v[0]  # 1 + c ddelta/dt, ddelta/dt = -v_n        # derivative at contact
    f_n = c.stiffness * depth * 0.5 * (s + jnp.sqrt(s * s + 1e-6))
    slip = jnp.sqrt(jnp.sum(v[1:] ** 2) + c.slip_velocity**2)
    return jnp.concatenate([f_n[None], -(mu * f_n / slip) * v[1:]])


def contact_velocities(scene, T, V, con):
    """The relative velocity of each contact (nc, 3) in its frame ``[n, t1, t2]``."""
    return jnp.einsum("cij,cj->ci", con.frame, point_velocities(scene, T, V, con))


def compliant_forces(scene, T, V, con):
    """Contact forces (nc, 3) in each contact's frame of the compliant model (`compliant_law`)."""
    law = jax.vmap(compliant_law, (None, 0, 0, 0))
    return law(scene.contact, friction(scene), con.dist, contact_velocities(scene, T, V, con))


def implicit_compliant_forces(scene, model, q, T, con, ab, qdd, dt):
    """The correction (nc, 3) to the compliant contact forces that makes them implicit in velocity: the linearized
    backward-Euler step ``(M + J* W J) (qd+ - qd) = dt f`` with ``W = -dt (df/dv + dt df/ddist n*)``, contact by
    contact (the force law's own derivatives; the distance moves by ``dt v_n``). By the push-through identity

        (M + J* W J)^-1 = M^-1 - M^-1 J* W (1 + A W)^-1 J M^-1,        A = J M^-1 J*

    it is the contact force ``-W (1 + A W)^-1 J qdd`` added to the explicit one, ``qdd`` the explicit step's
    accelerations: the contact-space compliance ``A`` of the operational-space walk, a (3 nc)-square solve and one
    more articulated-body sweep replace a stiff contact's time-step limit. ``ab``: the articulated-body quantities
    of ``model`` at ``q``.

    The step's derivative is exact: ``W`` is differentiated too (the force law's second derivatives, which
    `compliant_law` keeps finite at first touch)."""
    c = scene.contact
    J, A = contact_space(scene, model, q, T, con, ab)
    v = contact_velocities(scene, T, ab.V, con)
    law = lambda mu, dist, v: compliant_law(c, mu, dist, v)
    df_dv = jax.vmap(jax.jacfwd(law, 2))(friction(scene), con.dist, v)  # (nc, 3, 3)
    df_ddist = jax.vmap(jax.jacfwd(law, 1))(friction(scene), con.dist, v)  # (nc, 3)
    blocks = -dt * df_dv.at[:, :, 0].add(dt * df_ddist)
    nc = scene.nc
    W = jnp.einsum("ij,iab->iajb", jnp.eye(nc, dtype=A.dtype), blocks).reshape(3 * nc, 3 * nc)
    correction = -W @ jnp.linalg.solve(jnp.eye(3 * nc, dtype=A.dtype) + A @ W, J @ qdd)
    return correction.reshape(nc, 3)


class JointRows(NamedTuple):
    """Scalar rows on coordinates: ``E`` (k, nv) the signed unit rows ``sign_i e_v_i*`` of the velocity
    ``coordinate`` (k,) (static) with ``sign`` (k,), ``v_star`` (k,) targets, ``lo``, ``hi`` (k,) impulse
    bounds."""

    E: jnp.ndarray
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
        return _no_joint_rows(model.nv, dtype)
    vi = np.asarray([j for _, j in limited])
    dist, sign = limit_distances(scene, q)
    return JointRows(sign[:, None] * jnp.asarray(np.eye(model.nv)[vi], dtype),
                     _target(dist, dt, scene.contact.timeconst), jnp.zeros(len(vi), dtype),
                     jnp.full(len(vi), jnp.inf, dtype), vi, sign)


def friction_rows(scene, dt, dtype) -> JointRows:
    """The Coulomb friction row of every coordinate with one: its impulse within ``+-frictionloss dt``."""
    model, fi = scene.tree, np.asarray(scene.options.friction, int)
    bound = scene.joints.frictionloss[fi].astype(dtype) * dt
    return JointRows(jnp.asarray(np.eye(model.nv)[fi], dtype), jnp.zeros(len(fi), dtype), -bound, bound, fi,
                     jnp.ones(len(fi), dtype))


def joint_rows(scene, q, dt) -> JointRows:
    """Limit rows (`limit_rows`) then Coulomb friction rows (`friction_rows`) of the scene."""
    return _concat(limit_rows(scene, q, dt), friction_rows(scene, dt, q.dtype))


def _concat(*rows) -> JointRows:
    return JointRows(*(jnp.concatenate(x) for x in zip(*(r[:4] for r in rows))),
                     np.concatenate([r.coordinate for r in rows]), jnp.concatenate([r.sign for r in rows]))


def _no_joint_rows(nv, dtype) -> JointRows:
    z = jnp.zeros((0,), dtype)
    return JointRows(jnp.zeros((0, nv), dtype), z, z, z, np.zeros(0, int), z)


def nearest_limits(rows: JointRows, qd_free, k):
    """The indices (k,) of the ``k`` limit ``rows`` nearest to crossing: the smallest margins ``e* qd_free -
    v_star`` (``qd_free`` (nv,) the velocities the step reaches without constraint forces), which are negative where
    the row would be violated without its impulse. A limit still ``dist`` away has the margin ``(dist + dt e*
    qd_free) / dt``: the free step's distance to it at the step's end."""
    margin = rows.E @ qd_free - rows.v_star
    return jax.lax.top_k(-jax.lax.stop_gradient(margin), k)[1]


def _chosen(limits: JointRows, S) -> JointRows:
    """The limit rows that the one-hot rows ``S`` (k, limits) pick (products, not a gather under ``vmap``); their
    coordinates, chosen in the step, are not static (-1)."""
    k = S.shape[0]
    return JointRows(S @ limits.E, S @ limits.v_star, jnp.zeros(k, S.dtype), jnp.full(k, jnp.inf, S.dtype),
                     np.full(k, -1), S @ limits.sign)


def with_rows_by_solve(model, q, ab, J, A, E):
    """``(J, A)`` with the rows ``E`` (k, nv) appended, whose columns ``M^-1 E*`` come from the factored solve
    (7.18) with the step's ``G, D``, and whose couplings to the rows ``J`` are ``J M^-1 E*``."""
    X, H = joint_poses(model, q), hinge_map(model)
    MinvE = jax.vmap(lambda e: solve_factored(model, X, H, ab.G, ab.D, e)[0])(E)  # (k, nv): rows E M^-1
    A_jk = J @ MinvE.T
    A_kk = E @ MinvE.T
    A = jnp.block([[A, A_jk], [A_jk.T, 0.5 * (A_kk + A_kk.T)]])
    return jnp.concatenate([J, E]), A


def _target(dist, dt, timeconst):
    """``v_star``: close a gap in one step at most; remove a penetration at the rate ``1/timeconst``."""
    return -dist / jnp.where(dist > 0, dt, jnp.maximum(timeconst, dt))


class ConstraintForces(NamedTuple):
    """What the constraints of one step apply: ``tau`` (nv,) the generalized force ``J* p / dt`` of the solver's rows
    (contacts, limits, joint friction), ``f_ext`` (nb, 6) the compliant contact forces (body coordinates),
    ``impulse`` (rows,) the next warm start: the solver's impulses in the scene's rows (`jaxmb.sim.Scene.rows`:
    zero on the limit rows a capped step left out; the Newton solver's cones hold ``-D w`` before the projection,
    `jaxmb.sim.newton.Solution`), ``force`` (nc, 3) contact forces in the contact frames (zeros
    without contact), ``contacts`` the contact slots (None without geometry), ``problem`` the solver's
    `jaxmb.sim.solver.Problem` or `jaxmb.sim.newton.Problem` (None without solver rows) and ``solution`` its
    impulses, to check them by, and ``velocity`` (nv,) the velocity after the step where the solver found it with
    the impulses (the Newton solver without compliant contact), else None."""

    tau: jnp.ndarray
    f_ext: jnp.ndarray
    impulse: jnp.ndarray
    force: jnp.ndarray
    contacts: Contacts | None
    problem: Problem | NewtonProblem | None = None
    solution: jnp.ndarray | None = None
    velocity: jnp.ndarray | None = None


def _contacts_and_compliant_forces(scene, T, ab, dtype):
    """``(con, f_ext, force)``: the contact slots (None without geometry), and the compliant model's body forces
    (nb, 6) and contact-frame forces (nc, 3) at the velocities ``ab.V`` (zeros under the constraint model)."""
    f_ext = jnp.zeros((scene.tree.nb, 6), dtype)
    force = jnp.zeros((scene.nc, 3), dtype)
    con = contacts(scene, T) if scene.nc else None
    if scene.nc and scene.options.contact == "compliant":
        force = compliant_forces(scene, T, ab.V, con)
        f_ext = body_forces(scene, T, con, world_forces(con, force))
    return con, f_ext, force


def constraint_forces(scene, model, q, qd, tau, dt, warm, T, ab) -> ConstraintForces:
    """Solve the step's constraints at ``(q, qd)`` under the applied joint forces ``tau`` (nv,): ``model`` is the
    scene's model, or the one whose armature carries the implicit damping (`jaxmb.sim.integrators`), ``ab`` its
    articulated-body quantities at ``(q, qd, tau)`` (free accelerations ``qdd``, velocities ``V``, factors ``G, D``:
    `jaxmb.sim.integrators.StepFactors`; `jaxmb.sim.closed_loops.LoopFactors` for a closed-loop model, whose
    ``qd`` and ``tau`` are on ``yd``), ``T`` the body poses, ``warm`` (rows,) the warm start."""
    if scene.options.solver == "newton":
        return newton_forces(scene, model, q, qd, dt, warm, T, ab)
    dtype = qd.dtype
    nc = scene.nc
    tau_c = jnp.zeros(qd.shape[0], dtype)
    con, f_ext, force = _contacts_and_compliant_forces(scene, T, ab, dtype)
    limits, frictions = limit_rows(scene, q, dt), friction_rows(scene, dt, dtype)
    solve_contacts = nc and scene.options.contact == "constraint"
    if not solve_contacts and not limits.E.shape[0] + frictions.E.shape[0]:
        return ConstraintForces(tau_c, f_ext, warm, force, con)
    c = 3 * nc if solve_contacts else 0
    qd_free = qd + dt * ab.qdd
    cap = scene.options.limit_rows
    if cap is None:
        rows = _concat(limits, frictions)
        J, A = row_space(scene, model, q, T, con if solve_contacts else None, ab, rows)
        p0 = warm
    else:  # the solver's rows: contacts, friction, then the chosen limits (module docstring)
        n_limits, n_friction = limits.E.shape[0], frictions.E.shape[0]
        S = jax.nn.one_hot(nearest_limits(limits, qd_free, cap), n_limits, dtype=dtype)
        chosen = _chosen(limits, S)
        rows = _concat(frictions, chosen)
        if solve_contacts or n_friction:
            J, A = row_space(scene, model, q, T, con if solve_contacts else None, ab, frictions)
        else:
            J, A = jnp.zeros((0, qd.shape[0]), dtype), jnp.zeros((0, 0), dtype)
        J, A = with_rows_by_solve(model, q, ab, J, A, chosen.E)
        p0 = jnp.concatenate([warm[:c], warm[c + n_limits:], S @ warm[c:c + n_limits]])
    v_star, mu = [rows.v_star], jnp.zeros((0,), dtype)
    if solve_contacts:
        v_star.insert(0, jnp.stack([_target(con.dist, dt, scene.contact.timeconst), jnp.zeros(nc, dtype),
                                    jnp.zeros(nc, dtype)], -1).reshape(-1))
        mu = friction(scene)
    A = A + jnp.diag(scene.contact.regularization * _softened(jnp.diag(A), nc if solve_contacts else 0)
                     + jnp.finfo(dtype).tiny ** 0.5)
    prob = Problem(A, J @ qd_free - jnp.concatenate(v_star), mu, rows.lo, rows.hi)
    p = solve(prob, p0, scene.options.iterations, scene.options.tolerance)
    impulse = p
    if cap is not None:
        impulse = jnp.concatenate([p[:c], S.T @ p[c + n_friction:], p[c:c + n_friction]])
    if solve_contacts:
        force = p[: 3 * nc].reshape(nc, 3) / dt
    return ConstraintForces(J.T @ p / dt, f_ext, impulse, force, con, prob, p)


def pyramid(mu):
    """``E`` (nc, 4, 3): the edges ``n + mu t1, n - mu t1, n + mu t2, n - mu t2`` of each contact's friction pyramid
    in its frame ``[n, t1, t2]``."""
    one, zero = jnp.ones_like(mu), jnp.zeros_like(mu)
    return jnp.stack([jnp.stack([one, mu, zero], -1), jnp.stack([one, -mu, zero], -1),
                      jnp.stack([one, zero, mu], -1), jnp.stack([one, zero, -mu], -1)], 1)


def one_sided(sd: Sides, nc) -> bool:
    """Whether every contact slot has exactly one moving side, in slot order."""
    return len(sd.body) == nc and bool(np.all(sd.contact == np.arange(nc)))


def newton_forces(scene, model, q, qd, dt, warm, T, ab) -> ConstraintForces:
    """`constraint_forces` by the Newton solver (`jaxmb.sim.newton`): each contact of the constraint model as
    Coulomb's elliptic cone on its three rows (``cone="elliptic"``) or as the four edges of its friction pyramid,
    every limit and friction row. The rows' softness ``R = regularization x`` the diagonal of ``J M^-1 J*`` (a
    cone's three rows take its normal's): a contact row's from the operational-space compliance of its body
    (`upsilon`, one down sweep; exact from the dense ``M`` where a contact has two moving sides), a joint row's
    ``1/D`` of its coordinate (its compliance with the parent held).

    A closed-loop ``model`` (`jaxmb.loops.LoopModel`) solves on the independent velocities ``yd``: every row ``j``
    on the spanning tree's velocities becomes ``j G`` (`jaxmb.sim.closed_loops`), the Hessian is the dense
    ``G* M G + J_y* H J_y``, a contact row's diagonal that of ``J_y (G* M G)^-1 J_y*`` and a joint row's ``1/D`` of
    its coordinate in the spanning tree."""
    dtype, tree, nc = qd.dtype, scene.tree, scene.nc
    con, f_ext, force = _contacts_and_compliant_forces(scene, T, ab, dtype)
    rows = joint_rows(scene, q, dt)
    c = nc if nc and scene.options.contact == "constraint" else 0
    if not c and not rows.E.shape[0]:
        return ConstraintForces(jnp.zeros(qd.shape[0], dtype), f_ext, warm, force, con)
    closed = is_closed(model)
    on_y = (lambda J: J @ ab.G) if closed else (lambda J: J)  # rows on the step's velocities
    coordinate = tuple(int(j) for j in rows.coordinate)
    J, d, v_star, body, dense = on_y(rows.E), jnp.zeros((0, 6), dtype), rows.v_star, (), closed
    mu, elliptic = jnp.zeros(0, dtype), scene.options.cone == "elliptic"
    k = 3 if elliptic else 4  # rows per contact
    if c:
        sd = sides(scene.geometry.body, scene.pairs)
        mu = friction(scene) if elliptic else mu
        E = jnp.eye(3, dtype=dtype)[None].repeat(nc, 0) if elliptic else pyramid(friction(scene))  # rows (nc, k, 3)
        J3 = on_y(contact_jacobian(scene, T, con)).reshape(nc, 3, -1)
        J = jnp.concatenate([jnp.einsum("cer,crv->cev", E, J3).reshape(k * nc, -1), J])
        kept = 1.0 - jnp.minimum(2.0 * dt / scene.contact.timeconst, 1.0)
        slip = jnp.einsum("cer,cr->ce", E.at[:, :, 0].set(0.0), jnp.einsum("crv,v->cr", J3, qd))
        target = _target(con.dist, dt, scene.contact.timeconst)[:, None] * E[:, :, 0] + kept * slip
        v_star = jnp.concatenate([target.reshape(-1), v_star])
        dense = closed or not one_sided(sd, nc)
        if not dense:
            _, placement = _side_frames(T, con, sd)
            u = jnp.swapaxes(placement.R, -1, -2) * jnp.asarray(sd.sign, dtype)[:, None, None]  # rows n, t1, t2
            d_side = jnp.concatenate([cross3(placement.p[:, None, :], u), u], -1)  # (nc, 3, 6) = [r x u; u]
            d = jnp.einsum("cer,crk->cek", E, d_side).reshape(k * nc, 6)
            body = tuple(b for b in sd.body for _ in range(k))
    if dense:
        M = ab.G.T @ mass_matrix(model.tree, q) @ ab.G if closed else mass_matrix(model, q)
        metric = DenseMetric(M)
    else:
        metric = TreeMetric(joint_poses(model, q), hinge_map(model), ab.G, ab.D, body_inertias(model),
                            model.armature, d, tree.topology, body, coordinate)
    if scene.impedance is not None:  # MuJoCo's soft constraints (`jaxmb.sim.impedance`)
        limit_dist = limit_distances(scene, q)[0] if scene.options.limited else None
        stiffness, v_star = mujoco_rows(scene, dt, con.dist if c else None, J @ qd, friction(scene) if c else None,
                                        elliptic, limit_dist)
    else:
        stiffness = 1.0 / _regularization(scene, model, q, ab, J, metric, dense, closed, coordinate, k * c, elliptic)
    lo, hi = rows.lo, rows.hi
    if not elliptic:
        lo, hi = jnp.concatenate([jnp.zeros(k * c, dtype), lo]), jnp.concatenate([jnp.full(k * c, jnp.inf, dtype), hi])
    prob = NewtonProblem(J, qd + dt * ab.qdd, v_star, stiffness, mu, lo, hi, metric)
    sol = newton_solution(prob, warm, scene.options.iterations, scene.options.tolerance)
    if c:
        force = jnp.einsum("ce,cer->cr", sol.p[: k * c].reshape(c, k), E) / dt
    compliant = scene.nc and scene.options.contact == "compliant"  # (its forces are not in v_free)
    return ConstraintForces(J.T @ sol.p / dt, f_ext, sol.warm, force, con, prob, sol.p, None if compliant else sol.v)


def _regularization(scene, model, q, ab, J, metric, dense, closed, coordinate, n_contact, elliptic):
    """jaxmb's softness ``R`` (n,) of the Newton solver's rows (`newton_forces`): ``regularization`` times a contact
    row's diagonal of ``J M^-1 J*`` (a cone's three rows its normal's), a joint row's ``1/D`` of its coordinate."""
    if dense:
        Z = jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(metric.M), J[:n_contact].T, lower=True)
        contact_diag = jnp.sum(Z * Z, 0)
        D = articulated_inertias(model.tree, q).D if closed else ab.D  # the spanning tree's, for a closed loop
    else:
        contact_diag, D = metric.row_diagonal(), ab.D
    joint_diag = 1.0 / D[np.asarray(coordinate, int), 0]
    if elliptic:
        contact_diag = jnp.repeat(contact_diag[::3], 3)
    return scene.contact.regularization * jnp.concatenate([contact_diag, joint_diag]) + jnp.finfo(J.dtype).tiny ** 0.5


def _softened(diagonal, nc):
    """The diagonal (n,) that the regularization scales: ``A``'s own, with each contact's tangent rows raised to
    its normal's where they are smaller. A direction in which a contact cannot slide at all (out of the plane of a
    planar mechanism) has a zero diagonal; softened as its normal, its friction block stays well posed and its
    derivative finite."""
    if not nc:
        return diagonal
    blocks = diagonal[: 3 * nc].reshape(nc, 3)
    return jnp.concatenate([jnp.maximum(blocks, blocks[:, :1]).reshape(-1), diagonal[3 * nc:]])


def row_space(scene, model, q, T, con, ab, rows):
    """``(J, A)`` of the solver's rows: the contact rows of ``con`` (None: none) then the `JointRows` ``rows``, and
    their compliance. For a tree, the columns of every row walk up their own paths together
    (`jaxmb.dynamics.compliance`): each contact side's three rows as task columns at its frame, each joint row as
    the unit generalized force of its coordinate (`unit_forces`), and ``A = Y* nu`` of the recorded columns, with
    the sides summed into their contacts and the joint rows signed. For a closed-loop system, all rows at once on
    ``yd``."""
    E = rows.E
    if is_closed(model):
        J = E if con is None else jnp.concatenate([contact_jacobian(scene, T, con), E])
        return loop_space(model, q, J, ab)
    d, R, p, body, own = [], [], [], (), None
    if con is not None:
        sd = sides(scene.geometry.body, scene.pairs)
        _, placement = _side_frames(T, con, sd)
        d.append(_side_rows(sd, T.p.dtype).reshape(-1, 1, 6))  # one column per row: (3 m, 1, 6)
        R.append(jnp.repeat(placement.R, 3, axis=0))
        p.append(jnp.repeat(placement.p, 3, axis=0))
        body += tuple(b for b in sd.body for _ in range(3))
    if E.shape[0]:
        uf = unit_forces(model, q, rows.coordinate, ab)
        d.append(uf.d.astype(T.p.dtype))
        R.append(uf.placement.R)
        p.append(uf.placement.p)
        body += uf.body
        own = uf.own
    walked = walk_columns(model, q, jnp.concatenate(d), Transform(jnp.concatenate(R), jnp.concatenate(p)), body, ab)
    Y, nu, J = [], [], []
    if con is not None:
        m = 3 * len(sd.body)
        Y.append(sum_rows(walked.Y[:, :m].T, sd.rows, 3 * scene.nc).T)
        nu.append(sum_rows(walked.nu[:, :m].T, sd.rows, 3 * scene.nc).T)
        J.append(contact_jacobian(scene, T, con))
    if own is not None:
        k = E.shape[0]
        Y.append((walked.Y[:, -k:] + own.Y) * rows.sign)
        nu.append((walked.nu[:, -k:] + own.nu) * rows.sign)
        J.append(E)
    Y, nu = jnp.concatenate(Y, 1), jnp.concatenate(nu, 1)
    A = Y.T @ nu  # J M^-1 J* = Y* D^-1 Y                                                                  (7.18)
    return jnp.concatenate(J), 0.5 * (A + A.T)


def world_forces(con: Contacts, force):
    """Contact forces (nc, 3) in world axes (on geom b; geom a takes the opposite) from the contact-frame ones."""
    return jnp.einsum("cji,cj->ci", con.frame, force)
