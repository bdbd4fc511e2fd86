"""Budgets: which sentences to keep, counted in a named downstream tokenizer.

Exactly one budget is given: ``ratio`` (fraction of tokens kept, 0 < ratio <= 1), ``target_tokens``
(tokens kept at most) or ``threshold`` (keep sentences whose score is at least this, in [0, 1]).
Selection is greedy by score; a sentence that does not fit is skipped and smaller ones are still
tried (Sentinel stops at the first misfit; skipping uses the budget better). The best sentence that
fits comes first; only when no sentence fits the budget is the highest-scoring one kept alone, over
it (the result's warnings say so). After joining, the text is re-counted and the lowest-scoring
sentences are dropped while it is over budget (joins can merge or split tokens). :class:`Budget`
itself is the one value type of :mod:`ragattn.types`, re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ragattn.types import Budget


def select(
    scores: Sequence[float],
    costs: Sequence[int],
    budget: Budget,
    origin_tokens: int,
    count_joined: Callable[[Sequence[int]], int],
    forced: Sequence[int] = (),
) -> list[int]:
    """Indices of kept units (in score order of admission, caller re-sorts).

    Args:
        scores: one score per unit (higher = keep first).
        costs: tokens of each unit in the downstream tokenizer (with its trailing joiner).
        budget: the validated budget.
        origin_tokens: tokens of the whole original context (for ``ratio``).
        count_joined: counts the tokens of the joined text of a set of kept units.
        forced: units kept regardless of score (e.g. sentences naming query entities).
    """
    if not scores:
        return []
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    limit = budget.token_limit(origin_tokens)
    kept = list(dict.fromkeys(forced))
    if limit is None:
        kept += [i for i in ranked if scores[i] >= budget.value and i not in kept]
        return kept or ranked[:1]
    used = sum(costs[i] for i in kept)
    for i in ranked:
        if i in kept:
            continue
        if used + costs[i] <= limit:
            kept.append(i)
            used += costs[i]
    if not kept:  # no sentence fits: the best one alone, over the budget (the result says so)
        kept = ranked[:1]
    while len(kept) > 1 and count_joined(kept) > limit:
        removable = [i for i in kept if i not in forced] or kept
        kept.remove(min(removable, key=lambda i: (scores[i], -i)))
    return kept


__all__ = ["Budget", "select"]
