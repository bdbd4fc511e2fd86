"""The exception tree of ragattn.

Every error a caller can act on derives from :class:`RagattnError` and carries a stable
``error_type`` string, which the service maps to an HTTP status and returns in its error body.
"""

from __future__ import annotations


class RagattnError(Exception):
    """Base of every error raised by ragattn on purpose."""

    error_type: str = "internal_error"


class InvalidInputError(RagattnError, ValueError):
    """The caller sent something the library cannot work with; the message says what to change."""

    error_type = "invalid_request"


class InputTooLargeError(InvalidInputError):
    """The input exceeds a configured limit (documents, tokens, bytes); the message names it."""

    error_type = "input_too_large"


class TokenizerError(RagattnError):
    """The tokenizer could not encode the input or its offsets disagree with the prompt."""

    error_type = "tokenizer_error"


class OverloadedError(RagattnError):
    """Too many requests are waiting; retry later."""

    error_type = "overloaded"


class NotReadyError(RagattnError):
    """The proxy model is not loaded yet."""

    error_type = "not_ready"


class GeneratorError(RagattnError):
    """The answer generator failed (unreachable endpoint, timeout, HTTP error, malformed reply)."""

    error_type = "generator_error"


class ModelOutputError(RagattnError):
    """The proxy produced a non-finite number (NaN/Inf); only this request fails, retry or
    report."""

    error_type = "model_error"


class WorkCancelledError(RagattnError):
    """Model work stopped at a boundary: its client went away, its deadline passed or the server
    is shutting down (``reason`` says which); nothing was computed for it, retry if still wanted."""

    error_type = "cancelled"

    def __init__(self, message: str, *, reason: str = "cancelled") -> None:
        super().__init__(message)
        self.reason = reason


class ConfigError(RagattnError):
    """A setting is missing or invalid."""

    error_type = "config_error"


class ModelLoadError(RagattnError):
    """A proxy model could not be found or loaded; the message names what to install."""

    error_type = "model_load_error"


class MissingDependencyError(RagattnError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    error_type = "missing_dependency"


__all__ = [
    "ConfigError",
    "GeneratorError",
    "InputTooLargeError",
    "InvalidInputError",
    "MissingDependencyError",
    "ModelLoadError",
    "ModelOutputError",
    "NotReadyError",
    "OverloadedError",
    "RagattnError",
    "TokenizerError",
    "WorkCancelledError",
]
