"""MuJoCo's fluid of an MJCF scene, read from the compiled model (`jaxmb.sim.fluid`).

The fluid is the file's ``opt.density``, ``opt.viscosity`` and ``opt.wind``, and acts where either number is
positive on every MuJoCo body of positive mass that moves: by the ellipsoid model where one of its geoms has
``fluidshape="ellipsoid"`` (MuJoCo's ``geom_fluid``: the geoms whose interaction flag is set, each with its
semi-axes, ``fluidcoef`` and the added mass and inertia MuJoCo's compiler computes from the semi-axes), else by the
inertia-box model in the principal axes of the body's inertia (``body_iquat``). A body of the inertia-box model
must be alone on its jaxmb body: one welded to its parent, or carrying welded children with mass, has a box of its
own inertia in MuJoCo and of the merged inertia in jaxmb, so it goes to the scene's left-out entries (category
``"fluid"``).
"""

import numpy as np

from jaxmb.sim.fluid import fluid

_MINVAL = 1e-15


def semiaxes(mj, g) -> np.ndarray:
    """(3,) the semi-axes MuJoCo gives geom ``g`` in its fluid model (``mju_geomSemiAxes``): a sphere's radius
    thrice, a capsule's ``(r, r, h + r)``, a cylinder's ``(r, r, h)``, else its three sizes."""
    size = np.asarray(mj.geom_size[g], float)
    kind = int(mj.geom_type[g])
    if kind == 2:
        return np.full(3, size[0])
    if kind == 3:
        return np.array([size[0], size[0], size[1] + size[0]])
    if kind == 5:
        return np.array([size[0], size[0], size[1]])
    return size.copy()


def mjcf_fluid(mj, tree, m, names):
    """``(fluid, left)``: the `jaxmb.sim.fluid.Fluid` of the compiled model ``mj`` on ``tree`` (None where the
    file has no fluid, or where it acts on no body of the scene), and the bodies it cannot take (module docstring),
    each an entry string for the scene's left-out list."""
    if not (mj.opt.density > 0 or mj.opt.viscosity > 0):
        return None, []
    index = np.asarray(m.body_index)
    massive = [b for b in range(1, mj.nbody) if mj.body_mass[b] >= _MINVAL and index[b] >= 0]
    carried = {}
    for b in massive:
        carried.setdefault(int(index[b]), []).append(b)
    boxes, axes, ellipsoids, merged = [], [], [], []
    for b in massive:
        k = int(index[b])
        geoms = range(mj.body_geomadr[b], mj.body_geomadr[b] + mj.body_geomnum[b])
        shaped = [g for g in geoms if mj.geom_fluid[g, 0] > 0]
        if shaped:
            for g in shaped:
                _, T = m.pose_on_body(b, mj.geom_pos[g], mj.geom_quat[g])
                coef = np.asarray(mj.geom_fluid[g], float)
                ellipsoids.append(dict(body=tree.body_names[k], R=np.asarray(T.R), p=np.asarray(T.p),
                                       semiaxes=semiaxes(mj, g), coefficients=coef[1:6], added_mass=coef[6:9],
                                       added_inertia=coef[9:12]))
        elif len(carried[k]) > 1:
            merged.append(names.bodies[b])
        else:
            _, T = m.pose_on_body(b, mj.body_ipos[b], mj.body_iquat[b])
            boxes.append(tree.body_names[k])
            axes.append(np.asarray(T.R))
    left = []
    if merged:
        left.append("fluid forces (inertia box) of bodies merged with welded bodies of mass: "
                    + ", ".join(repr(n) for n in merged))
    if not boxes and not ellipsoids:
        return None, left
    fl = fluid(tree, float(mj.opt.density), float(mj.opt.viscosity), np.asarray(mj.opt.wind, float), boxes,
               np.asarray(axes).reshape(-1, 3, 3), ellipsoids)
    return fl, left
