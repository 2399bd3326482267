"""Re-rooting a free-flying tree at another body (book ch. 17.3): the same mechanism, with the chosen body as the
base. A build-time transformation of the model, and the map of states between the two models.

The new base ``b`` hangs from the world by a free joint; the joints on the path from the old base ``r`` to ``b``
are reversed, each now carried by the body it used to move; the old base's free joint goes. A screw joint of axis
``a`` reversed is the screw of axis ``-a`` with the same coordinate (its inverse motion), so every joint keeps its
name, coordinate, limits and armature, and the old base's joint name passes to the new base's free joint.

Frames. A reversed joint's child is the body it used to carry, and the joint moves that body's joint frame: so the
bodies of the path but ``b`` take as body frame the old frame of the joint above them on the path (``E``, its
placement in the old body frame). Their inertias, child placements and frames are re-expressed in it; every other
body keeps its frame. With ``V'(k) = phi*(E) V(k)`` the body velocities in the new frames:

    qd' = J_RG qd,   M = J_RG* M' J_RG   (17.45),   K_e' = K_e   (17.46)
    Upsilon'(k) = phi*(E) Upsilon(k) phi(E)   (17.48, Lemma 17.4)

``J_RG`` is the identity on every joint coordinate and puts ``b``'s body velocity in place of the old base's
(`rerooted_state`). Sol 17.1: along the reversed path the velocities recur with the hinge term's sign changed, which
the reversed axes carry.
"""

import warnings

import jax.numpy as jnp
import numpy as np

from jaxmb.errors import ModelError
from jaxmb.joints import KINDS, Joint
from jaxmb.kinematics import body_velocities, forward_kinematics
from jaxmb.model import Model, ModelBuilder


def _pose(R, p):
    return np.asarray(R, float), np.asarray(p, float)


def _inverse(E):
    return E[0].T, -E[0].T @ E[1]


def _compose(A, B):
    return A[0] @ B[0], A[1] + A[0] @ B[1]


def _path_to(model, body):
    """The bodies from the root of ``body``'s tree down to ``body``, checked for re-rooting."""
    if not isinstance(model, Model):
        raise ModelError(f"re-rooting takes a tree (jaxmb.Model), got {type(model).__name__}: a model with closed "
                         "loops cannot be re-rooted")
    if body not in model.body_names:
        raise ModelError(f"model {model.name!r} has no body {body!r} to re-root at; its bodies are "
                         f"{list(model.body_names)}")
    path = model.topology.ancestors(model.body_index(body))[::-1]
    root = path[0]
    if model.topology.kinds[root] != "free":
        raise ModelError(f"model {model.name!r}: re-rooting needs a free-flying tree, but the root joint "
                         f"{model.joint_names[root]!r} of body {body!r}'s tree is {model.joint_types[root]}")
    not_screw = [model.joint_names[k] for k in path[1:] if model.topology.kinds[k] != "screw"]
    if not_screw:
        raise ModelError(f"model {model.name!r}: re-rooting reverses the joints from the base to {body!r}, which "
                         f"must be revolute, prismatic or helical; {not_screw} are not")
    v = model.topology.v_offset[root]
    if np.any(np.asarray(model.armature[v : v + 6]) != 0):
        raise ModelError(f"model {model.name!r}: the root joint {model.joint_names[root]!r} has armature, which a "
                         "re-rooted tree has no joint for")
    return path


def reroot(model: Model, body: str) -> Model:
    """The model of the same free-flying tree with ``body`` as its base (module docstring). Bodies and joints keep
    their names; the new base's free joint takes the old base's joint name. Raises `ModelError` for a body the
    model lacks, a tree whose root joint is not free or has armature, a joint on the path that is not a screw joint,
    or a model that is not a tree."""
    path = _path_to(model, body)
    topo = model.topology
    names = model.body_names
    R, p = np.asarray(model.X_tree.R), np.asarray(model.X_tree.p)
    X_tree = [_pose(R[k], p[k]) for k in range(model.nb)]
    E = {k: (np.eye(3), np.zeros(3)) for k in range(model.nb)}  # new body frame in the old one
    for above, below in zip(path[:-1], path[1:]):
        E[above] = X_tree[below]
    new_parent, new_joint = {}, {}  # body -> (parent or None, the body whose old joint it now hangs from)
    for k in range(model.nb):
        new_parent[k], new_joint[k] = (None if topo.parent[k] < 0 else topo.parent[k]), k
    for above, below in zip(path[:-1], path[1:]):
        new_parent[above], new_joint[above] = below, below
    new_parent[path[-1]], new_joint[path[-1]] = None, path[0]

    q_lower, q_upper, armature = (np.asarray(x) for x in (model.q_lower, model.q_upper, model.armature))
    axis, coef = np.asarray(model.axis), np.asarray(model.coef)
    b = ModelBuilder(model.name, gravity=np.asarray(model.gravity), inertia="warn")
    for k in range(model.nb):
        j = new_joint[k]
        qs = slice(topo.q_offset[j], topo.q_offset[j] + topo.nq_body[j])
        vs = slice(topo.v_offset[j], topo.v_offset[j] + topo.nv_body[j])
        reversed_joint = j != k and k != path[-1]
        if k == path[-1]:
            joint, placement = Joint("free", KINDS["free"]), None
        else:
            limits = {} if topo.kinds[j] != "screw" else dict(lower=tuple(q_lower[qs]), upper=tuple(q_upper[qs]))
            limits = {key: (None if np.all(np.isinf(v)) else v) for key, v in limits.items()}
            joint = Joint(model.joint_types[j], KINDS[topo.kinds[j]], tuple(-axis[j] if reversed_joint else axis[j]),
                          tuple(coef[j]), **limits)
            if reversed_joint:  # the old child frame of j, seen from its new frame: E(j)^-1
                placement = _inverse(E[j])
            else:
                parent = new_parent[k]
                placement = X_tree[k] if parent is None else _compose(_inverse(E[parent]), X_tree[k])
        R_E, p_E = E[k]
        com = R_E.T @ (np.asarray(model.com[k]) - p_E)
        inertia = R_E.T @ np.asarray(model.inertia[k]) @ R_E
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the model's inertias were judged when it was built
            b.add_body(names[k], None if new_parent[k] is None else names[new_parent[k]], joint,
                       joint_name=model.joint_names[j], placement=placement, mass=float(model.mass[k]), com=com,
                       inertia=inertia, armature=None if k == path[-1] else armature[vs])
    R_f, p_f = np.asarray(model.frame_placement.R), np.asarray(model.frame_placement.p)
    for f, (name, k) in enumerate(zip(model.frame_names, model.frame_body)):
        if name in names:
            continue
        placement = _pose(R_f[f], p_f[f])
        b.add_frame(name, None if k < 0 else names[k], placement if k < 0 else _compose(_inverse(E[k]), placement))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        new = b.build()
    return new.replace(notes=model.notes + (f"re-rooted at body {body!r} (jaxmb.reroot)",))


def body_frame_changes(model: Model, body: str):
    """``E`` (R (nb, 3, 3), p (nb, 3)) in ``model``'s body order: the pose of each body's frame after `reroot` at
    ``body`` in its frame before (the identity off the path from the base to ``body``)."""
    path = _path_to(model, body)
    R, p = np.tile(np.eye(3), (model.nb, 1, 1)), np.zeros((model.nb, 3))
    for above, below in zip(path[:-1], path[1:]):
        R[above], p[above] = np.asarray(model.X_tree.R[below]), np.asarray(model.X_tree.p[below])
    return R, p


def _quaternion(R):
    """The unit quaternion ``[w, x, y, z]`` of a rotation matrix (3, 3), from the largest of its four candidate
    components (no division by a small number)."""
    t = jnp.trace(R)
    candidates = jnp.stack([
        jnp.stack([1 + t, R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]),
        jnp.stack([R[2, 1] - R[1, 2], 1 + 2 * R[0, 0] - t, R[0, 1] + R[1, 0], R[0, 2] + R[2, 0]]),
        jnp.stack([R[0, 2] - R[2, 0], R[0, 1] + R[1, 0], 1 + 2 * R[1, 1] - t, R[1, 2] + R[2, 1]]),
        jnp.stack([R[1, 0] - R[0, 1], R[0, 2] + R[2, 0], R[1, 2] + R[2, 1], 1 + 2 * R[2, 2] - t]),
    ])  # row i: 4 q_i q (q_i the i-th component of [w, x, y, z])
    i = jnp.argmax(jnp.stack([1 + t, 1 + 2 * R[0, 0] - t, 1 + 2 * R[1, 1] - t, 1 + 2 * R[2, 2] - t]))
    row = candidates[i]
    return row / jnp.linalg.norm(row)


def rerooted_state(model: Model, rerooted: Model, q, qd):
    """``(q', qd')`` of ``rerooted`` (`reroot` of ``model``) for the state ``(q, qd)`` of ``model``: every joint's
    coordinates by name, and the new base's free joint at the base body's world pose and body velocity. ``qd'`` is
    linear in ``qd``: ``qd' = J_RG qd`` (17.45)."""
    old_roots = {model.body_names[i] for i in np.flatnonzero(model.topology.parent < 0)}
    moved = [rerooted.body_names[i] for i in np.flatnonzero(rerooted.topology.parent < 0)
             if rerooted.body_names[i] not in old_roots]
    base = moved[0] if moved else None  # None: re-rooted at the base itself, every joint as it was
    k = model.body_index(base) if base is not None else 0
    T = forward_kinematics(model, q)
    V = body_velocities(model, q, qd)
    q_new, qd_new = jnp.zeros(rerooted.nq, q.dtype), jnp.zeros(rerooted.nv, qd.dtype)
    for name in rerooted.joint_names:
        q_slice, v_slice = rerooted.joint_coordinates(name)
        if rerooted.body_names[rerooted.joint_index(name)] == base:
            q_new = q_new.at[q_slice].set(jnp.concatenate([T.p[k], _quaternion(T.R[k])]))
            qd_new = qd_new.at[v_slice].set(V[k])
        else:
            old_q, old_v = model.joint_coordinates(name)
            q_new, qd_new = q_new.at[q_slice].set(q[old_q]), qd_new.at[v_slice].set(qd[old_v])
    return q_new, qd_new

