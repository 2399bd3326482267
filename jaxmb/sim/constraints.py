"""The constraint forces of one step: every row of the step (contacts of the constraint model, joint limits,
joint friction) solved by the scene's solver, the Gauss-Seidel sweeps (`jaxmb.sim.solver`) on the rows'
compliance (`jaxmb.sim.compliance`) or Newton's method (`jaxmb.sim.newton`) on the mass matrix with the rows'
inertias added, and the forces that go back to the bodies.

The solved impulses go back as the generalized force ``J* p / dt`` of all rows, whose accelerations ``M^-1 J* p /
dt`` the integrator adds to the free ones by the factored solve (7.18) with the same ``G, D``: one up and one down
sweep, no articulated inertia computed twice.

Newton rows. A scene with ``solver="newton"`` (`newton_forces`, `jaxmb.sim.newton`) takes each contact as
Coulomb's elliptic cone on its three rows ``C`` (normal and tangents; ``cone="elliptic"``) or as the four edges
``E C`` of its friction pyramid (`jaxmb.sim.contact_frames.pyramid`), and every limit and friction row, and needs no compliance: the Newton
solver's Hessian is the mass matrix with the active rows added as body inertias, each contact row's ``d = [r x u;
u]`` in its body's coordinates (``u`` the row's direction, ``r`` the contact point). A tangent row's target (an
edge's: its normal's plus this) is the part of its velocity that the slip makes, less the fraction ``2 dt /
timeconst`` of it that MuJoCo's reference acceleration (its damping ``b = 2 / timeconst``) removes in a step:
without it a sliding contact would stop slipping, or lift a sliding body at ``mu`` times its slip, within one
step.

"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.dynamics.articulated import articulated_inertias
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.hinges import body_inertias, hinge_map, joint_poses
from jaxmb.sim.closed_loops import is_closed
from jaxmb.sim.compliance import row_space, softened, with_rows_by_solve
from jaxmb.sim.compliant import contacts_and_compliant_forces
from jaxmb.sim.contact_frames import (
    Contacts,
    contact_jacobian,
    friction,
    one_sided,
    pyramid,
    side_frames,
    sides,
)
from jaxmb.sim.impedance import mujoco_rows
from jaxmb.sim.joint_rows import (
    chosen_limits,
    concat,
    friction_rows,
    joint_rows,
    limit_distances,
    limit_rows,
    nearest_limits,
    target_velocity,
)
from jaxmb.sim.newton import DenseMetric, TreeMetric
from jaxmb.sim.tendons import (
    dense_rows,
    tendon_mass,
    tendon_rows,
    with_tendon_diagonal,
    with_tendon_rows,
    with_tendon_rows_after,
)
from jaxmb.sim.tendons import mujoco_rows as tendon_mujoco_rows
from jaxmb.sim.newton import Problem as NewtonProblem
from jaxmb.sim.newton import solution as newton_solution
from jaxmb.sim.solver import Problem, solve
from jaxmb.spatial import cross3


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
    con, f_ext, force = contacts_and_compliant_forces(scene, T, ab, dtype)
    limits, frictions = limit_rows(scene, q, dt), friction_rows(scene, dt, dtype)
    tendon = tendon_rows(scene, q, dt)  # after the joints' rows (`jaxmb.sim.tendons`)
    solve_contacts = nc and scene.options.contact == "constraint"
    if not solve_contacts and not limits.J.shape[0] + frictions.J.shape[0] + tendon.J.shape[0]:
        return ConstraintForces(tau_c, f_ext, warm, force, con)
    c = 3 * nc if solve_contacts else 0
    qd_free = qd + dt * ab.qdd
    cap = scene.options.limit_rows
    if cap is None:
        rows = concat(limits, frictions)
        J, A = row_space(scene, model, q, T, con if solve_contacts else None, ab, rows)
        J, A, rows = with_tendon_rows(model, q, ab, J, A, rows, tendon)
        p0 = warm
    else:  # the solver's rows: contacts, friction, then the chosen limits (module docstring)
        n_limits, n_friction = limits.J.shape[0], frictions.J.shape[0]
        S = jax.nn.one_hot(nearest_limits(limits, qd_free, cap), n_limits, dtype=dtype)
        chosen = chosen_limits(limits, S)
        rows = concat(frictions, chosen)
        if solve_contacts or n_friction:
            J, A = row_space(scene, model, q, T, con if solve_contacts else None, ab, frictions)
        else:
            J, A = jnp.zeros((0, qd.shape[0]), dtype), jnp.zeros((0, 0), dtype)
        J, A = with_rows_by_solve(model, q, ab, J, A, chosen.J)
        p0 = jnp.concatenate([warm[:c], warm[c + n_limits:], S @ warm[c:c + n_limits]])
    v_star, mu = [rows.v_star], jnp.zeros((0,), dtype)
    if solve_contacts:
        v_star.insert(0, jnp.stack([target_velocity(con.dist, dt, scene.contact.timeconst), jnp.zeros(nc, dtype),
                                    jnp.zeros(nc, dtype)], -1).reshape(-1))
        mu = friction(scene)
    A = A + jnp.diag(scene.contact.regularization * softened(jnp.diag(A), nc if solve_contacts else 0)
                     + jnp.finfo(dtype).tiny ** 0.5)
    prob = Problem(A, J @ qd_free - jnp.concatenate(v_star), mu, rows.lo, rows.hi)
    p = solve(prob, p0, scene.options.iterations, scene.options.tolerance)
    impulse = p
    if cap is not None:
        impulse = jnp.concatenate([p[:c], S.T @ p[c + n_friction:], p[c:c + n_friction]])
    if solve_contacts:
        force = p[: 3 * nc].reshape(nc, 3) / dt
    return ConstraintForces(J.T @ p / dt, f_ext, impulse, force, con, prob, p)


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
    con, f_ext, force = contacts_and_compliant_forces(scene, T, ab, dtype)
    rows = with_tendon_rows_after(scene, q, dt, joint_rows(scene, q, dt))  # tendons' rows last (`jaxmb.sim.tendons`)
    c = nc if nc and scene.options.contact == "constraint" else 0
    if not c and not rows.J.shape[0]:
        return ConstraintForces(jnp.zeros(qd.shape[0], dtype), f_ext, warm, force, con)
    closed = is_closed(model)
    on_y = (lambda J: J @ ab.G) if closed else (lambda J: J)  # rows on the step's velocities
    coordinate = tuple(int(j) for j in rows.coordinate)
    J, d, v_star, body, dense = on_y(rows.J), jnp.zeros((0, 6), dtype), rows.v_star, (), closed or dense_rows(scene)
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
        target = target_velocity(con.dist, dt, scene.contact.timeconst)[:, None] * E[:, :, 0] + kept * slip
        v_star = jnp.concatenate([target.reshape(-1), v_star])
        dense = closed or not one_sided(sd, nc)
        if not dense:
            _, placement = side_frames(T, con, sd)
            u = jnp.swapaxes(placement.R, -1, -2) * jnp.asarray(sd.sign, dtype)[:, None, None]  # rows n, t1, t2
            d_side = jnp.concatenate([cross3(placement.p[:, None, :], u), u], -1)  # (nc, 3, 6) = [r x u; u]
            d = jnp.einsum("cer,crk->cek", E, d_side).reshape(k * nc, 6)
            body = tuple(b for b in sd.body for _ in range(k))
    if dense:
        M = ab.G.T @ mass_matrix(model.tree, q) @ ab.G if closed else mass_matrix(model, q)
        extra = tendon_mass(scene, q, dt)  # the tendons' term (`jaxmb.sim.tendons`)
        metric = DenseMetric(M if extra is None else M + extra)
    else:
        metric = TreeMetric(joint_poses(model, q), hinge_map(model), ab.G, ab.D, body_inertias(model),
                            model.armature, d, tree.topology, body, coordinate)
    if scene.impedance is not None:  # MuJoCo's soft constraints (`jaxmb.sim.impedance`)
        limit_dist = limit_distances(scene, q)[0] if scene.options.limited else None
        stiffness, v_star = mujoco_rows(scene, dt, con.dist if c else None, J @ qd, friction(scene) if c else None,
                                        elliptic, limit_dist)
        if scene.tendons is not None and scene.tendons.rows:  # the tendons' rows, last
            n = scene.tendons.rows
            D_t, v_t = tendon_mujoco_rows(scene.tendons, q, dt, (J @ qd)[-n:])
            stiffness, v_star = jnp.concatenate([stiffness, D_t]), jnp.concatenate([v_star, v_t])
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
    joint_diag = with_tendon_diagonal(joint_diag, metric, J[n_contact:], coordinate)  # tendon rows: no coordinate
    if elliptic:
        contact_diag = jnp.repeat(contact_diag[::3], 3)
    return scene.contact.regularization * jnp.concatenate([contact_diag, joint_diag]) + jnp.finfo(J.dtype).tiny ** 0.5


