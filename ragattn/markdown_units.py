"""Markdown documents as structural units with exact spans, and kept units back as valid Markdown.

Sentence splitting mangles technical documentation: a fenced code block becomes several
sentences, a kept sentence can open a fence it never closes, a table row can be kept without its
header. A document that is Markdown is therefore cut along its structure, parsed by markdown-it-py
(CommonMark with GFM tables), into :class:`MarkdownUnit`:

- a fenced code block is one unit (``code``), or, when it is longer than
  :data:`~ragattn.sentences.MAX_SENTENCE_BYTES`, pieces cut at line boundaries, each carrying its
  block's :class:`Fence` (its opening line, language tag included, and its closing line) so that
  a piece kept alone is emitted between fences; indented code blocks are cut the same way (they
  need no fence);
- a table's header row and delimiter row are one unit (``table_header``), each data row another
  (``table_row``) that names its header: a kept row is emitted under the header;
- every paragraph (so every list item's) is split into sentences by
  :func:`~ragattn.sentences.split_sentences`, read as Markdown renders it (a soft line break is a
  space, inline code one opaque word), so a list item never shares a unit with what follows it;
- a heading is the section title of what follows it: each unit names the heading it falls under
  (``section``), and a heading is never a unit alone (kept without its section it would only
  spend the budget);
- YAML front matter, thematic breaks and container markers alone on a line are left out (no unit
  reads them; they lie between units).

Only a text with a fenced code block, a GFM table or an ATX heading line is read as Markdown
(:func:`looks_like_markdown`); every other text is split by
:func:`~ragattn.sentences.split_sentences` alone, unchanged, so prose splits exactly as before.

:func:`join_kept` is the way back: the kept units of one document in their original order,
joined so that the text stays valid Markdown (fences balanced, every kept row under its header),
with the fences and headers it had to repeat returned as :class:`~ragattn.types.AddedText`, apart
from the kept spans.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token

from ragattn.languages import AUTO
from ragattn.sentences import (
    MAX_SENTENCE_BYTES,
    cut_spans,
    resolve_language,
    split_sentences,
    utf8_len,
)
from ragattn.types import AddedKind, AddedText

UnitKind = Literal["sentence", "heading", "code", "table_header", "table_row", "html", "other"]
"""What a unit of a Markdown document is: a sentence of a paragraph (or list item), a heading
(or a sentence of a long one), a code block or a piece of one, a table's header (its header row
and delimiter row), a table's data row, a piece of an HTML block, or other text (a link
reference definition)."""

Span = tuple[int, int]
"""A ``[start, end)`` character range of the document's text."""

_local = threading.local()


@dataclass(frozen=True, slots=True)
class Fence:
    """A fenced code block's fences, as spans of the document: ``opening`` (the fence and its
    info string, ``\u0060\u0060\u0060python``), ``closing`` (the closing fence; for a block its
    source never closes, the opening fence's markup, which closes it)."""

    opening: Span
    closing: Span


@dataclass(frozen=True, slots=True)
class MarkdownUnit:
    """One unit of a Markdown document: ``text[start:end]``, exact.

    Attributes:
        start, end: the unit's range of the document's text.
        kind: what it is (:data:`UnitKind`).
        block: the leaf block it belongs to, numbered in document order (a paragraph's sentences,
            a code block's pieces, a table's header and rows share one).
        section: the span of the heading it falls under (None before the first heading).
        fence: a fenced code unit's fences (None for every other unit).
        opens: a code unit whose span starts with its block's opening fence.
        closes: a code unit whose span ends with its block's closing fence.
        header: a table row's header unit span (None for every other unit).
    """

    start: int
    end: int
    kind: UnitKind
    block: int
    section: Span | None = None
    fence: Fence | None = None
    opens: bool = False
    closes: bool = False
    header: Span | None = None


_BACKTICKS = re.compile(r"`+")


def _parser() -> MarkdownIt:
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = MarkdownIt("commonmark").enable("table")
    return parser


def _tokens(text: str) -> list[Token]:
    return _parser().parse(text)


def _is_atx(token: Token) -> bool:
    return token.type == "heading_open" and token.markup.startswith("#")


def looks_like_markdown(text: str) -> bool:
    """Whether ``text`` is read as Markdown: it has a fenced code block, a GFM table or an ATX
    heading (``# Title``), as markdown-it-py parses it. Plain prose, and text whose only
    structure is lists or emphasis, is not (its sentences split as before)."""
    if not ("```" in text or "~~~" in text or "|" in text or "#" in text):
        return False  # none of the three can be there: skip the parse
    return any(t.type in ("fence", "table_open") or _is_atx(t) for t in _tokens(_body(text)[0]))


class _Lines:
    """Where each line of a text starts and ends, by markdown-it's line breaks (``\\r\\n``,
    ``\\r``, ``\\n``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        starts, ends = [0], []
        i, n = 0, len(text)
        while i < n:
            ch = text[i]
            if ch == "\r" or ch == "\n":
                ends.append(i)
                i += 2 if ch == "\r" and i + 1 < n and text[i + 1] == "\n" else 1
                starts.append(i)
            else:
                i += 1
        ends.append(n)
        self.starts, self.ends = starts, ends

    def __len__(self) -> int:
        return len(self.starts)

    def line(self, n: int) -> str:
        return self.text[self.starts[n] : self.ends[n]]

    def stripped(self, first: int, last: int) -> Span:
        """Lines ``[first, last)`` without their outer whitespace."""
        start, end = self.starts[first], self.ends[last - 1]
        while start < end and self.text[start].isspace():
            start += 1
        while end > start and self.text[end - 1].isspace():
            end -= 1
        return start, end


def _body(text: str) -> tuple[str, int]:
    """The text with its YAML front matter (a first line ``---`` up to the next ``---`` or
    ``...`` line) blanked out, every character but line breaks a space, so that line numbers and
    offsets stay those of ``text``; and the number of front-matter lines (0 without)."""
    lines = _Lines(text)
    if len(lines) < 2 or lines.line(0).rstrip() != "---":
        return text, 0
    for n in range(1, len(lines)):
        if lines.line(n).rstrip() in ("---", "..."):
            head = text[: lines.ends[n]]
            blank = "".join(ch if ch in "\r\n" else " " for ch in head)
            return blank + text[lines.ends[n] :], n + 1
    return text, 0


def _cut_line(text: str, start: int, end: int) -> list[Span]:
    """One line longer than the bound as pieces of at most :data:`MAX_SENTENCE_BYTES` bytes,
    cut as a run without sentence ends is (:func:`~ragattn.sentences.cut_spans`: after a space in
    the bound's second half, else between grapheme clusters): the one case where a line of code is
    cut, a minified line (issue 59's bound)."""
    return cut_spans(text, start, end, MAX_SENTENCE_BYTES, at_stops=False)


def _line_pieces(lines: _Lines, spans: Sequence[Span]) -> list[Span]:
    """Consecutive line spans grouped into pieces of at most :data:`MAX_SENTENCE_BYTES` bytes
    (a longer line cut alone, :func:`_cut_line`); each piece starts at its first line that is
    not blank and ends at its last non-blank character (blank lines between pieces are glue)."""
    text = lines.text
    grouped: list[Span] = []
    current: Span | None = None
    for start, end in spans:
        if utf8_len(text[start:end]) > MAX_SENTENCE_BYTES:
            if current is not None:
                grouped.append(current)
                current = None
            grouped.extend(_cut_line(text, start, end))
            continue
        if current is not None and utf8_len(text[current[0] : end]) <= MAX_SENTENCE_BYTES:
            current = (current[0], end)
        else:
            if current is not None:
                grouped.append(current)
            current = (start, end)
    if current is not None:
        grouped.append(current)
    out = []
    for start, end in grouped:
        while end > start and text[end - 1].isspace():
            end -= 1
        while (nl := text.find("\n", start, end)) >= 0 and not text[start:nl].strip():
            start = nl + 1  # a blank first line: the piece starts on the next
        if end > start:
            out.append((start, end))
    return out


def _as_rendered(piece: str) -> str:
    """``piece`` (lines of one paragraph) with its line breaks as spaces and the inside of its
    inline code spans as ``x``: the same length, so every offset is the source's. A code span
    opens at a run of backticks and closes at the next run of the same length (CommonMark); a
    run without a partner is literal. Linear in the length (a bisect per run)."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(piece)]
    if not runs and "\n" not in piece and "\r" not in piece:
        return piece
    chars = list(piece.replace("\r", " ").replace("\n", " "))
    by_length: dict[int, list[int]] = {}
    for n, (a, b) in enumerate(runs):
        by_length.setdefault(b - a, []).append(n)
    n = 0
    while n < len(runs):
        same = by_length[runs[n][1] - runs[n][0]]
        k = bisect.bisect_right(same, n)
        if k == len(same):
            n += 1
            continue
        close = same[k]
        for i in range(runs[n][1], runs[close][0]):
            if not chars[i].isspace():
                chars[i] = "x"
        n = close + 1
    return "".join(chars)


def _fence_span(lines: _Lines, n: int, markup: str) -> Span:
    """The fence on line ``n``: from its markup to the line's end, right-stripped."""
    line = lines.line(n)
    at = line.find(markup)
    start = lines.starts[n] + max(at, 0)
    end = lines.ends[n]
    while end > start and lines.text[end - 1].isspace():
        end -= 1
    return start, end


def _plain_indent(line: str, at: int) -> bool:
    """Whether the fence at column ``at`` of ``line`` is preceded by at most three spaces only
    (so it is a fence at the top level too, outside its list or block quote)."""
    return at >= 0 and at <= 3 and line[:at] == " " * at


class _Builder:
    """The units of one Markdown text, block by block (:func:`markdown_units`)."""

    def __init__(self, text: str, language: str) -> None:
        self.text = text
        self.lines = _Lines(text)
        self.language = language
        self.units: list[MarkdownUnit] = []
        self.block = -1
        self.section: Span | None = None
        self.covered = [False] * len(self.lines)

    def add(self, span: Span, kind: UnitKind, **extra: object) -> None:
        if span[1] > span[0]:
            self.units.append(
                MarkdownUnit(span[0], span[1], kind, self.block, self.section, **extra)  # type: ignore[arg-type]
            )

    def cover(self, first: int, last: int) -> None:
        for n in range(first, min(last, len(self.covered))):
            self.covered[n] = True

    def prose(self, first: int, last: int, kind: UnitKind) -> None:
        r"""Lines ``[first, last)`` split into sentences (their container markers included).

        The splitter reads them as Markdown renders them: a soft line break is a space, and
        inline code is one opaque word (a ``.`` in ``\`.venv\``` or ``\`os.path\``` ends no
        sentence). Both are masked in a copy of the same length, so spans stay exact."""
        start, end = self.lines.starts[first], self.lines.ends[last - 1]
        piece = _as_rendered(self.text[start:end])
        for s in split_sentences(piece, language=self.language):
            self.add((start + s.start, start + s.end), kind)

    def heading(self, first: int, last: int) -> None:
        """A heading is the section title of what follows it (every later unit's ``section``),
        never a unit of its own: kept alone it would tell the generator nothing, and the read
        sees it in the document's text (an index chunk carries it in its title)."""
        self.block += 1
        self.section = self.lines.stripped(first, last)

    def fence(self, token: Token, first: int, last: int) -> None:
        """A fenced block: whole, or pieces at line boundaries, each carrying its fences."""
        self.block += 1
        lines, markup = self.lines, token.markup
        opening_line = lines.line(first)
        closing = last - 1 if last - 1 > first else None
        if closing is not None:
            tail = lines.line(closing).strip().lstrip(">").strip()
            if not (len(tail) >= len(markup) and set(tail) == {markup[0]}):
                closing = None
        opening = _fence_span(lines, first, markup)
        fence = Fence(
            opening=opening,
            closing=(
                _fence_span(lines, closing, markup[0])
                if closing is not None
                else (opening[0], opening[0] + len(markup))
            ),
        )
        end = closing if closing is not None else last
        content = [(lines.starts[n], lines.ends[n]) for n in range(first + 1, end)]
        while content and not lines.text[content[-1][0] : content[-1][1]].strip():
            content.pop()
        plain = _plain_indent(opening_line, opening_line.find(markup)) and (
            closing is None or _plain_indent(lines.line(closing), lines.line(closing).find(markup))
        )
        if plain:  # the fences are valid where they stand: the first and last pieces hold them
            head = [(opening[0], opening[1])]
            tail_span = [fence.closing] if closing is not None else []
            spans = head + content + tail_span
        else:  # behind a list's indent or a quote's marker: the code alone, fences repeated
            spans = content
        if not any(lines.text[a:b].strip() for a, b in content):
            if plain:
                self.add((spans[0][0], spans[-1][1]), "code", fence=fence, opens=True, closes=True)
            return
        pieces = _line_pieces(lines, spans)
        for n, piece in enumerate(pieces):
            self.add(
                piece,
                "code",
                fence=fence,
                opens=plain and n == 0,
                closes=plain and closing is not None and n == len(pieces) - 1,
            )

    def code_block(self, first: int, last: int) -> None:
        """An indented code block: whole lines, indentation kept (it is what makes it code)."""
        self.block += 1
        spans = [(self.lines.starts[n], self.lines.ends[n]) for n in range(first, last)]
        while spans and not self.text[spans[-1][0] : spans[-1][1]].strip():
            spans.pop()
        for piece in _line_pieces(self.lines, spans):
            self.add(piece, "code")

    def html(self, first: int, last: int) -> None:
        self.block += 1
        spans = [self.lines.stripped(n, n + 1) for n in range(first, last)]
        for piece in _line_pieces(self.lines, [s for s in spans if s[1] > s[0]]):
            self.add(piece, "html")

    def table(self, tokens: list[Token], at: int) -> int:
        """The table opening at ``tokens[at]``: its header unit, then a unit per data row;
        returns the index after ``table_close``."""
        self.block += 1
        header: Span | None = None
        in_head = False
        n = at
        while tokens[n].type != "table_close":
            t = tokens[n]
            if t.type in ("thead_open", "thead_close"):
                in_head = t.type == "thead_open"
                if in_head and t.map:
                    header = self.lines.stripped(t.map[0], t.map[0] + 2)  # with the delimiter row
                    self.add(header, "table_header")
            elif t.type == "tr_open" and t.map and not in_head:
                self.add(self.lines.stripped(t.map[0], t.map[1]), "table_row", header=header)
            n += 1
        return n + 1

    def gaps(self) -> None:
        """Lines no block holds that still say something (a link reference definition), as
        units of their own; markers and rules alone stay between units."""
        n = 0
        while n < len(self.covered):
            if self.covered[n] or not any(ch.isalnum() for ch in self.lines.line(n)):
                n += 1
                continue
            first = n
            while n < len(self.covered) and not self.covered[n] and self.lines.line(n).strip():
                n += 1
            self.block += 1
            self.prose(first, n, "other")

    def build(self, body: str, front: int) -> tuple[MarkdownUnit, ...]:
        self.cover(0, front)
        tokens = _tokens(body)
        n = 0
        while n < len(tokens):
            t = tokens[n]
            if t.map is not None:
                first, last = t.map
                if t.type == "table_open":
                    self.cover(first, last)
                    n = self.table(tokens, n)
                    continue
                handled = True
                if t.type == "paragraph_open":
                    self.block += 1
                    self.prose(first, last, "sentence")
                elif t.type == "heading_open":
                    self.heading(first, last)
                elif t.type == "fence":
                    self.fence(t, first, last)
                elif t.type == "code_block":
                    self.code_block(first, last)
                elif t.type == "html_block":
                    self.html(first, last)
                elif t.type == "hr":
                    pass
                else:
                    handled = False  # a container: its leaves say where its lines go
                if handled:
                    self.cover(first, last)
            n += 1
        self.gaps()
        return tuple(sorted(self.units, key=lambda u: u.start))


@lru_cache(maxsize=1024)
def _markdown_cached(text: str, language: str) -> tuple[MarkdownUnit, ...] | None:
    if not looks_like_markdown(text):
        return None
    body, front = _body(text)
    return _Builder(text, language).build(body, front)


def markdown_units(text: str, *, language: str = AUTO) -> tuple[MarkdownUnit, ...] | None:
    """The structural units of ``text`` when it is Markdown (:func:`looks_like_markdown`), in
    document order; None for any other text.

    Args:
        text: a document's text.
        language: how prose is split into sentences: a code of
            :data:`~ragattn.sentences.LANGUAGES`, or ``"auto"`` (the whole text's script,
            resolved once, so every paragraph splits by the same rules).

    Returns:
        Units that do not overlap, each ``text[start:end]`` exactly; no sentence is longer than
        :data:`~ragattn.sentences.MAX_SENTENCE_BYTES` UTF-8 bytes, no code piece either unless it
        is one line that long (it is then cut, the one place a line is; :func:`_cut_line`), and
        table rows are whole lines whatever their length.

    Raises:
        ValueError: an unknown language.
    """
    return _markdown_cached(text, resolve_language(language, text))


def document_units(text: str, *, language: str = AUTO) -> tuple[Span, ...]:
    """The unit spans of one document: its :func:`markdown_units` when it is Markdown, else its
    sentences (:func:`~ragattn.sentences.split_sentences`, unchanged)."""
    units = markdown_units(text, language=language)
    if units is None:
        return tuple((s.start, s.end) for s in split_sentences(text, language=language))
    return tuple((u.start, u.end) for u in units)


def join_kept(
    text: str, units: Sequence[MarkdownUnit], kept: Sequence[int]
) -> tuple[str, tuple[AddedText, ...]]:
    """The kept units of one Markdown document as valid Markdown, and what it had to add.

    The kept units come in their original order. Units adjacent in the document are joined by
    the text between them (whitespace, or a sentence's own line break); sentences of one
    paragraph with a dropped one between by the first one's trailing whitespace, as plain text
    joins them; rows of one table by a line break, under one header; anything else by a blank
    line. A code unit that does not hold its block's opening fence gets it repeated before it,
    one that does not hold its closing fence gets that repeated after it (unless the piece next
    to it is kept too), and a table row whose header is not kept gets the header once before the
    table's first kept row. Every repeated fence and header is an :class:`AddedText` (its
    ``offset`` in the returned text), never a kept span.

    Args:
        text: the document's text.
        units: its :func:`markdown_units`.
        kept: indices of ``units`` kept, in any order.

    Returns:
        The joined text (right-stripped) and the added texts, in order.
    """
    out: list[str] = []
    added: list[AddedText] = []
    size = 0

    def emit(piece: str, source: Span | None = None, kind: AddedKind = "fence") -> None:
        nonlocal size
        if source is not None:
            added.append(
                AddedText(
                    kind=kind,
                    text=piece,
                    offset=size,
                    source_start=source[0],
                    source_end=source[1],
                )
            )
        out.append(piece)
        size += len(piece)

    order = sorted(set(kept))
    previous: int | None = None
    for i in order:
        u = units[i]
        run = previous is not None and previous == i - 1 and units[previous].block == u.block
        if previous is not None:
            p = units[previous]
            if p.fence is not None and not p.closes and not run:
                emit("\n")
                emit(text[p.fence.closing[0] : p.fence.closing[1]], p.fence.closing, "fence")
            emit(_separator(text, units, previous, i, run))
        if u.fence is not None and not u.opens and not run:
            emit(text[u.fence.opening[0] : u.fence.opening[1]], u.fence.opening, "fence")
            emit("\n")
        first_row = previous is None or units[previous].block != u.block
        if u.kind == "table_row" and u.header is not None and first_row:
            emit(text[u.header[0] : u.header[1]], u.header, "table_header")
            emit("\n")
        emit(text[u.start : u.end])
        previous = i
    if previous is not None:
        p = units[previous]
        if p.fence is not None and not p.closes:
            emit("\n")
            emit(text[p.fence.closing[0] : p.fence.closing[1]], p.fence.closing, "fence")
    return "".join(out).rstrip(), tuple(added)


def _separator(text: str, units: Sequence[MarkdownUnit], p: int, i: int, run: bool) -> str:
    """What goes between kept units ``p`` and ``i`` (``p < i``) of one document; ``run``: ``i``
    is the unit right after ``p`` in the same block."""
    a, b = units[p], units[i]
    gap = text[a.end : b.start]
    if run:
        return gap  # the next piece of the same block: the source's own join
    if a.block == b.block:
        if a.kind in ("table_header", "table_row"):
            return "\n"  # rows of one table stay under its header
        if a.kind != "code":
            trailing = text[a.end : units[p + 1].start]  # the sentence's own trailing space
            return trailing if trailing and not trailing.strip() else " "
    elif i == p + 1 and gap and not gap.strip():
        return gap  # neighbouring blocks: the source's own blank line or line break
    return "\n\n"


__all__ = [
    "Fence",
    "MarkdownUnit",
    "Span",
    "UnitKind",
    "document_units",
    "join_kept",
    "looks_like_markdown",
    "markdown_units",
]
