"""Crocoddyl's solutions of jaxmb.trajopt's reach problems, for the tests and the benchmark: run in a Python that has
Crocoddyl 3.2 and Pinocchio 4.0 (docs/trajopt.md, "Against Crocoddyl"), with a JSON problem on stdin; the
solutions go to stdout as JSON.

Problem (every key but ``targets`` optional):
    robot "panda" (example-robot-data's, fingers locked at 0: seven joints) or "talos" (example-robot-data's
    reduced Talos on a free flyer, its joints actuated, from its neutral configuration); frame; horizon N; dt; q0 (Pinocchio's order; the robot's reference pose by
    default); targets [[x, y, z], ...]; method "fddp" or "box_fddp"; u_lower / u_upper (nu,) or null (the
    URDF's effort limits); maxiter; repeats (solves per target, for timing); weights {"goal", "goal_terminal",
    "state", "state_terminal", "control"} and state_activation (2 nv,).
Costs: running ``dt (goal |p - target|^2 + state |x (-) x0|_a^2 + control |u|^2) / 2`` (the state term weighted by
``state_activation``), terminal ``(goal_terminal |p - target|^2 + state_terminal |x (-) x0|_a^2) / 2``, as
jaxmb.trajopt's FrameTranslation, StateRegularization and ControlRegularization; the initial guess ``x0`` at
every node and the gravity torques at ``x0``, not a feasible start.
"""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

PYTHON_VARIABLE = "JAXMB_CROCODDYL_PYTHON"
"""The environment variable naming the peer's Python (``.ci/run`` sets it to the venv it makes)."""


def peer_python():
    """The Python that runs this script as the peer: ``$JAXMB_CROCODDYL_PYTHON``, else this one where it imports
    crocoddyl, else None."""
    if os.environ.get(PYTHON_VARIABLE):
        return os.environ[PYTHON_VARIABLE]
    return sys.executable if importlib.util.find_spec("crocoddyl") else None


def solve_in_peer(spec, python=None, timeout=600):
    """Crocoddyl's solutions of the problem ``spec`` (module docstring), solved by this script in a subprocess of
    ``python`` (`peer_python` where None): the parsed JSON it prints."""
    python = python or peer_python()
    if python is None:
        raise FileNotFoundError(f"no Crocoddyl peer: set {PYTHON_VARIABLE} to a Python with crocoddyl 3.2")
    out = subprocess.run([python, str(Path(__file__))], input=json.dumps(spec), capture_output=True, text=True,
                         timeout=timeout)
    if out.returncode:
        raise RuntimeError(f"crocoddyl_peer.py failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def robot_model(name):
    import example_robot_data
    import pinocchio as pin

    if name == "panda":
        robot = example_robot_data.load("panda")
        locked = [robot.model.getJointId(n) for n in ("panda_finger_joint1", "panda_finger_joint2")]
        model = pin.buildReducedModel(robot.model, locked, pin.neutral(robot.model))
        return model, np.array([0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4])
    if name == "talos":
        robot = example_robot_data.load("talos")
        return robot.model, pin.neutral(robot.model)
    raise SystemExit(f"crocoddyl_peer: unknown robot {name!r}")


def build(spec, model, q0, target):
    import crocoddyl
    import pinocchio as pin

    state = crocoddyl.StateMultibody(model)
    actuation = (crocoddyl.ActuationModelFloatingBase(state) if model.joints[1].nv == 6
                 else crocoddyl.ActuationModelFull(state))
    nu = actuation.nu
    w = {"goal": 1e-1, "goal_terminal": 1e3, "state": 1e-2, "state_terminal": 1e-2, "control": 1e-4}
    w.update(spec.get("weights", {}))
    x0 = np.concatenate([q0, np.zeros(model.nv)])
    frame = model.getFrameId(spec.get("frame", "panda_hand_tcp"))
    activation = np.asarray(spec.get("state_activation", np.ones(2 * model.nv)), float)

    def costs(terminal):
        c = crocoddyl.CostModelSum(state, nu)
        goal = crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelFrameTranslation(state, frame, target, nu))
        xreg = crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(activation),
                                           crocoddyl.ResidualModelState(state, x0, nu))
        c.addCost("goal", goal, w["goal_terminal" if terminal else "goal"])
        c.addCost("xreg", xreg, w["state_terminal" if terminal else "state"])
        if not terminal:
            c.addCost("ureg", crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelControl(state, nu)),
                      w["control"])
        return c

    dt = spec.get("dt", 0.01)
    running_d = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs(False))
    running = crocoddyl.IntegratedActionModelEuler(running_d, dt)
    if spec.get("u_lower") is not None:
        running.u_lb = np.asarray(spec["u_lower"], float)
    if spec.get("u_upper") is not None:
        running.u_ub = np.asarray(spec["u_upper"], float)
    terminal = crocoddyl.IntegratedActionModelEuler(
        crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs(True)), 0.0)
    N = spec.get("horizon", 100)
    problem = crocoddyl.ShootingProblem(x0, [running] * N, terminal)
    data = model.createData()
    tau_g = pin.rnea(model, data, q0, np.zeros(model.nv), np.zeros(model.nv))
    us = [tau_g[model.nv - nu:]] * N
    return problem, [x0] * (N + 1), us


def main():
    import crocoddyl
    import pinocchio as pin

    spec = json.load(sys.stdin)
    model, q_ref = robot_model(spec.get("robot", "panda"))
    q0 = np.asarray(spec.get("q0", q_ref), float)
    solver_class = {"fddp": crocoddyl.SolverFDDP, "box_fddp": crocoddyl.SolverBoxFDDP}[spec.get("method", "fddp")]
    out = []
    for target in spec["targets"]:
        problem, xs0, us0 = build(spec, model, q0, np.asarray(target, float))
        times = []
        for _ in range(spec.get("repeats", 1)):
            solver = solver_class(problem)
            start = time.perf_counter()
            converged = solver.solve(xs0, us0, spec.get("maxiter", 100), False)
            times.append(time.perf_counter() - start)
        out.append({"target": list(target), "cost": solver.cost, "iter": solver.iter, "converged": bool(converged),
                    "stop": solver.stop, "xs": np.asarray(solver.xs).tolist(), "us": np.asarray(solver.us).tolist(),
                    "times": times})
    json.dump({"crocoddyl": crocoddyl.__version__, "pinocchio": pin.__version__, "threads": os.cpu_count(),
               "solutions": out}, sys.stdout)


if __name__ == "__main__":
    main()
