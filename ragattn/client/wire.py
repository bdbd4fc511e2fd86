"""The client's wire format: request bodies from a call, library results from the answers.

Results carry the caller's own :class:`~ragattn.types.Document` objects (mapped back by
``index``), never copies rebuilt from the wire.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragattn.client.transport import malformed
from ragattn.contract import BUDGET_KEYWORDS
from ragattn.errors import InvalidInputError
from ragattn.sentences import split_sentences
from ragattn.types import (
    Budget,
    CompressedDocument,
    CompressionResult,
    Document,
    KeptSpan,
    RerankResult,
    RerankResults,
)

PruneBudget = Budget | Mapping[str, float | int]
"""A rerank's ``prune`` budget: a checked :class:`Budget`, or its wire object such as
``{"ratio": 0.3}`` (one of ``ratio``, ``target_tokens``, ``threshold``; the service checks it)."""


# -- requests -----------------------------------------------------------------------------------


def wire_document(doc: Document) -> str | dict[str, Any]:
    """A document as the service takes it: its text, or ``{text, id?, title?}``."""
    # Metadata is never sent: it does not change scores and need not be JSON-serializable.
    if doc.id is None and doc.title is None:
        return doc.text
    out: dict[str, Any] = {"text": doc.text}
    if doc.id is not None:
        out["id"] = doc.id
    if doc.title is not None:
        out["title"] = doc.title
    return out


def rerank_payload(
    query: str, docs: Sequence[Document], top_n: int | None, prune: PruneBudget | None = None
) -> dict[str, Any]:
    """The body of a rerank route (``raw_scores`` always on: results carry both scores)."""
    payload: dict[str, Any] = {
        "query": query,
        "documents": [wire_document(d) for d in docs],
        "raw_scores": True,
    }
    if top_n is not None:
        payload["top_n"] = top_n
    if prune is not None:
        # Sent as given: the service checks it and says what is wrong (one rule, one place).
        payload["prune"] = prune.keywords() if isinstance(prune, Budget) else dict(prune)
    return payload


def given_budget(given: Mapping[str, Any]) -> dict[str, Any]:
    """A keyword call's budget as wire fields, as given: the three keywords as they are (the
    service checks them and says what is wrong, so a client and the service never disagree on
    a rule), a checked ``budget`` as its own keyword."""
    raw = [given.get(k) for k in BUDGET_KEYWORDS]
    budget = given.get("budget")
    if budget is not None:
        return Budget.from_args(*raw, given=budget).keywords()
    return {k: v for k, v in zip(BUDGET_KEYWORDS, raw, strict=True) if v is not None}


def compress_payload(
    query: str,
    docs: Sequence[Document],
    budget: Mapping[str, Any],
    *,
    context: str | None = None,
    keep_order: bool,
    top_n: int | None,
    method: str | None,
) -> dict[str, Any]:
    """The body of ``/v1/compress`` or ``/v1/rerank_compress`` for ``docs``, or for the one
    ``context`` string they were made of (sent as it is)."""
    payload: dict[str, Any] = {"query": query, "keep_order": keep_order}
    if context is not None:
        payload["context"] = context
    else:
        payload["documents"] = [wire_document(d) for d in docs]
    payload.update(budget)
    if top_n is not None:
        payload["top_n"] = top_n
    if method is not None:
        payload["method"] = method
    return payload


def service_options(tokenizer: Any, keep_entities: bool) -> None:
    """Refuse the compress options the service does not take.

    Raises:
        InvalidInputError: a ``tokenizer`` (the service counts in its proxy's) or
            ``keep_entities``.
    """
    if tokenizer is not None:
        raise InvalidInputError(
            "the service counts tokens with its proxy tokenizer (named in result.tokenizer); "
            "pass tokenizer=None to a Client, or compress in process to count in another one"
        )
    if keep_entities:
        raise InvalidInputError("keep_entities is not part of the service API; compress in process")


# -- responses ----------------------------------------------------------------------------------


def _index(value: Any, n_docs: int) -> int:
    if not isinstance(value, int) or not 0 <= value < n_docs:
        raise malformed(f"result index {value!r} is outside 0..{n_docs - 1}")
    return value


def rerank_results(
    body: Any, docs: Sequence[Document], *, raw_is_relevance: bool = False
) -> RerankResults:
    """``raw_is_relevance``: the route sends no ``raw_score`` because it equals the relevance."""
    try:
        items = body["results"]
        warnings = tuple(body.get("meta", {}).get("warnings", ()))
        results = [
            RerankResult(
                index=(i := _index(item["index"], len(docs))),
                relevance_score=float(item["relevance_score"]),
                raw_score=float(item["relevance_score"] if raw_is_relevance else item["raw_score"]),
                document=docs[i],
                pruned_text=None if item.get("pruned_text") is None else str(item["pruned_text"]),
                kept_spans=_kept_spans(item.get("kept_spans") or (), i),
            )
            for item in items
        ]
        method = str(body.get("method") or "")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise malformed(f"rerank body: {type(exc).__name__} {exc}") from exc
    if len({r.index for r in results}) != len(results):
        raise malformed("an index appears twice in results")
    return RerankResults(results, warnings=warnings, method=method, windows=1)


def _kept_spans(items: Any, index: int) -> tuple[KeptSpan, ...]:
    """Wire ``kept_spans`` (``[{start, end, score, text}]``) of ``documents[index]``."""
    return tuple(
        KeptSpan(
            doc_index=index,
            start=int(s["start"]),
            end=int(s["end"]),
            score=float(s["score"]),
            text=str(s["text"]),
        )
        for s in items
    )


def _sentence_spans(
    text: str, n_scores: int, kept: Sequence[KeptSpan]
) -> tuple[tuple[int, int], ...] | None:
    """Sentence spans re-split locally; None unless they provably match the server's split.

    The wire carries one score per sentence but not the sentence ranges. The splitter is
    deterministic, so the local split agrees whenever client and server run the same ragattn;
    a different count or a kept span that is not a local sentence means they do not.
    """
    spans = tuple((s.start, s.end) for s in split_sentences(text))
    if len(spans) != n_scores or any((k.start, k.end) not in set(spans) for k in kept):
        return None
    return spans


def _compressed_document(
    item: Any, docs: Sequence[Document], warnings: list[str]
) -> CompressedDocument:
    index = _index(item["index"], len(docs))
    doc = docs[index]
    kept = _kept_spans(item["kept_spans"], index)
    scores = tuple(float(x) for x in item["sentence_scores"])
    spans = _sentence_spans(doc.text, len(scores), kept)
    if spans is None:
        warnings.append(
            f"documents[{index}]: the server split sentences differently from this client's "
            "ragattn version; sentence_spans is empty"
        )
    return CompressedDocument(
        index=index,
        text=str(item["text"]),
        kept_spans=kept,
        sentence_scores=scores,
        sentence_spans=spans or (),
        document=doc,
    )


def compression_result(
    body: Any, docs: Sequence[Document], indices: Sequence[int]
) -> CompressionResult:
    """The result for ``body``, whose documents must be ``docs[i]`` for ``i`` in ``indices``."""
    warnings: list[str] = []
    try:
        documents = tuple(_compressed_document(item, docs, warnings) for item in body["documents"])
        result = CompressionResult(
            compressed_text=str(body["compressed_text"]),
            documents=documents,
            origin_tokens=int(body["origin_tokens"]),
            compressed_tokens=int(body["compressed_tokens"]),
            ratio=float(body["ratio"]),
            tokenizer=str(body["tokenizer"]),
            method=str(body["method"]),
            warnings=(*body.get("warnings", ()), *warnings),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise malformed(f"compress body: {type(exc).__name__} {exc}") from exc
    if [d.index for d in documents] != list(indices):
        raise malformed(f"compressed documents are not the expected {list(indices)}")
    return result


def rerank_compress_result(
    body: Any, docs: Sequence[Document]
) -> tuple[RerankResults, CompressionResult]:
    """The ranking and the compression of a ``/v1/rerank_compress`` answer."""
    # One scoring pass: a document's raw and relevance score are both its best sentence's keep
    # score, so the route sends only relevance_score; compressed documents come in rank order.
    ranked = rerank_results(body, docs, raw_is_relevance=True)
    if not isinstance(body.get("compression"), dict):
        raise malformed("rerank_compress body has no 'compression' object")
    return ranked, compression_result(body["compression"], docs, [r.index for r in ranked])


__all__ = [
    "PruneBudget",
    "compress_payload",
    "compression_result",
    "given_budget",
    "rerank_compress_result",
    "rerank_payload",
    "rerank_results",
    "service_options",
    "wire_document",
]
