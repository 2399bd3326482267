"""The simulator: scenes, states, steps and rollouts, batched and differentiable (`jaxmb.sim.stepping`).

Modules: `scene` (the `Scene` pytree and `make_scene`), `geometry` (shapes on bodies, contact pairs), `collision`
(the narrow phase), `urdf_collision` (shapes from URDF ``<collision>`` elements), `mjcf` (the scene of an MJCF
file: geoms, pairs, actuators, options, keyframes, equality constraints), `actuators` (motors, servos,
passive joint terms), `stages` (a step's kinematics and collision, actuation, free motion), `contact_frames`
(contacts as task frames on their bodies), `joint_rows` (limits and joint friction), `compliance` (the rows'
``J M^-1 J*`` on the operational-space sweeps), `compliant` (compliant contact), `constraints` (the constraint
forces of a step by either solver), `solver` (the frictional contact problem by Gauss-Seidel sweeps), `newton` (MuJoCo's
convex problem by Newton's method), `impedance` (MuJoCo's soft constraints as the Newton solver's rows),
`mjcf_impedance` (an MJCF file's numbers for them), `inputs` (applied generalized forces and body wrenches),
`fluid` and `mjcf_fluid` (MuJoCo's fluid forces as body wrenches; an MJCF file's fluid), `ball_limits` (ranges
of ball joints as rows), `tendons` (fixed tendons),
`integrators`, `stepping` (state, step,
rollout), `symplectic` (implicit midpoint and generalized leapfrog on canonical momenta).
"""

from jaxmb.sim.actuators import intvelocity, motor, on_tendon, position, velocity
from jaxmb.sim.collision import Contacts
from jaxmb.sim.equality_rows import connect, joint_equality, tendon_equality, weld
from jaxmb.sim.fluid import Fluid
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
    StepRecord,
    contact_forces,
    failures,
    init_state,
    inspect_step,
    rollout,
    step,
)
from jaxmb.sim.spatial_tendons import spatial_tendon
from jaxmb.sim.symplectic import PhasePoint, generalized_leapfrog, implicit_midpoint
from jaxmb.sim.tendons import Tendons, fixed_tendon
from jaxmb.sim.urdf_collision import urdf_geometry

__all__ = [
    "CONTACT_MODELS", "ContactState", "Contacts", "Fluid", "Geometry", "INTEGRATORS", "Impedance", "Keyframe",
    "LOOPS_OPEN", "MjcfScene", "NONFINITE_CONTROL", "NONFINITE_STATE", "Pairs", "PhasePoint", "SOLVERS", "Scene",
    "State", "StepRecord", "Tendons", "box", "capsule", "connect", "contact_forces", "failures", "fixed_tendon",
    "generalized_leapfrog", "implicit_midpoint", "init_state", "inspect_step", "intvelocity", "joint_equality",
    "load_mjcf_scene", "make_scene", "motor", "on_tendon", "plane", "position", "residuals", "rollout",
    "spatial_tendon", "sphere", "step", "tendon_equality", "urdf_geometry", "velocity", "weld",
    "with_mujoco_impedance",
]
