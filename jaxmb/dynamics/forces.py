"""Inter-body forces: the spatial force ``f(k)`` that the parent exerts on body k across joint k, with gravity and
external forces, from the forward-dynamics pass at O(1) cost per body (Jain 2018, eq. 18; book 7.34, 7.40):

    f(k) = P(k) (alpha(k) - a(k)) + z(k) = P+(k) alpha+(k) + z+(k)

and ``H(k) f(k) = T(k) - armature(k) qdd(k)``: the torque that accelerates the rotors (`Model.armature`) does not
cross the joint. `jaxmb.body_forces` gives the same forces by a Newton-Euler sweep from ``qdd``.
"""

import jax.numpy as jnp

from jaxmb.batching import eager_jit, in_cpu_chunks
from jaxmb.dynamics.articulated import articulated_body
from jaxmb.kinematics import forward_kinematics
from jaxmb.spatial import mv, phi

REFERENCES = ("local", "world_aligned", "world")


@eager_jit(static_argnames=("reference",))
def express_forces(model, q, f, reference):
    """Body forces ``f`` (nb, 6), given in body coordinates about the body origins, in ``reference``:
    ``local`` (unchanged), ``world_aligned`` (about the body origin, world axes) or ``world`` (about the world
    origin, world axes: ``phi(world, k) f(k)``)."""
    if reference == "local":
        return f
    T = forward_kinematics(model, q)
    if reference == "world_aligned":
        return jnp.concatenate([mv(T.R, f[:, :3]), mv(T.R, f[:, 3:])], -1)
    if reference == "world":
        return phi(T, f)
    raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")


def _forces(model, q, qd, tau, f_ext):
    ab = articulated_body(model, q, qd, tau, f_ext)
    return mv(ab.P, ab.alpha - ab.a) + ab.z  # f(k) = P(k) (alpha(k) - a(k)) + z(k)   (eq. 18)


_forces_in_chunks = in_cpu_chunks(_forces)


@eager_jit(static_argnames=("reference",))
def interbody_forces(model, q, qd, tau, f_ext=None, reference="local"):
    """Inter-body forces (nb, 6) of the motion that ``tau`` produces: ``f(k) = P(k)(alpha(k) - a(k)) + z(k)``
    (eq. 18), from one forward-dynamics pass. ``reference``: see `express_forces`. Under ``jax.vmap`` on the CPU a
    batch is computed in chunks with the batch last (`jaxmb.batching.in_cpu_chunks`).

    Args: q (nq,), qd (nv,), tau (nv,), f_ext (nb, 6) or None (body coordinates, about the body origins).
    """
    return express_forces(model, q, _forces_in_chunks(model, q, qd, tau, f_ext), reference)
