"""Corpora for first-stage retrieval: readers, chunking, and the hit type retrievers return.

Three on-disk layouts are read into :class:`~ragattn.types.Document` lists:

* a BEIR ``corpus.jsonl`` (``{"_id", "title", "text", ...}`` per line);
* a JSONL file with ``{"id", "text"}`` (optional ``"title"``, else a string
  ``"metadata": {"title": ...}`` as the framework adapters read it) per line;
* a folder of ``.txt`` / ``.md`` files (recursive, UTF-8), one document per file, its id the
  path relative to the folder (POSIX separators). Hidden files and folders are skipped. A
  Markdown file's title is its front matter's ``title:`` or else its first ATX heading
  (:func:`markdown_title`); a ``.txt`` file has none. A folder may come from anywhere (an
  archive, a clone, a shared drive), so only regular files are read (a FIFO, socket or device
  named like a document is skipped, never opened) and a symbolic link that leads outside the
  folder is skipped unless the caller opts in (:func:`read_folder`); every line is parsed in
  linear time.

A title is read with the text wherever a document goes (BM25 and the embedder index
``title + text``; the one read ranks and chooses sentences with it), and titles carry much of
the one read's edge. The text itself is never rewritten: a Markdown file's heading line and
front matter stay in its text, so every offset (chunk ``start`` / ``end``, kept spans) is an
offset into the file as written.

Long documents are split into overlapping word windows by :func:`chunk_documents`; every chunk's
text is an exact substring of its source (``source.text[start:end]``), recorded in the chunk's
metadata, so nothing is rewritten. ``Hit`` lives here rather than in each retriever because it is
a pointer back into a corpus: all retrievers (BM25, dense, hybrid) return the same type.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from ragattn.errors import InvalidInputError
from ragattn.retrieve._folder import list_folder
from ragattn.types import Document, DocumentLike, as_documents

logger = logging.getLogger(__name__)

CorpusFormat = Literal["beir", "jsonl", "folder", "documents"]
TEXT_SUFFIXES = (".txt", ".md")
_WORD_SPAN = re.compile(r"\S+")
MARKDOWN_SUFFIXES = (".md",)
_FRONT_MATTER_END = ("---", "...")
_FRONT_MATTER_TITLE = re.compile(r"title[ \t]*:[ \t]*(.*)", re.IGNORECASE)
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    """One retrieved document.

    Attributes:
        doc_id: the document's (or chunk's) id in the corpus.
        score: the retriever's score, higher is better; units depend on the retriever (BM25
            score, cosine similarity in [-1, 1], or a weighted reciprocal-rank-fusion sum).
        rank: 1-based position in the result list.
        text: the document text.
        title: the document title, if any.
        index: 0-based position of the document in the corpus the retriever was built on.
    """

    doc_id: str
    score: float
    rank: int
    text: str
    title: str | None = None
    index: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "score": self.score,
            "rank": self.rank,
            "text": self.text,
            "title": self.title,
            "index": self.index,
        }


@runtime_checkable
class Retriever(Protocol):
    """Anything that returns the ``k`` best :class:`Hit` objects for a query, best first."""

    def search(self, query: str, k: int = 10) -> list[Hit]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Corpus:
    """Documents read from one source, and what was skipped while reading (never silently)."""

    documents: tuple[Document, ...]
    source: str
    format: CorpusFormat
    skipped: tuple[str, ...] = field(default_factory=tuple)


def indexable_text(doc: Document) -> str:
    """The text both BM25 and the embedder see: the title (if any), a newline, then the body."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def content_hash(documents: Iterable[Document]) -> str:
    """sha256 over each document's id, title and text in order (hex), independent of metadata."""
    digest = hashlib.sha256()
    for doc in documents:
        record = [doc.id, doc.title or "", doc.text]
        digest.update(json.dumps(record, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def with_ids(values: Sequence[DocumentLike]) -> list[Document]:
    """Coerce to documents and give any id-less document its position as id; ids must be unique.

    Raises:
        InvalidInputError: two documents share an id.
    """
    docs = as_documents(values)
    out = [
        d
        if d.id is not None
        else Document(text=d.text, id=str(i), title=d.title, metadata=d.metadata)
        for i, d in enumerate(docs)
    ]
    _check_unique(out, source="documents")
    return out


def _check_unique(docs: Sequence[Document], *, source: str) -> None:
    seen: set[str] = set()
    for doc in docs:
        if doc.id is None:
            raise InvalidInputError(f"{source}: a document has no id; give every document an id")
        if doc.id in seen:
            raise InvalidInputError(
                f"{source}: document id {doc.id!r} appears more than once; ids must be unique"
            )
        seen.add(doc.id)


def _read_text(path: Path | str, *, shown: Path | None = None, follow: bool = True) -> str:
    """The UTF-8 text of the regular file at ``path`` (universal newlines, as ``read_text``).

    Opened without blocking and checked with ``fstat`` before a byte is read, so a FIFO or device
    swapped in for a file is refused instead of read; ``follow=False`` refuses a symbolic link in
    the last component (the folder reader passes real paths). ``shown`` is the path errors name.

    Raises:
        InvalidInputError: the file cannot be opened or read, is not a regular file, or is not
            UTF-8; the message names ``shown`` (default ``path``) and the fix.
    """
    shown = shown or Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
        with open(fd, encoding="utf-8", closefd=True) as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InvalidInputError(
                    f"cannot read {shown}: not a regular file; only files are read"
                )
            return fh.read()
    except PermissionError as exc:
        raise InvalidInputError(
            f"cannot read {shown}: permission denied; fix its permissions or remove it from the "
            "corpus"
        ) from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"cannot read {shown}: not valid UTF-8 (byte {exc.start}); convert it to UTF-8 or "
            "remove it from the corpus"
        ) from exc
    except OSError as exc:
        raise InvalidInputError(f"cannot read {shown}: {exc.strerror or exc}") from exc


def markdown_title(text: str) -> str | None:
    """The title of a Markdown text: its front matter's ``title:``, else its first ATX heading.

    Front matter is a block that opens the file with a ``---`` line and closes with ``---`` (or
    ``...``); its top-level ``title:`` line is read as a plain or quoted scalar on that line
    (YAML's quoting rules for one line; no YAML parser is needed; a multi-line block scalar is
    not read). Without a non-empty one, the title is the text
    of the first ATX heading of any level (``# Title``, ``## Title ##``) outside fenced code
    blocks, so a shell comment inside a fence is never a title. Setext headings (a line underlined
    with ``===``) are not read. None when there is neither.
    """
    lines = text.removeprefix("\ufeff").splitlines()
    body = 0
    if lines and lines[0].rstrip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in _FRONT_MATTER_END), 0)
        if end:
            title = _front_matter_title(lines[1:end])
            if title:
                return title
            body = end + 1
    return _first_heading(lines[body:])


def _front_matter_title(lines: Sequence[str]) -> str | None:
    for line in lines:
        match = _FRONT_MATTER_TITLE.fullmatch(line.rstrip())
        if match is None:
            continue
        value = match.group(1)
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        elif len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1].replace("''", "'")
        elif value.startswith(("|", ">")):
            return None  # a block scalar spans lines: not read, the heading decides
        else:
            value = value.split(" #", 1)[0]  # a plain scalar's trailing comment
        return value.strip() or None
    return None


def _first_heading(lines: Sequence[str]) -> str | None:
    fence: str | None = None
    for line in lines:
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        heading = _atx_heading(line)
        if heading:
            return heading
    return None


def _atx_heading(line: str) -> str | None:
    """The text of an ATX heading line (CommonMark's rules), or None when the line is none.

    Parsed with ``str`` scans rather than a regular expression: every step is linear in the
    line's length, where a pattern with a lazy group before an optional closing sequence
    backtracks quadratically on a long run of spaces (hours for a 1 MB line).
    """
    line = line.rstrip()
    body = line.lstrip(" ")
    if len(line) - len(body) > 3:
        return None  # four spaces of indent make a code block
    content = body.lstrip("#")
    level = len(body) - len(content)
    if not 1 <= level <= 6 or not content or content[0] not in " \t":
        return None
    content = content.strip(" \t")
    unclosed = content.rstrip("#")
    if not unclosed or unclosed[-1] in " \t":  # a closing sequence: spaces, then only '#'
        content = unclosed
    return content.strip() or None


def _jsonl_document(record: Any, path: Path, line_no: int) -> tuple[Document, bool]:
    where = f"{path}, line {line_no}"
    if not isinstance(record, dict):
        raise InvalidInputError(f"{where}: expected a JSON object with 'id'/'_id' and 'text'")
    is_beir = "_id" in record
    doc_id = record.get("_id", record.get("id"))
    if doc_id is None or isinstance(doc_id, dict | list):
        raise InvalidInputError(f"{where}: missing 'id' (or BEIR '_id'); give every line an id")
    text = record.get("text")
    if not isinstance(text, str):
        raise InvalidInputError(f"{where}: 'text' must be a string")
    title = record.get("title")
    if title is not None and not isinstance(title, str):
        raise InvalidInputError(f"{where}: 'title' must be a string when present")
    meta = record.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    if not (title and title.strip()):
        # A record exported from a framework keeps its title in metadata, as the adapters read it.
        title = meta.get("title") if isinstance(meta.get("title"), str) else None
    return (
        Document(
            text=text,
            id=str(doc_id),
            title=title if title and title.strip() else None,
            metadata=meta,
        ),
        is_beir,
    )


def read_jsonl(path: Path) -> Corpus:
    """Read a BEIR ``corpus.jsonl`` or a JSONL file of ``{"id", "text"[, "title"]}`` records.

    A record's title is its ``title`` (a string; BEIR's ``""`` is no title), else a string
    ``metadata["title"]``; a blank one is no title.

    Raises:
        InvalidInputError: the file is unreadable, a line is not a JSON object with an id and a
            string text, ids repeat, or there are no documents.
    """
    raw = _read_text(path)
    docs: list[Document] = []
    beir = False
    for line_no, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(
                f"{path}, line {line_no}: not valid JSON ({exc.msg}); each line must be one object"
            ) from exc
        doc, is_beir = _jsonl_document(record, path, line_no)
        beir = beir or is_beir
        docs.append(doc)
    _check_unique(docs, source=str(path))
    corpus = Corpus(documents=tuple(docs), source=str(path), format="beir" if beir else "jsonl")
    return _non_empty(corpus)


def read_folder(path: Path, *, follow_symlinks: bool = False) -> Corpus:
    """Read every ``.txt`` / ``.md`` file under ``path`` (sorted by relative path) as one document.

    A document's id and ``metadata["path"]`` are the file's relative path, its text the file's
    text unchanged, and a Markdown file's title its front matter's ``title:`` or first heading
    (:func:`markdown_title`; the heading stays in the text). Only regular files are read: a
    FIFO, socket or device is skipped unopened; a symbolic link is read under its own name when
    it leads to a file inside the folder, and skipped when it leads outside (to a file or a
    folder) unless ``follow_symlinks`` is set (see ``ragattn.retrieve._folder``). Whitespace-only
    files and every skipped entry are listed in ``Corpus.skipped`` with the reason, and logged.

    Raises:
        InvalidInputError: the folder or a file in it is unreadable or not UTF-8, or no file has
            any text.
    """
    docs: list[Document] = []
    skipped: list[str] = []
    for entry in list_folder(path, suffixes=TEXT_SUFFIXES, follow_symlinks=follow_symlinks):
        rel = entry.rel
        if entry.path is None:
            skipped.append(f"{rel}: {entry.reason}")
            continue
        text = _read_text(entry.path, shown=path.joinpath(*entry.parts), follow=False)
        if not text.strip():
            skipped.append(f"{rel}: empty")
            logger.warning("skipping empty corpus file %s", path.joinpath(*entry.parts))
            continue
        title = markdown_title(text) if rel.lower().endswith(MARKDOWN_SUFFIXES) else None
        docs.append(Document(text=text, id=rel, title=title, metadata={"path": rel}))
    corpus = Corpus(
        documents=tuple(docs), source=str(path), format="folder", skipped=tuple(skipped)
    )
    return _non_empty(corpus)


def _non_empty(corpus: Corpus) -> Corpus:
    if not corpus.documents:
        what = (
            f"no non-empty {' or '.join(TEXT_SUFFIXES)} files"
            if corpus.format == "folder"
            else "no documents"
        )
        raise InvalidInputError(
            f"corpus {corpus.source} has {what}; point --corpus at a BEIR corpus.jsonl, a JSONL "
            "file with 'id' and 'text' per line, or a folder of .txt/.md files"
        )
    return corpus


def read_corpus(path: str | Path, *, follow_symlinks: bool = False) -> Corpus:
    """Read a corpus from a BEIR/JSONL file or a folder of text files (see the module docstring).

    ``follow_symlinks`` is :func:`read_folder`'s: also read symbolic links inside a folder that
    lead outside it (a JSONL path given by the caller is always followed).

    Raises:
        InvalidInputError: the path does not exist, is of an unknown kind, is unreadable, or
            holds no documents.
    """
    p = Path(path)
    if p.is_dir():
        return read_folder(p, follow_symlinks=follow_symlinks)
    if p.is_file():
        if p.suffix.lower() in {".jsonl", ".json", ".ndjson"}:
            return read_jsonl(p)
        raise InvalidInputError(
            f"corpus {p} is not a .jsonl file; give a BEIR corpus.jsonl, a JSONL file with "
            "'id' and 'text' per line, or a folder of .txt/.md files"
        )
    if p.exists():
        raise InvalidInputError(
            f"corpus {p} is neither a file nor a folder (a FIFO, socket or device); give a "
            "corpus.jsonl or a folder of .txt/.md files"
        )
    raise InvalidInputError(f"corpus {p} does not exist; check the path")


def chunk_spans(text: str, *, max_words: int, overlap: int) -> list[tuple[int, int]]:
    """Character spans of overlapping windows of ``max_words`` whitespace-separated words.

    Consecutive windows share ``overlap`` words. A text of at most ``max_words`` words is one span.
    Spans start and end on word boundaries, so ``text[start:end]`` has no outer whitespace.

    Raises:
        InvalidInputError: ``max_words < 1`` or ``overlap`` is not in ``[0, max_words)``.
    """
    if max_words < 1:
        raise InvalidInputError(f"chunk size must be at least 1 word, got {max_words}")
    if not 0 <= overlap < max_words:
        raise InvalidInputError(
            f"chunk overlap must be in [0, {max_words}) words (below the chunk size), got {overlap}"
        )
    words = [(m.start(), m.end()) for m in _WORD_SPAN.finditer(text)]
    if not words:
        return []
    spans: list[tuple[int, int]] = []
    step = max_words - overlap
    for first in range(0, len(words), step):
        last = min(first + max_words, len(words)) - 1
        spans.append((words[first][0], words[last][1]))
        if last == len(words) - 1:
            break
    return spans


def chunk_documents(
    documents: Sequence[Document], *, max_words: int = 200, overlap: int = 40
) -> list[Document]:
    """Split documents longer than ``max_words`` words into overlapping chunks.

    A document that fits in one window is kept as is (same id). Otherwise its chunks get ids
    ``"{id}#{n}"`` (n from 0), the source title, and metadata ``source_id``, ``chunk``, ``start``,
    ``end`` (character offsets into the source text) besides the source's own metadata.

    Raises:
        InvalidInputError: invalid ``max_words`` / ``overlap`` (see :func:`chunk_spans`).
    """
    out: list[Document] = []
    for doc in documents:
        spans = chunk_spans(doc.text, max_words=max_words, overlap=overlap)
        if len(spans) <= 1:
            out.append(doc)
            continue
        for n, (start, end) in enumerate(spans):
            meta = {**doc.metadata, "source_id": doc.id, "chunk": n, "start": start, "end": end}
            out.append(
                Document(
                    text=doc.text[start:end], id=f"{doc.id}#{n}", title=doc.title, metadata=meta
                )
            )
    return out


__all__ = [
    "Corpus",
    "Hit",
    "Retriever",
    "chunk_documents",
    "chunk_spans",
    "content_hash",
    "indexable_text",
    "markdown_title",
    "read_corpus",
    "read_folder",
    "read_jsonl",
    "with_ids",
]
