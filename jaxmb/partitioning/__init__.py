"""Partitioned hinges (Jain, "Partitioning of Recursive Multibody Dynamics", 2022): multi-dof joints expanded at
build time into 1-dof sub-hinges joined by massless bodies, so that every ``D(k)`` of the articulated-body sweep is
a scalar; the maps of states and results between the two models; the unpartitioned joints' hinge maps, Coriolis
terms and block-LDL ``D(k)`` by condition (5); gimbal lock as a flag. docs/partitioning.md is the reference page.

* `jaxmb.partitioning.build`: `partition_model`, `PartitionBuilder`, `universal`, `gimbal`, `Partition`,
  `PartitionMap`.
* `jaxmb.partitioning.states`: `to_partitioned`, `from_partitioned`, `to_partitioned_forces`,
  `unpartitioned_bodies`, `partitioned_dynamics`.
* `jaxmb.partitioning.hinges`: `unpartitioned_hinge_maps`, `unpartitioned_coriolis`, `block_ldl`, `gimbal_lock`.
* `jaxmb.partitioning.sequences`: rotation sequences, quaternions to angles and back.
"""

from jaxmb.partitioning.build import (
    Chain,
    HingeChain,
    JointGroup,
    JointPartition,
    Partition,
    PartitionBuilder,
    PartitionMap,
    gimbal,
    partition_model,
    universal,
)
from jaxmb.partitioning.hinges import (
    BlockLDL,
    GimbalLock,
    block_ldl,
    gimbal_lock,
    unpartitioned_coriolis,
    unpartitioned_hinge_maps,
)
from jaxmb.partitioning.sequences import angles_to_quaternion, quaternion_to_angles
from jaxmb.partitioning.states import (
    PartitionedDynamics,
    PartitionedForces,
    PartitionedState,
    UnpartitionedState,
    from_partitioned,
    partitioned_dynamics,
    to_partitioned,
    to_partitioned_forces,
    unpartitioned_bodies,
)
