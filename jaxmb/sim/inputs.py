"""Applied inputs beside the controls: generalized forces and body wrenches, MuJoCo's ``qfrc_applied`` and
``xfrc_applied``.

``qfrc`` (nv,) adds to the joint forces of the step's coordinates, as a motor on every coordinate would (for a
closed-loop scene on the spanning tree's coordinates, reaching the independent ones as ``G* qfrc``). ``xfrc``
(nb, 6) is a wrench on each body in jaxmb's body order (`jaxmb.Model.body_names`), angular first,

    xfrc[k] = [n; f]      world axes, ``f`` applied at the body's centre of mass, ``n`` a pure torque,

which is MuJoCo's ``xfrc_applied`` with its two halves swapped. It enters the dynamics as the external force
``f_ext(k)`` in body coordinates about the body origin (`body_wrenches`), the same at every stage of a step (RK4
re-expresses it at each stage's pose, as MuJoCo does). Both are per-step inputs, differentiable like the controls.
"""

from typing import NamedTuple

import jax.numpy as jnp

from jaxmb.spatial import cross3, mv


class Applied(NamedTuple):
    """One step's applied inputs: ``qfrc`` (nv,) or None, ``xfrc`` (nb, 6) or None (module docstring). None is
    no input and costs nothing."""

    qfrc: jnp.ndarray | None = None
    xfrc: jnp.ndarray | None = None


def applied_inputs(tree, qfrc, xfrc, dtype) -> Applied:
    """`Applied` of the given arrays cast to ``dtype``; a ValueError names a misshapen one (a batch axis: batch
    with ``jax.vmap``)."""
    for name, x, shape in (("qfrc", qfrc, (tree.nv,)), ("xfrc", xfrc, (tree.nb, 6))):
        if x is not None and jnp.shape(x) != shape:
            raise ValueError(f"{name} must have shape {shape} for model {tree.name!r}, got {jnp.shape(x)}; batch "
                             "with jax.vmap")
    cast = lambda x: None if x is None else jnp.asarray(x, dtype)
    return Applied(cast(qfrc), cast(xfrc))


def body_wrenches(tree, T, xfrc):
    """``f_ext`` (nb, 6) in body coordinates about the body origins of the world wrenches ``xfrc`` (nb, 6) at the
    centres of mass, at the body poses ``T``: ``[R* n + c x R* f; R* f]`` with ``c`` the centre of mass in the body
    frame (the force at ``c`` has the moment ``c x f`` about the origin)."""
    Rt = jnp.swapaxes(T.R, -1, -2)
    f = mv(Rt, xfrc[:, 3:])
    return jnp.concatenate([mv(Rt, xfrc[:, :3]) + cross3(tree.com, f), f], -1)


def with_applied(f_ext, tree, T, applied: Applied):
    """``f_ext`` (nb, 6) (or None) plus the body wrenches of ``applied`` at the poses ``T``."""
    if applied.xfrc is None:
        return f_ext
    f = body_wrenches(tree, T, applied.xfrc)
    return f if f_ext is None else f_ext + f

