"""Derivatives of an optimal trajectory with respect to its problem by the implicit function theorem at the
solution, rather than through the solver's iterations.

At a local optimum ``w* = (xs*, us*)`` of ``min sum dt l(x_t, u_t) + l_N(x_N)`` subject to ``x_{t+1} = f(x_t, u_t)``
and ``x_0 = x0``, with costates ``lambda_N = d l_N/dx``, ``lambda_t = dt dl/dx + Fx' lambda_{t+1}`` (the
stationarity of the Lagrangian ``L``), the KKT conditions ``grad_z L(z, theta) = 0`` (``z = (w, lambda)``) define
``z*(theta)``. Reverse mode needs ``K^-1 c`` for the symmetric KKT matrix ``K = d^2 L/dz^2`` and a cotangent ``c``
of ``w``: that is the linear-quadratic problem ``min 1/2 y' H y - c' y`` subject to the linearized dynamics from
``y_0 = 0``, with ``H`` the exact Hessians of ``dt l + lambda_{t+1} . f`` per knot (second derivatives of the
dynamics included, not Gauss-Newton's), solved by one more backward Riccati pass (`jaxmb.trajopt.riccati`) and a
rollout; its costates ``nu_t = V_xx y_t + V_x`` are the multipliers' part. Then
``c_theta = -d/d theta [D_w L(w*, lambda*; theta)[y] + sum nu_{t+1} . f(x_t*, u_t*; theta) + nu_0 . x0(theta)]``.

The bounds of box-FDDP are left out (the optimum must not touch them), and ``q`` must be a vector space (screw
joints: `jaxmb.trajopt.state.is_vector_space`), where a tangent is a plain difference. The step's Jacobian and
second derivatives and the cost's gradient and Hessian come from one forward-over-forward trace per knot.
"""

import functools

import jax
import jax.numpy as jnp

from jaxmb.errors import ModelError
from jaxmb.trajopt.problem import Linearization, knot_cost, step, terminal_cost, total_cost
from jaxmb.trajopt.riccati import backward_pass
from jaxmb.trajopt.solver import Options, initial_guess, solve


def _check(problem):
    from jaxmb.trajopt.state import is_vector_space

    if not is_vector_space(problem.model):
        raise ModelError(f"jaxmb.trajopt.optimum: model {problem.model.name!r} has spherical, planar or free joints; "
                         "the implicit derivatives take screw joints only (q a vector space)")


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _optimum(problem, xs, us, options):
    sol = solve(problem, xs, us, options=options)
    return sol.xs, sol.us


def _optimum_fwd(problem, xs, us, options):
    xs_opt, us_opt = _optimum(problem, xs, us, options)
    return (xs_opt, us_opt), (problem, xs_opt, us_opt)


def _knot_derivatives(problem, xs, us):
    """Per running knot, in ``z = (x, u)``: the step's Jacobian (N, nx, nx + nu) and second derivatives (N, nx,
    nx + nu, nx + nu), the running cost's gradient (N, nx + nu) and Hessian (N, nx + nu, nx + nu), each by forward
    mode over the step's and the cost's one trace; the terminal cost's gradient (nx,) and Hessian (nx, nx)."""
    nx = xs.shape[1]

    def knot(z):
        def first(z):
            J = jax.jacfwd(lambda z: step(problem, z[:nx], z[nx:]))(z)
            g = jax.grad(lambda z: knot_cost(problem, z[:nx], z[nx:]))(z)
            return (J, g), (J, g)

        (dJ, H), (J, g) = jax.jacfwd(first, has_aux=True)(z)
        return J, dJ, g, H

    J, dJ, g, H = jax.vmap(knot)(jnp.concatenate([xs[:-1], us], 1))
    H_T, g_T = jax.jacfwd(lambda x: (jax.grad(lambda x: terminal_cost(problem, x))(x),) * 2, has_aux=True)(xs[-1])
    return J, dJ, g, H, g_T, H_T


def _optimum_bwd(options, res, cotangents):
    problem, xs, us = res
    ct_xs, ct_us = cotangents
    ndx = xs.shape[1]
    J, dJ, g, H, g_T, H_T = _knot_derivatives(problem, xs, us)
    Fx, Fu = J[:, :, :ndx], J[:, :, ndx:]

    def costate(lam_next, data):
        Lx, Fx = data
        lam = Lx + Fx.T @ lam_next
        return lam, lam

    _, lam = jax.lax.scan(costate, g_T, (g[:, :ndx], Fx), reverse=True)
    lam = jnp.concatenate([lam, g_T[None]])  # (N + 1, ndx)
    H = H + jnp.einsum("ti,tijk->tjk", lam[1:], dJ)  # the Hessians of dt l + lambda_{t+1} . f
    zeros = jnp.zeros((xs.shape[0], ndx), xs.dtype)
    kkt = Linearization(jnp.zeros((), xs.dtype), Fx, Fu, -ct_xs[:-1], -ct_us, H[:, :ndx, :ndx], H[:, ndx:, ndx:],
                        H[:, :ndx, ndx:], -ct_xs[-1], H_T, zeros)
    bp = backward_pass(kkt, 0.0, jnp.zeros((), bool))

    def forward(y, data):
        k, K, Fx, Fu = data
        yu = -k - K @ y
        return Fx @ y + Fu @ yu, (y, yu)

    y_T, (ys, yus) = jax.lax.scan(forward, jnp.zeros(ndx, xs.dtype), (bp.k, bp.K, Fx, Fu))
    ys = jnp.concatenate([ys, y_T[None]])
    nu_ = jnp.einsum("tij,tj->ti", bp.Vxx, ys) + bp.Vx  # the multipliers' part of K^-1 c

    def phi(p):
        def knot(x, u, y, yu, lam_next, nu_next):
            def g(x_, u_):
                x_next = step(p, x_, u_)
                return knot_cost(p, x_, u_) + jnp.dot(lam_next, x_next), x_next

            (_, x_next), (dg, _) = jax.jvp(g, (x, u), (y, yu))  # the step traced once for both terms
            return dg + jnp.dot(nu_next, x_next)

        terms = jax.vmap(knot)(xs[:-1], us, ys[:-1], yus, lam[1:], nu_[1:])
        terminal = jax.jvp(lambda x: terminal_cost(p, x), (xs[-1],), (ys[-1],))[1]
        return jnp.sum(terms) + terminal + jnp.dot(nu_[0], p.x0)

    ct_problem = jax.tree.map(lambda g: -g, jax.grad(phi)(problem))
    return ct_problem, jnp.zeros_like(xs), jnp.zeros_like(us)


_optimum.defvjp(_optimum_fwd, _optimum_bwd)


def optimum(problem, xs=None, us=None, options=None):
    """``(xs*, us*)``, (N + 1, nx) and (N, nu), FDDP's solution from the warm start ``xs``, ``us``
    (`jaxmb.trajopt.initial_guess` where None), differentiable in reverse mode with respect to every leaf of
    ``problem`` (targets, weights, ``x0``, the model's parameters) by the implicit function theorem (module
    docstring). The warm start gets no gradient. ``options`` `jaxmb.trajopt.Options` (Crocoddyl's where None)."""
    _check(problem)
    xs, us = initial_guess(problem, xs, us)
    return _optimum(problem, xs, us, Options() if options is None else options)


def optimal_cost(problem, xs=None, us=None, options=None):
    """The cost of `optimum` (), differentiable as it is."""
    xs_opt, us_opt = optimum(problem, xs, us, options)
    return total_cost(problem, xs_opt, us_opt)
