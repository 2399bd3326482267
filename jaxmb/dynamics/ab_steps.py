"""The per-body steps of the articulated-body algorithm (book Alg 7.2, Table 7.1) and the small solves they take.

Each step is written for one body, as the book's recursion, and is handed to a sweep (`jaxmb.sweeps.up` or
`down`) by `jaxmb.dynamics.articulated`; `jaxmb.dynamics.fused` takes the same steps for the roots that XLA
computes between its kernels. Spatial vectors are angular first, in body coordinates; ``X_k`` is joint k's pose
in its parent (`jaxmb.spatial.Transform`), ``H_k`` (n, 6) its hinge map, ``A_k`` (n,) its armature.

Each step returns a NamedTuple: what goes to the parent or child (the sweep's carry) first, then what is kept
per body, then what is kept per coordinate, the order `jaxmb.sweeps` takes them in.
"""

from typing import NamedTuple

import jax.numpy as jnp

from jaxmb.spatial import Transform, inverse3, mm, mv, phi, phi_congruence, phi_star, swap


# -- small symmetric positive definite solves (the joint's D(k), 6.13) --------------------------------------------


def ldl(D):
    """``D = L diag(d) L*`` of a small symmetric positive definite ``D`` (..., n, n), unrolled: ``L[i, j]`` (i > j)
    and ``d[j]`` as arrays (...). Elementwise operations only, so XLA vectorizes it over the batch, where a batched
    LAPACK call loops over it."""
    n = D.shape[-1]
    L, d = {}, []
    for j in range(n):
        d.append(D[..., j, j] - sum(L[j, k] * L[j, k] * d[k] for k in range(j)))
        for i in range(j + 1, n):
            L[i, j] = (D[..., i, j] - sum(L[i, k] * L[j, k] * d[k] for k in range(j))) / d[j]
    return L, d


def solve_blocks(D, x):
    """`solve_log_det` for n = 6 by 3x3 blocks ``D = [[A, B], [B*, C]]``: the Schur complement ``S = A - B C^-1 B*``
    eliminates ``C`` (the translational block of an articulated inertia, well conditioned), and
    ``log det D = log det C + log det S``. Two 3x3 inverses and six small products in place of a 6x6 ``L D L*``,
    whose 27 dependent scalars XLA compiles as many small loops: the same speed and accuracy, a shorter compile
    (benchmarks/findings.md, "Compile time")."""
    A, B, C = D[..., :3, :3], D[..., :3, 3:], D[..., 3:, 3:]
    x1, x2 = x[..., :3, :], x[..., 3:, :]
    Ci, det_C = inverse3(C)
    BCi = mm(B, Ci)
    S = A - mm(BCi, swap(B))
    Si, det_S = inverse3(S)
    z1 = mm(Si, x1 - mm(BCi, x2))  # S z1 = x1 - B C^-1 x2
    z2 = mm(Ci, x2) - mm(swap(BCi), z1)  # z2 = C^-1 (x2 - B* z1), C symmetric
    return jnp.concatenate([z1, z2], -2), jnp.log(det_C) + jnp.log(det_S)


def solve_log_det(D, x):
    """``(D^-1 x, log det D)`` for a small symmetric positive definite ``D`` (n, n) and ``x`` (n, c), from one
    factorization: a division for the common n = 1, 3x3 blocks for a 6-dof joint (`solve_blocks`), an unrolled
    ``L D L*`` solve otherwise (`ldl`)."""
    n = D.shape[-1]
    if n == 1:
        return x / D, jnp.log(D[..., 0, 0])
    if n == 6:
        return solve_blocks(D, x)
    L, d = ldl(D)
    y = []
    for i in range(n):  # L y = x
        y.append(x[..., i, :] - sum(L[i, k][..., None] * y[k] for k in range(i)))
    z = [None] * n
    for i in reversed(range(n)):  # L* z = diag(d)^-1 y
        z[i] = y[i] / d[i][..., None] - sum(L[k, i][..., None] * z[k] for k in range(i + 1, n))
    return jnp.stack(z, -2), sum(jnp.log(dj) for dj in d)


def solve_small(D, x):
    """``D^-1 x`` for a small symmetric positive definite ``D`` (n, n) and ``x`` (n, c) (`solve_log_det`)."""
    return solve_log_det(D, x)[0]


# -- pass 0: velocities --------------------------------------------------------------------------------------------


class VelocityTerms(NamedTuple):
    """Pass 0 of the forward dynamics (`jaxmb.dynamics.articulated.velocity_terms`), of one body or of all bodies
    with a leading body axis: the joint pose ``X`` (Transform), the hinge map ``H`` ((n, 6); of all: (nv, 6)), the
    body inertia ``M`` (6, 6), the body velocity ``V`` and the Coriolis and gyroscopic terms ``a``, ``b`` (6,),
    ``b`` less ``f_ext`` (2.28)."""

    X: Transform
    H: jnp.ndarray
    M: jnp.ndarray
    V: jnp.ndarray
    a: jnp.ndarray
    b: jnp.ndarray


# -- pass 1: articulated inertias, residual forces and gains -------------------------------------------------------


class Gains(NamedTuple):
    """What pass 1 derives from a body's articulated inertia ``P(k)`` (`gains`).

    G (6, n)        the Kalman gain ``G(k) = P H* D^-1``
    nu (n,)         ``D^-1 eps``, or None without the innovations
    log_det_D ()    ``log det D(k)``
    D (n, 6)        ``D(k) = H P H* + diag(armature)`` (6.13), padded with zero columns to 6
    P_plus (6, 6)   ``P+(k) = tau_bar P = P - G H P`` (6.16)
    tau_bar (6, 6)  ``I - G H`` (6.16)
    psi (6, 6)      ``psi(parent, k) = phi(parent, k) tau_bar(k)`` (6.29)
    K (6, n)        ``K(parent, k) = phi(parent, k) G(k)`` (6.36)
    """

    G: jnp.ndarray
    nu: jnp.ndarray
    log_det_D: jnp.ndarray
    D: jnp.ndarray
    P_plus: jnp.ndarray
    tau_bar: jnp.ndarray
    psi: jnp.ndarray
    K: jnp.ndarray


def gains(P, X_k, H_k, A_k, eps=None) -> Gains:
    """`Gains` of a body from its articulated inertia ``P(k)`` (6, 6), and with the innovations ``eps`` (n,) also
    ``nu = D^-1 eps``, from the same factors of ``D`` (one `solve_log_det`)."""
    n = H_k.shape[0]
    PH = mm(P, H_k.T)  # P(k) H*(k)                                              (6, n)
    D = mm(H_k, PH) + jnp.diag(A_k)  # D(k) = H(k) P(k) H*(k) + diag(armature(k))  (6.13)
    rhs = PH.T if eps is None else jnp.concatenate([PH.T, eps[:, None]], 1)
    Dinv, log_det_D = solve_log_det(D, rhs)  # D^-1 [H P, eps], one factorization
    G = swap(Dinv[:, :6])  # G(k) = P(k) H*(k) D^-1(k), the Kalman gain  (6, n)
    nu = None if eps is None else Dinv[:, 6]  # nu(k) = D^-1(k) eps(k)
    tau_bar = jnp.eye(6, dtype=P.dtype) - mm(G, H_k)  # tau_bar(k) = I - G(k) H(k)            (6.16)
    P_plus = P - mm(G, PH.T)  # P+(k) = tau_bar(k) P(k) = P - G H P
    psi = swap(phi(X_k, swap(tau_bar)))  # psi(parent, k) = phi(parent, k) tau_bar(k)        (6.29)
    K = phi(X_k, G.T)  # K(parent, k) = phi(parent, k) G(k), by columns                         (6.36)
    D_rows = jnp.pad(D, ((0, 0), (0, 6 - n)))
    return Gains(G=G, nu=nu, log_det_D=log_det_D, D=D_rows, P_plus=P_plus, tau_bar=tau_bar, psi=psi, K=K)


class ToParent(NamedTuple):
    """What pass 1 hands a body's parent, in the parent's coordinates, and what a body receives summed over its
    children: ``P = phi P+ phi*`` (6, 6) and ``z = phi z+`` (6,) (6.28, 7.42)."""

    P: jnp.ndarray
    z: jnp.ndarray

    @staticmethod
    def zero(dtype):
        """The sums of a body without children."""
        return ToParent(P=jnp.zeros((6, 6), dtype), z=jnp.zeros(6, dtype))


class BodyArticulation(NamedTuple):
    """Pass 1's quantities of one body, as `jaxmb.dynamics.articulated.ArticulatedBody` names them: P, P_plus,
    tau_bar, psi (6, 6), z, z_plus (6,), log_det_D ()."""

    P: jnp.ndarray
    P_plus: jnp.ndarray
    tau_bar: jnp.ndarray
    psi: jnp.ndarray
    z: jnp.ndarray
    z_plus: jnp.ndarray
    log_det_D: jnp.ndarray


class CoordinateGains(NamedTuple):
    """Pass 1's quantities of one joint's n coordinates, a row each: G, K, D (n, 6), eps, nu (n,)
    (`jaxmb.dynamics.articulated.ArticulatedBody`)."""

    G: jnp.ndarray
    K: jnp.ndarray
    D: jnp.ndarray
    eps: jnp.ndarray
    nu: jnp.ndarray


class ArticulatedStep(NamedTuple):
    """`articulated_step`'s result: ``(to_parent, body, coordinates)``, as `jaxmb.sweeps.up` takes it."""

    to_parent: ToParent
    body: BodyArticulation
    coordinates: CoordinateGains


def articulated_step(children, X_k, M_k, a_k, b_k, H_k, T_k, A_k) -> ArticulatedStep:
    """Pass 1 of Alg 7.2 at body k: from its children's sums ``children`` (`ToParent`), its inertia ``M_k``, the
    Coriolis and gyroscopic terms ``a_k``, ``b_k`` and the joint forces ``T_k`` (n,), the articulated inertia
    ``P(k)`` (6.28), the residual force ``z(k)`` (7.42), the innovations ``eps(k) = T - H z``, the gains
    (`gains`) and ``z+ = z + G eps``; the parent receives ``phi P+ phi*`` and ``phi z+``."""
    P_children, z_children = children
    P = P_children + M_k  # P(k) = sum_j phi(k, j) P+(j) phi*(k, j) + M(k)          (6.28)
    z = z_children + mv(P, a_k) + b_k  # z(k) = sum_j phi(k, j) z+(j) + P a(k) + b(k)    (7.42)
    eps = T_k - mv(H_k, z)  # eps(k) = T(k) - H(k) z(k)
    g = gains(P, X_k, H_k, A_k, eps)
    z_plus = z + mv(g.G, eps)  # z+(k) = z(k) + G(k) eps(k)
    return ArticulatedStep(
        to_parent=ToParent(P=phi_congruence(X_k, g.P_plus), z=phi(X_k, z_plus)),
        body=BodyArticulation(P=P, P_plus=g.P_plus, tau_bar=g.tau_bar, psi=g.psi, z=z, z_plus=z_plus,
                              log_det_D=g.log_det_D),
        coordinates=CoordinateGains(G=g.G.T, K=g.K, D=g.D, eps=eps, nu=g.nu))


class BodyInertias(NamedTuple):
    """`inertia_step`'s quantities of one body: P, P_plus, tau_bar, psi (6, 6), log_det_D ()."""

    P: jnp.ndarray
    P_plus: jnp.ndarray
    tau_bar: jnp.ndarray
    psi: jnp.ndarray
    log_det_D: jnp.ndarray


class CoordinateFactors(NamedTuple):
    """`inertia_step`'s quantities of one joint's n coordinates, a row each: G, K, D (n, 6)."""

    G: jnp.ndarray
    K: jnp.ndarray
    D: jnp.ndarray


class InertiaStep(NamedTuple):
    """`inertia_step`'s result: ``(to_parent, body, coordinates)``, ``to_parent = phi P+ phi*`` (6, 6)."""

    to_parent: jnp.ndarray
    body: BodyInertias
    coordinates: CoordinateFactors


def inertia_step(P_children, X_k, M_k, H_k, A_k) -> InertiaStep:
    """`articulated_step` without the residual forces: ``P(k)`` (6.28) and the gains of body k, which depend on
    ``q`` alone; the parent receives ``phi P+ phi*``."""
    P = P_children + M_k  # (6.28)
    g = gains(P, X_k, H_k, A_k)
    return InertiaStep(to_parent=phi_congruence(X_k, g.P_plus),
                       body=BodyInertias(P=P, P_plus=g.P_plus, tau_bar=g.tau_bar, psi=g.psi, log_det_D=g.log_det_D),
                       coordinates=CoordinateFactors(G=g.G.T, K=g.K, D=g.D))


class Innovations(NamedTuple):
    """`innovations_step`'s result: ``phi z+`` (6,) to the parent, ``z+`` (6,), ``nu`` (n,)."""

    to_parent: jnp.ndarray
    z_plus: jnp.ndarray
    nu: jnp.ndarray


def innovations_step(z_children, X_k, H_k, G_k, D_k, x_k) -> Innovations:
    """The up sweep of ``nu = D^-1 [I - H psi K] x`` (7.18) at body k: pass 1's residual forces with ``P``, ``G``
    and ``D`` given (``G_k``, ``D_k`` (n, 6) as `CoordinateFactors` holds them) and no body terms."""
    n = H_k.shape[0]
    eps = x_k - mv(H_k, z_children)  # eps(k) = x(k) - H(k) z(k), z(k) = sum_j phi(k, j) z+(j)
    nu = solve_small(D_k[:, :n], eps[:, None])[:, 0]  # nu(k) = D^-1(k) eps(k)
    z_plus = z_children + mv(G_k.T, eps)  # z+(k) = z(k) + G(k) eps(k)
    return Innovations(to_parent=phi(X_k, z_plus), z_plus=z_plus, nu=nu)


# -- pass 2: accelerations ----------------------------------------------------------------------------------------


class Acceleration(NamedTuple):
    """`acceleration_step`'s result: the body's ``alpha`` (6,), handed to its children, and its joint's ``qdd``
    (n,)."""

    alpha: jnp.ndarray
    qdd: jnp.ndarray


def acceleration_step(alpha_parent, X_k: Transform, a_k, G_k, nu_k, H_k) -> Acceleration:
    """Pass 2 of Alg 7.2 at body k: ``alpha+ = phi* alpha(parent)``, ``qdd = nu - G* alpha+`` (7.31) and
    ``alpha = alpha+ + H* qdd + a``; ``G_k`` (n, 6) as `CoordinateGains` holds it."""
    alpha_plus = phi_star(X_k, alpha_parent)  # alpha+(k) = phi*(parent, k) alpha(parent)
    qdd = nu_k - mv(G_k, alpha_plus)  # qdd(k) = nu(k) - G*(k) alpha+(k)            (7.31)
    alpha = alpha_plus + mv(H_k.T, qdd) + a_k  # alpha(k) = alpha+(k) + H*(k) qdd(k) + a(k)
    return Acceleration(alpha=alpha, qdd=qdd)
