"""Errors raised when a model is built or loaded."""


class ModelError(ValueError):
    """A model description that cannot be turned into a valid model; the message names the file and element."""
