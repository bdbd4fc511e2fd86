"""``reads_attention`` and ``generates`` are right for every registered method, by behaviour.

Each method of the runtime and lab registries runs once on a small list while the attention
engine's forward and the proxy's ``generate`` are counted: a method reads attention exactly when
its spec says so, and generates exactly when its spec says so. Nothing is mocked: the counters wrap
the real calls.
"""

from __future__ import annotations

from typing import Any

import pytest

from ragattn.attention import AttentionEngine
from ragattn.compress import Compressor
from ragattn.lab.registry import COMPRESS_METHODS, RERANK_METHODS
from ragattn.rerank import Reranker

QUERY = "When was the Eiffel Tower completed?"
DOCS = [
    "Bananas grow in tropical climates.",
    "The Eiffel Tower is in Paris. It was completed in 1889.",
]


@pytest.fixture()
def calls(proxy: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of attention-engine forwards and proxy generations, while the real ones run."""
    counts = {"attention": 0, "generation": 0}
    forward, generate = AttentionEngine.run, proxy.model.generate

    def counted_forward(self: AttentionEngine, *args: Any, **kwargs: Any) -> Any:
        counts["attention"] += 1
        return forward(self, *args, **kwargs)

    def counted_generate(*args: Any, **kwargs: Any) -> Any:
        counts["generation"] += 1
        return generate(*args, **kwargs)

    monkeypatch.setattr(AttentionEngine, "run", counted_forward)
    monkeypatch.setattr(proxy.model, "generate", counted_generate)
    return counts


@pytest.mark.parametrize("name", list(RERANK_METHODS))
def test_rerank_spec_says_what_the_method_runs(proxy: Any, calls: dict[str, int], name: str):
    spec = RERANK_METHODS[name]
    Reranker(proxy, method=spec).rerank(QUERY, DOCS)
    assert (calls["attention"] > 0, calls["generation"] > 0) == (
        spec.reads_attention,
        spec.generates,
    )


@pytest.mark.parametrize("name", list(COMPRESS_METHODS))
def test_compress_spec_says_what_the_method_runs(proxy: Any, calls: dict[str, int], name: str):
    spec = COMPRESS_METHODS[name]
    Compressor(proxy, method=spec).compress(QUERY, DOCS, ratio=0.5)
    assert (calls["attention"] > 0, calls["generation"] > 0) == (
        spec.reads_attention,
        spec.generates,
    )
