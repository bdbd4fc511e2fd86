"""The first screen is right: with several passages, the compressor keeps the sentence that answers
the question, not a same-type sentence of another passage (issue 28 item 4).

Real forwards of the packaged proxy with the packaged probes. The cases were written before the
document-aware selection was fitted (tests/data/README.md) and fit nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragattn.compress import Compressor
from ragattn.demo import DOCUMENTS, QUERY
from ragattn.types import Document

CASES = json.loads(
    (Path(__file__).parents[2] / "data" / "multidoc_cases.json").read_text(encoding="utf-8")
)["cases"]
RATIO = 0.3
"""The demo's budget."""


@pytest.fixture(scope="module")
def sentinel(proxy: Any) -> Compressor:
    return Compressor(proxy)  # the defaults: sentinel, document-aware selection


def _docs(case: dict[str, Any]) -> list[Document]:
    return [Document(id=d["id"], title=d["title"], text=d["text"]) for d in case["documents"]]


def _score_of(result: Any, sentence: str) -> float:
    for doc in result.documents:
        for (start, end), score in zip(doc.sentence_spans, doc.sentence_scores, strict=True):
            if doc.document.text[start:end] == sentence:
                return float(score)
    raise AssertionError(f"sentence not found: {sentence!r}")


def test_the_default_compressor_is_document_aware(sentinel: Compressor) -> None:
    assert sentinel.selection == "documents"
    assert sentinel.document_selection() is not None


KNOWN_MISSES = {
    "md-01": "the Titanic's sinking sentence (0.289) loses to the Lusitania's (0.293) by a hair",
    "md-03": "the Apollo 12 opening sentence outscores Apollo 11's landing sentence",
    "md-05": "the sentence probe gives Kilimanjaro's height 0.06 in the document it ranks first",
}
"""Cases the document-aware selection still gets wrong (measured 2026-12-03 in fp32, title links
included, with
``studies/first_screen.py``, BENCHMARKS.md §3). They stay visible rather than being fitted: the
cases fit nothing. The xfails are strict: a case that starts passing fails the run until it is
moved out of this list."""


def _keeps_every_answer(compressor: Compressor, case: dict[str, Any]) -> bool:
    out = compressor.compress(case["query"], _docs(case), ratio=RATIO)
    return all(sentence in out.compressed_text for sentence in case["keep"])


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=c["id"],
            marks=[pytest.mark.xfail(reason=KNOWN_MISSES[c["id"]], strict=True)]
            if c["id"] in KNOWN_MISSES
            else [],
        )
        for c in CASES
    ],
)
def test_the_answer_sentence_is_kept_and_outranks_the_distractor(
    sentinel: Compressor, case: dict[str, Any]
) -> None:
    out = sentinel.compress(case["query"], _docs(case), ratio=RATIO)
    for sentence in case["keep"]:
        assert sentence in out.compressed_text
        assert _score_of(out, sentence) > _score_of(out, case["distractor"])


def test_documents_selection_answers_more_cases_than_sentences_selection(
    sentinel: Compressor, proxy: Any
) -> None:
    """The measured claim behind the default: over the fresh cases and the demo, the
    document-aware selection keeps every answer sentence in more of them than the sentence probe
    alone (4 of 7 against 2 of 7 when measured)."""
    plain = Compressor(proxy, selection="sentences")

    def answered(compressor: Compressor) -> int:
        hits = sum(_keeps_every_answer(compressor, c) for c in CASES)
        text = compressor.compress(QUERY, list(DOCUMENTS), ratio=RATIO).compressed_text  # all six
        return hits + ("completed on 31 March 1889" in text)

    assert answered(sentinel) > answered(plain)


def test_over_all_six_demo_passages_the_completion_date_is_kept(sentinel: Compressor) -> None:
    out = sentinel.compress(QUERY, list(DOCUMENTS), ratio=RATIO)
    assert "completed on 31 March 1889" in out.compressed_text


def test_over_all_six_demo_passages_the_other_monuments_date_is_dropped(
    sentinel: Compressor,
) -> None:
    out = sentinel.compress(QUERY, list(DOCUMENTS), ratio=RATIO)
    assert "dedicated on 28 October 1886" not in out.compressed_text


def _demo_screen(proxy: Any, sentinel: Compressor) -> Any:
    """The two-pass screen (``ragattn demo`` before the one read): the default reranker's top
    three, compressed to 30 %."""
    from ragattn.rerank import Reranker

    ranked = Reranker(proxy).rerank(QUERY, DOCUMENTS, top_n=3)
    return sentinel.compress(QUERY, [r.document for r in ranked], ratio=RATIO)


def test_on_the_demo_screen_the_two_answer_sentences_score_highest(
    proxy: Any, sentinel: Compressor
) -> None:
    out = _demo_screen(proxy, sentinel)
    scored = sorted(
        (
            (float(score), doc.document.text[start:end])
            for doc in out.documents
            for (start, end), score in zip(doc.sentence_spans, doc.sentence_scores, strict=True)
        ),
        reverse=True,
    )
    top_two = " ".join(text for _, text in scored[:2])
    assert "designed by the engineers" in top_two
    assert "completed on 31 March 1889" in top_two


def test_the_demo_output_keeps_the_completion_date_and_no_other_monuments(proxy: Any) -> None:
    """``ragattn demo``'s own output: the context for the generator, one read of the six passages
    at the demo's 30 %, keeps the completion date and the designers, and no other monument's
    date (the Statue of Liberty's 1886)."""
    from typer.testing import CliRunner

    from ragattn.cli import app

    result = CliRunner().invoke(app, ["demo"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    context = flat.split("the context for the generator", 1)[1].split("rerank and stuff", 1)[0]
    assert "completed on 31 March 1889" in context
    assert "Maurice Koechlin and Émile Nouguier" in context
    assert "1886" not in context and "Statue of Liberty" not in context
    assert "one read: the candidates ranked (sentinel:document-probe" in flat
    stuffed = flat.split("rerank and stuff", 1)[1]
    assert "minilm order" in stuffed


def test_one_document_is_scored_the_same_under_both_selections(proxy: Any) -> None:
    doc = [_docs(CASES[0])[2]]
    aware = Compressor(proxy).compress(CASES[0]["query"], doc, ratio=RATIO)
    plain = Compressor(proxy, selection="sentences").compress(CASES[0]["query"], doc, ratio=RATIO)
    assert aware == plain


def test_sentences_selection_keeps_the_sentence_probes_scores(proxy: Any) -> None:
    """``selection="sentences"`` is the sentence probe alone: its scores are the probe's keep
    probabilities of the same forward, which the document-aware scores differ from."""
    case = CASES[0]
    plain = Compressor(proxy, selection="sentences")
    aware = Compressor(proxy)
    docs = _docs(case)
    p = plain.compress(case["query"], docs, ratio=RATIO)
    a = aware.compress(case["query"], docs, ratio=RATIO)
    prepared_docs, units = plain._prepare(case["query"], docs)
    probe_scores, _ = plain.score_units(case["query"], prepared_docs, units)
    plain_scores = [s for d in p.documents for s in d.sentence_scores]
    assert plain_scores == pytest.approx(list(probe_scores), abs=1e-12)
    assert plain.document_selection() is None
    assert plain_scores != pytest.approx([s for d in a.documents for s in d.sentence_scores])
