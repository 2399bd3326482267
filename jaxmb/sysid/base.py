"""Base parameters: the identifiable combinations of a regressor's parameters (Gautier and Khalil, "Direct
calculation of minimum set of inertial parameters of serial robots", 1990; Gautier, "Numerical calculation of the
base inertial parameters of robots", 1991).

A regressor ``W`` stacked over many generic states has rank ``r`` below its number of columns ``p``: some
parameters never move a joint (the first body's mass under a fixed base), others move the joints only in fixed
combinations (a link's mass with the next joint's offset). QR with column pivoting, ``W P = Q [R_1 R_2]``, picks
``r`` independent columns ``W_1`` (``R_1`` (r, r) regular) and writes the others as ``W_2 = W_1 K``,
``K = R_1^-1 R_2``; then ``W pi = W_1 beta`` with the base parameters

    beta = pi_1 + K pi_2   (r,)

whatever the states, and ``W_1`` has full column rank: ``beta`` is what the data identify. The structure
(`BaseParameters`: which columns, ``K``) is found once, in numpy, from random states; every later fit uses it.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from jaxmb.testing import random_state

RANK_TOL = 1e-9
"""A column is dependent where its pivot ``|R_ii|`` is below ``RANK_TOL |R_11|`` (the largest): far above the
round-off of float64 regressors (1e-14 relative), far below any physical parameter's effect."""


class BaseParameters(NamedTuple):
    """The base parameters of a regressor with ``p`` columns (`base_parameters`).

    independent (r,): the columns ``W_1`` kept (int), in pivot order (largest pivot first).
    dependent (p - r,): the others.
    K (r, p - r): ``W[:, dependent] = W[:, independent] K``.
    """

    independent: np.ndarray
    dependent: np.ndarray
    K: np.ndarray

    @property
    def n_base(self) -> int:
        return len(self.independent)

    def base_map(self):
        """``E`` (r, p) with ``beta = E pi``."""
        p = len(self.independent) + len(self.dependent)
        E = np.zeros((self.n_base, p))
        E[:, self.independent] = np.eye(self.n_base)
        E[:, self.dependent] = self.K
        return E

    def to_base(self, pi):
        """``beta = pi_1 + K pi_2`` (r,) of parameters ``pi`` (p,)."""
        return pi[self.independent] + jnp.asarray(self.K, pi.dtype) @ pi[self.dependent]

    def from_base(self, beta):
        """Parameters ``pi`` (p,) with base parameters ``beta`` (r,): ``pi_1 = beta``, ``pi_2 = 0`` (one of the
        parameter vectors that give the same joint forces; `to_base` of it is ``beta``)."""
        p = len(self.independent) + len(self.dependent)
        return jnp.zeros(p, beta.dtype).at[self.independent].set(beta)

    def columns(self, W):
        """``W_1``: the base regressor (..., r) of a regressor ``W`` (..., p)."""
        return W[..., self.independent]


def base_parameters(W, tol=RANK_TOL) -> BaseParameters:
    """The base parameters of the regressor ``W`` (n, p), stacked over enough generic states that its rank is that
    of the model (a few times ``p / nv`` random states), by QR with column pivoting (module docstring)."""
    W = np.asarray(W, np.float64)
    _, R, perm = scipy.linalg.qr(W, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    r = int(np.sum(diag > tol * diag[0])) if diag.size and diag[0] > 0 else 0
    R1, R2 = R[:r, :r], R[:r, r:]
    K = scipy.linalg.solve_triangular(R1, R2) if r else np.zeros((0, W.shape[1]))
    return BaseParameters(independent=perm[:r], dependent=perm[r:], K=K)


def stacked_regressor(regressor, model, key, n_states):
    """``regressor(model, q, qd, qdd)`` stacked over ``n_states`` random states (`jaxmb.testing.random_state`
    with accelerations), (n_states nv, p): the input of `base_parameters`. Jit it with ``static_argnums=(0, 3)``."""
    keys = jax.random.split(key, n_states)
    q, qd, qdd = jax.vmap(random_state, in_axes=(None, 0))(model, keys)
    W = jax.vmap(regressor, in_axes=(None, 0, 0, 0))(model, q, qd, qdd)
    return W.reshape(-1, W.shape[-1])
