"""Operational space (book ch. 10): the compliance ``Lambda_inv = J M^-1 J*`` of task frames and ``M^-1 J*``,
the inertia ``Lambda``, the kernel ``Upsilon(k)`` at every body, the bias ``C_os`` and an operational-space
controller. ``M`` and ``M^-1`` are never formed; ``M`` includes ``diag(armature)``, which enters through the ``D(k)``
and gains ``G(k)`` of `articulated_inertias`.

Tasks. A task is a set of frames (`Model.frame_names`: bodies and the links merged into them) and, per frame, the
rows of its spatial velocity that matter: ``d V_f`` with ``d`` (r, 6) rows of the identity (``reference="local"``,
frame axes) or of ``diag(R_f*, R_f*)`` (``"world_aligned"``, world axes at the frame origin). ``axes`` picks the
rows: all six, ``"linear"`` (a 3-D point), ``"angular"``, or a tuple of indices into ``[w; v]``. The task
velocity is ``J qd`` and the task acceleration ``alpha_nd = J qdd + Jdot qd = d alpha_f``, with ``alpha_f`` the
frame's spatial acceleration (body-frame derivative, as `jaxmb.bias_accelerations`): for a frame fixed on its
body ``Bdot* V = 0`` (10.3). The linear rows are not the classical acceleration of the frame origin, which adds
``w x v`` (frame coordinates; Pinocchio's ``getFrameClassicalAcceleration``).

Multi-right-hand-side sweeps (book ch. 10). With ``B`` the task columns placed at their bodies,
``B(k) = sum_i phi(k, O_i) d_i*``:

    up:    X(k) = sum_children psi(k, j) X(j) + B(k),  nu(k) = D^-1(k) H(k) X(k)          X = psi B
    down:  Z+(k) = phi*(parent k, k) Z(parent k),  mu(k) = nu(k) - G*(k) Z+(k),  Z(k) = Z+(k) + H*(k) mu(k)
    Lambda_inv = B* Z = B* psi* H* D^-1 H psi B = sum_k (H X)*(k) nu(k)                  (10.12)
    M^-1 J* = mu = [I - H psi K]* D^-1 H psi B                                           (7.18, 7.10)

``X(k)`` is nonzero only on the frames' ancestors, in the columns of the frames below ``k``: the up sweep is a walk
of each frame's columns up its own path (`jaxmb.dynamics.compliance`), which also gives the compliance as the last
sum, without the down sweep (`operational_space_compliance`, `operational_space_inertia`,
`operational_space_bias`). ``M^-1 J*`` (`task_space`, the controller) needs the down sweep over the whole tree,
O(N x columns). Its columns are stored as rows (c, 6) per body, so every spatial operator of `jaxmb.spatial`
applies to them unchanged.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import eager_jit, full_precision, in_cpu_chunks
from jaxmb.dynamics.ab_steps import solve_small
from jaxmb.dynamics.articulated import articulated_body, articulated_inertias
from jaxmb.dynamics.compliance import compliance, walk_task_columns
from jaxmb.hinges import hinge_map, joint_poses
from jaxmb.kinematics import forward_kinematics, frame_poses, jacobian_rows
from jaxmb.model import check_shapes
from jaxmb.spatial import Transform, mm, mv, phi_star, phi_star_congruence
from jaxmb.sweeps import down

REFERENCES = ("local", "world_aligned")
_AXES = {None: (0, 1, 2, 3, 4, 5), "all": (0, 1, 2, 3, 4, 5), "angular": (0, 1, 2), "linear": (3, 4, 5)}


class Task(NamedTuple):
    """The static description of a task, checked against a model (`task`).

    frames (m,) frame names; frame (m,) frame indices; body (m,) their bodies (-1: the world); axes (r,) the rows
    of ``[w; v]`` kept per frame; reference ``"local"`` or ``"world_aligned"``. Rows: ``c = m r``, frame by frame.
    """

    frames: tuple
    frame: tuple
    body: tuple
    axes: tuple
    reference: str

    @property
    def rows(self) -> int:
        return len(self.frames) * len(self.axes)


def task(model, frames, axes=None, reference="local") -> Task:
    """Check and describe a task: ``frames`` a frame name or a sequence of them, ``axes`` None (all six rows),
    ``"linear"``, ``"angular"`` or a tuple of row indices of ``[w; v]``, ``reference`` as `REFERENCES`."""
    if isinstance(frames, str):
        frames = (frames,)
    frames = tuple(frames)
    if not frames:
        raise ValueError("a task needs at least one frame")
    if len(set(frames)) != len(frames):
        raise ValueError(f"task frames must be distinct, got {frames}")
    index = tuple(model.frame_index(f) for f in frames)  # KeyError naming the missing frame
    if isinstance(axes, str) or axes is None:
        if axes not in _AXES:
            raise ValueError(f"axes must be None, 'linear', 'angular' or a tuple of indices in 0..5, got {axes!r}")
        axes = _AXES[axes]
    axes = tuple(int(a) for a in axes)
    if not axes or len(set(axes)) != len(axes) or not all(0 <= a < 6 for a in axes):
        raise ValueError(f"axes must be distinct indices in 0..5 of [w; v], got {axes}")
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")
    return Task(frames, index, tuple(model.frame_body[i] for i in index), axes, reference)


def _directions(model, q, t: Task):
    """Task rows ``d`` (m, r, 6) in frame coordinates, and the frame placements in their bodies (Transform, m)."""
    idx = np.asarray(t.frame)
    placement = Transform(model.frame_placement.R[idx], model.frame_placement.p[idx])
    eye = jnp.eye(6, dtype=model.mass.dtype)[np.asarray(t.axes)]
    if t.reference == "local":
        d = jnp.broadcast_to(eye, (len(idx),) + eye.shape)
    else:
        R = frame_poses(model, q).R[idx]  # (m, 3, 3) world rotations of the frames
        S = jnp.zeros((len(idx), 6, 6), R.dtype).at[:, :3, :3].set(R).at[:, 3:, 3:].set(R)  # diag(R, R)
        d = S[:, np.asarray(t.axes), :]  # rows of diag(R, R): d V_f = world-aligned components
    attached = jnp.asarray(np.asarray(t.body) >= 0, d.dtype)[:, None, None]
    return d * attached, placement  # frames fixed to the world have no task rows


def _column_down_step(Z_parent, X_k, G_k, nu_k, H_k):
    Z_plus = phi_star(X_k, Z_parent)  # Z+(k) = phi*(parent, k) Z(parent)                  (c, 6)
    mu = nu_k - mm(G_k, Z_plus.T)  # mu(k) = nu(k) - G*(k) Z+(k): rows of M^-1 J*            (n, c)
    return Z_plus + mm(mu.T, H_k), mu  # Z(k) = tau_bar*(k) Z+(k) + H*(k) nu(k) = Z+ + H* mu


class TaskSpace(NamedTuple):
    """What the walk up the frames' paths and the down sweep give for a task of c rows.

    J (c, nv)            the task Jacobian, ``J qd = d V_f``
    Lambda_inv (c, c)    the operational-space compliance ``J M^-1 J*`` (10.6)
    Minv_Jt (nv, c)      ``M^-1 J*``
    """

    J: jnp.ndarray
    Lambda_inv: jnp.ndarray
    Minv_Jt: jnp.ndarray


def _at_frames(placement, x):
    """Body quantities ``x`` (m, ..., 6) of the frames' bodies moved to the frames: ``phi*(k, O) x``."""
    return phi_star(Transform(placement.R[:, None], placement.p[:, None]), x)


def _task_space(model, q, t: Task, ab):
    """`TaskSpace` from the articulated-body quantities ``ab`` of any state at ``q`` (they share P, D, G)."""
    d, placement = _directions(model, q, t)
    Lambda_inv, nu = walk_task_columns(model, q, d, placement, t.body, ab)  # the up sweep along the frames' paths
    zero = jnp.zeros((t.rows, 6), d.dtype)
    _, mu = down(model.topology, _column_down_step, zero, joint_poses(model, q), dofs=(ab.G, nu, hinge_map(model)))
    body = np.maximum(np.asarray(t.body), 0)
    T = forward_kinematics(model, q)
    J_b = jacobian_rows(model, T, Transform(T.R[body], T.p[body]), body)  # (m, nv, 6) the frames' bodies' rows
    J_f = _at_frames(placement, J_b)  # the frames' Jacobians
    J = jnp.einsum("mrj,mvj->mrv", d, J_f).reshape(t.rows, model.nv)
    return TaskSpace(J, Lambda_inv, mu), d, placement


@functools.cache
def _task_space_in_chunks(t: Task):
    """`_task_space` at rest for the task ``t`` as a function of ``(model, q)``, batched in chunks
    (`jaxmb.batching.in_cpu_chunks`); one per task, whose fields are static."""
    return in_cpu_chunks(full_precision(lambda model, q: _task_space(model, q, t, articulated_inertias(model, q))[0]))


@eager_jit(static_argnames=("frames", "axes", "reference"))
def task_space(model, q, frames, axes=None, reference="local") -> TaskSpace:
    """Task Jacobian, compliance ``Lambda_inv = J M^-1 J*`` and ``M^-1 J*`` of a task, by the articulated-body
    sweep at rest and two column sweeps (module docstring). ``frames``, ``axes``, ``reference``: see `task`
    (static: pass them as Python values, outside ``jit``'s traced arguments). Under ``jax.vmap`` on the CPU a batch
    is computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`)."""
    check_shapes(model, q=q)
    return _task_space_in_chunks(task(model, frames, axes, reference))(model, q)


@functools.cache
def _compliance_in_chunks(t: Task):
    """`jaxmb.dynamics.compliance.compliance` at rest for the task ``t`` as a function of ``(model, q)``, batched in
    chunks (`jaxmb.batching.in_cpu_chunks`); one per task."""

    def at_rest(model, q):
        return compliance(model, q, *_directions(model, q, t), t.body, articulated_inertias(model, q))

    return in_cpu_chunks(full_precision(at_rest))


@eager_jit(static_argnames=("frames", "axes", "reference"))
def operational_space_compliance(model, q, frames, axes=None, reference="local"):
    """``Lambda_inv = J M^-1 J*`` (c, c) for the task frames (10.6, 10.12), without forming ``M`` or ``M^-1``;
    rows frame by frame, ``axes`` rows each: the articulated-body sweep at rest, then each frame's columns walked up
    its path to the root (`jaxmb.dynamics.compliance`), O(N + depth x c). Under ``jax.vmap`` on the CPU a batch is
    computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`)."""
    check_shapes(model, q=q)
    return _compliance_in_chunks(task(model, frames, axes, reference))(model, q)


class TaskInertia(NamedTuple):
    """``Lambda`` (c, c) and ``rank_deficient`` (bool): whether the compliance is numerically singular."""

    Lambda: jnp.ndarray
    rank_deficient: jnp.ndarray


@full_precision
def damped_inverse(Lambda_inv, damping, rcond=None):
    """``(Lambda_inv + mu I)^-1`` with ``mu = damping * trace(Lambda_inv) / c``, by Cholesky, and the flag
    ``lambda_min < rcond * lambda_max`` of ``Lambda_inv`` (``rcond`` defaults to ``max(damping, 100 eps)``).

    The damping keeps ``Lambda`` finite and differentiable where the task has fewer upstream coordinates than
    rows or the arm is at a singular configuration (the inverse of a rank-deficient compliance does not exist);
    its relative error is about ``damping x cond(Lambda_inv)``. ``damping=0`` is the exact inverse.
    """
    c = Lambda_inv.shape[-1]
    eps = jnp.finfo(Lambda_inv.dtype).eps
    rcond = jnp.maximum(damping, 100 * eps) if rcond is None else rcond
    mu = damping * jnp.trace(Lambda_inv) / c
    A = Lambda_inv + mu * jnp.eye(c, dtype=Lambda_inv.dtype)
    factor = jax.scipy.linalg.cho_factor(A, lower=True)
    Lambda = jax.scipy.linalg.cho_solve(factor, jnp.eye(c, dtype=A.dtype))
    ev = jnp.linalg.eigvalsh(jax.lax.stop_gradient(Lambda_inv))
    return TaskInertia(0.5 * (Lambda + Lambda.T), ev[0] < rcond * ev[-1])


@eager_jit(static_argnames=("frames", "axes", "reference"))
@full_precision
def operational_space_inertia(model, q, frames, axes=None, reference="local", damping=1e-8) -> TaskInertia:
    """``Lambda = Lambda_inv^-1`` (c, c) (10.7), damped as `damped_inverse`, with the rank-deficiency flag."""
    return damped_inverse(operational_space_compliance(model, q, frames, axes, reference), damping)


def _frame_accelerations(model, q, t: Task, d, placement, alpha):
    """Task rows ``d alpha_f`` (c,) of body accelerations ``alpha`` (nb, 6) that carry the gravity offset of the
    articulated-body sweep (``alpha(world) = [0; -g]``): the true acceleration adds ``[0; R(k)* g]``."""
    body = np.maximum(np.asarray(t.body), 0)
    R = forward_kinematics(model, q).R[body]  # (m, 3, 3)
    a_b = alpha[body].at[:, 3:].add(mv(jnp.swapaxes(R, -1, -2), model.gravity))
    a_f = phi_star(placement, a_b)  # (m, 6): alpha_f = B* alpha, Bdot* V = 0
    return jnp.einsum("mrj,mj->mr", d, a_f).reshape(-1)


@eager_jit(static_argnames=("frames", "axes", "reference"))
@full_precision
def operational_space_bias(model, q, qd, tau, frames, axes=None, reference="local", damping=1e-8, f_ext=None):
    """``C_os`` (c,) of the task equation ``Lambda alpha_nd + C_os = f_nd`` (10.8), by the shortcut
    ``C_os = -Lambda (B* alpha_free + Bdot* V)`` (Lemma 10.5): ``alpha_free`` are the body accelerations of the
    articulated-body pass with the joint forces ``tau`` and no task force, whose P, D, G also serve the
    compliance's walk (`jaxmb.dynamics.compliance`). ``Lambda`` as `operational_space_inertia`."""
    check_shapes(model, q=q, qd=qd, tau=tau, f_ext=f_ext)
    t = task(model, frames, axes, reference)
    ab = articulated_body(model, q, qd, tau, f_ext)
    d, placement = _directions(model, q, t)
    Lambda = damped_inverse(compliance(model, q, d, placement, t.body, ab), damping).Lambda
    return -Lambda @ _frame_accelerations(model, q, t, d, placement, ab.alpha)


@eager_jit(static_argnames=("frames", "axes", "reference"))
@full_precision
def operational_space_control(model, q, qd, frames, u, tau_posture=None, axes=None, reference="local",
                              damping=1e-8, f_ext=None):
    """Joint forces (nv,) that give the task accelerations ``alpha_nd = u`` (c,):

        tau = J* (Lambda u + C_os) + N* tau_posture,    N* = I - J* Lambda J M^-1      (10.8, Lemma 10.3)

    ``N*`` is the dynamically consistent null-space projector: the posture forces ``tau_posture`` (nv,) change
    no task acceleration. ``C_os`` is taken with the projected posture forces as the applied joint forces, so
    the task accelerations are exactly ``u`` when ``damping = 0`` and ``J`` has full row rank. ``f_ext``: forces
    the controller knows of (they enter ``C_os``)."""
    check_shapes(model, q=q, qd=qd, f_ext=f_ext)
    t = task(model, frames, axes, reference)
    if jnp.shape(u) != (t.rows,):
        raise ValueError(f"u: expected shape ({t.rows},) for {t.rows} task rows, got {jnp.shape(u)}")
    ts, d, placement = _task_space(model, q, t, articulated_inertias(model, q))
    Lambda = damped_inverse(ts.Lambda_inv, damping).Lambda
    tau0 = jnp.zeros_like(qd) if tau_posture is None else tau_posture
    tau_null = tau0 - ts.J.T @ (Lambda @ (ts.Minv_Jt.T @ tau0))  # N* tau_posture
    alpha_free = articulated_body(model, q, qd, tau_null, f_ext).alpha
    C_os = -Lambda @ _frame_accelerations(model, q, t, d, placement, alpha_free)
    return ts.J.T @ (Lambda @ u + C_os) + tau_null


def _upsilon_step(Y_parent, X_k, H_k, G_k, D_k):
    n = H_k.shape[0]
    Y_plus = phi_star_congruence(X_k, Y_parent)  # Upsilon+(k) = phi*(parent, k) Upsilon(parent) phi(parent, k)
    Z = mm(Y_plus, G_k.T)  # Z = Upsilon+ G                                                        (6, n)
    L = solve_small(D_k[:, :n], jnp.eye(n, dtype=Z.dtype)) + mm(G_k, Z)  # L = D^-1 + G* Z
    U = mm(L, H_k) - Z.T  # U = L H - Z*                                                            (n, 6)
    return Y_plus + mm(H_k.T, U) - mm(Z, H_k), U  # Upsilon(k) = Upsilon+ + H* U - Z H   (Alg 10.3, (10.22))


@eager_jit
def upsilon(model, q):
    """``Upsilon(k)`` (nb, 6, 6): the operational-space compliance of every body at its origin, in body
    coordinates, ``Omega(k, k) = [phi* H* M^-1 H phi](k, k)``, by one down sweep after the articulated-body sweep
    (Alg 10.3; (10.16) ``Upsilon(k) = psi* Upsilon(parent) psi + H* D^-1 H``). O(N). For a free base
    ``Upsilon(root) = P(root)^-1`` (Remark 10.2)."""
    check_shapes(model, q=q)
    ab = articulated_inertias(model, q)
    return upsilon_of_factors(model.topology, joint_poses(model, q), hinge_map(model), ab.G, ab.D)


def upsilon_of_factors(topology, X, H, G, D):
    """`upsilon` from the joint poses ``X``, hinge map ``H`` and the factors ``G, D`` (nv, 6) of the articulated-body
    sweep: the down sweep (10.16) alone."""
    return down(topology, _upsilon_step, jnp.zeros((6, 6), G.dtype), X, dofs=(H, G, D))[0]
