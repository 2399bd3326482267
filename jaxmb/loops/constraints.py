"""Holonomic constraints on a spanning tree's coordinates: ``phi(q) = 0`` (book 15.24-15.27;
Chignoli et al. 2023, (2)-(4)).

A constraint is written by the user against names (`coupling`, `linear_coupling`, `loop_closure`, `implicit`,
`explicit`) and *bound* to a tree model by `close_loops` (`jaxmb.loops.model`): binding resolves the names into
coordinate indices and body paths (static) and the numbers into parameters (JAX leaves, so ``grad`` reaches gear
ratios and loop placements). A bound constraint reads only the coordinates it lists, all of them 1-dof joints
(revolute, continuous, prismatic, helical), for which a position and a velocity coordinate coincide.

Every constraint is an implicit residual, and gives its block of ``K = dphi/dq`` and of ``k = -Kdot qd`` over
its own coordinates (`Bound.jacobian`, `Bound.bias`). A coupling's are constants; a loop closure gives them in
closed form, from the spatial axes of the joints on its two paths (the relative spatial Jacobian of the cut joint
and its bias acceleration); a user's implicit or explicit map by ``jax.jacfwd`` and a nested ``jax.jvp`` of its
residual.
"""

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.errors import ModelError
from jaxmb.joints import KINDS
from jaxmb.batching import full_precision, put_rows, sum_rows, take_rows
from jaxmb.spatial import Transform, compose, cross3, cross_motion, mm, mv, skew, swap

CLOSURES = {"revolute": 5, "planar": 2, "ball": 3, "weld": 6}


@dataclass(frozen=True)
class Bound:
    """A constraint bound to a tree: ``residual(model, params, q) -> (size,)`` reads ``q[q_index]`` only.

    ``prefer_dependent``: coordinates (indices into ``q_index``) that the automatic choice of independent
    coordinates makes dependent first (the follower of a coupling, the outputs of an explicit map).
    ``bodies``: the bodies whose motion the constraint involves (the endpoints' paths for a loop closure).
    ``rates``: ``(jacobian(model, params, q), bias(model, params, q, qd))`` in closed form, as `jacobian` and
    `bias` are defined; None: by autodiff of ``residual``.
    """

    name: str
    kind: str
    q_index: tuple
    bodies: tuple
    size: int
    residual: Callable
    params: tuple
    prefer_dependent: tuple = ()
    cut: "CutJoint | None" = None
    rates: tuple | None = None

    @property
    def coordinates(self) -> tuple:
        """The coordinates ``phi`` reads, each once, ascending: the columns of `jacobian`."""
        return tuple(sorted(set(self.q_index)))

    def columns(self, coordinates) -> list:
        """Positions of `coordinates` in ``coordinates``, a static tuple of indices into ``q`` that holds them."""
        return [coordinates.index(i) for i in self.coordinates]

    def _on_coordinates(self, model, params, q):
        """``x -> phi(q with its coordinates set to x)``, and ``q``'s coordinates."""
        q = jnp.asarray(q)
        x = take_rows(q, self.coordinates)
        return (lambda x: self.residual(model, params, put_rows(q, self.coordinates, x))), x

    @full_precision
    def jacobian(self, model, params, q):
        """``dphi/dq[coordinates]`` (size, len(coordinates)) at ``q`` (nq,)."""
        if self.rates is not None:
            return self.rates[0](model, params, q)
        f, x = self._on_coordinates(model, params, q)
        return jax.jacfwd(f)(x)

    @full_precision
    def bias(self, model, params, q, qd):
        """``k = -Kdot qd`` (size,) at ``q`` (nq,) for the rates ``qd`` (len(coordinates),) of `coordinates`."""
        if self.rates is not None:
            return self.rates[1](model, params, q, qd)
        f, x = self._on_coordinates(model, params, q)
        velocity = lambda x: jax.jvp(f, (x,), (qd,))[1]  # K(x) qd
        return -jax.jvp(velocity, (x,), (qd,))[1]


@dataclass(frozen=True)
class CutJoint:
    """The two frames of a loop closure: frame indices (None: the world) and bodies (-1: the world), and
    ``rows(d, R_ab)``, the residual as a function of frame b's origin ``d`` and orientation ``R_ab`` in frame a.
    The placements are the constraint's parameters."""

    frame_a: int | None
    body_a: int
    frame_b: int | None
    body_b: int
    rows: Callable


@full_precision
def stacked_jacobian(model, bound, params, q, coordinates):
    """``K`` of the ``bound`` constraints (each with its ``params``) over ``coordinates`` (a static tuple of indices
    into ``q`` holding every constraint's), (nc, len(coordinates)): each block (`Bound.jacobian`) in its columns."""
    n = len(coordinates)
    if not bound:
        return jnp.zeros((0, n), q.dtype)
    return jnp.concatenate([swap(sum_rows(swap(c.jacobian(model, p, q)), c.columns(coordinates), n))
                            for c, p in zip(bound, params)])


def _joint_coordinate(model, joint, what):
    """The coordinate index of a 1-dof joint named ``joint`` and its body."""
    if joint not in model.joint_names:
        raise ModelError(f"{what}: model {model.name!r} has no movable joint {joint!r}")
    body = model.joint_names.index(joint)
    kind = model.topology.kinds[body]
    if KINDS[kind].nq != 1:
        raise ModelError(f"{what}: joint {joint!r} is a {model.joint_types[body]} joint; constraints act on 1-dof "
                         "joints (revolute, continuous, prismatic, helical)")
    return int(model.topology.q_offset[body]), body


@dataclass(frozen=True)
class Coupling:
    """``q[joint] = ratio * q[reference] + offset``: a gear, a geared rotor (``joint`` the rotor, ``ratio`` N), a
    URDF ``mimic``."""

    joint: str
    reference: str
    ratio: float
    offset: float = 0.0

    def bind(self, model):
        what = f"coupling {self.joint!r} = {self.ratio} * {self.reference!r}"
        (qj, bj), (qr, br) = (_joint_coordinate(model, n, what) for n in (self.joint, self.reference))
        if qj == qr:
            raise ModelError(f"{what}: a joint cannot be coupled to itself")

        def residual(model, params, q):
            ratio, offset = params
            return jnp.stack([q[qj] - ratio * q[qr] - offset])

        def jacobian(model, params, q):
            entry = {qj: jnp.ones_like(params[0]), qr: -params[0]}
            return jnp.stack([entry[i] for i in sorted(entry)])[None]

        def bias(model, params, q, qd):
            return jnp.zeros(1, qd.dtype)

        return Bound(what, "coupling", (qj, qr), (bj, br), 1, residual,
                     (jnp.asarray(float(self.ratio)), jnp.asarray(float(self.offset))), prefer_dependent=(0,),
                     rates=(jacobian, bias))


def coupling(joint, reference, ratio, offset=0.0) -> Coupling:
    return Coupling(joint, reference, ratio, offset)


@dataclass(frozen=True)
class LinearCoupling:
    """``A @ q[joints] = offset`` with a constant ``A`` (m, n): belts and multi-stage transmissions."""

    joints: tuple
    A: tuple
    offset: tuple

    def bind(self, model):
        what = f"linear coupling of {list(self.joints)}"
        idx = [_joint_coordinate(model, n, what) for n in self.joints]
        A = np.asarray(self.A, float)
        if A.ndim != 2 or A.shape[1] != len(self.joints) or np.linalg.matrix_rank(A) < A.shape[0]:
            raise ModelError(f"{what}: the matrix must be (m, {len(self.joints)}) with independent rows, got {A}")
        cols = tuple(i for i, _ in idx)

        def residual(model, params, q):
            A, offset = params
            return A @ q[jnp.asarray(cols)] - offset

        E = np.equal.outer(cols, sorted(set(cols))).astype(float)  # A's columns to the sorted coordinates

        def jacobian(model, params, q):
            return params[0] @ jnp.asarray(E, params[0].dtype)

        def bias(model, params, q, qd):
            return jnp.zeros(len(params[1]), qd.dtype)

        return Bound(what, "linear", cols, tuple(b for _, b in idx), A.shape[0], residual,
                     (jnp.asarray(A), jnp.asarray(np.broadcast_to(np.asarray(self.offset, float), A.shape[0]))),
                     rates=(jacobian, bias))


def linear_coupling(joints, A, offset=0.0) -> LinearCoupling:
    A = np.atleast_2d(np.asarray(A, float))
    return LinearCoupling(tuple(joints), tuple(map(tuple, A)), tuple(np.broadcast_to(offset, A.shape[0]).tolist()))


def tree_path(topology, ancestor, body):
    """Bodies from just below ``ancestor`` (-1: the world) down to ``body``, root first: the joints whose motion
    moves ``body`` relative to ``ancestor``. ValueError if ``ancestor`` is not an ancestor of ``body``."""
    path = []
    while body != ancestor:
        if body < 0:
            raise ValueError("not an ancestor")
        path.append(body)
        body = int(topology.parent[body])
    return path[::-1]


def common_ancestor(topology, bodies):
    """The deepest body that is an ancestor-or-self of all ``bodies`` (-1: the world)."""
    chains = [set(topology.ancestors(b)) | {b} for b in bodies]
    common = set.intersection(*chains)
    return max(common, key=lambda b: topology.depth[b]) if common else -1


def path_motion(model, q, path):
    """Pose of the last body of ``path`` in the frame of the first one's parent, and the spatial axis (6,) of
    each joint on ``path`` (angular part first, about that frame's origin): the joint placements and joint motions
    composed along a static path (`tree_path`), each joint's ``H*`` turned into the path's base frame."""
    T, axes = None, []
    for i in path:
        kind = KINDS[model.topology.kinds[i]]
        q_i = q[model.topology.q_offset[i] : model.topology.q_offset[i] + kind.nq]
        X = compose(Transform(model.X_tree.R[i], model.X_tree.p[i]), kind.transform(q_i, model.axis[i], model.coef[i]))
        T = X if T is None else compose(T, X)
        h = kind.hinge_map(model.axis[i], model.coef[i])[0]
        w = mv(T.R, h[:3])
        axes.append(jnp.concatenate([w, mv(T.R, h[3:]) + cross3(T.p, w)]))  # moved to the base frame's origin
    return T, axes


def _velocity_and_bias(axes, rates, dtype):
    """Spatial velocity ``V = sum_j S_j qd_j`` of the last body of a path and its acceleration at ``qdd = 0``,
    ``sum_j V_(j-1) x S_j qd_j`` (the path's base at rest; ``V_(j-1)`` the velocity of joint j's parent)."""
    V = A = jnp.zeros(6, dtype)
    for S, rate in zip(axes, rates):
        m = S * rate
        A, V = A + cross_motion(V, m), V + m
    return V, A


def orthonormal_pair(e):
    """Two rows ``(u1, u2)`` (2, 3) that complete the unit vector ``e/|e|`` to a right-handed orthonormal basis
    ``(u1, u2, e)``: ``u1 = (e x t)/|e x t|`` with ``t`` the unit coordinate axis along which ``e`` has its smallest
    component in magnitude (the first such), and ``u2 = e x u1``. The row basis of the ``planar`` loop closure's two
    rows and of the ``revolute`` closure's two angular rows (`LoopClosure`): for ``e = y``, ``u1 = -z`` and
    ``u2 = -x``; for ``e = z``, ``u1 = y`` and ``u2 = -x``."""
    e = e / np.linalg.norm(e)
    t = np.eye(3)[np.argmin(np.abs(e))]
    u = np.cross(e, t)
    u /= np.linalg.norm(u)
    return np.stack([u, np.cross(e, u)])


@dataclass(frozen=True)
class LoopClosure:
    """A cut joint between frame ``placement_a`` on body ``a`` and frame ``placement_b`` on body ``b`` (the two
    frames coincide when the loop is closed).

    ``kind``: ``revolute`` (5 rows: the frames' origins meet, their ``axis`` stay aligned), ``planar`` (2 rows:
    the origins meet in the plane normal to ``axis``; the right choice for a planar loop, whose other rows vanish
    identically and would make ``K`` rank-deficient), ``ball`` (3 rows) or ``weld`` (6 rows). Position rows are
    in frame a's axes, so their multipliers are the force that a exerts on b there.
    """

    a: str
    b: str
    placement_a: tuple
    placement_b: tuple
    kind: str = "revolute"
    axis: tuple = (0.0, 0.0, 1.0)

    def bind(self, model):
        what = f"loop closure {self.a!r}-{self.b!r}"
        if self.kind not in CLOSURES:
            raise ModelError(f"{what}: kind must be one of {sorted(CLOSURES)}, got {self.kind!r}")
        ends = []  # (frame index or None for the world, body or -1)
        for name in (self.a, self.b):
            if name is None:
                ends.append((None, -1))
            elif name in model.frame_names:
                f = model.frame_index(name)
                ends.append((f, model.frame_body[f]))
            else:
                raise ModelError(f"{what}: model {model.name!r} has no body or frame {name!r}")
        (fa, ba), (fb, bb) = ends
        if ba == bb:
            raise ModelError(f"{what}: both ends are on the same body; nothing to close")
        topo = model.topology
        c = common_ancestor(topo, [ba, bb]) if min(ba, bb) >= 0 else -1
        paths = [tree_path(topo, c, b) if b >= 0 else [] for b in (ba, bb)]
        bodies = tuple(sorted(set(paths[0]) | set(paths[1])))
        for i in bodies:
            if KINDS[topo.kinds[i]].nq != 1:
                raise ModelError(f"{what}: the loop passes through joint {model.joint_names[i]!r}, a "
                                 f"{model.joint_types[i]} joint; loops are made of 1-dof joints")
        axis = np.asarray(self.axis, float)
        rows = {"revolute": None, "planar": orthonormal_pair(axis), "ball": np.eye(3), "weld": np.eye(3)}[self.kind]
        perp = orthonormal_pair(axis)

        def frames(model, params, q):
            """Frames a and b in the common ancestor's frame (the world's for a world end) and the spatial axes of
            the joints on their paths."""
            out = []
            for f, path, P in zip((fa, fb), paths, params):
                if f is None:
                    out.append((Transform(*P), []))
                    continue
                T, axes = path_motion(model, q, path)
                F = Transform(model.frame_placement.R[f], model.frame_placement.p[f])  # frame in its body
                out.append((compose(F if T is None else compose(T, F), Transform(*P)), axes))
            return out

        kind = self.kind

        def relative_rows(d, R_ab):
            """The rows, linear in ``d`` and ``R_ab``; so their rates are the rows of the rates."""
            if kind == "revolute":
                e = jnp.asarray(axis, d.dtype)
                return jnp.concatenate([d, jnp.asarray(perp, d.dtype) @ (R_ab @ e)])
            if kind == "weld":
                W = R_ab - R_ab.T
                return jnp.concatenate([d, 0.5 * jnp.stack([W[2, 1], W[0, 2], W[1, 0]])])
            return jnp.asarray(rows, d.dtype) @ d

        def residual(model, params, q):
            (Ta, _), (Tb, _) = frames(model, params, q)
            return relative_rows(mv(Ta.R.T, Tb.p - Ta.p), Ta.R.T @ Tb.R)  # b's origin and axes in frame a

        def jacobian(model, params, q):
            """Column j: the rows' rate for a unit rate of the j-th joint of ``bodies``, whose spatial axis ``S``
            moves b relative to a (``+S`` on b's path, ``-S`` on a's): ``d' = R_a* (v + w x p_b)`` and
            ``R_ab' = (R_a* w)~ R_ab``."""
            (Ta, axes_a), (Tb, axes_b) = frames(model, params, q)
            Rt, R_ab = swap(Ta.R), mm(swap(Ta.R), Tb.R)

            def rate(S):
                return relative_rows(mv(Rt, S[3:] + cross3(S[:3], Tb.p)), mm(skew(mv(Rt, S[:3])), R_ab))

            column = dict(zip(paths[0], (rate(-S) for S in axes_a))) | dict(zip(paths[1], (rate(S) for S in axes_b)))
            return jnp.stack([column[i] for i in bodies], -1)

        def bias(model, params, q, qd):
            """``-phi''`` at ``qdd = 0``, from the relative velocity ``V = V_b - V_a = (w, v)`` and bias
            acceleration ``A = A_b - A_a`` (common ancestor's frame, about its origin). With ``u = v + w x p_b``
            (so ``d' = R_a* u``), ``w_a`` frame a's angular velocity and ``W = R_a* w`` (so ``R_ab' = W~ R_ab``):
            ``d'' = R_a* (u' - w_a x u)``, ``W' = R_a* (A_w - w_a x w)`` and ``R_ab'' = (W'~ + W~ W~) R_ab``."""
            (Ta, axes_a), (Tb, axes_b) = frames(model, params, q)
            rate = {i: qd[k] for k, i in enumerate(bodies)}
            Va, Aa = _velocity_and_bias(axes_a, [rate[i] for i in paths[0]], qd.dtype)
            Vb, Ab = _velocity_and_bias(axes_b, [rate[i] for i in paths[1]], qd.dtype)
            V, A = Vb - Va, Ab - Aa
            Rt, R_ab, p_b = swap(Ta.R), mm(swap(Ta.R), Tb.R), Tb.p
            u = V[3:] + cross3(V[:3], p_b)
            u_dot = A[3:] + cross3(A[:3], p_b) + cross3(V[:3], Vb[3:] + cross3(Vb[:3], p_b))
            d_ddot = mv(Rt, u_dot - cross3(Va[:3], u))
            w, w_dot = mv(Rt, V[:3]), mv(Rt, A[:3] - cross3(Va[:3], V[:3]))
            return -relative_rows(d_ddot, mm(skew(w_dot) + mm(skew(w), skew(w)), R_ab))

        params = tuple((jnp.asarray(np.asarray(P[0], float)), jnp.asarray(np.asarray(P[1], float)))
                       for P in (self.placement_a, self.placement_b))
        q_index = tuple(int(topo.q_offset[i]) for i in bodies)
        return Bound(what, "closure", q_index, bodies, CLOSURES[self.kind], residual, params,
                     cut=CutJoint(fa, ba, fb, bb, relative_rows), rates=(jacobian, bias))


def _placement(placement):
    if placement is None:
        return (tuple(map(tuple, np.eye(3))), (0.0, 0.0, 0.0))
    R, p = placement
    return (tuple(map(tuple, np.asarray(R, float).reshape(3, 3))), tuple(np.asarray(p, float).reshape(3)))


def loop_closure(a, b, placement_a=None, placement_b=None, kind="revolute", axis=(0.0, 0.0, 1.0)) -> LoopClosure:
    """Close a loop between bodies (or frames) ``a`` and ``b`` (None: the world); placements ``(R, p)`` in their
    frames."""
    return LoopClosure(a, b, _placement(placement_a), _placement(placement_b), kind, tuple(np.asarray(axis, float)))


@dataclass(frozen=True)
class Implicit:
    """``fn(q[joints], *params) = 0`` for a user function ``fn`` -> (m,) (a differential's constraint)."""

    joints: tuple
    fn: Callable
    params: tuple = ()
    name: str = "implicit"

    def bind(self, model):
        what = f"{self.name} constraint on {list(self.joints)}"
        idx = [_joint_coordinate(model, n, what) for n in self.joints]
        cols = tuple(i for i, _ in idx)
        params = tuple(jnp.asarray(p) for p in self.params)
        shape = jax.eval_shape(self.fn, jnp.zeros(len(cols)), *params).shape
        if len(shape) != 1 or shape[0] < 1:
            raise ModelError(f"{what}: the function must return a vector (m,), got shape {shape}")
        fn = self.fn

        def residual(model, params, q):
            return fn(q[jnp.asarray(cols)], *params)

        return Bound(what, "implicit", cols, tuple(b for _, b in idx), shape[0], residual, params)


def implicit(joints, fn, params=(), name="implicit") -> Implicit:
    return Implicit(tuple(joints), fn, tuple(params), name)


@dataclass(frozen=True)
class Explicit:
    """``q[dependent] = gamma(q[independent], *params)``: a closed-form loop map (Chignoli et al. 2023, (3))."""

    dependent: tuple
    independent: tuple
    gamma: Callable
    params: tuple = ()

    def bind(self, model):
        what = f"explicit map {list(self.independent)} -> {list(self.dependent)}"
        dep = [_joint_coordinate(model, n, what)[0] for n in self.dependent]
        ind = [_joint_coordinate(model, n, what)[0] for n in self.independent]
        bodies = tuple(_joint_coordinate(model, n, what)[1] for n in self.dependent + self.independent)
        params = tuple(jnp.asarray(p) for p in self.params)
        shape = jax.eval_shape(self.gamma, jnp.zeros(len(ind)), *params).shape
        if shape != (len(dep),):
            raise ModelError(f"{what}: gamma must return ({len(dep)},), got {shape}")
        gamma = self.gamma

        def residual(model, params, q):
            return q[jnp.asarray(dep)] - gamma(q[jnp.asarray(ind)], *params)

        return Bound(what, "explicit", tuple(dep + ind), bodies, len(dep), residual, params,
                     prefer_dependent=tuple(range(len(dep))))


def explicit(dependent, independent, gamma, params=()) -> Explicit:
    return Explicit(tuple(dependent), tuple(independent), gamma, tuple(params))
