"""MuJoCo's fluid forces: the drag, lift and added-mass wrenches of a medium of density ``rho`` and viscosity
``beta`` that moves at the uniform velocity ``wind`` (MuJoCo documentation, "Computation", "Fluid forces").

Each body takes one of two models, at its velocity relative to the fluid in a local frame ``(R_l, p_l)`` fixed to
the body: ``w`` its angular velocity and ``v`` the velocity of ``p_l`` less the wind, both in the frame's axes.

* Inertia box (the default): the frame is the body's principal axes at its centre of mass, the box the one of
  uniform density with the body's mass ``m`` and principal moments ``I``, ``s_i = sqrt(6 (I_j + I_k - I_i) / m)``
  (each difference at least 1e-15). With the sphere diameter ``d = (s_0 + s_1 + s_2) / 3``::

      f_i = -3 pi d beta v_i - rho/2 s_j s_k |v_i| v_i
      n_i = -pi d^3 beta w_i - rho/64 s_i (s_j^4 + s_k^4) |w_i| w_i

* Ellipsoid (``fluidshape="ellipsoid"`` on any of the body's geoms): each such geom is the ellipsoid of its
  semi-axes ``r`` (a sphere's radius thrice, a capsule's ``(r, r, h + r)``, a cylinder's ``(r, r, h)``, a box's or
  an ellipsoid's sizes) in its own frame, with the coefficients ``C = (blunt, slender, angular, kutta, magnus)``
  and its added mass ``rho m_a`` and inertia ``rho I_a`` (3,) each. With the volume ``V = 4/3 pi r_0 r_1 r_2``, the
  largest, middle semi-axes ``r_max, r_mid``, ``A_max = pi r_max r_mid``, the area projected along ``v``
  ``A_proj = pi sqrt(sum (r_j r_k)^4 v_i^2 / sum (r_j r_k v_i)^2)``, the normal ``n_i = (r_j r_k)^2 v_i`` of that
  projection and ``cos a = sum (r_j r_k v_i)^2 / (|v| sum (r_j r_k)^4 v_i^2)``::

      f = rho (m_a v) x w + C_magnus rho V w x v + C_kutta rho cos a A_proj (n x v) x v
          - (3 pi D beta + rho |v| (C_blunt A_proj + C_slender (A_max - A_proj))) v
      n = rho (m_a v) x v + rho (I_a w) x w - (pi D^3 beta + rho |m (w)|) w

  with ``D = 2/3 (r_0 + r_1 + r_2)``, ``m_i(w) = w_i (C_angular I_i + C_slender (I_max - I_i))``, ``I_i = 8/15
  pi r_i max(r_j, r_k)^4`` and ``I_max = 8/15 pi r_mid r_max^4``. The added mass's terms in the accelerations,
  which MuJoCo leaves out (they would make the forces depend on ``qacc``), are left out.

``{i, j, k}`` is a cyclic order of the axes. The wrench ``[n; f]`` acts at ``p_l`` in the frame's axes; MuJoCo adds
it to ``qfrc_passive`` (``qfrc_fluid``); here it enters the dynamics as an external body force ``f_ext`` (nb, 6) in
body coordinates (`fluid_wrenches`), beside the applied body wrenches of `jaxmb.sim.inputs`, at every stage of a
step. Every integrator takes it explicitly: MuJoCo's Euler and RK4 do the same; MuJoCo's ``implicit`` and
``implicitfast`` differentiate it in their velocity derivative, which jaxmb's implicit schemes (a diagonal
damping) do not.

The numbers (density, viscosity, wind, each box's principal axes, each ellipsoid's pose, semi-axes, coefficients
and added inertias) are leaves of `Fluid`; which bodies take which model is static. A box body's mass and
principal moments are the model's (``mass``, the diagonal of ``inertia`` in the box's axes), so randomizing a
body's inertia changes its box.
"""

import dataclasses
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.errors import ModelError
from jaxmb.kinematics import body_velocities, forward_kinematics
from jaxmb.model import pytree_dataclass
from jaxmb.spatial import cross3, mv

_MINVAL = 1e-15  # MuJoCo's mjMINVAL: the floors of its divisions and square roots


@pytree_dataclass
@dataclass(frozen=True)
class Fluid:
    """The fluid and the bodies it acts on (module docstring).

    Leaves (nx box bodies, ne ellipsoid geoms):
        density (), viscosity (), wind (3,)      ``rho``, ``beta`` and the fluid's velocity in world axes
        box_axes (nx, 3, 3)                      each box body's principal axes (columns) in its body frame
        ellipsoid_R (ne, 3, 3), ellipsoid_p (ne, 3)  each ellipsoid's frame in its body frame
        semiaxes (ne, 3)                         ``r``
        coefficients (ne, 5)                     ``C = (blunt, slender, angular, kutta, magnus)``
        added_mass (ne, 3), added_inertia (ne, 3)    ``m_a`` and ``I_a`` (per unit density)
    Static:
        box_bodies (nx,), ellipsoid_bodies (ne,) the body of each box and of each ellipsoid
    """

    density: jnp.ndarray
    viscosity: jnp.ndarray
    wind: jnp.ndarray
    box_axes: jnp.ndarray
    ellipsoid_R: jnp.ndarray
    ellipsoid_p: jnp.ndarray
    semiaxes: jnp.ndarray
    coefficients: jnp.ndarray
    added_mass: jnp.ndarray
    added_inertia: jnp.ndarray
    box_bodies: tuple = field(default=(), metadata=dict(static=True))
    ellipsoid_bodies: tuple = field(default=(), metadata=dict(static=True))

    def replace(self, **changes) -> "Fluid":
        return dataclasses.replace(self, **changes)


def fluid(tree, density=0.0, viscosity=0.0, wind=(0.0, 0.0, 0.0), boxes=(), box_axes=None, ellipsoids=()) -> Fluid:
    """A checked `Fluid` on ``tree``'s bodies: ``boxes``, the names of the bodies of the inertia-box model, with
    their principal axes ``box_axes`` (nx, 3, 3) in the body frames (None: the eigenvectors of each body's
    ``inertia``; where two principal moments are equal, any pair of axes in their plane is principal, and the
    box's quadratic drag depends on which: MuJoCo's are its ``body_iquat``); ``ellipsoids``, one dict per geom of
    the ellipsoid model with the keys ``body`` (a name), ``R`` (3, 3), ``p`` (3,), ``semiaxes`` (3,),
    ``coefficients`` (5,), ``added_mass`` (3,), ``added_inertia`` (3,). A body may take one model only. Raises
    `jaxmb.ModelError` naming the body or number at fault."""
    dtype = tree.mass.dtype
    names = list(tree.body_names)

    def index(name, what):
        if name not in names:
            raise ModelError(f"fluid: {what} names no body {name!r} of model {tree.name!r}")
        return names.index(name)

    box_bodies = tuple(index(b, "an inertia box") for b in boxes)
    ellipsoid_bodies = tuple(index(e["body"], "an ellipsoid") for e in ellipsoids)
    both = sorted(set(box_bodies) & set(ellipsoid_bodies))
    if both:
        raise ModelError(f"fluid: the bodies {[names[k] for k in both]} take both the inertia-box and the ellipsoid "
                         "model; a body takes one")
    for name, x in (("density", density), ("viscosity", viscosity)):
        if not np.isfinite(x) or x < 0:
            raise ModelError(f"fluid: {name} must be finite and non-negative, got {x!r}")
    for k in box_bodies:
        if not float(tree.mass[k]) > _MINVAL:
            raise ModelError(f"fluid: body {names[k]!r} has no mass, so no inertia box; leave it out of boxes")
    if box_axes is None:
        box_axes = np.stack([np.linalg.eigh(np.asarray(tree.inertia[k]))[1] for k in box_bodies]).reshape(-1, 3, 3)
    box_axes = np.asarray(box_axes, float).reshape(-1, 3, 3)
    if len(box_axes) != len(box_bodies):
        raise ModelError(f"fluid: box_axes has {len(box_axes)} frames for {len(box_bodies)} boxes")
    table = {key: np.asarray([np.asarray(e[key], float) for e in ellipsoids], float).reshape((-1,) + shape)
             for key, shape in (("R", (3, 3)), ("p", (3,)), ("semiaxes", (3,)), ("coefficients", (5,)),
                                ("added_mass", (3,)), ("added_inertia", (3,)))}
    small = [names[k] for k, r in zip(ellipsoid_bodies, table["semiaxes"]) if not np.all(r > 0)]
    if small:
        raise ModelError(f"fluid: ellipsoids on the bodies {small} have semi-axes that are not positive")
    cast = lambda x: jnp.asarray(x, dtype)
    return Fluid(cast(density), cast(viscosity), cast(np.asarray(wind, float).reshape(3)), cast(box_axes),
                 cast(table["R"]), cast(table["p"]), cast(table["semiaxes"]), cast(table["coefficients"]),
                 cast(table["added_mass"]), cast(table["added_inertia"]), box_bodies, ellipsoid_bodies)


def _norm(x):
    """``|x|`` over the last axis, with a zero (not a NaN) derivative at ``x = 0``."""
    s = jnp.sum(x * x, -1)
    positive = s > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, s, 1.0)), 0.0)


def _box_wrenches(fl, mass, inertia, w, v):
    """``[n; f]`` (nx, 6) of the inertia-box model in the boxes' axes, of the bodies' ``mass`` (nx,) and
    rotational ``inertia`` (nx, 3, 3) in those axes, at the relative velocities ``w``, ``v`` (nx, 3)."""
    I = jnp.diagonal(inertia, axis1=-2, axis2=-1)
    I_j, I_k = jnp.roll(I, -1, -1), jnp.roll(I, -2, -1)
    s = jnp.sqrt(jnp.maximum(_MINVAL, I_j + I_k - I) / mass[:, None] * 6.0)
    s_j, s_k = jnp.roll(s, -1, -1), jnp.roll(s, -2, -1)
    d = jnp.mean(s, -1, keepdims=True)
    rho, beta = fl.density, fl.viscosity
    f = -3.0 * jnp.pi * d * beta * v - 0.5 * rho * s_j * s_k * jnp.abs(v) * v
    n = -jnp.pi * d**3 * beta * w - rho * s * (s_j**4 + s_k**4) * jnp.abs(w) * w / 64.0
    return jnp.concatenate([n, f], -1)


def _ellipsoid_wrenches(fl, w, v):
    """``[n; f]`` (ne, 6) of the ellipsoid model in the ellipsoids' axes at the relative velocities ``w``, ``v``
    (ne, 3)."""
    r, C = fl.semiaxes, fl.coefficients
    blunt, slender, angular, kutta, magnus = (C[:, i:i + 1] for i in range(5))
    rho, beta = fl.density, fl.viscosity
    r_j, r_k = jnp.roll(r, -1, -1), jnp.roll(r, -2, -1)
    r_max, r_min = jnp.max(r, -1, keepdims=True), jnp.min(r, -1, keepdims=True)
    r_mid = jnp.sum(r, -1, keepdims=True) - r_max - r_min
    volume = 4.0 / 3.0 * jnp.pi * jnp.prod(r, -1, keepdims=True)
    A_max = jnp.pi * r_max * r_mid
    speed = _norm(v)[:, None]
    # the added mass's gyroscopic terms (MuJoCo's mj_addedMassForces without the accelerations)
    p_lin, p_ang = rho * fl.added_mass * v, rho * fl.added_inertia * w
    n = cross3(p_lin, v) + cross3(p_ang, w)
    f = cross3(p_lin, w)
    # Magnus lift
    f = f + magnus * rho * volume * cross3(w, v)
    # Kutta-Joukowski lift on the area projected along v
    area2 = (r_j * r_k) ** 2
    proj_denom = jnp.sum(area2**2 * v**2, -1, keepdims=True)
    proj_num = jnp.sum(area2 * v**2, -1, keepdims=True)
    A_proj = jnp.pi * jnp.sqrt(proj_denom / jnp.maximum(_MINVAL, proj_num))
    cos_a = proj_num / jnp.maximum(_MINVAL, speed * proj_denom)
    circulation = kutta * rho * cos_a * A_proj * cross3(area2 * v, v)
    f = f + cross3(circulation, v)
    # viscous (Stokes) and quadratic drag
    D = 2.0 / 3.0 * jnp.sum(r, -1, keepdims=True)
    I_i = 8.0 / 15.0 * jnp.pi * r * jnp.maximum(r_j, r_k) ** 4
    I_max = 8.0 / 15.0 * jnp.pi * r_mid * r_max**4
    moment = w * (angular * I_i + slender * (I_max - I_i))
    drag_lin = beta * 3.0 * jnp.pi * D + rho * speed * (A_proj * blunt + slender * (A_max - A_proj))
    drag_ang = beta * jnp.pi * D**3 + rho * _norm(moment)[:, None]
    return jnp.concatenate([n - drag_ang * w, f - drag_lin * v], -1)


def _in_frames(R_l, p_l, R, V_body, wind):
    """``(w, v)`` (n, 3): the angular velocity and the velocity of the point ``p_l`` less ``wind``, both in the
    axes ``R_l`` (body frame), of bodies of world rotation ``R`` and body velocity ``V_body`` (n, 6)."""
    Rt_l = jnp.swapaxes(R_l, -1, -2)
    w_b, v_b = V_body[:, :3], V_body[:, 3:]
    v_point = v_b + cross3(w_b, p_l) - mv(jnp.swapaxes(R, -1, -2), wind)
    return mv(Rt_l, w_b), mv(Rt_l, v_point)


def _at_origin(R_l, p_l, wrench):
    """The wrenches ``[n; f]`` (n, 6) given at ``p_l`` in the axes ``R_l``, in body coordinates about the body
    origin."""
    f = mv(R_l, wrench[:, 3:])
    return jnp.concatenate([mv(R_l, wrench[:, :3]) + cross3(p_l, f), f], -1)


def fluid_wrenches(tree, fl: Fluid, T, V) -> jnp.ndarray:
    """``f_ext`` (nb, 6): the fluid's wrench on every body (module docstring) in body coordinates about the body
    origin, at the body poses ``T`` (world rotations ``T.R`` (nb, 3, 3)) and the body velocities ``V`` (nb, 6)
    (`jaxmb.body_velocities`); zero on the bodies the fluid does not act on."""
    out = jnp.zeros((tree.nb, 6), V.dtype)
    if fl.box_bodies:
        k = np.asarray(fl.box_bodies)
        R_l, p_l = fl.box_axes, tree.com[k]
        inertia = jnp.swapaxes(R_l, -1, -2) @ tree.inertia[k] @ R_l
        w, v = _in_frames(R_l, p_l, T.R[k], V[k], fl.wind)
        out = out.at[k].add(_at_origin(R_l, p_l, _box_wrenches(fl, tree.mass[k], inertia, w, v)))
    if fl.ellipsoid_bodies:
        k = np.asarray(fl.ellipsoid_bodies)
        w, v = _in_frames(fl.ellipsoid_R, fl.ellipsoid_p, T.R[k], V[k], fl.wind)
        out = out.at[k].add(_at_origin(fl.ellipsoid_R, fl.ellipsoid_p, _ellipsoid_wrenches(fl, w, v)))
    return out


def with_fluid(f_ext, scene, tree, T, q, qd):
    """``f_ext`` (nb, 6) (or None) plus the fluid's wrenches (`fluid_wrenches`) on the spanning ``tree`` at the
    poses ``T`` and the spanning velocity ``qd``; ``f_ext`` itself where ``scene.fluid`` is None."""
    if scene.fluid is None:
        return f_ext
    f = fluid_wrenches(tree, scene.fluid, T, body_velocities(tree, q, qd))
    return f if f_ext is None else f_ext + f


def fluid_forces(scene, q, qd) -> jnp.ndarray:
    """The fluid's generalized forces (nv,) on the spanning tree's coordinates at ``(q, qd)``: ``J* f_ext`` of
    `fluid_wrenches`, the body Jacobians' transposes by the derivative of the body velocities (linear in
    ``qd``), so that ``qd . tau`` is the fluid's power. MuJoCo's ``qfrc_fluid`` in jaxmb's coordinates."""
    tree = scene.tree
    f = with_fluid(None, scene, tree, forward_kinematics(tree, q), q, qd)
    if f is None:
        return jnp.zeros_like(qd)
    _, pull = jax.vjp(lambda u: body_velocities(tree, q, u), qd)
    return pull(f)[0]
