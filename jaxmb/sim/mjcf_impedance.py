"""MuJoCo's constraint numbers of an MJCF scene's rows, read from the compiled model (`jaxmb.sim.impedance`).

Each contact slot takes its geom pair's numbers as MuJoCo's collision pass assigns them (``mj_contactParam``): an
explicit ``<pair>``'s own ``solref``, ``solimp``, ``margin`` and ``gap``; else the geom of higher ``priority``'s
``solref`` and ``solimp``, or at equal priority their mix by ``solmix`` (``solimp`` and a positive ``solref``
weighted by ``solmix_1 / (solmix_1 + solmix_2)``, a direct ``solref`` the smaller of each number). The margin is
the installed MuJoCo's: from MuJoCo 4 the sum of the two geoms' margins (a pair's own margin), gaps unused; before
it the larger margin less the larger gap (a pair's margin less its gap). Each slot's inverse inertia is the
translational ``body_invweight0`` of its two geoms' bodies; a limited coordinate and a ball joint's range take the joint's ``jnt_solref``, ``jnt_solimp`` and
``jnt_margin``, a joint-friction row its degree of freedom's ``dof_solref`` and ``dof_solimp``; every coordinate its
``dof_invweight0``; the scene
the file's ``opt.impratio``.
"""

import numpy as np

from jaxmb.sim.impedance import with_mujoco_impedance

_MINVAL = 1e-15


def _margins_add():
    """Whether the installed MuJoCo adds the two geoms' margins and leaves gaps unused (MuJoCo 4)."""
    import mujoco

    return int(mujoco.__version__.split(".")[0]) >= 4


def _mixed(mj, g1, g2):
    """``(solref (2,), solimp (5,), margin, gap)`` of the geoms ``g1``, ``g2`` without an explicit pair (MuJoCo's
    ``geom1`` the one of lower type, whose ``solmix`` weighs its numbers)."""
    if mj.geom_type[g1] > mj.geom_type[g2]:
        g1, g2 = g2, g1
    if _margins_add():
        margin, gap = mj.geom_margin[g1] + mj.geom_margin[g2], 0.0
    else:
        margin, gap = max(mj.geom_margin[g1], mj.geom_margin[g2]), max(mj.geom_gap[g1], mj.geom_gap[g2])
    p1, p2 = mj.geom_priority[g1], mj.geom_priority[g2]
    if p1 != p2:
        g = g1 if p1 > p2 else g2
        return mj.geom_solref[g], mj.geom_solimp[g], margin, gap
    s1, s2 = mj.geom_solmix[g1], mj.geom_solmix[g2]
    if s1 >= _MINVAL and s2 >= _MINVAL:
        mix = s1 / (s1 + s2)
    else:
        mix = 0.5 if (s1 < _MINVAL and s2 < _MINVAL) else (0.0 if s1 < _MINVAL else 1.0)
    r1, r2 = mj.geom_solref[g1], mj.geom_solref[g2]
    solref = mix * r1 + (1 - mix) * r2 if (r1[0] > 0 and r2[0] > 0) else np.minimum(r1, r2)
    solimp = mix * mj.geom_solimp[g1] + (1 - mix) * mj.geom_solimp[g2]
    return solref, solimp, margin, gap


def mujoco_impedance(mj, scene, mujoco_map, geom_ids):
    """``scene`` (of ``mj``, with the Newton solver) with MuJoCo's soft constraints and the file's numbers (module
    docstring); ``geom_ids`` the MuJoCo geom of each scene geom."""
    pairs = {}
    for k in range(mj.npair):
        pairs[frozenset((int(mj.pair_geom1[k]), int(mj.pair_geom2[k])))] = k
    solref, solimp, margin, gap, weight = [], [], [], [], []
    if scene.nc:
        for a, b in zip(scene.pairs.contact_a, scene.pairs.contact_b):
            g1, g2 = int(geom_ids[a]), int(geom_ids[b])
            k = pairs.get(frozenset((g1, g2)))
            if k is not None:
                numbers = (mj.pair_solref[k], mj.pair_solimp[k], mj.pair_margin[k],
                           0.0 if _margins_add() else mj.pair_gap[k])
            else:
                numbers = _mixed(mj, g1, g2)
            for out, x in zip((solref, solimp, margin, gap), numbers):
                out.append(np.asarray(x, float))
            weight.append(sum(mj.body_invweight0[mj.geom_bodyid[g], 0] for g in (g1, g2)))
    dof_of = np.empty(mj.nv, int)
    dof_of[np.asarray(mujoco_map.v_index, int)] = np.arange(mj.nv)  # the MuJoCo dof of each jaxmb coordinate
    joints = [int(mj.dof_jntid[dof_of[j]]) for _, j in scene.options.limited]
    dofs = [int(dof_of[j]) for j in scene.options.friction]
    dof_weight = np.zeros(mj.nv)
    dof_weight[np.asarray(mujoco_map.v_index, int)] = mj.dof_invweight0
    nc = scene.nc
    contact = (np.reshape(solref, (nc, 2)), np.reshape(solimp, (nc, 5)), np.reshape(margin, (nc,)),
               np.reshape(gap, (nc,)))
    limit = (mj.jnt_solref[joints].reshape(-1, 2), mj.jnt_solimp[joints].reshape(-1, 5), mj.jnt_margin[joints])
    friction = (mj.dof_solref[dofs].reshape(-1, 2), mj.dof_solimp[dofs].reshape(-1, 5))
    balls = [int(mj.dof_jntid[dof_of[j]]) for _, j in scene.options.ball_limited]
    ball = (mj.jnt_solref[balls].reshape(-1, 2), mj.jnt_solimp[balls].reshape(-1, 5), mj.jnt_margin[balls])
    return with_mujoco_impedance(scene, impratio=float(mj.opt.impratio), contact=contact, limit=limit,
                                 friction=friction, contact_weight=np.reshape(weight, (nc,)), dof_weight=dof_weight,
                                 ball=ball)
