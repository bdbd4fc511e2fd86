"""``ragattn eval context``: budget matching and metrics on a hand-built example (whitespace
tokens, exact numbers), the outcome cache, and the command end to end on two HotpotQA questions
with the real proxy."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragattn.cli import app
from ragattn.cli.eval import CONTEXT_SETS, CONTEXT_SYSTEMS
from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation import context as ctx
from ragattn.lab.evaluation.context_report import OutcomeCache, summarize
from ragattn.types import Budget, Document, to_plain

QUESTION = ctx.ContextQuestion(
    qid="q1",
    query="Which river flows through Paris?",
    candidates=(
        Document(text="Alpha beta gamma delta. Epsilon zeta eta. Theta iota kappa lambda mu."),
        Document(text="Paris is in France. The river is the Seine.", title="Paris"),
        Document(text="Bananas are yellow fruit. Epsilon zeta eta."),
    ),
    gold=(("Epsilon zeta eta.",), ("The river is the Seine.",), ()),
    answers=("Seine",),
)
"""Sentences of 4, 3, 5 | 4, 5 | 4, 3 whitespace tokens; candidate 2 repeats candidate 0's gold
sentence, which counts only in candidate 0."""


def _score(kept: ctx.KeptContext, tokenizer: Any, limit: int) -> ctx.Outcome:
    return ctx.score_context(
        QUESTION,
        kept,
        system="rerank-stuff",
        budget="13 tokens",
        tokens=ctx.n_tokens(tokenizer, kept.text),
        limit=limit,
        seconds=0.5,
    )


def test_stuffing_keeps_whole_sentences_in_order_until_the_next_would_not_fit(
    ws_tokenizer: Any,
) -> None:
    kept = ctx.stuff(QUESTION, [1, 0, 2], 13, ws_tokenizer)
    assert kept.spans == ((1, 0, 19), (1, 20, 43), (0, 0, 23))
    assert kept.text == "Paris is in France. The river is the Seine.\n\nAlpha beta gamma delta."
    assert ctx.n_tokens(ws_tokenizer, kept.text) == 13
    # 4 + 3 = 7 tokens; the 5-token sentence would make 12 > 11, and stuffing stops there (a
    # 4-token sentence of a later candidate would still fit: it is not tried).
    first = ctx.stuff(QUESTION, range(3), 11, ws_tokenizer)
    assert first.spans == ((0, 0, 23), (0, 24, 41))
    assert ctx.n_tokens(ws_tokenizer, first.text) == 7
    assert ctx.stuff(QUESTION, [1], 3, ws_tokenizer) == ctx.KeptContext(text="", spans=())


@pytest.mark.parametrize("limit", range(0, 32))
def test_stuffing_never_exceeds_the_tokens_given(ws_tokenizer: Any, limit: int) -> None:
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0]):
        assert ctx.n_tokens(ws_tokenizer, ctx.stuff(QUESTION, order, limit, ws_tokenizer).text) <= (
            limit
        )


def test_metrics_count_gold_verbatim_in_its_own_candidate(ws_tokenizer: Any) -> None:
    outcome = _score(ctx.stuff(QUESTION, [1, 0, 2], 13, ws_tokenizer), ws_tokenizer, 13)
    assert (outcome.gold_kept, outcome.gold_present) == (1, 2)
    assert outcome.answer_kept is True
    assert (outcome.passages, outcome.tokens, outcome.over) == (2, 13, False)
    # Candidate 2 holds "Epsilon zeta eta." too, but candidate 0's gold is not kept.
    elsewhere = _score(ctx.stuff(QUESTION, [2], 100, ws_tokenizer), ws_tokenizer, 7)
    assert (elsewhere.gold_kept, elsewhere.answer_kept, elsewhere.passages) == (0, False, 1)
    over = _score(ctx.KeptContext(text="a b c", spans=((2, 0, 5),)), ws_tokenizer, 2)
    assert over.over


def test_rows_average_evidence_over_questions_with_gold_and_answers_over_extractive_ones() -> None:
    def outcome(qid: str, kept: int, present: int, answer: bool | None, tokens: int) -> ctx.Outcome:
        return ctx.Outcome(
            qid=qid,
            system="lexical",
            budget="ratio 0.2",
            tokens=tokens,
            limit=10,
            seconds=0.25 * tokens,
            gold_kept=kept,
            gold_present=present,
            answer_kept=answer,
            passages=tokens // 4,
        )

    outcomes = [
        outcome("a", 1, 2, True, 8),
        outcome("b", 2, 2, None, 12),  # a yes/no answer; over the 10 tokens given
        outcome("c", 0, 0, False, 4),  # gold absent from the candidates
    ]
    row = summarize(outcomes, budget="ratio 0.2", system="lexical")
    assert row.evidence_recall == pytest.approx(0.75)
    assert row.answer_kept == pytest.approx(0.5)
    assert (row.passages, row.tokens, row.seconds) == (2.0, 8.0, 2.0)
    assert row.over_ids == ("b",) and row.matched


def test_extractive_answers_leave_out_yes_no_and_noanswer() -> None:
    assert ctx.extractive(["Yes", "no.", "noanswer", " ", "River 3"]) == ["River 3"]


@pytest.mark.parametrize(
    ("text", "budget"),
    [
        ("0.2", Budget(kind="ratio", value=0.2)),
        ("1", Budget(kind="ratio", value=1.0)),
        ("256", Budget(kind="target_tokens", value=256)),
        ("2", Budget(kind="target_tokens", value=2)),
    ],
)
def test_parse_budget_reads_ratios_and_token_counts(text: str, budget: Budget) -> None:
    assert ctx.parse_budget(text) == budget


@pytest.mark.parametrize("text", ["0", "1.5", "256.0", "-3", "many"])
def test_parse_budget_refuses_anything_else(text: str) -> None:
    message = f"budget {text!r} is neither a ratio in (0, 1] nor a token count (an integer > 1)"
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        ctx.parse_budget(text)


def test_outcome_cache_returns_what_it_stored_and_survives_a_cut_line(tmp_path: Path) -> None:
    outcome = ctx.Outcome(
        qid="q1",
        system="one-read",
        budget="256 tokens",
        tokens=250,
        limit=256,
        seconds=1.5,
        gold_kept=1,
        gold_present=2,
        answer_kept=None,
        passages=3,
        spans=((0, 0, 10), (2, 4, 9)),
    )
    OutcomeCache(tmp_path, "hotpotqa", "fp").put(outcome)
    with (tmp_path / "context-hotpotqa.jsonl").open("a") as fh:
        fh.write('{"dataset": "hotpotqa", "qid": "q2", "sys')  # an interrupted write
    cache = OutcomeCache(tmp_path, "hotpotqa", "fp")
    assert cache.get("q1", "one-read", "256 tokens") == outcome
    assert len(cache) == 1
    cache.put(ctx.Outcome.from_record({**to_plain(outcome), "qid": "q3"}))
    assert len(OutcomeCache(tmp_path, "hotpotqa", "fp")) == 2
    assert len(OutcomeCache(tmp_path, "hotpotqa", "other-fingerprint")) == 0


def test_the_command_names_the_library_sets_and_systems() -> None:
    assert tuple(ctx.SETS) == CONTEXT_SETS
    assert (ctx.SYSTEM_UNDER_TEST, *CONTEXT_SYSTEMS) == ctx.SYSTEMS


def test_a_2wiki_slice_never_reaches_training_questions(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="keep offset \\+ limit <= 300"):
        ctx.load_context_set("2wiki", tmp_path, offset=250, limit=100)


def _hotpot_folder(folder: Path, n: int) -> Path:
    """``n`` HotpotQA-layout questions; question ``i`` asks about Town ``i``, whose second
    sentence is the gold one and names the answer."""
    records = [
        {
            "_id": f"q{i}",
            "question": f"Which river runs through Town {i}?",
            "answer": f"River {i}",
            "supporting_facts": [[f"Town {i}", 1]],
            "context": [
                ["Weather", ["It rained a lot that year.", "Summers are warm and dry."]],
                [f"Town {i}", [f"Town {i} is a small place.", f"Town {i} lies on River {i}."]],
                ["Bridges", ["The old bridge is made of stone.", "It was built long ago."]],
            ],
        }
        for i in range(n)
    ]
    (folder / "hotpotqa").mkdir(parents=True)
    (folder / "hotpotqa" / "hotpot_dev_distractor_v1.shared.json").write_text(json.dumps(records))
    return folder


def test_eval_context_matches_every_system_to_one_read_and_resumes_from_its_cache(
    tmp_path: Path,
) -> None:
    data = _hotpot_folder(tmp_path / "data", 2)
    out = tmp_path / "report.json"
    args = ["eval", "context", "--dataset", "hotpotqa", "--data-dir", str(data)]
    args += ["--budget", "0.5", "--dtype", "float32", "--cache-dir", str(tmp_path / "cache")]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["num_questions"] == 2 and report["num_with_answer"] == 2
    assert report["cpu_capability"] and report["threads"] >= 1
    default = [s for s in ctx.SYSTEMS if s != "compress"]  # compress: one-read's own context
    assert [r["system"] for r in report["rows"]] == default
    tokens = {o["qid"]: o["tokens"] for o in report["outcomes"] if o["system"] == "one-read"}
    assert all(t > 0 for t in tokens.values())
    for o in report["outcomes"]:
        if o["system"] in ctx.MATCHED:
            assert o["limit"] == tokens[o["qid"]]
        if o["system"] in ("rerank-stuff", "first-stage"):
            assert o["tokens"] <= o["limit"]
    assert "| ratio 0.5 | one-read * |" in result.output
    cache = tmp_path / "cache" / "context-hotpotqa.jsonl"
    lines = cache.read_text().splitlines()
    assert len(lines) == 2 * len(default)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert cache.read_text().splitlines() == lines  # nothing recomputed
    table = result.output[result.output.index("| budget") :]
    assert table in again.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--system", "lexical,bogus"], "unknown systems ['bogus']"),
        (["--budget", "1.5"], "budget '1.5' is neither a ratio"),
        (["--offset", "2"], "--offset 2 skips every question of hotpotqa"),
        (["--language", "xx"], "unknown language 'xx'; valid: auto, am, ar"),
        (["--embed-dtype", "half"], "unknown dtype 'half'; use one of: auto, float32, bfloat16"),
    ],
)
def test_eval_context_refuses_bad_options_before_loading_the_proxy(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    data = _hotpot_folder(tmp_path, 2)
    args = ["eval", "context", "--dataset", "hotpotqa", "--data-dir", str(data), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_eval_context_answers_help() -> None:
    result = CliRunner().invoke(app, ["eval", "context", "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "ragattn eval context [OPTIONS]" in text
    assert all(name in text for name in (*CONTEXT_SETS, *CONTEXT_SYSTEMS))


def test_squad_questions_read_every_paragraph_of_their_article(data_dir: Path) -> None:
    from ragattn.lab.evaluation.datasets import load_squad

    path = data_dir / "squad-v2" / "dev-v2.0.shared.json"
    alone = load_squad(path, 3)
    questions = ctx.load_context_set("squad", data_dir, limit=3)
    article = json.loads(path.read_text())["data"][0]
    assert [q.qid for q in questions] == [ex.qid for ex in alone]
    for q, ex in zip(questions, alone, strict=True):
        assert [d.text for d in q.candidates] == [p["context"] for p in article["paragraphs"]]
        own = [d.text for d in q.candidates].index(ex.passages[0].text)
        assert q.gold[own] == tuple(ex.passages[0].sentence(i) for i in ex.passages[0].supporting)
        assert not any(g for k, g in enumerate(q.gold) if k != own)


def test_scifact_claims_read_their_bm25_top_20_with_evidence_where_it_was_found(
    data_dir: Path,
) -> None:
    questions = ctx.load_context_set("scifact", data_dir, limit=5)
    evidence: dict[str, set[str]] = {}
    for line in (data_dir / "scifact" / "evidence.jsonl").read_text().splitlines():
        row = json.loads(line)
        evidence.setdefault(str(row["query_id"]), set()).update(row["evidence_sentences"])
    assert len(questions) == 5
    for q in questions:
        assert len(q.candidates) == ctx.SCIFACT_TOP_K and not q.answers
        found = {g.strip() for gold in q.gold for g in gold}
        assert found <= {s.strip() for s in evidence[q.qid]}
        assert all(g in d.text for d, gold in zip(q.candidates, q.gold, strict=True) for g in gold)


class _CountingScorer:
    """A scorer that takes a known time and counts its forwards."""

    def __init__(self) -> None:
        self.calls = 0

    def score(self, query: str, docs: Any, units: Any) -> tuple[str, int]:
        import time

        self.calls += 1
        time.sleep(0.02)
        return (f"{query}:{len(docs)}", self.calls)


def test_the_forward_memo_shares_a_forward_and_charges_its_seconds_again() -> None:
    from ragattn.lab.evaluation.context_systems import ForwardMemo
    from ragattn.types import Document

    scorer = _CountingScorer()
    memo = ForwardMemo(scorer, size=2)
    docs = [Document(text="a b."), Document(text="c d.")]
    first = scorer.score("q", docs, [(0, 0, 4)])
    assert memo.replayed == 0.0 and scorer.calls == 1
    again = scorer.score("q", [Document(text="a b."), Document(text="c d.")], [(0, 0, 4)])
    assert again is first and scorer.calls == 1
    assert memo.replayed >= 0.02  # the forward's own seconds, charged to the second caller
    scorer.score("q", docs[:1], [(0, 0, 4)])  # other documents: a new forward
    scorer.score("other", docs, [(0, 0, 4)])  # evicts the first (size 2)
    assert scorer.calls == 3
    scorer.score("q", docs, [(0, 0, 4)])
    assert scorer.calls == 4


def test_no_titles_gives_the_same_candidates_as_plain_strings(data_dir: Path) -> None:
    titled = ctx.load_context_set("hotpotqa", data_dir, limit=2)
    plain = ctx.load_context_set("hotpotqa", data_dir, limit=2, titles=False)
    assert all(d.title for q in titled for d in q.candidates)
    for t, p in zip(titled, plain, strict=True):
        assert [d.text for d in p.candidates] == [d.text for d in t.candidates]
        assert all(d.title is None for d in p.candidates)
        assert p.gold == t.gold and p.answers == t.answers and p.units == t.units


def test_a_pool_pads_each_question_with_other_questions_paragraphs(data_dir: Path) -> None:
    own = ctx.load_context_set("hotpotqa", data_dir, limit=6)
    pooled = ctx.load_context_set("hotpotqa", data_dir, limit=6, pool=30)
    for q, p in zip(own, pooled, strict=True):
        assert len(p.candidates) == 30 and len({d.text for d in p.candidates}) == 30
        by_text = dict(zip((d.text for d in p.candidates), p.gold, strict=True))
        # every own candidate is there with its gold; the padding carries none
        assert all(by_text[d.text] == g for d, g in zip(q.candidates, q.gold, strict=True))
        assert sum(1 for g in p.gold if g) == sum(1 for g in q.gold if g)
        assert [d.text for d in p.candidates[:10]] != [d.text for d in q.candidates]
    assert ctx.load_context_set("hotpotqa", data_dir, limit=6, pool=30) == pooled  # fixed order
    with pytest.raises(InvalidInputError, match="only 60 distinct candidates"):
        ctx.load_context_set("hotpotqa", data_dir, limit=6, pool=61)


def test_xquad_asks_one_question_per_article_over_its_paragraphs(tmp_path: Path) -> None:
    article = {
        "title": "Berlin",
        "paragraphs": [
            {"context": "Berlin ist groß. Es hat viele Parks.", "qas": []},
            {
                "context": "Die Stadt wurde am 3. Mai gegründet. Sie liegt an der Spree.",
                "qas": [
                    {
                        "id": "q1",
                        "question": "Woran liegt Berlin?",
                        "answers": [{"answer_start": 49, "text": "Spree"}],
                    },
                    {
                        "id": "q2",
                        "question": "Wann?",
                        "answers": [{"answer_start": 19, "text": "3. Mai"}],
                    },
                ],
            },
        ],
    }
    (tmp_path / "xquad").mkdir()
    (tmp_path / "xquad" / "xquad.de.json").write_text(json.dumps({"data": [article, article]}))
    questions = ctx.load_context_set("xquad-de", tmp_path, limit=1)
    assert [q.qid for q in questions] == ["q1"]  # the first article's first question only
    (q,) = questions
    assert [d.text for d in q.candidates] == [p["context"] for p in article["paragraphs"]]
    assert q.gold == ((), ("Sie liegt an der Spree.",)) and q.answers == ("Spree",)


def test_xquad_draws_the_question_paragraph_the_same_in_every_language(tmp_path: Path) -> None:
    """Five paragraphs with questions: the question's paragraph is drawn by the article's first
    question id (not always the first), and every language's file draws the same."""

    def article(n: int, lang: str) -> dict[str, Any]:
        return {
            "title": f"T{n}",
            "paragraphs": [
                {
                    "context": f"{lang} paragraph {k} of {n}. It ends here.",
                    "qas": [
                        {
                            "id": f"a{n}p{k}",
                            "question": f"{lang} {n} {k}?",
                            "answers": [{"answer_start": 0, "text": lang}],
                        }
                    ],
                }
                for k in range(5)
            ],
        }

    (tmp_path / "xquad").mkdir()
    for lang in ("de", "es"):
        data = {"data": [article(n, lang) for n in range(12)]}
        (tmp_path / "xquad" / f"xquad.{lang}.json").write_text(json.dumps(data))
    german = ctx.load_context_set("xquad-de", tmp_path)
    spanish = ctx.load_context_set("xquad-es", tmp_path)
    assert [q.qid for q in german] == [q.qid for q in spanish]
    owners = [next(k for k, g in enumerate(q.gold) if g) for q in german]
    assert owners == [int(q.qid.rsplit("p", 1)[1]) for q in german]
    assert len(set(owners)) > 1 and owners != [0] * len(owners)
    assert not any(q.ranked for q in german)


def test_bm25_order_ranks_each_questions_candidates_and_marks_them_ranked() -> None:
    q = ctx.ContextQuestion(
        qid="q",
        query="Where is the Spree river?",
        candidates=(
            Document(text="Bananas are yellow."),
            Document(text="The Spree river flows through Berlin."),
            Document(text="A river is water."),
        ),
        gold=((), ("The Spree river flows through Berlin.",), ()),
    )
    (ranked,) = ctx.bm25_ranked([q])
    assert ranked.ranked and not q.ranked
    assert [d.text for d in ranked.candidates][0] == "The Spree river flows through Berlin."
    assert ranked.gold[0] == ("The Spree river flows through Berlin.",)
    assert {d.text for d in ranked.candidates} == {d.text for d in q.candidates}


def test_scifact_is_ranked_by_its_first_stage_and_the_train_claims_are_a_set(
    data_dir: Path,
) -> None:
    test = ctx.load_context_set("scifact", data_dir, limit=2)
    train = ctx.load_context_set("scifact-train", data_dir, limit=2)
    assert all(q.ranked for q in (*test, *train))
    assert not {q.qid for q in test} & {q.qid for q in train}


def test_the_fingerprint_names_a_first_stage_prior_above_zero() -> None:
    systems = _fake_systems()
    today = systems.fingerprint()
    systems.compressor.first_stage_prior = 0.5
    assert systems.fingerprint() != today


def _fake_systems(language: str | None = None) -> Any:
    """:class:`ContextSystems` over stand-ins: no weights to load, no forward."""
    from types import SimpleNamespace

    from ragattn.lab.evaluation.context_systems import ContextSystems

    proxy = SimpleNamespace(name="smollm2-135m", source="hub", dtype="float32", model=None)
    compressor = SimpleNamespace(
        proxy=proxy,
        method="fused",
        selection="documents",
        cascade=None,
        models_dir=None,
        scorer=SimpleNamespace(),
        first_stage_prior=0.0,
    )
    given = {} if language is None else {"language": language}
    return ContextSystems(
        compressor,  # type: ignore[arg-type]
        SimpleNamespace(method="lexical"),  # type: ignore[arg-type]
        SimpleNamespace(method="minilm"),  # type: ignore[arg-type]
        tokenizer=SimpleNamespace(),  # type: ignore[arg-type]
        **given,
    )


def test_the_fingerprint_names_a_language_and_keeps_todays_for_auto() -> None:
    from ragattn.fingerprint import model_fingerprint

    default = _fake_systems()
    today = model_fingerprint(
        default.compressor.proxy,
        "compress=fused",
        "selection=documents",
        "cascade=None",
        "models=None",
        "lexical=lexical",
        "rerank=minilm",
        f"metrics={ctx.METRICS_VERSION}",
    )
    assert default.language == "auto"
    assert default.fingerprint() == _fake_systems("auto").fingerprint() == today
    german, english = _fake_systems("de").fingerprint(), _fake_systems("en").fingerprint()
    assert len({today, german, english}) == 3
    with pytest.raises(InvalidInputError, match="unknown language 'xx'"):
        _fake_systems("xx")


def test_a_run_refuses_questions_split_by_another_language() -> None:
    from ragattn.lab.evaluation.context_report import evaluate_context

    budgets = [Budget(kind="ratio", value=0.2)]
    with pytest.raises(InvalidInputError, match="questions split as auto, the systems as de"):
        evaluate_context("hotpotqa", [QUESTION], _fake_systems("de"), budgets, progress=False)


def test_the_report_header_names_the_language() -> None:
    from ragattn.lab.evaluation.context_report import ContextReport

    def header(language: str) -> str:
        report = ContextReport(
            dataset="xquad-de",
            language=language,
            num_questions=0,
            num_with_gold=0,
            num_with_answer=0,
            tokenizer="ws",
            cpu_capability="AVX2",
            threads=1,
            fingerprint="fp",
            rows=(),
            outcomes=(),
        )
        return report.to_markdown().splitlines()[1]

    assert header("de").startswith("sentences split by language de;")
    assert header("auto").startswith("sentences split by language auto (each text's script);")


def test_the_language_splits_a_sets_gold_and_every_candidate(tmp_path: Path) -> None:
    text = "Die Stadt wurde am 3. Mai gegründet. Sie liegt an der Spree."
    qa = {"id": "q1", "question": "Wann?", "answers": [{"answer_start": 19, "text": "3. Mai"}]}
    other = {"id": "q2", "question": "Wo?", "answers": [{"answer_start": 0, "text": "Paris"}]}
    articles = [
        {"title": "Berlin", "paragraphs": [{"context": text, "qas": [qa]}]},
        {
            "title": "Paris",
            "paragraphs": [{"context": "Paris liegt an der Seine.", "qas": [other]}],
        },
    ]
    (tmp_path / "xquad").mkdir()
    (tmp_path / "xquad" / "xquad.de.json").write_text(json.dumps({"data": articles}))
    auto = ctx.load_context_set("xquad-de", tmp_path)[0]
    german = ctx.load_context_set("xquad-de", tmp_path, language="de")[0]
    assert (auto.language, german.language) == ("auto", "de")
    assert auto.gold == (("Die Stadt wurde am 3.",),)  # "3." ends a sentence by English rules
    assert german.gold == (("Die Stadt wurde am 3. Mai gegründet.",),)
    assert german.units == (((0, 36), (37, 60)),) and len(auto.units[0]) == 3
    pooled = ctx.load_context_set("xquad-de", tmp_path, language="de", pool=2)
    assert {q.language for q in pooled} == {"de"}
    assert german.units[0] in pooled[0].units
    with pytest.raises(InvalidInputError, match="unknown language 'xx'"):
        ctx.load_context_set("xquad-de", tmp_path, language="xx")
