"""The smooth reward terms the tasks multiply, each in [0, 1] and 1 at its goal (after the terms of Tassa et al.,
DeepMind Control Suite, 2018)."""

import jax.numpy as jnp

SMALL_AT_MARGIN = 0.1
"""The value of `small` at its margin."""


def upright(cos_from_up):
    """``(1 + cos)/2`` of the angle from the upright: 1 upright, 0 hanging down."""
    return (1.0 + cos_from_up) / 2.0


def small(x, margin):
    """``exp(ln(0.1) (x/margin)^2)``: 1 at ``x = 0``, 0.1 at ``|x| = margin``, a Gaussian between."""
    return jnp.exp(jnp.log(SMALL_AT_MARGIN) * jnp.square(x / margin))


def small_control(action):
    """``(4 + 1 - mean(clip(action, -1, 1)^2)) / 5``: 1 for the zero action, 0.8 at full effort (a term that
    prefers small actions without dominating the task's)."""
    return (5.0 - jnp.mean(jnp.square(jnp.clip(action, -1.0, 1.0)))) / 5.0
