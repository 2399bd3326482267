"""Operational-space quantities of a closed-loop system: frames on or beyond loop clusters (book 10.6 with 15.8).

With the frames' Jacobian ``J`` (6m, nv) on the spanning tree, the independent-coordinate Jacobian is
``J_y = J G`` and the compliance ``Lambda^-1 = J_y M_y^-1 J_y*``. ``M_y^-1 J_y*`` comes from the embedded AB
algorithm (`jaxmb.loops.articulated`) at rest without gravity, one batched solve per task column, so the cost is
O(m N) for bounded clusters and no ``M_y`` is formed.
"""

import jax
import jax.numpy as jnp

from jaxmb.batching import eager_jit, full_precision
from jaxmb.kinematics import jacobian
from jaxmb.loops.articulated import forward_dynamics
from jaxmb.loops.embedding import embedding_matrix


@eager_jit(static_argnames=("frames", "reference"))
@full_precision
def task_jacobian(lm, q, frames, reference="local"):
    """``J_y = J G`` (6m, ny) of the named frames (bodies or frames of the tree), stacked in order."""
    J = jnp.concatenate([jacobian(lm.tree, q, f, reference) for f in frames])
    return J @ embedding_matrix(lm, q)


@eager_jit(static_argnames=("frames", "reference"))
@full_precision
def operational_space_compliance(lm, q, frames, reference="local"):
    """``Lambda^-1 = J_y M_y^-1 J_y*`` (6m, 6m) at a consistent configuration ``q`` (nq,) (10.6)."""
    J_y = task_jacobian(lm, q, frames, reference)
    still = lm.replace(tree=lm.tree.replace(gravity=jnp.zeros_like(lm.tree.gravity)))
    zero = jnp.zeros(lm.ny, J_y.dtype)
    Minv_Jt = jax.vmap(lambda t: forward_dynamics(still, q, zero, t))(J_y)  # rows: M_y^-1 J_y* e_i
    return J_y @ Minv_Jt.T


@eager_jit(static_argnames=("frames", "reference"))
@full_precision
def operational_space_inertia(lm, q, frames, reference="local"):
    """``Lambda = (J_y M_y^-1 J_y*)^-1`` (6m, 6m); singular where the frames cannot move independently."""
    return jnp.linalg.inv(operational_space_compliance(lm, q, frames, reference))
