"""System identification: the inertial, friction and armature parameters of a model from measured motions.

* `jaxmb.sysid.regressor`: ``tau = Y(q, qd, qdd) pi`` by the Newton-Euler sweeps, the energy regressors, and the
  maps between a model and its standard parameters ``pi`` (10 per body, Pinocchio's order).
* `jaxmb.sysid.physical`: the pseudo-inertia, the log-Cholesky parameters, the physical test and the nearest
  physical body.
* `jaxmb.sysid.base`: the base parameters, by QR with column pivoting.
"""

from jaxmb.sysid.regressor import (
    N_BODY,
    EnergyRegressors,
    body_regressor,
    energy_regressors,
    joint_columns,
    parameters,
    regressor,
    with_parameters,
)
from jaxmb.sysid.physical import (
    from_log_cholesky,
    from_pseudo_inertia,
    log_cholesky,
    nearest_physical,
    physical_margin,
    pseudo_inertia,
)
from jaxmb.sysid.base import RANK_TOL, BaseParameters, base_parameters, stacked_regressor
