"""Physically consistent inertial parameters: the pseudo-inertia and its log-Cholesky parameterization.

A body's standard parameters ``pi_k = [m, h, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]`` (`jaxmb.sysid.regressor`, ``h =
m c``, ``I`` about the body origin) are those of a mass distribution exactly when its 4x4 pseudo-inertia

    J = [[Sigma, h], [h*, m]],   Sigma = 1/2 tr(I) 1 - I  (the second moments of mass, int x x* dm)

is positive definite (Wensing, Kim and Slotine, "Linear matrix inequalities for physically consistent inertial
parameter identification", 2017; positive semi-definite for a degenerate body). The log-Cholesky parameters
``theta = [alpha, d_1, d_2, d_3, s_12, s_23, s_13, t_1, t_2, t_3]`` (Rucker and Wensing, "Smooth parameterization
of rigid-body inertia", 2022) write ``J = U U*`` with the upper triangle

    U = e^alpha [[e^d_1, s_12, s_13, t_1], [0, e^d_2, s_23, t_2], [0, 0, e^d_3, t_3], [0, 0, 0, 1]]

so that every ``theta`` in R^10 is a physical body and every physical body has exactly one ``theta``: fits in
``theta`` are unconstrained and stay physical. The order is Pinocchio's (``pinocchio.LogCholeskyParameters``).

Every function takes one body's parameters (..., 10) and broadcasts over leading axes: a model's ``pi`` (10 nb,)
is ``pi.reshape(nb, 10)``.
"""

import jax.numpy as jnp


def _symmetric(six):
    xx, xy, yy, xz, yz, zz = (six[..., i] for i in range(6))
    return jnp.stack([jnp.stack([xx, xy, xz], -1), jnp.stack([xy, yy, yz], -1), jnp.stack([xz, yz, zz], -1)], -2)


def _six(S):
    return jnp.stack([S[..., 0, 0], S[..., 0, 1], S[..., 1, 1], S[..., 0, 2], S[..., 1, 2], S[..., 2, 2]], -1)


def pseudo_inertia(pi):
    """``J`` (..., 4, 4) of the standard parameters ``pi`` (..., 10) (module docstring)."""
    m, h, I = pi[..., 0], pi[..., 1:4], _symmetric(pi[..., 4:])
    Sigma = 0.5 * jnp.trace(I, axis1=-2, axis2=-1)[..., None, None] * jnp.eye(3, dtype=pi.dtype) - I
    top = jnp.concatenate([Sigma, h[..., :, None]], -1)
    bottom = jnp.concatenate([h, m[..., None]], -1)[..., None, :]
    return jnp.concatenate([top, bottom], -2)


def from_pseudo_inertia(J):
    """The standard parameters (..., 10) of a pseudo-inertia ``J`` (..., 4, 4): ``I = tr(Sigma) 1 - Sigma``."""
    Sigma = J[..., :3, :3]
    I = jnp.trace(Sigma, axis1=-2, axis2=-1)[..., None, None] * jnp.eye(3, dtype=J.dtype) - Sigma
    return jnp.concatenate([J[..., 3, 3][..., None], J[..., :3, 3], _six(I)], -1)


def from_log_cholesky(theta):
    """The standard parameters (..., 10) of log-Cholesky parameters ``theta`` (..., 10): ``J = U U*``."""
    alpha, d, (s12, s23, s13), t = theta[..., 0], theta[..., 1:4], jnp.moveaxis(theta[..., 4:7], -1, 0), theta[..., 7:]
    e = jnp.exp(d)
    z, one = jnp.zeros_like(alpha), jnp.ones_like(alpha)
    U = jnp.stack([jnp.stack([e[..., 0], s12, s13, t[..., 0]], -1),
                   jnp.stack([z, e[..., 1], s23, t[..., 1]], -1),
                   jnp.stack([z, z, e[..., 2], t[..., 2]], -1),
                   jnp.stack([z, z, z, one], -1)], -2) * jnp.exp(alpha)[..., None, None]
    return from_pseudo_inertia(U @ jnp.swapaxes(U, -1, -2))


def log_cholesky(pi):
    """The log-Cholesky parameters (..., 10) of physical standard parameters ``pi`` (..., 10) (a positive definite
    ``J``; NaN otherwise): ``U`` is the upper-triangular factor, the Cholesky factor of ``J`` with its rows and
    columns reversed."""
    J = pseudo_inertia(pi)
    flip = jnp.eye(4, dtype=pi.dtype)[::-1]
    U = flip @ jnp.linalg.cholesky(flip @ J @ flip) @ flip  # J = U U*, U upper triangular
    scale = U[..., 3, 3]
    V = U / scale[..., None, None]
    d = jnp.log(jnp.stack([V[..., 0, 0], V[..., 1, 1], V[..., 2, 2]], -1))
    s = jnp.stack([V[..., 0, 1], V[..., 1, 2], V[..., 0, 2]], -1)
    return jnp.concatenate([jnp.log(scale)[..., None], d, s, V[..., :3, 3]], -1)


def physical_margin(pi):
    """The least eigenvalue (...) of each body's pseudo-inertia: positive exactly for a physical body (a positive
    mass and second moments of mass, ``Sigma - h h* / m``, positive definite: the triangle inequality of the
    principal moments about the centre of mass, strictly)."""
    return jnp.linalg.eigvalsh(pseudo_inertia(pi))[..., 0]


def nearest_physical(pi, margin=0.0):
    """The physical parameters (..., 10) nearest to ``pi`` (..., 10) in the Frobenius norm of the pseudo-inertia:
    its eigenvalues raised to at least ``margin`` (the projection on the cone of positive semi-definite matrices,
    ``margin = 0``; on ``J >= margin 1`` for ``margin > 0``). A body that is physical (with that margin) is
    returned as it is."""
    w, Q = jnp.linalg.eigh(pseudo_inertia(pi))
    J = (Q * jnp.maximum(w, margin)[..., None, :]) @ jnp.swapaxes(Q, -1, -2)
    return from_pseudo_inertia(J)
