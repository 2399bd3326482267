"""The simulator: scenes, states, steps and rollouts, batched and differentiable (`jaxmb.sim.stepping`).

Modules: `scene` (the `Scene` pytree and `make_scene`), `geometry` (shapes on bodies, contact pairs), `collision`
(the narrow phase), `urdf_collision` (shapes from URDF ``<collision>`` elements), `mjcf` (the scene of an MJCF
file: geoms, pairs, actuators, options, keyframes, equality constraints), `actuators` (motors, servos,
passive joint terms), `constraints` (contact-space compliance on the operational-space sweeps, joint limits and
friction, compliant contact), `solver` (the frictional contact problem by Gauss-Seidel sweeps), `newton` (MuJoCo's
convex problem by Newton's method), `impedance` (MuJoCo's soft constraints as the Newton solver's rows),
`mjcf_impedance` (an MJCF file's numbers for them), `tendons` (fixed tendons), `inputs` (applied generalized
forces and body wrenches),
`integrators`, `stepping` (state, step,
rollout), `symplectic` (implicit midpoint and generalized leapfrog on canonical momenta).
"""

from jaxmb.sim.actuators import intvelocity, motor, on_tendon, position, velocity
from jaxmb.sim.collision import Contacts
from jaxmb.sim.geometry import Geometry, Pairs, box, capsule, plane, sphere
from jaxmb.sim.impedance import Impedance, with_mujoco_impedance
from jaxmb.sim.mjcf import Keyframe, MjcfScene, load_mjcf_scene
from jaxmb.sim.scene import CONTACT_MODELS, INTEGRATORS, SOLVERS, Scene, make_scene
from jaxmb.sim.solver import residuals
from jaxmb.sim.stepping import (
    LOOPS_OPEN,
    NONFINITE_CONTROL,
    NONFINITE_STATE,
    ContactState,
    State,
    contact_forces,
    failures,
    init_state,
    rollout,
    step,
)
from jaxmb.sim.symplectic import PhasePoint, generalized_leapfrog, implicit_midpoint
from jaxmb.sim.tendons import Tendons, fixed_tendon
from jaxmb.sim.urdf_collision import urdf_geometry

__all__ = [
    "CONTACT_MODELS", "ContactState", "Contacts", "Geometry", "INTEGRATORS", "Impedance", "Keyframe", "LOOPS_OPEN", "MjcfScene",
    "NONFINITE_CONTROL", "NONFINITE_STATE", "Pairs", "PhasePoint", "SOLVERS", "Scene", "State", "Tendons", "box",
    "capsule", "contact_forces", "failures", "fixed_tendon", "generalized_leapfrog", "implicit_midpoint",
    "intvelocity", "init_state", "load_mjcf_scene", "make_scene", "motor", "on_tendon", "plane", "position",
    "residuals", "rollout", "sphere",
    "step", "urdf_geometry", "velocity", "with_mujoco_impedance",
]
