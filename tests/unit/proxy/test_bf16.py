"""bf16 against fp32 on the real 135M proxy: the agreement that lets ``dtype="auto"`` pick bf16 on a
CPU with native bf16 while the packaged probes, fitted in fp32, keep reading its features.

bf16 is emulated on AVX2 CPUs (about 4x slower than fp32), so the questions are three small
hand-built ones, three documents each, about 85 proxy tokens.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch

from ragattn import Reranker
from ragattn.assets import default_models_dir
from ragattn.compress import Compressor, probe_path
from ragattn.compress.probe import Probe
from ragattn.document_probe import load_document_probe
from ragattn.errors import ConfigError
from ragattn.proxy import Proxy, load_proxy
from ragattn.rerank.probe import probe_rows
from ragattn.sentence_attention import attention_config

MIN_KEPT_JACCARD = 0.75
"""Least |A ∩ B| / |A ∪ B| of the sentences bf16 and fp32 keep, per question. bf16 keeps 8 bits
of mantissa, so keep probabilities move (:data:`KEEP_SCORE_ATOL`) and a sentence at the budget's
edge may swap with its neighbour on larger inputs; on these two- and three-sentence selections
0.75 means the very same sentences."""
KEEP_SCORE_ATOL = 0.05
"""Largest |bf16 - fp32| of a sentence's keep probability (in [0, 1]). Measured: 0.018 on these
questions with emulated bf16 (AVX2); native AVX-512 BF16 or AMX kernels accumulate in another
order, hence the margin."""
DOC_SCORE_ATOL = 0.1
"""Largest |bf16 - fp32| of a document's score (the document probe's log-odds). Measured: 0.021
on these questions (AVX2)."""

EXAMPLES = [
    (
        "When was the Eiffel Tower completed?",
        [
            "Bananas are rich in potassium. They grow in tropical climates. "
            "Most exports are Cavendish bananas.",
            "The Eiffel Tower is in Paris. It was completed in 1889. "
            "Gustave Eiffel's company built it. It is 330 metres tall.",
            "The stock market fell sharply on Monday. Analysts blamed rising rates. "
            "Bond yields climbed to a ten-year high.",
        ],
    ),
    (
        "Which river flows through Budapest?",
        [
            "The Thames flows through London. It is tidal as far as Teddington Lock. "
            "Many bridges cross it.",
            "Coffee is grown in Brazil and Vietnam. The beans are roasted before brewing. "
            "Espresso is a concentrated form.",
            "Budapest is the capital of Hungary. The Danube flows through the city and divides "
            "Buda from Pest. The Chain Bridge was the first permanent bridge across it.",
        ],
    ),
    (
        "Who wrote the novel Pride and Prejudice?",
        [
            "Charles Dickens wrote Oliver Twist. He was born in Portsmouth in 1812. "
            "His novels describe Victorian London.",
            "Pride and Prejudice is a novel published in 1813. It was written by Jane Austen. "
            "Its heroine is Elizabeth Bennet.",
            "Photosynthesis converts light into chemical energy. It takes place in chloroplasts. "
            "Oxygen is released as a by-product.",
        ],
    ),
]
IDS = ["eiffel", "budapest", "austen"]


@pytest.fixture(scope="module")
def bf16_proxy() -> Proxy:
    return load_proxy("smollm2-135m", dtype="bfloat16")


@pytest.fixture(scope="module")
def sentinels(proxy: Proxy, bf16_proxy: Proxy) -> tuple[Compressor, Compressor]:
    """The default compressor (``sentinel``, its probe fitted in fp32) on fp32 and bf16."""
    return Compressor(proxy, method="sentinel"), Compressor(bf16_proxy, method="sentinel")


def _kept(result: Any) -> set[tuple[int, int, int]]:
    return {(s.doc_index, s.start, s.end) for s in result.kept_spans}


def _best_sentence(result: Any) -> tuple[int, int]:
    scores = [(d.index, i, s) for d in result.documents for i, s in enumerate(d.sentence_scores)]
    doc, sentence, _ = max(scores, key=lambda x: x[2])
    return doc, sentence


@pytest.mark.slow
@pytest.mark.parametrize(("query", "docs"), EXAMPLES, ids=IDS)
def test_sentinel_keeps_the_same_sentences_in_bf16(
    sentinels: tuple[Compressor, Compressor], query: str, docs: list[str]
) -> None:
    fp32, bf16 = (c.compress(query, docs, ratio=0.3) for c in sentinels)
    a, b = _kept(fp32), _kept(bf16)
    assert a and len(a & b) / len(a | b) >= MIN_KEPT_JACCARD, (sorted(a), sorted(b))
    assert _best_sentence(bf16) == _best_sentence(fp32)
    for d32, d16 in zip(fp32.documents, bf16.documents, strict=True):
        np.testing.assert_allclose(d16.sentence_scores, d32.sentence_scores, atol=KEEP_SCORE_ATOL)


@pytest.mark.slow
@pytest.mark.parametrize(("query", "docs"), EXAMPLES, ids=IDS)
def test_document_rankings_agree_on_the_top_document_in_bf16(
    proxy: Proxy,
    bf16_proxy: Proxy,
    sentinels: tuple[Compressor, Compressor],
    query: str,
    docs: list[str],
) -> None:
    # rerank_and_compress: the fp32-fitted document probe reads the sentinel forward's features
    (r32, _), (r16, _) = (c.rerank_and_compress(query, docs, ratio=0.3) for c in sentinels)
    assert r32.method == r16.method == "sentinel:document-probe"
    assert r16[0].index == r32[0].index
    by_index = {r.index: r.raw_score for r in r32}
    for r in r16:
        assert r.raw_score == pytest.approx(by_index[r.index], abs=DOC_SCORE_ATOL)
    # the attention-probe rerank method: the same document probe on its own forward
    p32, p16 = (
        Reranker(p, method="attention-probe").rerank(query, docs) for p in (proxy, bf16_proxy)
    )
    assert p16[0].index == p32[0].index


def test_fp32_probes_accept_bf16_features_and_refuse_int8_and_fewer_layers(
    bf16_proxy: Proxy,
) -> None:
    assert next(bf16_proxy.model.parameters()).dtype == torch.bfloat16
    models = default_models_dir()
    sentinel = Probe.load(probe_path(models, bf16_proxy, "sentinel"))
    document = load_document_probe(models, "smollm2-135m")
    # the sentence probes were fitted on bf16 features, the document probe on fp32 ones
    assert sentinel.config["dtype"] == "bfloat16" and document.config["dtype"] == "float32"
    rows = sentinel.config["rows"]
    bf16 = attention_config(bf16_proxy, rows=rows, layers=None)
    assert bf16["dtype"] == "bfloat16"
    sentinel.check_features(bf16)
    sentinel.check_features({**bf16, "dtype": "float32"})  # what an AVX2 CPU serves
    doc_bf16 = attention_config(bf16_proxy, rows=probe_rows(document), layers=document.layers)
    document.check_features(doc_bf16)

    int8 = attention_config(replace(bf16_proxy, quantize="int8"), rows=rows, layers=None)
    assert int8["dtype"] == "int8"
    refused = "trained on attention features with dtype='bfloat16', but these were computed with"
    with pytest.raises(ConfigError, match=re.escape(f"{refused} dtype='int8'")):
        sentinel.check_features(int8)
    with pytest.raises(ConfigError, match=re.escape("computed with dtype='int8'")):
        document.check_features({**doc_bf16, "dtype": "int8"})
    with pytest.raises(ConfigError, match=re.escape("computed with rows='last'")):
        document.check_features({**doc_bf16, "rows": "last"})
    with pytest.raises(ConfigError, match="features stop at layer"):
        document.check_features({**doc_bf16, "layers": document.layers - 1})
    layered = replace(sentinel, config={**sentinel.config, "layers": 30})
    with pytest.raises(ConfigError, match=re.escape("computed with layers=29")):
        layered.check_features({**bf16, "layers": 29})
