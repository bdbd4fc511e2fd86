"""Compression-probe features: early exit, one-forward rows, the configuration check, the boosted
trees export, per-question normalisation and the on-disk feature store (real 135M forwards)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragattn.compress.features import Unit, attention_block, sentence_features
from ragattn.compress.probe import Probe, per_question
from ragattn.errors import ConfigError
from ragattn.sentences import split_sentences
from ragattn.types import Document

QUERY = "Which river flows through Paris?"
DOCS = [
    Document(text="Paris is the capital of France. The Seine flows through Paris. It is big."),
    Document(text="Berlin lies on the Spree. Bananas are yellow. Rome has the Tiber river."),
]


def _units() -> list[Unit]:
    return [
        Unit(d, s.start, s.end) for d, doc in enumerate(DOCS) for s in split_sentences(doc.text)
    ]


def test_early_exit_leaves_the_features_a_shallow_probe_reads_unchanged(proxy: Any) -> None:
    units = _units()
    full, names, _ = attention_block(proxy, QUERY, DOCS, units, rows="both")
    shallow, shallow_names, _ = attention_block(proxy, QUERY, DOCS, units, rows="both", layers=8)
    assert len(shallow_names) == 2 * 8 * proxy.num_heads
    assert all(int(n.split(":L")[1].split("H")[0]) < 8 for n in shallow_names)
    cols = [names.index(n) for n in shallow_names]
    np.testing.assert_allclose(shallow, full[:, cols], atol=1e-6, rtol=0)
    # "both" is one forward; its blocks equal the single-row-kind computations up to float
    # rounding (another set of captured rows changes the kernels' blocking: 4e-6 seen on AVX-512).
    last, last_names, _ = attention_block(proxy, QUERY, DOCS, units, rows="last")
    query, query_names, _ = attention_block(proxy, QUERY, DOCS, units, rows="query")
    np.testing.assert_allclose(full[:, [names.index(n) for n in last_names]], last, atol=5e-5)
    np.testing.assert_allclose(full[:, [names.index(n) for n in query_names]], query, atol=5e-5)
    # The attention differs between sentences (a constant block would make this test vacuous).
    assert float(full.std(axis=0).mean()) > 0.05


def _probe(config: dict[str, Any], names: tuple[str, ...]) -> Probe:
    k = len(names)
    return Probe(
        names=names,
        mean=np.zeros(k),
        scale=np.ones(k),
        coef=np.ones(k) / k,
        intercept=0.0,
        config=config,
    )


@pytest.mark.parametrize(("key", "other"), [("layers", 12), ("rows", "query"), ("dtype", "int8")])
def test_probe_refuses_features_computed_with_another_configuration(
    proxy: Any, key: str, other: Any
) -> None:
    feats = sentence_features(
        proxy, QUERY, DOCS, _units(), lexical=False, dense=False, rows="last", layers=8
    )
    assert feats.config == {"rows": "last", "layers": 8, "dtype": "float32"}
    config = {"attention": True, **feats.config}
    scores = _probe(config, feats.names).predict(feats.names, feats.matrix, feats.config)
    assert scores.shape == (len(_units()),)
    with pytest.raises(ConfigError, match=key):
        _probe({**config, key: other}, feats.names).predict(feats.names, feats.matrix, feats.config)


def test_probe_refuses_missing_columns() -> None:
    probe = _probe({}, ("bm25", "dense"))
    with pytest.raises(ConfigError, match="different features"):
        probe.predict(("bm25",), np.zeros((2, 1)))


def test_per_question_zscore_ignores_a_question_level_shift_and_scale() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(7, 3))
    z = per_question(x, "zscore")
    np.testing.assert_allclose(per_question(3.0 * x + 5.0, "zscore"), z, atol=1e-12)
    np.testing.assert_allclose(z.mean(axis=0), 0.0, atol=1e-12)
    both = per_question(x, "both")
    assert both.shape == (7, 6)
    np.testing.assert_array_equal(both[:, :3], x)
    # A constant column gives zeros, not NaN.
    assert np.all(per_question(np.ones((4, 2)), "zscore") == 0.0)


def test_boosted_trees_export_predicts_like_scikit_learn(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    from ragattn.lab.probe_fit import FeatureTable, ProbeConfig, fit_model, train

    rng = np.random.default_rng(1)
    n = 600
    x = rng.normal(size=(n, 4))
    y = (x[:, 0] + 0.5 * x[:, 1] ** 2 + 0.3 * rng.normal(size=n) > 0.8).astype(int)
    groups = np.repeat(np.arange(n // 20), 20)
    table = FeatureTable(
        names=("bm25", "dense", "position", "log_words"),
        x=x,
        y=y,
        groups=groups,
        sources=tuple("s" for _ in range(n // 20)),
    )
    config = ProbeConfig(attention=False, lexical=True, dense=True, learner="trees")
    probe = train(table, config, dtype="float32")
    assert probe.trees is not None and len(probe.trees.roots) == 200
    path = tmp_path / "p.npz"
    probe.save(path)
    loaded = Probe.load(path)
    model = fit_model(x, y, config)
    expected = model.predict_proba(x[:20])[:, 1]
    np.testing.assert_allclose(loaded.predict(table.names, x[:20]), expected, atol=1e-9)


def test_feature_store_computes_once_then_reads_from_disk(proxy: Any, tmp_path: Path) -> None:
    from ragattn.lab.feature_store import FeatureStore

    store = FeatureStore(tmp_path, proxy, rows="last", layers=4)
    units = _units()
    first, fresh = store.get("src", QUERY, DOCS, units)
    assert fresh
    path = store.path("src", QUERY, DOCS, units)
    assert path.is_file()
    again, fresh_again = store.get("src", QUERY, DOCS, units)
    assert not fresh_again
    assert again.names == first.names and again.config == first.config
    np.testing.assert_array_equal(again.matrix, first.matrix)
    # Another question is another entry; a leftover temporary file is never read as features.
    (path.parent / "junk.tmp123.npz").write_bytes(b"half")
    _, fresh_other = store.get("src", QUERY + " Really?", DOCS, units)
    assert fresh_other


@pytest.mark.slow
def test_training_material_is_large_balanced_and_never_an_evaluation_question(
    data_dir: Path,
) -> None:
    from collections import Counter

    from ragattn.lab.evaluation import datasets as ds
    from ragattn.lab.probe_training import QUOTAS, load_training, units_and_labels

    examples = load_training(data_dir)
    counts = Counter(e.source for e in examples)
    assert len(examples) >= 1500
    assert set(counts) == set(QUOTAS)
    assert all(counts[s] <= QUOTAS[s] for s in counts)
    # Interleaved: the first 10 % already holds every source.
    assert {e.source for e in examples[: len(examples) // 10]} == set(QUOTAS)
    positives = sum(int(units_and_labels(e)[1].sum()) for e in examples)
    assert positives >= 2500
    # Unanswerable questions are all-negative examples.
    unanswerable = [e for e in examples if e.source == "squad-unanswerable"]
    assert unanswerable and all(not any(g) for e in unanswerable for g in [e.gold[0]])
    questions = {e.question for e in examples}
    held_out = [
        *ds.load_2wiki(data_dir / "2wikimultihopqa" / "2wiki_dev_sample500.json", 200),
        *ds.load_hotpot(data_dir / "hotpotqa" / "hotpot_dev_distractor_v1.shared.json"),
        *ds.load_scifact_rationales(data_dir / "scifact", "test"),
        *ds.load_squad(data_dir / "squad-v2" / "dev-v2.0.shared.json", 1000),
    ]
    assert not questions & {ex.question for ex in held_out}
    # SciFact and NQ examples hold gold among distractors, gold not always first.
    for source in ("scifact-train", "nq-train"):
        sample = [e for e in examples if e.source == source][:50]
        assert all(len(e.documents) >= 3 for e in sample)
        assert len({next(i for i, g in enumerate(e.gold) if g) for e in sample}) > 1


def test_layer_pooling_averages_each_layers_heads_and_keeps_other_columns() -> None:
    from ragattn.compress.probe import pool_layers

    names = ("last:L0H0", "last:L0H1", "last:L1H0", "query:L0H0", "bm25")
    x = np.array([[1.0, 3.0, 5.0, 7.0, 9.0], [0.0, 2.0, 4.0, 6.0, 8.0]])
    pooled_names, pooled = pool_layers(names, x)
    assert pooled_names == ("last:L0", "last:L1", "query:L0", "bm25")
    np.testing.assert_array_equal(pooled, [[2.0, 5.0, 7.0, 9.0], [1.0, 4.0, 6.0, 8.0]])


def test_float32_and_bfloat16_features_are_interchangeable_int8_is_not() -> None:
    probe = _probe({"attention": True, "rows": "query", "layers": 30, "dtype": "float32"}, ("x",))
    probe.check_features({"rows": "query", "layers": 30, "dtype": "bfloat16"})
    with pytest.raises(ConfigError, match="dtype"):
        probe.check_features({"rows": "query", "layers": 30, "dtype": "int8"})
    bf16 = _probe({"attention": True, "rows": "query", "layers": 30, "dtype": "bfloat16"}, ("x",))
    bf16.check_features({"rows": "query", "layers": 30, "dtype": "float32"})


def test_probe_accepts_wider_features_that_hold_its_own() -> None:
    probe = _probe({"attention": True, "rows": "last", "layers": 4, "dtype": "float32"}, ("x",))
    probe.check_features({"rows": "both", "layers": 30, "dtype": "float32"})
    with pytest.raises(ConfigError, match="layers"):
        probe.check_features({"rows": "both", "layers": 3, "dtype": "float32"})
