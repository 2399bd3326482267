"""A matplotlib stick figure of a model at one configuration, for papers and notebooks.

Each body is a dot at its frame's origin, joined by a line to its parent's origin (root bodies stand alone); with
``axes`` set, each body frame's x, y and z axes are drawn as red, green and blue lines of that length. The points are
the body origins of `jaxmb.forward_kinematics`, in the model's body order.
"""

from typing import NamedTuple

import numpy as np

from jaxmb.kinematics import forward_kinematics
from jaxmb.viewer.shapes import model_of

AXIS_COLORS = ("tab:red", "tab:green", "tab:blue")


class Skeleton(NamedTuple):
    """Body frames at a configuration: ``origins`` (nb, 3), ``axes`` (nb, 3, 3) (column i: axis i in the world),
    ``segments`` (ns, 2) int, the (parent, child) body index pairs that lines join."""

    origins: np.ndarray
    axes: np.ndarray
    segments: np.ndarray


def skeleton(model, q) -> Skeleton:
    """The `Skeleton` of ``model`` (a model, closed-loop model or scene: its spanning tree) at ``q`` (nq,)."""
    model = model_of(model)
    T = forward_kinematics(model, np.asarray(q, float).astype(model.mass.dtype))
    parent = np.asarray(model.topology.parent)
    children = np.flatnonzero(parent >= 0)
    return Skeleton(np.asarray(T.p, float), np.asarray(T.R, float),
                    np.stack([parent[children], children], 1).reshape(-1, 2))


def plot_skeleton(model, q, ax=None, *, axes=0.0, color="0.2", labels=False, equal=True):
    """Draw the skeleton of ``model`` at ``q`` (module docstring) on the 3-D matplotlib axes ``ax`` (default: new
    axes in a new figure); returns ``ax``. ``axes``: length of the drawn frame axes (0: none). ``color``: of the
    dots and links. ``labels``: write each body's name at its origin. ``equal``: equal scales on x, y, z."""
    import matplotlib.pyplot as plt

    if ax is None:
        ax = plt.figure().add_subplot(projection="3d")
    names = model_of(model).body_names
    s = skeleton(model, q)
    for a, b in s.segments:
        ax.plot(*s.origins[[a, b]].T, color=color, linewidth=2.0)
    ax.scatter(*s.origins.T, color=color, s=12, depthshade=False)
    if axes:
        for i, c in enumerate(AXIS_COLORS):
            for o, R in zip(s.origins, s.axes):
                ax.plot(*np.stack([o, o + axes * R[:, i]]).T, color=c, linewidth=1.0)
    if labels:
        for name, o in zip(names, s.origins):
            ax.text(*o, name, fontsize=7)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_zlabel("z")
    if equal and len(s.origins):
        lower, upper = s.origins.min(0), s.origins.max(0)
        half = max(0.5 * float((upper - lower).max()), 1e-3) + axes
        center = 0.5 * (lower + upper)
        ax.set_xlim(center[0] - half, center[0] + half)
        ax.set_ylim(center[1] - half, center[1] + half)
        ax.set_zlim(center[2] - half, center[2] + half)
        ax.set_box_aspect((1, 1, 1))
    return ax
