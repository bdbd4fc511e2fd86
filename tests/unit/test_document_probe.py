"""The document probe: pooling, the configuration check, the file round trip, and the
``attention-probe`` scorer's order-freedom and truncation warnings on the real 135M proxy."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragattn import Reranker
from ragattn.document_probe import (
    EPS,
    DocumentProbe,
    pool_documents,
    score_documents,
    zscore_columns,
)
from ragattn.errors import ConfigError
from ragattn.rerank.probe import AttentionProbeScorer, _canonical, probe_rows
from ragattn.sentence_attention import Unit, attention_block, attention_config
from ragattn.sentences import split_sentences
from ragattn.types import Document

CONFIG = {"rows": "both", "layers": 4, "dtype": "float32", "max_doc_tokens": 24}


def _probe(columns: tuple[str, ...], seed: int = 0, **config: Any) -> DocumentProbe:
    weights = np.random.default_rng(seed).normal(size=len(columns))
    return DocumentProbe(
        columns=columns, weights=weights, minilm_weight=1.5, config={**CONFIG, **config}
    )


def test_pooling_is_the_token_weighted_mass_and_the_best_sentence() -> None:
    names = ("last:L0H0", "query:L0H0", "bm25")
    shares = np.array([[1.0, 2.0], [3.0, 0.5], [0.25, 4.0]])  # units x attention columns
    matrix = np.concatenate([np.log(shares + EPS), np.zeros((3, 1))], axis=1)
    pooled_names, pooled = pool_documents(names, matrix, [0, 0, 1], np.array([1.0, 3.0, 2.0]), 3)
    assert pooled_names == (
        "mass:last:L0H0",
        "mass:query:L0H0",
        "best:last:L0H0",
        "best:query:L0H0",
    )
    mass = np.exp(pooled[:, :2]) - EPS
    best = np.exp(pooled[:, 2:]) - EPS
    np.testing.assert_allclose(mass[0], [(1 * 1 + 3 * 3) / 4, (2 * 1 + 0.5 * 3) / 4])
    np.testing.assert_allclose(mass[1], [0.25, 4.0])
    np.testing.assert_allclose(best[0], [3.0, 2.0])
    np.testing.assert_allclose(mass[2], [0.0, 0.0], atol=1e-12)  # no unit: the floor


def test_zscore_does_not_depend_on_row_order() -> None:
    x = np.random.default_rng(1).normal(size=(6, 3))
    x[:, 2] = 5.0
    perm = np.array([3, 0, 5, 1, 4, 2])
    np.testing.assert_allclose(zscore_columns(x)[perm], zscore_columns(x[perm]), atol=1e-12)
    assert np.all(zscore_columns(x)[:, 2] == 0.0)


def test_probe_refuses_features_of_another_configuration() -> None:
    probe = _probe(("mass:query:L0H0",))
    pooled = np.zeros((2, 1))
    ok = {"rows": "both", "layers": 4, "dtype": "float32"}
    probe.score(("mass:query:L0H0",), pooled, np.zeros(2), ok)
    probe.score(("mass:query:L0H0",), pooled, np.zeros(2), {**ok, "layers": 30})  # wider
    query_only = _probe(("mass:query:L0H0",), rows="query")
    query_only.score(("mass:query:L0H0",), pooled, np.zeros(2), ok)  # "both" holds "query"
    with pytest.raises(ConfigError, match=re.escape("computed with rows='last'")):
        query_only.score(("mass:query:L0H0",), pooled, np.zeros(2), {**ok, "rows": "last"})
    # bf16 features approximate the fp32 ones the probe was fitted on
    # (tests/unit/proxy/test_bf16.py)
    probe.score(("mass:query:L0H0",), pooled, np.zeros(2), {**ok, "dtype": "bfloat16"})
    for key, value in (("dtype", "int8"), ("rows", "query")):
        with pytest.raises(ConfigError, match=re.escape(f"computed with {key}={value!r}")):
            probe.score(("mass:query:L0H0",), pooled, np.zeros(2), {**ok, key: value})
    with pytest.raises(ConfigError, match="features stop at layer 2"):
        probe.score(("mass:query:L0H0",), pooled, np.zeros(2), {**ok, "layers": 2})
    with pytest.raises(ConfigError, match="lack 1 probe columns"):
        probe.score(("mass:last:L0H0",), pooled, np.zeros(2), ok)


def test_attention_only_scores_are_the_correction_and_never_run_minilm(
    proxy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``minilm=False`` returns the attention correction alone, without embedding a passage;
    the full score is the correction plus the weighted z-score of MiniLM's cosines."""
    import ragattn.document_probe as document_probe
    import ragattn.embed as embed

    docs = [Document(text="Paris is the capital. It is big."), Document(text="Rome is old.")]
    units = [
        Unit(d, s.start, s.end) for d, doc in enumerate(docs) for s in split_sentences(doc.text)
    ]
    names = ("last:L0H0", "query:L0H0", "last:L1H0", "query:L1H0")
    matrix = np.random.default_rng(3).normal(size=(len(units), len(names)))
    widths = np.array([5, 4, 4])
    pooled_names, pooled = pool_documents(names, matrix, [u.doc for u in units], widths, 2)
    probe = _probe(tuple(pooled_names[:3]))

    def no_minilm(*_: Any) -> np.ndarray:
        raise AssertionError("MiniLM ran")

    monkeypatch.setattr(document_probe, "unit_widths", lambda *_: widths)
    monkeypatch.setattr(embed, "dense_scores", no_minilm)
    only = score_documents(
        probe, proxy.tokenizer, "q", docs, units, names, matrix, CONFIG, minilm=False
    )
    np.testing.assert_allclose(only, probe.correction(pooled_names, pooled, CONFIG))
    monkeypatch.setattr(embed, "dense_scores", lambda *_: np.array([0.9, 0.1]))
    full = score_documents(probe, proxy.tokenizer, "q", docs, units, names, matrix, CONFIG)
    np.testing.assert_allclose(full, only + 1.5 * np.array([1.0, -1.0]))


def test_probe_file_round_trip(tmp_path: Path) -> None:
    probe = _probe(("mass:query:L0H0", "best:query:L3H8"), seed=4, lists=12)
    probe.save(tmp_path / "p.npz")
    loaded = DocumentProbe.load(tmp_path / "p.npz")
    assert loaded.columns == probe.columns
    np.testing.assert_array_equal(loaded.weights, probe.weights)
    assert loaded.minilm_weight == probe.minilm_weight
    assert dict(loaded.config) == {**CONFIG, "lists": 12}
    assert loaded.layers == 4


@pytest.fixture(scope="module")
def scorer(proxy: Any) -> AttentionProbeScorer:
    columns = tuple(
        f"{kind}:query:L{layer}H{head}"
        for kind in ("mass", "best")
        for layer in range(4)
        for head in range(proxy.num_heads)
    )
    return AttentionProbeScorer(proxy, _probe(columns, seed=7), docs_per_window=3)


DOCS = [
    Document(text="Paris is the capital of France. It lies on the Seine."),
    Document(text="Berlin is the capital of Germany."),
    Document(text="Bananas are a tropical fruit rich in potassium."),
    Document(text="Lyon is a large city in France. It is known for its food and its old town."),
]


def test_scores_are_bit_identical_under_every_input_order(scorer: AttentionProbeScorer) -> None:
    query = "What is the capital of France?"
    reference = scorer.score(query, DOCS, None)
    assert reference.windows == 2  # 4 documents, windows of 3
    assert any("2 windows" in w for w in reference.warnings)
    for perm in itertools.permutations(range(len(DOCS))):
        got = scorer.score(query, [DOCS[i] for i in perm], None)
        np.testing.assert_array_equal(got.raw, reference.raw[list(perm)])
    assert np.all((reference.relevance > 0) & (reference.relevance < 1))


def test_windows_share_one_minilm_scale(proxy: Any) -> None:
    """Read in windows of 3, a list of 8 is still ranked on one scale: with the attention weights
    at zero the score is exactly a * z(MiniLM) over the whole list, so the order is MiniLM's (per
    window, each window's best document would get a high score whatever the others hold)."""
    from ragattn.rerank.features import dense_local

    columns = tuple(f"mass:query:L{layer}H0" for layer in range(4))
    probe = DocumentProbe(
        columns=columns, weights=np.zeros(len(columns)), minilm_weight=1.5, config=CONFIG
    )
    docs = [
        *DOCS,
        Document(text="France borders Spain and Italy."),
        Document(text="The capital of Italy is Rome."),
        Document(text="Potatoes grow underground."),
        Document(text="The Seine flows through Paris, the French capital."),
    ]
    query = "What is the capital of France?"
    out = AttentionProbeScorer(proxy, probe, docs_per_window=3).score(query, docs, None)
    assert out.windows == 3
    minilm = np.asarray(dense_local(query, docs), dtype=np.float64)
    np.testing.assert_allclose(out.raw, 1.5 * zscore_columns(minilm[:, None])[:, 0], atol=1e-12)


def test_long_documents_are_cut_and_reported(scorer: AttentionProbeScorer) -> None:
    long = Document(text=" ".join(["The river flows north through the old valley."] * 10))
    out = scorer.score("Which way does the river flow?", [long, DOCS[1]], None)
    assert out.warnings == (
        "1 document(s) longer than 24 proxy tokens were read by their first 24 tokens "
        "(the probe's training length)",
    )
    assert out.windows == 1


def test_rerank_and_compress_ranks_by_the_document_probe_of_its_own_forward(proxy: Any) -> None:
    from ragattn import Compressor

    compressor = Compressor(proxy)  # the default sentinel: its forward feeds the document probe
    query = "What is the capital of France?"
    ranked, out = compressor.rerank_and_compress(query, DOCS, ratio=0.5)
    assert ranked.method.endswith(":document-probe")
    raws = [r.raw_score for r in ranked]
    assert raws == sorted(raws, reverse=True)
    assert sorted(r.index for r in ranked) == list(range(len(DOCS)))  # nothing dropped
    assert [d.index for d in out.documents] == [r.index for r in ranked]  # compressed in rank order
    assert DOCS[ranked[0].index].text.startswith("Paris")
    for r in ranked:
        assert r.relevance_score == pytest.approx(1 / (1 + np.exp(-r.raw_score)))


def test_an_attention_only_selection_runs_no_minilm_and_keeps_the_ranking(
    proxy: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A selection fitted with ``document_score="attention"`` weighs sentences without MiniLM's
    pass over the passages; ``rerank_and_compress`` still ranks with the full document probe."""
    import shutil

    import ragattn.embed as embed
    from ragattn import Compressor
    from ragattn.assets import default_models_dir
    from ragattn.compress.selection import DocumentSelection

    models = tmp_path / "models"
    shutil.copytree(default_models_dir() / "smollm2-135m", models / "smollm2-135m")
    packaged = DocumentSelection.load(models / "smollm2-135m" / "selection.json")
    DocumentSelection(
        weights=packaged.weights,
        bias=packaged.bias,
        config={**packaged.config, "document_score": "attention"},
        columns=packaged.columns,
    ).save(models / "smollm2-135m" / "selection.json")
    query = "What is the capital of France?"
    default = Compressor(proxy, cascade=None)
    attention = Compressor(proxy, models_dir=models, cascade=None)
    selection = attention.document_selection()
    assert selection is not None and not selection.reads_minilm
    expected, _ = default.rerank_and_compress(query, DOCS, ratio=0.5)

    def no_minilm(*_: Any) -> np.ndarray:
        raise AssertionError("MiniLM ran")

    with monkeypatch.context() as patch:
        patch.setattr(embed, "dense_scores", no_minilm)
        out = attention.compress(query, DOCS, ratio=0.5)
    assert out.documents and out.compressed_tokens < out.origin_tokens
    ranked, _ = attention.rerank_and_compress(query, DOCS, ratio=0.5)
    assert [r.index for r in ranked] == [r.index for r in expected]
    np.testing.assert_allclose([r.raw_score for r in ranked], [r.raw_score for r in expected])


@pytest.mark.gemma
@pytest.mark.slow
def test_gemma_probe_stops_its_forward_at_its_depth_and_matches_the_full_forward(
    gemma_proxy: Any,
) -> None:
    """The packaged Gemma-3-270M document probe reads only layers 5 and 11, so its forward stops
    after 12 of 18 layers; the scores equal the probe applied to a full-depth forward's features."""
    reranker = Reranker(gemma_proxy, method="attention-probe")
    scorer = reranker.scorer
    assert isinstance(scorer, AttentionProbeScorer)
    probe = scorer.probe
    assert probe.layers == 12 < gemma_proxy.num_layers
    assert {int(c.split(":L")[1].split("H")[0]) for c in probe.columns} == {5, 11}
    query = "What is the capital of France?"
    cut = scorer.score(query, DOCS, None)
    assert DOCS[int(np.argmax(cut.raw))].text.startswith("Paris")

    docs = [DOCS[i] for i in _canonical(DOCS)]  # the scorer's prompt order
    units = [
        Unit(d, s.start, s.end) for d, doc in enumerate(docs) for s in split_sentences(doc.text)
    ]
    rows = probe_rows(probe)
    matrix, names, _ = attention_block(
        gemma_proxy, query, docs, units, rows=rows, layers=None, max_chunk_tokens=1 << 30
    )
    full = score_documents(
        probe,
        gemma_proxy.tokenizer,
        query,
        docs,
        units,
        names,
        matrix,
        attention_config(gemma_proxy, rows=rows, layers=None),
    )
    np.testing.assert_allclose(full, cut.raw[_canonical(DOCS)], rtol=1e-5, atol=1e-5)


@pytest.mark.gemma
@pytest.mark.slow
def test_gemma_rerank_and_compress_ranks_with_its_document_probe(gemma_proxy: Any) -> None:
    """With its own probe file, Gemma's one-pass call ranks by the document probe read from the
    compressor's forward (as SmolLM2's does). That forward's prompt is the compressor's, not the
    reranker's, so the two rankings may differ below the top."""
    from ragattn import Compressor

    query = "What is the capital of France?"
    ranked, out = Compressor(gemma_proxy, method="fused").rerank_and_compress(
        query, DOCS, ratio=0.5
    )
    assert ranked.method == "fused:document-probe"
    assert DOCS[ranked[0].index].text.startswith("Paris")
    assert [d.index for d in out.documents] == [r.index for r in ranked]
    raws = [r.raw_score for r in ranked]
    assert raws == sorted(raws, reverse=True)
    assert sorted(r.index for r in ranked) == list(range(len(DOCS)))
