"""The level schedule and its two sweeps: segments cover the tree, chain slots follow the tree, and `down` / `up`
equal a body-by-body recursion on trees whose levels are swept one by one, as scanned chains, or both."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from jaxmb import sweeps
from jaxmb.testing import random_model
from jaxmb.topology import SEGMENT_COST, Topology

TREES = {  # (n_bodies, branching, joint mix, floating base)
    "chain": (24, 0.0, "revolute", False),
    "chain_on_free_base": (12, 0.0, "revolute", True),
    "bushy_mixed": (14, 0.7, "mixed", False),
    "limbs": (20, 0.15, "revolute", True),
}


@pytest.fixture(scope="module", params=list(TREES))
def topo(request):
    n, branching, mix, floating = TREES[request.param]
    return random_model(3, n_bodies=n, joint_mix=mix, floating_base=floating, branching=branching).topology


def test_segments_cover_the_levels_in_order(topo):
    bounds = [(s.first, s.last) for s in topo.segments]
    assert bounds[0][0] == 0 and bounds[-1][1] == len(topo.levels)
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))


def test_chain_slots_hold_every_body_once_under_its_parent(topo):
    chains = [seg for seg in topo.segments if seg.last - seg.first > 1]
    assert chains or max(np.bincount(topo.parent[topo.parent >= 0])) > 1  # only branching trees lack chains
    for seg in chains:
        levels = topo.levels[seg.first : seg.last]
        bodies = np.arange(levels[0].start, levels[-1].stop)
        assert sorted(seg.body[seg.real]) == list(bodies)
        assert np.array_equal(seg.body.reshape(-1)[seg.body_slot], bodies)
        assert np.all(seg.real[0]) and seg.body.shape[1] == levels[0].stop - levels[0].start
        for li in range(1, len(levels)):
            for k in np.flatnonzero(seg.real[li]):
                assert seg.real[li - 1, k] and topo.parent[seg.body[li, k]] == seg.body[li - 1, k]
        assert np.all(topo.nv_body[seg.body] == seg.nv)
        v = np.arange(topo.v_offset[bodies[0]], topo.v_offset[bodies[-1]] + topo.nv_body[bodies[-1]])
        assert np.array_equal(seg.dofs.reshape(-1)[seg.dof_slot], v)


def test_a_chain_is_one_segment():
    topo = random_model(0, n_bodies=40, joint_mix="revolute", branching=0.0).topology
    assert len(topo.segments) == 1 and topo.segments[0].body.shape == (40, 1)


def test_segments_trade_padding_against_their_count():
    # a root with two chains of n and n - missing bodies: padding the short chain costs `missing` slots, a
    # second segment SEGMENT_COST
    n = 2 * SEGMENT_COST + 4
    for missing in (SEGMENT_COST - 1, SEGMENT_COST + 1):
        parent, last = [-1], [0, 0]
        for d in range(n):
            for c in (0, 1) if d < n - missing else (0,):
                parent.append(last[c])
                last[c] = len(parent) - 1
        topo = Topology(parent, ["screw"] * len(parent))
        assert len(topo.segments) == (2 if missing < SEGMENT_COST else 3)


# -- down and up against a body-by-body recursion ---------------------------------------------------------------


def _down_step(parent, a, d):
    value = jnp.tanh(parent) * a + d.sum()
    return value, d * value.sum()


def _up_step(children, a, d):
    total = children + a * d.sum()
    return jnp.sin(total), total, d * total.sum()


def _inputs(topo, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((topo.nb, 3)), rng.standard_normal(topo.nv)


def test_down_equals_body_by_body_recursion(topo):
    a, d = _inputs(topo, 0)
    root = np.full(3, 0.3)
    values, dof_out = jax.jit(lambda a, d: sweeps.down(topo, _down_step, jnp.asarray(root), a, dofs=(d,)))(a, d)
    want, want_dof = np.zeros((topo.nb, 3)), np.zeros(topo.nv)
    for k in range(topo.nb):
        v = slice(topo.v_offset[k], topo.v_offset[k] + topo.nv_body[k])
        parent = root if topo.parent[k] < 0 else want[topo.parent[k]]
        value, dk = _down_step(parent, a[k], d[v])
        want[k], want_dof[v] = value, dk
    np.testing.assert_allclose(values, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dof_out, want_dof, rtol=1e-12, atol=1e-12)


def test_up_equals_body_by_body_recursion(topo):
    a, d = _inputs(topo, 1)
    outs, dof_out = jax.jit(lambda a, d: sweeps.up(topo, _up_step, jnp.zeros(3), a, dofs=(d,)))(a, d)
    children, want, want_dof = np.zeros((topo.nb, 3)), np.zeros((topo.nb, 3)), np.zeros(topo.nv)
    for k in reversed(range(topo.nb)):
        v = slice(topo.v_offset[k], topo.v_offset[k] + topo.nv_body[k])
        sent, want[k], want_dof[v] = _up_step(children[k], a[k], d[v])
        if topo.parent[k] >= 0:
            children[topo.parent[k]] += sent
    np.testing.assert_allclose(outs, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dof_out, want_dof, rtol=1e-12, atol=1e-12)


def test_sweeps_without_coordinates_and_their_gradients(topo):
    a, _ = _inputs(topo, 2)

    def loss(a):
        V = sweeps.down(topo, lambda p, x: jnp.tanh(p) + x, jnp.zeros(3), a)
        return jnp.sum(sweeps.up(topo, lambda c, x: (0.5 * (c + x), c + x), jnp.zeros(3), V) ** 2)

    check_grads(loss, (jnp.asarray(a),), order=1, modes=("fwd", "rev"))
