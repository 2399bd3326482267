"""Closed-loop Hamiltonian dynamics by constraint embedding (`jaxmb.loops.hamiltonian`), checked against the N-bar
chain of Naudet and Lefeber (2005, Fig. 3: a planar chain of N links pinned to the ground at both ends, its
dependent coordinates at the tip) written out with the paper's own projectors (36)-(52), (63)-(77), and against
the dense embedded, projected and Lagrange-multiplier references on the same spanning tree."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from checks import assert_close, fast_jit
from jaxmb import joints, loops
from jaxmb.configuration import configuration_rate
from jaxmb.dynamics.energy import potential_energy
from jaxmb.hinges import body_inertias, hinge_map, joint_poses
from jaxmb.kinematics import body_velocities, forward_kinematics
from jaxmb.loops import hamiltonian as closed
from jaxmb.loops.position import solve_configuration
from jaxmb.model import ModelBuilder
from jaxmb.spatial import Transform, compose, inverse, phi_matrix

LENGTHS = (1.0, 0.8, 1.1, 0.7, 0.9)


@functools.cache
def n_bar(n):
    """The paper's chain of ``n`` links about z, link 1 pinned at the world origin, the tip of link ``n`` pinned
    (a planar closure, 2 rows) at the ground point where it stands at the reference angles; independent
    coordinates the first ``n - 2`` joints, as the paper's. ``(LoopModel, q, yd)``: a closed configuration and
    a velocity."""
    rng = np.random.default_rng(n)
    b = ModelBuilder(f"{n}-bar", gravity=(0.0, -9.81, 0.0))
    for k in range(n):
        L = LENGTHS[k]
        I = np.diag([1e-3, L * L / 12, L * L / 12]) * (1 + 0.2 * k)
        b.add_body(f"link{k + 1}", None if k == 0 else f"link{k}", joints.revolute((0.0, 0.0, 1.0)),
                   joint_name=f"j{k + 1}", placement=(np.eye(3), (0.0 if k == 0 else LENGTHS[k - 1], 0.0, 0.0)),
                   mass=1.0 + 0.3 * k, com=(L / 2, 0.02 * k, 0.0), inertia=I)
    b.add_frame("tip", f"link{n}", (np.eye(3), (LENGTHS[n - 1], 0.0, 0.0)))
    tree = b.build()
    q = jnp.asarray(np.concatenate([[0.3], rng.uniform(0.5, 1.2, n - 1)]))
    T = forward_kinematics(tree, q)
    tip = np.asarray(T.p[n - 1] + T.R[n - 1] @ jnp.array([LENGTHS[n - 1], 0.0, 0.0]))
    closure = loops.loop_closure("tip", None, None, (np.eye(3), tip), kind="planar", axis=(0.0, 0.0, 1.0))
    lm = loops.close_loops(tree, [closure], independent=[f"j{k + 1}" for k in range(n - 2)], q_reference=q)
    yd = jnp.asarray(rng.normal(size=lm.ny))
    return lm, q, yd


@functools.cache
def random_closed(seed):
    """A random fixed-base tree of screw joints closed by a ball joint and a gear coupling, with a closed
    configuration and a velocity."""
    from jaxmb.testing import random_loop_model

    lm, q = random_loop_model(seed, 7, closures=("ball",), couplings=1)
    yd = jnp.asarray(np.random.default_rng(seed).normal(size=lm.ny))
    return lm, q, yd


def case(kind, arg):
    return n_bar(arg) if kind == "n_bar" else random_closed(arg)


# -- the paper's tip-closed chain, one body at a time (Python loops over a few bodies: a reference) ----------------


def paper_chain(lm, q, yd, p):
    """The paper's quantities of the N-bar at ``(q, yd)``, and the independent velocities it gives for the
    momenta ``p``: ``C`` (the projectors C_C, C_N, C_{N-1}), ``E`` (their joints' axes), ``C_star``
    (C*_N, C*_{N-1}), ``V`` (N, 6) the body velocities (15), (42), (48), ``p`` the momenta (50)-(52), ``yd`` from
    ``p`` by (63)-(77)."""
    tree = lm.tree
    n = tree.nb
    X = joint_poses(tree, q)
    T = forward_kinematics(tree, q)
    E = [hinge_map(tree)[k][:, None] for k in range(n)]  # (6, 1) each
    M = body_inertias(tree)
    TF = [phi_matrix(Transform(X.R[k], X.p[k])) for k in range(n)]  # ^{k-1}T^F_k = phi(k-1, k)
    TV = [A.T for A in TF]  # ^kT^V_{k-1}
    pivot = lm.params[0][1][1]  # the ground pivot: the origin of frame C, world-aligned
    C_in_N = compose(inverse(Transform(T.R[n - 1], T.p[n - 1])), Transform(jnp.eye(3), pivot))
    TF_NC = phi_matrix(C_in_N)  # ^N T^F_C
    E_C = jnp.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])[:, None]
    eye = jnp.eye(6)
    C_C = eye - E_C @ jnp.linalg.solve(E_C.T @ E_C, E_C.T)  # C_C = I + E_C C_qC*        (37)-(39)

    def projector(Lam, E_k):  # C_k = I + E_k C_qk*, C_qk* = -(E* Lam E)^-1 E* Lam    (41)-(43), (47)-(49)
        C = eye - E_k @ jnp.linalg.solve(E_k.T @ Lam @ E_k, E_k.T @ Lam)
        return C, Lam @ C  # and C*_k = Lam C_k                                       (44)-(46)

    C_N, Cs_N = projector(TF_NC @ C_C @ TF_NC.T, E[n - 1])
    C_N1, Cs_N1 = projector(TF[n - 1] @ Cs_N @ TV[n - 1], E[n - 2])
    Cmap = {n - 1: C_N, n - 2: C_N1}

    V, prev = [], jnp.zeros(6)  # velocities: independent joints, then the two dependent bodies
    for k in range(n):
        Vk = TV[k] @ prev
        Vk = Cmap[k] @ Vk if k in Cmap else Vk + E[k][:, 0] * yd[k]  # (42), (48) / (15)
        V.append(Vk)
        prev = Vk
    V = jnp.stack(V)

    Pc = [None] * n  # P^c_K = P_K + ^K T^F_{K+1} C_{K+1}* P^c_{K+1}                          (51)
    for k in reversed(range(n)):
        Pc[k] = M[k] @ V[k] + (0 if k == n - 1 else TF[k + 1] @ Cmap.get(k + 1, eye).T @ Pc[k + 1])
    p_paper = jnp.stack([E[k][:, 0] @ Pc[k] for k in range(n - 2)])  # p_K = E_K* P^c_K        (50)

    Mc = M[n - 1]  # M^c_{N-1}, M^c_{N-2}                                                   (65), (67)
    for k in (n - 2, n - 3):
        Mc = M[k] + TF[k + 1] @ Cmap[k + 1].T @ Mc @ Cmap[k + 1] @ TV[k + 1]
    Mstar, D, Mj, Dp = [None] * n, [None] * n, [None] * n, [None] * n
    for k in reversed(range(n - 2)):  # the bias-free filter on the open part      (68)-(75)
        Mstar[k] = Mc if k == n - 3 else M[k] + TF[k + 1] @ Mprime @ TV[k + 1]
        D[k] = jnp.zeros(6) if k == n - 3 else TF[k + 1] @ Dp[k + 1]
        Mj[k] = E[k].T @ Mstar[k] @ E[k]
        Mprime = Mstar[k] - Mstar[k] @ E[k] @ jnp.linalg.solve(Mj[k], E[k].T @ Mstar[k])
        Dp[k] = Mstar[k] @ E[k] @ jnp.linalg.solve(Mj[k], p[k:k + 1] - E[k].T @ D[k]) + D[k]
    yd_paper, prev = [], jnp.zeros(6)
    for k in range(n - 2):  # qd_K = M_j^-1 (p_K - E* D_K - E* M^c T^V Omega_{K-1})        (77)
        qd = jnp.linalg.solve(Mj[k], p[k:k + 1] - E[k].T @ D[k] - E[k].T @ Mstar[k] @ TV[k] @ prev)[0]
        prev = TV[k] @ prev + E[k][:, 0] * qd
        yd_paper.append(qd)
    return dict(C=(C_C, C_N, C_N1), E=(E_C, E[n - 1], E[n - 2]), C_star=(Cs_N, Cs_N1), V=V, p=p_paper,
                yd=jnp.stack(yd_paper))


@functools.cache
def paper(n):
    """`paper_chain` of the N-bar at its state, with the embedded momenta, velocities and independent velocities."""
    lm, q, yd = n_bar(n)
    return _paper(lm, q, yd)


@fast_jit
def _paper(lm, q, yd):
    p = closed.momenta(lm, q, yd)
    return paper_chain(lm, q, yd, p), dict(p=p, yd=closed.velocities_from_momenta(lm, q, p),
                                           V=body_velocities(lm.tree, q, loops.spanning_velocity(lm, q, yd)))


@pytest.mark.parametrize("n", [3, 4, 5])
def test_the_papers_projectors_are_idempotent_annihilate_their_joint_and_give_symmetric_c_star(n):
    ref, _ = paper(n)
    for C, E in zip(ref["C"], ref["E"]):
        assert_close(C @ C, C, 1e-13)  # CC = C
        assert_close(C @ E, jnp.zeros_like(E), 1e-13)  # CE = 0
    for Cs in ref["C_star"]:
        assert_close(Cs, Cs.T, 1e-13)  # C* symmetric


@pytest.mark.parametrize("n", [3, 4, 5])
def test_embedded_momenta_and_velocities_equal_the_papers_n_bar_recursions(n):
    ref, ours = paper(n)
    assert_close(ours["V"], ref["V"], 1e-12)  # (42), (48)
    assert_close(ours["p"], ref["p"], 1e-12)  # (50)-(52)
    assert_close(ours["yd"], ref["yd"], 1e-12)  # (63)-(77)
    assert_close(ref["yd"], n_bar(n)[2], 1e-12)


# -- against the dense references ----------------------------------------------------------------------------------


@fast_jit
def _against_references(lm, q, yd, tau):
    """Ours and the dense references at one state, one program: ``M_y``, its rate along the motion, the embedded
    and Lagrange accelerations, and ``-dH/dy`` of ``H(y, p) = 1/2 p* M_y(q(y))^-1 p + V_g(q(y))``
    with ``q(y)`` the closed configuration (`jaxmb.loops.solve_configuration`, implicit derivatives)."""
    G = loops.embedding_matrix(lm, q)
    qd = G @ yd
    M_y, M_y_dot = jax.jvp(lambda q: loops.mass_matrix(lm, q), (q,), (configuration_rate(lm.tree, q, qd),))
    p = M_y @ yd

    def H(y):
        q_y = solve_configuration(lm, y, q).q
        return 0.5 * p @ jnp.linalg.solve(loops.mass_matrix(lm, q_y), p) + potential_energy(lm.tree, q_y)

    ydd = loops.forward_dynamics(lm, q, yd, tau)
    p_ours = closed.momenta(lm, q, yd)
    rates = closed.hamiltonian_dynamics(lm, q, p, tau)
    return dict(M_y=M_y, M_y_dot=M_y_dot, ydd=ydd,
                qdd_lagrange=loops.lagrange_forward_dynamics(lm, q, qd, G @ jnp.linalg.solve(G.T @ G, tau))[0],
                qdd_embedded=loops.spanning_acceleration(lm, q, yd, ydd), minus_dH_dy=-jax.grad(H)(
                    loops.independent_configuration(lm, q)), p=p_ours,
                yd_from_p=closed.velocities_from_momenta(lm, q, p_ours), yd_rate=rates.yd, pd=rates.pd,
                ydd_ours=loops.spanning_acceleration(lm, q, yd, jnp.linalg.solve(M_y, rates.pd - M_y_dot @ yd)))


@functools.cache
def references(kind, arg):
    lm, q, yd = case(kind, arg)
    tau = jnp.asarray(np.random.default_rng(7).normal(size=lm.ny))
    return _against_references(lm, q, yd, tau), yd, tau


REFERENCE_CASES = [("random", 1)]  # clusters of several loops and a coupling; the N-bar has its own tests above


@pytest.mark.parametrize("kind, arg", REFERENCE_CASES)
def test_momenta_round_trip_through_the_embedded_bias_free_sweep(kind, arg):
    ref, yd, _ = references(kind, arg)
    assert_close(ref["p"], ref["M_y"] @ yd, 1e-12)  # p = G* M G yd
    assert_close(ref["yd_from_p"], jnp.linalg.solve(ref["M_y"], ref["p"]), 1e-12)
    assert_close(ref["yd_from_p"], yd, 1e-12)


@fast_jit
def _inverse_times_against_dense(lm, q, x, dq, dx, dmass, ct):
    """``M_y^-1 x`` by the bias-free factors (`jaxmb.loops.mass_matrix_inverse_times`, and its two steps) and by
    the dense ``solve(G* M G, x)``, with their forward derivatives along ``(dq, dx, dmass)`` (``dmass``: of the
    tree's body masses) and their reverse derivatives for ``ct``."""
    def ours(q, x, mass):
        return loops.mass_matrix_inverse_times(lm.replace(tree=lm.tree.replace(mass=mass)), q, x)

    def dense(q, x, mass):
        return jnp.linalg.solve(loops.mass_matrix(lm.replace(tree=lm.tree.replace(mass=mass)), q), x)

    at, along = (q, x, lm.tree.mass), (dq, dx, dmass)
    out = {}
    for name, f in (("ours", ours), ("dense", dense)):
        y, dy = jax.jvp(f, at, along)
        out[name] = dict(y=y, dy=dy, ct=jax.vjp(f, *at)[1](ct))
    out["two_steps"] = loops.articulated.solve_factored(lm, loops.articulated.mass_matrix_factors(lm, q), x)
    return out


@pytest.mark.parametrize("kind, arg", [("n_bar", 4), ("random", 1)])
def test_bias_free_inverse_times_and_its_derivatives_equal_the_dense_solve(kind, arg):
    """The factors of ``M_y`` from the up sweep without bias terms and their solve give ``M_y^-1 x`` of the dense
    ``G* M G``; its derivatives in ``q``, ``x`` and the body masses, forward and reverse, are the dense solve's
    (screw joints only: any ``q`` is a configuration, and both embed at it)."""
    lm, q, _ = case(kind, arg)
    rng = np.random.default_rng(3)
    x, dq, dx, ct = (jnp.asarray(rng.normal(size=n)) for n in (lm.ny, lm.tree.nq, lm.ny, lm.ny))
    out = _inverse_times_against_dense(lm, q, x, dq, dx, jnp.asarray(rng.normal(size=lm.tree.nb)), ct)
    ours, dense = out["ours"], out["dense"]
    assert_close(ours["y"], dense["y"], 1e-12)
    assert_close(out["two_steps"], dense["y"], 1e-12)
    assert_close(ours["dy"], dense["dy"], 1e-10)
    for a, b in zip(ours["ct"], dense["ct"]):
        assert_close(a, b, 1e-10)


@pytest.mark.parametrize("kind, arg", REFERENCE_CASES)
def test_momentum_rates_give_the_embedded_projected_and_lagrange_accelerations(kind, arg):
    """``pd = M_y ydd + Mdot_y yd``: the accelerations it implies are those of the embedded articulated-body
    algorithm and of Lagrange multipliers."""
    ref, yd, _ = references(kind, arg)
    assert_close(ref["yd_rate"], yd, 1e-12)
    assert_close(ref["ydd_ours"], ref["qdd_embedded"], 1e-10)
    assert_close(ref["ydd_ours"], ref["qdd_lagrange"], 1e-10)


@pytest.mark.parametrize("kind, arg", REFERENCE_CASES)
def test_momentum_rates_equal_minus_dH_dy_plus_tau_by_autodiff(kind, arg):
    ref, _, tau = references(kind, arg)
    assert_close(ref["pd"], ref["minus_dH_dy"] + tau, 1e-10)


def rk4_step(rate, y, dt):
    """One classical Runge-Kutta step of ``y' = rate(y)`` (pytrees; ``rate`` also returns a record per evaluation),
    the four stages as one `lax.scan`, so that ``rate`` is traced once: ``(y+, records (4, ...))``."""
    c, b = jnp.array([0.0, 0.5, 0.5, 1.0]), jnp.array([1.0, 2.0, 2.0, 1.0]) / 6

    def stage(carry, cb):
        k, acc = carry
        k, record = rate(jax.tree.map(lambda y, k: y + cb[0] * dt * k, y, k))
        return (k, jax.tree.map(lambda a, k: a + cb[1] * dt * k, acc, k)), record

    zero = jax.tree.map(jnp.zeros_like, y)
    (_, acc), records = jax.lax.scan(stage, (zero, zero), jnp.stack([c, b], 1))
    return jax.tree.map(jnp.add, y, acc), records


def test_spanning_velocity_satisfies_the_constraints_at_every_evaluation_of_a_trajectory():
    """RK4 on ``(q, p)`` of the four-bar over 50 steps of 5 ms (short of the dead centre its fall reaches),
    recording ``K qd`` at every evaluation of the right side: zero to round-off at each (the velocity is ``G yd``
    with ``K G = 0``), while ``phi(q)`` drifts slowly (RK4 does not project ``q``)."""
    lm, q, yd = n_bar(3)
    tau = jnp.zeros(lm.ny)

    def rate(y):
        q, p = y
        yd, pd = closed.hamiltonian_dynamics(lm, q, p, tau)
        qd = loops.spanning_velocity(lm, q, yd)
        residual = jnp.max(jnp.abs(loops.constraint_jacobian(lm, q) @ qd)) / jnp.max(jnp.abs(qd))
        return (configuration_rate(lm.tree, q, qd), pd), residual

    def step(y, _):
        y, residuals = rk4_step(rate, y, 0.005)
        return y, (residuals, jnp.max(jnp.abs(loops.constraint_residual(lm, y[0]))))

    _, (residuals, phi) = fast_jit(lambda q, p: jax.lax.scan(step, (q, p), None, length=50))(
        q, closed.momenta(lm, q, yd))
    assert residuals.shape == (50, 4)
    assert float(jnp.max(residuals)) < 1e-14
    assert float(jnp.max(phi)) < 1e-6


def test_momenta_of_the_wrong_size_are_refused_with_their_name():
    lm, q, _ = n_bar(3)
    with pytest.raises(ValueError, match="p must have shape"):
        closed.hamiltonian_dynamics(lm, q, jnp.zeros(lm.ny + 1), jnp.zeros(lm.ny))
