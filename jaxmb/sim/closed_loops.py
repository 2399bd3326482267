"""What a step of a closed-loop system (`jaxmb.loops.LoopModel`) takes in place of the tree's recursions.

A closed-loop scene moves in the loop model's coordinates: the spanning configuration ``q`` (nq,) on the constraint
manifold ``phi(q) = 0`` and the independent velocities ``yd`` (ny,), with the spanning velocity ``qd = G yd``
(book 15.24-15.27). Geometry, actuators, damping and limits sit on the spanning tree's bodies and coordinates, and
reach the independent coordinates through the embedding: a spanning-tree joint force ``tau`` acts as ``G* tau``
(15.12), a row ``j`` of a contact or a limit on the tree's velocities as ``j G``. So the step of a closed-loop scene
is the tree's step with

* the free accelerations from the constraint-embedded articulated-body algorithm (`jaxmb.loops.forward_dynamics`);
  implicit damping ``D`` on spanning coordinates enters, as for the tree, through the armature, which the embedded
  algorithm carries as ``G* diag(armature) G``;
* the constraint-space compliance ``A = J_y M_y^-1 J_y*`` of the rows ``J_y = J G``, whose columns ``M_y^-1 J_y*``
  come from the same algorithm at rest without gravity, one batched solve per row (`jaxmb.loops.opspace`), and no
  ``M_y`` formed;
* the configuration advanced on the spanning tree's manifold and projected back onto ``phi = 0``
  (`jaxmb.loops.solve_configuration`): no drift of the loops.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxmb.configuration import integrate as tree_integrate
from jaxmb.kinematics import body_velocities
from jaxmb.loops.articulated import forward_dynamics
from jaxmb.loops.embedding import embedding_matrix
from jaxmb.loops.model import LoopModel
from jaxmb.loops.position import solve_configuration


def is_closed(model) -> bool:
    """Whether ``model`` is a closed-loop system (a `jaxmb.loops.LoopModel`)."""
    return isinstance(model, LoopModel)


def spanning_tree(model):
    """The tree whose bodies and coordinates the scene's geometry, actuators and limits name."""
    return model.tree if is_closed(model) else model


def with_armature(model, extra):
    """``model`` with ``extra`` (nv,) added to its (spanning tree's) armature."""
    if not is_closed(model):
        return model.replace(armature=model.armature + extra)
    return model.replace(tree=model.tree.replace(armature=model.tree.armature + extra))


class LoopFactors(NamedTuple):
    """What the constraints take at ``(q, yd, tau_y)`` of a closed-loop system: the free accelerations ``qdd``
    (ny,) (``ydd``), the body velocities ``V`` (nb, 6) at ``qd = G yd``, and the embedding ``G`` (nv, ny)."""

    qdd: jnp.ndarray
    V: jnp.ndarray
    G: jnp.ndarray


def loop_factors(lm, q, yd, tau_y, f_ext=None) -> LoopFactors:
    """`LoopFactors` of ``lm`` at ``(q, yd)`` under the independent forces ``tau_y`` (ny,) and the external forces
    ``f_ext`` (nb, 6) on the spanning tree's bodies (None: none)."""
    G = embedding_matrix(lm, q)
    return LoopFactors(forward_dynamics(lm, q, yd, tau_y, f_ext), body_velocities(lm.tree, q, G @ yd), G)


def loop_space(lm, q, J, ab: LoopFactors):
    """``(J_y, A)``: rows ``J`` (k, nv) on the spanning velocities as rows ``J_y = J G`` (k, ny) on ``yd``, and
    their compliance ``A = J_y M_y^-1 J_y*`` (k, k) (module docstring)."""
    J_y = J @ ab.G
    still = lm.replace(tree=lm.tree.replace(gravity=jnp.zeros_like(lm.tree.gravity)))
    zero = jnp.zeros(lm.ny, J_y.dtype)
    Minv_Jt = jax.vmap(lambda row: forward_dynamics(still, q, zero, row))(J_y)  # rows: M_y^-1 J_y* e_i
    return J_y, J_y @ Minv_Jt.T


def advance(lm, q, yd, dt, iterations=4):
    """``(q+, closed)``: the spanning tree's step from ``q`` at ``qd = G yd`` for ``dt`` on its manifold, projected
    onto ``phi = 0`` by Newton's method from there; ``closed`` whether the loops closed (to ``sqrt(eps)``)."""
    q_pred = tree_integrate(lm.tree, q, embedding_matrix(lm, q) @ yd, dt)
    return project(lm, q_pred, iterations)


def project(lm, q, iterations=4):
    """``(q, closed)``: the consistent configuration with the independent coordinates of ``q``, from ``q``."""
    sol = solve_configuration(lm, q[jnp.asarray(lm.y_q_index, int)], q, iterations)
    return sol.q, sol.converged
