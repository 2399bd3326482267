"""Hamiltonian dynamics of trees (`jaxmb.dynamics.hamiltonian`, Naudet and Lefeber 2005, eqs. 17-28) against dense
and autodiff oracles: ``p = M qd``, ``qd = solve(M, p)``, ``pd = -dH/dq + tau`` (Hamel's form for body-frame
velocities), ``pd = M qdd + Mdot qd`` from the ABA, and trajectories in ``(q, p)`` and ``(q, qd)``."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from checks import assert_close, check_grads, derivative_programs, fast_jit
from jaxmb.configuration import configuration_rate, integrate
from jaxmb.dynamics.articulated import forward_dynamics
from jaxmb.dynamics.energy import kinetic_energy, potential_energy
from jaxmb.dynamics.hamiltonian import (
    hamiltonian,
    hamiltonian_dynamics,
    momenta,
    momentum_rates,
    velocities_from_momenta,
)
from jaxmb.dynamics.mass import mass_matrix
from jaxmb.hinges import hinge_map
from jaxmb.spatial import cross_force
from jaxmb.testing import random_model, random_state

MODELS = {  # every joint kind (free, revolute, prismatic, helical, spherical, planar), armature on every coordinate
    "mixed_floating_armature": dict(seed=17, n_bodies=6, joint_mix="mixed", floating_base=True, armature=True),
}
SCREW_CHAIN = dict(seed=5, n_bodies=6, joint_mix="screw", branching=0.0)  # derivatives and batches


@functools.cache
def screw_chain():
    model = random_model(**SCREW_CHAIN)
    q, qd, tau = random_state(model, jax.random.PRNGKey(11))
    return model, q, qd, tau


@functools.cache
def model_and_state(name):
    model = random_model(**MODELS[name])
    q, qd, tau = random_state(model, jax.random.PRNGKey(11))
    f_ext = jax.random.normal(jax.random.PRNGKey(12), (model.nb, 6), q.dtype)
    return model, q, qd, tau, f_ext


def coadjoint(model, qd, p_bodies):
    """``H(k) ((H*(k) qd(k)) x* (H*(k) p(k)))`` per joint (nv,): the coadjoint action of each joint's group on its
    momentum (zero for a screw joint), from the dense rows of ``H``."""
    H, topo = hinge_map(model), model.topology
    out = []
    for k in range(model.nb):
        rows = slice(int(topo.v_offset[k]), int(topo.v_offset[k] + topo.nv_body[k]))
        out.append(H[rows] @ cross_force(H[rows].T @ qd[rows], H[rows].T @ p_bodies[rows]))
    return jnp.concatenate(out)


@fast_jit
def _against_references(model, q, qd, tau, f_ext):
    """Ours and the dense and autodiff references at one state under the external forces ``f_ext``: one program
    per model, called with and without them (zero; the forces' default, None, is the path of the trajectories and
    derivatives below)."""
    M = mass_matrix(model, q)
    p = M @ qd

    def H(q):  # H(q, p) = 1/2 p* M(q)^-1 p + V_g(q), dense
        return 0.5 * p @ jnp.linalg.solve(mass_matrix(model, q), p) + potential_energy(model, q)

    # -d_L H: along q moved on each joint's manifold by a unit body-frame velocity (d/dq for a screw joint)
    minus_dH = -jax.grad(lambda v: H(integrate(model, q, v, 1.0)))(jnp.zeros_like(qd))
    q_rate = configuration_rate(model, q, qd)
    M_dot = jax.jvp(lambda q: mass_matrix(model, q), (q,), (q_rate,))[1]
    return dict(M=M, p=momenta(model, q, qd), qd=velocities_from_momenta(model, q, p),
                rates=hamiltonian_dynamics(model, q, p, tau, f_ext),
                hamel=minus_dH + tau - coadjoint(model, qd, p - model.armature * qd),
                newton=M @ forward_dynamics(model, q, qd, tau, f_ext) + M_dot @ qd,
                rates_at_velocity=momentum_rates(model, q, qd, tau, f_ext),
                H=hamiltonian(model, q, p), energy=kinetic_energy(model, q, qd) + potential_energy(model, q))


@functools.cache
def references(name):
    """The references without external forces, and with them (``"ext"``)."""
    model, q, qd, tau, f_ext = model_and_state(name)
    ref = _against_references(model, q, qd, tau, jnp.zeros_like(f_ext))
    return dict(ref, ext=_against_references(model, q, qd, tau, f_ext))


@pytest.mark.parametrize("name", MODELS)
def test_momenta_round_trip_through_the_bias_free_articulated_sweep(name):
    _, _, qd, _, _ = model_and_state(name)
    ref = references(name)
    assert_close(ref["p"], ref["M"] @ qd, 1e-12)  # p = M qd (25)
    assert_close(ref["qd"], jnp.linalg.solve(ref["M"], ref["M"] @ qd), 1e-12)  # qd = M^-1 p (20)-(24), (28)
    assert_close(ref["qd"], qd, 1e-12)
    assert_close(ref["rates"].qd, qd, 1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_momentum_rates_equal_minus_dH_dq_plus_tau_by_autodiff(name):
    """For screw joints ``pd = -dH/dq + tau``; for spherical, planar and free joints Hamel's form, with the
    coadjoint term of the joint's group (module docstring of `jaxmb.dynamics.hamiltonian`)."""
    ref = references(name)
    assert_close(ref["rates"].pd, ref["hamel"], 1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_momentum_rates_equal_M_qdd_plus_Mdot_qd_from_the_aba(name):
    ref = references(name)
    assert_close(ref["rates"].pd, ref["newton"], 1e-12)
    assert_close(ref["ext"]["rates"].pd, ref["ext"]["newton"], 1e-12)  # with external forces
    assert_close(ref["ext"]["rates_at_velocity"], ref["ext"]["newton"], 1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_hamiltonian_is_the_kinetic_plus_potential_energy(name):
    ref = references(name)
    assert_close(ref["H"], ref["energy"], 1e-12)


def rk4_step(rate, y, dt):
    """One classical Runge-Kutta step of ``y' = rate(y)`` (pytrees), the stages as one `lax.scan` (one trace)."""
    c, b = jnp.array([0.0, 0.5, 0.5, 1.0]), jnp.array([1.0, 2.0, 2.0, 1.0]) / 6

    def stage(carry, cb):
        k, acc = carry
        k = rate(jax.tree.map(lambda y, k: y + cb[0] * dt * k, y, k))
        return (k, jax.tree.map(lambda a, k: a + cb[1] * dt * k, acc, k)), None

    zero = jax.tree.map(jnp.zeros_like, y)
    (_, acc), _ = jax.lax.scan(stage, (zero, zero), jnp.stack([c, b], 1))
    return jax.tree.map(jnp.add, y, acc)


@fast_jit
def _two_trajectories(model, q, qd, tau):
    """200 RK4 steps of 1 ms in ``(q, p)`` and in ``(q, qd)`` from the same state (``q`` in its coordinates,
    quaternion rates by `configuration_rate`): the end points, and the momenta of the second."""

    def hamilton(y):
        q, p = y
        qd, pd = hamiltonian_dynamics(model, q, p, tau)
        return configuration_rate(model, q, qd), pd

    def lagrange(y):
        q, qd = y
        return configuration_rate(model, q, qd), forward_dynamics(model, q, qd, tau)

    def run(rate, y):
        return jax.lax.fori_loop(0, 200, lambda i, y: rk4_step(rate, y, 1e-3), y)

    qh, ph = run(hamilton, (q, momenta(model, q, qd)))
    ql, qdl = run(lagrange, (q, qd))
    return qh, ph, ql, momenta(model, ql, qdl)


def test_trajectories_in_q_p_and_q_qd_agree_under_tight_rk4():
    model, q, qd, tau, _ = model_and_state("mixed_floating_armature")
    qh, ph, ql, pl = _two_trajectories(model, q, qd, tau)
    assert_close(qh, ql, 1e-10)
    assert_close(ph, pl, 1e-10)


def test_hamiltonian_dynamics_is_differentiable_and_batches():
    model, q, qd, tau = screw_chain()
    p = momenta(model, q, qd)

    def rates(q, p, tau):
        return hamiltonian_dynamics(model, q, p, tau)

    check_grads(rates, (q, p, tau), atol=1e-6, rtol=1e-6)
    one_state = derivative_programs(rates)[0]  # the program of ``rates`` that check_grads compiled
    batch = jax.vmap(lambda s: 1.0 + 0.1 * s)(jnp.arange(3.0))
    out = fast_jit(jax.vmap(lambda s: rates(q * s, p * s, tau)))(batch)
    for i, s in enumerate(batch):
        one = one_state(q * s, p * s, tau)
        assert_close(out.qd[i], one.qd, 1e-13)
        assert_close(out.pd[i], one.pd, 1e-13)


def test_momenta_of_the_wrong_size_are_refused_with_their_name():
    model, q, _, tau = screw_chain()
    with pytest.raises(ValueError, match="p must have shape"):
        hamiltonian_dynamics(model, q, jnp.zeros(model.nv + 1), tau)
    with pytest.raises(ValueError, match="p must have shape"):
        velocities_from_momenta(model, q, np.zeros((2, model.nv)))
