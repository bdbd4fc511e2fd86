"""Argument checks shared by every entry point (reranker, compressor, pipeline, adapters).

One definition of each check, so that a bad ``query``, ``top_n`` or budget gets the same message
wherever it is passed (the budget and ``top_n`` checks live with their values in
:mod:`ragattn.types`). Nothing here imports torch or a model: the remote client and the framework
adapters can validate before any request is sent.
"""

from __future__ import annotations

from ragattn.errors import InvalidInputError
from ragattn.types import check_top_n

MAX_ECHO_CHARS = 64
"""Most characters of a refused value repeated in a message (as the service's
``ragattn_api.logsafe.quoted``; a 2,000-digit ``top_k`` is not sent back whole)."""


def shown(value: object) -> str:
    """``value`` for an error message: its ``repr``, cut to :data:`MAX_ECHO_CHARS` characters
    with its length stated when longer."""
    if isinstance(value, str) and len(value) > MAX_ECHO_CHARS:
        return f"{value[:MAX_ECHO_CHARS]!r}... ({len(value)} characters)"
    try:
        text = repr(value)
    except ValueError:  # an int too long for Python to write in decimal
        return "an integer of more than 4300 digits"
    if len(text) <= MAX_ECHO_CHARS:
        return text
    return f"{text[:MAX_ECHO_CHARS]}... ({len(text)} characters)"


def check_query(query: object) -> str:
    """``query`` itself when it is a non-empty string.

    Raises:
        InvalidInputError: not a string, or only whitespace.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    return query


__all__ = ["MAX_ECHO_CHARS", "check_query", "check_top_n", "shown"]
