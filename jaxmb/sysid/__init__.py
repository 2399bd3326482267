"""System identification: the inertial, friction and armature parameters of a model from measured motions.

* `jaxmb.sysid.regressor`: ``tau = Y(q, qd, qdd) pi`` by the Newton-Euler sweeps, the energy regressors, and the
  maps between a model and its standard parameters ``pi`` (10 per body, Pinocchio's order).
* `jaxmb.sysid.physical`: the pseudo-inertia, the log-Cholesky parameters, the physical test and the nearest
  physical body.
* `jaxmb.sysid.base`: the base parameters, by QR with column pivoting.
* `jaxmb.sysid.fit`: weighted least squares with covariance and confidence intervals; the fit whose bodies are
  all physical (log-Cholesky, Levenberg-Marquardt from an interior point).
* `jaxmb.sysid.excitation`: Fourier-series excitation trajectories optimized for the regressor's condition.
* `jaxmb.sysid.levenberg_marquardt`: damped Gauss-Newton on the exact Jacobian.
* `jaxmb.sysid.trajectory`: any scene leaves fitted through `jaxmb.sim` rollouts, single and multiple shooting.
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
from jaxmb.sysid import excitation
from jaxmb.sysid.fit import LinearFit, PhysicalFit, joint_weights, least_squares, physical_fit
from jaxmb.sysid.levenberg_marquardt import LMResult, levenberg_marquardt
from jaxmb.sysid.trajectory import TrajectoryFit, fit_multiple_shooting, fit_single_shooting, simulate
