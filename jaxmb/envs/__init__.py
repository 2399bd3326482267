"""Reinforcement-learning environments on `jaxmb.sim`: functional environments of one world, wrappers, tasks and
adapters to brax's trainers and to gymnax's signature (docs/envs.md).

Modules: `core` (`State`, `Env`), `wrappers` (`Vmap`, `EpisodeLength`, `AutoReset`, `Randomize`, `Push`,
`ActionLatency`, `ObservationNoise`, `wrap`), `randomization` (randomizations over named scene leaves), `rewards`
(the tasks' reward terms), the tasks `pendulum`, `cartpole`, `acrobot`, `panda_reach`, `quadruped_joystick`, the adapters `brax` and `gymnax`, and
`train` (brax's PPO on a task); the last three are imported by name (``from jaxmb.envs import brax``).
"""

from jaxmb.envs.acrobot import AcrobotSwingup
from jaxmb.envs.cartpole import Cartpole
from jaxmb.envs.core import Env, State
from jaxmb.envs.panda_reach import PandaReach
from jaxmb.envs.pendulum import PendulumSwingup
from jaxmb.envs.quadruped_joystick import QuadrupedJoystick
from jaxmb.envs.randomization import uniform
from jaxmb.envs.wrappers import (ActionLatency, AutoReset, EpisodeLength, ObservationNoise, Push, Randomize, Vmap,
                                 Wrapper, wrap)

_TASKS = {
    "acrobot_swingup": AcrobotSwingup,
    "cartpole_balance": lambda **kw: Cartpole(balance=True, **kw),
    "cartpole_swingup": lambda **kw: Cartpole(balance=False, **kw),
    "panda_reach_cartesian": lambda **kw: PandaReach(action="cartesian", **kw),
    "panda_reach_torque": lambda **kw: PandaReach(action="torque", **kw),
    "pendulum_swingup": PendulumSwingup,
    "quadruped_joystick": QuadrupedJoystick,
}


def names() -> tuple:
    """The names of the registered tasks, sorted."""
    return tuple(sorted(_TASKS))


def make(name: str, **kwargs) -> Env:
    """The task ``name`` (`names`), an environment of one world, built with ``kwargs`` (its constructor's:
    ``asymmetric``, ``sim_dt``, ``ctrl_dt``, ...); wrap it with `wrap`. An unknown name is a ValueError listing the
    names."""
    if name not in _TASKS:
        raise ValueError(f"unknown environment {name!r}; choose one of {', '.join(names())}")
    return _TASKS[name](**kwargs)


__all__ = [
    "AcrobotSwingup", "ActionLatency", "AutoReset", "Cartpole", "Env", "EpisodeLength", "ObservationNoise",
    "PandaReach", "PendulumSwingup", "QuadrupedJoystick", "Push", "Randomize", "State", "Vmap", "Wrapper", "make", "names", "uniform", "wrap",
]
