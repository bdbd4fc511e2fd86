"""Markdown chunked at its headings, in units it is written in (issue 60).

:func:`markdown_chunks` reads a Markdown text with markdown-it-py (CommonMark plus GFM tables)
and returns one chunk per section (a heading and what follows it up to the next heading of any
level; the text before the first heading is a section of its own), each titled with its heading
path (``"Document > Section > Subsection"``) and each an exact span of the text as written
(``text[chunk.start:chunk.end] == chunk.text``; CRLF and lone CR line ends stay as they are).

A section longer than the chunk size (in whitespace-separated words) is cut only between its
blocks: a paragraph, a fenced or indented code block, a whole table, one item of a top-level list,
a block quote, an HTML block, a rule. A block longer than the chunk size on its own is the one
thing cut inside, only then, and only at line boundaries (a code block between two of its lines,
a table between two rows, its header row never apart from the delimiter row under it); a single
line longer than the chunk size (a minified line) is cut between words. Such a chunk is marked
:attr:`MarkdownChunk.split`: its fence may be unbalanced, its table rows without the header.

A section that holds nothing but its heading is read with its first subsection (so ``## API``
followed by ``### get`` is one chunk titled ``... > API > get``), never a chunk of one line. A YAML
front matter block opening the file (``---`` ... ``---`` or ``...``) is metadata, in no chunk.
Text between blocks (blank lines, link reference definitions) goes with the block before it, so
the chunks of a section cover all of it.

Every step is linear in the text's length: markdown-it's block parser (inline parsing is off;
only a heading of at most :data:`INLINE_HEADING_CHARS` characters is parsed inline, for its plain
text), one pass over the lines and one over the words of each block.
:func:`chunk_markdown_documents` is :func:`ragattn.retrieve.corpus.chunk_documents`'s counterpart
for Markdown documents, with the same ids and metadata.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

from ragattn.errors import InvalidInputError
from ragattn.types import Document

INLINE_HEADING_CHARS = 512
"""A heading's text is parsed inline (``**Use** `x``` -> ``Use x``) up to this many characters;
a longer one is its source text with runs of whitespace collapsed."""
PATH_SEPARATOR = " > "
_WORD = re.compile(r"\S+")
_LINE_END = re.compile(r"\r\n?|\n")  # markdown-it's own newline rule, so line numbers agree
_SPACES = re.compile(r"\s+")
_FRONT_MATTER_END = ("---", "...")
_LISTS = frozenset({"bullet_list_open", "ordered_list_open"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkdownChunk:
    """One chunk of a Markdown text.

    Attributes:
        text: ``source[start:end]``, exactly.
        start: offset of its first character in the source text (characters, not bytes).
        end: offset one past its last character; trailing whitespace is never included.
        headings: the plain text of the headings above it, outermost first (empty before the
            first heading).
        title: the heading path, ``PATH_SEPARATOR``-joined: the document title (when given)
            and then ``headings``, a first heading equal to the document title read once; None
            when there is neither.
        words: whitespace-separated words in ``text``.
        split: a block longer than the chunk size was cut inside (at a line, or between words
            of one line), so this chunk holds part of it.
    """

    text: str
    start: int
    end: int
    headings: tuple[str, ...]
    title: str | None
    words: int
    split: bool = False


@dataclass(frozen=True, slots=True)
class _Atom:
    """The smallest piece a chunk is cut around: ``[start, end)`` of the source (the region up
    to the next piece, blank lines included), its words, and whether it is part of a block."""

    start: int
    end: int
    words: int
    split: bool
    heading: bool


@lru_cache(maxsize=1)
def block_parser() -> MarkdownIt:
    """CommonMark with GFM tables; block rules only (headings are parsed inline on their own)."""
    return MarkdownIt("commonmark").enable("table").disable("inline")


def front_matter_end(text: str) -> int:
    """Offset where the body begins: after a leading byte-order mark and after a YAML front
    matter block (a first line ``---``, a closing ``---`` or ``...`` line), else 0 or 1.

    A ``---`` first line with no closing line is no front matter (it is a thematic break).
    """
    start = 1 if text.startswith("\ufeff") else 0
    lines = line_starts(text, start)
    first_end = _line_end(text, lines, 0)
    if text[start:first_end].rstrip() != "---":
        return start
    for k in range(1, len(lines)):
        if text[lines[k] : _line_end(text, lines, k)].rstrip() in _FRONT_MATTER_END:
            return lines[k + 1] if k + 1 < len(lines) else len(text)
    return start


def line_starts(text: str, start: int = 0) -> list[int]:
    """Offsets of every line start of ``text[start:]``, by markdown-it's own newline rule (CRLF,
    lone CR, LF), so line ``k`` is the line a token's ``map`` names ``k - first line``."""
    return [start, *(m.end() for m in _LINE_END.finditer(text, start))]


def _line_end(text: str, lines: Sequence[int], k: int) -> int:
    """Offset of the end of line ``k``'s content (before its line break)."""
    if k + 1 >= len(lines):
        return len(text)
    end = lines[k + 1]
    if text[end - 1] == "\n":
        end -= 1
    if end > lines[k] and text[end - 1] == "\r":
        end -= 1
    return end


def _words(text: str, start: int, end: int) -> int:
    return sum(1 for _ in _WORD.finditer(text, start, end))


def heading_text(source: str) -> str:
    """The plain text of a heading's source (``**Use** `x``` -> ``Use x``), whitespace collapsed;
    a source longer than :data:`INLINE_HEADING_CHARS` is not parsed inline."""
    if len(source) <= INLINE_HEADING_CHARS:
        parts: list[str] = []
        for token in MarkdownIt("commonmark").parseInline(source)[0].children or ():
            _plain(token, parts)
        source = "".join(parts)
    return _SPACES.sub(" ", source).strip()


def _plain(token: Token, parts: list[str]) -> None:
    if token.type in ("text", "code_inline", "html_inline"):
        parts.append(token.content)
    elif token.type in ("softbreak", "hardbreak"):
        parts.append(" ")
    for child in token.children or ():
        _plain(child, parts)


@dataclass(slots=True)
class _Section:
    level: int  # 0 before the first heading
    headings: tuple[str, ...]
    atoms: list[list[_Atom]]  # per block: one atom, or the pieces of a block longer than a chunk
    blocks: int = 0  # blocks besides the heading


def markdown_chunks(
    text: str, *, title: str | None = None, max_words: int = 200, overlap: int = 0
) -> list[MarkdownChunk]:
    """The chunks of a Markdown ``text`` (see the module docstring), in text order.

    Args:
        text: the Markdown source, as written (front matter, CRLF and all).
        title: the document's title, the first part of every chunk's heading path.
        max_words: the chunk size in whitespace-separated words. A chunk is longer only by the
            heading lines that open it: a heading is never a chunk alone, so it goes with the
            first block under it even when that block fills a chunk.
        overlap: a chunk after the first of a section starts with the last whole blocks of the
            one before it holding at most this many words (0: chunks do not overlap).

    Raises:
        InvalidInputError: ``max_words < 1`` or ``overlap`` not in ``[0, max_words)``.
    """
    if max_words < 1:
        raise InvalidInputError(f"chunk size must be at least 1 word, got {max_words}")
    if not 0 <= overlap < max_words:
        raise InvalidInputError(
            f"chunk overlap must be in [0, {max_words}) words (below the chunk size), got {overlap}"
        )
    body = front_matter_end(text)
    lines = line_starts(text, body)
    sections = _sections(text, body, lines, max_words)
    out: list[MarkdownChunk] = []
    for section in sections:
        for atoms in _pack(section.atoms, max_words, overlap):
            chunk = _chunk(text, atoms, section.headings, title)
            if chunk is not None:
                out.append(chunk)
    return out


def _sections(text: str, body: int, lines: list[int], max_words: int) -> list[_Section]:
    """The sections of the body, each with its blocks' atoms, regions tiling the body."""
    tokens = block_parser().parse(text[body:])
    blocks: list[tuple[int, int, Token, str]] = []  # (first line, end line, token, heading)
    for i, token in enumerate(tokens):
        if token.map is None:
            continue
        if token.type == "heading_open" and token.level == 0:
            blocks.append((token.map[0], token.map[1], token, tokens[i + 1].content))
        elif _is_block(token):
            blocks.append((token.map[0], token.map[1], token, ""))
    bounds = [lines[first] for first, _, _, _ in blocks] + [len(text)]
    bounds[0] = body  # anything before the first block goes with it
    sections: list[_Section] = []
    section = _Section(level=0, headings=(), atoms=[])
    stack: list[tuple[int, str]] = []
    for k, (first, last, token, source) in enumerate(blocks):
        start, end = bounds[k], bounds[k + 1]
        if token.type != "heading_open":
            section.blocks += 1
            section.atoms.append(
                _block_atoms(text, lines, first, last, token, start, end, max_words)
            )
            continue
        level = int(token.tag[1])
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading_text(source)))
        headings = tuple(name for _, name in stack)
        heading = _Atom(start, end, _words(text, start, end), split=False, heading=True)
        if section.blocks == 0 and section.atoms and level > section.level:
            section.atoms.append([heading])  # an empty section is read with its subsection
            section.level, section.headings = level, headings
            continue
        if section.atoms:
            sections.append(section)
        section = _Section(level=level, headings=headings, atoms=[[heading]])
    if section.atoms:
        sections.append(section)
    return sections


def _is_block(token: Token) -> bool:
    """A unit a section is cut around: a top-level block other than a list, or a top-level
    list's item."""
    if token.level == 0:
        return token.type not in _LISTS
    return token.level == 1 and token.type == "list_item_open"


def _block_atoms(
    text: str,
    lines: Sequence[int],
    first: int,
    last: int,
    token: Token,
    start: int,
    end: int,
    max_words: int,
) -> list[_Atom]:
    """One atom for a block that fits a chunk; else its lines (a table's header and delimiter
    rows together), each line longer than a chunk cut between words."""
    words = _words(text, start, end)
    if words <= max_words:
        return [_Atom(start, end, words, split=False, heading=False)]
    cuts = [start, *(lines[k] for k in range(first + 1, min(last, len(lines))))]
    if token.type == "table_open" and len(cuts) > 1:
        del cuts[1]  # the header row stays with its delimiter row
    cuts = [c for c in cuts if c < end] + [end]
    atoms: list[_Atom] = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        n = _words(text, a, b)
        if n <= max_words:
            atoms.append(_Atom(a, b, n, split=True, heading=False))
            continue
        starts = [m.start() for m in _WORD.finditer(text, a, b)]
        window = [a, *starts[max_words::max_words], b]
        atoms += [
            _Atom(x, y, _words(text, x, y), split=True, heading=False)
            for x, y in zip(window, window[1:], strict=False)
        ]
    return atoms


def _pack(blocks: Sequence[Sequence[_Atom]], max_words: int, overlap: int) -> list[list[_Atom]]:
    """Greedy chunks of whole atoms of at most ``max_words`` words besides their headings (a
    heading is never a chunk alone); a block cut in pieces starts a chunk of its own unless the
    chunk holds headings only; the next chunk starts with the last whole blocks (no heading, no
    piece) of at most ``overlap`` words of the one before."""
    chunks: list[list[_Atom]] = []
    current: list[_Atom] = []
    used = 0  # words in current
    body = False  # current holds an atom besides headings

    def flush(next_words: int) -> None:
        nonlocal current, used, body
        chunks.append(current)
        k, carried = len(current), 0
        while overlap and k > 1 and not current[k - 1].split and not current[k - 1].heading:
            words = carried + current[k - 1].words
            if words > overlap or words + next_words > max_words:
                break
            k, carried = k - 1, words
        current, used, body = current[k:], carried, k < len(current)

    for atoms in blocks:
        if len(atoms) > 1 and body:
            flush(atoms[0].words)
        for atom in atoms:
            if body and used + atom.words > max_words:
                flush(atom.words)
            current.append(atom)
            used += atom.words
            body = body or not atom.heading
    if current:
        chunks.append(current)
    return chunks


def _chunk(
    text: str, atoms: Sequence[_Atom], headings: tuple[str, ...], title: str | None
) -> MarkdownChunk | None:
    """The chunk over ``atoms``: from the first's start to the last's end, trailing whitespace
    and leading blank lines left out; None when that holds no text."""
    start, end = atoms[0].start, atoms[-1].end
    while end > start and text[end - 1].isspace():
        end -= 1
    first = start
    while first < end and text[first].isspace():
        first += 1
    if first == end:
        return None
    line = max(text.rfind("\n", start, first), text.rfind("\r", start, first))
    start = line + 1 if line >= 0 else start
    return MarkdownChunk(
        text=text[start:end],
        start=start,
        end=end,
        headings=headings,
        title=heading_path(title, headings),
        words=sum(a.words for a in atoms),
        split=any(a.split for a in atoms),
    )


def heading_path(title: str | None, headings: Sequence[str]) -> str | None:
    """``title > heading > subheading``; a first heading equal to ``title`` (case and spaces
    aside, as a README's ``# name`` under the title read from it) is read once."""
    parts = list(headings)
    if title and title.strip():
        if parts and _SPACES.sub(" ", parts[0]).strip().casefold() == _key(title):
            parts = parts[1:]
        parts.insert(0, _SPACES.sub(" ", title).strip())
    return PATH_SEPARATOR.join(parts) or None


def _key(title: str) -> str:
    return heading_text(title).casefold() if len(title) <= INLINE_HEADING_CHARS else title


def chunk_markdown_documents(
    documents: Sequence[Document], *, max_words: int = 200, overlap: int = 0
) -> list[Document]:
    """Markdown documents chunked at their headings (:func:`markdown_chunks`).

    A document that is one chunk is kept as is (same id, title and text, front matter and
    all). Otherwise its chunks get ids ``"{id}#{n}"`` (n from 0), the heading path as title
    (:func:`heading_path` of the document's title and the chunk's headings), and metadata
    ``source_id``, ``chunk``, ``start``, ``end`` (character offsets into the source text, as
    :func:`~ragattn.retrieve.corpus.chunk_documents` writes them), ``section`` (the headings,
    ``PATH_SEPARATOR``-joined; empty before the first heading) and ``split`` (a block longer
    than the chunk size was cut inside), besides the source's own metadata.

    Raises:
        InvalidInputError: invalid ``max_words`` / ``overlap``.
    """
    out: list[Document] = []
    for doc in documents:
        chunks = markdown_chunks(doc.text, title=doc.title, max_words=max_words, overlap=overlap)
        if len(chunks) <= 1:
            out.append(doc)
            continue
        for n, chunk in enumerate(chunks):
            meta = {
                **doc.metadata,
                "source_id": doc.id,
                "chunk": n,
                "start": chunk.start,
                "end": chunk.end,
                "section": PATH_SEPARATOR.join(chunk.headings),
                "split": chunk.split,
            }
            out.append(
                Document(text=chunk.text, id=f"{doc.id}#{n}", title=chunk.title, metadata=meta)
            )
    return out


__all__ = [
    "INLINE_HEADING_CHARS",
    "PATH_SEPARATOR",
    "MarkdownChunk",
    "chunk_markdown_documents",
    "front_matter_end",
    "heading_path",
    "block_parser",
    "heading_text",
    "line_starts",
    "markdown_chunks",
]
