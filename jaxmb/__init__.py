"""jaxmb: recursive multibody dynamics in JAX, after Jain's Spatial Operator Algebra.

Every function takes one state and is pure, so ``jax.jit``, ``jax.vmap`` and ``jax.grad`` compose with it.
`jaxmb.jit` is ``jax.jit`` with the XLA CPU options under which jaxmb's programs compile and run fastest, for that
program alone; ``JAXMB_XLA_FLAGS=1`` in the environment gives them to every ``jax.jit`` of the process
(`jaxmb.batching.compile.use_cpu_options`). `jaxmb.chunked_vmap` is ``jax.vmap`` computed a chunk of states at a time, and
`jaxmb.sharded_vmap` is ``jax.vmap`` with the batch split over all devices (on the CPU one per core, after
`jaxmb.use_cpu_cores`). `jaxmb.batching` says what each transformation runs on the CPU and on a GPU.
Conventions: spatial vectors angular first ``[w; v]``; quaternions ``[w, x, y, z]``; gravity is physical
(``model.gravity``, default ``[0, 0, -9.81]``); a state in another dtype than the model is cast to the model's.
"""

from jaxmb.batching.compile import use_cpu_options

use_cpu_options()  # with JAXMB_XLA_FLAGS=1: before JAX starts its CPU backend, if it has not yet

from jaxmb import assets, joints, operators, partitioning, reroot, robots, spatial, sysid  # noqa: E402
from jaxmb.batching import chunked_vmap, jit, sharded_vmap, split_batch, use_cpu_cores
from jaxmb.configuration import configuration_rate, integrate, neutral_configuration, random_configuration
from jaxmb.dynamics.articulated import (
    ArticulatedBody,
    ArticulatedInertias,
    articulated_body,
    articulated_inertias,
    forward_dynamics,
)
from jaxmb.dynamics.derivatives import (
    ForwardDynamicsDerivatives,
    InverseDynamicsDerivatives,
    forward_dynamics_derivatives,
    inverse_dynamics_derivatives,
)
from jaxmb.dynamics.divide_conquer import forward_dynamics_dc
from jaxmb.dynamics.energy import (
    center_of_mass,
    centroidal_momentum,
    centroidal_momentum_matrix,
    kinetic_energy,
    potential_energy,
    spatial_momentum,
    total_mass,
)
from jaxmb.dynamics.factorization import (
    innovations_factor_inverse,
    innovations_factors,
    mass_matrix_inverse,
    mass_matrix_inverse_times,
)
from jaxmb.dynamics.diagonalized import (
    DiagonalizedDynamics,
    DiagonalizedVelocities,
    diagonalized_dynamics,
    diagonalized_velocities,
    normalized_forces,
    velocities_from_eta,
    velocities_from_xi,
)
from jaxmb.dynamics.forces import express_forces, interbody_forces
from jaxmb.dynamics.free_flyer import (
    BaseInvariantDynamics,
    DualArticulatedBody,
    base_invariant_forward_dynamics,
    dual_articulated_body,
    operational_space_inertias,
)
from jaxmb.dynamics.hamiltonian import (
    HamiltonianRates,
    hamiltonian,
    hamiltonian_dynamics,
    momenta,
    momentum_rates,
    velocities_from_momenta,
)
from jaxmb.dynamics.hybrid import hybrid_dynamics
from jaxmb.dynamics.inverse import bias_forces, body_forces, gravity_forces, inverse_dynamics
from jaxmb.dynamics.mass import composite_inertias, mass_matrix
from jaxmb.dynamics.sensitivity import (
    InertiaRates,
    articulated_inertia_rates,
    log_det_mass_matrix,
    log_det_mass_matrix_gradient,
)
from jaxmb.dynamics.opspace import (
    TaskInertia,
    TaskSpace,
    operational_space_bias,
    operational_space_compliance,
    operational_space_control,
    operational_space_inertia,
    task_space,
    upsilon,
)
from jaxmb.errors import ModelError
from jaxmb.io.mjcf import load_mjcf
from jaxmb.io.urdf import load_urdf, load_urdf_string
from jaxmb.kinematics import (
    bias_accelerations,
    body_velocities,
    forward_kinematics,
    frame_bias_acceleration,
    jacobian,
    frame_poses,
    frame_velocity,
    jacobians,
)
from jaxmb.model import Model, ModelBuilder
from jaxmb.spatial import Transform
from jaxmb import trajopt  # noqa: E402

__version__ = "0.1.0"
