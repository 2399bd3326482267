"""Trajectory optimization on jaxmb's analytic derivatives: shooting problems (`problem`, `costs`, `state`), DDP,
FDDP and box-FDDP as Crocoddyl's (`solver`, `riccati`, `boxqp`), implicit derivatives of the optimum (`implicit`),
model-predictive control on `jaxmb.sim` (`mpc`), first-order single and multiple shooting by optax (`shooting`), the
Panda reach of the tests and benchmark (`reach`).

>>> from jaxmb import trajopt
>>> problem = trajopt.shooting_problem(model, x0, dt, N, running=[...], terminal=[...])
>>> sol = trajopt.solve(problem, method="fddp")      # one jit-able, vmap-able program

docs/trajopt.md describes the problem, the solvers and how they compare with Crocoddyl.
"""

from jaxmb.trajopt.costs import (
    CenterOfMass,
    ControlRegularization,
    FramePlacement,
    FrameTranslation,
    FrameVelocity,
    StateRegularization,
    center_of_mass_cost,
    control_regularization,
    cost_derivatives,
    cost_value,
    frame_placement,
    frame_translation,
    frame_velocity_cost,
    retarget,
    state_regularization,
)
from jaxmb.trajopt.implicit import optimal_cost, optimum
from jaxmb.trajopt.mpc import MpcTrace, receding_horizon
from jaxmb.trajopt.problem import (
    Linearization,
    Problem,
    StepDerivatives,
    gaps,
    linearize,
    rollout,
    shooting_problem,
    step,
    step_derivatives,
    total_cost,
)
from jaxmb.trajopt.shooting import ShootingSolution, multiple_shooting, single_shooting
from jaxmb.trajopt.solver import METHODS, Options, Solution, initial_guess, solve
from jaxmb.trajopt.state import difference, integrate_state
