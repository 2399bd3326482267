"""Forward kinematics, body velocities, Jacobians and bias accelerations (book Alg 3.1, 3.2, (3.53), (5.8)).

All outputs are for every body (or frame) at once, and the single-frame functions index them, except `jacobian`,
which poses its frame's support path alone. Body quantities are
in the model's body order (`Model.body_names`), spatial vectors angular first, in body coordinates unless the
name says otherwise.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import eager_jit, take_rows
from jaxmb.model import check_shapes
from jaxmb.hinges import hinge_map, hinge_motion, joint_poses
from jaxmb.spatial import Transform, compose, cross_motion, mm, mv, phi_star, phi_star_inv
from jaxmb.sweeps import down

REFERENCES = ("local", "world_aligned", "world")


@eager_jit
def forward_kinematics(model, q) -> Transform:
    """World pose of every body (Alg 3.1): ``T(k) = T(parent k) T_parent,k(q)``. -> R (nb, 3, 3), p (nb, 3)."""
    check_shapes(model, q=q)
    X = joint_poses(model, q)
    return down(model.topology, compose, Transform.identity(X.p.dtype), X)


@eager_jit
def frame_poses(model, q) -> Transform:
    """World pose of every frame (`Model.frame_names`; bodies and merged links included). -> (nf, ...)."""
    if not model.nb:
        return model.frame_placement  # every frame is fixed to the world
    T = forward_kinematics(model, q)
    body = jnp.asarray(model.frame_body)
    world = jnp.asarray([b < 0 for b in model.frame_body])[:, None]
    T_body = Transform(T.R[body], T.p[body])
    T_frame = compose(T_body, model.frame_placement)
    return Transform(jnp.where(world[..., None], model.frame_placement.R, T_frame.R),
                     jnp.where(world, model.frame_placement.p, T_frame.p))


def velocity_step(V_parent, X_k, vJ_k):
    """Alg 3.2 at body k, the step of a `jaxmb.sweeps.down` sweep: its velocity from its parent's ``V_parent`` (6,),
    its joint pose ``X_k`` and its joint's motion ``vJ_k = H*(k) qd(k)`` (6,)."""
    return phi_star(X_k, V_parent) + vJ_k  # V(k) = phi*(parent, k) V(parent) + H*(k) qd(k)   (Alg 3.2)


@eager_jit
def body_velocities(model, q, qd):
    """Spatial velocity of every body in its own frame, (nb, 6) (Alg 3.2)."""
    check_shapes(model, q=q, qd=qd)
    X = joint_poses(model, q)
    vJ = hinge_motion(model, hinge_map(model), qd)
    return down(model.topology, velocity_step, jnp.zeros(6, X.p.dtype), X, vJ)


def _bias_step(parent, X_k, vJ_k):
    V_parent, a_parent = parent
    V = phi_star(X_k, V_parent) + vJ_k
    a = phi_star(X_k, a_parent) + cross_motion(V, vJ_k)  # alpha(k) with qdd = 0 and no gravity   (5.8)
    return V, a


@eager_jit
def bias_accelerations(model, q, qd):
    """``Jdot qd`` of every body: its spatial acceleration (body-frame derivative, body coordinates) at zero
    joint accelerations and without gravity, (nb, 6). The classical linear acceleration of the body origin is
    ``a[3:] + w x v``."""
    check_shapes(model, q=q, qd=qd)
    X = joint_poses(model, q)
    vJ = hinge_motion(model, hinge_map(model), qd)
    zero = jnp.zeros(6, X.p.dtype)
    return down(model.topology, _bias_step, (zero, zero), X, vJ)[1]


def world_hinges(model, T):
    """Each coordinate's hinge axis as a spatial motion in world coordinates about the world origin, (nv, 6), from
    the bodies' world poses ``T`` (`forward_kinematics`)."""
    return phi_star_inv(take_rows(T, model.topology.dof_body), hinge_map(model))


def jacobian_rows(model, T, frames, bodies):
    """Frame-local Jacobians by rows, (m, nv, 6), of frames with world poses ``frames`` (Transform, m) fixed to the
    bodies ``bodies`` (m,) (static indices), from every body's world pose ``T`` (`forward_kinematics`): row j is the
    hinge axis of coordinate j moved to the frame where coordinate j moves its body, else zero (3.53)."""
    H_world = world_hinges(model, T)
    to_frame = jax.vmap(lambda T_f: phi_star(T_f, H_world))(frames)  # (m, nv, 6)
    return jnp.where(jnp.asarray(model.topology.support[bodies])[..., None], to_frame, 0.0)


@eager_jit
def jacobians(model, q):
    """Body-frame Jacobians of all bodies, (nb, 6, nv): ``V(k) = J(k) qd`` (3.53) (`jacobian_rows`)."""
    T = forward_kinematics(model, q)
    return jnp.swapaxes(jacobian_rows(model, T, T, np.arange(model.nb)), -1, -2)


def _express(J, T_frame, reference):
    """Re-express frame-local spatial columns (..., 6, n) in ``reference`` for a frame with world pose T."""
    if reference == "local":
        return J
    R = T_frame.R
    w, v = mm(R, J[..., :3, :]), mm(R, J[..., 3:, :])
    if reference == "world_aligned":
        return jnp.concatenate([w, v], -2)
    if reference == "world":
        p = jnp.broadcast_to(T_frame.p[..., :, None], w.shape)
        return jnp.concatenate([w, v + jnp.cross(p, w, axis=-2)], -2)
    raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")


@eager_jit(static_argnames=("name", "reference"))
def jacobian(model, q, name, reference="local"):
    """Jacobian (6, nv) of a body or frame: ``local`` (frame coordinates), ``world_aligned`` (origin at the
    frame, world axes; Pinocchio's LOCAL_WORLD_ALIGNED) or ``world`` (spatial velocity at the world origin).
    Column j is the hinge axis of coordinate j moved to the frame where j moves the frame's body, else zero (3.53).
    Only the frame's support path is posed: its bodies' world poses are the prefix products of their joint poses
    from the root, ``T(k) = T(parent k) X(k)`` (Alg 3.1), as one `jax.lax.associative_scan` (log depth), and only
    their coordinates' columns are moved, rather than posing every body (benchmarks/README.md, "Results: CPU")."""
    check_shapes(model, q=q)
    topo = model.topology
    i = model.frame_index(name)
    b = model.frame_body[i]
    placement = Transform(model.frame_placement.R[i], model.frame_placement.p[i])
    if b < 0:
        return jnp.zeros((6, model.nv), placement.p.dtype)
    path = np.array(topo.ancestors(b)[::-1])  # root first
    T = jax.lax.associative_scan(compose, take_rows(joint_poses(model, q), path))
    T_f = compose(Transform(T.R[-1], T.p[-1]), placement)
    dofs = np.concatenate([topo.v_offset[k] + np.arange(topo.nv_body[k]) for k in path])
    T_dof = take_rows(T, np.repeat(np.arange(len(path)), topo.nv_body[path]))  # the pose of each coordinate's body
    columns = phi_star(T_f, phi_star_inv(T_dof, take_rows(hinge_map(model), dofs)))  # hinge axes at the frame
    J_f = jnp.zeros((model.nv, 6), columns.dtype).at[dofs].set(columns).T
    return _express(J_f, T_f, reference)


@eager_jit(static_argnames=("name", "reference"))
def frame_velocity(model, q, qd, name, reference="local"):
    """Spatial velocity (6,) of a body or frame, expressed as in `jacobian`."""
    if model.frame_body[model.frame_index(name)] < 0:  # fixed to the world (every frame where nv = 0)
        return jnp.zeros(6, model.frame_placement.p.dtype)
    return mv(jacobian(model, q, name, reference), qd)


@eager_jit(static_argnames=("name", "reference"))
def frame_bias_acceleration(model, q, qd, name, reference="local"):
    """``Jdot qd`` (6,) of a body or frame, in frame coordinates (``local``) or world-aligned coordinates."""
    i = model.frame_index(name)
    b = model.frame_body[i]
    if reference not in ("local", "world_aligned"):
        raise ValueError(f"reference must be 'local' or 'world_aligned', got {reference!r}")
    if b < 0:  # fixed to the world (every frame where nv = 0)
        return jnp.zeros(6, model.frame_placement.p.dtype)
    a_b = bias_accelerations(model, q, qd)[b]
    placement = Transform(model.frame_placement.R[i], model.frame_placement.p[i])
    a_f = phi_star(placement, a_b)
    if reference == "local":
        return a_f
    T_f = Transform(*(x[i] for x in frame_poses(model, q)))
    return jnp.concatenate([mv(T_f.R, a_f[:3]), mv(T_f.R, a_f[3:])])
