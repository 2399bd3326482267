"""The comparison every test module uses: max absolute error relative to the magnitude of the expected value."""

import numpy as np


def assert_close(actual, expected, rtol, scale=None):
    """``max |actual - expected| <= rtol * scale``, ``scale`` defaulting to ``max(1, max |expected|)``."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if scale is None:
        scale = max(1.0, float(np.max(np.abs(expected))))
    err = float(np.max(np.abs(actual - expected)))
    assert err <= rtol * scale, f"max error {err:.3e} > {rtol:.1e} * scale {scale:.3e}"
