"""One row of a batch job: decode it, run the library on it, serialise the result.

Pure Python, no Ray and no pyarrow: the Ray actor (:mod:`ragattn.batch._ray`) and the in-process
fallback call the same :class:`RowProcessor`, so a row gets the same answer on either path and the
same answer as a direct :meth:`Reranker.rerank` / :meth:`Compressor.compress` call.

A row is ``{"id": str | int, "query": str, "documents": [str | {"text", "id"?, ...}]}``. Rows read
from JSONL arrive undecoded (``RAW`` holds the line's bytes) so that one line of invalid UTF-8 or
JSON fails alone instead of failing the file's read.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ragattn.contract import (
    CompressEngine,
    CompressVerbs,
    RerankEngine,
    Verb,
    VerbArgs,
    verb_keywords,
)
from ragattn.errors import InvalidInputError, ModelOutputError, RagattnError
from ragattn.languages import AUTO
from ragattn.types import as_documents
from ragattn.validation import check_query

logger = logging.getLogger(__name__)

TaskKind = Literal["rerank", "compress", "rerank-compress"]
TASKS: tuple[TaskKind, ...] = ("rerank", "compress", "rerank-compress")
VERB_OF: dict[TaskKind, Verb] = {
    "rerank": "rerank",
    "compress": "compress",
    "rerank-compress": "rerank_compress",
}
"""The contract's verb of each task (:class:`ragattn.contract.VerbArgs`)."""

RAW = "_ragattn_raw"
"""Internal column: one JSONL line as bytes, decoded by the worker."""
SOURCE = "_ragattn_source"
"""Internal column: the file a JSONL row came from (for the errors file)."""
LINE = "_ragattn_line"
"""Internal column: the 1-based line number of a JSONL row in its file."""
INTERNAL = (RAW, SOURCE, LINE)

STATUS_OK, STATUS_FAILED, STATUS_SKIPPED = "ok", "failed", "skipped"
OUTCOME = ("status", "error_type", "error")
"""Columns every processed row gets: ``status`` is ``ok``, ``failed`` or ``skipped`` (its id was
in ``skip_ids``); ``error_type`` / ``error`` are set when it failed."""

RESULT_COLUMNS: dict[TaskKind, tuple[str, ...]] = {
    "rerank": ("results", "warnings"),
    "compress": ("compression",),
    "rerank-compress": ("results", "warnings", "compression"),
}
"""The result columns each task adds (see :func:`rerank_results` and :func:`compression_dict`)."""

# Row-level error types of the batch layer; library errors keep their own ``error_type``.
INVALID_UTF8 = "invalid_utf8"
INVALID_JSON = "invalid_json"
INVALID_ROW = "invalid_row"
DUPLICATE_ID = "duplicate_id"
INTERNAL_ERROR = "internal_error"


class RowError(Exception):
    """A row the batch layer rejects before the library sees it; ``error_type`` names why."""

    def __init__(self, error_type: str, message: str, row_id: str | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.row_id = row_id


def keywords_not_taken(kind: TaskKind) -> set[str]:
    """The task arguments that ``kind`` does not take: the verb arguments of
    ``rerank-compress`` (:func:`~ragattn.contract.verb_keywords`) that its verb lacks, and for
    ``rerank`` the budget's ceiling and the language too (a rerank keeps no tokens and splits no
    sentences). The command line and :func:`ragattn.batch.map_dataset`'s per-task functions
    offer the rest."""
    missing = set(verb_keywords("rerank_compress")) - set(verb_keywords(VERB_OF[kind]))
    return missing | {"max_tokens", "language"} if kind == "rerank" else missing


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchTask:
    """What to run on every row, validated before any worker starts.

    Attributes:
        kind: ``rerank`` (:meth:`Reranker.rerank`), ``compress`` (:meth:`Compressor.compress`) or
            ``rerank-compress`` (:meth:`Compressor.rerank_and_compress`, one scoring pass).
        proxy: the proxy name or path each worker loads once (None: the library's default).
        method: a rerank method for ``rerank``, a compress method otherwise; None: the default.
        top_n: keep the best ``top_n`` documents (``rerank`` / ``rerank-compress``; None: all).
        ratio, target_tokens, threshold: at most one budget for the compress tasks (none:
            :data:`~ragattn.types.DEFAULT_BUDGET`).
        max_tokens: with ``ratio``, the most tokens a row keeps whatever the ratio gives (a
            ratio of many long documents otherwise keeps a context that grows with them).
        language: the documents' language for sentence splitting (the compress tasks): an ISO
            639-1 code of :data:`~ragattn.sentences.LANGUAGES`, or ``"auto"`` (by each text's
            script).
        threads: torch intra-op threads per worker (None: torch's default).
        models_dir: the learned assets every worker reads (``RAGATTN_MODELS_DIR``, passed by
            ``ragattn batch``: a Ray worker is another process; None: the worker's own choice,
            the packaged ones unless :func:`ragattn.assets.use_models_dir` said otherwise).
        args: the verb's arguments, checked once here (:class:`~ragattn.contract.VerbArgs`);
            every row runs with them as they are.
    """

    kind: TaskKind
    proxy: str | None = None
    method: str | None = None
    top_n: int | None = None
    ratio: float | None = None
    target_tokens: int | None = None
    threshold: float | None = None
    max_tokens: int | None = None
    language: str = AUTO
    threads: int | None = None
    models_dir: str | None = None
    args: VerbArgs = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in TASKS:
            raise InvalidInputError(f"unknown batch task {self.kind!r}; valid: {', '.join(TASKS)}")
        given = {
            "top_n": self.top_n,
            "ratio": self.ratio,
            "target_tokens": self.target_tokens,
            "threshold": self.threshold,
            "max_tokens": self.max_tokens,
            "language": self.language,
        }
        object.__setattr__(self, "args", VerbArgs.check(VERB_OF[self.kind], given))
        if self.threads is not None and self.threads < 1:
            raise InvalidInputError(f"threads must be >= 1, got {self.threads}")
        if self.method is not None:
            _check_method(self.kind, self.method)

    @property
    def budget(self) -> dict[str, float | int]:
        """The budget as compressor keywords (empty for ``rerank``); ``args.budget`` is the same
        as one :class:`~ragattn.types.Budget`."""
        return {} if self.args.budget is None else self.args.budget.keywords()


def _check_method(kind: TaskKind, method: str) -> None:
    module = importlib.import_module("ragattn.rerank" if kind == "rerank" else "ragattn.compress")
    names = module.METHODS
    if method not in names:
        what = "rerank" if kind == "rerank" else "compress"
        raise InvalidInputError(
            f"unknown {what} method {method!r}; valid: {', '.join(sorted(names))}"
        )


# -- decoding ----------------------------------------------------------------------------------


def _text(value: Any, field: str, row_id: str | None) -> Any:
    """Bytes (a Parquet binary column) decoded as strict UTF-8; anything else unchanged."""
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RowError(INVALID_UTF8, f"{field} is not valid UTF-8: {exc}", row_id) from exc
    return value


def _salvage_id(raw: bytes) -> str | None:
    """The id of an undecodable line, read leniently, so its error names the row."""
    try:
        record = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return _row_id(record) if isinstance(record, Mapping) else None


def _row_id(record: Mapping[str, Any]) -> str | None:
    value = record.get("id")
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        return None
    return str(value)


def parse_raw(raw: bytes) -> dict[str, Any]:
    """One JSONL line as a dict.

    Raises:
        RowError: ``invalid_utf8``, ``invalid_json`` or ``invalid_row`` (not a JSON object).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"the line is not valid UTF-8: {exc}"
        raise RowError(INVALID_UTF8, message, _salvage_id(raw)) from exc
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RowError(INVALID_JSON, f"the line is not valid JSON: {exc}") from exc
    if not isinstance(record, dict):
        raise RowError(INVALID_ROW, f"a row must be a JSON object, got {type(record).__name__}")
    return record


def source_record(row: Mapping[str, Any], added: Collection[str] = ()) -> dict[str, Any]:
    """The caller's row: the parsed JSONL line, or the dataset's own columns less the internal,
    outcome and ``added`` (result) columns."""
    if row.get(RAW) is not None:
        return parse_raw(row[RAW])
    drop = {*INTERNAL, *OUTCOME, *added}
    return {k: v for k, v in row.items() if k not in drop}


def decode_row(row: Mapping[str, Any]) -> tuple[str, Any, list[Any]]:
    """``(id, query, documents)`` of a row; the query and documents are checked by the library.

    Raises:
        RowError: undecodable line, no usable ``id``, ``documents`` not a list.
        InvalidInputError: no documents (the service's message and ``error_type``).
    """
    record = parse_raw(row[RAW]) if row.get(RAW) is not None else row
    row_id = _row_id(record)
    if row_id is None:
        raise RowError(INVALID_ROW, "every row needs an 'id' (a non-empty string or an integer)")
    query = _text(record.get("query"), "query", row_id)
    documents = record.get("documents")
    if documents is None or (isinstance(documents, list | tuple) and not documents):
        raise InvalidInputError("documents must hold at least one document")
    if not isinstance(documents, list | tuple):
        raise RowError(
            INVALID_ROW, f"documents must be a list, got {type(documents).__name__}", row_id
        )
    docs = [_document(d, i, row_id) for i, d in enumerate(documents)]
    return row_id, query, docs


def _document(value: Any, position: int, row_id: str) -> Any:
    if isinstance(value, Mapping):
        doc = dict(value)
        doc["text"] = _text(doc.get("text"), f"documents[{position}].text", row_id)
        return doc
    return _text(value, f"documents[{position}]", row_id)


# -- serialising -------------------------------------------------------------------------------


def _finite(value: float, name: str) -> float:
    if not math.isfinite(value):
        # As in the service: one bad number fails this row only, never serialises as NaN.
        raise ModelOutputError(f"the model produced a non-finite {name}")
    return float(value)


def rerank_results(result: Any) -> list[dict[str, Any]]:
    """Cohere's ``results``: ``index`` (input position), ``relevance_score`` in [0, 1] and
    ``raw_score`` in the method's units, best first."""
    return [
        {
            "index": r.index,
            "relevance_score": _finite(r.relevance_score, "relevance_score"),
            "raw_score": _finite(r.raw_score, "raw_score"),
        }
        for r in result
    ]


def compression_dict(result: Any) -> dict[str, Any]:
    """The compression as the service returns it: the compressed text, per document its kept
    sentences (``doc_index`` and character offsets ``[start, end)`` into that document's text,
    keep score in [0, 1]) and sentence scores, token counts in ``tokenizer``'s tokens,
    ``ratio`` = compressed / origin tokens, and the warnings."""
    return {
        "compressed_text": result.compressed_text,
        "documents": [
            {
                "index": d.index,
                "text": d.text,
                "kept_spans": [
                    {
                        "doc_index": s.doc_index,
                        "start": s.start,
                        "end": s.end,
                        "score": _finite(s.score, "score"),
                        "text": s.text,
                    }
                    for s in d.kept_spans
                ],
                "sentence_scores": [_finite(x, "sentence_score") for x in d.sentence_scores],
            }
            for d in result.documents
        ],
        "origin_tokens": result.origin_tokens,
        "compressed_tokens": result.compressed_tokens,
        "ratio": _finite(result.ratio, "ratio"),
        "tokenizer": result.tokenizer,
        "method": result.method,
        "warnings": list(result.warnings),
    }


# -- processing --------------------------------------------------------------------------------


def _failed(error_type: str, message: str) -> dict[str, Any]:
    return {"status": STATUS_FAILED, "error_type": error_type, "error": message}


class RowProcessor:
    """Runs one :class:`BatchTask` row by row; built once per worker (it loads the proxy).

    Args:
        task: what to run.
        skip_ids: ids whose rows are passed over (status ``skipped``), e.g. those already in OUT.
    """

    def __init__(self, task: BatchTask, skip_ids: Collection[str] = ()) -> None:
        self.task = task
        self.skip_ids = frozenset(skip_ids)
        if task.models_dir is not None:
            from ragattn.assets import use_models_dir

            use_models_dir(task.models_dir)
        # Only what the caller chose is passed, so every default is the library's own.
        args = () if task.proxy is None else (task.proxy,)
        kwargs: dict[str, Any] = {"threads": task.threads}
        if task.method is not None:
            kwargs["method"] = task.method
        if task.kind == "rerank":
            from ragattn.rerank import Reranker

            self._model: RerankEngine | CompressEngine = Reranker(*args, **kwargs)
        else:
            from ragattn.compress import Compressor

            self._model = Compressor(*args, **kwargs)

    def process(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The outcome and result columns for ``row``; never raises for a bad row."""
        try:
            row_id, query, documents = decode_row(row)
            if row_id in self.skip_ids:
                return {"status": STATUS_SKIPPED, "error_type": None, "error": None}
            result = self._run(query, documents)
            return {"status": STATUS_OK, "error_type": None, "error": None, **result}
        except RowError as exc:
            return _failed(exc.error_type, str(exc))
        except RagattnError as exc:
            return _failed(exc.error_type, str(exc))
        except Exception as exc:  # a library bug must not stop a million-row job: count it
            logger.exception("row failed with an unexpected error")
            return _failed(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")

    def _run(self, query: Any, documents: list[Any]) -> dict[str, Any]:
        args, model = self.task.args, self._model
        # The row's one check and conversion; the task's arguments were checked once, up front.
        query, docs = check_query(query), as_documents(documents)
        if not isinstance(model, CompressVerbs):  # the rerank task's Reranker
            ranked = model.rerank_checked(query, docs, args)
            return {"results": rerank_results(ranked), "warnings": list(ranked.warnings)}
        if args.verb == "compress":
            out = model.compress_checked(query, docs, args)
            return {"compression": compression_dict(out)}
        ranked, out = model.rerank_and_compress_checked(query, docs, args)
        return {
            "results": rerank_results(ranked),
            "warnings": list(ranked.warnings),
            "compression": compression_dict(out),
        }


def row_id_of(row: Mapping[str, Any]) -> str | None:
    """The row's id when it can be read at all (for the errors file), else None."""
    try:
        record = parse_raw(row[RAW]) if row.get(RAW) is not None else row
    except RowError as exc:
        return exc.row_id
    return _row_id(record)


__all__ = [
    "TASKS",
    "BatchTask",
    "RowError",
    "RowProcessor",
    "TaskKind",
    "compression_dict",
    "decode_row",
    "rerank_results",
]
