"""jaxmb.trajopt's first-order shooting baselines on the two-link arm reaching with its tip (the problem of
tests/test_trajopt_implicit.py): single shooting by optax stays a rollout, lowers the cost to near the local optimum
that box-FDDP reaches from its result and keeps its controls in their bounds, from several starts in one
``jax.vmap`` (multi-start); multiple shooting's augmented Lagrangian closes the gaps between its nodes round by
round."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from checks import assert_close, fast_jit
from test_trajopt_implicit import TARGET, problem_at

from jaxmb import trajopt

STARTS = 3
BOUND = 2.0  # N m on both joints: the unbounded optimum's largest control exceeds it


@pytest.fixture(scope="module")
def single():
    """The bounded problem, three starts, and single shooting from each in one vmap."""
    problem = problem_at(TARGET).replace(u_lower=jnp.full(2, -BOUND), u_upper=jnp.full(2, BOUND))
    starts = 0.5 * jax.random.normal(jax.random.PRNGKey(0), (STARTS, problem.horizon, 2))
    solve = fast_jit(jax.vmap(lambda us: trajopt.single_shooting(problem, us, optimizer=optax.adam(0.1), steps=2000)))
    return problem, starts, solve(starts)


def test_single_shooting_is_a_rollout_in_its_bounds_near_a_local_optimum(single):
    problem, _, sols = single
    for i in range(STARTS):
        assert_close(sols.xs[i], trajopt.rollout(problem, sols.us[i]), 1e-12)
        assert float(jnp.max(jnp.abs(sols.us[i]))) <= BOUND
        assert float(sols.costs[i, -1]) < 0.25 * float(sols.costs[i, 0])
    best = int(jnp.argmin(sols.cost))
    polished = fast_jit(lambda xs, us: trajopt.solve(problem, xs, us, method="box_fddp", is_feasible=True))(
        sols.xs[best], sols.us[best])
    assert bool(polished.converged) and float(polished.cost) <= float(sols.cost[best])
    assert float(sols.cost[best]) < 1.1 * float(polished.cost)  # adam's fixed step stops a few % above the optimum


def test_multiple_shootings_augmented_lagrangian_closes_the_gaps_round_by_round():
    problem = problem_at(TARGET)
    solve = fast_jit(lambda rounds: trajopt.multiple_shooting(problem, optimizer=optax.adam(3e-2), steps=300,
                                                              rounds=rounds), static_argnums=0)
    first, last = solve(1), solve(10)
    assert float(last.gaps) < 0.2 * float(first.gaps)
    assert float(last.costs[-1]) < float(last.costs[0])
    assert_close(last.gaps, jnp.max(jnp.abs(trajopt.gaps(problem, last.xs, last.us))), 1e-14)
    assert np.isfinite(float(last.cost))
