"""The language of a call: which proxy reads it (English, or every other language).

The packaged English proxy (SmolLM2-135M) reads English; outside English the multilingual proxy
(Gemma-3-270M) reads better and spends 2.6-4x fewer tokens on Arabic and Hindi (BENCHMARKS.md,
"Languages"). A call is read in English when its documents are English and its query is too; the
documents decide first, because the read is over them.

A text's language comes from its script where the script names it (Chinese, Japanese, Arabic,
Devanagari, Greek, Cyrillic, ... : :func:`ragattn.sentences.resolve_language`); Latin-script
text (and Thai, Hebrew, Korean and other scripts the splitter has no rules for) goes to
py3langid's Naive Bayes identifier (a maintained fork of langid.py) over the written standard
languages of :data:`IDENTIFIED`, whose normalised probability must reach :data:`MIN_CONFIDENCE`
for a language other than English to be named: code, tables and short
strings it cannot place stay English, so an English call never changes proxy by accident.

The rule was declared before measuring (docs/research/languages.md): English calls keep today's
proxy and read (nothing may move them), every other call goes to the multilingual proxy. The
language named also picks the sentence rules of a Latin-script language the splitter knows
(:data:`SPLIT_BY_IDENTIFIER`), where the script alone would give English ones.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from ragattn.languages import AUTO
from ragattn.sentences import resolve_language
from ragattn.types import Document

ENGLISH = "en"
MIN_CONFIDENCE = 0.9
"""py3langid's normalised probability (in [0, 1]) a language other than English needs before a
Latin-script text is read as that language."""
IDENTIFIED: tuple[str, ...] = (
    "af", "am", "ar", "as", "az", "be", "bg", "bn", "bs", "ca", "cs", "cy", "da", "de", "el",
    "en", "es", "et", "eu", "fa", "fi", "fr", "ga", "gl", "gu", "ha", "he", "hi", "hr", "hu",
    "hy", "id", "ig", "is", "it", "ja", "ka", "kk", "km", "kn", "ko", "ku", "ky", "lo", "lt",
    "lv", "mk", "ml", "mn", "mr", "ms", "mt", "my", "ne", "nl", "nn", "no", "or", "pa", "pl",
    "ps", "pt", "ro", "ru", "rw", "si", "sk", "sl", "so", "sq", "sr", "sv", "sw", "ta", "te",
    "tg", "th", "tl", "tr", "tt", "ug", "uk", "ur", "uz", "vi", "xh", "yo", "zh", "zu",
)  # fmt: skip
"""The languages the identifier chooses among: py3langid's model knows 142, among them
regional neighbours of the large ones (Extremaduran and Aragonese beside Spanish, Nigerian Pidgin
beside English) that split a text's probability and would keep a plain Spanish paragraph under
:data:`MIN_CONFIDENCE`; these are the written standard languages of its list."""
SPLIT_BY_IDENTIFIER = frozenset(("da", "de", "es", "fr", "it", "nl", "pl", "sk"))
"""The Latin-script languages the sentence splitter has rules of their own for (pysbd's): a
call the identifier names one of is split by that language's rules (abbreviations, ordinal
dates), which the script alone cannot choose; the script's other languages keep English rules."""
SAMPLE_CHARS = 2000
"""Characters of the documents the detector reads: the first of each document in turn, so a long
first document does not decide alone."""
_PER_DOCUMENT = 400
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Detected:
    """A text's language and how it was read.

    Attributes:
        language: an ISO 639-1 code (``"en"`` where nothing else is named with confidence).
        confidence: in [0, 1]: the identifier's probability that the text is, or is not,
            English, whichever ``language`` says (1.0 where the script named it or there were
            no letters).
        by: ``"script"``, ``"identifier"`` or ``"default"`` (no letters to read).
    """

    language: str
    confidence: float
    by: str


@cache
def _identifier() -> Any:
    """py3langid's identifier with normalised probabilities (loaded once, about 0.6 s)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(IDENTIFIED))
    return identifier


def detect_language(text: str) -> Detected:
    """The language of ``text`` (see the module docstring for the rule)."""
    sample = text[:SAMPLE_CHARS]
    if not any(ch.isalpha() for ch in sample):
        return Detected(ENGLISH, 1.0, "default")
    if _mostly_latin(sample):  # a name quoted in its own script does not decide
        sample = "".join(ch if ch < "\u0250" else " " for ch in sample)
    else:
        script = resolve_language("auto", sample)
        if script != ENGLISH:
            return Detected(script, 1.0, "script")
    language, probability = _identified(sample)
    if language != ENGLISH and probability >= MIN_CONFIDENCE:
        return Detected(language, probability, "identifier")
    return Detected(ENGLISH, probability if language == ENGLISH else 0.0, "identifier")


def _identified(text: str) -> tuple[str, float]:
    """py3langid's most likely language of ``text`` among :data:`IDENTIFIED` and its
    probability (in [0, 1])."""
    identifier = _identifier()
    with _lock:  # the identifier keeps no state per call, but its numpy buffers are shared
        language, probability = identifier.classify(text)
    return str(language), float(probability)


def documents_sample(documents: Sequence[Document]) -> str:
    """Up to :data:`SAMPLE_CHARS` characters of the documents' texts, the first of each in turn
    (titles left out: a shared English page id says nothing of the text's language)."""
    parts: list[str] = []
    room = SAMPLE_CHARS
    for document in documents:
        if room <= 0:
            break
        piece = document.text[: min(_PER_DOCUMENT, room)]
        parts.append(piece)
        room -= len(piece) + 1
    return "\n".join(parts)


def _mostly_latin(text: str) -> bool:
    """At least half of the letters of ``text`` are ASCII or Latin-1/Latin Extended letters."""
    letters = [ch for ch in text if ch.isalpha()]
    latin = sum(1 for ch in letters if ch < "\u0250")
    return latin * 2 >= len(letters)


def call_language(query: str, documents: Sequence[Document]) -> str:
    """The language a call is read in: the documents' where it is not English, else the
    query's where it is not English (a question in another language over English documents),
    else English. A text mostly in Latin letters is identified by those letters alone, so an
    English question quoting a name in its own script (HotpotQA asks about "कसबा पेठ विधानसभा
    मतदारसंघ" in English) stays English, as do English documents that give a Marathi name in
    parentheses."""
    language = detect_language(documents_sample(documents)).language
    if language != ENGLISH:
        return language
    return detect_language(query).language


def sentence_rules(language: str) -> str:
    """The splitter's ``language`` for a call read in ``language`` (a code :func:`call_language`
    gave): the code itself for a Latin-script language of :data:`SPLIT_BY_IDENTIFIER`, else
    ``"auto"`` (the script's rules, per document)."""
    return language if language in SPLIT_BY_IDENTIFIER else AUTO


def split_language(query: str, documents: Sequence[Document], language: str = AUTO) -> str:
    """The ``language`` a call's sentences are split by, as the compressor splits them:
    ``language`` when it is named, else :func:`sentence_rules` of the call's language (a client
    re-splitting a service's answer must split as the service did)."""
    return language if language != AUTO else sentence_rules(call_language(query, documents))


__all__ = [
    "ENGLISH",
    "MIN_CONFIDENCE",
    "SAMPLE_CHARS",
    "SPLIT_BY_IDENTIFIER",
    "Detected",
    "call_language",
    "detect_language",
    "documents_sample",
    "sentence_rules",
    "split_language",
]
