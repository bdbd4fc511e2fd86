"""Persisted retrieval indexes: build once from a corpus, load later, search BM25/dense/hybrid.

An index is a directory::

    manifest.json     what was built: counts, model, dimensions, parameters, content hash
    documents.jsonl   the indexed documents (chunks) in index order: id, title, text, metadata
    bm25/             the bm25s sparse matrix (absent for the rank_bm25 backend, rebuilt on load)
    dense.faiss       the FAISS index with its vectors (absent when built without dense)

A build writes everything into a fresh temporary sibling directory (``.NAME.tmp-*``), manifest
last, then swaps it in with two renames on the same filesystem: the old index (if any) is
renamed aside, the new one into place, the old one deleted. A build that fails or is killed
before the swap leaves the previous index untouched (a killed build leaves its ``.tmp-*``
directory behind, which is safe to delete); a failed swap renames the old index back.

Rebuilding over an existing index re-encodes only texts it has not embedded yet (same embedder),
because MiniLM encoding is nearly all of the build time.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragattn._optional import require
from ragattn._version import __version__
from ragattn.embed import Embedder, shared_embedder
from ragattn.errors import InvalidInputError
from ragattn.markdown_units import looks_like_markdown
from ragattn.retrieve.bm25 import DEFAULT_BACKEND, Backend, BM25Retriever
from ragattn.retrieve.corpus import (
    MARKDOWN_SUFFIXES,
    Corpus,
    Hit,
    chunk_documents,
    content_hash,
    indexable_text,
    read_corpus,
    with_ids,
)
from ragattn.retrieve.dense import DEFAULT_EXACT_MAX, DenseRetriever
from ragattn.retrieve.hybrid import HybridRetriever
from ragattn.retrieve.sections import chunk_markdown_documents
from ragattn.types import Document, DocumentLike

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DOCUMENTS = "documents.jsonl"
BM25_DIR = "bm25"
DENSE_FILE = "dense.faiss"
FOLDER_CHUNK_WORDS = 200
Mode = Literal["hybrid", "bm25", "dense"]
MODES: tuple[Mode, ...] = ("hybrid", "bm25", "dense")


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """The description of a built index, stored as ``manifest.json``.

    ``content_hash`` is :func:`~ragattn.retrieve.corpus.content_hash` of the indexed documents
    (sha256 hex); ``build_seconds`` holds wall-clock seconds per build stage (``read``, ``bm25``,
    ``dense``) and the process CPU seconds of each (``<stage>_cpu``, summed over threads).
    ``reused_vectors`` counts embeddings taken from the index being replaced instead of re-encoded.
    """

    format_version: int
    ragattn_version: str
    created_at: str
    source: str
    source_format: str
    source_documents: int
    documents: int
    skipped: tuple[str, ...]
    chunking: dict[str, int | str] | None
    content_hash: str
    bm25: dict[str, Any]
    dense: dict[str, Any] | None
    hybrid: dict[str, Any]
    build_seconds: dict[str, float] = field(default_factory=dict)
    reused_vectors: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["skipped"] = list(self.skipped)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        return cls(**{**data, "skipped": tuple(data.get("skipped", ()))})


class Index:
    """A loaded index: documents, a BM25 retriever, an optional dense one, and their fusion."""

    def __init__(
        self,
        *,
        manifest: Manifest,
        documents: Sequence[Document],
        bm25: BM25Retriever,
        dense: DenseRetriever | None,
        path: Path | None = None,
    ) -> None:
        self.manifest = manifest
        self.documents = tuple(documents)
        self.bm25 = bm25
        self.dense = dense
        self.path = path
        parts: dict[str, Any] = {"bm25": bm25} if dense is None else {"bm25": bm25, "dense": dense}
        weights = {name: manifest.hybrid["weights"][name] for name in parts}
        self.hybrid = HybridRetriever(
            parts, weights=weights, k_rrf=manifest.hybrid["k_rrf"], depth=manifest.hybrid["depth"]
        )

    def search(self, query: str, k: int = 10, *, mode: Mode = "hybrid") -> list[Hit]:
        """The ``k`` best hits for ``query`` from the hybrid (default), BM25 or dense retriever.

        Raises:
            InvalidInputError: unknown mode, ``dense`` on an index built without vectors, ``k < 1``.
        """
        if mode == "hybrid":
            return self.hybrid.search(query, k)
        if mode == "bm25":
            return self.bm25.search(query, k)
        if mode == "dense":
            if self.dense is None:
                raise InvalidInputError("this index was built without dense vectors; use bm25")
            return self.dense.search(query, k)
        raise InvalidInputError(f"unknown search mode {mode!r}; choose one of {MODES}")

    @classmethod
    def build(
        cls,
        corpus: str | Path | Sequence[DocumentLike],
        out_dir: str | Path,
        *,
        chunk_words: int | Literal["auto"] | None = "auto",
        chunk_overlap: int = 40,
        bm25_backend: Backend = DEFAULT_BACKEND,
        dense: bool = True,
        embedder: Embedder | None = None,
        exact_max: int = DEFAULT_EXACT_MAX,
        weights: Mapping[str, float] | None = None,
        k_rrf: float = 60.0,
        depth: int = 100,
        show_progress: bool = False,
        follow_symlinks: bool = False,
    ) -> Index:
        """Build an index from a corpus path or documents and write it atomically to ``out_dir``.

        Args:
            corpus: a BEIR/JSONL file or folder of .txt/.md (see ``corpus.read_corpus``), or a
                sequence of strings / Documents / mappings (id-less documents get their position).
            out_dir: the index directory; an existing index there is replaced only on success.
            chunk_words: window size in words; ``"auto"`` chunks folder corpora at 200 words and
                keeps JSONL records whole; ``None`` never chunks.
            chunk_overlap: words shared by consecutive chunks.
            bm25_backend: ``"bm25s"`` or ``"rank_bm25"``.
            dense: also embed documents and build the FAISS index.
            embedder: the embedder (default: the packaged MiniLM).
            exact_max: corpora up to this many documents get an exact FAISS index, larger HNSW.
            weights: RRF weights for ``bm25`` / ``dense`` (default 1.0 each).
            k_rrf: the RRF constant.
            depth: hits taken from each retriever before fusion.
            show_progress: show progress bars.
            follow_symlinks: in a folder corpus, also read symbolic links that lead outside the
                folder (skipped by default, see ``corpus.read_folder``).

        Raises:
            InvalidInputError: unreadable or empty corpus, no searchable word in it, bad
                parameters, ``out_dir`` is an existing non-empty directory that is not an index,
                or the index cannot be written there.
        """
        clock = _StageClock()
        source = _as_corpus(corpus, follow_symlinks=follow_symlinks)
        words = _chunk_size(chunk_words, source)
        docs = (
            _chunked(source, max_words=words, overlap=chunk_overlap)
            if words is not None
            else list(source.documents)
        )
        clock.lap("read")
        out = Path(out_dir).absolute()
        _check_target(out)
        hybrid_cfg = {
            "weights": dict(weights) if weights else {"bm25": 1.0, "dense": 1.0},
            "k_rrf": k_rrf,
            "depth": depth,
        }
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
        except OSError as exc:
            raise InvalidInputError(
                f"cannot write the index to {out}: {exc.strerror or exc}; choose a writable path"
            ) from exc
        try:
            bm25 = BM25Retriever(docs, backend=bm25_backend, show_progress=show_progress)
            clock.lap("bm25")
            vectors, reused = (
                _dense_reusing(
                    out, docs, embedder, exact_max=exact_max, show_progress=show_progress
                )
                if dense
                else (None, 0)
            )
            clock.lap("dense")
            manifest = Manifest(
                format_version=FORMAT_VERSION,
                ragattn_version=__version__,
                created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                source=source.source,
                source_format=source.format,
                source_documents=len(source.documents),
                documents=len(docs),
                skipped=source.skipped,
                chunking=(
                    None
                    if words is None
                    else {"max_words": words, "overlap": chunk_overlap, "markdown": "sections"}
                ),
                content_hash=content_hash(docs),
                bm25=bm25.config(),
                dense=vectors.config() if vectors is not None else None,
                hybrid=hybrid_cfg,
                build_seconds=clock.seconds,
                reused_vectors=reused,
            )
            index = cls(manifest=manifest, documents=docs, bm25=bm25, dense=vectors, path=out)
            _write(index, tmp)
            _swap(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return index

    @classmethod
    def load(cls, directory: str | Path, *, embedder: Embedder | None = None) -> Index:
        """Load an index written by :meth:`build`, checking its documents against the manifest.

        Raises:
            InvalidInputError: the directory is not an index, is of another format version, or
                its documents do not match the manifest's count or content hash.
        """
        path = Path(directory)
        manifest = _read_manifest(path)
        docs = _read_documents(path / DOCUMENTS)
        if len(docs) != manifest.documents or content_hash(docs) != manifest.content_hash:
            raise InvalidInputError(
                f"index {path} is corrupt: {DOCUMENTS} does not match {MANIFEST}; rebuild it with "
                "'ragattn index build'"
            )
        bm25 = BM25Retriever.load(path / BM25_DIR, docs, manifest.bm25)
        vectors = (
            DenseRetriever.load(path / DENSE_FILE, docs, manifest.dense, embedder=embedder)
            if manifest.dense is not None
            else None
        )
        return cls(manifest=manifest, documents=docs, bm25=bm25, dense=vectors, path=path)


def _dense_reusing(
    out: Path,
    docs: Sequence[Document],
    embedder: Embedder | None,
    *,
    exact_max: int,
    show_progress: bool,
) -> tuple[DenseRetriever, int]:
    """Build the dense retriever, encoding only texts the index at ``out`` has not embedded yet.

    Encoding dominates build time (about 0.14 CPU-seconds per SciFact abstract), so a rebuild
    after editing a few documents re-encodes only those. Vectors are reused only from an index
    built with the same embedder name; an unreadable old index is a cache miss, logged.
    """
    emb = embedder or shared_embedder()
    texts = [indexable_text(d) for d in docs]
    known = _previous_vectors(out, emb)
    reused = sum(1 for t in texts if t in known)
    todo = list(dict.fromkeys(t for t in texts if t not in known))  # each new text once
    fresh = emb.encode(todo, show_progress=show_progress, cache=False)
    known.update(zip(todo, fresh, strict=True))
    vectors = np.stack([known[t] for t in texts]).astype(np.float32)
    return DenseRetriever(docs, embedder=emb, vectors=vectors, exact_max=exact_max), reused


def _previous_vectors(out: Path, embedder: Embedder) -> dict[str, np.ndarray]:
    manifest = out / MANIFEST
    if not manifest.is_file():
        return {}
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        dense = data.get("dense")
        if not dense or dense.get("embedder") != embedder.name or dense.get("dim") != embedder.dim:
            return {}
        faiss = require("faiss", extra="faiss")
        index = faiss.read_index(str(out / DENSE_FILE))
        old = index.reconstruct_n(0, index.ntotal)
        texts = [indexable_text(d) for d in _read_documents(out / DOCUMENTS)]
    except (OSError, ValueError, KeyError, RuntimeError, InvalidInputError) as exc:
        logger.warning("not reusing vectors from %s: %s", out, exc)
        return {}
    if len(texts) != len(old):
        logger.warning("not reusing vectors from %s: document and vector counts differ", out)
        return {}
    return dict(zip(texts, old, strict=True))


class _StageClock:
    """Wall and CPU (all threads of this process) seconds per build stage.

    CPU seconds are reported beside wall time because a shared machine stretches wall time.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    def lap(self, stage: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.seconds[stage] = round(wall - self._wall, 3)
        self.seconds[f"{stage}_cpu"] = round(cpu - self._cpu, 3)
        self._wall, self._cpu = wall, cpu


def _as_corpus(corpus: str | Path | Sequence[DocumentLike], *, follow_symlinks: bool) -> Corpus:
    if isinstance(corpus, str | Path):
        return read_corpus(corpus, follow_symlinks=follow_symlinks)
    docs = with_ids(corpus)
    if not docs:
        raise InvalidInputError("cannot build an index from no documents; pass at least one")
    return Corpus(documents=tuple(docs), source="<documents>", format="documents")


def _chunked(source: Corpus, *, max_words: int, overlap: int) -> list[Document]:
    """The corpus's documents chunked, in corpus order: a Markdown document (a folder's ``.md``
    file, or a record whose text has a fence, a table or an ATX heading) at its headings, titled
    with its heading path and never cut inside a code block, table or list item
    (:func:`~ragattn.retrieve.sections.chunk_markdown_documents`; sections share no words, so
    ``overlap`` is not applied to them); any other document in overlapping word windows
    (:func:`~ragattn.retrieve.corpus.chunk_documents`)."""
    out: list[Document] = []
    for doc in source.documents:
        if _is_markdown(doc, source.format):
            out.extend(chunk_markdown_documents([doc], max_words=max_words))
        else:
            out.extend(chunk_documents([doc], max_words=max_words, overlap=overlap))
    return out


def _is_markdown(doc: Document, source_format: str) -> bool:
    if source_format == "folder":
        return str(doc.metadata.get("path", "")).lower().endswith(MARKDOWN_SUFFIXES)
    return looks_like_markdown(doc.text)


def _chunk_size(chunk_words: int | Literal["auto"] | None, source: Corpus) -> int | None:
    if chunk_words == "auto":
        return FOLDER_CHUNK_WORDS if source.format == "folder" else None
    return chunk_words


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"index output {out} is a file; choose a directory path")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise InvalidInputError(
            f"index output {out} is a non-empty directory without {MANIFEST}; refusing to replace "
            "it; choose a new or empty directory"
        )


def _write(index: Index, directory: Path) -> None:
    with (directory / DOCUMENTS).open("w", encoding="utf-8") as fh:
        for doc in index.documents:
            record = {
                "id": doc.id,
                "title": doc.title,
                "text": doc.text,
                "metadata": dict(doc.metadata),
            }
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    (directory / BM25_DIR).mkdir()
    index.bm25.save(directory / BM25_DIR)
    if index.dense is not None:
        index.dense.save(directory / DENSE_FILE)
    with (directory / MANIFEST).open("w", encoding="utf-8") as fh:
        json.dump(index.manifest.to_dict(), fh, indent=2, ensure_ascii=False)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())


def _swap(new: Path, out: Path) -> None:
    if not out.exists():
        os.rename(new, out)
        return
    old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
    os.rename(out, old)
    try:
        os.rename(new, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _read_manifest(path: Path) -> Manifest:
    file = path / MANIFEST
    if not file.is_file():
        raise InvalidInputError(
            f"{path} is not a ragattn index (no {MANIFEST}); build one with "
            "'ragattn index build --corpus PATH --out DIR'"
        )
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"cannot read {file}: {exc}; rebuild the index") from exc
    if data.get("format_version") != FORMAT_VERSION:
        raise InvalidInputError(
            f"index {path} has format version {data.get('format_version')}, this ragattn reads "
            f"{FORMAT_VERSION}; rebuild it with 'ragattn index build'"
        )
    return Manifest.from_dict(data)


def _read_documents(file: Path) -> list[Document]:
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidInputError(f"cannot read {file}: {exc}; rebuild the index") from exc
    docs = []
    for line in lines:
        r = json.loads(line)
        docs.append(Document(text=r["text"], id=r["id"], title=r["title"], metadata=r["metadata"]))
    return docs


__all__ = ["MODES", "Index", "Manifest"]
