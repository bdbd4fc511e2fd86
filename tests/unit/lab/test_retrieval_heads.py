"""Retrieval-head detection (Wu et al. copy-paste score), its stored profile, the rerank method."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from ragattn.assets import default_models_dir
from ragattn.attention import HeadSet
from ragattn.errors import InvalidInputError, ModelLoadError
from ragattn.lab import profile_writers as pw
from ragattn.lab import retrieval_heads as rh
from ragattn.lab.registry import RERANK_VARIANTS
from ragattn.rerank import METHODS, Reranker
from ragattn.rerank import profiles as rp
from ragattn.types import TokenSpan

# ---- the scoring rule on a hand-made attention array ---------------------------------------

KEY_IDS = [5, 10, 11, 12, 7, 10]  # positions 1..3 are the needle answer (ids 10, 11, 12)
ANSWER = TokenSpan(start=1, end=4)
EMITTED = [10, 11, 10, 12]


def _rows(argmax: list[int], n_keys: int = 6) -> np.ndarray:
    """One attention row per step, peaked (0.5) at ``argmax`` and flat elsewhere."""
    rows = np.full((len(argmax), n_keys), 0.5 / (n_keys - 1))
    for r, i in enumerate(argmax):
        rows[r, i] = 0.5
    return rows


def test_copy_paste_credits_only_needle_argmax_on_the_emitted_token():
    weights = np.stack(
        [
            _rows([1, 2, 1, 3]),  # copies 10, 11, (10 again), 12 from the needle -> 3/3
            _rows([2, 1, 2, 3]),  # on the needle but the wrong token except at the last step -> 1/3
            _rows([5, 0, 5, 4]),  # right token (10 at position 5) but outside the needle -> 0
            _rows([1, 0, 1, 0]),  # the same needle position copied twice counts once -> 1/3
        ]
    )
    scores = rh.copy_paste_scores(weights, KEY_IDS, EMITTED, ANSWER)
    assert scores.tolist() == pytest.approx([1.0, 1 / 3, 0.0, 1 / 3], abs=1e-12)
    same = rh.copy_paste_scores(torch.tensor(weights), KEY_IDS, EMITTED, ANSWER)
    assert same.tolist() == scores.tolist()


def test_copy_paste_rejects_misaligned_input():
    with pytest.raises(InvalidInputError, match="one row per step"):
        rh.copy_paste_scores(np.stack([_rows([1, 2])]), KEY_IDS, EMITTED, ANSWER)
    with pytest.raises(InvalidInputError, match="empty"):
        rh.copy_paste_scores(
            np.stack([_rows([1, 2, 1, 3])]), KEY_IDS, EMITTED, TokenSpan(start=2, end=2)
        )


def test_rouge1_recall():
    assert (
        rh.rouge1_recall("It is a spoonful of Smoked paprika.", "a spoonful of smoked paprika") == 1
    )
    assert rh.rouge1_recall("paprika", "smoked paprika") == 0.5
    assert rh.rouge1_recall("", "smoked paprika") == 0.0


def _detection(scores: np.ndarray) -> rh.Detection:
    trial = rh.TrialResult(
        spec=rh.TrialSpec(needle=0, haystack_tokens=300, depth=0.5, offset=0),
        prompt_tokens=360,
        depth=0.5,
        response="x",
        emitted=(1,),
        recall=1.0,
        success=True,
        scores=scores,
    )
    return rh.Detection(scores=scores, trials=(trial,), decoding="greedy", seconds=1.0)


def test_selection_by_top_and_threshold():
    scores = np.zeros((30, 9))
    scores[18, 6], scores[17, 3], scores[2, 0] = 0.9, 0.4, 0.05
    det = _detection(scores)
    assert det.ranked()[:3] == [((18, 6), 0.9), ((17, 3), 0.4), ((2, 0), 0.05)]
    assert det.select(top=2).pairs == ((17, 3), (18, 6))
    assert det.select(top=10).pairs == ((2, 0), (17, 3), (18, 6))  # zero-score heads never chosen
    assert det.select(threshold=0.1).pairs == ((17, 3), (18, 6))
    with pytest.raises(InvalidInputError, match="exactly one"):
        det.select(top=2, threshold=0.1)
    with pytest.raises(InvalidInputError, match="no head copied"):
        _detection(np.zeros((30, 9))).select(top=4)


# ---- the stored profile ----------------------------------------------------------------------


def test_profile_round_trips_into_a_valid_head_set(proxy, tmp_path):
    scores = np.zeros((proxy.num_layers, proxy.num_heads))
    scores[18, 6], scores[17, 3], scores[23, 2] = 0.9, 0.8, 0.3
    det = _detection(scores)
    heads = det.select(top=3)
    payload = pw.retrieval_profile_payload(
        det, heads, proxy="smollm2-135m", selection={"top": 3}, command="cmd", date="2026-01-01"
    )
    path = tmp_path / "smollm2-135m" / rp.RETRIEVAL_FILENAME
    pw.write_retrieval_profile(path, payload)
    loaded = rp.RetrievalHeadProfile.load(path)
    assert loaded.heads == heads
    assert loaded.ranked == (((18, 6), 0.9), ((17, 3), 0.8), ((23, 2), 0.3))
    assert np.array_equal(loaded.scores, scores)
    loaded.heads.validate(proxy.num_layers, proxy.num_heads)
    assert json.loads(path.read_text())["selection"] == {"top": 3}


def test_committed_profile_is_valid_for_the_packaged_proxy(proxy):
    path = rp.retrieval_profile_path(default_models_dir(), "smollm2-135m")
    profile = rp.RetrievalHeadProfile.load(path)
    profile.heads.validate(proxy.num_layers, proxy.num_heads)
    assert profile.scores.shape == (proxy.num_layers, proxy.num_heads)
    assert [s for _, s in profile.ranked] == sorted((s for _, s in profile.ranked), reverse=True)
    assert all(0.0 < s <= 1.0 for _, s in profile.ranked)


def test_missing_profile_names_the_command(tmp_path):
    missing = tmp_path / rp.RETRIEVAL_FILENAME
    with pytest.raises(
        ModelLoadError,
        match=re.escape(
            f"no retrieval-head profile at {missing}; create it with: ragattn heads detect"
        ),
    ):
        rp.RetrievalHeadProfile.load(missing)


def test_card_section_is_replaced_not_duplicated(tmp_path):
    scores = np.zeros((30, 9))
    scores[18, 6] = 0.9
    det = _detection(scores)
    payload = pw.retrieval_profile_payload(
        det, det.select(top=1), proxy="p", selection={"top": 1}, command="c", date="d"
    )
    card = tmp_path / "README.md"
    card.write_text("# Probes\n\nkept\n")
    pw.write_card_section(card, pw.card_section(payload))
    pw.write_card_section(card, pw.card_section(payload))
    text = card.read_text()
    assert text.startswith("# Probes\n\nkept\n")
    assert text.count(pw.CARD_START) == 1 and "| 18 | 6 | 0.900 |" in text


# ---- the real proxy on a tiny needle test ----------------------------------------------------

HAYSTACK = (
    "The river flows north through a wide green valley.",
    "Farmers in the region grow barley, oats and potatoes.",
    "A stone bridge was built across the river in 1821.",
    "The village hosts a market every Saturday morning.",
)


NEAR_TIE = 2e-4
"""Top-2 margin (attention probability) below which a head's argmax is not compared: capture and
eager attention differ by at most 1e-4 per probability on short prompts (test_attention.py;
2.1e-6 measured on AVX2 and AVX-512), so swapping the top two needs a margin under twice that."""


def _eager_argmax(att):
    """Top-1 key and top-2 margin per head and row of eager attention rows ``[heads, rows, n]``."""
    top2 = att.topk(2, dim=-1)
    return top2.indices[..., 0], top2.values[..., 0] - top2.values[..., 1]


@pytest.mark.slow
def test_needle_trial_scores_match_an_independent_eager_count(proxy, eager_rows):
    spec = rh.TrialSpec(needle=0, haystack_tokens=40, depth=0.5, offset=0)
    result = rh.run_trial(proxy, HAYSTACK, spec)
    needle = rh.NEEDLES[0]
    assert result.success and needle.answer in result.response
    built = rh.build_prompt(proxy, HAYSTACK, spec, needle)
    answer_text = proxy.tokenizer.decode(built.prompt.input_ids[built.answer.as_slice()])
    assert answer_text.strip() == needle.answer
    ids = list(built.prompt.input_ids)
    emitted = list(result.emitted)
    seq = ids + emitted[:-1]
    rows = list(range(len(ids) - 1, len(seq)))
    top, margin = _eager_argmax(eager_rows(proxy, seq, rows))
    checked = 0
    for index in range(top.shape[0]):
        if margin[index].min() < NEAR_TIE:
            continue  # a near-tie could flip between SDPA and eager; not a scoring question
        copied = {
            int(i)
            for r, i in enumerate(top[index].tolist())
            if built.answer.start <= i < built.answer.end and seq[i] == emitted[r]
        }
        layer, head = divmod(index, proxy.num_heads)
        assert result.scores[layer, head] == pytest.approx(len(copied) / len(built.answer))
        checked += 1
    assert checked > 200
    assert result.scores.max() == 1.0  # some head copies the whole answer
    assert result.scores.min() == 0.0


# ---- the rerank method -----------------------------------------------------------------------

QUERY = "Which city is the capital of France?"
DOCS = [
    "Bananas are rich in potassium and grow in tropical climates.",
    "The stock market fell sharply on Monday after rate fears.",
    "Paris is the capital and largest city of France.",
    "Photosynthesis converts light energy into chemical energy in plants.",
]


def test_methods_are_lab_methods():
    assert {"icr-retrieval", "icr-retrieval-reattn"} <= set(RERANK_VARIANTS)
    assert not {"icr-retrieval", "icr-retrieval-reattn"} & set(METHODS)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["icr-retrieval", "icr-retrieval-reattn"])
def test_retrieval_heads_rank_the_relevant_document_first(proxy, method):
    reranker = Reranker(proxy, method=RERANK_VARIANTS[method])
    profile = rp.RetrievalHeadProfile.load(
        rp.retrieval_profile_path(default_models_dir(), "smollm2-135m")
    )
    assert isinstance(reranker.scorer.heads, HeadSet) and reranker.scorer.heads == profile.heads
    for order in ([0, 1, 2, 3], [2, 0, 1, 3], [0, 1, 3, 2]):
        results = reranker.rerank(QUERY, DOCS, first_stage_order=order)
        assert results[0].index == 2
        assert results.method == method
