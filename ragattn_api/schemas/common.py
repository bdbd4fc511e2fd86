"""Wire types every route shares: text fields, documents in, kept spans out, finite numbers,
and the health and error bodies."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from ragattn.errors import InvalidInputError, ModelOutputError
from ragattn.settings import COUNT_CEILING, TOKEN_CEILING
from ragattn.types import CompressedDocument, Document

Count = Annotated[int, Meta(ge=1, le=COUNT_CEILING)]
"""A number of documents or results (``top_n``, ``top_k``, ``k``): 1..1000000, the most
``RAGATTN_MAX_DOCUMENTS`` can be (a route may hold it to that setting's value too: a 413)."""
TokenCount = Annotated[int, Meta(ge=1, le=TOKEN_CEILING)]
"""A number of proxy tokens (``target_tokens``): 1..10000000."""
Cap = Annotated[int, Meta(ge=1, le=2**31 - 1)]
"""A client's per-document cap (``max_tokens_per_doc``, Cohere's unused ``max_chunks_per_doc``):
any positive 32-bit integer, since one above the server's own limit only changes nothing."""
Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
"""An integer accepted for client compatibility and not used (``priority``)."""
Index = Annotated[int, Meta(ge=0, le=COUNT_CEILING)]
"""A document's position in the request (``first_stage_order``'s entries): 0..1000000."""
Int64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
"""An integer identifier (a document's ``id``): what a 64-bit client can send."""
NOT_SPACE = (
    r"[^\t\n\r\u000b\u000c\u001c-\u001f \u0085\u00a0\u1680\u2000-\u200a"
    r"\u2028\u2029\u202f\u205f\u3000\ufeff]"
)
"""One character that is whitespace neither to Python (``str.isspace``) nor to JSON Schema's
ECMA-262 ``\\s``: spelled out, because the two disagree (``\\x1f`` is space to Python only,
``\\ufeff`` to ECMA-262 only), and the document must accept exactly what the server does."""
Text = Annotated[str, Meta(min_length=1, pattern=NOT_SPACE)]
"""A query or question: at least one character that is not whitespace."""
SearchMode = Literal["hybrid", "bm25", "dense"]
"""A search mode; omitted: ``hybrid`` when the index has dense vectors, else ``bm25``."""
Fraction = Annotated[float, Meta(gt=0, le=1)]
"""A ratio of tokens kept: in (0, 1]."""
Language = Literal[
    "auto", "am", "ar", "bg", "da", "de", "el", "en", "es", "fa", "fr", "hi", "hy",
    "it", "ja", "kk", "mr", "my", "nl", "pl", "ru", "sk", "ur", "zh",
]  # fmt: skip
"""The documents' language for sentence splitting: ``auto`` (by each text's script) or an ISO
639-1 code of :data:`ragattn.languages.LANGUAGES` (the same codes, in the same order; another
value is a 400)."""


class DocumentIn(Struct, kw_only=True):
    """A document object: ``text`` is required; ``id``, ``title`` and ``metadata`` are kept.

    The proxy reads ``title`` before ``text``, so it counts with the text against
    ``max_tokens_per_doc`` (the server's limit and the caller's cap) and the request budget; a
    cap cuts the text, never the title."""

    text: str
    id: str | Int64 | None = None
    title: str | None = None
    metadata: dict[str, Any] | None = None

    def to_document(self) -> Document:
        return Document(
            text=self.text,
            id=None if self.id is None else str(self.id),
            title=self.title,
            metadata=self.metadata or {},
        )


def to_documents(values: list[str | DocumentIn] | list[str]) -> list[Document]:
    """The library's documents of a request: the one conversion from the wire, per request."""
    return [Document(text=v) if isinstance(v, str) else v.to_document() for v in values]


class KeptSpanOut(Struct):
    """A kept sentence: ``[start, end)`` in Unicode code points of its document's ``text`` as
    sent (``text[start:end]`` in Python is ``text``), and its keep score in [0, 1]."""

    start: int
    end: int
    score: float
    text: str


def kept_spans(document: CompressedDocument) -> list[KeptSpanOut]:
    return [
        KeptSpanOut(start=s.start, end=s.end, score=finite(s.score, "score"), text=s.text)
        for s in document.kept_spans
    ]


def one_top_n(top_n: int | None, top_k: int | None) -> int | None:
    """``top_n`` or its alias ``top_k`` (at most one of them)."""
    if top_n is not None and top_k is not None:
        raise InvalidInputError("send top_n or its alias top_k, not both")
    return top_n if top_n is not None else top_k


def finite(value: float, name: str) -> float:
    """``value`` as a float when it is finite.

    Raises:
        ModelOutputError: NaN or infinite (one bad number fails its request only, loudly).
    """
    if not math.isfinite(value):
        raise ModelOutputError(f"the model produced a non-finite {name}")
    return float(value)


class ProxiesOut(Struct):
    """Which proxy reads a call (``RAGATTN_MULTILINGUAL_PROXY``): ``english`` reads calls in
    English, ``other_languages`` every other call (the compressing routes; ``/v1/rerank`` without
    ``prune`` reads every language with ``english``). Where one proxy reads every language
    (``none``, or ``auto`` with a proxy other than the packaged English one) both name it.
    ``other_languages_loaded``: its weights are loaded; a second proxy loads on the first call not
    in English (that call pays the load), so this is false until then, and always true where it is
    the English proxy."""

    english: str
    other_languages: str
    other_languages_loaded: bool


class HealthResponse(Struct, omit_defaults=True):
    """Alive; once the proxy is loaded also where it runs: ``device`` (``cpu``, ``cuda:0``,
    ``mps``) and the weights' ``dtype`` (``float32``, ``bfloat16``), ``max_request_tokens``,
    the proxy tokens one request may ask for (the same on every replica sharing a Redis), and
    ``proxies``, which proxy reads which language; all absent while loading."""

    status: str
    device: str | None = None
    dtype: str | None = None
    max_request_tokens: int | None = None
    proxies: ProxiesOut | None = None


class ReadyResponse(Struct):
    """Ready to serve; ``degraded`` is true while the cache backend (Redis) is unreachable or
    failing: requests are still answered, just without the cache. ``device`` and ``dtype`` say
    where and in which precision the proxy runs. ``busy`` is true while the model thread has work
    (a new request waits behind ``queue_depth`` jobs, of at most ``queue_size``); a full queue
    makes ``/ready`` a 503. ``proxies``: which proxy reads which language, as on ``/health``."""

    status: str
    model: str
    rerank_method: str
    cache: str
    degraded: bool = False
    device: str = ""
    dtype: str = ""
    busy: bool = False
    queue_depth: int = 0
    queue_size: int = 0
    proxies: ProxiesOut | None = None


class ErrorResponse(Struct):
    """The body of every 4xx/5xx response."""

    error_type: str
    message: str


__all__ = [
    "NOT_SPACE",
    "DocumentIn",
    "ErrorResponse",
    "HealthResponse",
    "KeptSpanOut",
    "Language",
    "ProxiesOut",
    "ReadyResponse",
    "finite",
    "kept_spans",
    "one_top_n",
    "to_documents",
]
