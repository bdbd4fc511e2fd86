"""Sentence splitting into exact character spans, backed by pysbd.

Paragraph breaks (blank lines) always end a sentence; inside a paragraph pysbd's rule-based
boundary detection keeps abbreviations ("Dr.", "D.C.") and numbers ("3.50") intact. pysbd's own
char spans are unreliable with repeated sentences, so spans are re-aligned here by walking the
original text with a cursor. Very short fragments ("A.", "1.") are merged into a neighbour.
Every span is a ``[start, end)`` range of the input with no leading or trailing whitespace, so
``text[start:end]`` always reproduces the sentence exactly.

A run with no sentence boundary (a wall of emoji, a paragraph of unpunctuated Chinese, a minified
line) would be one unit the read can neither cut nor afford, so no sentence is longer than
:data:`MAX_SENTENCE_BYTES` UTF-8 bytes: a longer one is split at its last space inside the bound
(or, without one in the bound's second half, between two grapheme clusters, so no character, emoji
sequence or combining mark is cut).

The rules follow the text's language (:data:`LANGUAGES`, pysbd's). ``language="auto"`` (the
default) reads it from the script: Chinese, Japanese, Arabic (Persian and Urdu by their own
letters), Devanagari (Hindi), Greek, Armenian, Burmese, Amharic and Cyrillic (Russian) text gets
its own rules, and Latin-script text English rules; name the language (``"de"``, ``"fr"``,
``"es"``, ...) for its abbreviations and dates ("3. Mai" is no sentence end in German). The
compressor's calls with ``language="auto"`` do that for you: the call's language, identified once
(:mod:`ragattn.call_language`), names the rules of a Latin-script language pysbd knows.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache

import regex

from ragattn.languages import AUTO as AUTO
from ragattn.languages import LANGUAGES as LANGUAGES

_PARAGRAPH = re.compile(r"\n\s*\n")
_WORD = re.compile(r"\w+", re.UNICODE)

_SCRIPTS: tuple[tuple[str, str], ...] = (
    ("\u3040-\u30ff", "ja"),  # kana first: Japanese text also uses Han characters
    ("\u3400-\u4dbf\u4e00-\u9fff", "zh"),
    ("\u0600-\u06ff\u0750-\u077f\ufb50-\ufdff\ufe70-\ufeff", "ar"),
    ("\u0900-\u097f", "hi"),
    ("\u0370-\u03ff", "el"),
    ("\u0530-\u058f", "hy"),
    ("\u1000-\u109f", "my"),
    ("\u1200-\u137f", "am"),
    ("\u0400-\u04ff", "ru"),
)
_SCRIPT_PATTERNS = tuple((re.compile(f"[{chars}]"), code) for chars, code in _SCRIPTS)
_URDU = re.compile("[\u0679\u0688\u0691\u06ba\u06be\u06c1\u06d2]")
_PERSIAN = re.compile("[\u067e\u0686\u0698\u06af\u06cc]")
_ARABIC_ONLY = re.compile("[\u0629\u0649]")
_SAMPLE = 2000
"""Characters of a text :func:`resolve_language` looks at."""
_GRAPHEME = regex.compile(r"\X")
_STOPS = frozenset(".!?;\"'\u2026\u201d\u2019)")
"""Marks that end a sentence (or a quotation or parenthesis that does) before a space."""
_WIDE_STOPS = frozenset("\u3002\uff01\uff1f\uff1b\u0964\u06d4")
"""Sentence ends of scripts that need no space after them (。！？；, Devanagari's danda, Urdu's
full stop)."""
MAX_SENTENCE_BYTES = 1024
"""The longest sentence :func:`split_sentences` returns, in UTF-8 bytes. A byte-level tokenizer
(SmolLM2's, Gemma's with byte fallback) spends at most one token a byte, so a sentence costs at
most 1,024 proxy tokens: half of what the read's attention reads at once (2,048 tokens), however
the text is written. Prose sentences are far shorter (200 English words is about 1,100 bytes), so
the bound only cuts runs that have no sentence boundary."""


def resolve_language(language: str, text: str) -> str:
    """The pysbd language code ``text`` is split by: ``language`` itself, or for ``"auto"`` the
    text's script's (the script most of its first characters are written in; English for Latin
    script or none).

    Raises:
        ValueError: a language that is neither ``"auto"`` nor in :data:`LANGUAGES`.
    """
    if language != AUTO:
        if language not in LANGUAGES:
            raise ValueError(f"unknown language {language!r}; valid: auto, {', '.join(LANGUAGES)}")
        return language
    sample = text[:_SAMPLE]
    letters = sum(1 for ch in sample if ch.isalpha())
    if not letters:
        return "en"
    best, count = "en", 0
    for pattern, code in _SCRIPT_PATTERNS:
        n = len(pattern.findall(sample))
        if code == "zh" and best == "ja":
            continue  # Han characters in Japanese text
        if n > count:
            best, count = code, n
    if count * 4 < letters:  # a few foreign characters in Latin text
        return "en"
    if best == "ar" and not _ARABIC_ONLY.search(sample):
        if _URDU.search(sample):
            return "ur"
        if _PERSIAN.search(sample):
            return "fa"
    return best


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence as a character range ``[start, end)`` of the text it was split from."""

    start: int
    end: int


_local = threading.local()


def _segmenter(language: str):  # type: ignore[no-untyped-def]
    import pysbd

    cache = getattr(_local, "segmenters", None)
    if cache is None:
        cache = _local.segmenters = {}
    if language not in cache:
        cache[language] = pysbd.Segmenter(language=language, clean=False)
    return cache[language]


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _paragraphs(text: str) -> list[tuple[int, int]]:
    spans, cursor = [], 0
    for match in _PARAGRAPH.finditer(text):
        spans.append((cursor, match.start()))
        cursor = match.end()
    spans.append((cursor, len(text)))
    return [s for s in (_strip(text, a, b) for a, b in spans) if s[1] > s[0]]


def _split_paragraph(text: str, start: int, end: int, language: str) -> list[tuple[int, int]]:
    chunk = text[start:end]
    try:
        pieces = _segmenter(language).segment(chunk)
    except Exception:  # pysbd raises on some rare inputs; a paragraph is then one sentence
        return [(start, end)]
    out, cursor = [], 0
    for piece in pieces:
        needle = piece.strip()
        if not needle:
            continue
        found = chunk.find(needle, cursor)
        if found < 0:  # pysbd changed the text: keep the remainder as one sentence
            out.append((start + cursor, end))
            return [_strip(text, a, b) for a, b in out if b > a]
        if found > cursor and out:  # text pysbd skipped joins the previous sentence
            out[-1] = (out[-1][0], start + found)
        out.append((start + found, start + found + len(needle)))
        cursor = found + len(needle)
    if not out:
        return [(start, end)]
    if cursor < len(chunk):
        out[-1] = (out[-1][0], end)
    first = out[0]
    out[0] = (start, first[1])
    return [s for s in (_strip(text, a, b) for a, b in out) if s[1] > s[0]]


def _bounded(text: str, start: int, end: int, max_bytes: int) -> list[tuple[int, int]]:
    """``[start, end)`` as sentences of at most ``max_bytes`` UTF-8 bytes: :func:`cut_spans` at
    sentence ends, stripped of outer whitespace; together they cover every non-blank character."""
    if (end - start) * 4 <= max_bytes or utf8_len(text[start:end]) <= max_bytes:
        return [(start, end)]
    pieces = cut_spans(text, start, end, max_bytes)
    return [s for s in (_strip(text, a, b) for a, b in pieces) if s[1] > s[0]]


def cut_spans(
    text: str, start: int, end: int, max_bytes: int, *, at_stops: bool = True
) -> list[tuple[int, int]]:
    """``[start, end)`` as consecutive pieces of at most ``max_bytes`` UTF-8 bytes (one pass,
    linear), covering it exactly (nothing stripped).

    A piece ends, within the bound's second half, after its last sentence-ending mark (with
    ``at_stops``: a pysbd miss, such as a quoted paragraph), else after its last whitespace, else
    between two grapheme clusters (a cluster longer than the bound is a piece alone), so no
    character, emoji sequence or combining mark is cut. A minified line of code is cut the same
    way, without ``at_stops`` (:mod:`ragattn.markdown_units`)."""
    out: list[tuple[int, int]] = []
    piece, size = start, 0
    stop = space = -1  # ends of the piece's last sentence mark and last whitespace cluster
    previous = ""
    for match in _GRAPHEME.finditer(text, start, end):
        cluster = match.group()
        width = utf8_len(cluster)
        if size + width > max_bytes and size:
            cut = next(
                (
                    c
                    for c in (stop, space)
                    if c > piece and utf8_len(text[piece:c]) * 2 >= max_bytes
                ),
                match.start(),
            )
            out.append((piece, cut))
            piece, stop, space = cut, -1, -1
            size = utf8_len(text[piece : match.start()])
        size += width
        if cluster.isspace():
            space = match.end()
            if at_stops and previous[-1:] in _STOPS:
                stop = match.end()
        elif at_stops and cluster in _WIDE_STOPS:
            stop = match.end()
        previous = cluster
    out.append((piece, end))
    return out


def utf8_len(piece: str) -> int:
    """UTF-8 bytes of ``piece`` (a lone surrogate counts its three)."""
    return len(piece.encode("utf-8", "surrogatepass"))


def _is_fragment(text: str, span: tuple[int, int], min_words: int, min_chars: int) -> bool:
    piece = text[span[0] : span[1]]
    if len(piece.strip()) < min_chars:
        return True
    # Scripts without spaces between words (CJK) count as long enough once past min_chars.
    spaceless = any(ord(ch) >= 0x2E80 for ch in piece)
    return not spaceless and len(_WORD.findall(piece)) < min_words


def split_sentences(
    text: str, *, language: str = AUTO, min_words: int = 2, min_chars: int = 8
) -> tuple[Sentence, ...]:
    """Split ``text`` into sentences with exact character spans.

    Args:
        text: any string; empty or whitespace-only text gives no sentences.
        language: a code of :data:`LANGUAGES`, or ``"auto"`` (default): by the text's script
            (:func:`resolve_language`).
        min_words: a fragment with fewer words is merged into its neighbour.
        min_chars: a fragment with fewer non-blank characters is merged into its neighbour.

    Returns:
        Sentences in text order, each at most :data:`MAX_SENTENCE_BYTES` UTF-8 bytes; they do
        not overlap and cover every non-blank character.

    Raises:
        ValueError: an unknown language.
    """
    return _split_cached(text, resolve_language(language, text), min_words, min_chars)


def clear_split_cache() -> None:
    """Forget every cached split (:func:`split_sentences` keeps the last 4,096 texts' splits, as a
    service sees the same chunks again): benchmarks of the cold path clear it before each call,
    so that no system is timed on the splits of the one timed before it."""
    _split_cached.cache_clear()


@lru_cache(maxsize=4096)
def _split_cached(text: str, language: str, min_words: int, min_chars: int) -> tuple[Sentence, ...]:
    spans: list[tuple[int, int]] = []
    for p_start, p_end in _paragraphs(text):
        para = _split_paragraph(text, p_start, p_end, language)
        merged: list[tuple[int, int]] = []
        for span in para:
            if (
                merged
                and _is_fragment(text, span, min_words, min_chars)
                or merged
                and _is_fragment(text, merged[-1], min_words, min_chars)
            ):
                merged[-1] = (merged[-1][0], span[1])
            else:
                merged.append(span)
        for a, b in merged:
            spans.extend(_bounded(text, a, b, MAX_SENTENCE_BYTES))
    return tuple(Sentence(a, b) for a, b in spans)
