"""System identification: the inertial, friction and armature parameters of a model from measured motions.

* `jaxmb.sysid.regressor`: ``tau = Y(q, qd, qdd) pi`` by the Newton-Euler sweeps, the energy regressors, and the
  maps between a model and its standard parameters ``pi`` (10 per body, Pinocchio's order).
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
