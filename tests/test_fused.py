"""The fused GPU kernels of the forward dynamics (`jaxmb.dynamics.fused`), run by Pallas' interpreter on the CPU:
they agree with Pinocchio's ``aba`` on talos (free base, external forces) and with the level-scheduled sweeps to
float64 round-off on random screw trees (fixed base, free base with armature and external forces, two roots of other
kinds) and on talos; `jax.vmap` of `forward_dynamics` takes them when the backend is a GPU and the model fits, and
the sweeps otherwise; both kernels lower for CUDA (Triton).
"""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxmb
from jaxmb import joints
from jaxmb.dynamics import fused
from jaxmb.testing import ModelBuilder, random_inertia, random_model
from checks import fast_jit
from pinocchio_bridge import load_pair, urdf_path

RTOL = 1e-12  # float64, relative to the largest acceleration
PIN_RTOL = 1e-9  # relative to the norm of Pinocchio's result, as tests/test_pinocchio_oracle.py


def _two_roots():
    """A spherical root and a planar root, each under screw joints of every kind."""
    rng = np.random.default_rng(0)
    b = ModelBuilder("two-roots")
    for name, parent, joint in [("r0", None, joints.spherical()), ("r1", None, joints.planar()),
                                ("c0", "r0", joints.revolute(rng.normal(size=3))),
                                ("c1", "r1", joints.helical(rng.normal(size=3), 0.1)),
                                ("c2", "c0", joints.prismatic(rng.normal(size=3)))]:
        m, c, I = random_inertia(rng)
        b.add_body(name, parent, joint, placement=(np.eye(3), rng.uniform(-0.5, 0.5, 3)), mass=m, com=c, inertia=I,
                   armature=0.05)
    return b.build()


def _talos():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jaxmb.load_urdf(urdf_path("talos_full_v2"), floating_base=True)


MODELS = {
    "fixed-base": lambda: random_model(2, n_bodies=6, joint_mix="screw", armature=True),
    "free-base": lambda: random_model(1, n_bodies=6, joint_mix="screw", floating_base=True, armature=True),
    "two-roots": _two_roots,
    "talos": _talos,
}


@functools.partial(fast_jit, static_argnums=(1, 2))  # one program instead of op by op
def _batch(model, n, seed=0):
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(seed), 4)
    q = jax.vmap(lambda k: jaxmb.random_configuration(model, k))(jax.random.split(k1, n))
    return q, jax.random.normal(k2, (n, model.nv)), jax.random.normal(k3, (n, model.nv)), \
        jax.random.normal(k4, (n, model.nb, 6))


@fast_jit  # one program instead of op by op
def _sweeps(model, q, qd, tau, f_ext):
    return jax.vmap(jaxmb.forward_dynamics, (None, 0, 0, 0, 0 if f_ext is not None else None))(model, q, qd, tau, f_ext)


@pytest.mark.parametrize("name", list(MODELS))
def test_kernels_equal_the_sweeps(name):
    model = MODELS[name]()
    q, qd, tau, f_ext = _batch(model, 5)  # batches of 5 states: padded to one whole block
    with_f = name != "talos"
    f_ext = f_ext if with_f else None
    got = fast_jit(functools.partial(fused.batched_accelerations, model, interpret=True))(q, qd, tau, f_ext)
    expected = _sweeps(model, q, qd, tau, f_ext)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=RTOL * jnp.max(jnp.abs(expected)))


def test_kernels_equal_pinocchio_aba():
    """Talos with a free base (the base by XLA between the two kernels) and external forces, against ``pin.aba``."""
    model, pm, br = load_pair("talos_full_v2", floating_base=True)
    q, qd, tau, f_ext = _batch(model, 3, seed=1)
    got = fast_jit(functools.partial(fused.batched_accelerations, model, interpret=True))(q, qd, tau, f_ext)
    d = pm.createData()
    for s in range(3):
        expected = br.v_from_pin(pin.aba(pm, d, br.q_to_pin(q[s]), br.v_to_pin(qd[s]), br.tau_to_pin(tau[s]),
                                         br.body_forces_to_pin(f_ext[s])))
        assert np.linalg.norm(got[s] - expected) <= PIN_RTOL * np.linalg.norm(expected)


def test_forward_dynamics_takes_the_kernels_on_a_gpu(monkeypatch):
    """Under `jax.vmap` with the backend a GPU: the kernels, with unbatched arguments broadcast; without
    `fused.ON_GPU`, the sweeps."""
    model = MODELS["free-base"]()
    q, qd, tau, _ = _batch(model, 3)
    calls, original = [], fused.batched_accelerations

    def interpreted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs, interpret=True)

    monkeypatch.setattr(fused, "batched_accelerations", interpreted)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    one_tau = fast_jit(jax.vmap(lambda q, qd: jaxmb.forward_dynamics(model, q, qd, tau[0])))
    got = one_tau(q, qd)
    assert len(calls) == 1
    monkeypatch.setattr(fused, "ON_GPU", False)
    expected = fast_jit(jax.vmap(lambda q, qd: jaxmb.forward_dynamics(model, q, qd, tau[0])))(q, qd)
    assert len(calls) == 1
    np.testing.assert_allclose(got, expected, rtol=0, atol=RTOL * jnp.max(jnp.abs(expected)))


def test_rule_leaves_other_models_to_the_sweeps(monkeypatch):
    """A spherical joint below the root, or a batch of models: no kernels (the rule returns None)."""
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    below = random_model(4, n_bodies=5, joint_mix=("spherical", "revolute"))
    assert below.topology.parent[list(below.topology.kinds).index("spherical", 1)] >= 0
    q, qd, tau, _ = _batch(below, 2)
    unbatched = jax.tree.map(lambda _: False, below)
    assert fused.batched_rule(2, (unbatched, True, True, True, None), below, q, qd, tau, None) is None
    with pytest.raises(ValueError, match="below its root"):
        fused.batched_accelerations(below, q, qd, tau)
    model = MODELS["fixed-base"]()
    q, qd, tau, _ = _batch(model, 2)
    batched = jax.tree.map(lambda _: True, model)
    assert fused.batched_rule(2, (batched, True, True, True, None), model, q, qd, tau, None) is None
    assert fused._Plan.of(model.topology) is not None


@pytest.mark.parametrize("name", ["fixed-base", "talos"])
def test_kernels_lower_for_cuda(name):
    """Pallas lowers every operation of the kernels to Triton (one kernel on a fixed base, two around a free
    base), without a GPU: no operation that Triton lacks reaches a GPU."""
    model = MODELS[name]().cast(jnp.float32)
    q, qd, tau, _ = _batch(model, 3)
    lowered = jax.jit(functools.partial(fused.batched_accelerations, model)).trace(
        q.astype(jnp.float32), qd.astype(jnp.float32), tau.astype(jnp.float32)).lower(lowering_platforms=("cuda",))
    assert lowered.as_text().count("triton") == (1 if name == "fixed-base" else 2)
