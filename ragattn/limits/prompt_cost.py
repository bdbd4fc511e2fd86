"""The proxy tokens a prompt adds around a request's own text, counted against the request budget.

The proxy reads more than the query and the documents: the layouts of :mod:`ragattn.prompt` wrap
them in a chat turn, an instruction and a ``Query:`` label, put a separator (and, in the listwise
rerank layout, an ``[i]`` marker) before each document and a line break after each title. The
request budget is the work one request may queue for the model, so these tokens count too.

The counts are taken once, with the tokenizer, from the layouts themselves (built with an empty
query and empty documents), so they follow the layouts' code rather than restating it. Where two
layouts differ the larger count is kept: one number for every route and method, never below what
the proxy's prompt holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import get_args

from ragattn.prompt import Kind, Piece, rerank_pieces, sentinel_pieces
from ragattn.proxy import ChatFamily
from ragattn.types import Document

COUNTED_SLOTS = 10_000
"""Document positions whose prompt parts are counted one by one; a request with more documents
(``RAGATTN_MAX_DOCUMENTS`` above this) pays the last position's parts for each further one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptCost:
    """Proxy tokens of the prompt's own parts for a request.

    Attributes:
        fixed: tokens of the parts every prompt has once (chat wrapper, instructions, the query's
            label), the largest over the layouts and chat families.
        per_title: tokens of the line break after a document's title (titled documents only).
        slots: ``slots[n]`` is the tokens of the parts the first ``n`` documents add (separators,
            ``[i]`` markers), cumulative, for ``n`` from 0 to the positions counted.
    """

    fixed: int
    per_title: int
    slots: tuple[int, ...]

    def documents(self, n: int, titled: int) -> int:
        """Tokens the parts of ``n`` documents add, ``titled`` of them with a title."""
        last = len(self.slots) - 1
        if n <= last:
            parts = self.slots[n]
        else:
            widest = self.slots[last] - self.slots[last - 1] if last > 0 else 0
            parts = self.slots[last] + (n - last) * widest
        return parts + titled * self.per_title

    def total(self, n: int, titled: int) -> int:
        """Tokens of every prompt part of a request with ``n`` documents, ``titled`` titled."""
        return self.fixed + self.documents(n, titled)

    @classmethod
    def measure(cls, count: Callable[[Sequence[str]], list[int]], max_documents: int) -> PromptCost:
        """Count the layouts' parts with ``count`` (tokens of each text, no special tokens).

        Args:
            count: the tokenizer's count of each text.
            max_documents: the most documents a request may have; positions up to it (at most
                :data:`COUNTED_SLOTS`) are counted.
        """
        n = max(1, min(max_documents, COUNTED_SLOTS))
        empty = [Document(text="")] * n
        listwise = _per_document(rerank_pieces("", empty[:1], [0] * n, family="none"))
        sentinel = _per_document(sentinel_pieces("", empty))
        per_slot = [max(a, b) for a, b in zip(count(listwise), count(sentinel), strict=True)]
        slots = [0]
        for tokens in per_slot:
            slots.append(slots[-1] + tokens)
        fixed_texts = [
            "".join(p.text for p in layout)
            for family in get_args(ChatFamily)
            for layout in (
                rerank_pieces("", [], [], family=family),
                sentinel_pieces("", [], family=family),
            )
        ]
        return cls(
            fixed=max(count(fixed_texts)),
            per_title=count(["\n"])[0],
            slots=tuple(slots),
        )


def _per_document(pieces: Sequence[Piece]) -> list[str]:
    """The text each document adds to a layout of empty documents: the separators before it and
    its own piece (its marker; the body is empty), in order."""
    parts: list[str] = []
    pending = ""
    for piece in pieces:
        if piece.kind is Kind.SEPARATOR:
            pending += piece.text
        elif piece.kind is Kind.DOCUMENT:
            parts.append(pending + piece.text)
            pending = ""
        else:
            pending = ""
    return parts


__all__ = ["COUNTED_SLOTS", "PromptCost"]
