"""MuJoCo's soft constraints: every row of the Newton solver as MuJoCo states it, from ``solref``, ``solimp``,
margins, gaps and ``impratio``.

MuJoCo (Todorov, Convex and analytically-invertible dynamics with contacts and constraints, 2014; the MuJoCo
documentation, "Computation", "Soft constraints") gives each constraint row at the position ``r`` (a contact's
signed distance, a limit's distance to its bound, zero for joint friction) with the row velocity ``u = J v``:

    d(r)    the impedance in (0, 1), from ``solimp = (d0, dwidth, width, midpoint, power)``: ``d0`` at
            ``|r - m| = 0``, rising along ``y(x)`` (``a x^p`` to the midpoint, ``1 - b (1 - x)^p`` after it, ``x =
            |r - m| / width``) to ``dwidth`` at ``|r - m| >= width``, ``m`` the row's margin
    K, B    stiffness and damping of the reference acceleration ``a_ref = -B u - K d (r - m)``, from ``solref``:
            ``(timeconst, dampratio)`` gives ``K = 1 / (dwidth^2 timeconst^2 dampratio^2)``, ``B = 2 / (dwidth
            timeconst)``, ``timeconst`` at least ``2 dt`` (MuJoCo's ``refsafe``); ``(-stiffness, -damping)`` gives
            ``K = stiffness / dwidth^2``, ``B = damping / dwidth``; a friction row has ``K = 0``
    R       the regularization ``(1 - d) / d`` times the row's approximate inverse inertia ``A_ii``: a contact's
            ``invweight0`` of its two bodies (translational, MuJoCo's ``body_invweight0``), a joint row's
            ``dof_invweight0``, both at the reference configuration; an elliptic contact's friction rows ``R_n /
            impratio``, a pyramid's edges all ``2 mu^2 R_n / impratio`` with ``R_n`` from ``A_ii (1 + mu^2)``

and solves for the accelerations ``a`` that minimize ``0.5 (a - a0)* M (a - a0) + s(J a - a_ref)`` with the
rows' penalties ``s`` of stiffness ``1/R``. With ``v+ = v + dt a`` this is the velocity problem of
`jaxmb.sim.newton` with ``D = 1/R`` and the target ``v_star = u + dt a_ref = (1 - dt B) u - dt K d (r - m)``. A
contact takes part where ``r`` is below its margin less its gap, a limit where ``r`` is below its margin; elsewhere
its row has ``D = 0`` (no impulse, nothing in the Hessian), since the scene's rows are fixed.

The numbers are leaves (`Impedance`): randomized or differentiated like every other scene number. `mujoco_rows`
builds the scene's rows; `with_mujoco_impedance` gives a scene MuJoCo's rows, with the numbers of an MJCF file
(`jaxmb.sim.load_mjcf_scene` reads them) or MuJoCo's defaults.
"""

import dataclasses
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from jaxmb.configuration import neutral_configuration
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.errors import ModelError
from jaxmb.kinematics import forward_kinematics, jacobian_rows
from jaxmb.model import pytree_dataclass
from jaxmb.spatial import Transform

SOLREF = (0.02, 1.0)
"""MuJoCo's default ``solref``: a time constant of 20 ms, critical damping."""

SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
"""MuJoCo's default ``solimp``."""

MIN_IMPEDANCE, MAX_IMPEDANCE = 1e-4, 0.9999  # MuJoCo's mjMINIMP, mjMAXIMP
_MINVAL = 1e-15  # MuJoCo's mjMINVAL


@pytree_dataclass
@dataclass(frozen=True)
class Impedance:
    """MuJoCo's constraint numbers of a scene's rows (leaves; module docstring).

    contact_solref (nc, 2), contact_solimp (nc, 5), contact_margin (nc,), contact_gap (nc,)   per contact slot
    limit_solref (nl, 2), limit_solimp (nl, 5), limit_margin (nl,)      per limited coordinate (`Options.limited`)
    friction_solref (nf, 2), friction_solimp (nf, 5)       per joint-friction row (`Options.friction`)
    contact_weight (nc,)   each contact slot's approximate inverse inertia: the translational ``invweight0`` of its
                           two geoms' bodies, summed (1/kg)
    dof_weight (nv,)       each coordinate's ``dof_invweight0``
    impratio ()            the ratio of a contact's frictional to normal impedance
    ball_solref (nbl, 2), ball_solimp (nbl, 5), ball_margin (nbl,)      per limited ball joint
                           (`Options.ball_limited`, `jaxmb.sim.ball_limits`)
    """

    contact_solref: jnp.ndarray
    contact_solimp: jnp.ndarray
    contact_margin: jnp.ndarray
    contact_gap: jnp.ndarray
    limit_solref: jnp.ndarray
    limit_solimp: jnp.ndarray
    limit_margin: jnp.ndarray
    friction_solref: jnp.ndarray
    friction_solimp: jnp.ndarray
    contact_weight: jnp.ndarray
    dof_weight: jnp.ndarray
    impratio: jnp.ndarray
    ball_solref: jnp.ndarray
    ball_solimp: jnp.ndarray
    ball_margin: jnp.ndarray

    def replace(self, **changes) -> "Impedance":
        return dataclasses.replace(self, **changes)


def impedance(solimp, r):
    """MuJoCo's impedance ``d`` (...) at the positions ``r`` less the margin (...), ``solimp`` (..., 5) (module
    docstring), its numbers clamped as MuJoCo clamps them; smooth in both where ``y`` is."""
    d0 = jnp.clip(solimp[..., 0], MIN_IMPEDANCE, MAX_IMPEDANCE)
    d1 = jnp.clip(solimp[..., 1], MIN_IMPEDANCE, MAX_IMPEDANCE)
    width = jnp.maximum(solimp[..., 2], 0.0)
    mid = jnp.clip(solimp[..., 3], MIN_IMPEDANCE, MAX_IMPEDANCE)
    power = jnp.maximum(solimp[..., 4], 1.0)
    flat = (d0 == d1) | (width <= _MINVAL)
    x = jnp.abs(r) / jnp.where(flat, 1.0, width)
    inside = (x > 0) & (x < 1) & ~flat
    xs = jnp.where(inside, x, 0.5)  # powers evaluated inside (0, 1) only: no NaN in a derivative
    y = jnp.where(power == 1, xs, jnp.where(xs <= mid, xs ** power / mid ** (power - 1),
                                            1 - (1 - xs) ** power / (1 - mid) ** (power - 1)))
    d = jnp.where(x >= 1, d1, jnp.where(inside, d0 + y * (d1 - d0), d0))
    return jnp.where(flat, 0.5 * (d0 + d1), d)


def stiffness_damping(solref, solimp, dt):
    """``(K, B)`` (...) of the reference acceleration from ``solref`` (..., 2) and ``solimp`` (..., 5) at the time
    step ``dt`` (module docstring)."""
    d1 = jnp.clip(solimp[..., 1], MIN_IMPEDANCE, MAX_IMPEDANCE)
    timeconst, ratio = solref[..., 0], solref[..., 1]
    standard = timeconst > 0
    timeconst = jnp.where(standard, jnp.maximum(timeconst, 2 * dt), timeconst)
    K = jnp.where(standard, 1 / jnp.maximum(_MINVAL, d1 * d1 * timeconst * timeconst * ratio * ratio),
                  -timeconst / jnp.maximum(_MINVAL, d1 * d1))
    B = jnp.where(ratio > 0, 2 / jnp.maximum(_MINVAL, d1 * timeconst), -ratio / jnp.maximum(_MINVAL, d1))
    return K, B


def _soft(solref, solimp, r, margin, u, dt, weight, spring=True):
    """``(R, v_star)`` of rows at the positions ``r`` with the margins ``margin``, the row velocities ``u`` and the
    inverse inertias ``weight`` (module docstring); ``spring=False``: a friction row (``K = 0``)."""
    d = impedance(solimp, r - margin)
    K, B = stiffness_damping(solref, solimp, dt)
    R = jnp.maximum(_MINVAL, (1 - d) / d * weight)
    v_star = (1 - dt * B) * u - (dt * K * d * (r - margin) if spring else 0.0)
    return R, v_star


def mujoco_rows(scene, dt, dist, u, mu, elliptic, limit_dist):
    """``(D, v_star)`` (n,) of the Newton solver's rows in its order (contacts: three rows each on the elliptic
    cone, four pyramid edges otherwise; then the limit rows, then the joint-friction rows) by MuJoCo's rule: ``dist``
    (nc,) the contact slots' signed distances (None without contact rows), ``u`` (n,) the rows' velocities ``J v``,
    ``mu`` (nc,) the slots' friction, ``limit_dist`` (nl,) each limited coordinate's distance to its nearer bound."""
    imp, dtype = scene.impedance, u.dtype
    D, v_star, start = [], [], 0
    if dist is not None:
        nc = dist.shape[0]
        k = 3 if elliptic else 4
        weight = imp.contact_weight
        included = imp.contact_margin - imp.contact_gap
        active = dist < included
        u_c = u[: k * nc].reshape(nc, k)
        if elliptic:  # one R on the cone's three rows (impratio 1: `with_mujoco_impedance`)
            R_n, v_n = _soft(imp.contact_solref, imp.contact_solimp, dist, included, u_c[:, 0], dt, weight)
            _, B = stiffness_damping(imp.contact_solref, imp.contact_solimp, dt)
            v_t = (1 - dt * B)[:, None] * u_c[:, 1:]  # the friction rows: K = 0
            D_c = jnp.repeat(jnp.where(active, 1 / R_n, 0.0)[:, None], 3, 1)
            v_c = jnp.concatenate([v_n[:, None], v_t], 1)
        else:
            R_n, v_c = _soft(imp.contact_solref[:, None], imp.contact_solimp[:, None], dist[:, None],
                             included[:, None], u_c, dt, (weight * (1 + mu * mu))[:, None])
            R_edge = 2 * mu[:, None] ** 2 / imp.impratio * R_n
            D_c = jnp.broadcast_to(jnp.where(active[:, None], 1 / R_edge, 0.0), (nc, 4))
        D.append(D_c.reshape(-1))
        v_star.append(v_c.reshape(-1))
        start = k * nc
    limited, friction = scene.options.limited, scene.options.friction
    if limited:
        vi = np.asarray([j for _, j in limited], int)
        n = len(vi)
        R, v = _soft(imp.limit_solref, imp.limit_solimp, limit_dist, imp.limit_margin, u[start:start + n], dt,
                     imp.dof_weight[vi])
        D.append(jnp.where(limit_dist < imp.limit_margin, 1 / R, 0.0))
        v_star.append(v)
        start += n
    if friction:
        fi = np.asarray(friction, int)
        n = len(fi)
        R, v = _soft(imp.friction_solref, imp.friction_solimp, jnp.zeros(n, dtype), 0.0, u[start:start + n], dt,
                     imp.dof_weight[fi], spring=False)
        D.append(1 / R)
        v_star.append(v)
    if not D:
        return jnp.zeros(0, dtype), jnp.zeros(0, dtype)
    if not D:
        return jnp.zeros(0, dtype), jnp.zeros(0, dtype)
    return jnp.concatenate(D).astype(dtype), jnp.concatenate(v_star).astype(dtype)


def reference_weights(model, q0):
    """``(body_weight (nb,), dof_weight (nv,))``: MuJoCo's ``invweight0`` of ``model`` (a tree) at ``q0``: the mean of
    the translational diagonal of ``J_c M^-1 J_c*`` for each body's centre of mass Jacobian ``J_c``, and each joint's
    mean diagonal of ``M^-1`` over its coordinates (a free joint's translations and rotations apart), as MuJoCo's
    ``mj_setConst`` computes them at ``qpos0``."""
    M_inv = np.linalg.inv(np.asarray(mass_matrix(model, q0), float))
    T = forward_kinematics(model, q0)
    com = T.p + jnp.einsum("bij,bj->bi", T.R, model.com)
    frames = Transform(jnp.broadcast_to(jnp.eye(3, dtype=T.p.dtype), (model.nb, 3, 3)), com)
    rows = np.asarray(jacobian_rows(model, T, frames, np.arange(model.nb)), float)  # (nb, nv, 6) [w; v] world
    J_v = np.swapaxes(rows[:, :, 3:], 1, 2)  # (nb, 3, nv)
    body = np.einsum("bin,nm,bim->b", J_v, M_inv, J_v) / 3
    diag = np.diag(M_inv).copy()
    topo = model.topology
    dof = diag.copy()
    for k in range(model.nb):
        a, n = int(topo.v_offset[k]), int(topo.nv_body[k])
        if model.topology.kinds[k] == "free":
            dof[a:a + 3] = diag[a:a + 3].mean()
            dof[a + 3:a + 6] = diag[a + 3:a + 6].mean()
        elif n > 1:
            dof[a:a + n] = diag[a:a + n].mean()
    return body, dof


def with_mujoco_impedance(scene, solref=SOLREF, solimp=SOLIMP, margin=0.0, gap=0.0, impratio=1.0, contact=None,
                          limit=None, friction=None, contact_weight=None, dof_weight=None, q0=None, ball=None):
    """``scene`` with MuJoCo's rows (module docstring): ``solref``, ``solimp``, ``margin`` and ``gap`` for every row
    (contacts' margins and gaps; limits' margins), replaced per row group by ``contact = (solref (nc, 2), solimp
    (nc, 5), margin (nc,), gap (nc,))``, ``limit = (solref (nl, 2), solimp (nl, 5), margin (nl,))`` and ``friction =
    (solref (nf, 2), solimp (nf, 5))`` and ``ball = (solref (nbl, 2), solimp (nbl, 5), margin (nbl,))`` (the ranges of
    ball joints) where given; ``contact_weight`` (nc,) and ``dof_weight`` (nv,) MuJoCo's
    ``invweight0`` (default: `reference_weights` at ``q0``, the neutral configuration by default, a slot's the sum
    of its two geoms' bodies'). The tendon rows and the equality rows that have no numbers yet take ``solref`` and
    ``solimp`` (the tendons' limits ``margin``) and MuJoCo's default weights (`jaxmb.sim.tendons.with_tendon_impedance`,
    `jaxmb.sim.equality_rows.with_equality_impedance`; call those for other numbers). The scene's
    solver must be ``"newton"``; an elliptic cone needs ``impratio`` 1 (its rows share one stiffness)."""
    options = scene.options
    if options.solver != "newton":
        raise ModelError("MuJoCo's soft constraints are rows of solver='newton'")
    if options.contact != "constraint" and scene.nc:
        raise ModelError("MuJoCo's soft constraints are constraint contact; contact='compliant' has none")
    if options.cone == "elliptic" and impratio != 1.0:
        raise ModelError(f"impratio {impratio!r}: an elliptic cone's rows share one stiffness here (impratio 1); "
                         "cone='pyramidal' takes any impratio")
    tree = scene.tree
    dtype = tree.mass.dtype
    nc, nl, nf, nbl = scene.nc, len(options.limited), len(options.friction), len(options.ball_limited)

    def rows(n, value, width):
        return np.broadcast_to(np.asarray(value, float), (n, width) if width else (n,))

    contact = contact or (rows(nc, solref, 2), rows(nc, solimp, 5), rows(nc, margin, 0), rows(nc, gap, 0))
    limit = limit or (rows(nl, solref, 2), rows(nl, solimp, 5), rows(nl, margin, 0))
    friction = friction or (rows(nf, solref, 2), rows(nf, solimp, 5))
    ball = ball or (rows(nbl, solref, 2), rows(nbl, solimp, 5), rows(nbl, margin, 0))
    if contact_weight is None or dof_weight is None:
        q0 = neutral_configuration(tree) if q0 is None else q0
        body, dof = reference_weights(tree, jnp.asarray(q0, dtype))
        if contact_weight is None:
            body = np.append(body, 0.0)  # index -1: the world
            contact_weight = np.zeros(nc)
            if nc:
                geom_body = np.asarray(scene.geometry.body)
                for g in (scene.pairs.contact_a, scene.pairs.contact_b):
                    contact_weight = contact_weight + body[geom_body[np.asarray(g, int)]]
        dof_weight = dof if dof_weight is None else dof_weight
    numbers = [*contact, *limit, *friction, contact_weight, dof_weight, impratio, *ball]
    for x in numbers:
        if not np.all(np.isfinite(np.asarray(x, float))):
            raise ModelError(f"MuJoCo's constraint numbers must be finite, got {np.asarray(x).tolist()}")
    scene = scene.replace(impedance=Impedance(*(jnp.asarray(np.asarray(x, float), dtype) for x in numbers)))
    # (late imports: the tendons' and the equalities' modules import this one)
    from jaxmb.sim.equality_rows import with_equality_impedance
    from jaxmb.sim.tendons import with_tendon_impedance

    if scene.tendons is not None and scene.tendons.rows and scene.tendons.impedance is None:
        scene = with_tendon_impedance(scene, solref, solimp, margin)
    if scene.equalities is not None and scene.equalities.rows and scene.equalities.impedance is None:
        scene = with_equality_impedance(scene, solref, solimp)
    return scene

