"""Fits through the simulator: any leaves of a `jaxmb.sim` scene (masses, friction, armature, servo gains) from
measured trajectories, by Levenberg-Marquardt on the exact Jacobian of the simulated trajectory
(`jaxmb.sysid.levenberg_marquardt`; ``jax.jacfwd`` through `jaxmb.sim.rollout`, whose steps have exact
derivatives where they are smooth).

``set_parameters(scene, theta) -> scene`` says which leaves ``theta`` (k,) are, for instance

    def set_parameters(scene, theta):         # log-parameters: positive whatever the step
        mu, m = jnp.exp(theta)
        model = scene.model.replace(mass=scene.model.mass.at[0].set(m))
        return scene.replace(model=model, geometry=scene.geometry.replace(friction=jnp.full(2, mu)))

* **Single shooting** (`fit_single_shooting`): one rollout from the measured initial state; the residual is the
  weighted difference of its states ``[q, qd]`` (steps, nq + nv) from the measured ones.
* **Multiple shooting** (`fit_multiple_shooting`; Bock and Plitt, "A multiple shooting algorithm for direct
  solution of optimal control problems", 1984): the trajectory is cut into segments, each rolled out from a start
  state of its own, a variable of the fit initialized from the measurement; the residual adds each segment's end
  minus the next one's start (the continuity defects). Long or unstable horizons, where a single rollout drifts
  far from the data for a poor first ``theta``, stay near the data segment by segment.

jaxmb writes its own Levenberg-Marquardt rather than taking optimistix's: fifty lines in one `lax.while_loop`,
the Jacobian by forward mode (as many tangents as parameters, the cheap direction here), no extra dependency.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxmb.sim import init_state, rollout
from jaxmb.sysid.levenberg_marquardt import levenberg_marquardt


class TrajectoryFit(NamedTuple):
    """theta (k,): the parameters found; starts (segments, nq + nv): each segment's start state (multiple
    shooting; the measured initial state alone for single shooting); cost: ``1/2 |r|^2``; iterations; converged."""

    theta: jnp.ndarray
    starts: jnp.ndarray
    cost: jnp.ndarray
    iterations: jnp.ndarray
    converged: jnp.ndarray


def simulate(scene, start, dt, steps, qfrcs=None, xfrcs=None, ctrls=None):
    """The states ``[q, qd]`` (steps, nq + nv) after each of ``steps`` steps from the state ``start`` (nq + nv,),
    at rest otherwise (`jaxmb.sim.init_state`), under the inputs per step (as `jaxmb.sim.rollout` takes them)."""
    nq = scene.model.nq
    state = init_state(scene, start[:nq], start[nq:])
    _, states = rollout(scene, state, dt, ctrls=ctrls, steps=steps, qfrcs=qfrcs, xfrcs=xfrcs)
    return jnp.concatenate([states.q, states.qd], -1)


def fit_single_shooting(set_parameters, theta0, scene, start, measured, dt, *, qfrcs=None, xfrcs=None, ctrls=None,
                        weights=None, max_iterations=30) -> TrajectoryFit:
    """Fit ``theta`` (from ``theta0`` (k,)) so that the rollout of ``set_parameters(scene, theta)`` from ``start``
    (nq + nv,) follows ``measured`` (steps, nq + nv): the states after each step, under the given inputs per step.
    ``weights`` (nq + nv,): each state coordinate's (an inverse noise level), default 1."""
    steps = measured.shape[0]
    w = jnp.ones(measured.shape[1], measured.dtype) if weights is None else weights

    def residual(theta):
        x = simulate(set_parameters(scene, theta), start, dt, steps, qfrcs, xfrcs, ctrls)
        return ((x - measured) * w).reshape(-1)

    out = levenberg_marquardt(residual, theta0, max_iterations=max_iterations)
    return TrajectoryFit(out.x, start[None], out.cost, out.iterations, out.converged)


def fit_multiple_shooting(set_parameters, theta0, scene, start, measured, dt, segments, *, qfrcs=None, xfrcs=None,
                          ctrls=None, weights=None, continuity=1.0, max_iterations=30) -> TrajectoryFit:
    """`fit_single_shooting` with the trajectory cut into ``segments`` of equal length (steps divisible by it):
    the first from ``start``, the others from start states that are variables of the fit, initialized from the
    measured state before them. The continuity defects (each end minus the next start) enter the residual weighted
    by ``continuity`` times ``weights``."""
    steps, n = measured.shape
    if steps % segments:
        raise ValueError(f"fit_multiple_shooting: {steps} steps do not split into {segments} equal segments")
    length = steps // segments
    w = jnp.ones(n, measured.dtype) if weights is None else weights
    k = theta0.shape[0]
    target = measured.reshape(segments, length, n)

    def residual(x):
        theta, later = x[:k], x[k:].reshape(segments - 1, n)
        sc = set_parameters(scene, theta)
        starts = jnp.concatenate([start[None], later])
        inputs = [None if u is None else u.reshape((segments, length) + u.shape[1:]) for u in (qfrcs, xfrcs, ctrls)]
        axes = [None if u is None else 0 for u in inputs]
        run = jax.vmap(lambda s, qf, xf, c: simulate(sc, s, dt, length, qf, xf, c), in_axes=(0, *axes))
        x_sim = run(starts, *inputs)
        defects = (x_sim[:-1, -1] - later) * (continuity * w)
        return jnp.concatenate([((x_sim - target) * w).reshape(-1), defects.reshape(-1)])

    x0 = jnp.concatenate([theta0, target[:-1, -1].reshape(-1)])
    out = levenberg_marquardt(residual, x0, max_iterations=max_iterations)
    starts = jnp.concatenate([start[None], out.x[k:].reshape(segments - 1, n)])
    return TrajectoryFit(out.x[:k], starts, out.cost, out.iterations, out.converged)
