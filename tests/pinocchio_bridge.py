"""The robots of example-robot-data in both libraries, for the oracle tests: robot files, model pairs with their
`jaxmb.io.pinocchio.PinocchioMap` (the state converters), and compiling jaxmb quickly.

docs/pinocchio.md has the conventions that the map bridges (joint order, quaternions, spatial vectors, free,
continuous and planar joints).
"""

import functools
import glob
import os
import site
import sys
import warnings
from pathlib import Path

import jax
import pinocchio as pin

import jaxmb
from jaxmb import spatial
from jaxmb.batching.compile import supported_options
from jaxmb.io.pinocchio import PinocchioMap

# Short names for the robots of example-robot-data used by the tests (paths under the robots directory).
ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "z1": "z1_description/urdf/z1.urdf",
    "kinova": "kinova_description/robots/kinova.urdf",  # continuous joints
    "xarm7": "xarm_description/urdf/xarm7.urdf",
    "go1": "go1_description/urdf/go1.urdf",
    "anymal_b": "anymal_b_simple_description/robots/anymal.urdf",
    "anymal_c": "anymal_c_simple_description/urdf/anymal.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "a1": "a1_description/urdf/a1.urdf",
    "talos_full_v2": "talos_data/robots/talos_full_v2.urdf",
    "g1_29dof": "g1_description/urdf/g1_29dof_rev_1_0.urdf",
    "icub": "icub_description/robots/icub.urdf",
    "allegro": "allegro_hand_description/urdf/allegro_right_hand.urdf",
    "double_pendulum_continuous": "double_pendulum_description/urdf/double_pendulum_continuous.urdf",
    "pr2": "pr2_description/urdf/pr2.urdf",  # continuous, prismatic and mimic joints
    "tiago_pro": "tiago_pro_description/robots/tiago_pro.urdf",
}

@functools.lru_cache(maxsize=None)
def robots_dir() -> Path:
    """The ``robots`` directory of example-robot-data (``<prefix>/share/example-robot-data/robots``)."""
    candidates = []
    for base in list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path:
        candidates.append(Path(base) / "cmeel.prefix")
    # next to the installed pinocchio package: .../cmeel.prefix/lib/pythonX.Y/site-packages/pinocchio
    pin_path = Path(pin.__file__).resolve()
    candidates += [p for p in pin_path.parents if p.name == "cmeel.prefix"]
    for prefix in candidates:
        d = prefix / "share" / "example-robot-data" / "robots"
        if d.is_dir():
            return d
    raise FileNotFoundError("example-robot-data is not installed (no cmeel.prefix/share/example-robot-data/robots)")


def urdf_path(name) -> Path:
    """The URDF file of a robot: a short name from `ROBOTS`, a path relative to `robots_dir`, or a file name
    (``"z1.urdf"``) found anywhere under it."""
    rel = ROBOTS.get(name, name)
    p = robots_dir() / rel
    if p.is_file():
        return p
    hits = sorted(glob.glob(str(robots_dir() / "**" / os.path.basename(rel)), recursive=True))
    if len(hits) == 1:
        return Path(hits[0])
    raise FileNotFoundError(f"no unique URDF {name!r} under {robots_dir()} (found {hits})")


def load_jaxmb(name, floating_base=False):
    """jaxmb model of a robot; the expected triangle-inequality inertia warnings are silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*triangle inequality.*", category=UserWarning)
        return jaxmb.load_urdf(urdf_path(name), floating_base=floating_base)


def load_pinocchio(name, floating_base=False):
    """Pinocchio model of the same file; a free base is a ``JointModelFreeFlyer`` named ``"root_joint"``.
    Mimic joints are independent joints (Pinocchio's default, as in jaxmb)."""
    path = str(urdf_path(name))
    if floating_base:
        return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(path)


def load_pair(name, floating_base=False):
    """(jaxmb model, Pinocchio model, their `PinocchioMap`) of one robot."""
    model, pm = load_jaxmb(name, floating_base), load_pinocchio(name, floating_base)
    return model, pm, PinocchioMap(model, pm)


def merged_frames(model):
    """Names of the links merged into a body by fixed joints: frames of a body that are not bodies (in Pinocchio,
    ``BODY`` frames on the body's joint)."""
    return [n for n, b in zip(model.frame_names, model.frame_body) if b >= 0 and n not in model.body_names]


# -- compiling jaxmb quickly in tests -----------------------------------------------------------------------------

# jaxmb's programs are large (megabytes of HLO per robot for all algorithms), and XLA's CPU backend spends most of
# the test time optimizing them. These options turn off LLVM optimizations and the CPU fusion emitters: compiling is
# several times faster, and no arithmetic changes (no fast-math). ``JAXMB_TEST_XLA_DEFAULTS=1`` restores XLA's defaults.
FAST_COMPILE_OPTIONS = supported_options({
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
})  # those this jaxlib knows


def compile_fast(jitted, *args):
    """``jitted`` (a `jax.jit` function) compiled for ``args`` with `FAST_COMPILE_OPTIONS`; call it with the
    non-static arguments.

    The small products are lowered in their multiply-reduce form (`jaxmb.spatial`'s form for GPUs), which compiles
    in half the time of the CPU form's unrolled sums: the oracle checks the recursions, and
    tests/test_spatial.py proves the two forms of each product equal (the other test modules run the CPU form).
    ``JAXMB_TEST_XLA_DEFAULTS=1`` traces the CPU form too."""
    if os.environ.get("JAXMB_TEST_XLA_DEFAULTS"):
        return jitted.lower(*args).compile()
    spatial.UNROLLED_ON_CPU = False
    try:
        lowered = jitted.lower(*args)
    finally:
        spatial.UNROLLED_ON_CPU = True
    return lowered.compile(FAST_COMPILE_OPTIONS)


def run_fast(fn, *args):
    """``jax.jit(fn)(*args)``, compiled with `FAST_COMPILE_OPTIONS`."""
    return compile_fast(jax.jit(fn), *args)(*args)
