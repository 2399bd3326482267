"""Random trees and states, and a fixed double pendulum, for tests, benchmarks and teaching.

`random_model` draws a tree with a chosen joint mix, random placements, valid random inertias and, optionally,
armature; `double_pendulum` is the two-link chain of the long-horizon energy comparisons of the symplectic steps.
The dense operators of a model (to check identities such as ``M = H phi M phi* H* + diag(armature)`` (9.3)
against the O(N) recursions) are in `jaxmb.operators`.
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
                 parents=None, armature=False):
    """A random tree of ``n_bodies`` bodies. ``branching`` in [0, 1]: 0 gives a chain, 1 a bushy tree; or a given
    shape, ``parents`` (n_bodies,) with ``parents[i] < i`` and -1 for body 0 (e.g. ``(i - 1) // 2``: a balanced
    binary tree).

    Joint kinds cycle through ``JOINT_MIXES[joint_mix]`` (or a given tuple); with ``floating_base`` body 0 is
    joined to the world by a free joint. With ``armature`` every velocity coordinate gets a random positive
    armature in [0.01, 0.2], drawn from a generator of its own: the tree is the one drawn without it.
    """
    rng = np.random.default_rng(seed)
    armature_rng = np.random.default_rng((seed, 1))
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
        a = armature_rng.uniform(0.01, 0.2, joint.kind.nv) if armature and joint.kind is not None else None
        b.add_body(f"b{i}", parent, joint, joint_name=f"j{i}" if i or not floating_base else "root",
                   placement=placement, mass=m, com=c, inertia=I, armature=a)
    return b.build()


def double_pendulum():
    """A planar double pendulum under gravity ``(0, 0, -9.81)``: two 1 kg links of 1 m, each joined to its parent
    by a revolute joint about y, the lower one at the tip of the upper; each link's centre of mass at its middle,
    with central inertia ``diag(1e-3, 1e-2, 1e-2)``. At ``q = 0`` both links lie along +x; from a state away
    from the bottom its motion is chaotic, which makes it a test of an integrator's energy behaviour over long
    horizons rather than of one trajectory."""
    b = ModelBuilder("double_pendulum", gravity=(0.0, 0.0, -9.81))
    link = dict(mass=1.0, com=(0.5, 0.0, 0.0), inertia=np.diag([1e-3, 1e-2, 1e-2]))
    b.add_body("upper", None, joints.revolute((0.0, 1.0, 0.0)), **link)
    b.add_body("lower", "upper", joints.revolute((0.0, 1.0, 0.0)), placement=(np.eye(3), (1.0, 0.0, 0.0)), **link)
    return b.build()


def random_state(model, key):
    """``(q, qd, qdd_or_tau)`` drawn at random: a random configuration and standard-normal rates."""
    k1, k2, k3 = jax.random.split(key, 3)
    dtype = model.mass.dtype
    return (random_configuration(model, k1), jax.random.normal(k2, (model.nv,), dtype),
            jax.random.normal(k3, (model.nv,), dtype))


def random_loop_model(seed, n_bodies=8, floating_base=False, closures=("ball",), couplings=1, branching=0.6):
    """A random tree of 1-dof screw joints (under a free base with ``floating_base``) closed by random loops,
    and a configuration ``q`` (nq,) at which every loop is closed: ``(LoopModel, q)``.

    Each entry of ``closures`` (a `jaxmb.loops.loop_closure` kind) joins a random frame on one body to the
    coincident frame on another body whose loop has enough joints for it; ``couplings`` random gear couplings
    join pairs of joints. The frames are placed from the tree's pose at a random configuration, so the loops
    are closed there; the independent coordinates are chosen automatically at it.
    """
    import jax.numpy as jnp

    from jaxmb import loops
    from jaxmb.kinematics import forward_kinematics
    from jaxmb.loops.constraints import CLOSURES, common_ancestor, tree_path
    from jaxmb.spatial import Transform, compose, inverse

    tree = random_model(seed, n_bodies, "screw", floating_base, branching)
    rng = np.random.default_rng((seed, 2))
    q = random_configuration(tree, jax.random.PRNGKey(seed))
    T = forward_kinematics(tree, q)
    topo = tree.topology
    first = 1 if floating_base else 0
    constraints, used = [], set()
    for kind in closures:
        for _ in range(200):
            a, b = (int(x) for x in rng.choice(np.arange(first, tree.nb), 2, replace=False))
            top = common_ancestor(topo, [a, b])
            loop = set(tree_path(topo, top, a)) | set(tree_path(topo, top, b))
            if len(loop) > CLOSURES[kind] and first not in loop:
                break
        else:
            raise ValueError(f"seed {seed}: no pair of bodies closes a {kind} loop")
        used |= loop
        Pa = (_random_rotation(rng), rng.uniform(-0.2, 0.2, 3))
        Ta = compose(Transform(T.R[a], T.p[a]), Transform(jnp.asarray(Pa[0]), jnp.asarray(Pa[1])))
        Pb = compose(inverse(Transform(T.R[b], T.p[b])), Ta)
        axis = rng.normal(size=3)
        constraints.append(loops.loop_closure(tree.body_names[a], tree.body_names[b], Pa,
                                              (np.asarray(Pb.R), np.asarray(Pb.p)), kind, axis))
    for _ in range(couplings):
        free = [i for i in range(first, tree.nb) if i not in used]
        if len(free) < 2:
            break
        j, r = (int(x) for x in rng.choice(free, 2, replace=False))
        used |= {j, r}
        ratio = rng.uniform(-3, 3)
        offset = float(q[topo.q_offset[j]] - ratio * q[topo.q_offset[r]])
        constraints.append(loops.coupling(tree.joint_names[j], tree.joint_names[r], ratio, offset))
    return loops.close_loops(tree, constraints, q_reference=q), q
