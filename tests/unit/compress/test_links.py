"""Title links between documents (ragattn.compress.links) and a document-aware selection that
reads them (ragattn.compress.selection)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragattn.compress.links import (
    LINK_COLUMNS,
    link_inputs,
    link_name,
    link_pattern,
    title_pattern,
)
from ragattn.compress.selection import COLUMNS, LINKED_COLUMNS, DocumentSelection
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
    Document(text="It names Walter Lang too, but this document has no title or name."),
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
    assert by_doc[3].tolist() == [0.0, 0.0]  # no title and no name of its own: no links
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


LINKED = DocumentSelection(
    weights=(1.0, 0.5, 0.0, 1.0, 4.0),
    bias=-1.0,
    config={"method": "sentinel"},
    columns=LINKED_COLUMNS,
)


def test_a_linked_selection_lifts_the_named_bridge_document() -> None:
    """Equal sentence and document scores: the document another's sentence names ranks first."""
    docs = [DOCS[1], DOCS[0]]  # Walter Lang, then The Blue Bird (which names Walter Lang)
    units = _units(docs)
    probs = np.full(len(units), 0.5)
    probs[1] = 0.9  # "It was directed by Walter Lang" is a confident sentence
    scores = LINKED.weigh("Who directed it?", docs, units, probs, np.array([0.0, 0.0]))
    plain = DocumentSelection(weights=(1.0, 0.5, 0.0), bias=-1.0, config={"method": "sentinel"})
    base = plain.weigh("Who directed it?", docs, units, probs, np.array([0.0, 0.0]))
    lang = [i for i, u in enumerate(units) if u.doc == 0]
    assert (scores[lang] > base[lang]).all()


def test_a_linked_selection_round_trips_and_needs_links(tmp_path: Path) -> None:
    path = tmp_path / "selection.json"
    LINKED.save(path)
    back = DocumentSelection.load(path)
    assert back == LINKED and back.uses_links
    with pytest.raises(ValueError, match="links"):
        LINKED.combine(np.array([0.5, 0.5]), [0, 1], np.array([0.0, 1.0]))
    with pytest.raises(ConfigError):
        DocumentSelection(weights=(1.0, 2.0), bias=0.0, columns=COLUMNS)
    with pytest.raises(ConfigError):
        DocumentSelection(weights=(1.0,) * 4, bias=0.0, columns=COLUMNS + ("x",))


@pytest.mark.parametrize(
    ("text", "title", "name"),
    [
        (
            "Walter Lang (August 10, 1895 - 1972) was an American film director.",
            None,
            "Walter Lang",
        ),
        ("The Blue Bird is a 1940 fantasy film.", None, "The Blue Bird"),
        ('"Deliver Us from Evil" is a 2014 horror film.', None, "Deliver Us from Evil"),
        ("# Eiffel Tower\n\nThe tower was completed in 1889.", None, "Eiffel Tower"),
        ("Paris, the capital of France, is large.", None, "Paris"),
        ("Walter Lang was a director.", "Lang (director)", "Lang (director)"),  # a title wins
        ("It was directed by Walter Lang.", None, None),  # a pronoun names nothing
        ("Management consulting is a practice.", None, None),  # a common noun phrase
        ("The film was released in 1940.", None, None),
        ("巴黎是法国的首都。", None, None),  # no capitals: no subject found
        ("A B C D E F G H is long.", None, None),  # more than MAX_NAME_WORDS words
    ],
)
def test_a_passage_without_a_title_is_named_by_its_heading_or_its_subject(
    text: str, title: str | None, name: str | None
) -> None:
    assert link_name(Document(text=text, title=title)) == name


def test_a_derived_full_name_is_also_found_by_its_first_and_last_word() -> None:
    pattern = link_pattern(Document(text="Richard Milhous Nixon (1913 - 1994) was a president."))
    assert pattern is not None
    assert pattern.search("He served under Richard Nixon.")
    assert pattern.search("richard milhous nixon")
    assert not pattern.search("Nixon alone")
    titled = link_pattern(Document(text="Richard Milhous Nixon was.", title="Richard M. Nixon"))
    assert titled is not None and not titled.search("Richard Nixon")  # a title is taken as given


def test_plain_strings_get_the_links_their_names_give() -> None:
    plain = [Document(text=d.text) for d in DOCS]
    units = [Unit(0, 0, 25), Unit(0, 26, 56), Unit(1, 0, 32), Unit(2, 0, 26), Unit(3, 0, 10)]
    probs = np.array([0.9, 0.8, 0.3, 0.6, 0.5])
    titled = link_inputs(QUERY, DOCS, units, probs)
    linked = link_inputs(QUERY, plain, units, probs)
    # "The Blue Bird is ..." and "Walter Lang was ..." name themselves as their titles do
    assert linked[:3].tolist() == titled[:3].tolist()
