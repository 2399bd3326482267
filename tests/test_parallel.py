"""`jaxmb.sharded_vmap`: the values and derivatives of `jax.vmap`, with the batch split over the devices; clear
errors for what it cannot map. `jaxmb.split_batch`: a batch placed on the devices stays split through a call. The
suite's process has one CPU device (JAX fixes its devices at its first operation), so the split over two is
checked in a fresh process that calls `jaxmb.use_cpu_cores(2)` first."""

import json
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb.testing import random_model, random_state

from checks import fast_compile_environment, fast_jit

TWO_DEVICES = textwrap.dedent("""
    import dataclasses, json
    import jax
    import jaxmb
    jaxmb.use_cpu_cores(2)
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jaxmb.testing import random_model, random_state

    model = random_model(2, n_bodies=4, floating_base=True)
    out = {"devices": len(jax.devices())}

    def fd(q, qd, tau, mass):
        return jaxmb.forward_dynamics(dataclasses.replace(model, mass=mass), q, qd, tau)

    def loss(batched, mass, q, qd, tau):
        return jnp.sum(batched(fd, in_axes=(0, 0, 0, None))(q, qd, tau, mass) ** 2)

    for batch in (1, 5):
        keys = jax.random.split(jax.random.PRNGKey(batch), batch)
        q, qd, tau = jax.jit(jax.vmap(random_state, (None, 0)))(model, keys)  # one program, not op by op
        want = jax.jit(jax.vmap(fd, in_axes=(0, 0, 0, None)))(q, qd, tau, model.mass)
        sharded = jaxmb.jit(jaxmb.sharded_vmap(fd, in_axes=(0, 0, 0, None)))
        got = sharded(q, qd, tau, model.mass)
        hlo = sharded.lower(q, qd, tau, model.mass).as_text()
        out[batch] = {"shape": list(got.shape), "value": float(jnp.abs(got - want).max() / jnp.abs(want).max()),
                      "partitions": "mhlo.num_partitions = 2" in hlo}
    split = jaxmb.split_batch((q[:4], qd[:4], tau[:4]))
    ys = sharded(*split, model.mass)
    out["split"] = {"inputs": [len(x.sharding.device_set) for x in split], "outputs": len(ys.sharding.device_set),
                    "value": float(jnp.abs(ys - want[:4]).max() / jnp.abs(want).max())}
    try:
        jaxmb.split_batch(q)
    except ValueError as e:
        out["uneven"] = str(e)
    grad = lambda batched: jax.jit(jax.grad(loss, argnums=(1, 2, 3, 4)), static_argnums=0)(
        batched, model.mass, q, qd, tau)
    out["gradient"] = max(float(jnp.abs(a - b).max() / jnp.abs(a).max())
                          for a, b in zip(grad(jax.vmap), grad(jaxmb.sharded_vmap)))
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def two_devices():
    """What the fresh process with two CPU devices found: batches of 1 and 5 states (each padded to an even batch),
    and the gradient of a loss over the batch of 5."""
    run = subprocess.run([sys.executable, "-c", TWO_DEVICES], capture_output=True, text=True, timeout=600,
                         env=fast_compile_environment())
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def problem():
    model = random_model(4, n_bodies=3, floating_base=True)
    q, qd, tau = fast_jit(jax.vmap(random_state, (None, 0)))(model, jax.random.split(jax.random.PRNGKey(1), 5))
    return model, q, qd, tau


def test_use_cpu_cores_gives_jax_that_many_devices(two_devices):
    assert two_devices["devices"] == 2


@pytest.mark.parametrize("batch", ["1", "5"])
def test_split_over_two_devices_equals_vmap(two_devices, batch):
    found = two_devices[batch]
    assert found["partitions"], "the program is not split over the two devices"
    assert found["shape"][0] == int(batch)
    assert found["value"] < 1e-13


def test_gradient_split_over_two_devices_equals_the_gradient_through_vmap(two_devices):
    assert two_devices["gradient"] < 1e-12  # with respect to the states and to the masses all states share


def test_a_split_batch_stays_split_through_a_call(two_devices):
    found = two_devices["split"]
    assert found["inputs"] == [2, 2, 2] and found["outputs"] == 2
    assert found["value"] < 1e-13


def test_split_batch_names_a_batch_the_devices_do_not_divide(two_devices):
    assert two_devices["uneven"] == "split_batch: a batch of 5 states does not divide evenly over 2 devices"


def test_split_batch_names_a_scalar():
    with pytest.raises(ValueError, match="split_batch: a batched argument holds a scalar"):
        jaxmb.split_batch({"q": jnp.ones((4, 3)), "t": jnp.float32(0.0)})


def test_on_one_device_equals_vmap(problem):
    model, q, qd, tau = problem
    want = fast_jit(jax.vmap(jaxmb.inverse_dynamics, in_axes=(None, 0, 0, 0)))(model, q, qd, tau)
    got = fast_jit(jaxmb.sharded_vmap(jaxmb.inverse_dynamics, (None, 0, 0, 0)))(model, q, qd, tau)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("in_axes, args, message", [
    ((0, 1), (jnp.ones((3, 2)), jnp.ones((3, 2))), "in_axes must be 0, None"),
    ((0,), (jnp.ones((3, 2)), jnp.ones((3, 2))), "in_axes must be 0, None"),
    (0, (jnp.ones((3, 2)), jnp.ones((4, 2))), "different batch sizes"),
    (None, (jnp.ones((3, 2)),), "no argument is batched"),
    (0, (jnp.ones((3, 2)), jnp.float32(1.0)), "holds a scalar"),
])
def test_errors_name_the_problem(in_axes, args, message):
    with pytest.raises(ValueError, match=message):
        jaxmb.sharded_vmap(lambda *xs: sum(x.sum() for x in xs), in_axes)(*args)
