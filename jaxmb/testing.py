"""Random trees and dense reference operators, for tests and teaching.

`random_model` draws a tree with a chosen joint mix, random placements and valid random inertias.
`dense_operators` builds the book's stacked operators (E_phi, phi, H, M) of a model at one configuration as
dense matrices, in the model's body order, so identities such as ``M = H phi M phi* H*`` (9.3) can be checked
against the O(N) recursions.
"""

from typing import NamedTuple

import jax
import numpy as np

from jaxmb import joints
from jaxmb.configuration import random_configuration
from jaxmb.hinges import body_inertias, hinge_map, joint_poses
from jaxmb.model import ModelBuilder
from jaxmb.spatial import phi_matrix


def _random_rotation(rng):
    q = rng.normal(size=4)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def random_inertia(rng):
    """(mass, com, I_c) of a random solid box: a valid inertia (triangle inequality holds)."""
    m = rng.uniform(0.5, 3.0)
    a, b, c = rng.uniform(0.05, 0.5, 3)
    I = m / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    R = _random_rotation(rng)
    return m, rng.uniform(-0.2, 0.2, 3), R @ I @ R.T


JOINT_MIXES = {
    "revolute": ("revolute",),
    "mixed": ("revolute", "prismatic", "helical", "spherical", "planar", "revolute"),
    "screw": ("revolute", "prismatic", "helical"),
}


def _random_joint(rng, kind):
    axis = rng.normal(size=3)
    if kind == "revolute":
        return joints.revolute(axis)
    if kind == "prismatic":
        return joints.prismatic(axis)
    if kind == "helical":
        return joints.helical(axis, pitch=rng.uniform(-0.2, 0.2))
    return {"spherical": joints.spherical, "planar": joints.planar, "fixed": joints.fixed}[kind]()


def random_model(seed, n_bodies=8, joint_mix="mixed", floating_base=False, branching=0.5, gravity=(0, 0, -9.81)):
    """A random tree of ``n_bodies`` bodies. ``branching`` in [0, 1]: 0 gives a chain, 1 a bushy tree.

    Joint kinds cycle through ``JOINT_MIXES[joint_mix]`` (or a given tuple); with ``floating_base`` body 0 is
    joined to the world by a free joint.
    """
    rng = np.random.default_rng(seed)
    kinds = JOINT_MIXES.get(joint_mix, joint_mix)
    b = ModelBuilder(f"random-{seed}", gravity=gravity)
    for i in range(n_bodies):
        if i == 0:
            parent = None
            joint = joints.free() if floating_base else _random_joint(rng, kinds[0])
        else:
            parent = f"b{i - 1}" if rng.uniform() > branching else f"b{rng.integers(0, i)}"
            joint = _random_joint(rng, kinds[rng.integers(0, len(kinds))])
        m, c, I = random_inertia(rng)
        placement = (_random_rotation(rng), rng.uniform(-0.5, 0.5, 3))
        b.add_body(f"b{i}", parent, joint, joint_name=f"j{i}" if i or not floating_base else "root",
                   placement=placement, mass=m, com=c, inertia=I)
    return b.build()


class DenseOperators(NamedTuple):
    """The book's stacked operators at one configuration (bodies in model order, 6-blocks angular first).

    E_phi (6nb, 6nb): block (parent k, k) = phi(parent k, k).   phi = (I - E_phi)^-1 (8.14).
    H (nv, 6nb): block-diagonal hinge maps.   M (6nb, 6nb): block-diagonal body inertias.
    """

    E_phi: np.ndarray
    phi: np.ndarray
    H: np.ndarray
    M: np.ndarray


def dense_operators(model, q) -> DenseOperators:
    nb, nv = model.nb, model.nv
    X = joint_poses(model, q)
    phis = np.asarray(phi_matrix(X))
    E = np.zeros((6 * nb, 6 * nb))
    for k, p in enumerate(model.topology.parent):
        if p >= 0:
            E[6 * p : 6 * p + 6, 6 * k : 6 * k + 6] = phis[k]
    Hrows = np.asarray(hinge_map(model))
    H = np.zeros((nv, 6 * nb))
    for i, k in enumerate(model.topology.dof_body):
        H[i, 6 * k : 6 * k + 6] = Hrows[i]
    Mb = np.asarray(body_inertias(model))
    M = np.zeros((6 * nb, 6 * nb))
    for k in range(nb):
        M[6 * k : 6 * k + 6, 6 * k : 6 * k + 6] = Mb[k]
    return DenseOperators(E, np.linalg.inv(np.eye(6 * nb) - E), H, M)


def random_state(model, key):
    """``(q, qd, qdd_or_tau)`` drawn at random: a random configuration and standard-normal rates."""
    k1, k2, k3 = jax.random.split(key, 3)
    dtype = model.mass.dtype
    return (random_configuration(model, k1), jax.random.normal(k2, (model.nv,), dtype),
            jax.random.normal(k3, (model.nv,), dtype))
