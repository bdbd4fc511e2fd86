"""Learned attention reranking (``ragattn.lab.attention_training``): the differentiable band
capture reads the engine's rows, a few LoRA steps lower the listwise loss, and the adapter file
round-trips: merged weights score like the unmerged LoRA model."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from ragattn.attention import HeadSet, engine_for
from ragattn.errors import ConfigError, InvalidInputError
from ragattn.lab import attention_training as at
from ragattn.lab.evaluation.datasets import Passage, QAExample
from ragattn.prompt import assemble, rerank_pieces
from ragattn.types import Document

BAND = at.Band(10, 17)
LIST = at.TrainingList(
    source="test",
    query="Where is the Eiffel Tower?",
    docs=(
        Document(text="Bananas grow in tropical climates and are rich in potassium."),
        Document(text="The Eiffel Tower is a wrought-iron tower in Paris, France."),
        Document(text="The stock market fell sharply on Monday after the report."),
    ),
    relevant=(1,),
)

ROWS_ATOL = 1e-5
"""Probability units: the hook's recomputed q/k against the engine's capture, two fp32 pipelines
that sum in different orders (measured below 1e-6 on a 60-token prompt)."""
MERGE_RTOL = 1e-4
"""Relative difference of merged against unmerged LoRA scores: ``(W + sBA)x`` and ``Wx + sB(Ax)``
differ only by fp32 rounding, on AVX2 and AVX-512 alike."""


@pytest.fixture(scope="module")
def own_proxy():
    """A private copy of the packaged proxy: merging changes its weights in place."""
    from ragattn.proxy import load_proxy

    return load_proxy("smollm2-135m")


def test_band_capture_reads_the_rows_the_engine_captures(proxy):
    pieces = rerank_pieces(LIST.query, LIST.docs, [0, 1, 2], family=proxy.chat_family)
    prompt = assemble(pieces, proxy.tokenizer)
    rows = list(range(prompt.query_span.start, prompt.query_span.end))
    with torch.inference_mode(), at.BandCapture(proxy, BAND) as capture:
        mine = capture.run(prompt.input_ids, rows)
    heads = HeadSet.from_layers(BAND.layers, proxy.num_heads)
    engine = engine_for(proxy).capture(prompt.input_ids, rows, heads, reduce="mean")
    reference = engine.weights[:, 0, :].mean(dim=0)
    assert mine is not None and mine.shape == reference.shape
    assert (mine - reference).abs().max().item() <= ROWS_ATOL


def test_calibrated_score_with_prefix_reuse_equals_two_full_forwards(proxy):
    order = [2, 0, 1]
    with torch.inference_mode(), at.BandCapture(proxy, BAND) as capture:
        reused = at.band_scores(capture, LIST.query, LIST.docs, order, calibrate=True)
        full = []
        for query in (LIST.query, "N/A"):
            prompt = assemble(
                rerank_pieces(query, LIST.docs, order, family=proxy.chat_family), proxy.tokenizer
            )
            span = list(range(prompt.query_span.start, prompt.query_span.end))
            per_token = capture.run(prompt.input_ids, span)
            assert per_token is not None
            masses = [per_token[prompt.document(i).tokens.as_slice()].sum() for i in order]
            full.append(torch.log(torch.stack(masses)))
    assert torch.allclose(reused, full[0] - full[1], atol=1e-5)


def test_listwise_loss_counts_several_positives_as_one_event():
    loss = at.listwise_loss(torch.zeros(3), [0, 1])
    assert loss.item() == pytest.approx(-np.log(2 / 3))
    with pytest.raises(InvalidInputError):
        at.listwise_loss(torch.zeros(3), [])


def test_learning_rate_warms_up_then_stays_or_follows_a_half_cosine():
    constant = at.TrainSettings(lr=1e-3, warmup=0.1)
    cosine = at.TrainSettings(lr=1e-3, warmup=0.1, decay="cosine")
    steps, warm = 100, 10
    assert at.learning_rate(constant, 0, steps, warm) == pytest.approx(1e-4)
    assert at.learning_rate(cosine, 9, steps, warm) == pytest.approx(1e-3)
    assert at.learning_rate(constant, 99, steps, warm) == pytest.approx(1e-3)
    mid = at.learning_rate(cosine, warm + 44, steps, warm)  # half-way through the decay
    assert mid == pytest.approx(0.5e-3)
    assert at.learning_rate(cosine, 99, steps, warm) == pytest.approx(0.0, abs=1e-12)
    rates = [at.learning_rate(cosine, s, steps, warm) for s in range(warm, steps)]
    assert all(a >= b for a, b in zip(rates, rates[1:], strict=False))
    with pytest.raises(InvalidInputError, match="decay"):
        at.TrainSettings(decay="linear")


@pytest.mark.slow
def test_training_lowers_the_loss_and_the_adapter_round_trips(own_proxy, tmp_path):
    before = own_proxy.layers[10].self_attn.q_proj.weight.detach().clone()
    untrained = at.score_lists(own_proxy, LIST.query, LIST.docs, BAND, True)
    settings = at.TrainSettings(band=BAND, epochs=5, calibrate=True)
    result = at.train_adapter(own_proxy, [LIST], settings, progress=False)
    assert result.steps == 5
    assert result.losses[-1] < result.losses[0], result.losses
    # Training leaves the proxy as it was: plain Linear modules, unchanged weights.
    assert isinstance(own_proxy.layers[10].self_attn.q_proj, torch.nn.Linear)
    assert torch.equal(own_proxy.layers[10].self_attn.q_proj.weight, before)

    path = at.save_adapter(result.adapter, tmp_path / at.ADAPTER_FILENAME)
    assert path.stat().st_size <= at.MAX_ADAPTER_BYTES
    loaded = at.load_adapter(path)
    assert loaded.config == result.adapter.config
    assert loaded.digest == result.adapter.digest
    assert loaded.parameters == 8 * 8 * (576 + 576 + 576 + 192)

    config = loaded.config
    with at.lora_attached(
        own_proxy, band=config.band, rank=config.rank, alpha=config.alpha, adapter=loaded
    ):
        unmerged = at.score_lists(own_proxy, LIST.query, LIST.docs, BAND, True)
    at.merge_into(own_proxy, path)
    merged = at.score_lists(own_proxy, LIST.query, LIST.docs, BAND, True)
    np.testing.assert_allclose(merged, unmerged, rtol=MERGE_RTOL, atol=1e-6)
    # The adapter changed the scores by far more than the merge tolerance (the check has teeth).
    assert np.abs(unmerged - untrained).max() > 100 * MERGE_RTOL * np.abs(unmerged).max()
    with pytest.raises(ConfigError, match="already merged"):
        at.merge_into(own_proxy, path)


def _example(qid: int, n: int) -> QAExample:
    passages = tuple(
        Passage(
            title=f"q{qid}-p{i}", text=f"paragraph {i} of question {qid}", sentence_spans=((0, 5),)
        )
        for i in range(n)
    )
    gold = Passage(title=f"q{qid}-gold", text="gold", sentence_spans=((0, 4),), is_gold=True)
    return QAExample(
        qid=str(qid), question=f"question {qid}?", answers=(), passages=(gold, *passages)
    )


def test_qa_lists_hold_one_gold_shuffled_and_fill_long_lists_from_other_questions():
    examples = [_example(q, 4) for q in range(6)]
    lengths = iter([5, 12, 3, 8, 5, 20])
    lists = list(at._qa_lists("toy", examples, random.Random(0), lambda: next(lengths)))
    assert [len(x.docs) for x in lists] == [5, 12, 3, 8, 5, 20]
    for item in lists:
        assert len(item.relevant) == 1
        gold = item.docs[item.relevant[0]]
        assert gold.text == "gold"
        owner = gold.title.split("-")[0]
        # Fill-ins come from other questions only, never the question's own titles twice.
        titles = [d.title for d in item.docs]
        assert len(set(titles)) == len(titles)
        assert sum(t.startswith(owner + "-") for t in titles) <= 5
    assert {x.relevant[0] for x in lists} != {0}  # the gold does not sit at a fixed depth
