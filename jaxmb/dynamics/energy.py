"""Energy, centre of mass and momentum of the whole tree (book (2.14), (2.16), Ex 4.1).

The armature (`Model.armature`) is a joint-space approximation of geared rotors: it adds its rotor energy to the
kinetic energy, and has no spatial momentum, so the momentum functions leave it out.
"""

import jax
import jax.numpy as jnp

from jaxmb.batching import eager_jit, in_cpu_chunks, take_rows
from jaxmb.hinges import body_inertias
from jaxmb.kinematics import body_velocities, forward_kinematics, world_hinges
from jaxmb.spatial import kinetic_energy as _body_kinetic_energy
from jaxmb.spatial import Transform, cross3, dot, mv, phi, phi_congruence, transform_point
from jaxmb.sweeps import subtree_sums


@eager_jit
def kinetic_energy(model, q, qd):
    """``1/2 sum_k V(k)* M(k) V(k) + 1/2 sum_i armature(i) qd(i)^2`` (2.14), equal to ``1/2 qd* M(q) qd`` with
    ``M`` including ``diag(armature)``: the second sum is the energy of the rotors whose reflected inertia the
    armature is."""
    bodies = jnp.sum(_body_kinetic_energy(body_inertias(model), body_velocities(model, q, qd)))
    return bodies + 0.5 * jnp.sum(model.armature * qd * qd)


@eager_jit
def potential_energy(model, q):
    """Gravitational potential ``-sum_k m(k) g* c(k)`` with ``c(k)`` the world position of each body's com."""
    c = transform_point(forward_kinematics(model, q), model.com)
    return -jnp.sum(model.mass * dot(c, model.gravity))


def total_mass(model):
    return jnp.sum(model.mass)


@eager_jit
def center_of_mass(model, q):
    """World position (3,) of the centre of mass of all bodies."""
    c = transform_point(forward_kinematics(model, q), model.com)
    return jnp.sum(model.mass[:, None] * c, 0) / jnp.sum(model.mass)


@eager_jit
def spatial_momentum(model, q, qd):
    """Total spatial momentum ``sum_k phi(world, k) M(k) V(k)`` (2.16-2.17), in world coordinates about the
    world origin, angular first (6,). The armature has no spatial momentum and is left out."""
    h_body = mv(body_inertias(model), body_velocities(model, q, qd))
    return jnp.sum(jax.vmap(phi)(forward_kinematics(model, q), h_body), 0)


def _centroidal_momentum_matrix(model, q):
    T = forward_kinematics(model, q)
    from_com = Transform(T.R, T.p - center_of_mass(model, q))  # body frames seen from G, world axes
    I_c = subtree_sums(model.topology, jnp.zeros((6, 6), T.p.dtype), phi_congruence(from_com, body_inertias(model)))
    return mv(take_rows(I_c, model.topology.dof_body), world_hinges(model, from_com)).T


_centroidal_momentum_matrix_in_chunks = in_cpu_chunks(_centroidal_momentum_matrix)


@eager_jit
def centroidal_momentum_matrix(model, q):
    """``A_g(q)`` (6, nv) with ``h_g = A_g qd`` the centroidal momentum: the spatial momentum about the centre of
    mass, in world-aligned coordinates, angular first (Orin and Goswami; Pinocchio's ``ccrba`` is linear first).

    Column j is the momentum of the bodies that coordinate j moves, at unit rate: ``A_g(:, j) = I_c(k) S(j)``,
    with ``I_c(k)`` the composite inertia of the subtree of j's body k (an `up` sweep of sums, (9.16) in one
    frame) and ``S(j)`` j's hinge axis, both about the centre of mass G with world axes. O(N) sums and one 6-vector
    product per coordinate, where ``sum_k phi(G, k) M(k) J(k)`` took every body's Jacobian. The armature has no
    spatial momentum and is left out. Under ``jax.vmap`` on the CPU a batch is computed in chunks with the batch
    last (`jaxmb.batching.in_cpu_chunks`).
    """
    return _centroidal_momentum_matrix_in_chunks(model, q)


@eager_jit
def centroidal_momentum(model, q, qd):
    """``h_g = A_g qd`` (6,): spatial momentum about the centre of mass, world-aligned, angular first; without
    the armature, as `centroidal_momentum_matrix`."""
    h = spatial_momentum(model, q, qd)  # about the world origin
    c = center_of_mass(model, q)
    return jnp.concatenate([h[:3] - cross3(c, h[3:]), h[3:]])
