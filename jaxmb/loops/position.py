"""The position level: dependent coordinates from independent ones, ``phi(q) = 0`` (book ch. 15).

Newton's method on the dependent coordinates with a fixed number of iterations (so it batches under ``vmap``),
differentiated by the implicit-function theorem through ``jax.lax.custom_root`` rather than through the
iterations: ``d q_d = -K_d^-1 (dphi/dy dy + dphi/dtheta dtheta)`` for the independent coordinates and every
model parameter theta. Near a loop singularity (``K_d`` rank deficient) or where the loop cannot be assembled
the step is dropped rather than turned into NaN, and the returned flag says the residual stayed large.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import eager_jit, full_precision
from jaxmb.configuration import integrate as tree_integrate
from jaxmb.configuration import neutral_configuration
from jaxmb.loops.embedding import constrained_jacobian, constraint_residual, spanning_velocity


class LoopConfiguration(NamedTuple):
    """``q`` (nq,) spanning configuration; ``residual`` max |phi(q)|; ``converged`` residual below ``tol``."""

    q: jnp.ndarray
    residual: jnp.ndarray
    converged: jnp.ndarray


def dependent_q_index(lm):
    """The dependent coordinates of every loop cluster, as indices into ``q`` (ascending)."""
    topo = lm.tree.topology
    return tuple(sorted(int(topo.q_offset[c.bodies[d]]) for c in lm.loop_clusters for d in c.dependent))


def dependent_angles(lm):
    """Positions in `dependent_q_index` of the dependent angles that every constraint sees modulo a turn: angles
    of revolute and continuous joints that only loop closures read (a loop closure reads an angle through its
    rotation). A coupling or another joint-level constraint reads the angle itself (``q_J = r q_R + c``), so a
    whole turn would change its residual: those angles are left as Newton's method returns them."""
    topo = lm.tree.topology
    body = {int(topo.q_offset[b]): b for b in range(topo.nb)}
    linear = {i for c in lm.constraints if c.kind != "closure" for i in c.q_index}
    return tuple(k for k, i in enumerate(dependent_q_index(lm))
                 if lm.tree.joint_types[body[i]] in ("revolute", "continuous") and i not in linear)


def wrap_to(angle, centre):
    """``angle`` moved by whole turns into ``(centre - pi, centre + pi]``; its derivative is 1."""
    turns = jnp.ceil((angle - centre - jnp.pi) / (2 * jnp.pi))
    return angle - jax.lax.stop_gradient(2 * jnp.pi * turns)


@eager_jit(static_argnames=("iterations",))
@full_precision
def solve_configuration(lm, y, guess=None, iterations=10, tol=None) -> LoopConfiguration:
    """The spanning configuration whose independent coordinates are ``y`` (len(y_q_index),) and whose
    dependent ones solve ``phi(q) = 0``, by ``iterations`` Newton steps from ``guess`` (nq,) (default: the
    neutral configuration; pass the previous state to stay on its assembly branch).

    Newton's steps can take a dependent angle whole turns away, so the dependent angles of revolute and continuous
    joints that only loop closures read (`dependent_angles`) are returned within half a turn of the guess's: in
    ``(-pi, pi]`` without a guess, and on the guess's turn with one (a continuous joint that counts turns keeps
    counting from the guess). Other coordinates, and the independent ones ``y``, are returned as they are.

    ``tol`` (default ``sqrt(eps)`` of the dtype) sets the ``converged`` flag only."""
    y = jnp.asarray(y)
    q0 = neutral_configuration(lm.tree).astype(y.dtype) if guess is None else jnp.asarray(guess)
    q0 = q0.at[jnp.asarray(lm.y_q_index, int)].set(y)
    dep = jnp.asarray(dependent_q_index(lm), int)
    tol = float(np.sqrt(jnp.finfo(y.dtype).eps)) if tol is None else tol
    if dep.size == 0:
        return LoopConfiguration(q0, jnp.zeros((), y.dtype), jnp.asarray(True))

    dep_cols = [lm.c_q_index.index(i) for i in dependent_q_index(lm)]

    def F(x):
        return constraint_residual(lm, q0.at[dep].set(x))

    def K_d(x):
        return constrained_jacobian(lm, q0.at[dep].set(x))[:, jnp.asarray(dep_cols)]

    def newton(F, x):
        def iteration(_, x):
            step = jnp.linalg.solve(K_d(x), F(x))
            return x - jnp.where(jnp.all(jnp.isfinite(step)), step, 0.0)

        return jax.lax.fori_loop(0, iterations, iteration, x)  # one traced step: compile time flat in iterations

    def tangent_solve(g, r):
        return jnp.linalg.solve(jax.jacfwd(g)(r), r)

    x = jax.lax.custom_root(F, q0[dep], newton, tangent_solve)
    angles = jnp.asarray(dependent_angles(lm), int)
    if angles.size:
        x = x.at[angles].set(wrap_to(x[angles], q0[dep][angles]))
    q = q0.at[dep].set(x)
    residual = jnp.max(jnp.abs(constraint_residual(lm, q)))
    return LoopConfiguration(q, residual, residual < tol)


@eager_jit(static_argnames=("iterations",))
@full_precision
def integrate(lm, q, yd, dt, iterations=4):
    """The consistent configuration reached from ``q`` moving at ``yd`` for ``dt``: the spanning tree's step on
    its manifold, then the dependent coordinates projected back onto ``phi = 0`` (no position drift)."""
    q_pred = tree_integrate(lm.tree, q, spanning_velocity(lm, q, yd), dt)
    return solve_configuration(lm, q_pred[jnp.asarray(lm.y_q_index, int)], q_pred, iterations).q
