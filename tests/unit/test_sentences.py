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


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("巴黎是法国的首都。埃菲尔铁塔于1889年建成！", "zh"),
        ("東京は日本の首都です。とても大きい。", "ja"),
        ("باريس هي عاصمة فرنسا. تم بناء برج إيفل في عام 1889.", "ar"),
        ("Париж — столица Франции. Эйфелева башня.", "ru"),
        ("पेरिस फ्रांस की राजधानी है। यह बड़ा है।", "hi"),
        ("Η Αθήνα είναι η πρωτεύουσα. Είναι μεγάλη.", "el"),
        ("Paris is the capital. It has the 埃菲尔 tower.", "en"),  # a few foreign characters
        ("Dr. Müller wohnt in Berlin.", "en"),  # Latin script: English unless named
        ("", "en"),
    ],
)
def test_auto_reads_the_language_from_the_script(text: str, language: str) -> None:
    from ragattn.sentences import resolve_language

    assert resolve_language("auto", text) == language
    assert split_sentences(text) == split_sentences(text, language=language)


def test_a_named_language_uses_its_rules() -> None:
    german = "Er arbeitet seit dem 3. Mai bei der Firma. Das ist gut."
    assert len(split_sentences(german)) == 3  # English rules end a sentence at "3."
    spans = split_sentences(german, language="de")
    assert [german[s.start : s.end] for s in spans] == [
        "Er arbeitet seit dem 3. Mai bei der Firma.",
        "Das ist gut.",
    ]
    hindi = "पेरिस फ्रांस की राजधानी है। यह बड़ा है।"
    assert len(split_sentences(hindi, language="en")) == 1  # English rules miss the danda
    assert len(split_sentences(hindi)) == 2


def test_an_unknown_language_is_refused_with_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown language 'xx'; valid: auto, am, ar"):
        split_sentences("Some text.", language="xx")


def test_clear_split_cache_forgets_every_cached_split() -> None:
    """Benchmarks of the cold path clear the splits' LRU: after it, no split is served from it."""
    from ragattn.sentences import _split_cached, clear_split_cache, split_sentences

    split_sentences("One sentence here. Another one there.")
    assert _split_cached.cache_info().currsize > 0
    clear_split_cache()
    assert _split_cached.cache_info().currsize == 0
    assert len(split_sentences("One sentence here. Another one there.")) == 2


BOUNDLESS = [
    pytest.param("😀🎉🔥👍" * 550, id="emoji"),
    pytest.param("👨‍👩‍👧‍👦" * 400, id="zwj-sequences"),
    pytest.param("中文没有标点的长句子" * 500, id="unpunctuated-chinese"),
    pytest.param("word " * 3000, id="latin-without-stops"),
    pytest.param("e\u0301" * 3000, id="combining-marks"),
    pytest.param("x" * 5000, id="one-long-token"),
]


@pytest.mark.parametrize("text", BOUNDLESS)
def test_a_run_without_sentence_boundaries_is_split_at_the_bound(text: str) -> None:
    import regex

    from ragattn.sentences import MAX_SENTENCE_BYTES

    sents = split_sentences(text)
    assert len(sents) > 1
    graphemes = {m.start() for m in regex.finditer(r"\X", text)} | {len(text)}
    for s in sents:
        piece = text[s.start : s.end]
        assert 0 < len(piece.encode()) <= MAX_SENTENCE_BYTES
        assert piece == piece.strip()
        assert s.start in graphemes and s.end in graphemes  # no emoji or accent cut
    assert "".join(text[s.start : s.end] for s in sents).replace(" ", "") == text.replace(" ", "")


def test_the_bound_prefers_the_last_space_and_leaves_prose_alone() -> None:
    words = " ".join(f"w{i:04d}" for i in range(400))  # 2,399 bytes, no sentence end
    pieces = [words[s.start : s.end] for s in split_sentences(words)]
    assert all(p.startswith("w") and len(p.split()[-1]) == 5 for p in pieces)  # whole words
    assert " ".join(pieces) == words
    prose = " ".join(["A sentence of ordinary length that ends here."] * 40)
    assert len(split_sentences(prose)) == 40


def test_the_bound_cuts_a_missed_paragraph_after_a_sentence_end() -> None:
    # pysbd reads a quoted paragraph as one sentence; the bound cuts it after a full stop.
    body = " ".join(f"Claim number {i} holds for the fund's net asset value." for i in range(40))
    text = f'"{body}"'
    pieces = [text[s.start : s.end] for s in split_sentences(text)]
    assert len(pieces) > 1
    assert all(p.endswith((".", '."')) for p in pieces)
