"""DDP, FDDP and box-FDDP as Crocoddyl 3's ``SolverDDP``, ``SolverFDDP`` and ``SolverBoxFDDP`` (Mastalli et al.,
"Crocoddyl: An Efficient and Versatile Framework for Multi-Contact Optimal Control", 2020), one ``lax.while_loop``
of at most ``max_iterations`` iterations (at least one), stopped at the tolerance, so that a solve is one compiled
program that ``jax.vmap`` batches. The loop body traces the linearization, the backward pass and one rollout once
each: the line search is a ``lax.while_loop`` over the step lengths, and the rollout returns the trial's gaps.

Each iteration: linearize about the current trajectory (after an accepted step), the backward pass
(`jaxmb.trajopt.riccati`) at the regularization ``mu`` (raised tenfold and retried while ``Q_uu`` is not positive
definite), then a line search over ``alpha = 1, 1/2, ..., 1/512``:

* DDP rolls the dynamics out from ``x0`` with ``u = u - alpha k - K dx`` and accepts the first step whose cost
  decrease ``dV`` exceeds ``th_acceptstep`` of the expected ``alpha (d_1 + alpha d_2 / 2)``, ``d_1 = sum Q_u' k``,
  ``d_2 = -sum k' Q_uu k`` (any descent step while the trajectory is infeasible);
* FDDP keeps the fraction ``1 - alpha`` of each gap (``x_t = x_t (+) (alpha - 1) f_t``) and adds the gaps' terms
  to the expected improvement, ``d_1 += -sum V_x' f + dv``, ``d_2 += sum f' V_xx f - 2 dv`` with
  ``dv = -sum f' V_xx (x_t (-) x_try_t)``; a step of expected increase is accepted while infeasible if the cost
  rises by less than ``th_acceptnegstep`` times it. A full step closes every gap;
* box-FDDP is FDDP with the box QP's gains while the trajectory is feasible and the controls clipped to the bounds
  in the rollout.

``mu`` is divided by ``reg_factor`` after a step longer than ``th_stepdec`` and multiplied after one at most
``th_stepinc`` (the solve fails at ``reg_max``). It stops where the trajectory was feasible and the expected
improvement ``|d_1 + d_2 / 2|`` is below ``th_stop``.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxmb.trajopt.problem import knot_cost, linearize, step, terminal_cost
from jaxmb.trajopt.riccati import backward_pass
from jaxmb.trajopt.state import difference, integrate_state

METHODS = ("ddp", "fddp", "box_fddp")

ALPHAS = tuple(0.5 ** n for n in range(10))
"""The step lengths the line search tries, longest first (Crocoddyl's)."""

MAX_RETRIES = 64
"""Backward passes retried at a raised regularization before a solve gives up (a bound for ``reg_min = 0``)."""


class Options(NamedTuple):
    """Crocoddyl's defaults (``th_stop`` 5e-5 for box-FDDP, as Crocoddyl sets it). ``reg_init`` None starts at
    ``reg_min``. A pytree of numbers: passed to a jitted solve as an argument, new values do not recompile."""

    max_iterations: int = 100
    th_stop: float = 1e-9
    reg_init: float = None
    reg_min: float = 1e-9
    reg_max: float = 1e9
    reg_factor: float = 10.0
    th_acceptstep: float = 0.1
    th_acceptnegstep: float = 2.0
    th_grad: float = 1e-12
    th_stepdec: float = 0.5
    th_stepinc: float = 0.01


class Solution(NamedTuple):
    """xs (N + 1, nx), us (N, nu); cost (); iterations () the iterations run (Crocoddyl's ``solver.iter`` counts
    one less where it converged); converged () bool, the stop criterion met; stop () ``|d_1 + d_2 / 2|`` at the
    last iteration; gaps () the largest gap entry of the returned trajectory; feasible () bool; mu () the last
    regularization; k (N, nu), K (N, nu, ndx) the last backward pass's gains (``du = -k - K dx``)."""

    xs: jnp.ndarray
    us: jnp.ndarray
    cost: jnp.ndarray
    iterations: jnp.ndarray
    converged: jnp.ndarray
    stop: jnp.ndarray
    gaps: jnp.ndarray
    feasible: jnp.ndarray
    mu: jnp.ndarray
    k: jnp.ndarray
    K: jnp.ndarray


def _forward_pass(problem, xs, us, k, K, fs, alpha, keep_gaps, clip):
    """The trial trajectory at step length ``alpha``, its cost and its gaps (N + 1, ndx) (`gaps`, from the states
    the rollout reached, so that the dynamics are traced once); ``keep_gaps`` () bool moves each node by
    ``(alpha - 1) f_t`` (FDDP), ``clip`` clips the controls to the bounds (box-FDDP)."""
    model = problem.model

    def node(x_reached, f):
        return jnp.where(keep_gaps, integrate_state(model, x_reached, (alpha - 1.0) * f), x_reached)

    def knot(x_reached, data):
        x, u, k_t, K_t, f = data
        x_try = node(x_reached, f)
        u_try = u - alpha * k_t - K_t @ difference(model, x, x_try)
        if clip:
            u_try = jnp.clip(u_try, problem.u_lower, problem.u_upper)
        return step(problem, x_try, u_try), (x_reached, x_try, u_try, knot_cost(problem, x_try, u_try))

    x_end, (reached, xs_try, us_try, costs) = jax.lax.scan(knot, problem.x0, (xs[:-1], us, k, K, fs[:-1]))
    x_T = node(x_end, fs[-1])
    xs_try = jnp.concatenate([xs_try, x_T[None]])
    reached = jnp.concatenate([reached, x_end[None]])  # x0, then step(x_t, u_t) of each trial knot
    fs_try = jax.vmap(lambda a, b: difference(model, a, b))(xs_try, reached)
    return xs_try, us_try, jnp.sum(costs) + terminal_cost(problem, x_T), fs_try


class _Carry(NamedTuple):
    xs: jnp.ndarray
    us: jnp.ndarray
    lin: tuple
    cost: jnp.ndarray
    mu: jnp.ndarray
    is_feasible: jnp.ndarray
    was_feasible: jnp.ndarray
    recalc: jnp.ndarray
    iteration: jnp.ndarray
    stop: jnp.ndarray
    converged: jnp.ndarray
    failed: jnp.ndarray
    k: jnp.ndarray
    K: jnp.ndarray
    fs: jnp.ndarray


def _solve(problem, xs, us, is_feasible, options, method):
    o = options
    dtype = problem.x0.dtype
    alphas = jnp.asarray(ALPHAS, dtype)
    box = method == "box_fddp"
    gaps_kept = method != "ddp"

    def backward(c, mu):
        extra = (c.us, problem.u_lower, problem.u_upper, c.k, c.is_feasible) if box else None
        return backward_pass(c.lin, mu, ~c.is_feasible, extra)

    def regularized_backward(c):
        """Crocoddyl's retry: raise mu after a failed pass; give up once it reaches reg_max. The first pass, at
        ``c.mu``, is the loop's first iteration, so that the backward pass is traced once."""
        def cond(s):
            _, bp, give_up, _, first = s
            return first | (bp.failed & ~give_up)

        def body(s):
            mu, _, _, tries, first = s
            mu = jnp.where(first, mu, jnp.minimum(mu * o.reg_factor, o.reg_max))
            give_up = ~first & ((mu == o.reg_max) | (tries >= MAX_RETRIES))
            return mu, backward(c, mu), give_up, jnp.where(first, tries, tries + 1), jnp.zeros((), bool)

        bp0 = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(backward, c, c.mu))
        init = (c.mu, bp0, jnp.zeros((), bool), jnp.zeros((), jnp.int32), jnp.ones((), bool))
        mu, bp, give_up, _, _ = jax.lax.while_loop(cond, body, init)
        return mu, bp, give_up

    def iteration(c):
        lin = jax.lax.cond(c.recalc, lambda: linearize(problem, c.xs, c.us), lambda: c.lin)
        c = c._replace(lin=lin, cost=jnp.where(c.recalc, lin.cost, c.cost))
        mu, bp, give_up = regularized_backward(c)
        infeasible = ~c.is_feasible
        fs = lin.fs
        dg = jnp.sum(bp.Qu * bp.k)
        dq = -jnp.sum(bp.k * bp.Quuk)
        if gaps_kept:
            dg = dg - jnp.where(infeasible, jnp.sum(bp.Vx * fs), 0.0)
            dq = dq + jnp.where(infeasible, jnp.einsum("ti,tij,tj->", fs, bp.Vxx, fs), 0.0)

        def try_alpha(j):
            alpha = alphas[j]
            keep = infeasible & (alpha != 1.0) if gaps_kept else jnp.zeros((), bool)
            xs_try, us_try, cost_try, fs_try = _forward_pass(problem, c.xs, c.us, bp.k, bp.K, fs, alpha, keep, box)
            if gaps_kept:
                dx = jax.vmap(lambda a, b: difference(problem.model, a, b))(xs_try, c.xs)
                dv = jnp.where(infeasible, -jnp.einsum("ti,tij,tj->", fs, bp.Vxx, dx), 0.0)
            else:
                dv = jnp.zeros((), dtype)
            d1, d2 = dg + dv, dq - 2.0 * dv
            dV = c.cost - cost_try
            dVexp = alpha * (d1 + 0.5 * alpha * d2)
            finite = jnp.isfinite(cost_try) & jnp.all(jnp.isfinite(xs_try))
            small = jnp.abs(d1) < o.th_grad
            if gaps_kept:
                accept = jnp.where(dVexp >= 0, small | (dV > o.th_acceptstep * dVexp),
                                   infeasible & (dV > o.th_acceptnegstep * dVexp))
            else:
                accept = (dVexp >= 0) & (small | infeasible | (dV > o.th_acceptstep * dVexp))
            return finite & accept, finite, xs_try, us_try, cost_try, fs_try, d1, d2

        def search_cond(s):
            j, accepted = s[0], s[1]
            return (j < len(ALPHAS)) & ~accepted

        def search_body(s):
            j, _, _, d1, d2, xs_a, us_a, cost_a, fs_a = s
            accept, finite, xs_try, us_try, cost_try, fs_try, e1, e2 = try_alpha(j)
            d1, d2 = jnp.where(finite, e1, d1), jnp.where(finite, e2, d2)  # a failed rollout leaves d as it was
            return (j + 1, accept, alphas[j], d1, d2, jnp.where(accept, xs_try, xs_a), jnp.where(accept, us_try, us_a),
                    jnp.where(accept, cost_try, cost_a), jnp.where(accept, fs_try, fs_a))

        search = (0, jnp.zeros((), bool), alphas[0], dg, dq, c.xs, c.us, c.cost, fs)
        _, accepted, alpha, d1, d2, xs_new, us_new, cost_new, fs_new = jax.lax.while_loop(search_cond, search_body,
                                                                                           search)
        if gaps_kept:
            was_feasible = jnp.where(accepted, c.is_feasible, c.was_feasible)
            is_feasible = jnp.where(accepted, was_feasible | (alpha == 1.0), c.is_feasible)
        else:
            was_feasible = jnp.where(accepted, c.is_feasible, c.was_feasible)
            is_feasible = jnp.where(accepted, True, c.is_feasible)
        mu = jnp.where(alpha > o.th_stepdec, jnp.maximum(mu / o.reg_factor, o.reg_min), mu)
        mu = jnp.where(alpha <= o.th_stepinc, jnp.minimum(mu * o.reg_factor, o.reg_max), mu)
        failed = give_up | ((alpha <= o.th_stepinc) & (mu == o.reg_max))
        stop = jnp.abs(d1 + 0.5 * d2)
        converged = ~give_up & was_feasible & (stop < o.th_stop)
        return _Carry(xs_new, us_new, lin, cost_new, mu, is_feasible, was_feasible, accepted, c.iteration + 1,
                      stop, converged, failed, bp.k, bp.K, fs_new)

    def cond(c):  # at least one iteration: its linearization gives the warm start's gaps
        return (c.iteration == 0) | ((c.iteration < o.max_iterations) & ~c.converged & ~c.failed)

    # the first iteration linearizes (recalc): the loop body is the only place the derivatives are traced
    lin0 = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(linearize, problem, xs, us))
    nu, ndx = us.shape[1], lin0.Lx_T.shape[0]
    mu0 = o.reg_min if o.reg_init is None else o.reg_init
    init = _Carry(xs, us, lin0, lin0.cost, jnp.asarray(mu0, dtype), jnp.asarray(is_feasible), jnp.zeros((), bool),
                  jnp.ones((), bool), jnp.zeros((), jnp.int32), jnp.asarray(jnp.inf, dtype), jnp.zeros((), bool),
                  jnp.zeros((), bool), jnp.zeros((problem.horizon, nu), dtype),
                  jnp.zeros((problem.horizon, nu, ndx), dtype), lin0.fs)
    c = jax.lax.while_loop(cond, iteration, init)
    return Solution(c.xs, c.us, c.cost, c.iteration, c.converged, c.stop, jnp.max(jnp.abs(c.fs)), c.is_feasible,
                    c.mu, c.k, c.K)


def initial_guess(problem, xs=None, us=None):
    """``(xs, us)``: ``x0`` at every node and zero controls where not given."""
    N = problem.horizon
    xs = jnp.broadcast_to(problem.x0, (N + 1, problem.nx)) if xs is None else jnp.asarray(xs, problem.x0.dtype)
    us = jnp.zeros((N, problem.nu), problem.x0.dtype) if us is None else jnp.asarray(us, problem.x0.dtype)
    return xs, us


def solve(problem, xs=None, us=None, *, method="fddp", is_feasible=False, options=None) -> Solution:
    """Solve ``problem`` from the warm start ``xs`` (N + 1, nx), ``us`` (N, nu) (`initial_guess` where None) by
    ``method`` (`METHODS`; module docstring). ``is_feasible`` says that ``xs`` is the rollout of ``us`` from
    ``x0``, as Crocoddyl's ``solve(xs, us, maxiter, is_feasible)``; ``options`` `Options` (Crocoddyl's defaults
    where None). One state: batch problems with ``jax.vmap``."""
    if method not in METHODS:
        raise ValueError(f"solve: method must be one of {METHODS}, got {method!r}")
    if options is None:
        options = Options(th_stop=5e-5) if method == "box_fddp" else Options()
    xs, us = initial_guess(problem, xs, us)
    return _solve(problem, xs, us, is_feasible, options, method)
