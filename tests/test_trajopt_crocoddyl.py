"""jaxmb.trajopt against Crocoddyl 3.2.1 on the Panda reach (`jaxmb.trajopt.reach`): FDDP, and box-FDDP under
torque bounds that bind. Crocoddyl solves in a subprocess (`benchmarks/crocoddyl_peer.py`) where
``JAXMB_CROCODDYL_PYTHON`` names a Python with it (``.ci/run`` makes one) or this one imports it; elsewhere its
solutions come from ``benchmarks/results/crocoddyl_panda_reach.json``, which the same script wrote (and which must
still equal the live peer's where there is one)."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from checks import assert_close, fast_jit

from jaxmb import trajopt
from jaxmb.envs.panda_reach import panda_model
from jaxmb.trajopt import reach

ROOT = Path(__file__).parent.parent
REFERENCE = ROOT / "benchmarks" / "results" / "crocoddyl_panda_reach.json"
LIMITS = (20.0, 40.0, 20.0, 40.0, 3.0, 3.0, 3.0)
"""Torque bounds (N m) under which the reach's joints 2 and 6 reach a bound."""
TARGETS = (reach.TARGET, (0.4, -0.3, 0.3))
SPECS = {"fddp": reach.peer_spec(TARGETS),
         "box_fddp": reach.peer_spec(TARGETS[:1], "box_fddp", [-u for u in LIMITS], LIMITS)}


def peer_module():
    spec = importlib.util.spec_from_file_location("crocoddyl_peer", ROOT / "benchmarks" / "crocoddyl_peer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def crocoddyl():
    """Crocoddyl's solutions per method: the live peer's where there is one, else the committed reference."""
    reference = json.loads(REFERENCE.read_text())
    peer = peer_module()
    if peer.peer_python() is None:
        return {name: reference[name]["solutions"] for name in SPECS}
    live = {name: peer.solve_in_peer(spec)["solutions"] for name, spec in SPECS.items()}
    for name in SPECS:
        assert reference[name]["spec"] == SPECS[name]
        for a, b in zip(reference[name]["solutions"], live[name]):
            assert_close(a["xs"], b["xs"], 1e-10)  # the reference keeps 12 digits
    return live


@pytest.fixture(scope="module")
def panda():
    return panda_model()[0]


@pytest.fixture(scope="module")
def solve():
    return {name: fast_jit(lambda p, xs, us, name=name: trajopt.solve(p, xs, us, method=name)) for name in SPECS}


@pytest.mark.parametrize("name", list(SPECS))
def test_panda_reach_matches_crocoddyl(name, crocoddyl, solve, panda):
    spec = SPECS[name]
    bounds = {} if spec["u_lower"] is None else dict(u_lower=spec["u_lower"], u_upper=spec["u_upper"])
    for peer in crocoddyl[name]:
        problem, xs, us = reach.panda_reach(peer["target"], model=panda, **bounds)
        sol = solve[name](problem, xs, us)
        assert bool(sol.converged) and peer["converged"]
        assert_close(sol.cost, peer["cost"], 1e-6, scale=peer["cost"])
        assert_close(sol.xs, np.array(peer["xs"]), 1e-6)
        assert_close(sol.us, np.array(peer["us"]), 1e-6)
        assert abs(int(sol.iterations) - (peer["iter"] + 1)) <= 1  # Crocoddyl's iter counts one less on success
    if name == "box_fddp":
        assert float(np.max(np.abs(sol.us) - np.array(LIMITS))) > -1e-9  # a bound binds
