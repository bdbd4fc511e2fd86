"""Title links between documents (ragattn.compress.links) and a document-aware selection that
reads them (ragattn.compress.selection)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragattn.compress.links import LINK_COLUMNS, link_inputs, title_pattern
from ragattn.compress.selection import COLUMNS, LINKED_COLUMNS, DocumentWeighting
from ragattn.errors import ConfigError
from ragattn.sentence_attention import Unit
from ragattn.types import Document


def test_a_title_matches_as_whole_words_without_its_disambiguation() -> None:
    pattern = title_pattern("The Blue Bird (1940 film)")
    assert pattern is not None
    assert pattern.search("It is a remake of THE BLUE  BIRD, directed by Walter Lang.")
    assert not pattern.search("The Blue Birds sang.")  # not whole words
    assert not pattern.search("The Blue Bird (1940 film)"[:8])
    assert title_pattern(None) is None and title_pattern("") is None
    assert title_pattern("AI") is None  # shorter than MIN_TITLE_CHARS
    assert title_pattern("C++ (language)").search("written in c++ mostly")  # type: ignore[union-attr]


DOCS = [
    Document(
        title="The Blue Bird (1940 film)",
        text="The Blue Bird is a film. It was directed by Walter Lang.",
    ),
    Document(title="Walter Lang", text="Walter Lang was born in Memphis. He directed musicals."),
    Document(
        title="Memphis Belle", text="Memphis Belle is a bomber. The Blue Bird is not a bomber."
    ),
    Document(text="Walter Lang is named here too, but this document has no title."),
]
QUERY = "Where was the director of The Blue Bird born?"


def _units(docs: list[Document]) -> list[Unit]:
    units = []
    for d, doc in enumerate(docs):
        start = 0
        for part in doc.text.split(". "):
            end = min(len(doc.text), start + len(part) + 1)
            units.append(Unit(d, start, end))
            start = end + 1
    return units


def test_links_name_the_query_title_and_the_best_naming_sentence() -> None:
    units = _units(DOCS)
    probs = np.linspace(0.1, 0.9, len(units))
    links = link_inputs(QUERY, DOCS, units, probs)
    assert links.shape == (len(units), len(LINK_COLUMNS))
    by_doc = {u.doc: links[i] for i, u in enumerate(units)}
    assert by_doc[0][0] == 1.0 and by_doc[1][0] == 0.0  # the query names The Blue Bird only
    # Walter Lang is named by doc 0's second sentence and by the untitled doc 3: the best of them.
    naming = [
        i
        for i, u in enumerate(units)
        if u.doc in (0, 3) and "Walter Lang" in DOCS[u.doc].text[u.start : u.end]
    ]
    assert by_doc[1][1] == pytest.approx(max(probs[naming]))
    # The Blue Bird is named by doc 2 (its own sentences do not count).
    assert by_doc[0][1] == pytest.approx(probs[[i for i, u in enumerate(units) if u.doc == 2][1]])
    assert by_doc[3].tolist() == [0.0, 0.0]  # no title, no links
    # Every unit of a document carries its document's links.
    for i, u in enumerate(units):
        np.testing.assert_array_equal(links[i], by_doc[u.doc])


def test_links_do_not_depend_on_document_order() -> None:
    units = _units(DOCS)
    probs = np.linspace(0.1, 0.9, len(units))
    perm = [2, 0, 3, 1]
    moved = [DOCS[p] for p in perm]
    moved_units = _units(moved)
    moved_probs = np.concatenate(
        [probs[[i for i, u in enumerate(units) if u.doc == p]] for p in perm]
    )
    a = link_inputs(QUERY, DOCS, units, probs)
    b = link_inputs(QUERY, moved, moved_units, moved_probs)
    original = np.concatenate([a[[i for i, u in enumerate(units) if u.doc == p]] for p in perm])
    np.testing.assert_array_equal(b, original)


LINKED = DocumentWeighting(
    weights=(1.0, 0.5, 0.0, 1.0, 4.0),
    bias=-1.0,
    config={"method": "sentinel"},
    columns=LINKED_COLUMNS,
)


def test_a_linked_weighting_lifts_the_named_bridge_document() -> None:
    """Equal sentence and document scores: the document another's sentence names ranks first."""
    docs = [DOCS[1], DOCS[0]]  # Walter Lang, then The Blue Bird (which names Walter Lang)
    units = _units(docs)
    probs = np.full(len(units), 0.5)
    probs[1] = 0.9  # "It was directed by Walter Lang" is a confident sentence
    scores = LINKED.weigh("Who directed it?", docs, units, probs, np.array([0.0, 0.0]))
    plain = DocumentWeighting(weights=(1.0, 0.5, 0.0), bias=-1.0, config={"method": "sentinel"})
    base = plain.weigh("Who directed it?", docs, units, probs, np.array([0.0, 0.0]))
    lang = [i for i, u in enumerate(units) if u.doc == 0]
    assert (scores[lang] > base[lang]).all()


def test_a_linked_weighting_round_trips_and_needs_links(tmp_path: Path) -> None:
    path = tmp_path / "selection.json"
    LINKED.save(path)
    back = DocumentWeighting.load(path)
    assert back == LINKED and back.uses_links
    with pytest.raises(ValueError, match="links"):
        LINKED.combine(np.array([0.5, 0.5]), [0, 1], np.array([0.0, 1.0]))
    with pytest.raises(ConfigError):
        DocumentWeighting(weights=(1.0, 2.0), bias=0.0, columns=COLUMNS)
    with pytest.raises(ConfigError):
        DocumentWeighting(weights=(1.0,) * 4, bias=0.0, columns=COLUMNS + ("x",))
