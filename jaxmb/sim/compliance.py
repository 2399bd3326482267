"""The compliance ``A = J M^-1 J*`` of a step's rows on the operational-space sweeps, for the Gauss-Seidel solver.

The compliance of all rows comes from the innovations factorization ``M^-1 = [I - H psi K]* D^-1 [I - H psi K]``
(7.18): each row's column of ``[I - H psi K] J*`` is nonzero only on the path from its body to the root, and is
recorded there by walking it up that path with the articulated-body factors ``P, D, G`` of the state
(`jaxmb.dynamics.compliance`), so ``A = Y* D^-1 Y`` in O(N + depth x rows). ``M`` and ``M^-1`` are never formed. A
closed-loop scene's rows are the same rows on the spanning tree's velocities, taken to its independent ones and
their compliance by `jaxmb.sim.closed_loops.loop_space`. Limit rows chosen in the step (`jaxmb.sim.joint_rows`)
take their columns ``M^-1 e`` from the factored solve (7.18), one up and one down sweep each, and their couplings
from the other rows' Jacobian: ``A_ck = J_c M^-1 e``.
"""

import jax
import jax.numpy as jnp

from jaxmb.batching import sum_rows
from jaxmb.dynamics.articulated import solve_factored
from jaxmb.dynamics.compliance import unit_forces, walk_columns
from jaxmb.hinges import hinge_map
from jaxmb.sim.closed_loops import is_closed, loop_space
from jaxmb.sim.contact_frames import contact_jacobian, side_frames, side_rows, sides
from jaxmb.sim.joint_rows import no_joint_rows
from jaxmb.spatial import Transform


def contact_space(scene, model, q, T, con, ab):
    """``(J, A)``: the contact rows' Jacobian (3 nc, nv) and compliance ``J M^-1 J*`` (3 nc, 3 nc) (module
    docstring), from the articulated-body quantities ``ab`` of ``model`` at ``q``; for a closed-loop ``model``
    the rows on ``yd`` and their compliance (`jaxmb.sim.closed_loops.loop_space`)."""
    return row_space(scene, model, q, T, con, ab, no_joint_rows(scene.tree.nv, T.p.dtype))


def row_space(scene, model, q, T, con, ab, rows):
    """``(J, A)`` of the solver's rows: the contact rows of ``con`` (None: none) then the `JointRows` ``rows``, and
    their compliance. For a tree, the columns of every row walk up their own paths together
    (`jaxmb.dynamics.compliance`): each contact side's three rows as task columns at its frame, each joint row as
    the unit generalized force of its coordinate (`unit_forces`), and ``A = Y* nu`` of the recorded columns, with
    the sides summed into their contacts and the joint rows signed. For a closed-loop system, all rows at once on
    ``yd``."""
    E = rows.J
    if is_closed(model):
        J = E if con is None else jnp.concatenate([contact_jacobian(scene, T, con), E])
        return loop_space(model, q, J, ab)
    d, R, p, body, own = [], [], [], (), None
    if con is not None:
        sd = sides(scene.geometry.body, scene.pairs)
        _, placement = side_frames(T, con, sd)
        d.append(side_rows(sd, T.p.dtype).reshape(-1, 1, 6))  # one column per row: (3 m, 1, 6)
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


def with_rows_by_solve(model, X, ab, J, A, E):
    """``(J, A)`` with the rows ``E`` (k, nv) appended, whose columns ``M^-1 E*`` come from the factored solve
    (7.18) with the step's ``G, D``, and whose couplings to the rows ``J`` are ``J M^-1 E*``."""
    H = hinge_map(model)
    MinvE = jax.vmap(lambda e: solve_factored(model, X, H, ab.G, ab.D, e)[0])(E)  # (k, nv): rows E M^-1
    A_jk = J @ MinvE.T
    A_kk = E @ MinvE.T
    A = jnp.block([[A, A_jk], [A_jk.T, 0.5 * (A_kk + A_kk.T)]])
    return jnp.concatenate([J, E]), A


def softened(diagonal, nc):
    """The diagonal (n,) that the regularization scales: ``A``'s own, with each contact's tangent rows raised to
    its normal's where they are smaller. A direction in which a contact cannot slide at all (out of the plane of a
    planar mechanism) has a zero diagonal; softened as its normal, its friction block stays well posed and its
    derivative finite."""
    if not nc:
        return diagonal
    blocks = diagonal[: 3 * nc].reshape(nc, 3)
    return jnp.concatenate([jnp.maximum(blocks, blocks[:, :1]).reshape(-1), diagonal[3 * nc:]])


