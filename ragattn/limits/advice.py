"""The advice of a 413: what the caller can send instead, computed from the refused request.

A refusal that tells the caller what to change must name a change that is accepted. The advice is
computed from the request's own counts (its query, its documents' titles and sizes, the prompt's
own parts, :mod:`ragattn.limits.prompt_cost`) and the server's limits, in this order:

1. one request with ``max_tokens_per_doc=c``: the largest cap ``c`` (up to the per-document limit)
   under which the query, the prompt's parts and every document cut to ``c`` fit the request
   budget. A cap counts a document's title with its text and a title is never cut, so ``c`` is
   also above the title of every document it would cut;
2. else the request split into requests of at most ``m`` consecutive documents (each request of
   the split fits the budget, whichever documents it holds);
3. else one document per request with the cap that fits one document;
4. else nothing about the documents can help: the query itself leaves no room.

The counts are the exact ones where the tokenizer has run (:meth:`LimitChecker.check
<ragattn.limits.LimitChecker.check>`) and upper bounds where it has not
(:meth:`~ragattn.limits.LimitChecker.precheck`); advice from upper bounds asks for a little more
than needed, never for something that would be refused again for the same reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragattn.limits.prompt_cost import PromptCost


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestShape:
    """The counts of a request the advice is computed from, in proxy tokens.

    Attributes:
        query: tokens of the query.
        titles: per document, tokens of its title (0 when it has none); at least the exact count.
        sizes: per document, tokens of its title and text before any cut; at least the exact count.
        titled: how many documents have a title (each adds the line break after it).
    """

    query: int
    titles: Sequence[int]
    sizes: Sequence[int]
    titled: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Room:
    """The limits the advice must satisfy.

    Attributes:
        budget: the request budget (``max_request_tokens``).
        per_doc: the per-document limit (``max_tokens_per_doc``).
        cap: the caller's own cap when it truncates (None: none sent, or one above ``per_doc``).
        prompt: the prompt's own parts.
    """

    budget: int
    per_doc: int
    cap: int | None
    prompt: PromptCost


def advise(shape: RequestShape, room: Room) -> str:
    """The change that makes the request fit, as a phrase of the 413's message (see the module
    docstring for the order in which changes are tried)."""
    n = len(shape.sizes)
    sizes = np.asarray(shape.sizes, dtype=np.int64)
    titles = np.asarray(shape.titles, dtype=np.int64)
    # A cap c cuts a document with more than c tokens, which needs its title under c.
    lowest = int(max(1, (np.minimum(titles, sizes - 1) + 1).max(initial=1)))
    space = room.budget - shape.query - room.prompt.total(n, shape.titled)
    cap = _largest_cap(sizes, space, lowest, room.per_doc)
    if cap is not None:
        return (
            f"send max_tokens_per_doc={cap} to truncate each document, its title included, "
            f"to {cap} tokens"
        )
    # Split: each part's documents cut at the caller's cap (if any, raised to fit the titles)
    # or at the per-document limit.
    split_cap = room.per_doc if room.cap is None else min(room.per_doc, max(room.cap, lowest))
    widest = int(np.minimum(sizes, split_cap).max(initial=0))
    cut = bool((sizes > split_cap).any())
    per_part = _most_documents(shape, room, widest, n - 1)
    if per_part >= 1:
        parts = -(-n // per_part)
        each = f", each with max_tokens_per_doc={split_cap}" if cut else ""
        return f"split it into {parts} requests of at most {per_part} documents{each}"
    one = room.budget - shape.query - room.prompt.total(1, min(1, shape.titled))
    single = min(split_cap, one)
    if n > 1 and single >= lowest:
        return f"split it into {n} requests of one document each, with max_tokens_per_doc={single}"
    titles_too = " or the titles" if shape.titled else ""
    return (
        f"the query and the prompt's own parts leave {max(one, 0)} tokens for a document: "
        f"shorten the query{titles_too}"
    )


def _largest_cap(sizes: np.ndarray, space: int, lowest: int, highest: int) -> int | None:
    """The largest ``c`` in ``[lowest, highest]`` with ``sum(min(size, c)) <= space``, or None."""

    def used(c: int) -> int:
        return int(np.minimum(sizes, c).sum())

    if lowest > highest or used(lowest) > space:
        return None
    lo, hi = lowest, highest
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if used(mid) <= space:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _most_documents(shape: RequestShape, room: Room, widest: int, most: int) -> int:
    """The most documents of at most ``widest`` tokens each that fit one request with this
    query (0: not even one), at most ``most``."""
    fits = 0
    for m in range(1, most + 1):
        titled = min(m, shape.titled)
        if shape.query + room.prompt.total(m, titled) + m * widest > room.budget:
            break
        fits = m
    return fits


__all__ = ["RequestShape", "Room", "advise"]
