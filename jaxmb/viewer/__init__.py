"""3-D views of jaxmb models and trajectories.

* What to draw (`jaxmb.viewer.shapes`): a `Drawing` is a model with `Shape`s fixed on its bodies, from the visual
  elements of a URDF file (`urdf_drawing`), the geoms of a compiled MuJoCo model (`mjcf_drawing`), a simulator
  scene's geoms (`scene_drawing`) or a model's stick figure (`skeleton_drawing`).
* A standalone HTML file that plays trajectories with a timeline (`save_html`, `html_document`; viser, an optional
  dependency), the same viewer inline in Jupyter (`show`), and a screenshot of such a file in headless Chromium
  (`screenshot`).
* A matplotlib stick figure at one configuration (`plot_skeleton`), with no dependency beyond matplotlib.

docs/viewer.md has the reference and an example.
"""

from jaxmb.viewer.browser import Capture, find_chromium, screenshot
from jaxmb.viewer.html import html_document, save_html
from jaxmb.viewer.mjcf import mjcf_drawing
from jaxmb.viewer.motion import Motion, body_motion
from jaxmb.viewer.notebook import show
from jaxmb.viewer.shapes import Drawing, Shape, TriangleMesh, drawing, scene_drawing, skeleton_drawing
from jaxmb.viewer.skeleton import Skeleton, plot_skeleton, skeleton
from jaxmb.viewer.urdf import urdf_drawing

__all__ = [
    "Capture", "Drawing", "Motion", "Shape", "Skeleton", "TriangleMesh", "body_motion", "drawing", "find_chromium",
    "html_document", "mjcf_drawing", "plot_skeleton", "save_html", "scene_drawing", "screenshot", "show",
    "skeleton", "skeleton_drawing", "urdf_drawing",
]
