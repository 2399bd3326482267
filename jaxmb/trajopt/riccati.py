"""The backward Riccati pass of DDP on a `jaxmb.trajopt.problem.Linearization`, by ``lax.scan`` from the terminal
knot, as Crocoddyl's ``SolverDDP.backwardPass`` (Mastalli et al., "Crocoddyl: An Efficient and Versatile Framework
for Multi-Contact Optimal Control", 2020)::

    Q_x  = l_x + Fx' V_x',   Q_u = l_u + Fu' V_x',   Q_xx = l_xx + Fx' V_xx' Fx,
    Q_uu = l_uu + Fu' V_xx' Fu + mu I,   Q_xu = l_xu + Fx' V_xx' Fu,
    k = Q_uu^-1 Q_u,   K = Q_uu^-1 Q_xu',   V_x = Q_x - K' Q_u,   V_xx = sym(Q_xx - Q_xu K) + mu I

with ``V_x += V_xx f`` at a node with a gap ``f`` where the trajectory is infeasible (FDDP's value gradient at the
end of the gap), ``V_xx_N = l_xx_N + mu I``. The control update is ``du = -k - K dx``. With ``box`` (and a feasible
trajectory) the gains come from the box QP on ``u_lower - u <= du <= u_upper - u`` (`jaxmb.trajopt.boxqp`,
Crocoddyl's ``SolverBoxFDDP.computeGains``): ``k = -du*``, ``K`` from the free block's inverse, and ``Q_u`` zeroed
in the clamped coordinates.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_factor, cho_solve

from jaxmb.trajopt.boxqp import box_qp


class BackwardPass(NamedTuple):
    """k (N, nu), K (N, nu, ndx), Vx (N + 1, ndx), Vxx (N + 1, ndx, ndx), Qu (N, nu), Quuk (N, nu) (``Q_uu k``),
    failed () (a non-positive ``Q_uu`` or a non-finite value)."""

    k: jnp.ndarray
    K: jnp.ndarray
    Vx: jnp.ndarray
    Vxx: jnp.ndarray
    Qu: jnp.ndarray
    Quuk: jnp.ndarray
    failed: jnp.ndarray


def backward_pass(lin, mu, infeasible, box=None) -> BackwardPass:
    """The backward pass of the module docstring at regularization ``mu``; ``infeasible`` () bool adds the gaps'
    terms; ``box`` None or ``(us, u_lower, u_upper, k_previous, is_feasible)`` for the box QP's gains (its
    solution warm-started from ``k_previous``, as Crocoddyl's)."""
    ndx = lin.Lx_T.shape[0]
    eye_x = jnp.eye(ndx, dtype=lin.Lx_T.dtype)
    Vxx_T = lin.Lxx_T + mu * eye_x
    Vx_T = lin.Lx_T + jnp.where(infeasible, Vxx_T @ lin.fs[-1], 0.0)

    def knot(carry, data):
        Vx_n, Vxx_n = carry
        Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, f, extra = data
        FxV = Fx.T @ Vxx_n
        Qx, Qxx = Lx + Fx.T @ Vx_n, Lxx + FxV @ Fx
        FuV = Fu.T @ Vxx_n
        Qu, Quu, Qxu = Lu + Fu.T @ Vx_n, Luu + FuV @ Fu, Lxu + FxV @ Fu
        Quu = Quu + mu * jnp.eye(Quu.shape[0], dtype=Quu.dtype)
        factor = cho_factor(Quu, lower=True)
        k, K = cho_solve(factor, Qu), cho_solve(factor, Qxu.T)
        if box is not None:
            u, lower, upper, k_prev, feasible = extra
            sol = box_qp(Quu, Qu, lower - u, upper - u, k_prev)
            bounded = feasible & jnp.any(jnp.isfinite(lower) | jnp.isfinite(upper))
            k = jnp.where(bounded, -sol.x, k)
            K = jnp.where(bounded, sol.Hff_inv @ Qxu.T, K)
            Qu = jnp.where(bounded & ~sol.free, 0.0, Qu)
        Vx = Qx - K.T @ Qu
        Vxx = Qxx - Qxu @ K
        Vxx = 0.5 * (Vxx + Vxx.T) + mu * eye_x
        Vx = Vx + jnp.where(infeasible, Vxx @ f, 0.0)
        return (Vx, Vxx), (k, K, Vx, Vxx, Qu, Quu @ k)

    N = lin.Fx.shape[0]
    if box is None:
        extra = jnp.zeros((N, 0), lin.Lx_T.dtype)
    else:
        us, lower, upper, k_prev, feasible = box
        extra = (us, jnp.broadcast_to(lower, us.shape), jnp.broadcast_to(upper, us.shape), k_prev,
                 jnp.broadcast_to(feasible, (N,)))
    data = (lin.Fx, lin.Fu, lin.Lx, lin.Lu, lin.Lxx, lin.Luu, lin.Lxu, lin.fs[:-1], extra)
    _, (k, K, Vx, Vxx, Qu, Quuk) = jax.lax.scan(knot, (Vx_T, Vxx_T), data, reverse=True)
    Vx = jnp.concatenate([Vx, Vx_T[None]])
    Vxx = jnp.concatenate([Vxx, Vxx_T[None]])
    failed = ~(jnp.all(jnp.isfinite(Vx)) & jnp.all(jnp.isfinite(Vxx)) & jnp.all(jnp.isfinite(k)))
    return BackwardPass(k, K, Vx, Vxx, Qu, Quuk, failed)
