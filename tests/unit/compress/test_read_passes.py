"""Each model's passes per read (issue 62): MiniLM encodes each document and each sentence at most
once per call, and the document probe's attention correction is computed once, for the selection,
the ranking and the documents stage together, whichever verb, cut or cascade. Real forwards of the
packaged proxy and MiniLM (its LRU off, so every encode is a forward); the wrappers only count."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from ragattn.compress import Cascade, Compressor
from ragattn.compress.cascade import DEFAULT_CASCADE
from ragattn.compress.read import ReadCall
from ragattn.contract import VerbArgs
from ragattn.document_probe import DocumentProbe
from ragattn.embed import shared_embedder
from ragattn.types import Document

QUERY = "When was the Eiffel Tower completed?"
SMALL_CUT = Cascade(min_tokens=8, keep=0.5, scorer="bm25", min_room=1.0)
"""A cascade that cuts even short documents, so the ranking reads a cut forward."""
EIFFEL = "The Eiffel Tower was completed in 1889. It stands in Paris on the Champ de Mars."
CASCADES: dict[str, Cascade | None] = {
    "default": DEFAULT_CASCADE,
    "pooled": replace(DEFAULT_CASCADE, dense="pooled"),
    "bm25-cut": SMALL_CUT,
    "none": None,
}


@pytest.fixture(scope="module")
def compressors(proxy: Any) -> dict[str, Compressor]:
    return {name: Compressor(proxy, cascade=c) for name, c in CASCADES.items()}


def _counted(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[list[str], list[int]]:
    """MiniLM's encoded texts and the document probe's correction calls, recorded."""
    embedder = shared_embedder()
    monkeypatch.setattr(embedder, "cache_size", 0)
    encoded: list[str] = []
    corrections: list[int] = []
    forward = embedder._forward

    def recording(texts: list[str], spans: Any) -> Any:
        encoded.extend(texts)
        return forward(texts, spans)

    correction = DocumentProbe.correction

    def counting(self: DocumentProbe, *args: Any) -> Any:
        corrections.append(1)
        return correction(self, *args)

    monkeypatch.setattr(embedder, "_forward", recording)
    monkeypatch.setattr(DocumentProbe, "correction", counting)
    return encoded, corrections


@pytest.mark.parametrize("verb", ["compress", "rerank_compress"])
@pytest.mark.parametrize(
    ("cascade", "n_docs"),
    [(c, n) for c in CASCADES for n in (1, 4)] + [("default", 120), ("pooled", 120)],
)
def test_minilm_reads_each_text_once_and_the_correction_is_computed_once(
    compressors: dict[str, Compressor],
    monkeypatch: pytest.MonkeyPatch,
    pool: Callable[..., list[Document]],
    cascade: str,
    verb: str,
    n_docs: int,
) -> None:
    docs = pool(n_docs, titled=True)
    docs[n_docs // 2] = Document(text=EIFFEL, title="Eiffel Tower")  # no sentence twice
    encoded, corrections = _counted(monkeypatch)
    read = compressors[cascade]._context_read()
    args = VerbArgs.check(verb, {"ratio": 0.05})  # type: ignore[arg-type]
    call = ReadCall(query=QUERY, docs=docs, args=args, rank=verb == "rerank_compress")
    ranked, out = read.run(call)
    assert out.compressed_tokens < out.origin_tokens
    texts = Counter(t for t in encoded if t != QUERY)
    assert all(n == 1 for n in texts.values()), texts.most_common(3)
    # the document probe is read where a ranking or a selection (several documents) reads it
    assert len(corrections) == (1 if ranked is not None or n_docs > 1 else 0)
    if ranked is not None and n_docs > 1:
        assert docs[ranked[0].index].title == "Eiffel Tower"
