"""URDF with closed loops, loaded as a `jaxmb.loops.LoopModel`: `jaxmb.loops.urdf` holds the loader and the
format (``<loop>``, ``<coupling>``, ``<independent>``, ``mimic=True``); this module names it next to the tree loader
`jaxmb.io.urdf`. It imports the loops package, which does not import it back."""

from jaxmb.loops.urdf import load_urdf, load_urdf_string

__all__ = ["load_urdf", "load_urdf_string"]
