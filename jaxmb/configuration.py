"""Configurations on the joints' manifolds: neutral and random configurations, rates and integration."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.batching import eager_jit, place_rows
from jaxmb.joints import KINDS
from jaxmb.model import check_shapes


def neutral_configuration(model):
    """The zero configuration (identity quaternions), (nq,)."""
    q = np.zeros(model.nq)
    for blk in model.topology.kind_blocks:
        q[blk.q_index] = KINDS[blk.kind].neutral()
    return jnp.asarray(q, model.mass.dtype)


def _in_q_order(model, per_block):
    """The (nq,) vector whose entries ``q_index`` of each kind block are that block's (n, nq_kind) values in
    ``per_block`` (`jaxmb.batching.rows.place_rows`: no scatter)."""
    if not per_block:
        return jnp.zeros(0, model.mass.dtype)
    at = np.concatenate([np.asarray(blk.q_index).reshape(-1) for blk in model.topology.kind_blocks])
    return place_rows([x.reshape(-1) for x in per_block], at)


@eager_jit
def random_configuration(model, key):
    """A random configuration (nq,): uniform within joint limits (``[-pi, pi]`` where a joint has none, unit
    cube for a free base's position), uniform random unit quaternions."""
    keys = jax.random.split(key, model.nb)
    return _in_q_order(model, [jax.vmap(KINDS[blk.kind].random)(keys[blk.bodies], model.q_lower[blk.q_index],
                                                                 model.q_upper[blk.q_index]).astype(model.mass.dtype)
                               for blk in model.topology.kind_blocks])


@eager_jit
def configuration_rate(model, q, qd):
    """``dq/dt`` (nq,) for joint velocities ``qd`` (nv,): quaternion rates for spherical and free joints, the
    position rate of a free joint in its joint frame (the world for a root placed at the identity). For integrating
    (q, qd) with an ODE solver in ``q``'s coordinates."""
    check_shapes(model, q=q, qd=qd)
    return _in_q_order(model, [jax.vmap(KINDS[blk.kind].configuration_rate)(q[blk.q_index], qd[blk.v_index])
                               for blk in model.topology.kind_blocks])


@eager_jit
def integrate(model, q, qd, dt):
    """The configuration reached from ``q`` moving at constant ``qd`` for ``dt`` (each joint on its manifold;
    quaternions renormalized here and only here), (nq,)."""
    check_shapes(model, q=q, qd=qd)
    return _in_q_order(model, [jax.vmap(lambda qk, vk, kind=KINDS[blk.kind]: kind.integrate(qk, vk, dt))(
        q[blk.q_index], qd[blk.v_index]) for blk in model.topology.kind_blocks])
