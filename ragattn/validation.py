"""Argument checks shared by every entry point (reranker, compressor, pipeline, adapters).

One definition of each check, so that a bad ``query``, ``top_n`` or budget gets the same message
wherever it is passed (the budget and ``top_n`` checks live with their values in
:mod:`ragattn.types`). Nothing here imports torch or a model: the remote client and the framework
adapters can validate before any request is sent.
"""

from __future__ import annotations

from ragattn.errors import InvalidInputError
from ragattn.types import check_top_n


def check_query(query: object) -> str:
    """``query`` itself when it is a non-empty string.

    Raises:
        InvalidInputError: not a string, or only whitespace.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    return query


__all__ = ["check_query", "check_top_n"]
