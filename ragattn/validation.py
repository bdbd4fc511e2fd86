"""Argument checks shared by every entry point (reranker, compressor, pipeline, adapters).

One definition of each check, so that a bad ``query``, ``top_n`` or budget gets the same message
wherever it is passed (the budget and ``top_n`` checks live with their values in
:mod:`ragattn.types`). Nothing here imports torch or a model: the remote client and the framework
adapters can validate before any request is sent.
"""

from __future__ import annotations

from ragattn.errors import InvalidInputError
from ragattn.types import Budget, BudgetKind, check_top_n


def check_query(query: object) -> str:
    """``query`` itself when it is a non-empty string.

    Raises:
        InvalidInputError: not a string, or only whitespace.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    return query


def one_budget(
    ratio: float | None, target_tokens: int | None, threshold: float | None
) -> tuple[BudgetKind, float]:
    """The single budget given, as ``(kind, value)``, range-checked: the keyword form of
    :meth:`ragattn.types.Budget.from_args`, whose one check it runs.

    Raises:
        InvalidInputError: none or more than one budget, a non-number, or a value out of range.
    """
    budget = Budget.from_args(ratio, target_tokens, threshold)
    return budget.kind, budget.value


__all__ = ["BudgetKind", "check_query", "check_top_n", "one_budget"]
