"""Random trees and states for tests and teaching.

`random_model` draws a tree with a chosen joint mix, random placements and valid random inertias; the dense
operators of a model (to check identities such as ``M = H phi M phi* H*`` (9.3) against the O(N) recursions)
are in `jaxmb.operators`.
"""

import jax
import numpy as np

from jaxmb import joints
from jaxmb.configuration import random_configuration
from jaxmb.model import ModelBuilder


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


def random_model(seed, n_bodies=8, joint_mix="mixed", floating_base=False, branching=0.5, gravity=(0, 0, -9.81),
                 parents=None):
    """A random tree of ``n_bodies`` bodies. ``branching`` in [0, 1]: 0 gives a chain, 1 a bushy tree; or a given
    shape, ``parents`` (n_bodies,) with ``parents[i] < i`` and -1 for body 0 (e.g. ``(i - 1) // 2``: a balanced
    binary tree).

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
            if parents is not None:
                parent = f"b{parents[i]}"
            elif rng.uniform() > branching:
                parent = f"b{i - 1}"
            else:
                parent = f"b{rng.integers(0, i)}"
            joint = _random_joint(rng, kinds[rng.integers(0, len(kinds))])
        m, c, I = random_inertia(rng)
        placement = (_random_rotation(rng), rng.uniform(-0.5, 0.5, 3))
        b.add_body(f"b{i}", parent, joint, joint_name=f"j{i}" if i or not floating_base else "root",
                   placement=placement, mass=m, com=c, inertia=I)
    return b.build()


def random_state(model, key):
    """``(q, qd, qdd_or_tau)`` drawn at random: a random configuration and standard-normal rates."""
    k1, k2, k3 = jax.random.split(key, 3)
    dtype = model.mass.dtype
    return (random_configuration(model, k1), jax.random.normal(k2, (model.nv,), dtype),
            jax.random.normal(k3, (model.nv,), dtype))
