"""The one read's default budget bounds the generator's context and attention's read as the
candidates grow, counted in the packaged proxy's tokens (never timed): 20 candidates of ~128
tokens keep a fifth of their tokens, 100 keep at most 1,024, and attention reads at most its
2,048-token ceiling either way, without filling past it.

The real pipeline over a BM25 index with the packaged default compressor; the read's ``cut``
stage is watched (called through, unchanged) to count what attention read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragattn.compress import Compressor
from ragattn.compress.read import AttendedContext, ContextRead
from ragattn.generate import GeneratedAnswer
from ragattn.pipeline import PipelineOptions, RAGPipeline
from ragattn.types import DEFAULT_MAX_CONTEXT_TOKENS

_TOWNS = ("Alder", "Birch", "Cedar", "Dunmore", "Elm", "Fern", "Glen", "Hollis", "Ivy", "Juniper")
_ENDS = ("ford", "ham", "ton", "wick", "by", "stow", "field", "more", "dale", "worth")
_GOODS = ("wool", "salt", "copper", "barley", "timber", "linen", "honey", "cider", "tin", "glass")
_RIVERS = ("Avon", "Brent", "Colne", "Derwent", "Exe", "Frome", "Garnock", "Hull", "Irwell", "Wye")
QUESTION = "In which year did the town council of Cedarby open a school?"
ATTENTION_CEILING = 2048
"""What the default cascade lets attention read at most (``DEFAULT_CASCADE.ceiling``)."""
_CUT = ContextRead.cut


def passage(i: int) -> dict[str, str]:
    """Candidate ``i`` (0..99): a distinct paragraph of ~120-130 proxy tokens, six sentences."""
    town = _TOWNS[i % 10] + _ENDS[i // 10 % 10]
    good, river = _GOODS[i * 3 % 10], _RIVERS[i * 7 % 10]
    text = (
        f"{town} is a market town on the river {river}, first recorded in the year {1200 + 7 * i}. "
        f"Its weekly market has traded {good} since the {1300 + 3 * i}s, and guild {i} kept its "
        f"accounts. The parish church of {town} was rebuilt after a fire in {1500 + 5 * i}. "
        f"A stone bridge with {3 + i % 5} arches crosses the {river} south of the square. "
        f"In {1800 + i} the town council of {town} opened a school for {40 + i} pupils. "
        f"Local records list {100 + 13 * i} households and {2 + i % 4} mills along the river."
    )
    return {"id": f"town-{i}", "text": text}


class _NoGenerator:
    """The pipeline's generator, never called: ``prepare`` stops before generation."""

    identity = "none"

    def generate(self, question: str, context_passages: Sequence[str]) -> GeneratedAnswer:
        raise AssertionError("prepare() does not generate")


@pytest.fixture(scope="module")
def pipeline(proxy: Any, tmp_path_factory: pytest.TempPathFactory) -> RAGPipeline:
    from ragattn.retrieve import Index

    out: Path = tmp_path_factory.mktemp("ceiling") / "idx"
    index = Index.build([passage(i) for i in range(100)], out, dense=False, chunk_words=None)
    return RAGPipeline(index, compressor=Compressor(proxy), generator=_NoGenerator())


def _read(
    pipeline: RAGPipeline, tokenizer: Any, top_k: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, AttendedContext, int]:
    """The one read of ``top_k`` candidates under the default options: the prepared context,
    what the ``cut`` stage let attention read, and its tokens in ``tokenizer``."""
    readings: list[AttendedContext] = []

    def watched(self: ContextRead, *args: Any, **kwargs: Any) -> AttendedContext:
        reading = _CUT(self, *args, **kwargs)
        readings.append(reading)
        return reading

    monkeypatch.setattr(ContextRead, "cut", watched)
    prepared = pipeline.prepare(QUESTION, PipelineOptions(top_k=top_k, mode="bm25"))
    (reading,) = readings
    read = range(len(reading.units)) if reading.cut is None else reading.cut.read
    texts = [
        reading.docs[reading.units[i].doc].text[reading.units[i].start : reading.units[i].end]
        for i in read
    ]
    tokens = sum(len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])
    return prepared, reading, tokens


def test_the_passages_are_distinct_and_about_128_tokens(proxy: Any) -> None:
    texts = [passage(i)["text"] for i in range(100)]
    assert len(set(texts)) == 100
    lengths = [len(ids) for ids in proxy.tokenizer(texts, add_special_tokens=False)["input_ids"]]
    assert min(lengths) >= 110 and max(lengths) <= 140


def test_the_default_budget_bounds_the_context_and_the_read_as_candidates_grow(
    pipeline: RAGPipeline, proxy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    few, few_reading, few_read = _read(pipeline, proxy.tokenizer, 20, monkeypatch)
    assert few.flow == "one_read" and len(few.sources) == 20
    # 20 candidates: a fifth of their tokens, the ceiling does not bind
    limit = math.floor(0.2 * few.tokens_before)
    assert 2000 <= few.tokens_before <= 3000 and limit < DEFAULT_MAX_CONTEXT_TOKENS
    assert 0.15 * few.tokens_before <= few.tokens_after <= limit
    assert few_read <= ATTENTION_CEILING
    assert few_reading.cut is not None and not few_reading.cut.fill

    many, many_reading, many_read = _read(pipeline, proxy.tokenizer, 100, monkeypatch)
    assert len(many.sources) == 100
    # 100 candidates: 0.2 would be 2,400+ tokens; the ceiling keeps 1,024 at most
    assert many.tokens_before >= 11_000
    assert 0.2 * many.tokens_before > 2 * DEFAULT_MAX_CONTEXT_TOKENS
    assert 0.8 * DEFAULT_MAX_CONTEXT_TOKENS <= many.tokens_after <= DEFAULT_MAX_CONTEXT_TOKENS
    # attention read its room (1.5 x 1,024), under its ceiling, and filled nothing past it
    assert many_read <= ATTENTION_CEILING
    assert many_reading.cut is not None and not many_reading.cut.fill
    assert not any("above what attention reads" in w for w in many.warnings), many.warnings
