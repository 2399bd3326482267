"""Robot descriptions shipped with jaxmb, for demos, tests and benchmarks that must not depend on other packages.

* ``quadruped.urdf``: a 12-dof quadruped of about 12 kg (trunk; legs FL, FR, RL, RR, each with hip abduction,
  hip flexion and knee joints; fixed-joint foot frames ``FL_foot`` ...). Its inertias are those of boxes,
  cylinders and spheres, so they load with ``inertia="strict"``. `quadruped_standing` is its standing
  configuration.
* ``four_bar_leg.urdf``: a planar four-bar leg under a body on a vertical slide, closed by a ``<loop>``;
  ``jaxmb.loops.load_urdf`` loads it with 2 degrees of freedom (slide, hip).
* ``belt_leg.urdf``: a hip-knee-ankle leg with two rotors on the thigh, ``<coupling>``s 12:1 to the knee and (by a
  belt) to knee and ankle; ``jaxmb.loops.load_urdf`` loads it with 3 degrees of freedom.

The tree loader ``jaxmb.load_urdf`` reads the last two as their spanning trees (the constraints ignored).
"""

import os

import numpy as np

from jaxmb.configuration import neutral_configuration
from jaxmb.io.urdf import load_urdf

_DIR = os.path.dirname(os.path.abspath(__file__))


def path(name: str) -> str:
    """Path of the shipped file ``name`` (e.g. ``"quadruped.urdf"``)."""
    p = os.path.join(_DIR, name)
    if os.path.basename(name) != name or not os.path.isfile(p):
        available = sorted(f for f in os.listdir(_DIR) if f.endswith(".urdf"))
        raise FileNotFoundError(f"jaxmb ships no asset {name!r}; available: {available}")
    return p


def quadruped(floating_base=True):
    """The shipped quadruped as a `jaxmb.Model`; with ``floating_base`` its trunk is joined to the world by a
    free joint named ``"root"`` (nq = 19, nv = 18), else it is fixed (nq = nv = 12)."""
    return load_urdf(path("quadruped.urdf"), floating_base=floating_base, inertia="strict")


STANDING = {"hip_abduction": 0.0, "hip_flexion": 0.7, "knee": -1.4}
"""The quadruped's standing joint angles (rad) by joint kind, the same on every leg: the legs bent, each foot under
its hip."""

STANDING_HEIGHT = 0.35
"""The trunk's height (m) in `quadruped_standing` with a free base: the feet 2.4 cm above a floor at z = 0, so that
it lands and stands."""


def quadruped_standing(floating_base=True) -> np.ndarray:
    """The standing configuration q of `quadruped` (nq,): every leg at `STANDING`; with ``floating_base`` the trunk
    upright at `STANDING_HEIGHT` above the world origin (q[:3] its position, q[3:7] the identity quaternion). The
    leg joints' angles ``q[-12:]`` are also the targets that position servos, one per leg joint in the model's
    joint order, hold it at."""
    model = quadruped(floating_base)
    q = np.array(neutral_configuration(model), float)
    legs = model.joint_names[1:] if floating_base else model.joint_names
    for joint in legs:
        q[model.joint_coordinates(joint)[0]] = STANDING[joint.split("_", 1)[1]]
    if floating_base:
        q[2] = STANDING_HEIGHT
    return q
