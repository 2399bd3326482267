"""JAX transformations of the public functions: jit == eager, vmap over states and over models == a loop,
forward- and reverse-mode derivatives (`jax.test_util`'s checks against central differences, NaN-free at the
neutral configuration and at zero velocity), and float32.

One small floating-base tree holds the joint kinds with distinct code paths (free, spherical, planar, and a
revolute screw). The functions under test are gathered in `outputs`, so each transformation compiles one program.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from jax.test_util import check_grads

import checks
import jaxmb
from jaxmb.dynamics.articulated import articulated_body
from jaxmb.dynamics.inverse import joint_forces
from jaxmb.testing import random_model, random_state

RTOL = 1e-12  # float64: the same computation traced differently (jit, vmap) agrees to rounding
IMPLICIT_RTOL = 1e-10  # one derivative by two computations: the implicit function theorem and the sweeps' autodiff
FLOAT32_RTOL = 1e-3  # the float32 tolerance: float32 results against float64 ones, relative to the largest entry


assert_close = functools.partial(checks.assert_close, rtol=RTOL)


def assert_tree_close(actual, expected, rtol=RTOL):
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        assert_close(a, e, rtol=rtol)


@functools.cache
def model():
    m = random_model(20, n_bodies=4, joint_mix="mixed", floating_base=True, branching=0.5)
    assert {"free", "revolute", "spherical", "planar"} == set(m.joint_types)
    return m


def states(n, seed=0):
    """``n`` random states (q, qd, u, f_ext), stacked along a leading axis."""
    return _draw_states(model(), jax.random.split(jax.random.PRNGKey(seed), n))


@checks.fast_jit  # one program per number of states instead of op by op
def _draw_states(m, keys):
    q, qd, u = jax.vmap(lambda k: random_state(m, k))(keys)
    f_ext = jax.vmap(lambda k: jax.random.normal(jax.random.fold_in(k, 1), (m.nb, 6), jnp.float64))(keys)
    return q, qd, u, f_ext


def outputs(model, q, qd, u, f_ext):
    """The public functions at one state; ``u`` is tau for forward dynamics and qdd for inverse dynamics."""
    return dict(
        forward_dynamics=jaxmb.forward_dynamics(model, q, qd, u, f_ext),
        inverse_dynamics=jaxmb.inverse_dynamics(model, q, qd, u),
        mass_matrix=jaxmb.mass_matrix(model, q),
        kinetic_energy=jaxmb.kinetic_energy(model, q, qd),
        potential_energy=jaxmb.potential_energy(model, q),
        spatial_momentum=jaxmb.spatial_momentum(model, q, qd),
        center_of_mass=jaxmb.center_of_mass(model, q),
        forward_kinematics=jaxmb.forward_kinematics(model, q),
        jacobians=jaxmb.jacobians(model, q),
        bias_accelerations=jaxmb.bias_accelerations(model, q, qd),
        configuration_rate=jaxmb.configuration_rate(model, q, qd),
        integrate=jaxmb.integrate(model, q, qd, 0.01),
    )


# Compiling dominates this module: programs that are only called (not differentiated) compile with
# `checks.FAST_COMPILE_OPTIONS` (no LLVM optimization; the arithmetic is unchanged, products in the CPU form).
jit_outputs = jax.jit(outputs, compiler_options=checks.FAST_COMPILE_OPTIONS)


def test_jit_equals_eager():
    """The jitted functions agree with op-by-op execution (the core dynamics; eager runs are slow to start)."""
    q, qd, u, f_ext = (x[0] for x in states(1))
    jitted = jit_outputs(model(), q, qd, u, f_ext)
    with jax.disable_jit():
        eager = dict(
            forward_dynamics=jaxmb.forward_dynamics(model(), q, qd, u, f_ext),
            inverse_dynamics=jaxmb.inverse_dynamics(model(), q, qd, u),
            mass_matrix=jaxmb.mass_matrix(model(), q),
            forward_kinematics=jaxmb.forward_kinematics(model(), q),
            spatial_momentum=jaxmb.spatial_momentum(model(), q, qd),
        )
    assert_tree_close({k: jitted[k] for k in eager}, eager)


def test_vmap_over_states_equals_loop():
    batch = states(3, seed=1)
    batched = jax.jit(jax.vmap(outputs, in_axes=(None, 0, 0, 0, 0)), compiler_options=checks.FAST_COMPILE_OPTIONS)(
        model(), *batch)
    for i in range(3):
        assert_tree_close(jax.tree.map(lambda a: a[i], batched), jit_outputs(model(), *(x[i] for x in batch)))


def test_vmap_over_models_equals_loop():
    """A batch of models of one topology (different masses, inertias, centres of mass and gravity), stacked leaf
    by leaf, is a valid `vmap` argument (domain randomization)."""
    m = model()
    other = m.replace(mass=1.7 * m.mass, inertia=0.6 * m.inertia, com=m.com[::-1], gravity=jnp.array([0.5, 0.0, -3.0]))
    stacked = jax.tree.map(lambda a, b: jnp.stack([a, b]), m, other)
    q, qd, u, f_ext = (x[0] for x in states(1, seed=2))
    batched = jax.jit(jax.vmap(outputs, in_axes=(0, None, None, None, None)),
                      compiler_options=checks.FAST_COMPILE_OPTIONS)(stacked, q, qd, u, f_ext)
    for i, mi in enumerate((m, other)):
        assert_tree_close(jax.tree.map(lambda a: a[i], batched), jit_outputs(mi, q, qd, u, f_ext))
    assert np.abs(batched["forward_dynamics"][0] - batched["forward_dynamics"][1]).max() > 1e-2


# -- derivatives -----------------------------------------------------------------------------------------------


def dynamics(q, qd, u, mass, com, inertia, armature):
    """Forward and inverse dynamics (with ``u`` as tau and as qdd) as one function of the state and of the
    model's masses, centres of mass, rotational inertias and armature (one set of derivative programs for the
    tests that check them in some of these, `check_grads_in_groups`)."""
    m = model().replace(mass=mass, com=com, inertia=inertia, armature=armature)
    return jnp.concatenate([jaxmb.forward_dynamics(m, q, qd, u), jaxmb.inverse_dynamics(m, q, qd, u)])


STATE_MASSES_AND_COMS = (0, 1, 2, 3, 4)  # positions in the arguments of `dynamics`


def derivative_points():
    m = model()
    q, qd, u, _ = (x[0] for x in states(1, seed=3))
    neutral = jaxmb.neutral_configuration(m)
    return {
        "random": (q, qd, u, m.mass, m.com, m.inertia, m.armature),
        # identity quaternions, at rest
        "neutral": (neutral, jnp.zeros_like(qd), jnp.zeros_like(u), m.mass, m.com, m.inertia, m.armature),
    }


@pytest.mark.parametrize("point", ["random", "neutral"])
def test_check_grads_of_forward_and_inverse_dynamics(point, check_grads_in_groups):
    """`check_grads` (order 1, forward and reverse mode) with respect to q, qd, tau/qdd, masses and centres of
    mass, at a random state and at q = neutral (identity quaternions), qd = 0. Derivatives must also be free of
    NaN and inf (check_grads compares NaN as equal to NaN)."""
    args = derivative_points()[point]
    group = STATE_MASSES_AND_COMS
    check_grads_in_groups(dynamics, args, [group])
    keys = jax.random.split(jax.random.PRNGKey(0), len(group))
    tangents = [jnp.zeros_like(x) for x in args]
    for k, i in zip(keys, group):
        tangents[i] = jax.random.normal(k, args[i].shape, args[i].dtype)
    _, jvp, vjp = checks.derivative_programs(dynamics)
    out, tangent_out = jvp(args, tuple(tangents))
    cotangents = [vjp(args, jnp.ones_like(out))[i] for i in group]
    for x in (tangent_out, *cotangents):
        assert np.all(np.isfinite(x))
    if point == "random":
        assert min(np.abs(c).max() for c in cotangents) > 1e-3  # every argument matters (at rest, dC/dqd = 0)


def _through_the_sweeps(m, q, qd, tau, f_ext):
    return articulated_body(m, q, qd, tau, f_ext).qdd


@checks.fast_jit(static_argnums=0)
def _derivatives(fd, m, q, qd, tau, f_ext, directions):
    """Reverse mode in every argument (the model's leaves included), one forward-mode directional derivative in
    all of them at once, and the Hessian in the model and the state, of ``sum(sin(fd(...)))`` or of ``fd``.

    The Hessian is taken a column at a time, the gradient's derivative along each coordinate of the model and the
    state, by a `jax.lax.map`: one column traced, unbatched, a smaller program than ``jax.hessian``'s batch of
    columns through the sweeps' batching rules. Its rows are the gradient in every argument."""
    args = (m, q, qd, tau, f_ext)
    loss = lambda *a: jnp.sum(jnp.sin(fd(*a)))  # noqa: E731
    gradient = jax.grad(loss, argnums=range(5))
    x, unravel = ravel_pytree((m, q, qd))

    def column(e):
        return jax.jvp(lambda x: gradient(*unravel(x), tau, f_ext), (x,), (e,))

    gradients, hessian = jax.lax.map(column, jnp.eye(x.size, dtype=x.dtype))
    return jax.tree.map(lambda g: g[0], gradients), jax.jvp(fd, args, directions)[1], hessian


def _model_state_and_directions(seed):
    """A random tree with armature, one state ``(q, qd, u, f_ext)`` and a random direction in all of them."""
    m = random_model(20, n_bodies=4, joint_mix="mixed", floating_base=True, branching=0.5, armature=True)
    args = tuple(x[0] for x in states(1, seed=seed))
    flat, tree = jax.tree.flatten((m, *args))
    keys = jax.random.split(jax.random.PRNGKey(seed), len(flat))
    directions = jax.tree.unflatten(tree, [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, flat)])
    return m, args, directions


def test_forward_dynamics_derivatives_equal_autodiff_through_the_sweeps():
    """`forward_dynamics` differentiates by the implicit function theorem, ``d qdd = M^-1 (d tau - d ID)``; its
    gradient, a directional derivative and the second derivatives (the rule differentiated again) equal those of
    autodiff through the three AB sweeps, in the state, ``f_ext`` and every model parameter (armature and a
    non-symmetric inertia direction included)."""
    m, args, directions = _model_state_and_directions(seed=6)
    implicit = _derivatives(jaxmb.forward_dynamics, m, *args, directions)
    sweeps = _derivatives(_through_the_sweeps, m, *args, directions)
    assert_tree_close(implicit, sweeps, rtol=IMPLICIT_RTOL)
    grad_inertia = implicit[0][0].inertia
    assert_close(grad_inertia, jnp.swapaxes(grad_inertia, 1, 2))  # the inertia enters by its symmetric part


def test_inverse_dynamics_derivatives_equal_autodiff_through_the_sweeps():
    """`inverse_dynamics` reverse mode is a hand-written adjoint (`jaxmb.dynamics.adjoint`); its gradient, a
    directional derivative and the second derivatives (the adjoint differentiated) equal those of autodiff through
    Newton-Euler's sweeps, in the state, ``f_ext`` and every model parameter (armature included)."""
    m, args, directions = _model_state_and_directions(seed=8)
    adjoint = _derivatives(jaxmb.inverse_dynamics, m, *args, directions)
    sweeps = _derivatives(joint_forces, m, *args, directions)  # the plain function: autodiff through its sweeps
    assert_tree_close(adjoint, sweeps, rtol=IMPLICIT_RTOL)


def test_check_grads_of_forward_dynamics_in_the_inertias(check_grads_in_groups):
    """`check_grads` (forward and reverse mode) of the implicit derivatives against finite differences of
    `forward_dynamics` itself (with `inverse_dynamics` alongside, in `dynamics`), in the rotational inertias (in
    any direction, symmetric or not), the armature and the state."""
    q, qd, tau, _ = (x[0] for x in states(1, seed=7))
    m = model()
    args = (q, qd, tau, m.mass, m.com, m.inertia, jnp.full(m.nv, 0.1, m.armature.dtype))  # not weakly typed
    check_grads_in_groups(dynamics, args, [(5, 6, 0, 1, 2)])  # (inertia, armature, q, qd, tau)


@jax.jit
def _integrate(q, qd, dt):
    return jaxmb.integrate(model(), q, qd, dt)


@functools.partial(jax.jit, compiler_options=checks.FAST_COMPILE_OPTIONS)
def _integrate_derivatives(q, qd, dt):
    m = model()
    step = jax.jacfwd(lambda v: jaxmb.integrate(m, q, v, dt))(qd)
    step_rev = jax.jacrev(lambda v: jaxmb.integrate(m, q, v, dt))(qd)
    rate = jax.jacfwd(lambda v: jaxmb.configuration_rate(m, q, v))(qd)
    return step, step_rev, rate


@pytest.mark.parametrize("speed", [0.0, 1e-7, 1e-4])
def test_integrate_derivative_near_zero_velocity(speed):
    """d integrate(q, qd, dt)/d qd at (near) qd = 0 is dt d configuration_rate/d qd, finite in both modes: the
    rotation-vector maps (quaternion exponential, SO(3) left Jacobian) are smooth through zero (the near-singular
    samples of jaxlie's exp(1e-7 xi))."""
    q, qd, *_ = (x[0] for x in states(1, seed=4))
    direction = qd / jnp.linalg.norm(qd)
    dt = 0.1
    step, step_rev, rate = _integrate_derivatives(q, speed * direction, dt)
    assert np.all(np.isfinite(step)) and np.all(np.isfinite(step_rev))
    assert_close(step_rev, step)
    # first order in dt |qd|: the deviation from the linearization is O(speed * dt^2)
    assert_close(step, dt * rate, rtol=max(1e-12, 10 * speed * dt))
    with checks.multiply_reduce_products():  # `_integrate` is jitted: each derivative compiles one program
        check_grads(lambda v: _integrate(q, v, dt), (speed * direction,), order=1, modes=("fwd", "rev"))


# -- float32 -------------------------------------------------------------------------------------------------------


def test_float32_matches_float64():
    """`Model.cast(float32)` with float32 inputs computes in float32 (every output is float32) and agrees with
    the float64 result to FLOAT32_RTOL, relative to the largest entry of each output."""
    batch = states(1, seed=5)
    args64 = tuple(x[0] for x in batch)
    args32 = tuple(x.astype(jnp.float32) for x in args64)
    out64 = jit_outputs(model(), *args64)
    out32 = jit_outputs(model().cast(jnp.float32), *args32)
    for (path, a32), a64 in zip(jax.tree_util.tree_leaves_with_path(out32), jax.tree.leaves(out64), strict=True):
        assert a32.dtype == jnp.float32, path
        assert_close(a32, a64, rtol=FLOAT32_RTOL, scale=max(1e-3, float(np.abs(a64).max())))


def test_float32_mass_matrix_is_as_accurate_far_from_the_origin():
    """The mass matrix does not depend on where the floating base stands, and in float32 it is as accurate 1 km
    from the world's origin as at it: it is computed in the root body's frame, where the lever arms are the size of
    the robot (in the world's frame, an inertia about the origin 1 km away would lose 1e6 of float32's 1e7)."""
    q = states(1, seed=6)[0][0]
    assert model().joint_types[0] == "free"
    far = q.at[:3].add(1000.0)  # the free root joint's position
    mass_matrix = checks.fast_jit(jaxmb.mass_matrix)
    M64 = mass_matrix(model(), q)
    M32 = [mass_matrix(model().cast(jnp.float32), p.astype(jnp.float32)) for p in (q, far)]
    scale = float(np.abs(M64).max())
    errors = [float(np.abs(M - M64).max()) / scale for M in M32]
    assert errors[0] < 1e-6
    assert errors[1] < 1e-6


def test_float32_dynamics_derivatives_are_as_accurate_far_from_the_origin():
    """The derivatives of Newton-Euler and of the forward dynamics, in float32, are as accurate 1 km from the world's
    origin as at it. They are computed in the root body's frame; in the world's frame ``d qdd/d q`` 1 km away was
    many times its own size off."""
    q, qd, u, f_ext = (x[0] for x in states(1, seed=7))
    far = q.at[:3].add(1000.0)  # the free root joint's position
    m32 = model().cast(jnp.float32)
    derivatives = checks.fast_jit(lambda *a: (*jaxmb.inverse_dynamics_derivatives(*a)[1:3],
                                              *jaxmb.forward_dynamics_derivatives(*a)[1:3]))  # a program per dtype
    for p in (q, far):
        exact = derivatives(model(), p, qd, u, f_ext)
        single = derivatives(m32, *(x.astype(jnp.float32) for x in (p, qd, u, f_ext)))
        for name, a32, a64 in zip(("dtau_dq", "dtau_dqd", "dqdd_dq", "dqdd_dqd"), single, exact, strict=True):
            scale = float(np.abs(a64).max())
            assert float(np.abs(a32 - a64).max()) / scale < 1e-4, (name, float(p[0]))
