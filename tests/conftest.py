"""Shared test configuration: the suite runs in float64.

x64 must be enabled before any array is created, so it is set here, at import, before pytest imports the test
modules (the Pinocchio oracle tests rely on it too). Tests that check float32 cast explicitly.
"""

import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module. Each program maps its machine code into the process
    (3-4 mappings each); a whole session compiles thousands, and a process that reaches the kernel's default limit
    of 65530 mappings crashes inside the next compile."""
    yield
    jax.clear_caches()
