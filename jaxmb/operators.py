"""The book's stacked spatial operators as dense matrices, for small models: tests and teaching.

Bodies are in the model's (breadth-first, base-first) order and spatial 6-blocks are angular first. The book
numbers bodies tips first, so its block-lower operators (E_phi, phi, psi, L) are block-upper here; every identity
between them is unchanged, being a statement about the operators and not about their numbering (8.24).

    E_phi (6nb, 6nb)    block (parent k, k) = phi(parent k, k)                    (8.12)
    phi                 (I - E_phi)^-1, block (i, j) = phi(i, j) on the path       (8.14)
    H (nv, 6nb)         block-diagonal hinge maps H(k)                             (3.32)
    M, R, P, P_plus     block-diagonal body, composite and articulated inertias   (4.4, 9.16, 6.28)
    D (nv, nv)          block-diagonal H(k) P(k) H*(k) + armature                  (6.13)
    G (6nb, nv)         block-diagonal Kalman gains                               (6.13)
    tau_bar (6nb, 6nb)  block-diagonal I - G(k) H(k)                              (6.16)
    K (6nb, nv)         E_phi G: block (parent k, k) = phi(parent k, k) G(k)      (6.36)
    E_psi, psi          E_phi tau_bar and (I - E_psi)^-1                          (6.29, 7.5)
    armature (nv, nv)   diag(model.armature): the mass matrix is H phi M phi* H* + armature (9.3)

Every block is computed by the library's recursions (`articulated_body`, `composite_inertias`), in one jitted
program (`_blocks`; called op by op, the recursions would compile a small program for each operation, seconds even
for a small model); only their stacking happens here, in numpy.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.dynamics.articulated import articulated_body
from jaxmb.dynamics.factorization import block_diagonal
from jaxmb.dynamics.mass import composite_inertias
from jaxmb.hinges import body_inertias, hinge_map, joint_poses
from jaxmb.spatial import phi_matrix


class DenseOperators(NamedTuple):
    E_phi: np.ndarray
    phi: np.ndarray
    H: np.ndarray
    M: np.ndarray
    R: np.ndarray
    P: np.ndarray
    P_plus: np.ndarray
    D: np.ndarray
    G: np.ndarray
    tau_bar: np.ndarray
    K: np.ndarray
    E_psi: np.ndarray
    psi: np.ndarray
    armature: np.ndarray


def _block_diagonal(blocks):
    n = len(blocks)
    out = np.zeros((6 * n, 6 * n))
    for k, b in enumerate(blocks):
        out[6 * k : 6 * k + 6, 6 * k : 6 * k + 6] = b
    return out


def _by_coordinate(model, columns):
    """(nv, 6) per-coordinate 6-vectors placed at their body's block: (6nb, nv)."""
    out = np.zeros((6 * model.nb, model.nv))
    for j, k in enumerate(model.topology.dof_body):
        out[6 * k : 6 * k + 6, j] = columns[j]
    return out


@jax.jit
def _blocks(model, q):
    """The blocks the operators are stacked from: the articulated body at rest, phi(parent k, k) (nb, 6, 6), the
    hinge maps (nv, 6), D (nv, nv), and the body and composite inertias (nb, 6, 6)."""
    zero = jnp.zeros(model.nv, q.dtype)
    ab = articulated_body(model, q, zero, zero)
    return (ab, phi_matrix(joint_poses(model, q)), hinge_map(model), block_diagonal(model.topology, ab.D),
            body_inertias(model), composite_inertias(model, q))


def dense_operators(model, q) -> DenseOperators:
    """All operators of the model at configuration ``q`` (nq,), as numpy arrays."""
    nb = model.nb
    topo = model.topology
    ab, phis, hinges, D, inertias, composite = jax.tree.map(np.asarray, _blocks(model, q))
    E_phi = np.zeros((6 * nb, 6 * nb))
    for k, p in enumerate(topo.parent):
        if p >= 0:
            E_phi[6 * p : 6 * p + 6, 6 * k : 6 * k + 6] = phis[k]
    H = _by_coordinate(model, hinges).T
    G = _by_coordinate(model, ab.G)
    tau_bar = _block_diagonal(ab.tau_bar)
    E_psi = E_phi @ tau_bar
    eye = np.eye(6 * nb)
    return DenseOperators(
        E_phi=E_phi,
        phi=np.linalg.inv(eye - E_phi),
        H=H,
        M=_block_diagonal(inertias),
        R=_block_diagonal(composite),
        P=_block_diagonal(ab.P),
        P_plus=_block_diagonal(ab.P_plus),
        D=D,
        G=G,
        tau_bar=tau_bar,
        K=E_phi @ G,
        E_psi=E_psi,
        psi=np.linalg.inv(eye - E_psi),
        armature=np.diag(np.asarray(model.armature)),
    )
