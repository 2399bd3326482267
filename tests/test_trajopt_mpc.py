"""jaxmb.trajopt.receding_horizon on jaxmb.sim: the first control of every step is the solve of the problem from
the simulator's state with the shifted warm start, and the two-link arm's tip follows a moving target."""

import jax.numpy as jnp
from checks import assert_close, fast_jit
from test_trajopt_implicit import MODEL, X0, problem_at

from jaxmb import sim, trajopt
from jaxmb.kinematics import frame_poses

STEPS = 12


def target(k):
    return jnp.array([0.35, 0.0, -0.45]) + 0.05 * jnp.array([jnp.sin(0.2 * k), 0.0, jnp.cos(0.2 * k)])


def update(problem, k):
    return problem.replace(running=trajopt.retarget(problem.running, target(k)),
                           terminal=trajopt.retarget(problem.terminal, target(k)))


def test_mpc_re_solves_from_the_simulator_state_and_tracks_a_moving_target():
    scene = sim.make_scene(MODEL, integrator="euler")
    problem = problem_at(target(0)).replace(horizon=20)
    options = trajopt.Options(max_iterations=20)

    def run(state):
        final, trace = trajopt.receding_horizon(scene, problem, state, STEPS, update, substeps=2, options=options)
        first = trajopt.solve(update(problem, 0).replace(x0=X0), options=options)  # the first step, alone
        return final, trace, first

    final, trace, first = fast_jit(run)(sim.init_state(scene, X0[:2]))
    assert_close(trace.x[0], X0, 1e-15)
    assert_close(trace.u[0], first.us[0], 1e-12)
    assert float(jnp.max(trace.gaps)) < 1e-12
    tip = frame_poses(MODEL, final.q).p[MODEL.frame_index("tip")]
    start = frame_poses(MODEL, X0[:2]).p[MODEL.frame_index("tip")]
    assert float(jnp.linalg.norm(tip - target(STEPS - 1))) < 0.5 * float(jnp.linalg.norm(start - target(STEPS - 1)))
