"""Argument checks shared by every entry point (reranker, compressor, pipeline, adapters).

One definition of each check, so that a bad ``query``, ``top_n`` or budget gets the same message
wherever it is passed. Nothing here imports torch or a model: the remote client and the framework
adapters can validate before any request is sent.
"""

from __future__ import annotations

import math
from typing import Literal

from ragattn.errors import InvalidInputError

BudgetKind = Literal["ratio", "target_tokens", "threshold"]


def check_query(query: object) -> str:
    """``query`` itself when it is a non-empty string.

    Raises:
        InvalidInputError: not a string, or only whitespace.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    return query


def check_top_n(top_n: object) -> int | None:
    """``top_n`` itself when it is None (keep all) or a positive integer (``bool`` is not one).

    Raises:
        InvalidInputError: anything else.
    """
    if top_n is None:
        return None
    if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
        raise InvalidInputError("top_n must be a positive integer or None (keep all)")
    return top_n


def one_budget(
    ratio: float | None, target_tokens: int | None, threshold: float | None
) -> tuple[BudgetKind, float]:
    """The single budget given, as ``(kind, value)``, range-checked.

    ``ratio`` is the fraction of tokens kept, in (0, 1]; ``target_tokens`` the most tokens kept, a
    positive integer; ``threshold`` the lowest keep score kept, in [0, 1].

    Raises:
        InvalidInputError: none or more than one budget, a non-number, or a value out of range.
    """
    candidates: tuple[tuple[BudgetKind, float | int | None], ...] = (
        ("ratio", ratio),
        ("target_tokens", target_tokens),
        ("threshold", threshold),
    )
    given = [(kind, value) for kind, value in candidates if value is not None]
    if len(given) != 1:
        raise InvalidInputError("give exactly one budget: ratio, target_tokens or threshold")
    kind, value = given[0]
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(float(value)):
        raise InvalidInputError(f"{kind} must be a number")
    if kind == "ratio" and not 0 < value <= 1:
        raise InvalidInputError("ratio is the fraction of tokens kept and must be in (0, 1]")
    if kind == "target_tokens" and (int(value) != value or value < 1):
        raise InvalidInputError("target_tokens must be a positive integer")
    if kind == "threshold" and not 0 <= value <= 1:
        raise InvalidInputError("threshold must be in [0, 1]")
    return kind, float(value)


__all__ = ["BudgetKind", "check_query", "check_top_n", "one_budget"]
