"""Broken Markdown structure in a kept context (issue 60): what a system's cut did to the code
blocks and tables of the documents it kept parts of.

Three counts, per kept document (a candidate's kept text, its kept spans of the source):

- ``fences``: fenced code blocks left open in the kept text, by a Markdown parse (markdown-it):
  an opening ```` ``` ```` / ``~~~`` line whose closing line was cut away, or a closing line kept
  without its opening (which a parser reads as a new block left open);
- ``rows``: data rows of a source table that are kept (any character) while the table's header
  row is not kept whole: a row without the header above it, which no reader can map to columns;
- ``code_lines``: lines of a source code block (fenced or indented, its fence lines included)
  kept in part: some but not all of the line's non-blank characters are kept.

A text without Markdown structure has no break: prose sets count zero everywhere.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ragattn.retrieve.sections import block_parser, line_starts

_CODE = frozenset({"fence", "code_block"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StructureBreaks:
    """Broken structure in kept text: open fences, headless table rows, code lines cut."""

    fences: int = 0
    rows: int = 0
    code_lines: int = 0

    @property
    def total(self) -> int:
        return self.fences + self.rows + self.code_lines

    def __add__(self, other: StructureBreaks) -> StructureBreaks:
        return StructureBreaks(
            fences=self.fences + other.fences,
            rows=self.rows + other.rows,
            code_lines=self.code_lines + other.code_lines,
        )


def open_fences(text: str) -> int:
    """Fenced code blocks of ``text`` that a Markdown parse finds without a closing fence line
    (a fence runs to the end of its container when it is never closed)."""
    if "```" not in text and "~~~" not in text:
        return 0
    lines = line_starts(text)
    count = 0
    for token in block_parser().parse(text):
        if token.type != "fence" or token.map is None:
            continue
        first, end = token.map
        if end - first < 2:
            count += 1  # an opening line alone
            continue
        last = text[lines[end - 1] : lines[end] if end < len(lines) else len(text)].strip()
        # markdown-it strips a container's markers from the closing line; the fence's own
        # markup (its character, at least as many) must end the last line of the block.
        closing = last.lstrip(">").strip()
        if not (closing.startswith(token.markup) and set(closing) <= {token.markup[0]}):
            count += 1
    return count


@dataclass(frozen=True, slots=True)
class _Layout:
    """A source's code-block lines and tables as character ranges of its non-blank extent."""

    code_lines: tuple[tuple[int, int], ...]
    tables: tuple[tuple[tuple[int, int], tuple[tuple[int, int], ...]], ...]  # (header, rows)


@lru_cache(maxsize=4096)
def _layout(source: str) -> _Layout:
    lines = line_starts(source)

    def extent(k: int) -> tuple[int, int]:
        start = lines[k]
        end = lines[k + 1] if k + 1 < len(lines) else len(source)
        text = source[start:end]
        stripped = text.strip()
        if not stripped:
            return (start, start)
        first = start + text.index(stripped[0])
        return (first, first + len(stripped))

    code: list[tuple[int, int]] = []
    tables = []
    for token in block_parser().parse(source):
        if token.map is None:
            continue
        first, end = token.map
        if token.type in _CODE:
            code += [e for e in (extent(k) for k in range(first, end)) if e[1] > e[0]]
        elif token.type == "table_open":
            rows = tuple(e for e in (extent(k) for k in range(first + 2, end)) if e[1] > e[0])
            tables.append((extent(first), rows))
    return _Layout(code_lines=tuple(code), tables=tuple(tables))


class _Coverage:
    """Kept spans merged, to ask how much of a range they cover."""

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            elif end > start:
                merged.append([start, end])
        self._starts = [a for a, _ in merged]
        self._spans = merged

    def covered(self, start: int, end: int) -> int:
        """Characters of ``[start, end)`` inside a kept span."""
        total = 0
        k = max(bisect.bisect_right(self._starts, start) - 1, 0)
        while k < len(self._spans) and self._spans[k][0] < end:
            a, b = self._spans[k]
            total += max(0, min(b, end) - max(a, start))
            k += 1
        return total


def structure_breaks(
    source: str, spans: Sequence[tuple[int, int]], kept_text: str | None = None
) -> StructureBreaks:
    """The breaks of one kept document: ``spans`` are the ``[start, end)`` character ranges of
    ``source`` it kept, ``kept_text`` the text it sent (for the fence parse; default: the spans'
    texts joined by newlines)."""
    if not spans:
        return StructureBreaks()
    if kept_text is None:
        kept_text = "\n".join(source[a:b] for a, b in sorted(spans))
    layout = _layout(source)
    coverage = _Coverage(spans)
    cut = sum(0 < coverage.covered(a, b) < b - a for a, b in layout.code_lines if b > a)
    rows = 0
    for (ha, hb), table_rows in layout.tables:
        if coverage.covered(ha, hb) == hb - ha:
            continue
        rows += sum(coverage.covered(a, b) > 0 for a, b in table_rows)
    return StructureBreaks(fences=open_fences(kept_text), rows=rows, code_lines=cut)


__all__ = ["StructureBreaks", "open_fences", "structure_breaks"]
