"""Per-joint quantities of a whole model, computed for all joints at once (no tree sweep): joint poses, the hinge
map ``H`` by rows, ``H* x`` per body and ``H f`` per coordinate, and body spatial inertias.

Joints are processed in blocks of one kind (`jaxmb.topology.KindBlock`), one `vmap` each.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.joints import KINDS
from jaxmb.batching import sum_rows, take_rows
from jaxmb.spatial import Transform, compose, dot, spatial_inertia


def _assemble(parts, index, n):
    """Rows of the per-block results ``parts`` put in the order given by their static ``index`` arrays."""
    index = np.concatenate(index)
    if np.array_equal(index, np.arange(n)):
        return parts[0] if len(parts) == 1 else jax.tree.map(lambda *a: jnp.concatenate(a), *parts)
    joined = jax.tree.map(lambda *a: jnp.concatenate(a), *parts)
    return jax.tree.map(lambda a: take_rows(a, np.argsort(index)), joined)


def joint_poses(model, q) -> Transform:
    """Pose of every body frame in its parent body frame: the joint placement, then the joint motion.

    ``q`` (nq,) -> Transform with R (nb, 3, 3), p (nb, 3).
    """
    if not model.nb:
        return model.X_tree
    parts = []
    for blk in model.topology.kind_blocks:
        kind = KINDS[blk.kind]
        q_k = take_rows(q, blk.q_index.reshape(-1)).reshape(blk.q_index.shape)
        parts.append(jax.vmap(kind.transform)(q_k, model.axis[blk.bodies], model.coef[blk.bodies]))
    X_J = _assemble(parts, [b.bodies for b in model.topology.kind_blocks], model.nb)
    return compose(model.X_tree, X_J)


def root_joints_left_out(model, X):
    """The joint poses ``X`` (nb) with the identity for each tree's root body: composed down the tree from the
    identity, they give every body's pose in the frame of its tree's root body. Wherever the root stands, those
    poses stay the size of the robot, as float32 needs (the mass matrix and the derivatives work in that frame)."""
    at_root = model.topology.depth == 0
    I = Transform.identity(X.p.dtype)
    return Transform(jnp.where(at_root[:, None, None], I.R, X.R), jnp.where(at_root[:, None], I.p, X.p))


def hinge_map(model) -> jnp.ndarray:
    """``H`` by rows, (nv, 6): row i is the child-frame spatial motion for unit rate of coordinate i."""
    if not model.nv:
        return jnp.zeros((0, 6), model.axis.dtype)
    parts, index = [], []
    for blk in model.topology.kind_blocks:
        H = jax.vmap(KINDS[blk.kind].hinge_map)(model.axis[blk.bodies], model.coef[blk.bodies])
        parts.append(H.reshape(-1, 6))
        index.append(blk.v_index.reshape(-1))
    return _assemble(parts, index, model.nv)


def hinge_motion(model, H, x):
    """``H*(k) x(k)`` for every body, (nb, 6), from coordinate rates ``x`` (nv,)."""
    topo = model.topology
    Hx = H * x[:, None]
    if topo.nv == topo.nb:  # one coordinate per joint: nothing to sum
        return Hx
    return sum_rows(Hx, topo.dof_body, topo.nb)


def hinge_project(model, H, f):
    """``H(k) f(k)`` for every coordinate, (nv,), from body forces ``f`` (nb, 6)."""
    topo = model.topology
    return dot(H, f if topo.nv == topo.nb else take_rows(f, topo.dof_body))


def rotational_inertias(model):
    """Rotational inertia of every body about its centre of mass, (nb, 3, 3): the symmetric part of
    ``model.inertia``, so that every algorithm sees the same inertia and gradients with respect to it are
    symmetric."""
    return 0.5 * (model.inertia + jnp.swapaxes(model.inertia, -1, -2))


def body_inertias(model):
    """Spatial inertia of every body about its frame origin, (nb, 6, 6) (2.11), from `rotational_inertias`."""
    return spatial_inertia(model.mass, model.com, rotational_inertias(model))


def base_acceleration(model):
    """The world's spatial acceleration: gravity enters as ``alpha(world) = [0; -g]`` (book 5.39)."""
    return jnp.concatenate([jnp.zeros_like(model.gravity), -model.gravity])
