"""Closed kinematic loops by constraint embedding (book ch. 15, Chignoli et al. 2023): loop closures, gears,
belts and differentials on a spanning tree, embedded as cluster nodes so that the AB algorithm stays O(N).

Build with `close_loops(tree, [coupling(...), loop_closure(...), ...])`; the state is a consistent spanning
configuration ``q`` (`solve_configuration`) and independent velocities ``yd``.

Modules: `constraints` (what closes a loop), `model` (aggregation into the cluster tree), `embedding` (``K``, ``k``,
``G``, ``g``), `position` (Newton with implicit gradients), `articulated` (the embedded AB algorithm), `dynamics`
(cluster RNEA, ``M_y``, ``C_y``, the Lagrange and projected references, cut-joint forces), `opspace` (``Lambda^-1``
at frames on or beyond clusters), `hamiltonian` (canonical momenta on the embedded clusters), `urdf` (the closed-
loop URDF loader), `mechanisms` (geared chains, four-bar, belt leg, differential, quadruped with rotors, and their
armature approximations).
"""

from jaxmb.loops.articulated import forward_dynamics, mass_matrix_inverse_times
from jaxmb.loops.constraints import coupling, explicit, implicit, linear_coupling, loop_closure
from jaxmb.loops.dynamics import (
    bias_forces,
    body_forces,
    constraint_forces,
    cut_joint_forces,
    inverse_dynamics,
    lagrange_forward_dynamics,
    mass_matrix,
    projected_forward_dynamics,
)
from jaxmb.loops.embedding import (
    constraint_bias,
    constraint_jacobian,
    constraint_residual,
    dense_embedding,
    embedding,
    embedding_matrix,
    generalized_force,
    independent_configuration,
    independent_velocity,
    lift_acceleration,
    spanning_acceleration,
    spanning_velocity,
)
from jaxmb.loops.hamiltonian import LoopHamiltonianRates, hamiltonian_dynamics, momenta, velocities_from_momenta
from jaxmb.loops.model import Cluster, LoopModel, close_loops
from jaxmb.loops.opspace import operational_space_compliance, operational_space_inertia, task_jacobian
from jaxmb.loops.position import LoopConfiguration, integrate, solve_configuration
from jaxmb.loops import mechanisms
from jaxmb.loops.urdf import load_urdf, load_urdf_string
