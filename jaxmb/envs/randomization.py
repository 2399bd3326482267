"""Domain randomization over named leaves of a `jaxmb.sim.Scene`.

A randomization is any function ``randomize(scene, rng) -> scene`` that returns the scene with other values in its
leaves (the structure unchanged, so nothing recompiles); `jaxmb.envs.Randomize` draws one at every reset. `uniform`
builds one from ranges over leaves named by their path in the scene, ``"part.leaf"``:

    ``model.mass`` (nb,), ``model.inertia`` (nb, 3, 3), ``model.com`` (nb, 3), ``model.armature`` (nv,),
    ``model.gravity`` (3,), ``geometry.friction`` (ng,), ``actuators.gear``, ``actuators.kp``, ``actuators.kv``,
    ``actuators.force_limit`` (nu,), ``joints.damping``, ``joints.frictionloss`` (nv,), ``contact.stiffness``, ...

(the leaves of `jaxmb.Model`, `jaxmb.sim.Geometry`, `jaxmb.sim.actuators.Actuators`, `jaxmb.sim.actuators.JointTerms`
and `jaxmb.sim.scene.ContactParams`).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np


def leaf(scene, path):
    """The leaf of ``scene`` at ``path`` (``"model.mass"``); a ValueError names a path that is not a leaf."""
    value = scene
    for name in path.split("."):
        if not dataclasses.is_dataclass(value) or name not in {f.name for f in dataclasses.fields(value)}:
            raise ValueError(f"{path!r} is not a leaf of the scene: {name!r} is not a field of "
                             f"{type(value).__name__} (module jaxmb.envs.randomization lists the leaves)")
        value = getattr(value, name)
    if not hasattr(value, "shape"):
        raise ValueError(f"{path!r} is not an array leaf of the scene (it is a {type(value).__name__})")
    return value


def replace_leaf(scene, path, value):
    """``scene`` with the leaf at ``path`` replaced by ``value`` (of the same shape)."""
    head, _, rest = path.partition(".")
    if not rest:
        return dataclasses.replace(scene, **{head: value})
    return dataclasses.replace(scene, **{head: replace_leaf(getattr(scene, head), rest, value)})


def uniform(scale=None, shift=None):
    """A randomization (module docstring) that multiplies each leaf named in ``scale`` by a factor uniform in its
    ``(low, high)``, one factor per entry of the leaf's first axis (per body, coordinate, geom or actuator: a body's
    inertia matrix is scaled as a whole, so it stays physical; a scalar leaf takes one factor), and adds to each
    leaf named in ``shift`` an offset uniform in its ``(low, high)`` per entry (a centre of mass moved in each
    axis). ``scale`` and ``shift``: dicts ``{path: (low, high)}``; every other leaf is left as it is. A geom's
    friction left to its pair's other geom (``-1``) is kept."""
    scale, shift = dict(scale or {}), dict(shift or {})
    for path, bounds in [*scale.items(), *shift.items()]:
        if np.shape(bounds) != (2,) or not bounds[0] <= bounds[1]:
            raise ValueError(f"the range of {path!r} must be (low, high) with low <= high, got {bounds!r}")
    names = [(p, "scale") for p in scale] + [(p, "shift") for p in shift]

    def randomize(scene, rng):
        keys = jax.random.split(rng, max(len(names), 1))
        for (path, how), key in zip(names, keys):
            x = leaf(scene, path)
            if how == "scale":
                low, high = scale[path]
                factor = jax.random.uniform(key, x.shape[:1], x.dtype, low, high)
                factor = factor.reshape(factor.shape + (1,) * (x.ndim - 1))
                new = x * factor
                if path == "geometry.friction":
                    new = jnp.where(x < 0, x, new)
            else:
                low, high = shift[path]
                new = x + jax.random.uniform(key, x.shape, x.dtype, low, high)
            scene = replace_leaf(scene, path, new)
        return scene

    return randomize
