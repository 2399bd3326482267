"""Shared test configuration: the suite runs in float64.

x64 must be enabled before any array is created, so it is set here, at import, before pytest imports the test
modules (the Pinocchio oracle tests rely on it too). Tests that check float32 cast explicitly.
"""

import jax

jax.config.update("jax_enable_x64", True)
