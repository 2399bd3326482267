"""Robot descriptions shipped with jaxmb, for demos, tests and benchmarks that must not depend on other packages.

* ``quadruped.urdf``: a 12-dof quadruped of about 12 kg (trunk; legs FL, FR, RL, RR, each with hip abduction,
  hip flexion and knee joints; fixed-joint foot frames ``FL_foot`` ...). Its inertias are those of boxes,
  cylinders and spheres, so they pass ``strict_inertia``.
"""

import os

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
    return load_urdf(path("quadruped.urdf"), floating_base=floating_base, strict_inertia=True)
