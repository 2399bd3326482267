"""Re-rooting a free-flying tree at another body (book ch. 17.3): the same mechanism, with the chosen body as the
base. A build-time transformation of the model, and the map of states between the two models.

The new base ``b`` hangs from the world by a free joint; the joints on the path from the old base ``r`` to ``b``
are reversed, each now carried by the body it used to move; the old base's free joint goes, and its name passes to
the new base's free joint. Every joint keeps its name.

Reversed joints. A joint of transform ``T(q) = (R, p)`` (its child frame in its joint frame) reversed is the joint
of transform ``T(q)^-1``, and every kind reversed is a joint of the same kind. Its relative velocity, seen in its
new child frame (the old joint frame), is ``-phi^-*(T) H* qd``: Sol 17.1's hinge term with its sign changed. In
each kind's coordinates (`jaxmb.joints`; ``conj`` the quaternion conjugate, ``c, s = cos theta, sin theta``):

    kind       q'                                   qd'                                         axis
    screw      q                                    qd                                          -a
    spherical  conj(q)                              -R qd                                       -
    planar     [-(c x + s y), s x - c y, -theta]    -[c vx - s vy + w y, s vx + c vy - w x, w]  a (the normal)
    free       [-R* p, conj(quaternion)]            -[R omega; R v + p~ R omega]                -

Limits carry over where a coordinate maps to plus or minus itself (a negated coordinate swaps and negates its
bounds): a screw's, the quaternion components, the planar angle. Armature carries over where its kinetic energy
``1/2 qd* diag(armature) qd`` is the same in ``qd'``: any on a screw or the planar rotation, equal on the three
rotations of a spherical or free joint, none on the translations of a planar or free joint (their reversed rates
mix in the rotation). Limits or armature that do not carry over are refused (`ModelError`).

Frames. A reversed joint's child is the body it used to carry, and the joint moves that body's joint frame: so the
bodies of the path but ``b`` take as body frame the old frame of the joint above them on the path (``E``, its
placement in the old body frame). Their inertias, child placements and frames are re-expressed in it; every other
body keeps its frame. With ``V'(k) = phi*(E) V(k)`` the body velocities in the new frames:

    qd' = J_RG(q) qd,   M = J_RG* M' J_RG   (17.45),   K_e' = K_e   (17.46)
    Upsilon'(k) = phi*(E) Upsilon(k) phi(E)   (17.48, Lemma 17.4)

``J_RG`` (`rerooted_state`) puts ``b``'s body velocity ``V(b)`` in place of the old base's coordinates, the
table's block on each reversed joint's (the identity for a screw, a function of its ``q`` for the others), and the
identity on every other joint's. ``M`` and ``M'`` include the armature.
"""

import warnings

import jax.numpy as jnp
import numpy as np

from jaxmb.errors import ModelError
from jaxmb.joints import KINDS, Joint
from jaxmb.kinematics import body_velocities, forward_kinematics
from jaxmb.model import Model, ModelBuilder
from jaxmb.rotation import quat_to_matrix
from jaxmb.spatial import Transform, inverse, mv, phi_star_inv


def _conjugate(quaternion):
    return quaternion * jnp.array([1.0, -1.0, -1.0, -1.0], quaternion.dtype)


def _reversed_screw(q, qd):
    return q, qd


def _reversed_spherical(q, qd):
    return _conjugate(q), -mv(quat_to_matrix(q), qd)


def _reversed_planar(q, qd):
    x, y, theta = q
    vx, vy, w = qd
    c, s = jnp.cos(theta), jnp.sin(theta)
    return (jnp.stack([-(c * x + s * y), s * x - c * y, -theta]),
            -jnp.stack([c * vx - s * vy + w * y, s * vx + c * vy - w * x, w]))


def _reversed_free(q, qd):
    T = Transform(quat_to_matrix(q[3:]), q[:3])
    return jnp.concatenate([inverse(T).p, _conjugate(q[3:])]), -phi_star_inv(T, qd)


# kind -> (the map (q, qd) -> (q', qd') of the module docstring's table, the sign of the axis, the sign with which
# each coordinate of q' is the same coordinate of q (0: a mix of several, so no limits on it), which armature each
# velocity coordinate may keep ("any", "equal" on all marked so, "none"), and why)
_REVERSALS = {
    "screw": (_reversed_screw, -1.0, (1,), ("any",), ""),
    "spherical": (_reversed_spherical, 1.0, (1, -1, -1, -1), ("equal",) * 3,
                  "its rate reverses as -R(q) qd, which keeps only armature equal on its three rotations"),
    "planar": (_reversed_planar, 1.0, (0, 0, -1), ("none", "none", "any"),
               "its translation rates reverse mixed with the rotation rate, which keeps armature on the rotation "
               "only; and its x, y reverse mixed with theta, which keeps limits on theta only"),
    "free": (_reversed_free, 1.0, (0, 0, 0, 1, -1, -1, -1), ("equal",) * 3 + ("none",) * 3,
             "its rate reverses as -phi^-*(T(q)) qd, which keeps only armature equal on its three rotations and "
             "none on its translations; and its position reverses as -R* p, which keeps limits on its quaternion "
             "only"),
}


def _reversal(model, k):
    """The `_REVERSALS` entry of joint ``k``'s kind; a `ModelError` naming the model, the joint and its kind where
    its kind has none (every kind of `jaxmb.joints.KINDS` has one: a kind added there needs its reversal here)."""
    kind = model.topology.kinds[k]
    if kind not in _REVERSALS:
        raise ModelError(f"model {model.name!r}: re-rooting reverses the joint {model.joint_names[k]!r} of kind "
                         f"{kind!r} ({model.joint_types[k]}), for which no reversal is defined; kinds with one: "
                         f"{sorted(_REVERSALS)}")
    return _REVERSALS[kind]


def _pose(R, p):
    return np.asarray(R, float), np.asarray(p, float)


def _inverse(E):
    return E[0].T, -E[0].T @ E[1]


def _compose(A, B):
    return A[0] @ B[0], A[1] + A[0] @ B[1]


def _check_reversal(model, body, k):
    """Refuses joint ``k``, reversed by re-rooting at ``body``, where its limits or armature do not carry over."""
    name = model.joint_names[k]
    _, _, signs, keeps, why = _reversal(model, k)
    q, v = model.joint_coordinates(name)
    lower, upper = np.asarray(model.q_lower[q]), np.asarray(model.q_upper[q])
    armature = np.asarray(model.armature[v])
    keeps = np.asarray(keeps)
    limited = (np.asarray(signs) == 0) & (np.isfinite(lower) | np.isfinite(upper))
    equal = armature[keeps == "equal"]
    if np.any(limited) or np.any(armature[keeps == "none"] != 0) or np.any(equal != equal[:1]):
        what = "limits do" if np.any(limited) else "armature does"
        raise ModelError(f"model {model.name!r}: re-rooting at body {body!r} reverses the {model.joint_types[k]} "
                         f"joint {name!r}, whose {what} not carry over exactly (lower {lower.tolist()}, upper "
                         f"{upper.tolist()}, armature {armature.tolist()}): {why}")


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
    v = model.topology.v_offset[root]
    if np.any(np.asarray(model.armature[v : v + 6]) != 0):
        raise ModelError(f"model {model.name!r}: the root joint {model.joint_names[root]!r} has armature, which a "
                         "re-rooted tree has no joint for")
    for k in path[1:]:
        _check_reversal(model, body, k)
    return path


def reroot(model: Model, body: str) -> Model:
    """The model of the same free-flying tree with ``body`` as its base (module docstring). Bodies and joints keep
    their names; the new base's free joint takes the old base's joint name. Raises `ModelError` for a body the
    model lacks, a tree whose root joint is not free or has armature, a joint on the path whose limits or armature
    do not carry over to its reversal, or a model that is not a tree."""
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
        if k == path[-1] and len(path) > 1:
            joint, placement = Joint("free", KINDS["free"]), None
        else:
            lower, upper, axis_j = q_lower[qs], q_upper[qs], axis[j]
            if j != k:  # reversed: the old child frame of j, seen from its new frame, is E(j)^-1
                _, axis_sign, signs, _, _ = _reversal(model, j)
                signs = np.asarray(signs)
                lower, upper = (np.where(signs < 0, -upper, lower), np.where(signs < 0, -lower, upper))
                axis_j, placement = axis_sign * axis_j, _inverse(E[j])
            else:
                parent = new_parent[k]
                placement = X_tree[k] if parent is None else _compose(_inverse(E[parent]), X_tree[k])
            limits = {key: (None if np.all(np.isinf(x)) else tuple(x)) for key, x in (("lower", lower),
                                                                                    ("upper", upper))}
            joint = Joint(model.joint_types[j], KINDS[topo.kinds[j]], tuple(axis_j), tuple(coef[j]), **limits)
        R_E, p_E = E[k]
        com = R_E.T @ (np.asarray(model.com[k]) - p_E)
        inertia = R_E.T @ np.asarray(model.inertia[k]) @ R_E
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the model's inertias were judged when it was built
            b.add_body(names[k], None if new_parent[k] is None else names[new_parent[k]], joint,
                       joint_name=model.joint_names[j], placement=placement, mass=float(model.mass[k]), com=com,
                       inertia=inertia, armature=armature[vs])
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
    """``(q', qd')`` of ``rerooted`` (`reroot` of ``model``) for the state ``(q, qd)`` of ``model``: the new base's
    free joint at the base body's world pose and body velocity, each reversed joint's coordinates by the module
    docstring's table, every other joint's as they are, by name. ``qd'`` is linear in ``qd``: ``qd' = J_RG(q) qd``
    (17.45)."""
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
        carrier = rerooted.body_names[rerooted.joint_index(name)]
        if carrier == base:
            q_j, qd_j = jnp.concatenate([T.p[k], _quaternion(T.R[k])]), V[k]
        else:
            old_q, old_v = model.joint_coordinates(name)
            q_j, qd_j = q[old_q], qd[old_v]
            if carrier != model.body_names[model.joint_index(name)]:  # reversed
                q_j, qd_j = _reversal(model, model.joint_index(name))[0](q_j, qd_j)
        q_new, qd_new = q_new.at[q_slice].set(q_j), qd_new.at[v_slice].set(qd_j)
    return q_new, qd_new
