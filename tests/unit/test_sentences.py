from __future__ import annotations

import pytest

from ragattn.sentences import split_sentences

CASES = [
    "Dr. Smith went to Washington D.C. on Jan. 5. He paid $3.50 for coffee!  It was 3.5 km away.",
    "Same sentence here. Same sentence here.\n\nA new paragraph starts. 1. Item one is long.",
    "東京は日本の首都です。大阪は西日本の大きな都市です。",
    "Emoji 😀 are fine. Ünïcödé tëxt wörks too.",
    "no final punctuation",
]


@pytest.mark.parametrize("text", CASES)
def test_spans_are_exact_ordered_and_cover_all_text(text):
    sents = split_sentences(text)
    assert sents
    for a, b in zip(sents, sents[1:], strict=False):
        assert a.end <= b.start
        assert text[a.end : b.start].strip() == ""
    for s in sents:
        assert text[s.start : s.end] == text[s.start : s.end].strip() != ""
    covered = "".join(text[s.start : s.end] for s in sents)
    assert covered.replace(" ", "").replace("\n", "") == text.replace(" ", "").replace("\n", "")


def test_abbreviations_numbers_and_fragments():
    text = CASES[0]
    got = [text[s.start : s.end] for s in split_sentences(text)]
    assert got == [
        "Dr. Smith went to Washington D.C. on Jan. 5.",
        "He paid $3.50 for coffee!",
        "It was 3.5 km away.",
    ]
    para = [CASES[1][s.start : s.end] for s in split_sentences(CASES[1])]
    assert para[0] == para[1] == "Same sentence here."
    assert "1." not in para  # a bare list marker is merged into a neighbour


def test_blank_input_has_no_sentences():
    assert split_sentences("") == ()
    assert split_sentences(" \n\t ") == ()
