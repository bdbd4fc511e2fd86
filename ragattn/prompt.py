"""Prompt assembly from typed segments, with the exact token span of every segment.

A prompt is a sequence of :class:`Piece` s (chat wrapper, instruction, document, separator, query,
answer prefix ...). The text is their concatenation, so every piece's character range is known by
construction; no text search in the prompt ever happens, so duplicate documents or sentences cannot
confuse spans. The whole prompt is then tokenized once with a fast tokenizer, and each token is
assigned to the piece holding its first non-space character (the leading space of ``Ġword`` /
``▁word`` tokens belongs to the word). A consistency check asserts that the token offsets cover the
text in order and that no content token straddles two pieces in a way that would mis-assign it.

The content-free calibration twin (``N/A`` in place of the query) is built from the same pieces,
so it shares the token prefix with the real prompt up to the query span; that is checked too.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from ragattn.errors import TokenizerError
from ragattn.proxy import ChatFamily
from ragattn.types import Document, TokenSpan

CALIBRATION_QUERY = "N/A"


class Kind(str, Enum):
    """What a piece of prompt text is."""

    CHAT_PREFIX = "chat_prefix"
    CHAT_SUFFIX = "chat_suffix"
    INSTRUCTION = "instruction"
    SEPARATOR = "separator"
    DOCUMENT = "document"
    QUERY = "query"
    ANSWER_PREFIX = "answer_prefix"


CHAT_WRAPPERS: dict[str, tuple[str, str]] = {
    "chatml": ("<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n"),
    "gemma": ("<start_of_turn>user\n", "<end_of_turn>\n<start_of_turn>model\n"),
    "llama3": (
        "<|start_header_id|>user<|end_header_id|>\n\n",
        "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    ),
    "none": ("", ""),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Piece:
    """One segment of prompt text. ``content_offset`` is where the document's own text starts
    inside a DOCUMENT piece (after its ``[i]`` marker and title), so sentence character ranges of
    the document map into the prompt."""

    kind: Kind
    text: str
    doc_index: int | None = None
    content_offset: int = 0
    query_span: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacedPiece:
    """A piece with its character range ``[char_start, char_end)`` in the prompt and its tokens."""

    piece: Piece
    char_start: int
    char_end: int
    tokens: TokenSpan


@dataclass(frozen=True, slots=True, kw_only=True)
class BuiltPrompt:
    """A tokenized prompt and the token span of every piece.

    ``query_span`` covers every token of the pieces flagged ``query_span`` (ICR: the late
    instruction, ``Query: <q>`` and the chat suffix), which must be a suffix of the prompt's
    content pieces. ``offsets`` are the tokenizer's character offsets per token.
    """

    text: str
    input_ids: tuple[int, ...]
    offsets: tuple[tuple[int, int], ...]
    pieces: tuple[PlacedPiece, ...]
    query_span: TokenSpan

    def __len__(self) -> int:
        return len(self.input_ids)

    def document(self, index: int) -> PlacedPiece:
        for placed in self.pieces:
            if placed.piece.kind is Kind.DOCUMENT and placed.piece.doc_index == index:
                return placed
        raise KeyError(index)

    def char_range_tokens(self, start: int, end: int) -> TokenSpan:
        """Tokens whose first non-space character lies in prompt characters ``[start, end)``."""
        firsts = self._first_chars
        lo = bisect.bisect_left(firsts, start)
        hi = bisect.bisect_left(firsts, end)
        return TokenSpan(start=lo, end=max(lo, hi))

    def document_text_tokens(self, index: int, start: int, end: int) -> TokenSpan:
        """Token span of characters ``[start, end)`` of document ``index``'s own text."""
        placed = self.document(index)
        base = placed.char_start + placed.piece.content_offset
        return self.char_range_tokens(base + start, base + end)

    @property
    def _first_chars(self) -> list[int]:
        return first_non_space(self.text, self.offsets)


def first_non_space(text: str, offsets: Sequence[tuple[int, int]]) -> list[int]:
    """Per token, the position of its first non-space character (its start if all blank).

    Special tokens with empty offsets (e.g. an added BOS) take the position of the next token's
    start so the list stays sorted; they then belong to no content piece.
    """
    firsts: list[int] = []
    last = -1
    for start, end in offsets:
        pos = start
        while pos < end and text[pos].isspace():
            pos += 1
        if pos >= end:
            pos = start
        pos = max(pos, last)
        firsts.append(pos)
        last = pos
    return firsts


def _tokenize(tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    try:
        enc = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
    except Exception as exc:  # tokenizers raise plain Exceptions on undecodable input
        raise TokenizerError(
            f"the proxy tokenizer could not encode the prompt: {type(exc).__name__}"
        ) from exc
    ids = list(enc["input_ids"])
    offsets = [(int(a), int(b)) for a, b in enc["offset_mapping"]]
    return ids, offsets


def assemble(pieces: Sequence[Piece], tokenizer: Any) -> BuiltPrompt:
    """Concatenate ``pieces``, tokenize once, and record every piece's token span.

    Raises:
        TokenizerError: the tokenization does not line up with the pieces (offsets out of order,
            or the query-span pieces are not a contiguous suffix).
    """
    text_parts, placed_chars = [], []
    cursor = 0
    for piece in pieces:
        text_parts.append(piece.text)
        placed_chars.append((cursor, cursor + len(piece.text)))
        cursor += len(piece.text)
    text = "".join(text_parts)
    ids, offsets = _tokenize(tokenizer, text)
    firsts = first_non_space(text, offsets)
    if any(b < a for a, b in offsets) or any(
        offsets[i][0] < offsets[i - 1][0] for i in range(1, len(offsets))
    ):
        raise TokenizerError("tokenizer offsets are not monotone; spans cannot be trusted")
    placed = []
    for piece, (a, b) in zip(pieces, placed_chars, strict=True):
        lo = bisect.bisect_left(firsts, a)
        hi = bisect.bisect_left(firsts, b)
        # Skip zero-width special tokens sitting at the boundary (they have empty offsets).
        while lo < hi and offsets[lo][0] == offsets[lo][1]:
            lo += 1
        placed.append(
            PlacedPiece(
                piece=piece, char_start=a, char_end=b, tokens=TokenSpan(start=lo, end=max(lo, hi))
            )
        )
    _check_alignment(text, offsets, placed)
    q_pieces = [p for p in placed if p.piece.query_span]
    if q_pieces:
        if any(not p.piece.query_span for p in placed[placed.index(q_pieces[0]) :]):
            raise TokenizerError("query-span pieces must be a contiguous suffix of the prompt")
        query = TokenSpan(start=q_pieces[0].tokens.start, end=len(ids))
    else:
        query = TokenSpan(start=len(ids) - 1, end=len(ids))
    return BuiltPrompt(
        text=text,
        input_ids=tuple(ids),
        offsets=tuple(offsets),
        pieces=tuple(placed),
        query_span=query,
    )


def _check_alignment(
    text: str, offsets: Sequence[tuple[int, int]], placed: Sequence[PlacedPiece]
) -> None:
    """Assert that each content piece's tokens decode back to (a whitespace-trimmed) piece text."""
    for p in placed:
        if p.piece.kind not in (Kind.DOCUMENT, Kind.QUERY) or len(p.tokens) == 0:
            continue
        first = offsets[p.tokens.start][0]
        last = offsets[p.tokens.end - 1][1]
        covered = text[first:last].strip()
        expected = text[p.char_start : p.char_end].strip()
        if expected and expected not in covered:
            raise TokenizerError(
                f"tokens of a {p.piece.kind.value} piece do not cover its text; "
                "the tokenizer merged across a segment boundary"
            )
        if len(covered) > len(expected) + 4:
            raise TokenizerError(
                f"tokens of a {p.piece.kind.value} piece spill over its boundary by "
                f"{len(covered) - len(expected)} characters"
            )


def with_query(pieces: Sequence[Piece], query: str) -> list[Piece]:
    """The same pieces with every QUERY piece's query text replaced (the calibration twin)."""
    out = []
    for piece in pieces:
        if piece.kind is Kind.QUERY:
            head = piece.text[: piece.content_offset]
            out.append(replace(piece, text=head + query))
        else:
            out.append(piece)
    return out


def shared_prefix_length(a: BuiltPrompt, b: BuiltPrompt) -> int:
    """Number of leading token ids the two prompts share."""
    n = 0
    for x, y in zip(a.input_ids, b.input_ids, strict=False):
        if x != y:
            break
        n += 1
    return n


def document_text(doc: Document) -> tuple[str, int]:
    """The prompt form of a document body (``title\\ntext``) and the offset of ``text`` in it."""
    if doc.title:
        head = doc.title.strip() + "\n"
        return head + doc.text, len(head)
    return doc.text, 0


# ---- prompt layouts --------------------------------------------------------------------------

ICR_INSTRUCTIONS = {
    "ie": (
        "Please find information that are relevant to the following query in the paragraphs above."
    ),
    "qa": "Please answer the following question based on the information in the paragraphs above.",
}


def rerank_pieces(
    query: str,
    documents: Sequence[Document],
    order: Sequence[int],
    *,
    family: ChatFamily,
    instruction: str = "ie",
    separator: str = "\n\n",
    query_first: bool = False,
) -> list[Piece]:
    """ICR's listwise layout: documents ``[i] title\\ntext`` in ``order``, then the late
    instruction, ``Query: <q>`` and the chat suffix, which together form the query span.

    ``query_first`` also states the query before the documents ("query before and after"), so a
    small model reads each document knowing what it is for. That copy is an instruction piece, not
    a QUERY piece: the ``N/A`` twin keeps it and so still shares the whole document prefix.
    """
    prefix, suffix = CHAT_WRAPPERS[family]
    pieces = [Piece(kind=Kind.CHAT_PREFIX, text=prefix)] if prefix else []
    if query_first:
        pieces.append(Piece(kind=Kind.INSTRUCTION, text=f"Query: {query}"))
        pieces.append(Piece(kind=Kind.SEPARATOR, text=separator))
    pieces.append(Piece(kind=Kind.INSTRUCTION, text="Here are some paragraphs:"))
    for slot, index in enumerate(order, start=1):
        body, offset = document_text(documents[index])
        marker = f"[{slot}] "
        pieces.append(Piece(kind=Kind.SEPARATOR, text=separator))
        pieces.append(
            Piece(
                kind=Kind.DOCUMENT,
                text=marker + body,
                doc_index=index,
                content_offset=len(marker) + offset,
            )
        )
    late = ICR_INSTRUCTIONS.get(instruction, instruction)
    pieces.append(Piece(kind=Kind.SEPARATOR, text=separator))
    pieces.append(Piece(kind=Kind.INSTRUCTION, text=late, query_span=True))
    pieces.append(Piece(kind=Kind.SEPARATOR, text=separator, query_span=True))
    pieces.append(
        Piece(
            kind=Kind.QUERY, text="Query: " + query, content_offset=len("Query: "), query_span=True
        )
    )
    if suffix:
        pieces.append(Piece(kind=Kind.CHAT_SUFFIX, text=suffix, query_span=True))
    return pieces


SENTINEL_HEAD = "Given the following information: "
SENTINEL_TAIL = (
    "\nAnswer the following question based on the given information with one or few words: "
)


def sentinel_pieces(
    query: str,
    documents: Sequence[Document],
    *,
    family: ChatFamily = "none",
    separator: str = "\n",
    answer_prefix: str = "Answer:",
) -> list[Piece]:
    """Sentinel's compression layout; the focal row is the last token (of ``answer_prefix``)."""
    prefix, suffix = CHAT_WRAPPERS[family]
    pieces = [Piece(kind=Kind.CHAT_PREFIX, text=prefix + SENTINEL_HEAD)]
    for n, doc in enumerate(documents):
        body, offset = document_text(doc)
        if n:
            pieces.append(Piece(kind=Kind.SEPARATOR, text=separator))
        pieces.append(Piece(kind=Kind.DOCUMENT, text=body, doc_index=n, content_offset=offset))
    pieces.append(Piece(kind=Kind.INSTRUCTION, text=SENTINEL_TAIL, query_span=True))
    pieces.append(Piece(kind=Kind.QUERY, text=query, content_offset=0, query_span=True))
    tail = ("\n" + answer_prefix) if not suffix else (suffix + answer_prefix)
    pieces.append(Piece(kind=Kind.ANSWER_PREFIX, text=tail, query_span=True))
    return pieces
