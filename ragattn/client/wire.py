"""The client's wire format: request bodies from a call, library results from the answers.

Results carry the caller's own :class:`~ragattn.types.Document` objects (mapped back by
``index``), never copies rebuilt from the wire. Answers are checked field by field: one that is
not what a ragattn server sends raises :class:`~ragattn.client.InvalidResponseError` naming the
field's JSON path.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, get_args

from ragattn.client.transport import InvalidResponseError, malformed
from ragattn.contract import BUDGET_KEYWORDS
from ragattn.errors import InvalidInputError
from ragattn.languages import AUTO
from ragattn.markdown_units import document_units
from ragattn.types import (
    AddedKind,
    AddedText,
    Budget,
    CompressedDocument,
    CompressionResult,
    Document,
    KeptSpan,
    RerankResult,
    RerankResults,
)

_T = TypeVar("_T")

PruneBudget = Budget | Mapping[str, float | int]
"""A rerank's ``prune`` budget: a checked :class:`Budget`, or its wire object such as
``{"ratio": 0.3}`` (one of ``ratio``, ``target_tokens``, ``threshold``, and ``max_tokens`` with
``ratio``; the service checks it)."""


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
    query: str,
    docs: Sequence[Document],
    top_n: int | None,
    prune: PruneBudget | None = None,
    *,
    language: Any = AUTO,
) -> dict[str, Any]:
    """The body of a rerank route (``raw_scores`` always on: results carry both scores);
    ``language`` only when it is not ``"auto"``: in ``prune``, or without one at the top level,
    where the service refuses it."""
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
    if language != AUTO:
        (payload if prune is None else payload["prune"])["language"] = language
    return payload


def given_budget(given: Mapping[str, Any]) -> dict[str, Any]:
    """A keyword call's budget as wire fields, as given: the three keywords as they are (the
    service checks them and says what is wrong, so a client and the service never disagree on
    a rule), a checked ``budget`` as its own keywords; ``max_tokens`` (a ratio's ceiling) as
    given."""
    raw = [given.get(k) for k in BUDGET_KEYWORDS]
    budget, max_tokens = given.get("budget"), given.get("max_tokens")
    if budget is not None:
        return Budget.from_args(*raw, max_tokens=max_tokens, given=budget).keywords()
    fields = {k: v for k, v in zip(BUDGET_KEYWORDS, raw, strict=True) if v is not None}
    return fields if max_tokens is None else {**fields, "max_tokens": max_tokens}


def compress_payload(
    query: str,
    docs: Sequence[Document],
    budget: Mapping[str, Any],
    *,
    context: str | None = None,
    keep_order: bool,
    top_n: int | None,
    method: str | None,
    language: Any = AUTO,
    first_stage_order: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """The body of ``/v1/compress`` or ``/v1/rerank_compress`` for ``docs``, or for the one
    ``context`` string they were made of (sent as it is); ``language`` only when it is not
    ``"auto"`` (sent as given: the service checks it); ``first_stage_order`` when given, as
    plain integers (the service checks that it is a permutation).

    Raises:
        InvalidInputError: a ``first_stage_order`` entry that is no integer.
    """
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
    if language != AUTO:
        payload["language"] = language
    if first_stage_order is not None:
        try:
            payload["first_stage_order"] = [operator.index(i) for i in first_stage_order]
        except TypeError as exc:
            raise InvalidInputError(
                "first_stage_order must be a list of document indices (integers)"
            ) from exc
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
# Every field is read through the checks below, so an answer that is not what a ragattn server
# sends (a string score, ``"index": true``, a NaN, an index or a span outside the request) raises
# InvalidResponseError naming its JSON path rather than becoming a plausible result.


def _bad(where: str, what: str) -> InvalidResponseError:
    """The error for the field at JSON path ``where`` ("" is the whole body)."""
    return malformed(what, field=where) if where else malformed(f"the body: {what}")


def _json(value: Any) -> str:
    """``value`` as the wire showed it (``true``, ``"0.5"``, ``NaN``), cut short."""
    try:
        shown = json.dumps(value)
    except (TypeError, ValueError):
        shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _at(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _bad(where, f"{_json(value)} is not an object")
    return value


def _field(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise _bad(_at(where, key), "is missing")
    return obj[key]


def _get(obj: Mapping[str, Any], where: str, key: str, check: Callable[[Any, str], _T]) -> _T:
    """The required field ``key`` of ``obj`` (found at ``where``), through ``check``."""
    return check(_field(obj, key, where), _at(where, key))


def _get_optional(
    obj: Mapping[str, Any], where: str, key: str, check: Callable[[Any, str], _T]
) -> _T | None:
    """The field ``key`` of ``obj`` through ``check``; None when absent or ``null``."""
    value = obj.get(key)
    return None if value is None else check(value, _at(where, key))


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _bad(where, f"{_json(value)} is not a list")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _bad(where, f"{_json(value)} is not a string")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    return tuple(_string(v, _at(where, n)) for n, v in enumerate(_list(value, where)))


def _integer(value: Any, where: str) -> int:
    # bool is an int in Python, but ``true`` is not a count or a position.
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(where, f"{_json(value)} is not an integer")
    return value


def _count(value: Any, where: str) -> int:
    count = _integer(value, where)
    if count < 0:
        raise _bad(where, f"{count} is negative")
    return count


def _number(value: Any, where: str) -> float:
    """A finite JSON number as a float (``"0.5"``, ``true``, NaN and Infinity are refused)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _bad(where, f"{_json(value)} is not a number")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise _bad(where, f"{_json(value)} is not a finite number")
    return number


def _numbers(value: Any, where: str) -> tuple[float, ...]:
    return tuple(_number(v, _at(where, n)) for n, v in enumerate(_list(value, where)))


def _index(value: Any, where: str, n_docs: int) -> int:
    index = _integer(value, where)
    if not 0 <= index < n_docs:
        raise _bad(where, f"{index} is outside the {n_docs} documents sent (0..{n_docs - 1})")
    return index


def _kept_spans(value: Any, where: str, index: int, text: str) -> tuple[KeptSpan, ...]:
    """Wire ``kept_spans`` (``[{start, end, score, text}]``) of ``documents[index]``, whose text
    is ``text``: each must lie inside it and slice back to its own ``text``."""
    spans = []
    for n, item in enumerate(_list(value, where)):
        at = _at(where, n)
        span = _object(item, at)
        start = _get(span, at, "start", _integer)
        end = _get(span, at, "end", _integer)
        if not 0 <= start <= end <= len(text):
            raise _bad(at, f"[{start}, {end}) is outside its document's {len(text)} characters")
        kept = _get(span, at, "text", _string)
        if kept != text[start:end]:
            raise _bad(_at(at, "text"), f"{_json(kept)} is not its document's text[{start}:{end}]")
        score = _get(span, at, "score", _number)
        spans.append(KeptSpan(doc_index=index, start=start, end=end, score=score, text=kept))
    return tuple(spans)


def _added_kind(value: Any, where: str) -> AddedKind:
    kind = _string(value, where)
    for valid in get_args(AddedKind):
        if kind == valid:
            return valid  # type: ignore[no-any-return]
    raise _bad(where, f"{_json(kind)} is not one of {', '.join(get_args(AddedKind))}")


def _added(value: Any, where: str, source: str, text: str) -> tuple[AddedText, ...]:
    """Wire ``added`` (``[{kind, text, offset, source_start, source_end}]``) of a compressed
    document whose input text is ``source`` and compressed text ``text``: each must repeat its
    range of ``source`` and stand at its ``offset`` of ``text``."""
    out = []
    for n, item in enumerate(_list(value, where)):
        at = _at(where, n)
        obj = _object(item, at)
        kind = _get(obj, at, "kind", _added_kind)
        piece = _get(obj, at, "text", _string)
        offset = _get(obj, at, "offset", _integer)
        start = _get(obj, at, "source_start", _integer)
        end = _get(obj, at, "source_end", _integer)
        if not 0 <= start <= end <= len(source) or source[start:end] != piece:
            raise _bad(at, f"{_json(piece)} is not its document's text[{start}:{end}]")
        if text[offset : offset + len(piece)] != piece or offset < 0:
            raise _bad(_at(at, "offset"), f"{_json(piece)} is not at {offset} of the text")
        out.append(
            AddedText(kind=kind, text=piece, offset=offset, source_start=start, source_end=end)
        )
    return tuple(out)


def _rerank_result(
    item: Any, where: str, docs: Sequence[Document], raw_is_relevance: bool
) -> RerankResult:
    obj = _object(item, where)
    index = _get(obj, where, "index", lambda v, at: _index(v, at, len(docs)))
    relevance = _get(obj, where, "relevance_score", _number)
    raw = _get_optional(obj, where, "raw_score", _number) if raw_is_relevance else None
    if raw is None:
        raw = relevance if raw_is_relevance else _get(obj, where, "raw_score", _number)
    source = docs[index].text
    spans = _get_optional(obj, where, "kept_spans", lambda v, at: _kept_spans(v, at, index, source))
    pruned = _get_optional(obj, where, "pruned_text", _string)
    added = _get_optional(
        obj, where, "added", lambda v, at: _added(v, at, source, _pruned(pruned, at))
    )
    return RerankResult(
        index=index,
        relevance_score=relevance,
        raw_score=raw,
        document=docs[index],
        pruned_text=pruned,
        kept_spans=spans or (),
        added=added or (),
    )


def _pruned(text: str | None, where: str) -> str:
    """The pruned text a result's ``added`` stands in; a result without one has nothing added."""
    if text is None:
        raise _bad(where, "added without pruned_text")
    return text


def rerank_results(
    body: Any, docs: Sequence[Document], *, raw_is_relevance: bool = False
) -> RerankResults:
    """The results of a rerank answer ``body`` to a request of ``docs``.

    ``raw_is_relevance``: ``raw_score`` may be absent, and is then the relevance (an older
    service sent none on ``/v1/rerank_compress``, where it equals the relevance for the
    ``:max-sentence`` ranking but not for ``:document-probe``'s log-odds).

    Raises:
        InvalidResponseError: a field is missing, of the wrong type or not finite, an index is
            outside ``docs`` or repeated, a kept span is outside its document, or an ``added``
            text is not its document's nor at its offset of ``pruned_text``.
    """
    obj = _object(body, "")
    items = _get(obj, "", "results", _list)
    results = [
        _rerank_result(item, f"results[{n}]", docs, raw_is_relevance)
        for n, item in enumerate(items)
    ]
    seen: set[int] = set()
    for n, r in enumerate(results):
        if r.index in seen:
            raise _bad(f"results[{n}].index", f"{r.index} appears twice in results")
        seen.add(r.index)
    meta = _get_optional(obj, "", "meta", _object) or {}
    return RerankResults(
        results,
        warnings=_get_optional(meta, "meta", "warnings", _strings) or (),
        method=_get_optional(obj, "", "method", _string) or "",
        windows=1,
    )


def _sentence_spans(
    text: str, n_scores: int, kept: Sequence[KeptSpan], language: str = AUTO
) -> tuple[tuple[int, int], ...] | None:
    """Sentence spans re-split locally by the call's ``language`` (a Markdown document's units
    along its structure, :func:`~ragattn.markdown_units.document_units`); None unless they
    provably match the server's split.

    The wire carries one score per sentence but not the sentence ranges. The splitter is
    deterministic, so the local split agrees whenever client and server run the same ragattn
    with the same language; a different count or a kept span that is not a local sentence means
    they do not.
    """
    spans = document_units(text, language=language)
    if len(spans) != n_scores or any((k.start, k.end) not in set(spans) for k in kept):
        return None
    return spans


def _compressed_document(
    item: Any, where: str, docs: Sequence[Document], warnings: list[str], language: str
) -> CompressedDocument:
    obj = _object(item, where)
    index = _get(obj, where, "index", lambda v, at: _index(v, at, len(docs)))
    doc = docs[index]
    text = _get(obj, where, "text", _string)
    kept = _get(obj, where, "kept_spans", lambda v, at: _kept_spans(v, at, index, doc.text))
    scores = _get(obj, where, "sentence_scores", _numbers)
    added = _get_optional(obj, where, "added", lambda v, at: _added(v, at, doc.text, text))
    spans = _sentence_spans(doc.text, len(scores), kept, language)
    if spans is None:
        warnings.append(
            f"documents[{index}]: the server split sentences differently from this client's "
            "ragattn version; sentence_spans is empty"
        )
    return CompressedDocument(
        index=index,
        text=text,
        kept_spans=kept,
        sentence_scores=scores,
        sentence_spans=spans or (),
        document=doc,
        added=added or (),
    )


def compression_result(
    body: Any,
    docs: Sequence[Document],
    indices: Sequence[int],
    *,
    where: str = "",
    language: str = AUTO,
) -> CompressionResult:
    """The result for ``body``, whose documents must be ``docs[i]`` for ``i`` in ``indices``
    (``where``: the JSON path of ``body`` in the answer, for the error; ``language``: the call's,
    by which the sentence spans are re-split).

    Raises:
        InvalidResponseError: a field is missing, of the wrong type or not finite, the documents
            are not ``indices``, or a kept span is outside its document.
    """
    obj = _object(body, where)
    warnings: list[str] = []
    at = _at(where, "documents")
    documents = tuple(
        _compressed_document(item, _at(at, n), docs, warnings, language)
        for n, item in enumerate(_get(obj, where, "documents", _list))
    )
    if [d.index for d in documents] != list(indices):
        got = [d.index for d in documents]
        raise _bad(at, f"the document indices {got} are not the expected {list(indices)}")
    return CompressionResult(
        compressed_text=_get(obj, where, "compressed_text", _string),
        documents=documents,
        origin_tokens=_get(obj, where, "origin_tokens", _count),
        compressed_tokens=_get(obj, where, "compressed_tokens", _count),
        ratio=_get(obj, where, "ratio", _number),
        tokenizer=_get(obj, where, "tokenizer", _string),
        method=_get(obj, where, "method", _string),
        warnings=(*(_get_optional(obj, where, "warnings", _strings) or ()), *warnings),
    )


def rerank_compress_result(
    body: Any, docs: Sequence[Document], *, language: str = AUTO
) -> tuple[RerankResults, CompressionResult]:
    """The ranking and the compression of a ``/v1/rerank_compress`` answer (``language``: the
    call's, by which the sentence spans are re-split)."""
    # The route sends raw_score (the document probe's log-odds, or for :max-sentence the
    # relevance itself); compressed documents come in rank order.
    ranked = rerank_results(body, docs, raw_is_relevance=True)
    compression = _field(body, "compression", "")
    indices = [r.index for r in ranked]
    return ranked, compression_result(
        compression, docs, indices, where="compression", language=language
    )


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
