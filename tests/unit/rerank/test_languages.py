"""The standalone reranker in every language: a call not in English is ranked by
:data:`~ragattn.rerank.MULTILINGUAL_METHOD` (chosen by the rule in docs/research/languages.md,
"The standalone reranker outside English"), an English call exactly as before, and a method of
one's own ranks every language itself. Real MiniLM forwards."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from ragattn.errors import ModelLoadError
from ragattn.rerank import DEFAULT_METHOD, MULTILINGUAL_METHOD, Reranker

ENGLISH_QUERY = "Which city is the capital of France?"
ENGLISH_DOCS = [
    "Bananas are rich in potassium and grow in tropical climates.",
    "The stock market fell sharply on Monday after rate fears.",
    "Paris is the capital and largest city of France.",
    "Photosynthesis converts light energy into chemical energy in plants.",
]

# (query, documents, the index of the one that answers it)
GERMAN = (
    "Wie viele Mitglieder hatte der Ruderverein Germania im Gründungsjahr?",
    [
        "Sport clubs in Germany often have hundreds of members and their own boathouses on the "
        "river.",
        "Rudern ist eine Sportart, bei der ein Boot mit Riemen oder Skulls fortbewegt wird.",
        "Im Gründungsjahr 1879 zählte der Ruderverein Germania nur zwölf Mitglieder, heute sind "
        "es über dreihundert.",
        "Die Vereine der Stadt treffen sich jedes Jahr zu einer großen Regatta auf dem See.",
    ],
    2,
)
CHINESE = (
    "黄山的最高峰叫什么名字？",
    [
        "黄山的最高峰是莲花峰，海拔一千八百六十四米。",
        "The highest peak of the mountain is famous for its pine trees and sea of clouds.",
        "中国有许多名山，每年都有大量游客前来登山和观光。",
        "安徽省位于中国东部，有丰富的历史文化。",
    ],
    0,
)
"""The English MiniLM ranks the third paragraph (famous mountains) above the answer; BM25's
character bigrams (黄山, 最高, 高峰) find it."""


@pytest.fixture(scope="module")
def default() -> Reranker:
    """The default reranker, fresh: its multilingual reranker is built by this module."""
    return Reranker()


def test_english_calls_are_ranked_exactly_as_by_the_english_method(default: Reranker) -> None:
    alone = Reranker(multilingual=None)
    got, want = (
        default.rerank(ENGLISH_QUERY, ENGLISH_DOCS),
        alone.rerank(ENGLISH_QUERY, ENGLISH_DOCS),
    )
    assert got.method == want.method == DEFAULT_METHOD
    assert [(r.index, r.raw_score, r.relevance_score) for r in got] == [
        (r.index, r.raw_score, r.relevance_score) for r in want
    ]
    assert np.array_equal(
        default.score(ENGLISH_QUERY, ENGLISH_DOCS).raw, alone.score(ENGLISH_QUERY, ENGLISH_DOCS).raw
    )


@pytest.mark.parametrize("example", [GERMAN, CHINESE], ids=["german", "chinese"])
def test_a_call_not_in_english_is_ranked_by_the_multilingual_method(
    default: Reranker, example: tuple[str, list[str], int]
) -> None:
    query, docs, answer = example
    english = Reranker(multilingual=None).rerank(query, docs)
    assert english.method == DEFAULT_METHOD
    results = default.rerank(query, docs)
    assert results.method == MULTILINGUAL_METHOD
    assert results[0].index == answer
    assert default.multilingual_reranker is not None
    assert default.multilingual_reranker.method == MULTILINGUAL_METHOD
    # the scores of :meth:`Reranker.score` are the same engine's
    assert int(np.argmax(default.score(query, docs).raw)) == answer


def test_the_chinese_example_is_one_the_english_minilm_ranks_wrong() -> None:
    """What the routing changes: today's MiniLM puts a distractor first on ``CHINESE``."""
    query, docs, answer = CHINESE
    assert Reranker(multilingual=None).rerank(query, docs)[0].index != answer


def test_a_method_of_ones_own_ranks_every_language() -> None:
    query, docs, _ = GERMAN
    own = Reranker(method="fused-no-attention")
    assert own.multilingual is None
    assert own.rerank(query, docs).method == "fused-no-attention"
    assert own.multilingual_reranker is None
    named_off = Reranker(multilingual=None)
    assert named_off.rerank(query, docs).method == DEFAULT_METHOD


def test_a_multilingual_reranker_that_cannot_load_falls_back_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    query, docs, _ = GERMAN
    reranker = Reranker(multilingual="/nonexistent/proxy")

    def broken(proxy: object) -> Reranker:
        raise ModelLoadError(f"could not load proxy {proxy!r}")

    reranker._like_this = broken  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="ragattn.rerank"):
        results = reranker.rerank(query, docs)
    assert results.method == DEFAULT_METHOD
    assert reranker.multilingual is None
    assert "multilingual engine did not load" in caplog.text


def test_bm25_ranks_two_documents_and_is_free_of_their_order() -> None:
    """Lucene's idf: a query word in one of two documents still counts (rank-bm25's Okapi idf
    is 0 there); the scores are the same to the bit in any input order."""
    bm25 = Reranker(method="bm25")
    docs = ["Die Brücke wurde 1890 gebaut.", "Der Fluss fließt durch die Stadt."]
    results = bm25.rerank("Wann wurde die Brücke gebaut?", docs)
    assert [r.index for r in results] == [0, 1]
    assert results[0].relevance_score == 1.0 and 0.0 <= results[1].relevance_score < 1.0
    forward = bm25.score(GERMAN[0], GERMAN[1]).raw
    backward = bm25.score(GERMAN[0], GERMAN[1][::-1]).raw
    assert np.array_equal(forward, backward[::-1])


def test_bm25_counts_character_bigrams_where_no_spaces_are_written() -> None:
    bm25 = Reranker(method="bm25")
    raw = bm25.score("狂人日记", ["狂人日记是一篇小说。", "新青年是一本杂志。"]).raw
    assert raw[0] > 0.0 == raw[1]
    assert bm25.score("nothing shared", ["狂人日记"]).relevance.tolist() == [0.0]
