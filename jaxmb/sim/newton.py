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
``h_i = 0``, and the step ``dv`` solves ``(M + J* diag(h) J) dv = -grad f = -(M (v - v_free) - J* p)``. The
Hessian is the mass matrix of the same tree with each active contact row's ``h d d*`` added to the spatial inertia
of the body it acts on (``d`` the row in that body's coordinates, ``J_i = d* J_body``) and each active joint row's
``h`` to its coordinate's armature, so the articulated-body sweep factors it in O(N) (book Alg 7.2 with the added
inertias, then (7.18)): no mass matrix, no ``J M^-1 J*``. A contact between two moving bodies couples them in the
Hessian; a scene with one is solved with the dense matrix ``M + J* diag(h) J`` instead (`DenseMetric`). The step
length is exact: ``f`` along ``dv`` is piecewise quadratic, its slope piecewise linear and increasing, and its
root lies between the two breakpoints where the slope changes sign. ``f`` is piecewise quadratic, so once a step
keeps every row in its zone it lands on the minimum, and the iteration stops there. The first step takes its
zones from the warm start's impulses (the last step's) rather than from the velocity they give: a stiff row's
impulse moves far for a small change of velocity, so the velocity loses the zones that the impulses keep, and
with the last step's zones the first step lands on the solution wherever no row changed zone.

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

from jaxmb.batching import full_precision, vmap_in_cpu_chunks
from jaxmb.dynamics.ab_steps import ToParent, acceleration_step, articulated_step, inertia_step
from jaxmb.dynamics.articulated import solve_factored
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
        one_hot = jnp.asarray(np.eye(self.nb)[list(self.body)].T if m else np.zeros((self.nb, 0)), h.dtype)
        added = jnp.einsum("bm,m,mi,mj->bij", one_hot, h[:m], self.d, self.d)
        armature = self.armature + h[m:] @ jnp.asarray(np.eye(self.armature.shape[0])[list(self.coordinate)], h.dtype)
        return self.I + added, armature

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


def penalty(prob: Problem, w):
    """``sum_i s_i(w_i)``: the rows' part of ``f``, ``s(w) = -p w - p^2 / (2 D)`` with ``p = p(w)``."""
    p, _ = impulses(prob, w)
    return jnp.sum(-p * w - 0.5 * p * p / prob.D)


def line_search(prob: Problem, w, dw, slope0, curvature):
    """The ``alpha >= 0`` that minimizes ``f(v + alpha dv)``, exactly: its slope ``phi'(alpha) = slope0 + alpha
    curvature - dw* p(w + alpha dw)`` (``slope0 = dv* M (v - v_free)``, ``curvature = dv* M dv``, ``dw = J dv``) is
    piecewise linear and increasing, with a breakpoint where a row's impulse reaches a bound. The root lies after
    the last breakpoint with ``phi' <= 0`` (or 0) and before the first with ``phi' > 0``, where ``phi'`` is linear."""
    dtype = w.dtype
    safe_dw = jnp.where(dw != 0, dw, 1.0)
    bounds = jnp.stack([prob.lo, prob.hi])  # (2, n)
    crossing = (-bounds / prob.D - w) / safe_dw
    valid = jnp.isfinite(crossing) & (crossing > 0) & (dw != 0)
    alphas = jnp.concatenate([jnp.zeros(1, dtype), jnp.where(valid, crossing, 0.0).reshape(-1)])
    usable = jnp.concatenate([jnp.ones(1, bool), valid.reshape(-1)])

    def slope(alpha):
        return slope0 + alpha * curvature - dw @ impulses(prob, w + alpha * dw)[0]

    at = jax.vmap(slope)(alphas)
    left = jnp.max(jnp.where(usable & (at <= 0), alphas, 0.0))
    right = jnp.min(jnp.where(usable & (at > 0), alphas, jnp.inf))
    middle = jnp.where(jnp.isfinite(right), 0.5 * (left + right), left + 1.0)
    _, h = impulses(prob, w + middle * dw)
    rate = curvature + jnp.sum(h * dw * dw)
    return left - slope(left) / jnp.maximum(rate, jnp.finfo(dtype).tiny)


class _Iterate(NamedTuple):
    k: jnp.ndarray
    v: jnp.ndarray
    M_delta: jnp.ndarray  # M (v - v_free)
    going: jnp.ndarray


def _start(prob: Problem, p0):
    """The warm start ``v_free + M^-1 J* p0`` where it has the lower ``f``, else ``v_free``: ``(v, M (v - v_free),
    warm)``."""
    M_delta = prob.J.T @ p0
    delta = prob.metric.inverse(M_delta)
    cold = penalty(prob, prob.J @ prob.v_free - prob.v_star)
    warm = 0.5 * delta @ M_delta + penalty(prob, prob.J @ (prob.v_free + delta) - prob.v_star)
    better = warm < cold
    return prob.v_free + jnp.where(better, delta, 0.0), jnp.where(better, M_delta, 0.0), better


def _newton_step(prob: Problem, it: _Iterate, tol, z: Zones | None = None) -> _Iterate:
    """One Newton step with exact line search on ``f`` from ``it``, the Hessian and gradient those of ``f``'s
    quadratic in the zones ``z`` (None: those of ``it``'s velocity, the Taylor model). Any zones give a descent
    direction, and where they are the solution's the step lands on it: the warm start's impulses carry their
    zones, which a velocity a little off the last step's would lose (stiff rows move their impulses far for a small
    change of velocity)."""
    J = prob.J
    w = J @ it.v - prob.v_star
    if z is None:
        z = zones(prob, -prob.D * w)
    p, h = in_zones(prob, w, z)
    g = it.M_delta - J.T @ p
    dv = -prob.metric.hessian_solve(h, J, g)
    dw = J @ dv
    M_dv = -g - J.T @ (h * dw)
    alpha = line_search(prob, w, dw, dv @ it.M_delta, dv @ M_dv)
    v = it.v + alpha * dv
    reached = zones(prob, -prob.D * (w + alpha * dw))
    same_zones = jnp.all((reached.inside == z.inside) & (reached.above == z.above))
    small = jnp.max(jnp.abs(alpha * dv), initial=0.0) <= tol * jnp.max(jnp.abs(v), initial=0.0)
    return _Iterate(it.k + 1, v, it.M_delta + alpha * M_dv, ~(same_zones | small))


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def solve(prob: Problem, p0, iterations: int, tolerance: float = 0.0):
    """The impulses ``p`` (n,) at the minimum of ``f`` (module docstring) after at most ``iterations`` Newton steps
    from the warm start ``p0`` (n,), fewer once a step keeps every row in its zone or moves no velocity by more than
    `jaxmb.sim.solver.stopping_tolerance` times the largest. Its derivative is the implicit function theorem's at
    the returned point; none flows through ``p0``."""
    return _solve(prob, p0, iterations, tolerance)


@full_precision
def _solve(prob, p0, iterations, tolerance):
    tol = stopping_tolerance(tolerance, prob.v_free.dtype)
    v, M_delta, warm = _start(prob, p0)
    first = jax.tree.map(lambda a, b: jnp.where(warm, a, b), zones(prob, p0),
                         zones(prob, -prob.D * (prob.J @ v - prob.v_star)))
    it = _newton_step(prob, _Iterate(jnp.zeros((), jnp.int32), v, M_delta, jnp.asarray(True)), tol, first)
    it = jax.lax.while_loop(lambda it: it.going & (it.k < iterations), lambda it: _newton_step(prob, it, tol), it)
    return impulses(prob, prob.J @ it.v - prob.v_star)[0]


def fixed_point(prob: Problem, p):
    """``P(p) = p(J (v_free + M^-1 J* p) - v_star)`` (n,): the impulses that the velocity of the impulses ``p``
    asks for; the solution is its fixed point."""
    v = prob.v_free + prob.metric.inverse(prob.J.T @ p)
    return impulses(prob, prob.J @ v - prob.v_star)[0]


@solve.defjvp
@full_precision
def _solve_jvp(iterations, tolerance, primals, tangents):
    """``dp = (I - H J (M + J* H J)^-1 J*) r`` with ``r`` the derivative of `fixed_point` in the problem at the
    fixed solution (module docstring). Linear in ``r``, so reverse mode transposes it."""
    prob, p0 = primals
    d_prob, _ = tangents
    p = solve(prob, p0, iterations, tolerance)
    _, r = jax.jvp(lambda theta: fixed_point(theta, p), (prob,), (d_prob,))
    v = prob.v_free + prob.metric.inverse(prob.J.T @ p)
    _, h = impulses(prob, prob.J @ v - prob.v_star)
    inverse = prob.metric.hessian_inverse(h, prob.J)
    return p, r - h * (prob.J @ inverse(prob.J.T @ r))

