"""The constraint problem of one step as MuJoCo poses it, solved by Newton's method on the velocities, with the
Hessian inverted by the articulated-body sweep.

The problem (Todorov, Convex and analytically-invertible dynamics with contacts and constraints, 2014). The step's
constraints are rows ``i`` with the Jacobian row ``J_i``, a target velocity ``v_star_i`` and a stiffness ``D_i =
1/R_i``, at the row velocities ``w = J v - v_star``. A contact is Coulomb's elliptic cone on its three rows (normal
and two tangents, one ``D``), whose impulse is ``-D w`` projected on the cone ``|p_t| <= mu p_n``; or, with
``cone="pyramidal"`` (MuJoCo's default), the four edges ``n +- mu t_j`` of the pyramid that approximates the cone,
each a unilateral scalar row. A joint limit is one unilateral row, a joint's Coulomb friction one row bounded by
``+- frictionloss dt``; a scalar row's impulse is ``clip(-D_i w_i, lo_i, hi_i)``. The velocity after the step
minimizes

    f(v) = 0.5 (v - v_free)* M (v - v_free) + sum_i s_i(J_i v - v_star_i) + sum_c 0.5 D_c dist(w_c, K_c*)^2

with ``s_i`` the convex, piecewise-quadratic penalty whose slope is minus the row's impulse, and the cone's penalty
``D_c / 2`` times the squared distance of its row velocities to the dual cone ``K* = {w_n >= mu |w_t|}``, whose
gradient is minus its impulse (Moreau's decomposition): the dual of ``min 0.5 p* (J M^-1 J* + R) p + (J v_free -
v_star)* p`` over the cones and bounds. This is a convex relaxation of Coulomb's law, which `jaxmb.sim.solver`
solves by sweeps (the friction disk of the normal impulse): a sliding contact's cone asks the normal velocity for
``mu`` times the slip, so a body sliding fast rides on its contacts a little, as in MuJoCo.

Newton's method. At ``v`` the Hessian of the penalties in ``w`` is ``H``: a scalar row's ``h_i = D_i`` where its
impulse is strictly inside its bounds, else zero; a cone's 3x3 block, ``D I`` where the impulse is inside the cone
(sticking), zero where it is zero (apart), and ``D`` times the derivative of the projection on the cone's surface
where it slides. The step ``dv`` solves ``(M + J* H J) dv = -grad f = -(M (v - v_free) - J* p)``. The Hessian is
the mass matrix of the same tree with each contact's ``sum_ij H_ij d_i d_j*`` added to the spatial inertia of the
body it acts on (``d`` the rows in that body's coordinates, ``J_i = d_i* J_body``) and each active joint row's
``h`` to its coordinate's armature, so the articulated-body sweep factors it in O(N) (book Alg 7.2 with the added
inertias, then (7.18)): no mass matrix, no ``J M^-1 J*``. A contact between two moving bodies couples them in the
Hessian; a scene with one is solved with the dense matrix ``M + J* H J`` instead (`DenseMetric`). The step length
is exact: ``f`` along ``dv`` is convex, its slope increasing (piecewise linear without sliding cones), and Newton's
method on the slope lands on its root. Without sliding cones ``f`` is piecewise quadratic, so once a step keeps
every row in its zone it lands on the minimum, and the iteration stops there; a sliding cone's penalty is not
quadratic, and the iteration stops once a step is below the tolerance, or keeps every zone and is below the square
root of round-off. The first step goes from ``v_free`` to the minimum of the quadratic in the zones of the warm
start (the last step's impulses, each cone's ``-D w`` before its projection: a sliding cone's impulse the
projection's derivative there times ``-D w``, `Zones`), without a line search: a stiff row's impulse moves far for a
small change of velocity, so a velocity loses the zones that the impulses keep, and with the last step's zones the
first step lands on the solution wherever no row changed zone and no cone slides, and near it otherwise. The steps
after it take the zones of their velocity and the exact line search, which makes ``f`` fall from there on. The
solver returns the velocity after the step, ``v = v_free + M^-1 J* p``, with the impulses.

Derivatives. At the solution the impulses are a fixed point ``p = P(p, theta) = p(J (v_free + M^-1 J* p) -
v_star)``, whose derivative in ``p`` is ``-H A`` (``A = J M^-1 J*``), so the implicit function theorem gives ``dp
= (I + H A)^-1 dP/dtheta dtheta``, and ``(I + H A)^-1 = I - H J (M + J* H J)^-1 J*``: one more solve with the
Hessian at the solution, never ``A``. Where a row switches zone the derivative is that of one side; it is finite.
"""

import functools
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import (
    full_precision,
    in_cpu_chunks,
    sum_rows,
    take_rows,
    vmap_in_cpu_chunks,
)
from jaxmb.dynamics.ab_steps import (
    ToParent,
    acceleration_step,
    articulated_step,
    inertia_step,
)
from jaxmb.dynamics.articulated import solve_factored
from jaxmb.dynamics.opspace import upsilon_of_factors
from jaxmb.model import pytree_dataclass
from jaxmb.sim.solver import stopping_tolerance
from jaxmb.spatial import Transform
from jaxmb.sweeps import down, up


@pytree_dataclass
@dataclass(frozen=True)
class TreeMetric:
    """``M^-1`` and ``(M + J* H J)^-1`` of a tree by its articulated-body sweeps (module docstring).

    X (Transform, nb), H (nv, 6)       joint poses and hinge map at the step's ``q``
    G, D (nv, 6)                       the factors of ``M`` (`jaxmb.ArticulatedInertias`)
    I (nb, 6, 6), armature (nv,)       the body inertias and armature that ``M`` is made of
    d (m, 6)                           the first ``m`` rows of ``J``, each in the coordinates of its body
    body (m,)                          static: the body of each of those rows
    coordinate (k,)                    static: the coordinate of each of the remaining rows, ``J_i = +-e_j*``
    """

    X: Transform
    H: jnp.ndarray
    G: jnp.ndarray
    D: jnp.ndarray
    I: jnp.ndarray
    armature: jnp.ndarray
    d: jnp.ndarray
    topology: object = field(metadata=dict(static=True))
    body: tuple = field(metadata=dict(static=True))
    coordinate: tuple = field(metadata=dict(static=True))

    @property
    def nb(self) -> int:
        return self.topology.nb

    def inverse(self, x):
        """``M^-1 x`` (nv,) by the factored solve (7.18)."""
        return solve_factored(self, self.X, self.H, self.G, self.D, x)[0]

    def _hessian_inertias(self, H):
        """The body inertias (nb, 6, 6) with the body rows' ``sum_ij H_ij d_i d_j*`` added to their bodies (a cone's
        three rows act on one body), and the armature (nv,) with the joint rows' weights (``J`` itself is not
        needed: ``d`` and ``coordinate`` are its rows). ``H`` a `RowHessian`."""
        m, c = self.d.shape[0], 3 * H.C.shape[0]
        Hd = H.times(self.d)
        added = sum_rows(Hd[:, :, None] * self.d[:, None, :], np.asarray(self.body, int), self.nb) if m else 0.0
        armature = self.armature + sum_rows(H.h[m - c:], np.asarray(self.coordinate, int), self.armature.shape[0])
        return self.I + added, armature

    def row_diagonal(self):
        """``diag(J M^-1 J*)`` (m,) of the body rows: ``d* Upsilon d`` with ``Upsilon`` the operational-space
        compliance of each row's body (`jaxmb.upsilon`, one down sweep from the factors), batched on the CPU in
        chunks with the batch last."""
        return _row_diagonal(self) if self.body else jnp.zeros(0, self.d.dtype)

    def hessian_inverse(self, H, J):
        """``x -> (M + J* H J)^-1 x`` (``H`` a `RowHessian`): the factors of the tree with the inertias of
        `_hessian_inertias` by the articulated-body sweep, then the factored solve (7.18) of each ``x``."""
        I, armature = self._hessian_inertias(H)
        _, dof = up(self.topology, inertia_step, jnp.zeros((6, 6), I.dtype), self.X, I, dofs=(self.H, armature))
        return lambda x: solve_factored(self, self.X, self.H, dof.G, dof.D, x)[0]

    def hessian_solve(self, H, J, x):
        """``(M + J* H J)^-1 x`` (nv,) for one ``x``: the forward dynamics of the tree with the inertias of
        `_hessian_inertias` under the joint forces ``x``, at rest and without gravity (Alg 7.2, passes 1 and 2: the
        factorization and the solve's up sweep in one). Batched on the CPU in chunks with the batch last, as the
        articulated-body functions are (`jaxmb.batching.vmap_in_cpu_chunks`): for the primal iterations, which
        are not differentiated."""
        return _tree_hessian_solve(self, H, x)


def _row_diagonal_of_one(metric: TreeMetric):
    Y = take_rows(upsilon_of_factors(metric.topology, metric.X, metric.H, metric.G, metric.D), metric.body)
    return jnp.einsum("mi,mij,mj->m", metric.d, Y, metric.d)


_row_diagonal = in_cpu_chunks(_row_diagonal_of_one)


def _accelerations_at_rest(metric: TreeMetric, H, x):
    I, armature = metric._hessian_inertias(H)
    zero = jnp.zeros((metric.nb, 6), x.dtype)
    _, dof = up(metric.topology, articulated_step, ToParent.zero(x.dtype), metric.X, I, zero, zero,
                dofs=(metric.H, x, armature))
    return down(metric.topology, acceleration_step, jnp.zeros(6, x.dtype), metric.X, zero,
                dofs=(dof.G, dof.nu, metric.H))[1]


_tree_hessian_solve = vmap_in_cpu_chunks(_accelerations_at_rest)


@pytree_dataclass
@dataclass(frozen=True)
class DenseMetric:
    """``M^-1`` and ``(M + J* H J)^-1`` by Cholesky factors of the mass matrix ``M`` (nv, nv) and of the
    Hessian: for rows that couple two moving bodies."""

    M: jnp.ndarray

    def inverse(self, x):
        return jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(self.M), True), x)

    def hessian_inverse(self, H, J):
        L = jnp.linalg.cholesky(self.M + J.T @ H.times(J))
        return lambda x: jax.scipy.linalg.cho_solve((L, True), x)

    def hessian_solve(self, H, J, x):
        return self.hessian_inverse(H, J)(x)


class Problem(NamedTuple):
    """One world's problem in ``n`` rows on ``nv`` velocities (module docstring): the first ``3 nc`` rows are the
    elliptic cones of ``nc`` contacts (each contact's normal and two tangents), the rest scalar rows.

    J (n, nv)            the rows' Jacobian
    v_free (nv,)         the velocity the step reaches without constraint impulses
    v_star (n,)          the rows' target velocities
    D (n,)               their stiffness ``1/R`` (positive; the same on a cone's three rows)
    mu (nc,)             the cones' friction coefficients
    lo, hi (n - 3 nc,)   the scalar rows' impulse bounds (``hi`` may be infinite)
    metric               `TreeMetric` or `DenseMetric`
    """

    J: jnp.ndarray
    v_free: jnp.ndarray
    v_star: jnp.ndarray
    D: jnp.ndarray
    mu: jnp.ndarray
    lo: jnp.ndarray
    hi: jnp.ndarray
    metric: TreeMetric | DenseMetric


def _split(prob: Problem, x):
    """``(cones (nc, 3), rows (n - 3 nc,))``: a row vector (n,) split into its cones' and its scalar rows'."""
    c = 3 * prob.mu.shape[0]
    return x[:c].reshape(-1, 3), x[c:]


class RowHessian(NamedTuple):
    """The Hessian of the rows' penalties in their velocities ``w``: a 3x3 block on each cone's rows, a diagonal on
    the scalar rows.

    C (nc, 3, 3)    the cones' blocks
    h (n - 3 nc,)   the scalar rows' weights
    """

    C: jnp.ndarray
    h: jnp.ndarray

    def times(self, x):
        """``H x`` for ``x`` (k, ...) holding the first ``k >= 3 nc`` rows."""
        c = 3 * self.C.shape[0]
        cones = jnp.einsum("cij,cj...->ci...", self.C, x[:c].reshape((-1, 3) + x.shape[1:])).reshape(x[:c].shape)
        return jnp.concatenate([cones, self.h[: x.shape[0] - c].reshape((-1,) + (1,) * (x.ndim - 1)) * x[c:]])


class Zones(NamedTuple):
    """Where each impulse is. A scalar row (n - 3 nc,): ``inside`` its bounds (``p = -D w``, the Hessian's weight
    ``D``), else at its upper bound where ``above``, at its lower one where not. A cone (nc,): ``cone_inside``
    (``p = x``, sticking; ``x = -D w``), else ``sliding`` on its surface, else at its apex (``p = 0``, apart); a
    sliding cone's impulse is ``P x`` with ``P = e e* + bend T`` the derivative of the projection on the cone at
    the point that gave the zones, ``e = (1, mu slip) / sqrt(1 + mu^2)`` the surface's generator along the unit
    vector ``slip`` (nc, 2), ``T = diag(0, I - slip slip*)`` the tangent plane's projection across it, ``bend =
    mu p_n / |x_t|`` (nc,): exact at that point and to first order near it (the projection is homogeneous of
    degree one, so ``P x`` is its own linearization)."""

    inside: jnp.ndarray
    above: jnp.ndarray
    cone_inside: jnp.ndarray
    sliding: jnp.ndarray
    slip: jnp.ndarray
    bend: jnp.ndarray


def zones(prob: Problem, x) -> Zones:
    """The `Zones` of ``x = -D w`` (n,), the impulses before their bounds and cones, or of the warm start that the
    solver returns (`Solution.warm`)."""
    x_c, x_r = _split(prob, x)
    mu = prob.mu
    r2 = jnp.sum(x_c[:, 1:] ** 2, -1)
    r = jnp.sqrt(jnp.maximum(r2, jnp.finfo(x.dtype).tiny))  # floored: finite derivatives where x_t = 0
    cone_inside = (x_c[:, 0] > 0) & (r2 < (mu * x_c[:, 0]) ** 2)
    apart = (x_c[:, 0] <= 0) & (x_c[:, 0] ** 2 >= mu ** 2 * r2)
    p_n = (x_c[:, 0] + mu * r) / (1 + mu ** 2)
    return Zones((x_r > prob.lo) & (x_r < prob.hi), x_r >= prob.hi, cone_inside, ~cone_inside & ~apart,
                 x_c[:, 1:] / r[:, None], mu * p_n / r)


def in_zones(prob: Problem, w, z: Zones):
    """``(p (n,), H: RowHessian)``: the impulses at the row velocities ``w = J v - v_star`` and the Hessian of the
    penalties, with each row in its zone of ``z``: ``f`` as one quadratic."""
    x_c, x_r = _split(prob, -prob.D * w)
    D_c, D_r = _split(prob, prob.D)
    p_r = jnp.where(z.inside, x_r, jnp.where(z.above, prob.hi, prob.lo))
    e = jnp.concatenate([jnp.ones_like(prob.mu)[:, None], prob.mu[:, None] * z.slip], -1)
    e = e / jnp.sqrt(1 + prob.mu ** 2)[:, None]
    across = jnp.pad(jnp.eye(2, dtype=w.dtype) - z.slip[:, :, None] * z.slip[:, None, :], ((0, 0), (1, 0), (1, 0)))
    P = jnp.where(z.cone_inside[:, None, None], jnp.eye(3, dtype=w.dtype),
                  jnp.where(z.sliding[:, None, None], e[:, :, None] * e[:, None, :] + z.bend[:, None, None] * across,
                            0.0))
    p_c = jnp.einsum("cij,cj->ci", P, x_c)
    return jnp.concatenate([p_c.reshape(-1), p_r]), RowHessian(D_c[:, :1, None] * P, jnp.where(z.inside, D_r, 0.0))


def impulses(prob: Problem, w):
    """``(p (n,), H: RowHessian)`` at the row velocities ``w = J v - v_star``: each scalar row's impulse ``clip(-D w,
    lo, hi)``, each cone's ``x = -D w`` projected on Coulomb's cone ``|p_t| <= mu p_n``, and the Hessian of ``f``'s
    penalties there, ``D`` times the derivatives of the bounds and projections (`Zones`)."""
    return in_zones(prob, w, zones(prob, -prob.D * w))


class _Bracket(NamedTuple):
    k: jnp.ndarray
    alpha: jnp.ndarray
    lo: jnp.ndarray  # phi'(lo) <= 0
    hi: jnp.ndarray  # phi'(hi) > 0, or infinite
    done: jnp.ndarray


LINE_SEARCH_STEPS = 30
"""The most slope evaluations of one `line_search`."""


def line_search(prob: Problem, w, dw, slope0, curvature, whole=False):
    """The ``alpha >= 0`` that minimizes ``f(v + alpha dv)``. Its slope ``phi'(alpha) = slope0 + alpha curvature -
    dw* p(w + alpha dw)`` (``slope0 = dv* M (v - v_free)``, ``curvature = dv* M dv``, ``dw = J dv``) is piecewise
    increasing and negative at zero (``dv`` is a descent direction); without sliding cones it is piecewise linear,
    with a breakpoint where a row's impulse reaches a bound. Newton's method on it, from ``alpha = 1`` (the minimum
    of the Taylor model that gave ``dv``), lands on the root once it stands on the root's piece, and the next
    evaluation confirms it (a change under round-off, or a slope within round-off of zero): exact in a few
    evaluations of O(n); a sliding cone's smooth piece takes a few more, converging quadratically. A step that
    leaves the bracket ``[lo, hi]`` of the slope's signs is replaced by the bracket's middle (by doubling while no
    ``hi`` is known). Should `LINE_SEARCH_STEPS` not reach the root, the result is ``lo``, where ``f`` has
    fallen. Where ``whole`` (a traced bool), the result is 1 with no evaluation."""
    dtype = w.dtype
    tol = 8 * jnp.finfo(dtype).eps

    def step(b: _Bracket) -> _Bracket:
        p, H = impulses(prob, w + b.alpha * dw)
        slope = slope0 + b.alpha * curvature - dw @ p
        rate = curvature + dw @ H.times(dw)  # phi'' at alpha
        at_root = jnp.abs(slope) <= tol * (jnp.abs(slope0) + b.alpha * curvature + jnp.abs(dw) @ jnp.abs(p))
        lo, hi = jnp.where(slope <= 0, b.alpha, b.lo), jnp.where(slope > 0, b.alpha, b.hi)
        newton = b.alpha - slope / jnp.maximum(rate, jnp.finfo(dtype).tiny)
        middle = jnp.where(jnp.isfinite(hi), 0.5 * (lo + hi), 2.0 * jnp.maximum(b.alpha, 1.0))
        alpha = jnp.where(at_root, b.alpha, jnp.where((newton > lo) & (newton < hi), newton, middle))
        return _Bracket(b.k + 1, alpha, lo, hi, at_root | (jnp.abs(alpha - b.alpha) <= tol * jnp.abs(alpha)))

    one = jnp.ones((), dtype)
    b = jax.lax.while_loop(lambda b: ~b.done & (b.k < LINE_SEARCH_STEPS), step,
                           _Bracket(jnp.zeros((), jnp.int32), one, 0.0 * one, jnp.inf * one, jnp.asarray(whole)))
    return jnp.where(b.done, b.alpha, b.lo)


class _Iterate(NamedTuple):
    k: jnp.ndarray
    v: jnp.ndarray
    M_delta: jnp.ndarray  # M (v - v_free)
    going: jnp.ndarray


def _newton_step(prob: Problem, it: _Iterate, tol, first: Zones) -> _Iterate:
    """One Newton step from ``it``, the Hessian and gradient those of ``f``'s quadratic in the zones of ``it``'s
    velocity (the Taylor model) and an exact line search on ``f``; the first step (``it.k == 0``) in the zones
    ``first`` instead, the whole step to the minimum of that quadratic (the warm start's zones: where they are the
    solution's it lands on it, and from a velocity near it otherwise the steps with line search go on). One
    program for both, so that the Hessian's factorization is compiled once. A step
    that keeps every row in its zone ends the iteration, unless a cone slides (its penalty is not quadratic), and so
    does a Taylor step that moves no velocity by more than ``tol`` times the largest, or that keeps every zone and
    moves none by more than the square root of round-off (Newton's next step would move it by round-off: a sliding
    cone's impulse, a difference of large numbers in single precision, does not settle closer). The first step
    does not end it by its size: the warm start's zones may hold it where the solution is not, as at a contact
    that the last step left apart."""
    J = prob.J
    w = J @ it.v - prob.v_star
    taylor = it.k > 0
    z = jax.tree.map(lambda a, b: jnp.where(taylor, a, b), zones(prob, -prob.D * w), first)
    p, H = in_zones(prob, w, z)
    g = it.M_delta - J.T @ p
    dv = -prob.metric.hessian_solve(H, J, g)
    dw = J @ dv
    M_dv = -g - J.T @ H.times(dw)
    alpha = line_search(prob, w, dw, dv @ it.M_delta, dv @ M_dv, whole=~taylor)
    v = it.v + alpha * dv
    reached = zones(prob, -prob.D * (w + alpha * dw))
    kept = (jnp.all((reached.inside == z.inside) & (reached.above == z.above))
            & jnp.all((reached.cone_inside == z.cone_inside) & (reached.sliding == z.sliding)))
    step, scale = jnp.max(jnp.abs(alpha * dv), initial=0.0), jnp.max(jnp.abs(v), initial=0.0)
    round_off = 8 * jnp.finfo(v.dtype).eps  # Newton's convergence is quadratic: the next step's would be its square
    converged = (step <= tol * scale) | (kept & (step <= round_off ** 0.5 * scale))
    return _Iterate(it.k + 1, v, it.M_delta + alpha * M_dv, ~((kept & ~jnp.any(z.sliding)) | (converged & taylor)))


class Solution(NamedTuple):
    """The minimum of ``f``: the impulses ``p`` (n,), the velocity ``v`` (nv,) after the step, ``v_free + M^-1 J*
    p``, and the next step's warm start ``warm`` (n,): the impulses, but each cone's ``x = -D w`` before its
    projection, whose `zones` give the first step the projection's derivative there (a sliding cone's ``bend``,
    which its impulse alone does not determine)."""

    p: jnp.ndarray
    v: jnp.ndarray
    warm: jnp.ndarray


def _warm(prob: Problem, p, v):
    c = 3 * prob.mu.shape[0]
    return jnp.concatenate([(-prob.D * (prob.J @ v - prob.v_star))[:c], p[c:]])


def solve(prob: Problem, p0, iterations: int, tolerance: float = 0.0):
    """The impulses ``p`` (n,) of `solution`."""
    return solution(prob, p0, iterations, tolerance).p


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def solution(prob: Problem, p0, iterations: int, tolerance: float = 0.0) -> Solution:
    """The `Solution` at the minimum of ``f`` (module docstring) after at most ``iterations`` Newton steps from
    ``v_free``, the first in the zones of the warm start ``p0`` (n,; the last step's `Solution.warm`, or zeros:
    then those of ``v_free``'s velocity), fewer once a step ends the iteration (`_newton_step`: it keeps every row
    in its zone, no cone sliding, or moves no velocity by more than `jaxmb.sim.solver.stopping_tolerance` times
    the largest). Its derivative is the implicit function theorem's at
    the returned point; none flows through ``p0``."""
    return _solve(prob, p0, iterations, tolerance)


@full_precision
def _solve(prob, p0, iterations, tolerance):
    it = _iterations(prob, p0, iterations, tolerance)
    p = impulses(prob, prob.J @ it.v - prob.v_star)[0]
    return Solution(p, it.v, _warm(prob, p, it.v))


def _iterations(prob, p0, iterations, tolerance) -> _Iterate:
    tol = stopping_tolerance(tolerance, prob.v_free.dtype)
    v = prob.v_free
    first = jax.tree.map(lambda a, b: jnp.where(jnp.any(p0 != 0), a, b), zones(prob, p0),
                         zones(prob, -prob.D * (prob.J @ v - prob.v_star)))
    return jax.lax.while_loop(lambda it: it.going & (it.k < iterations), lambda it: _newton_step(prob, it, tol, first),
                              _Iterate(jnp.zeros((), jnp.int32), v, jnp.zeros_like(v), jnp.asarray(True)))


@full_precision
def steps_taken(prob: Problem, p0, iterations: int, tolerance: float = 0.0):
    """The number of Newton steps () that `solution` takes from ``p0`` (not differentiated)."""
    return _iterations(prob, p0, iterations, tolerance).k


def velocity(prob: Problem, p):
    """``v_free + M^-1 J* p`` (nv,): the velocity after the step under the impulses ``p`` (n,)."""
    return prob.v_free + prob.metric.inverse(prob.J.T @ p)


def fixed_point(prob: Problem, p):
    """``P(p) = p(J velocity(p) - v_star)`` (n,): the impulses that the velocity of the impulses ``p`` asks for; the
    solution is its fixed point."""
    return impulses(prob, prob.J @ velocity(prob, p) - prob.v_star)[0]


@solution.defjvp
@full_precision
def _solution_jvp(iterations, tolerance, primals, tangents):
    """``dp = (I - H J (M + J* H J)^-1 J*) r`` with ``r`` the derivative of `fixed_point` in the problem at the
    fixed solution (module docstring), ``dv`` that of `velocity` in the problem and in ``p``, and the warm start's
    from them. Linear in the tangents, so reverse mode transposes it."""
    prob, p0 = primals
    d_prob, _ = tangents
    sol = solution(prob, p0, iterations, tolerance)
    (_, v), (r, dv) = jax.jvp(lambda theta: (fixed_point(theta, sol.p), velocity(theta, sol.p)), (prob,), (d_prob,))
    _, H = impulses(prob, prob.J @ v - prob.v_star)
    dp = r - H.times(prob.J @ prob.metric.hessian_inverse(H, prob.J)(prob.J.T @ r))
    dv = dv + prob.metric.inverse(prob.J.T @ dp)
    _, d_warm = jax.jvp(_warm, (prob, sol.p, sol.v), (d_prob, dp, dv))
    return sol, Solution(dp, dv, d_warm)
