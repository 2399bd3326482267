"""Configurations on the joints' manifolds: neutral and random configurations, rates and integration."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.compilation import eager_jit
from jaxmb.joints import KINDS
from jaxmb.model import check_shapes


def neutral_configuration(model):
    """The zero configuration (identity quaternions), (nq,)."""
    q = np.zeros(model.nq)
    for blk in model.topology.kind_blocks:
        q[blk.q_index] = KINDS[blk.kind].neutral()
    return jnp.asarray(q, model.mass.dtype)


@eager_jit
def random_configuration(model, key):
    """A random configuration (nq,): uniform within joint limits (``[-pi, pi]`` where a joint has none, unit
    cube for a free base's position), uniform random unit quaternions."""
    q = jnp.zeros(model.nq, model.mass.dtype)
    keys = jax.random.split(key, model.nb)
    for blk in model.topology.kind_blocks:
        kind = KINDS[blk.kind]
        qk = jax.vmap(kind.random)(keys[blk.bodies], model.q_lower[blk.q_index], model.q_upper[blk.q_index])
        q = q.at[blk.q_index].set(qk)
    return q


@eager_jit
def configuration_rate(model, q, qd):
    """``dq/dt`` (nq,) for joint velocities ``qd`` (nv,): quaternion rates for spherical and free joints, the
    world-frame position rate of a free base. For integrating (q, qd) with an ODE solver in ``q``'s coordinates."""
    check_shapes(model, q=q, qd=qd)
    out = jnp.zeros_like(q)
    for blk in model.topology.kind_blocks:
        kind = KINDS[blk.kind]
        out = out.at[blk.q_index].set(jax.vmap(kind.configuration_rate)(q[blk.q_index], qd[blk.v_index]))
    return out


@eager_jit
def integrate(model, q, qd, dt):
    """The configuration reached from ``q`` moving at constant ``qd`` for ``dt`` (each joint on its manifold;
    quaternions renormalized here and only here), (nq,)."""
    check_shapes(model, q=q, qd=qd)
    out = jnp.zeros_like(q)
    for blk in model.topology.kind_blocks:
        kind = KINDS[blk.kind]
        step = jax.vmap(lambda qk, vk: kind.integrate(qk, vk, dt))
        out = out.at[blk.q_index].set(step(q[blk.q_index], qd[blk.v_index]))
    return out
