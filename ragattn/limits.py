"""Input limits in proxy tokens: one implementation for the service's routes and the pipeline.

Two steps, so that an oversized request costs microseconds, not a tokenizer pass:

1. :meth:`LimitChecker.precheck` looks only at counts, lengths and a lower bound on the tokens of
   each text (:class:`TokenFloor`: which neighbouring bytes or characters the vocabulary joins in
   one token). A text whose bound is over its limit has more tokens than the limit whatever the
   tokenizer says, so it is refused before anything is tokenized. This is exact, never an
   estimate: it refuses nothing that the token count would accept. The bound is tight for every
   script (astral-plane text, CJK, combining marks, emoji: within a few percent of the count), so
   a request the tokenizer would refuse is almost always refused here, in milliseconds.
2. :meth:`LimitChecker.check` tokenizes (with character offsets) and applies the token limits; a
   caller's own ``truncate_to`` cuts longer documents at a token boundary with a warning instead.

The checker tokenizes with its own copy of the tokenizer, so the service can run it on a thread of
its own while the model thread uses the proxy's tokenizer (a fast tokenizer is not safe to share
across threads when one of them changes its padding or truncation state).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragattn.errors import InputTooLargeError, InvalidInputError, TokenizerError
from ragattn.types import Document

_FLOOR_GROUP_CHARS = 1 << 18
"""Characters bounded in one vectorized step of :meth:`LimitChecker.precheck`; the sum is checked
against the budget after each, so an oversized request stops being read soon after it is over."""
_TRUNCATION_MARGIN_CHARS = 1024
"""Characters tokenized past ``truncate_to × max_token_chars`` when a long document is truncated:
the first tokens of a prefix are those of the whole text unless one pre-token (a word) is longer
than this, so truncation never tokenizes more than it keeps."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The most work one request may ask for; counts in the proxy's tokens.

    Attributes:
        max_documents: documents per request.
        max_query_tokens: tokens of the query (or question).
        max_tokens_per_doc: tokens of one document; longer is refused unless the caller asks to
            truncate (then it is cut, with a warning).
        max_request_tokens: tokens of the whole request (query plus every document after
            truncation): the work one request may queue for the model.
    """

    max_documents: int = 1000
    max_query_tokens: int = 2048
    max_tokens_per_doc: int = 4096
    max_request_tokens: int = 16_384

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInputError(f"{f.name} must be a positive integer, got {value!r}")

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        """The limits of a :class:`ragattn.settings.Settings` (``RAGATTN_MAX_*``)."""
        return cls(
            max_documents=settings.max_documents,
            max_query_tokens=settings.max_query_tokens,
            max_tokens_per_doc=settings.max_tokens_per_doc,
            max_request_tokens=settings.max_request_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckedInput:
    """A query and documents within the limits, as they should be scored.

    Attributes:
        documents: the documents, truncated where the caller asked for it (same order, same ids).
        query_tokens: proxy tokens of the query.
        document_tokens: proxy tokens of each document as scored (after truncation).
        warnings: one line per truncated document.
    """

    documents: tuple[Document, ...]
    query_tokens: int
    document_tokens: tuple[int, ...]
    warnings: tuple[str, ...] = ()

    @property
    def input_tokens(self) -> int:
        """Query plus document tokens: what the service bills as ``input_tokens``."""
        return self.query_tokens + sum(self.document_tokens)


class TokenOffsets:
    """Token character offsets of texts, computed with a private copy of a tokenizer.

    Args:
        tokenizer: a Hugging Face tokenizer (fast or slow).
    """

    def __init__(self, tokenizer: Any) -> None:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        self._backend: Any = None
        self._tokenizer = tokenizer
        spec: dict[str, Any] | None = None
        if backend is not None:
            from tokenizers import Tokenizer

            text = backend.to_str()
            self._backend = Tokenizer.from_str(text)
            spec = json.loads(text)
        self.max_token_chars = None if spec is None else _max_token_chars(spec)
        """Most characters of input one token can stand for; ``None`` when unknown."""
        self.floor = None if spec is None else TokenFloor.from_spec(spec)
        """A lower bound on the tokens of a text (``None``: this tokenizer's kind is unsupported,
        and only ``max_token_chars`` bounds it)."""

    def offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Per text, the ``(start, end)`` character span of each token (no special tokens).

        Raises:
            TokenizerError: the tokenizer cannot encode a text (e.g. a lone surrogate).
        """
        if not texts:
            return []
        try:
            if self._backend is not None:
                encodings = self._backend.encode_batch(list(texts), add_special_tokens=False)
                return [list(e.offsets) for e in encodings]
            enc = self._tokenizer(
                list(texts), add_special_tokens=False, return_offsets_mapping=True
            )
            return [list(o) for o in enc["offset_mapping"]]
        except Exception as exc:  # tokenizers raise bare exceptions on malformed text
            raise TokenizerError(
                f"the proxy tokenizer could not encode the input: {type(exc).__name__}"
            ) from exc

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        return len(self.offsets([text])[0]) if text else 0


_HASH_BITS = 22
"""Slots of a hashed n-gram table. N-grams that share a slot keep the longest length of any, which
only lowers the bound: a collision costs tightness, never truth."""
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_CODE_POINTS = 0x110000


def _byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the printable character each byte is written as in a
    byte-level BPE vocabulary (the inverse of its ``bytes_to_unicode``)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = dict(zip(printable, printable, strict=True))
    extra = 0
    for byte in range(256):
        if byte not in chars:
            chars[byte] = 256 + extra
            extra += 1
    return {chr(c): b for b, c in chars.items()}


class TokenFloor:
    """A lower bound on the tokens a tokenizer makes of a text, in microseconds per kilobyte.

    Units are the text's UTF-8 bytes for a byte-level BPE vocabulary (GPT-2, SmolLM2, Llama 3) and
    its code points, as normalized, for a vocabulary with byte fallback (SentencePiece-style:
    Gemma, Llama 2). Two tables hold, for each pair and each triple of neighbouring units, the
    length in units of the longest vocabulary entry (added tokens included) that contains it.

    Unit ``i`` gets a length ``l_i``: the longest entry holding one of the three triples around it,
    or 2 when none does but one of its two pairs is held, else 1. A token holding k >= 3 units of
    the text holds a triple around each of them, so each has ``l_i`` >= the token's length >= k; a
    token of k = 2 units holds their pair, so both have ``l_i`` >= 2. Either way the token adds at
    most ``k / k`` to ``sum(1 / l_i)``, and a token within one unit (or one byte of it: byte
    fallback) at most 1. So the text has at least ``sum(1 / l_i)`` tokens, whatever the merges
    do; pre-tokenizer splits only add tokens. With byte-fallback BPE a character no entry is alone
    becomes one token per UTF-8 byte, and counts that many.

    Measured against SmolLM2's tokenizer the bound is exact for runs of U+10000, combining marks
    and digits, within 3 % for CJK, 6 % for emoji and 20 % for mixed astral-plane text, about 2x
    low for English and random letters,
    and at worst 16x low (alternating spaces and newlines, two bytes a token inside runs the
    vocabulary also holds long). A character-count bound (``chars / 81``, the longest token) was
    81 times too low for astral text: four documents of 331,000 U+10000 held the tokenizer thread
    for 5 s before their 413; this bound refuses them unread.

    Use :meth:`of`; ``None`` when the argument does not hold for the tokenizer (no fast
    tokenizer, a normalizer that changes the text, unknown characters fused into one ``<unk>``,
    added tokens that swallow whitespace).
    """

    def __init__(
        self,
        pairs: np.ndarray[Any, Any],
        triples: np.ndarray[Any, Any],
        *,
        byte_level: bool,
        replace: dict[str, str],
        singles: np.ndarray[Any, Any] | None = None,
    ) -> None:
        self._pairs = pairs
        self._triples = triples
        self._byte_level = byte_level
        self._replace = replace
        self._singles = singles
        self.longest = max(2, int(pairs.max()), int(triples.max()))
        """The most units one token covers: a text of n units has at least n / longest tokens."""
        self._reciprocal = 1.0 / np.maximum(np.arange(self.longest + 1, dtype=np.float64), 1.0)

    @classmethod
    def of(cls, tokenizer: Any) -> TokenFloor | None:
        """The bound for ``tokenizer`` (a Hugging Face tokenizer), or ``None`` if unsupported."""
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            return None
        return cls.from_spec(json.loads(backend.to_str()))

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> TokenFloor | None:
        """The bound for a ``tokenizer.json`` document, or ``None`` if unsupported."""
        model = spec.get("model") or {}
        vocab = model.get("vocab")
        pieces = list(vocab) if isinstance(vocab, dict) else [p[0] for p in vocab or []]
        added = [t for t in spec.get("added_tokens", []) if isinstance(t.get("content"), str)]
        if any(t.get("lstrip") or t.get("rstrip") for t in added):
            return None  # such a token also swallows the whitespace around it
        if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
            return None
        contents = [t["content"] for t in added]
        if model.get("type") == "BPE" and _has_byte_level(spec.get("pre_tokenizer")):
            if spec.get("normalizer") is not None:
                return None
            alphabet = _byte_alphabet()
            if not set("".join(pieces)) <= alphabet.keys():
                return None
            as_bytes = str.maketrans({ch: chr(b) for ch, b in alphabet.items()})
            units = [piece.translate(as_bytes).encode("latin-1") for piece in pieces]
            units += [c.encode("utf-8", "surrogatepass") for c in contents]
            return cls._built(units, byte_level=True, replace={})
        replace = _char_replacements(spec.get("normalizer"))
        known = set(pieces)
        bytes_known = all(f"<0x{b:02X}>" in known for b in range(256))
        if replace is None or model.get("byte_fallback") is not True or not bytes_known:
            return None
        if model.get("type") not in ("BPE", "Unigram"):
            return None
        texts = [*pieces, *contents, *(_apply(c, replace) for c in contents)]
        singles = None
        if model.get("type") == "BPE" and not _merges_bytes(model.get("merges") or []):
            # A character that is no entry alone becomes its UTF-8 bytes (BPE merges characters
            # it has; these byte tokens merge with nothing).
            singles = np.zeros(_CODE_POINTS, dtype=bool)
            singles[[ord(p) for p in known if len(p) == 1]] = True
        return cls._built(texts, byte_level=False, replace=replace, singles=singles)

    @classmethod
    def _built(
        cls,
        entries: Sequence[bytes | str],
        *,
        byte_level: bool,
        replace: dict[str, str],
        singles: np.ndarray[Any, Any] | None = None,
    ) -> TokenFloor | None:
        pairs = _ngram_table(entries, 2, byte_level=byte_level)
        triples = _ngram_table(entries, 3, byte_level=byte_level)
        if pairs is None or triples is None:
            return None
        return cls(pairs, triples, byte_level=byte_level, replace=replace, singles=singles)

    def counts(self, texts: Sequence[str], stop: int) -> list[int]:
        """A lower bound on the tokens of each text, or ``stop`` once it is at least ``stop``.

        A text of at least ``stop × longest`` characters has that many units, so at least
        ``stop`` tokens, and is not read: the work is bounded by ``stop``, not by the text.
        """
        out = [stop if len(t) >= stop * self.longest else (0 if not t else -1) for t in texts]
        todo = [i for i, n in enumerate(out) if n < 0]
        if not todo:
            return out
        units, lengths = self._units([texts[i] for i in todo])
        for i, total in zip(todo, self._sums(units, lengths), strict=True):
            out[i] = min(stop, math.ceil(float(total) * (1.0 - 1e-9) - 1e-9))
        return out

    def _units(self, texts: list[str]) -> tuple[np.ndarray[Any, Any], list[int]]:
        if self._byte_level:
            encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
            return np.frombuffer(b"".join(encoded), dtype=np.uint8), [len(b) for b in encoded]
        joined = _apply("".join(texts), self._replace)
        raw = joined.encode("utf-32-le", "surrogatepass")
        return np.frombuffer(raw, dtype="<u4"), [len(t) for t in texts]

    def _sums(self, units: np.ndarray[Any, Any], lengths: list[int]) -> np.ndarray[Any, Any]:
        """``sum(1 / l_i)`` per text of ``units`` (the texts' units one after another). N-grams
        across two texts are looked up too: they can only raise ``l_i``, which lowers the bound."""
        n = len(units)
        pair = np.zeros(n + 1, dtype=self._pairs.dtype)
        pair[1:n] = self._pairs[_ngram_keys(units, 2, byte_level=self._byte_level)]
        triple = np.zeros(n + 2, dtype=self._triples.dtype)
        if n >= 3:
            triple[2:n] = self._triples[_ngram_keys(units, 3, byte_level=self._byte_level)]
        # l_i: a triple around i (starting at i-2, i-1 or i), else 2 when a pair around i is held.
        ell = np.maximum(np.maximum(triple[:n], triple[1 : n + 1]), triple[2:])
        paired = np.maximum(pair[:n], pair[1:]) > 0
        np.maximum(ell, np.where(paired, 2, 1).astype(ell.dtype), out=ell)
        share = self._reciprocal[np.minimum(ell, self.longest)]
        if self._singles is not None:
            alone = ~self._singles[units]
            if alone.any():
                width = 1 + (units >= 0x80) + (units >= 0x800) + (units >= 0x10000)
                share = np.where(alone, width, share)
        starts = np.cumsum([0, *lengths[:-1]])
        return np.add.reduceat(share, starts)


def _has_byte_level(pre_tokenizer: Any) -> bool:
    if not isinstance(pre_tokenizer, dict):
        return False
    if pre_tokenizer.get("type") == "ByteLevel":
        return True
    return pre_tokenizer.get("type") == "Sequence" and any(
        _has_byte_level(p) for p in pre_tokenizer.get("pretokenizers", [])
    )


def _merges_bytes(merges: Sequence[Any]) -> bool:
    """Whether a merge rule joins a byte-fallback token (``<0x..>``) with anything."""
    for merge in merges:
        parts = merge.split(" ") if isinstance(merge, str) else list(merge)
        if any(p.startswith("<0x") and p.endswith(">") and len(p) == 6 for p in parts):
            return True
    return False


def _char_replacements(normalizer: Any) -> dict[str, str] | None:
    """The one-character replacements a normalizer makes (SentencePiece's space to ``▁``), or
    ``None`` for one that does anything else (the units would not be the text's)."""
    if normalizer is None:
        return {}
    kind = normalizer.get("type")
    if kind == "Sequence":
        out: dict[str, str] = {}
        for inner in normalizer.get("normalizers", []):
            found = _char_replacements(inner)
            if found is None:
                return None
            out.update(found)
        return out
    if kind == "Prepend":
        return {}  # adds a unit before the text: tokens that hold it hold fewer of the text's
    if kind == "Replace":
        old = normalizer.get("pattern", {}).get("String")
        new = normalizer.get("content", "")
        if isinstance(old, str) and len(old) == 1 and isinstance(new, str) and len(new) == 1:
            return {old: new}
    return None


def _apply(text: str, replace: dict[str, str]) -> str:
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


def _ngram_keys(units: np.ndarray[Any, Any], n: int, *, byte_level: bool) -> np.ndarray[Any, Any]:
    """Table slots of the ``n``-grams of ``units`` (n = 2 or 3; ``len(units) - n + 1`` of them):
    the pair of two bytes itself, else a multiplicative hash of the n-gram."""
    if byte_level and n == 2:
        return (units[:-1].astype(np.intp) << 8) | units[1:]
    base = np.uint64(256 if byte_level else _CODE_POINTS)
    key = units[: len(units) - n + 1].astype(np.uint64)
    for k in range(1, n):
        key = key * base + units[k : len(units) - n + 1 + k]
    return ((key * _GOLDEN) >> np.uint64(64 - _HASH_BITS)).astype(np.intp)


def _ngram_table(
    entries: Sequence[bytes | str], n: int, *, byte_level: bool
) -> np.ndarray[Any, Any] | None:
    """The longest entry length holding each ``n``-gram of units (0: no entry), by table slot."""
    entries = [e for e in entries if len(e) >= n]
    longest = max((len(e) for e in entries), default=0)
    dtype = np.uint8 if longest <= np.iinfo(np.uint8).max else np.uint16
    if longest > np.iinfo(np.uint16).max:
        return None
    table = np.zeros(1 << 16 if byte_level and n == 2 else 1 << _HASH_BITS, dtype=dtype)
    if not entries:
        return table
    lengths = np.fromiter((len(e) for e in entries), dtype=np.int64, count=len(entries))
    if byte_level:
        units = np.frombuffer(b"".join(e for e in entries if isinstance(e, bytes)), dtype=np.uint8)
    else:
        joined = "".join(e for e in entries if isinstance(e, str))
        units = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    if len(units) != int(lengths.sum()):
        return None
    # The n-gram starting at each unit lies in one entry unless the entry ends within n - 1 units.
    owner = np.repeat(lengths, lengths)
    offset = np.arange(len(units)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    inside = (offset + n <= owner)[: len(units) - n + 1]
    keys = _ngram_keys(units, n, byte_level=byte_level)[inside]
    np.maximum.at(table, keys, owner[: len(units) - n + 1][inside].astype(dtype))
    return table


def max_token_chars(tokenizer: Any) -> int | None:
    """The most input characters one token of ``tokenizer`` can cover, or ``None`` if unknown.

    For a byte-level or SentencePiece-style vocabulary a token covers at most as many characters
    as its vocabulary entry has symbols (one per byte, or per character); added tokens match their
    literal content. A normalizer other than a plain space replacement could shrink the text before
    it is split (e.g. NFC composing characters), so the bound is only claimed without one.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return None if backend is None else _max_token_chars(json.loads(backend.to_str()))


def _max_token_chars(spec: dict[str, Any]) -> int | None:
    """:func:`max_token_chars` of a ``tokenizer.json`` document."""
    if not _length_preserving(spec.get("normalizer")):
        return None
    vocab = spec.get("model", {}).get("vocab")
    if isinstance(vocab, dict):
        longest = max((len(k) for k in vocab), default=1)
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        longest = max((len(p[0]) for p in vocab), default=1)
    else:
        return None
    added = [len(t.get("content", "")) for t in spec.get("added_tokens", [])]
    return max([longest, *added, 1])


def _length_preserving(normalizer: Any) -> bool:
    if normalizer is None:
        return True
    kind = normalizer.get("type")
    if kind == "Sequence":
        return all(_length_preserving(n) for n in normalizer.get("normalizers", []))
    if kind == "Prepend":
        return True
    if kind == "Replace":
        pattern = normalizer.get("pattern", {}).get("String")
        return isinstance(pattern, str) and len(normalizer.get("content", "")) >= len(pattern)
    return False


def truncation_warning(index: int, tokens: int | str, kept: int) -> str:
    """The warning for a document cut to ``kept`` tokens (the wording the API documents)."""
    return f"documents[{index}] truncated from {tokens} to {kept} tokens (max_tokens_per_doc)"


def cut_at_tokens(offsets: Sequence[tuple[int, int]], max_tokens: int) -> int | None:
    """The character end of the ``max_tokens``-th token, or ``None`` when the text fits."""
    if len(offsets) <= max_tokens:
        return None
    return int(offsets[max_tokens - 1][1])


class LimitChecker:
    """Applies :class:`Limits` to a query and its documents in the proxy's tokens.

    Args:
        tokenizer: the proxy's tokenizer (a private copy is made; see :class:`TokenOffsets`).
        limits: the limits to apply.
    """

    def __init__(self, tokenizer: Any, limits: Limits) -> None:
        self.limits = limits
        self.tokens = TokenOffsets(tokenizer)

    def _chars_bound(self, max_tokens: int) -> int | None:
        per_token = self.tokens.max_token_chars
        return None if per_token is None else max_tokens * per_token

    def check_count(self, n_documents: int) -> None:
        """Refuse no documents, or more than ``max_documents``."""
        if n_documents < 1:
            raise InvalidInputError("documents must hold at least one document")
        limit = self.limits.max_documents
        if n_documents > limit:
            raise InputTooLargeError(
                f"{n_documents} documents sent; this server accepts at most {limit} per request "
                "(RAGATTN_MAX_DOCUMENTS); split the request"
            )

    def precheck(
        self,
        query: str,
        documents: Sequence[Document] | None,
        *,
        truncate_to: int | None = None,
        what: str = "query",
    ) -> None:
        """Refuse by counts, lengths and a lower bound on each text's tokens, without tokenizing.

        The bound (:class:`TokenFloor`) reads at most about ``max_request_tokens`` × the longest
        token's units in all, whatever the body holds: milliseconds, never a tokenizer pass.

        Args:
            query: the query or question.
            documents: the documents; ``None`` when the request has none (retrieve, ask).
            truncate_to: the caller's own per-document token cap: up to ``max_tokens_per_doc``
                it truncates instead of refusing; above it, it changes nothing (a caller's cap
                can lower the server's limit, never lift it).
            what: how the query is named in messages (``query`` or ``question``).

        Raises:
            InvalidInputError: no documents.
            InputTooLargeError: too many documents, a text with more tokens than its limit, or
                more tokens in all than ``max_request_tokens``, by the lower bound.
        """
        q_limit = self.limits.max_query_tokens
        q_floor = self._floors([query], q_limit + 1)[0]
        if q_floor > q_limit:
            raise self._query_too_large(what, f"more than {q_limit}")
        if documents is None:
            return
        self.check_count(len(documents))
        truncate_to = self._truncation(truncate_to)
        per_doc = self.limits.max_tokens_per_doc
        per_token = self.tokens.max_token_chars
        if truncate_to is None and per_token is not None:
            # Length alone first, over every document (free), so the first long one is named.
            for i, doc in enumerate(documents):
                if len(doc.text) > per_doc * per_token:
                    raise self._document_too_large(i, f"more than {per_doc}")
        # Each document has at least its floor's tokens (at most truncate_to once cut): a sum of
        # lower bounds over the budget is over it whatever the exact count says. Documents are
        # bounded in groups, stopping at the first group that takes the sum over the budget.
        budget = self.limits.max_request_tokens
        cap = truncate_to if truncate_to is not None else per_doc
        stop = cap if truncate_to is not None else per_doc + 1
        most = stop * self._longest()  # characters that prove ``stop`` tokens: none read past them
        total = q_floor
        start = 0
        while start < len(documents):
            end, chars = start, 0
            while end < len(documents) and (end == start or chars < _FLOOR_GROUP_CHARS):
                chars += min(len(documents[end].text), most)
                end += 1
            floors = self._floors([d.text for d in documents[start:end]], stop)
            for i, n in enumerate(floors, start):
                if truncate_to is None and n > per_doc:
                    raise self._document_too_large(i, f"more than {per_doc}")
                total += min(cap, n)
            if total > budget:
                raise self._request_too_large(f"at least {total}")
            start = end

    def _longest(self) -> int:
        floor = self.tokens.floor
        return floor.longest if floor is not None else (self.tokens.max_token_chars or 1)

    def _floors(self, texts: Sequence[str], stop: int) -> list[int]:
        """Lower bounds on the tokens of ``texts`` (capped at ``stop``): :class:`TokenFloor` when
        the tokenizer has one, else characters / the longest token's characters, else 0."""
        floor = self.tokens.floor
        if floor is not None:
            return floor.counts(texts, stop)
        per_token = self.tokens.max_token_chars
        if per_token is None:
            return [0] * len(texts)
        return [min(stop, -(-len(t) // per_token)) for t in texts]

    def _truncation(self, truncate_to: int | None) -> int | None:
        """The caller's cap if it truncates: only one up to the server's limit does (a larger one
        would lift the limit; it is treated as no cap, so long documents are refused fast)."""
        if truncate_to is None or truncate_to > self.limits.max_tokens_per_doc:
            return None
        return truncate_to

    def check_query(self, query: str, *, what: str = "query") -> int:
        """Tokens of ``query``; refuse it over ``max_query_tokens``."""
        self.precheck(query, None, what=what)
        n = self.tokens.count(query)
        if n > self.limits.max_query_tokens:
            raise self._query_too_large(what, str(n))
        return n

    def check(
        self, query: str, documents: Sequence[Document], *, truncate_to: int | None = None
    ) -> CheckedInput:
        """Tokenize and apply the token limits; cut documents to ``truncate_to`` with a warning.

        Raises:
            InvalidInputError: no documents.
            InputTooLargeError: a limit is exceeded (the message names it and its variable).
            TokenizerError: the tokenizer cannot encode the input.
        """
        self.precheck(query, documents, truncate_to=truncate_to)
        truncate_to = self._truncation(truncate_to)
        q_tokens = self.check_query(query)
        warnings: list[str] = []
        if truncate_to is None:
            counts = [len(o) for o in self.tokens.offsets([d.text for d in documents])]
            docs = list(documents)
        else:
            docs, counts, warnings = self.truncate(documents, truncate_to)
        for i, n in enumerate(counts):
            if n > self.limits.max_tokens_per_doc:
                raise self._document_too_large(i, str(n))
        total = q_tokens + sum(counts)
        if total > self.limits.max_request_tokens:
            raise self._request_too_large(str(total))
        return CheckedInput(
            documents=tuple(docs),
            query_tokens=q_tokens,
            document_tokens=tuple(counts),
            warnings=tuple(warnings),
        )

    def truncate(
        self, documents: Sequence[Document], max_tokens: int
    ) -> tuple[list[Document], list[int], list[str]]:
        """Cut each document to its first ``max_tokens`` tokens, with a warning per cut one.

        Never refuses: for the caller's own ``max_tokens_per_doc`` and for passages the caller did
        not write (retrieval hits). Only a bounded prefix of a long text is tokenized, so the
        warning of a very long document gives a lower bound ("over N").

        Returns:
            The documents (cut ones shortened, ids kept), their tokens as scored, the warnings.
        """
        texts = [d.text for d in documents]
        bound = self._chars_bound(max_tokens)
        if bound is not None:
            texts = [t[: bound + _TRUNCATION_MARGIN_CHARS] for t in texts]
        out: list[Document] = []
        counts: list[int] = []
        warnings: list[str] = []
        for i, (doc, text, offsets) in enumerate(
            zip(documents, texts, self.tokens.offsets(texts), strict=True)
        ):
            cut = cut_at_tokens(offsets, max_tokens)
            if cut is None:
                out.append(doc)
                counts.append(len(offsets))
                continue
            whole = len(text) == len(doc.text)
            total = str(len(offsets)) if whole else f"over {len(offsets) - 1}"
            out.append(dataclasses.replace(doc, text=doc.text[:cut]))
            counts.append(max_tokens)
            warnings.append(truncation_warning(i, total, max_tokens))
        return out, counts, warnings

    def _query_too_large(self, what: str, tokens: str) -> InputTooLargeError:
        return InputTooLargeError(
            f"{what} has {tokens} tokens; the limit is {self.limits.max_query_tokens} "
            "(RAGATTN_MAX_QUERY_TOKENS)"
        )

    def _document_too_large(self, index: int, tokens: str) -> InputTooLargeError:
        return InputTooLargeError(
            f"documents[{index}] has {tokens} tokens; the limit is "
            f"{self.limits.max_tokens_per_doc} (RAGATTN_MAX_TOKENS_PER_DOC); "
            f"send max_tokens_per_doc (at most {self.limits.max_tokens_per_doc}) to truncate "
            "instead"
        )

    def _request_too_large(self, tokens: str) -> InputTooLargeError:
        return InputTooLargeError(
            f"the request has {tokens} tokens (query plus documents after truncation); the limit "
            f"is {self.limits.max_request_tokens} per request (RAGATTN_MAX_REQUEST_TOKENS); "
            "split it into smaller requests or send max_tokens_per_doc to truncate"
        )


__all__ = [
    "CheckedInput",
    "LimitChecker",
    "Limits",
    "TokenOffsets",
    "cut_at_tokens",
    "max_token_chars",
    "truncation_warning",
]
