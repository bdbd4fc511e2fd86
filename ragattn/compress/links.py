"""Title links between a call's documents: the second paragraph of a multi-hop question is named in
the first.

A two-hop question ("Where was the director of *The Blue Bird* born?") needs a paragraph that says
little about the question itself (the director's biography); it is relevant because the first
paragraph names it ("directed by Walter Lang"). Neither the document probe nor MiniLM reads that
link: on the first 100 2Wiki dev questions they put 62 % of the gold paragraphs in their top k,
and the document-aware selection with a perfect document score would reach recall 0.825 at 20 %
against the default's 0.625 (``studies/document_ceiling.py``, BENCHMARKS.md §3). Where documents
carry titles (Wikipedia-style corpora, most RAG chunkers keep the page title), the links are
plain text matches and cost nothing next to the forward:

- ``query_names_title``: 1.0 when the query names the document's title, else 0.0;
- ``named_by_sentence``: the highest keep probability (in [0, 1]) among the sentences of the
  *other* documents that name this document's title, 0.0 when none does.

A title is matched case-insensitively as whole words, without a trailing parenthesised
disambiguation ("The Blue Bird (1940 film)" is matched as "the blue bird"); titles shorter than
:data:`MIN_TITLE_CHARS` characters are not matched.

**Names where none are given.** A passage without a title is linked by the name it gives itself
(:func:`ragattn.names.passage_name`); a passage that names nothing gets 0.0 in both columns. A
given title always wins, so titled inputs are linked exactly as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ragattn.names import passage_name
from ragattn.sentence_attention import Unit
from ragattn.types import Document

LINK_COLUMNS: tuple[str, ...] = ("query_names_title", "named_by_sentence")
"""The link inputs of the document-aware selection, in the order :func:`link_inputs` returns."""
MIN_TITLE_CHARS = 3
_DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")


def title_pattern(title: str | None) -> re.Pattern[str] | None:
    """A whole-word, case-insensitive pattern for ``title`` without its trailing parenthesised
    disambiguation, or None when there is no title of at least :data:`MIN_TITLE_CHARS`."""
    if not title:
        return None
    name = " ".join(_DISAMBIGUATION.sub("", title).split())
    if len(name) < MIN_TITLE_CHARS:
        return None
    words = r"\s+".join(re.escape(w) for w in name.split(" "))
    return re.compile(rf"(?<!\w){words}(?!\w)", re.IGNORECASE)


def link_name(document: Document) -> str | None:
    """The name a document is linked by: its title, or for a plain string the name it gives
    itself (:func:`ragattn.names.passage_name`), or None."""
    return passage_name(document)


def link_pattern(document: Document) -> re.Pattern[str] | None:
    """The pattern a document's name is found by (:func:`title_pattern` of :func:`link_name`);
    a derived name of three or more capitalised words (a person's full name, "Richard Milhous
    Nixon") is also found by its first and last word ("Richard Nixon"), as other passages call
    people."""
    name = link_name(document)
    full = title_pattern(name)
    if full is None or document.title or name is None:
        return full
    words = name.split()
    if len(words) < 3 or not all(w[:1].isupper() for w in words):
        return full
    short = title_pattern(f"{words[0]} {words[-1]}")
    if short is None:
        return full
    return re.compile(f"{full.pattern}|{short.pattern}", re.IGNORECASE)


def link_inputs(
    query: str,
    documents: Sequence[Document],
    units: Sequence[Unit],
    probabilities: np.ndarray,
) -> np.ndarray:
    """The ``[n_units, 2]`` link inputs (:data:`LINK_COLUMNS`) of each unit's document.

    Args:
        query: the call's query.
        documents: the call's documents (their :func:`link_name` is what is matched).
        units: the sentences, each with its document index and character span.
        probabilities: the sentence probe's keep probability of each unit, in [0, 1].
    """
    n_docs = len(documents)
    in_query = np.zeros(n_docs)
    named = np.zeros(n_docs)
    texts = [documents[u.doc].text[u.start : u.end] for u in units]
    probs = np.asarray(probabilities, dtype=np.float64)
    for d, doc in enumerate(documents):
        pattern = link_pattern(doc)
        if pattern is None:
            continue
        in_query[d] = 1.0 if pattern.search(query) else 0.0
        for i, unit in enumerate(units):
            if unit.doc != d and probs[i] > named[d] and pattern.search(texts[i]):
                named[d] = probs[i]
    docs = np.asarray([u.doc for u in units], dtype=np.int64)
    if not len(docs):
        return np.zeros((0, len(LINK_COLUMNS)))
    return np.stack([in_query[docs], named[docs]], axis=1)


__all__ = [
    "LINK_COLUMNS",
    "MIN_TITLE_CHARS",
    "link_inputs",
    "link_name",
    "link_pattern",
    "title_pattern",
]
