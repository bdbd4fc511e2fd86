"""The name a passage gives itself when it comes without a title.

Most callers send plain strings (Cohere-style documents, framework documents whose title sits in
metadata), while the read was built on titled passages: titles link the paragraphs of a multi-hop
question (:mod:`ragattn.compress.links`) and head each passage in the proxy's prompt and in MiniLM's
document input. A passage without a title is named by what it says it is about: a Markdown heading
on its first line, else the subject its first sentence names when that subject is a proper name
("Walter Lang (August 10, 1895 – ...) was an American film director" names "Walter Lang"). A passage
that names nothing (its first sentence opens with a common word, or its script has no capitals) has
no name. A given title always wins. Chosen by the rules of docs/research/context.md, "Names where
none are given".
"""

from __future__ import annotations

import re

from ragattn.types import Document

_HEADING = re.compile(r"\A\s*#{1,6}[ \t]+(?P<name>[^\n]+?)[ \t#]*(?:\n|\Z)")
# The subject a first sentence names: the words before the verb or the bracket that follows a name
# ("X (born 1950) is ...", "X is ...", "X, born ...", "X was ...").
_SUBJECT = re.compile(
    r"\A\s*(?P<name>[^\s(,;:]+(?:[ \t]+[^\s(,;:]+){0,5}?)"
    r"(?=[ \t]*\(|[ \t]*,|[ \t]+(?:is|was|are|were|has|had|may|refers|became)\b)"
)
MAX_NAME_WORDS = 6
"""A derived name has at most this many words (a subject longer than that is a phrase)."""
_CONNECTORS = frozenset(
    {"of", "the", "and", "de", "la", "le", "du", "von", "van", "der", "den", "di", "da", "del"}
    | {"y", "&", "for", "in", "on", "at", "to", "a", "an", "from", "'s"}
)
_NOT_NAMES = frozenset(
    {"a", "an", "it", "its", "this", "that", "these", "those", "he", "she", "they", "we", "you"}
    | {"his", "her", "their", "our", "there", "here", "in", "on", "at", "as", "after", "before"}
    | {"during", "since", "when", "while", "if", "although"}
)
_QUOTES = "\"'“”‘’«»"


def passage_name(document: Document) -> str | None:
    """The name a document is linked by: its title when it has one, else the name its text gives
    itself (a Markdown heading on the first line, else a proper-name subject of the first
    sentence: capitalised words, joined at most by a few connectors such as "of" or "de"), or
    None."""
    if document.title:
        return document.title
    text = document.text
    heading = _HEADING.match(text)
    if heading:
        return heading.group("name").strip()
    subject = _SUBJECT.match(text[:200].lstrip().lstrip(_QUOTES))
    if subject is None:
        return None
    words = subject.group("name").strip(_QUOTES).split()
    if not words or len(words) > MAX_NAME_WORDS or words[0].lower() in _NOT_NAMES:
        return None
    if not all(w[:1].isupper() or w[:1].isdigit() or w.lower() in _CONNECTORS for w in words):
        return None
    if not any(w[:1].isupper() and w.lower() not in _CONNECTORS for w in words):
        return None
    return " ".join(words)


__all__ = ["MAX_NAME_WORDS", "passage_name"]
