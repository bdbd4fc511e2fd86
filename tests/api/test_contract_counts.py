"""Issue 44: on the service's routes every input is converted once and every value checked once.

One real HTTP request per route goes through the app (the real packaged proxy, the real engines,
the worker and tokenizer threads), with counters wrapped around the functions that convert
documents and check values. The counts are per request; the cache is off so every request is
computed.

- documents: the wire's conversion (:func:`ragattn_api.schemas.to_documents`, one call per
  request) or the pipeline's, one :func:`~ragattn.pipeline.results.hit_document` per retrieved
  passage; the library's own conversion (:func:`ragattn.types.as_document`) never runs: engines
  receive the converted documents through their checked entries.
- ``top_n``: :func:`ragattn.types.check_top_n`, run by the one :class:`~ragattn.contract.VerbArgs`
  each request builds.
- the query's length: :meth:`ragattn.limits.LimitChecker.precheck` (its bound, before the
  tokenizer thread) and :meth:`~ragattn.limits.LimitChecker.check_query` (its tokens), once each;
  the library's non-empty check (:func:`ragattn.validation.check_query`) does not run again after
  the wire's.
- the budget: one :class:`~ragattn.types.Budget` is made (and checked) per request that has one;
  :meth:`Budget.from_args` runs only where the wire's fields become that Budget.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn.contract import VerbArgs
from ragattn.limits import LimitChecker
from ragattn.types import Budget

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

QUERY = "When was the Eiffel Tower completed?"
DOCUMENTS = [
    {"text": "The Eiffel Tower is in Paris. It was completed on 31 March 1889.", "id": "eiffel"},
    "The Leaning Tower stands in Pisa.",
    "Bananas are yellow.",
]
CORPUS = [
    {"id": "eiffel", "text": "The Eiffel Tower is in Paris. It was completed on 31 March 1889."},
    {"id": "pisa", "text": "The Leaning Tower stands in Pisa. Pisa is a city in Italy."},
    {"id": "rhine", "text": "The Rhine flows through Germany. The Tower Bridge is in London."},
]


class Counts:
    """Calls of wrapped functions and methods, by label, from any thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: Counter[str] = Counter()
        self._monkeypatch = monkeypatch

    def _counted(self, label: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[label] += 1
            return original(*args, **kwargs)

        return counted

    def function(self, module: str, name: str) -> None:
        """Count ``module.name`` wherever the project bound it (``from module import name``)."""
        original = getattr(sys.modules[module], name)
        counted = self._counted(name, original)
        bound = 0
        for loaded in list(sys.modules.values()):
            ours = getattr(loaded, "__name__", "").split(".")[0] in ("ragattn", "ragattn_api")
            if ours and getattr(loaded, name, None) is original:
                self._monkeypatch.setattr(loaded, name, counted)
                bound += 1
        assert bound, f"{module}.{name} is bound nowhere"

    def method(self, cls: type, name: str) -> None:
        original = getattr(cls, name)
        self._monkeypatch.setattr(cls, name, self._counted(f"{cls.__name__}.{name}", original))


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("counts-index") / "idx"
    Index.build(CORPUS, out, dense=False, chunk_words=None)
    return out


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counts:
    # Every module that binds a counted name is imported before the names are wrapped.
    import ragattn.batch._rows  # noqa: F401
    import ragattn.client  # noqa: F401
    import ragattn.integrations  # noqa: F401
    import ragattn.pipeline.rag  # noqa: F401
    import ragattn_api.service  # noqa: F401

    c = Counts(monkeypatch)
    c.function("ragattn_api.schemas.common", "to_documents")
    c.function("ragattn.types", "as_document")
    c.function("ragattn.pipeline.results", "hit_document")
    c.function("ragattn.types", "check_top_n")
    c.function("ragattn.validation", "check_query")
    c.method(LimitChecker, "check_query")
    c.method(LimitChecker, "precheck")
    c.method(Budget, "__post_init__")
    c.method(Budget, "from_args")
    c.method(VerbArgs, "__post_init__")
    c.method(VerbArgs, "check")
    return c


def expected(**nonzero: int) -> Counter[str]:
    """The counts of one request: ``VerbArgs`` built once, so ``top_n`` checked once, and the
    query's tokens counted once; the rest as given, everything else never."""
    base = {
        "VerbArgs.__post_init__": 1,
        "check_top_n": 1,
        "LimitChecker.check_query": 1,
        "LimitChecker.precheck": 1,
    }
    return Counter({**base, **nonzero})


async def test_each_route_converts_once_and_checks_once(
    make_app: Callable[..., Litestar], index_dir: Path, counts: Counts
) -> None:
    app = make_app(index_dir=str(index_dir), cache_backend="none")
    requests: list[tuple[str, dict[str, Any], Counter[str]]] = [
        (
            "/v2/rerank",
            {"query": QUERY, "documents": DOCUMENTS, "top_n": 2},
            expected(to_documents=1),
        ),
        (
            "/v2/rerank",
            {"query": QUERY, "documents": DOCUMENTS, "top_n": 2, "prune": {"ratio": 0.5}},
            expected(to_documents=1, **{"Budget.from_args": 1, "Budget.__post_init__": 1}),
        ),
        (
            "/v1/compress",
            {"query": QUERY, "documents": DOCUMENTS, "target_tokens": 20},
            expected(to_documents=1, **{"Budget.from_args": 1, "Budget.__post_init__": 1}),
        ),
        (
            "/v1/ask",
            {"question": QUERY, "mode": "bm25", "top_k": 3, "ratio": 0.5},
            expected(**{"Budget.__post_init__": 1}),
        ),
    ]
    async with AsyncTestClient(app=app) as client:
        for path, body, want in requests:
            counts.calls.clear()
            response = await client.post(path, json=body)
            assert response.status_code == 200, response.text
            if path == "/v1/ask":  # each retrieved passage is converted once
                want["hit_document"] = len(response.json()["sources"])
                assert want["hit_document"] > 0
            assert +counts.calls == want, path


def test_the_counters_see_a_keyword_call_check_again(counts: Counts, reranker: Any) -> None:
    """The counters are live: the keyword method the service called before converts each
    document and checks ``top_n`` and the query itself, on top of the service's own checks."""
    reranker.rerank(QUERY, DOCUMENTS, top_n=2)
    assert counts.calls["as_document"] == len(DOCUMENTS)
    assert counts.calls["check_top_n"] == counts.calls["check_query"] == 1
