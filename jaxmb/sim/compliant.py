"""Compliant contact: a smooth force law of each contact's penetration and relative velocity (Hunt and Crossley,
"Coefficient of restitution interpreted as damping in vibroimpact", 1975, with regularized Coulomb friction),
the forces it sends to the bodies, and the correction that makes it implicit in velocity for the implicit
integrators. The RK4 stages recompute these forces where the bodies are.
"""

import jax
import jax.numpy as jnp

from jaxmb.sim.compliance import contact_space
from jaxmb.sim.contact_frames import body_forces, contact_velocities, friction, world_forces


def compliant_law(c, mu, dist, v):
    """The compliant contact force (3,) in the contact frame ``[n, t1, t2]`` of one contact at the signed distance
    ``dist`` with the relative velocity ``v`` (3,) in that frame (`ContactParams` ``c``, friction ``mu``): smooth in
    both, zero apart. The smooth maximum keeps the Hunt-Crossley force from pulling when the surfaces separate fast.
    The implicit step differentiates the law, and reverse mode differentiates that again: ``delta^1.5`` is
    evaluated where it touches only, so that its infinite second derivative at ``delta = 0`` never meets a zero."""
    touching = dist < 0
    depth = jnp.where(touching, jnp.where(touching, -dist, 1.0) ** 1.5, 0.0)  # delta^1.5: no infinite second
    s = 1.0 - c.dissipation * v[0]  # 1 + c ddelta/dt, ddelta/dt = -v_n        # derivative at contact
    f_n = c.stiffness * depth * 0.5 * (s + jnp.sqrt(s * s + 1e-6))
    slip = jnp.sqrt(jnp.sum(v[1:] ** 2) + c.slip_velocity**2)
    return jnp.concatenate([f_n[None], -(mu * f_n / slip) * v[1:]])


def compliant_forces(scene, T, V, con):
    """Contact forces (nc, 3) in each contact's frame of the compliant model (`compliant_law`)."""
    law = jax.vmap(compliant_law, (None, 0, 0, 0))
    return law(scene.contact, friction(scene), con.dist, contact_velocities(scene, T, V, con))


def implicit_compliant_forces(scene, model, q, T, con, ab, qdd, dt):
    """The correction (nc, 3) to the compliant contact forces that makes them implicit in velocity: the linearized
    backward-Euler step ``(M + J* W J) (qd+ - qd) = dt f`` with ``W = -dt (df/dv + dt df/ddist n*)``, contact by
    contact (the force law's own derivatives; the distance moves by ``dt v_n``). By the push-through identity

        (M + J* W J)^-1 = M^-1 - M^-1 J* W (1 + A W)^-1 J M^-1,        A = J M^-1 J*

    it is the contact force ``-W (1 + A W)^-1 J qdd`` added to the explicit one, ``qdd`` the explicit step's
    accelerations: the contact-space compliance ``A`` of the operational-space walk, a (3 nc)-square solve and one
    more articulated-body sweep replace a stiff contact's time-step limit. ``ab``: the articulated-body quantities
    of ``model`` at ``q``.

    The step's derivative is exact: ``W`` is differentiated too (the force law's second derivatives, which
    `compliant_law` keeps finite at first touch)."""
    c = scene.contact
    J, A = contact_space(scene, model, q, T, con, ab)
    v = contact_velocities(scene, T, ab.V, con)
    law = lambda mu, dist, v: compliant_law(c, mu, dist, v)
    df_dv = jax.vmap(jax.jacfwd(law, 2))(friction(scene), con.dist, v)  # (nc, 3, 3)
    df_ddist = jax.vmap(jax.jacfwd(law, 1))(friction(scene), con.dist, v)  # (nc, 3)
    blocks = -dt * df_dv.at[:, :, 0].add(dt * df_ddist)
    nc = scene.nc
    W = jnp.einsum("ij,iab->iajb", jnp.eye(nc, dtype=A.dtype), blocks).reshape(3 * nc, 3 * nc)
    correction = -W @ jnp.linalg.solve(jnp.eye(3 * nc, dtype=A.dtype) + A @ W, J @ qdd)
    return correction.reshape(nc, 3)


def compliant_contact_forces(scene, T, con, V, dtype):
    """``(f_ext, force)``: the compliant model's body forces (nb, 6) and contact-frame forces (nc, 3) of the contact
    slots ``con`` at the body poses ``T`` and velocities ``V`` (zeros under the constraint model)."""
    f_ext = jnp.zeros((scene.tree.nb, 6), dtype)
    force = jnp.zeros((scene.nc, 3), dtype)
    if scene.nc and scene.options.contact == "compliant":
        force = compliant_forces(scene, T, V, con)
        f_ext = body_forces(scene, T, con, world_forces(con, force))
    return f_ext, force


