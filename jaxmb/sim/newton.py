"""The constraint problem of one step as MuJoCo poses it, solved by Newton's method on the velocities, with the
Hessian inverted by the articulated-body sweep.

The problem (Todorov, Convex and analytically-invertible dynamics with contacts and constraints, 2014). Every row
``i`` of the step's constraints is scalar, with the Jacobian row ``J_i``, a target velocity ``v_star_i``, impulse
bounds ``lo_i <= p_i <= hi_i`` and a stiffness ``D_i = 1/R_i``: a contact is four rows, the edges ``n +- mu t_j``
of the pyramid that approximates its friction cone (MuJoCo's default cone), each unilateral (``p >= 0``) with the
contact's normal target; a joint limit is one unilateral row, a joint's Coulomb friction one row bounded by
``+- frictionloss dt``. The velocity after the step minimizes

    f(v) = 0.5 (v - v_free)* M (v - v_free) + sum_i s_i(J_i v - v_star_i)

with ``s_i`` the convex, piecewise-quadratic penalty whose slope is minus the row's impulse ``p_i(w) = clip(-D_i w,
lo_i, hi_i)``: the dual of the box-constrained problem ``min 0.5 p* (J M^-1 J* + R) p + (J v_free - v_star)* p``
that `jaxmb.sim.solver` solves by sweeps with Coulomb's exact cone. This one relaxes it: a pyramid edge asks the
normal velocity for ``mu`` times the slip, so a body sliding fast rides on its contacts a little, as in MuJoCo.

Newton's method. At ``v`` the rows whose impulse is strictly inside its bounds are active, ``h_i = D_i``, the others
``h_i = 0``, and the step ``dv`` solves ``(M + J* diag(h) J) dv = -grad f = -(M (v - v_free) - J* p)``. The Hessian
is the mass matrix of the same tree with each active contact row's ``h d d*`` added to the spatial inertia of the
body it acts on (``d`` the row in that body's coordinates, ``J_i = d* J_body``) and each active joint row's ``h`` to
its coordinate's armature, so the articulated-body sweep factors it in O(N) (book Alg 7.2 with the added inertias,
then (7.18)): no mass matrix, no ``J M^-1 J*``. A contact between two moving bodies couples them in the Hessian; a
scene with one is solved with the dense matrix ``M + J* diag(h) J`` instead (`DenseMetric`). The step length is
exact: ``f`` along ``dv`` is piecewise quadratic, its slope piecewise linear and increasing, and Newton's method on
the slope lands on its root once it reaches the root's piece. ``f`` is piecewise quadratic, so once a step keeps
every row in its zone it lands on the minimum, and the iteration stops there. The first step goes from ``v_free`` to
the minimum of the quadratic in the zones of the warm start's impulses (the last step's), without a line search: a
stiff row's impulse moves far for a small change of velocity, so a velocity loses the zones that the impulses keep,
and with the last step's zones the first step lands on the solution wherever no row changed zone, and near it where
few did. The steps after it take the zones of their velocity and the exact line search, which makes ``f`` fall from
there on. The solver returns the velocity after the step, ``v = v_free + M^-1 J* p``, with the impulses.

Derivatives. At the solution the impulses are a fixed point ``p = P(p, theta) = clip(-D (J (v_free + M^-1 J* p) -
v_star), lo, hi)``, whose derivative in ``p`` is ``-H A`` (``H = diag(h)``, ``A = J M^-1 J*``), so the implicit
function theorem gives ``dp = (I + H A)^-1 dP/dtheta dtheta``, and ``(I + H A)^-1 = I - H J (M + J* H J)^-1 J*``:
one more solve with the Hessian at the solution, never ``A``. Where a row switches zone the derivative is that of
one side; it is finite.
"""

import functools
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import full_precision, in_cpu_chunks, sum_rows, take_rows, vmap_in_cpu_chunks
from jaxmb.dynamics.ab_steps import ToParent, acceleration_step, articulated_step, inertia_step
from jaxmb.dynamics.articulated import solve_factored
from jaxmb.dynamics.opspace import upsilon_of_factors
from jaxmb.model import pytree_dataclass
from jaxmb.sim.solver import stopping_tolerance
from jaxmb.spatial import Transform
from jaxmb.sweeps import down, up


@pytree_dataclass
@dataclass(frozen=True)
class TreeMetric:
    """``M^-1`` and ``(M + J* diag(h) J)^-1`` of a tree by its articulated-body sweeps (module docstring).

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

    def _hessian_inertias(self, h):
        """The body inertias (nb, 6, 6) with the rows' ``h d d*`` added to their bodies, and the armature (nv,) with
        the joint rows' ``h`` (``J`` itself is not needed: ``d`` and ``coordinate`` are its rows)."""
        m = self.d.shape[0]
        hd = h[:m, None] * self.d
        added = sum_rows(hd[:, :, None] * self.d[:, None, :], np.asarray(self.body, int), self.nb) if m else 0.0
        armature = self.armature + sum_rows(h[m:], np.asarray(self.coordinate, int), self.armature.shape[0])
        return self.I + added, armature

    def row_diagonal(self):
        """``diag(J M^-1 J*)`` (m,) of the body rows: ``d* Upsilon d`` with ``Upsilon`` the operational-space
        compliance of each row's body (`jaxmb.upsilon`, one down sweep from the factors), batched on the CPU in
        chunks with the batch last."""
        return _row_diagonal(self) if self.body else jnp.zeros(0, self.d.dtype)

    def hessian_inverse(self, h, J):
        """``x -> (M + J* diag(h) J)^-1 x``: the factors of the tree with the inertias of `_hessian_inertias` by the
        articulated-body sweep, then the factored solve (7.18) of each ``x``."""
        I, armature = self._hessian_inertias(h)
        _, dof = up(self.topology, inertia_step, jnp.zeros((6, 6), h.dtype), self.X, I, dofs=(self.H, armature))
        return lambda x: solve_factored(self, self.X, self.H, dof.G, dof.D, x)[0]

    def hessian_solve(self, h, J, x):
        """``(M + J* diag(h) J)^-1 x`` (nv,) for one ``x``: the forward dynamics of the tree with the inertias of
        `_hessian_inertias` under the joint forces ``x``, at rest and without gravity (Alg 7.2, passes 1 and 2: the
        factorization and the solve's up sweep in one). Batched on the CPU in chunks with the batch last, as the
        articulated-body functions are (`jaxmb.batching.vmap_in_cpu_chunks`): for the primal iterations, which
        are not differentiated."""
        return _tree_hessian_solve(self, h, x)


def _row_diagonal_of_one(metric: TreeMetric):
    Y = take_rows(upsilon_of_factors(metric.topology, metric.X, metric.H, metric.G, metric.D), metric.body)
    return jnp.einsum("mi,mij,mj->m", metric.d, Y, metric.d)


_row_diagonal = in_cpu_chunks(_row_diagonal_of_one)


def _accelerations_at_rest(metric: TreeMetric, h, x):
    I, armature = metric._hessian_inertias(h)
    zero = jnp.zeros((metric.nb, 6), x.dtype)
    _, dof = up(metric.topology, articulated_step, ToParent.zero(x.dtype), metric.X, I, zero, zero,
                dofs=(metric.H, x, armature))
    return down(metric.topology, acceleration_step, jnp.zeros(6, x.dtype), metric.X, zero,
                dofs=(dof.G, dof.nu, metric.H))[1]


_tree_hessian_solve = vmap_in_cpu_chunks(_accelerations_at_rest)


@pytree_dataclass
@dataclass(frozen=True)
class DenseMetric:
    """``M^-1`` and ``(M + J* diag(h) J)^-1`` by Cholesky factors of the mass matrix ``M`` (nv, nv) and of the
    Hessian: for rows that couple two moving bodies."""

    M: jnp.ndarray

    def inverse(self, x):
        return jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(self.M), True), x)

    def hessian_inverse(self, h, J):
        L = jnp.linalg.cholesky(self.M + J.T @ (h[:, None] * J))
        return lambda x: jax.scipy.linalg.cho_solve((L, True), x)

    def hessian_solve(self, h, J, x):
        return self.hessian_inverse(h, J)(x)


class Problem(NamedTuple):
    """One world's problem in ``n`` scalar rows on ``nv`` velocities (module docstring).

    J (n, nv)            the rows' Jacobian
    v_free (nv,)         the velocity the step reaches without constraint impulses
    v_star (n,)          the rows' target velocities
    D (n,)               their stiffness ``1/R`` (positive)
    lo, hi (n,)          impulse bounds (``hi`` may be infinite)
    metric               `TreeMetric` or `DenseMetric`
    """

    J: jnp.ndarray
    v_free: jnp.ndarray
    v_star: jnp.ndarray
    D: jnp.ndarray
    lo: jnp.ndarray
    hi: jnp.ndarray
    metric: TreeMetric | DenseMetric


class Zones(NamedTuple):
    """Where each row's impulse is (n,): ``inside`` its bounds (``p = -D w``, the Hessian's weight ``D``), else at
    its upper bound where ``above``, at its lower one where not."""

    inside: jnp.ndarray
    above: jnp.ndarray


def zones(prob: Problem, p) -> Zones:
    """The `Zones` of the impulses ``p`` (n,)."""
    return Zones((p > prob.lo) & (p < prob.hi), p >= prob.hi)


def in_zones(prob: Problem, w, z: Zones):
    """``(p, h)`` (n,): the impulses at the row velocities ``w = J v - v_star`` and the Hessian's weights, with each
    row in its zone of ``z``: the piecewise-quadratic ``f`` as the one quadratic of those zones."""
    p = jnp.where(z.inside, -prob.D * w, jnp.where(z.above, prob.hi, prob.lo))
    return p, jnp.where(z.inside, prob.D, 0.0)


def impulses(prob: Problem, w):
    """``(p, h)`` (n,) at the row velocities ``w = J v - v_star``: the impulses ``clip(-D w, lo, hi)`` and the
    Hessian's weights, ``D`` where the impulse is strictly inside its bounds, else zero."""
    return in_zones(prob, w, zones(prob, -prob.D * w))


class _Bracket(NamedTuple):
    k: jnp.ndarray
    alpha: jnp.ndarray
    lo: jnp.ndarray  # phi'(lo) <= 0
    hi: jnp.ndarray  # phi'(hi) > 0, or infinite
    done: jnp.ndarray


LINE_SEARCH_STEPS = 30
"""The most slope evaluations of one `line_search`."""


def line_search(prob: Problem, w, dw, slope0, curvature):
    """The ``alpha >= 0`` that minimizes ``f(v + alpha dv)``. Its slope ``phi'(alpha) = slope0 + alpha curvature -
    dw* p(w + alpha dw)`` (``slope0 = dv* M (v - v_free)``, ``curvature = dv* M dv``, ``dw = J dv``) is piecewise
    linear and increasing, with a breakpoint where a row's impulse reaches a bound, and negative at zero (``dv`` is
    a descent direction). Newton's method on it, from ``alpha = 1`` (the minimum of the Taylor model that gave
    ``dv``), lands on the root once it stands on the root's piece, and the next evaluation confirms it (a change
    under round-off): exact in a few evaluations of O(n). A step that leaves the bracket ``[lo, hi]`` of the
    slope's signs is replaced by the bracket's middle (by doubling while no ``hi`` is known). Should
    `LINE_SEARCH_STEPS` not reach the root, the result is ``lo``, where ``f`` has fallen."""
    dtype = w.dtype
    tol = 8 * jnp.finfo(dtype).eps

    def step(b: _Bracket) -> _Bracket:
        p, h = impulses(prob, w + b.alpha * dw)
        slope = slope0 + b.alpha * curvature - dw @ p
        rate = curvature + jnp.sum(h * dw * dw)  # phi'' on the piece of alpha
        lo, hi = jnp.where(slope <= 0, b.alpha, b.lo), jnp.where(slope > 0, b.alpha, b.hi)
        newton = b.alpha - slope / jnp.maximum(rate, jnp.finfo(dtype).tiny)
        middle = jnp.where(jnp.isfinite(hi), 0.5 * (lo + hi), 2.0 * jnp.maximum(b.alpha, 1.0))
        alpha = jnp.where(slope == 0, b.alpha, jnp.where((newton > lo) & (newton < hi), newton, middle))
        return _Bracket(b.k + 1, alpha, lo, hi, jnp.abs(alpha - b.alpha) <= tol * jnp.abs(alpha))

    one = jnp.ones((), dtype)
    b = jax.lax.while_loop(lambda b: ~b.done & (b.k < LINE_SEARCH_STEPS), step,
                           _Bracket(jnp.zeros((), jnp.int32), one, 0.0 * one, jnp.inf * one, jnp.asarray(False)))
    return jnp.where(b.done, b.alpha, b.lo)


class _Iterate(NamedTuple):
    k: jnp.ndarray
    v: jnp.ndarray
    M_delta: jnp.ndarray  # M (v - v_free)
    going: jnp.ndarray


def _newton_step(prob: Problem, it: _Iterate, tol, z: Zones | None = None) -> _Iterate:
    """One Newton step from ``it``, the Hessian and gradient those of ``f``'s quadratic in the zones ``z``: with
    ``z`` None, those of ``it``'s velocity (the Taylor model) and an exact line search on ``f``; with ``z`` given,
    the whole step to the minimum of that quadratic (the first step, in the warm start's zones: where they are the
    solution's it lands on it, and from a velocity near it otherwise the steps with line search go on)."""
    J = prob.J
    w = J @ it.v - prob.v_star
    taylor = z is None
    if taylor:
        z = zones(prob, -prob.D * w)
    p, h = in_zones(prob, w, z)
    g = it.M_delta - J.T @ p
    dv = -prob.metric.hessian_solve(h, J, g)
    dw = J @ dv
    M_dv = -g - J.T @ (h * dw)
    alpha = line_search(prob, w, dw, dv @ it.M_delta, dv @ M_dv) if taylor else 1.0
    v = it.v + alpha * dv
    reached = zones(prob, -prob.D * (w + alpha * dw))
    same_zones = jnp.all((reached.inside == z.inside) & (reached.above == z.above))
    small = jnp.max(jnp.abs(alpha * dv), initial=0.0) <= tol * jnp.max(jnp.abs(v), initial=0.0)
    return _Iterate(it.k + 1, v, it.M_delta + alpha * M_dv, ~(same_zones | small))


class Solution(NamedTuple):
    """The minimum of ``f``: the impulses ``p`` (n,) and the velocity ``v`` (nv,) after the step, ``v_free + M^-1 J*
    p``."""

    p: jnp.ndarray
    v: jnp.ndarray


def solve(prob: Problem, p0, iterations: int, tolerance: float = 0.0):
    """The impulses ``p`` (n,) of `solution`."""
    return solution(prob, p0, iterations, tolerance).p


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def solution(prob: Problem, p0, iterations: int, tolerance: float = 0.0) -> Solution:
    """The `Solution` at the minimum of ``f`` (module docstring) after at most ``iterations`` Newton steps from
    ``v_free``, the first in the zones of the warm start ``p0`` (n,) (those of ``v_free``'s velocity where ``p0`` is
    all zeros), fewer once a step keeps every row in its zone or moves no velocity by more than
    `jaxmb.sim.solver.stopping_tolerance` times the largest. Its derivative is the implicit function theorem's at
    the returned point; none flows through ``p0``."""
    return _solve(prob, p0, iterations, tolerance)


@full_precision
def _solve(prob, p0, iterations, tolerance):
    tol = stopping_tolerance(tolerance, prob.v_free.dtype)
    v = prob.v_free
    first = jax.tree.map(lambda a, b: jnp.where(jnp.any(p0 != 0), a, b), zones(prob, p0),
                         zones(prob, -prob.D * (prob.J @ v - prob.v_star)))
    it = _newton_step(prob, _Iterate(jnp.zeros((), jnp.int32), v, jnp.zeros_like(v), jnp.asarray(True)), tol, first)
    it = jax.lax.while_loop(lambda it: it.going & (it.k < iterations), lambda it: _newton_step(prob, it, tol), it)
    return Solution(impulses(prob, prob.J @ it.v - prob.v_star)[0], it.v)


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
    fixed solution (module docstring), and ``dv`` that of `velocity` in the problem and in ``p``. Linear in the
    tangents, so reverse mode transposes it."""
    prob, p0 = primals
    d_prob, _ = tangents
    sol = solution(prob, p0, iterations, tolerance)
    (_, v), (r, dv) = jax.jvp(lambda theta: (fixed_point(theta, sol.p), velocity(theta, sol.p)), (prob,), (d_prob,))
    _, h = impulses(prob, prob.J @ v - prob.v_star)
    dp = r - h * (prob.J @ prob.metric.hessian_inverse(h, prob.J)(prob.J.T @ r))
    return sol, Solution(dp, dv + prob.metric.inverse(prob.J.T @ dp))
