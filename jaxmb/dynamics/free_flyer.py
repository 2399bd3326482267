"""Free-flying trees (book ch. 17): the dual (complement) articulated-body sweep, forward dynamics from the regular
and dual sweeps (Alg 17.3), and the operational-space inertia of every body in O(N) (Lemma 17.5).

Every tree of the model must hang from the world by a free joint: nothing then holds the tree, and every body's
complement (the bodies outside its subtree) moves with it through the body's hinge alone.

Dual sweep (on trees; the book writes it for a serial chain, base at either end). ``P``, ``P+``, ``z``, ``z+`` and
``a`` are the regular articulated-body quantities (`jaxmb.articulated_body`); ``S(k)`` is the articulated inertia
of body k's complement seen through hinge k, ``z_dl(k)`` its residual force; ``S+``, ``z_dl+`` are the same with
hinge k locked. A down sweep, from the parent p of each body k (``phi^-1(p, k)`` moves a force from p to k)::

    S+(k)    = phi^-1(p, k) [S(p) + P(p)] phi^-*(p, k) - P+(k)
    z_dl+(k) = phi^-1(p, k) [z_dl(p) + z(p) - P(p) a(p)] - z+(k) - S+(k) a(k)
    D_dl = H S+ H* + diag(armature),   G_dl = -S+ H* D_dl^-1,   S(k) = (I + G_dl H) S+(k)
    eps_dl = T + H z_dl+,   nu_dl = D_dl^-1 eps_dl,   z_dl(k) = z_dl+(k) + G_dl eps_dl

A root's complement is the world: ``S(root) = H* diag(armature) H`` (zero without armature, as the book starts its
dual sweep) and ``z_dl(root) = -H* T(root) - S(root) alpha+(root)``: the root's joint force acts on the world, whose
pseudo-acceleration ``alpha+(root) = phi*(world, root) [0; -g]`` drives the rotors. The world hands the roots the
identity as an inertia, so that their step's solves stay finite, and their values are set in the step.

Forward dynamics (Alg 17.3, Lemma 17.1): the force balance across every hinge gives each body's acceleration
locally, ``alpha(k) = -[P(k) + S(k)]^-1 [z(k) + z_dl(k) - P(k) a(k)]`` (17.11), then
``qdd(k) = nu(k) - G*(k) alpha+(k)`` (7.31) with ``alpha+(k) = phi*(parent, k) alpha(parent)``, or equally
``qdd(k) = nu_dl(k) - G_dl*(k) alpha(k)`` (17.12) below the roots. The accelerations ``alpha`` are the articulated-body
algorithm's, which carry the world's pseudo-acceleration ``[0; -g]``: for a free tree without armature on its root
joints they do not depend on gravity (it falls as one), and gravity enters the roots' ``qdd`` alone, through
``alpha+(root)``.

Lemma 17.5: ``Upsilon(k)^-1 = P(k) + S(k)``, the operational-space inertia of body k at its origin, in body
coordinates, the inverse of `jaxmb.dynamics.opspace.upsilon`'s compliance, with no inverse taken
(`operational_space_inertias`). ``P + S`` is invertible for a free-flyer (Remark 17.2).
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxmb.batching import eager_jit, in_cpu_chunks, take_rows
from jaxmb.dynamics.ab_steps import solve_small
from jaxmb.dynamics.articulated import articulated_body
from jaxmb.errors import ModelError
from jaxmb.hinges import base_acceleration, hinge_map, joint_poses, root_joints_left_out
from jaxmb.model import check_shapes
from jaxmb.spatial import inverse, mm, mv, phi, phi_congruence, phi_star
from jaxmb.sweeps import down


def check_free_flyer(model):
    """Raise `ModelError` unless every tree of ``model`` hangs from the world by a free joint."""
    roots = np.flatnonzero(model.topology.parent < 0)
    held = [model.joint_names[i] for i in roots if model.topology.kinds[i] != "free"]
    if not model.nb or held:
        raise ModelError(f"model {model.name!r}: the free-flyer algorithms need every tree to hang from the world by "
                         f"a free joint; the root joints {held or 'of a model without bodies'} are not free")


class DualBody(NamedTuple):
    """The dual sweep's value of one body, handed to its children: the whole tree's articulated inertia ``P + S``
    (6, 6) at the body and its residual force ``z + z_dl - P a`` (6,), in the body's coordinates (what a child reads),
    and the body's S, S_plus (6, 6), z_dl, z_dl_plus (6,)."""

    inertia: jnp.ndarray
    force: jnp.ndarray
    S: jnp.ndarray
    S_plus: jnp.ndarray
    z_dl: jnp.ndarray
    z_dl_plus: jnp.ndarray

    @staticmethod
    def world(dtype):
        """The world's value: the identity as the complement's inertia of every root (module docstring)."""
        zero, eye = jnp.zeros((6, 6), dtype), jnp.eye(6, dtype=dtype)
        return DualBody(inertia=eye, force=jnp.zeros(6, dtype), S=zero, S_plus=zero, z_dl=jnp.zeros(6, dtype),
                        z_dl_plus=jnp.zeros(6, dtype))


class DualCoordinates(NamedTuple):
    """The dual sweep's quantities of one joint's n coordinates, a row each: G_dl, D_dl (n, 6), eps_dl, nu_dl (n,)."""

    G_dl: jnp.ndarray
    D_dl: jnp.ndarray
    eps_dl: jnp.ndarray
    nu_dl: jnp.ndarray


def dual_step(parent, X_k, P_k, P_plus_k, z_k, z_plus_k, a_k, root_k, alpha_plus_k, H_k, T_k, A_k):
    """The dual sweep at body k (module docstring) from its parent's `DualBody`: ``(DualBody, DualCoordinates)``, as
    `jaxmb.sweeps.down` takes it with coordinates."""
    n = H_k.shape[0]
    X_inv = inverse(X_k)  # phi(k, p) = phi^-1(p, k)
    S_plus = phi_congruence(X_inv, parent.inertia) - P_plus_k  # S+(k) = phi^-1 [S + P](p) phi^-* - P+(k)
    z_dl_plus = phi(X_inv, parent.force) - z_plus_k - mv(S_plus, a_k)  # z_dl+(k) = phi^-1 [...](p) - z+ - S+ a
    SH = mm(S_plus, H_k.T)  # S+ H*                                                                 (6, n)
    D = mm(H_k, SH) + jnp.diag(A_k)  # D_dl = H S+ H* + diag(armature): the rotor turns with the hinge's rate
    eps = T_k + mv(H_k, z_dl_plus)  # eps_dl = T + H z_dl+
    Dinv = solve_small(D, jnp.concatenate([SH.T, eps[:, None]], 1))  # D_dl^-1 [H S+, eps_dl]
    G = -Dinv[:, :6].T  # G_dl = -S+ H* D_dl^-1                                                   (6, n)
    S = S_plus + mm(G, SH.T)  # S(k) = (I + G_dl H) S+ = S+ + G_dl H S+
    z_dl = z_dl_plus + mv(G, eps)  # z_dl(k) = z_dl+ + G_dl eps_dl
    rotor = mm(H_k.T * A_k, H_k)  # H* diag(armature) H: a root's rotors turn against the world
    S = jnp.where(root_k, rotor, S)  # a root: S = H* diag(armature) H, z_dl = -H* T - S alpha+
    z_dl = jnp.where(root_k, -mv(H_k.T, T_k) - mv(rotor, alpha_plus_k), z_dl)
    body = DualBody(inertia=S + P_k, force=z_k + z_dl - mv(P_k, a_k), S=S, S_plus=S_plus, z_dl=z_dl,
                    z_dl_plus=z_dl_plus)
    return body, DualCoordinates(G_dl=G.T, D_dl=jnp.pad(D, ((0, 0), (0, 6 - n))), eps_dl=eps, nu_dl=Dinv[:, 6])


class DualArticulatedBody(NamedTuple):
    """The dual sweep's quantities of one state, per body (nb, ...) and per coordinate (nv, ...), as
    `jaxmb.dynamics.articulated.ArticulatedBody` stores them.

    S, S_plus (nb, 6, 6)     complement's articulated inertia through and before hinge k
    z_dl, z_dl_plus (nb, 6)  its residual forces
    G_dl, D_dl (nv, 6)       the dual gain ``-S+ H* D_dl^-1`` by columns, and the rows of ``D_dl``
    eps_dl, nu_dl (nv,)      ``T + H z_dl+`` and ``D_dl^-1 eps_dl``
    """

    S: jnp.ndarray
    S_plus: jnp.ndarray
    z_dl: jnp.ndarray
    z_dl_plus: jnp.ndarray
    G_dl: jnp.ndarray
    D_dl: jnp.ndarray
    eps_dl: jnp.ndarray
    nu_dl: jnp.ndarray


def _dual_sweep(model, q, tau, ab):
    X = joint_poses(model, q)
    root = model.topology.parent < 0
    alpha_plus = jnp.where(root[:, None], phi_star(X, base_acceleration(model)), 0.0)  # phi*(world, root) [0; -g]
    body, coordinates = down(model.topology, dual_step, DualBody.world(ab.P.dtype), root_joints_left_out(model, X),
                             ab.P, ab.P_plus, ab.z, ab.z_plus, ab.a, jnp.asarray(root), alpha_plus,
                             dofs=(hinge_map(model), tau, model.armature))
    return DualArticulatedBody(body.S, body.S_plus, body.z_dl, body.z_dl_plus, *coordinates)


@eager_jit
def dual_articulated_body(model, q, qd, tau, f_ext=None) -> DualArticulatedBody:
    """The dual (complement) articulated-body quantities of the state ``(q, qd, tau)`` of a free-flying tree: the
    regular sweep's up pass, then one down sweep (module docstring). Raises `ModelError` unless every root joint is
    free. Args as `jaxmb.articulated_body`."""
    check_shapes(model, q=q, qd=qd, tau=tau, f_ext=f_ext)
    check_free_flyer(model)
    return _dual_sweep(model, q, tau, articulated_body(model, q, qd, tau, f_ext))


class BaseInvariantDynamics(NamedTuple):
    """Alg 17.3's result: ``qdd`` (nv,) and the body accelerations ``alpha`` (nb, 6), those of
    `jaxmb.articulated_body` (module docstring)."""

    qdd: jnp.ndarray
    alpha: jnp.ndarray


def _solve_6(A, x):
    return solve_small(A, x[..., None])[..., 0]


def _base_invariant(model, q, qd, tau, f_ext):
    topo = model.topology
    ab = articulated_body(model, q, qd, tau, f_ext)
    dual = _dual_sweep(model, q, tau, ab)
    alpha = -_solve_6(ab.P + dual.S, ab.z + dual.z_dl - mv(ab.P, ab.a))  # (17.11), free of gravity
    parents = jnp.concatenate([alpha, base_acceleration(model)[None]])  # the world's row: [0; -g]
    alpha_plus = phi_star(joint_poses(model, q), take_rows(parents, np.where(topo.parent < 0, model.nb, topo.parent)))
    qdd = ab.nu - jnp.sum(ab.G * take_rows(alpha_plus, topo.dof_body), 1)  # qdd = nu - G* alpha+     (7.31)
    return BaseInvariantDynamics(qdd=qdd, alpha=alpha)


_base_invariant_in_chunks = in_cpu_chunks(_base_invariant)


@eager_jit
def base_invariant_forward_dynamics(model, q, qd, tau, f_ext=None) -> BaseInvariantDynamics:
    """Forward dynamics of a free-flying tree from the regular and dual sweeps (Alg 17.3): each body's acceleration
    from the force balance across its hinge (17.11), then ``qdd(k) = nu(k) - G*(k) alpha+(k)`` locally; the same
    ``qdd`` as `jaxmb.forward_dynamics`. Raises `ModelError` unless every root joint is free. Under ``jax.vmap``
    on the CPU a batch is computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`)."""
    check_shapes(model, q=q, qd=qd, tau=tau, f_ext=f_ext)
    check_free_flyer(model)
    return _base_invariant_in_chunks(model, q, qd, tau, f_ext)


def _inertias(model, q):
    zero = jnp.zeros(model.nv, q.dtype)
    ab = articulated_body(model, q, zero, zero)
    return ab.P + _dual_sweep(model, q, zero, ab).S


_inertias_in_chunks = in_cpu_chunks(_inertias)


@eager_jit
def operational_space_inertias(model, q):
    """``Lambda(k) = Upsilon(k)^-1 = P(k) + S(k)`` (nb, 6, 6) (Lemma 17.5): the operational-space inertia of every
    body at its origin, in body coordinates, of a free-flying tree at ``q`` (nq,), in O(N) and without an inverse.
    Raises `ModelError` unless every root joint is free."""
    check_shapes(model, q=q)
    check_free_flyer(model)
    return _inertias_in_chunks(model, q)
