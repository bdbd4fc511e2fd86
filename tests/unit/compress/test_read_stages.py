"""The read as named stages (:mod:`ragattn.compress.read`): every compression reports each stage's
seconds, in order, and timing it changes nothing in the answer. Real forwards of the packaged
proxy; no wall-clock bounds beyond "the stages fit in the call"."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ragattn.compress import Cascade, Compressor
from ragattn.compress.read import STAGES, ContextRead, ReadCall, StageClock
from ragattn.contract import VerbArgs
from ragattn.embed import titled_text
from ragattn.types import Budget, Document

QUERY = "Who designed the Eiffel Tower and when was it completed?"
DOCS = [
    Document(
        title="Eiffel Tower",
        text="The Eiffel Tower is a lattice tower in Paris. It was designed by Maurice Koechlin "
        "and Émile Nouguier. It was completed on 31 March 1889.",
    ),
    Document(
        title="Banana",
        text="Bananas are rich in potassium. They grow in tropical climates.",
    ),
    Document(
        title="Paris",
        text="Paris is the capital of France. The Exposition Universelle of 1889 was held there. "
        "Its most famous landmark is the Eiffel Tower.",
    ),
]
COMPRESS_STAGES = tuple(s for s in STAGES if s != "ranking")
"""``compress`` reads without ranking."""
SMALL_CUT = Cascade(min_tokens=8, keep=0.5, scorer="bm25", min_room=1.0)
"""A cascade that cuts even these short documents (BM25, no model), so the read's cut path runs."""


@pytest.fixture(scope="module")
def default(proxy: Any) -> Compressor:
    return Compressor(proxy)


@pytest.fixture(scope="module")
def cutting(proxy: Any) -> Compressor:
    return Compressor(proxy, cascade=SMALL_CUT)


def ticking() -> Callable[[], float]:
    """A clock that moves one second per reading: every stage lasts exactly 1.0 s."""
    counter = itertools.count()
    return lambda: float(next(counter))


def _args(verb: str, **kw: Any) -> VerbArgs:
    return VerbArgs.check(verb, kw)  # type: ignore[arg-type]


def _plain(result: Any) -> dict[str, Any]:
    """A result's dict without its seconds: everything the read decided."""
    out: dict[str, Any] = result.to_dict()
    del out["stage_seconds"]
    return out


def test_the_stages_are_one_ordered_vocabulary() -> None:
    assert STAGES == (
        "sentences",
        "candidates",
        "cut",
        "forward",
        "documents",
        "selection",
        "ranking",
        "assembly",
    )


def test_a_stage_clock_reports_each_stage_in_the_order_it_ran() -> None:
    clock = StageClock(ticking())
    with clock.stage("cut"):
        pass
    with clock.stage("forward"):
        pass
    assert clock.seconds() == (("cut", 1.0), ("forward", 1.0))


@pytest.mark.parametrize("name", ["default", "cutting"])
def test_compress_reports_every_stage_but_ranking_within_the_calls_time(
    name: str, request: pytest.FixtureRequest
) -> None:
    compressor: Compressor = request.getfixturevalue(name)
    started = time.perf_counter()
    out = compressor.compress(QUERY, DOCS, ratio=0.4)
    wall = time.perf_counter() - started
    assert tuple(stage for stage, _ in out.stage_seconds) == COMPRESS_STAGES
    seconds = [s for _, s in out.stage_seconds]
    assert all(s >= 0.0 for s in seconds)
    assert sum(seconds) <= wall
    if name == "cutting":
        assert any("the cascade" in w for w in out.warnings)  # the cut path did run


@pytest.mark.parametrize("name", ["default", "cutting"])
def test_rerank_and_compress_reports_every_stage_within_the_calls_time(
    name: str, request: pytest.FixtureRequest
) -> None:
    compressor: Compressor = request.getfixturevalue(name)
    started = time.perf_counter()
    ranked, out = compressor.rerank_and_compress(QUERY, DOCS, ratio=0.4, top_n=2)
    wall = time.perf_counter() - started
    assert tuple(stage for stage, _ in out.stage_seconds) == STAGES
    assert sum(s for _, s in out.stage_seconds) <= wall
    assert len(ranked) == 2


@pytest.mark.parametrize("name", ["default", "cutting"])
@pytest.mark.parametrize(
    ("verb", "kw"),
    [
        ("compress", {"ratio": 0.4}),
        ("compress", {"threshold": 0.3, "keep_entities": True}),
        ("rerank_compress", {"ratio": 0.4, "top_n": 2}),
        ("rerank_compress", {"target_tokens": 20, "keep_order": False}),
    ],
)
def test_the_timer_changes_nothing(
    name: str, verb: str, kw: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    """The read timed by a fake clock and by the wall clock gives the same answer, bit for bit;
    the fake clock's seconds are its own (one second a stage)."""
    compressor: Compressor = request.getfixturevalue(name)
    args = _args(verb, **kw)
    rank = verb == "rerank_compress"
    parts = compressor._context_read().parts
    call = ReadCall(query=QUERY, docs=DOCS, args=args, rank=rank)
    timed = ContextRead(parts).run(call)
    faked = ContextRead(parts, clock=ticking()).run(call)
    assert _plain(timed[1]) == _plain(faked[1])
    assert timed == faked  # stage_seconds is no part of a result's equality
    if rank:
        assert timed[0] is not None and faked[0] is not None
        assert [(r.index, r.raw_score, r.relevance_score) for r in timed[0]] == [
            (r.index, r.raw_score, r.relevance_score) for r in faked[0]
        ]
    assert all(s == 1.0 for _, s in faked[1].stage_seconds)
    keyword = (
        compressor.rerank_and_compress(QUERY, DOCS, **kw)
        if rank
        else compressor.compress(QUERY, DOCS, **kw)
    )
    plain = keyword[1] if isinstance(keyword, tuple) else keyword
    assert _plain(plain) == _plain(timed[1])


def test_context_scores_are_the_reads_keep_scores(cutting: Compressor) -> None:
    """The untimed stages ``cut`` to ``selection`` (the lab's entry) score as the timed read."""
    out = cutting.compress(QUERY, DOCS, ratio=0.4)
    docs, units = cutting._prepare(QUERY, DOCS)
    scores, _, notes = cutting.context_scores(QUERY, docs, units, Budget(kind="ratio", value=0.4))
    flat = [s for d in out.documents for s in d.sentence_scores]
    assert np.asarray(scores).tolist() == flat
    assert notes[0] == out.warnings[0]


def test_stage_seconds_go_into_to_dict_and_out_of_equality(default: Compressor) -> None:
    out = default.compress(QUERY, DOCS, ratio=0.4)
    assert [name for name, _ in out.to_dict()["stage_seconds"]] == list(COMPRESS_STAGES)
    bare = dataclasses.replace(out, stage_seconds=())
    assert bare == out and bare.stage_seconds == ()


@pytest.mark.parametrize("rank", [False, True])
def test_minilm_reads_every_candidate_once_in_the_candidates_stage(
    default: Compressor,
    monkeypatch: pytest.MonkeyPatch,
    rank: bool,
    pool: Callable[..., list[Document]],
) -> None:
    """The one pass over every candidate is the ``candidates`` stage's, and the cut (its precut
    ranks the 120 documents by it), the document scores and the ranking read it from there: with
    MiniLM's LRU off, each document is encoded exactly once in the read, as a MiniLM rerank of
    the same candidates encodes it. The sentences the cut scores are not every candidate's."""
    from ragattn.embed import shared_embedder

    embedder = shared_embedder()
    monkeypatch.setattr(embedder, "cache_size", 0)
    docs = pool(120, titled=True)
    whole = [titled_text(d) for d in docs]
    seen: list[str] = []
    stage_of: list[str] = []
    forward = embedder._forward
    current = {"stage": ""}

    def recording(texts: list[str], spans: Any) -> Any:
        seen.extend(texts)
        stage_of.extend([current["stage"]] * len(texts))
        return forward(texts, spans)

    monkeypatch.setattr(embedder, "_forward", recording)
    parts = default._context_read().parts

    class Clock(StageClock):
        def stage(self, name: Any) -> Any:  # type: ignore[override]
            current["stage"] = name
            return super().stage(name)

    read = ContextRead(parts)
    monkeypatch.setattr("ragattn.compress.read.StageClock", Clock)
    args = _args("rerank_compress" if rank else "compress", ratio=0.05)
    ranked, out = read.run(ReadCall(query=QUERY, docs=docs, args=args, rank=rank))
    assert any("the cascade" in w for w in out.warnings)  # the precut path ran
    assert "1889" in out.compressed_text
    counts = {t: seen.count(t) for t in whole}
    assert set(counts.values()) == {1}
    assert {stage_of[i] for i, t in enumerate(seen) if t in counts} == {"candidates"}
    sentences = [t for t in seen if t not in counts and t != QUERY]
    assert 0 < len(sentences) < sum(len(d.text.split(". ")) for d in docs)
    assert {stage_of[seen.index(t)] for t in sentences} == {"cut"}
    seconds = dict(out.stage_seconds)
    assert seconds["candidates"] > 0.0
    if rank:
        assert ranked is not None and ranked[0].index == 60
