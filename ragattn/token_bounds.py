"""Bounds on what a tokenizer makes of a text, read from its ``tokenizer.json`` alone.

:class:`TokenFloor` is a lower bound on the tokens of a text and :func:`longest_token_chars` the
most characters one token covers. Neither runs the tokenizer, so :mod:`ragattn.limits` can refuse
an oversized request in microseconds per kilobyte, before any tokenizer pass; both are exact
bounds, never estimates (a request they refuse has more tokens than its limit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

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

    Use :meth:`from_spec`; ``None`` when the argument does not hold for the tokenizer (no fast
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


def longest_token_chars(spec: dict[str, Any]) -> int | None:
    """The most input characters one token of a ``tokenizer.json`` document can cover, or
    ``None`` if unknown.

    For a byte-level or SentencePiece-style vocabulary a token covers at most as many characters
    as its vocabulary entry has symbols (one per byte, or per character); added tokens match their
    literal content. A normalizer other than a plain space replacement could shrink the text before
    it is split (e.g. NFC composing characters), so the bound is only claimed without one.
    """
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


__all__ = ["TokenFloor", "longest_token_chars"]
