"""The constraint forces of one step: the step's rows (`jaxmb.sim.rows`: contacts of the constraint model, joint
limits, joint friction), built once, solved by the scene's solver: the Gauss-Seidel sweeps (`jaxmb.sim.solver`) on
the rows' compliance (`jaxmb.sim.compliance`), or Newton's method (`jaxmb.sim.newton`), which needs no compliance:
its Hessian is the mass matrix with the active rows added as body inertias, each contact row's ``d = [r x u; u]``
in its body's coordinates (``u`` the row's direction, ``r`` the contact point).

The solved impulses go back as the generalized force ``J* p / dt`` of all rows, whose accelerations ``M^-1 J* p /
dt`` the integrator adds to the free ones by the factored solve (7.18) with the same ``G, D``: one up and one down
sweep, no articulated inertia computed twice.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.dynamics.articulated import articulated_inertias
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.hinges import body_inertias, hinge_map
from jaxmb.sim.closed_loops import is_closed
from jaxmb.sim.compliance import row_space, softened, with_rows_by_solve
from jaxmb.sim.compliant import compliant_contact_forces
from jaxmb.sim.contact_frames import Contacts, one_sided, side_frames, sides
from jaxmb.sim.joint_rows import chosen_limits, concat, nearest_limits, split
from jaxmb.sim.newton import DenseMetric, TreeMetric
from jaxmb.sim.newton import Problem as NewtonProblem
from jaxmb.sim.newton import solution as newton_solution
from jaxmb.sim.rows import Rows, constraint_rows, joint_coordinates
from jaxmb.sim.solver import Problem, solve
from jaxmb.sim.tendons import dense_rows, tendon_mass
from jaxmb.spatial import cross3


class ConstraintForces(NamedTuple):
    """What the constraints of one step apply: ``tau`` (nv,) the generalized force ``J* p / dt`` of the solver's rows
    (contacts, limits, joint friction), ``f_ext`` (nb, 6) the compliant contact forces (body coordinates),
    ``impulse`` (rows,) the next warm start: the solver's impulses in the scene's rows (`jaxmb.sim.Scene.rows`:
    zero on the limit rows a capped step left out; the Newton solver's cones hold ``-D w`` before the projection,
    `jaxmb.sim.newton.Solution`), ``force`` (nc, 3) contact forces in the contact frames (zeros
    without contact), ``contacts`` the contact slots (None without geometry), ``problem`` the solver's
    `jaxmb.sim.solver.Problem` or `jaxmb.sim.newton.Problem` (None without solver rows), ``solution`` its
    impulses, to check them by, ``velocity`` (nv,) the velocity after the step where the solver found it with
    the impulses (the Newton solver without compliant contact), else None, ``warm`` the impulses the solver
    started from (the step's record counts its iterations from there: `jaxmb.sim.stepping.inspect_step`), and
    ``rows`` the step's `jaxmb.sim.rows.Rows` (None without rows)."""

    tau: jnp.ndarray
    f_ext: jnp.ndarray
    impulse: jnp.ndarray
    force: jnp.ndarray
    contacts: Contacts | None
    problem: Problem | NewtonProblem | None = None
    solution: jnp.ndarray | None = None
    velocity: jnp.ndarray | None = None
    warm: jnp.ndarray | None = None
    rows: Rows | None = None


def constraint_forces(scene, model, q, qd, dt, warm, kin, ab) -> ConstraintForces:
    """Solve the step's constraints at ``(q, qd)``: ``model`` is the scene's model, or the one whose armature
    carries the implicit damping (`jaxmb.sim.integrators`), ``kin`` the `jaxmb.sim.stages.Kinematics` at ``q``
    (joint and body poses, contact slots), ``ab`` the free motion at ``(q, qd)`` under the step's applied forces
    (free accelerations ``qdd``, velocities ``V``, factors ``G, D``: `jaxmb.sim.stages.StepFactors`;
    `jaxmb.sim.closed_loops.LoopFactors` for a closed-loop model, whose ``qd`` is ``yd``), ``warm`` (rows,) the
    warm start. The rows are built once (`jaxmb.sim.rows.constraint_rows`) and solved by the scene's solver."""
    dtype = qd.dtype
    T, con = kin.T, kin.contacts
    f_ext, force = compliant_contact_forces(scene, T, con, ab.V, dtype)
    closed = is_closed(model)
    rows = constraint_rows(scene, q, ab.G @ qd if closed else qd, dt, kin)
    if rows is None:
        return ConstraintForces(jnp.zeros(qd.shape[0], dtype), f_ext, warm, force, con)
    solve_rows = newton_forces if scene.options.solver == "newton" else gauss_seidel_forces
    cf = solve_rows(scene, model, q, qd, dt, warm, kin, ab, rows)
    return cf._replace(f_ext=f_ext, force=force if rows.contacts is None else cf.force, contacts=con, rows=rows)


def gauss_seidel_forces(scene, model, q, qd, dt, warm, kin, ab, rows: Rows) -> ConstraintForces:
    """`constraint_forces` by the Gauss-Seidel sweeps (`jaxmb.sim.solver`) on the rows' compliance ``A = J M^-1 J*``
    (`jaxmb.sim.compliance.row_space`) softened by ``regularization`` times its diagonal (`softened`). With
    ``limit_rows = k`` the solver takes the contacts, the friction rows and the ``k`` limits nearest to crossing
    (`jaxmb.sim.joint_rows.nearest_limits`), their compliance columns by the factored solve."""
    dtype, nc = qd.dtype, scene.nc
    con = rows.contacts
    c = rows.n_contact
    qd_free = qd + dt * ab.qdd
    cap = scene.options.limit_rows
    joint = rows.joints
    if cap is None:
        coordinate_rows, general = split(joint, int(np.sum(np.asarray(joint.coordinate) >= 0)))
        if con is not None or coordinate_rows.J.shape[0]:
            J, A = row_space(scene, model, q, kin.T, con, ab, coordinate_rows)
        else:
            J, A = jnp.zeros((0, qd.shape[0]), dtype), jnp.zeros((0, 0), dtype)
        if general.J.shape[0]:  # rows on several coordinates (a ball joint's range): by the factored solve
            J, A = with_rows_by_solve(model, kin.X, ab, J, A, general.J)
        p0 = warm
        chosen_rows = joint
    else:  # the solver's rows: contacts, friction, then the chosen limits (`jaxmb.sim.joint_rows`)
        n_limits = len(scene.options.limited)
        n_friction = joint.J.shape[0] - n_limits
        limits, frictions = split(joint, n_limits)
        S = jax.nn.one_hot(nearest_limits(limits, qd_free, cap), n_limits, dtype=dtype)
        chosen = chosen_limits(limits, S)
        chosen_rows = concat(frictions, chosen)
        if c or n_friction:
            J, A = row_space(scene, model, q, kin.T, con, ab, frictions)
        else:
            J, A = jnp.zeros((0, qd.shape[0]), dtype), jnp.zeros((0, 0), dtype)
        J, A = with_rows_by_solve(model, kin.X, ab, J, A, chosen.J)
        p0 = jnp.concatenate([warm[:c], warm[c + n_limits:], S @ warm[c:c + n_limits]])
    v_star = jnp.concatenate([rows.v_star[:c], chosen_rows.v_star])
    A = A + jnp.diag(scene.contact.regularization * softened(jnp.diag(A), nc if c else 0)
                     + jnp.finfo(dtype).tiny ** 0.5)
    prob = Problem(A, J @ qd_free - v_star, rows.mu, chosen_rows.lo, chosen_rows.hi)
    p = solve(prob, p0, scene.options.iterations, scene.options.tolerance)
    impulse = p
    if cap is not None:
        impulse = jnp.concatenate([p[:c], S.T @ p[c + n_friction:], p[c:c + n_friction]])
    force = p[:c].reshape(-1, 3) / dt
    return ConstraintForces(J.T @ p / dt, None, impulse, force, con, prob, p, None, p0)


def newton_forces(scene, model, q, qd, dt, warm, kin, ab, rows: Rows) -> ConstraintForces:
    """`constraint_forces` by the Newton solver (`jaxmb.sim.newton`): each contact of the constraint model as
    Coulomb's elliptic cone on its three rows (``cone="elliptic"``) or as the four edges of its friction pyramid,
    every limit and friction row. The rows' weights are MuJoCo's where the scene states them (`Rows.D`), else
    jaxmb's softness ``R = regularization x`` the diagonal of ``J M^-1 J*`` (a cone's three rows take its
    normal's): a contact row's from the operational-space compliance of its body (`upsilon`, one down sweep;
    exact from the dense ``M`` where a contact has two moving sides), a joint row's ``1/D`` of its coordinate (its
    compliance with the parent held).

    A closed-loop ``model`` (`jaxmb.loops.LoopModel`) solves on the independent velocities ``yd``: every row ``j``
    on the spanning tree's velocities becomes ``j G`` (`jaxmb.sim.closed_loops`), the Hessian is the dense
    ``G* M G + J_y* H J_y``, a contact row's diagonal that of ``J_y (G* M G)^-1 J_y*`` and a joint row's ``1/D`` of
    its coordinate in the spanning tree."""
    dtype, tree = qd.dtype, scene.tree
    con, c, elliptic = rows.contacts, rows.n_contact, scene.options.cone == "elliptic"
    closed = is_closed(model)
    J = rows.J @ ab.G if closed else rows.J  # rows on the step's velocities
    coordinate = joint_coordinates(rows)
    d, body, dense = jnp.zeros((0, 6), dtype), (), closed
    if c:
        sd = sides(scene.geometry.body, scene.pairs)
        dense = closed or not one_sided(sd, scene.nc)
        if not dense:
            _, placement = side_frames(kin.T, con, sd)
            u = jnp.swapaxes(placement.R, -1, -2) * jnp.asarray(sd.sign, dtype)[:, None, None]  # rows n, t1, t2
            d_side = jnp.concatenate([cross3(placement.p[:, None, :], u), u], -1)  # (nc, 3, 6) = [r x u; u]
            d = jnp.einsum("cer,crk->cek", rows.edges, d_side).reshape(c, 6)
            body = tuple(b for b in sd.body for _ in range(rows.edges.shape[1]))
    # a row on several coordinates is no one coordinate's armature, nor is the tendons' term of the mass matrix
    dense = dense or any(j < 0 for j in coordinate) or dense_rows(scene)
    if dense:
        M = ab.G.T @ mass_matrix(model.tree, q) @ ab.G if closed else mass_matrix(model, q)
        extra = tendon_mass(scene, q, dt, implicit=scene.impedance is None, T=kin.T)  # (`jaxmb.sim.integrators.euler`)
        metric = DenseMetric(M if extra is None else M + extra)
    else:
        metric = TreeMetric(kin.X, hinge_map(model), ab.G, ab.D, body_inertias(model),
                            model.armature, d, tree.topology, body, coordinate)
    D = rows.D
    if D is None:
        D = 1.0 / _regularization(scene, model, q, ab, J, metric, dense, closed, coordinate, c, elliptic)
    prob = NewtonProblem(J, qd + dt * ab.qdd, rows.v_star, D, rows.mu, rows.lo, rows.hi, metric)
    sol = newton_solution(prob, warm, scene.options.iterations, scene.options.tolerance)
    force = jnp.einsum("ce,cer->cr", sol.p[:c].reshape(-1, rows.edges.shape[1]), rows.edges) / dt
    compliant = scene.nc and scene.options.contact == "compliant"  # (its forces are not in v_free)
    return ConstraintForces(J.T @ sol.p / dt, None, sol.warm, force, con, prob, sol.p, None if compliant else sol.v,
                            warm)


def _regularization(scene, model, q, ab, J, metric, dense, closed, coordinate, n_contact, elliptic):
    """jaxmb's softness ``R`` (n,) of the Newton solver's rows (`newton_forces`): ``regularization`` times a contact
    row's diagonal of ``J M^-1 J*`` (a cone's three rows its normal's), a joint row's ``1/D`` of its coordinate, a
    row on several coordinates (``coordinate`` -1: a ball joint's range) its diagonal of ``J M^-1 J*``."""
    coordinate = np.asarray(coordinate, int)
    general = coordinate < 0
    if dense:
        Z = jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(metric.M), J[:n_contact].T, lower=True)
        contact_diag = jnp.sum(Z * Z, 0)
        D = articulated_inertias(model.tree, q).D if closed else ab.D  # the spanning tree's, for a closed loop
    else:
        contact_diag, D = metric.row_diagonal(), ab.D
    joint_diag = 1.0 / D[np.where(general, 0, coordinate), 0]
    if np.any(general):  # on the dense metric (`newton_forces`)
        J_g = J[n_contact:][general]
        joint_diag = joint_diag.at[np.flatnonzero(general)].set(jnp.sum(J_g * metric.inverse(J_g.T).T, -1))
    if elliptic:
        contact_diag = jnp.repeat(contact_diag[::3], 3)
    return scene.contact.regularization * jnp.concatenate([contact_diag, joint_diag]) + jnp.finfo(J.dtype).tiny ** 0.5


