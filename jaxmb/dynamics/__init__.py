"""Dynamics algorithms on the tree: Newton-Euler, composite bodies, articulated bodies, energy and momentum."""
