"""The engine contract: one Budget value, VerbArgs checked once, the client leaving the budget's
check to the service, and a pipeline that shares the service's limit checker and checks a question
once. No model is loaded here."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from ragattn.client import Client
from ragattn.compress import budget as compress_budget
from ragattn.contract import BUDGET_KEYWORDS, VerbArgs, verb_keywords
from ragattn.errors import InputTooLargeError, InvalidInputError
from ragattn.generate import GeneratedAnswer
from ragattn.limits import LimitChecker, Limits
from ragattn.pipeline import PipelineOptions, Question, RAGPipeline
from ragattn.retrieve.corpus import Hit
from ragattn.types import DEFAULT_BUDGET, Budget, Document

ONE = "give exactly one budget: ratio, target_tokens or threshold"
AT_MOST_ONE = "give at most one budget: ratio, target_tokens or threshold"


# --- Budget -----------------------------------------------------------------------------------


def test_budget_is_one_type_everywhere() -> None:
    assert compress_budget.Budget is Budget
    assert Budget.from_args(None, 12, None) == Budget(kind="target_tokens", value=12)
    assert Budget.from_args(0.5).keywords() == {"ratio": 0.5}
    assert Budget.from_args(target_tokens=12).keywords() == {"target_tokens": 12}


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        ("ratio", 0.0, "ratio is the fraction of tokens kept and must be in (0, 1]"),
        ("ratio", float("nan"), "ratio must be a number"),
        ("target_tokens", 2.5, "target_tokens must be a positive integer"),
        ("threshold", 1.5, "threshold must be in [0, 1]"),
        ("threshold", True, "threshold must be a number"),
    ],
)
def test_a_budget_is_valid_by_construction(kind: Any, value: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        Budget(kind=kind, value=value)


def test_a_checked_budget_passes_through_unchecked_but_never_with_a_second_one() -> None:
    budget = Budget(kind="ratio", value=0.25)
    assert Budget.from_args(given=budget) is budget
    with pytest.raises(InvalidInputError, match=re.escape(ONE)):
        Budget.from_args(0.5, given=budget)
    with pytest.raises(InvalidInputError, match=re.escape(ONE)):
        Budget.from_args()


# --- VerbArgs ---------------------------------------------------------------------------------


def test_verb_args_carry_what_each_verb_takes() -> None:
    assert verb_keywords("rerank") == ("top_n",)
    assert verb_keywords("compress") == ("ratio", "target_tokens", "threshold")
    assert verb_keywords("rerank_compress") == ("ratio", "target_tokens", "threshold", "top_n")
    args = VerbArgs.check("rerank_compress", {"top_n": 2, "target_tokens": 10})
    assert args.params() == {
        "top_n": 2,
        "keep_order": True,
        "language": "auto",
        "target_tokens": 10,
    }
    assert (args.top_n, args.budget) == (2, Budget(kind="target_tokens", value=10))
    assert VerbArgs(verb="rerank", top_n=3).params() == {"top_n": 3}
    compress = VerbArgs.check("compress", {})
    assert compress.budget is DEFAULT_BUDGET
    assert compress.params() == {
        "keep_order": True,
        "language": "auto",
        "ratio": 0.2,
        "max_tokens": 1024,
    }


@pytest.mark.parametrize(
    ("verb", "given", "message"),
    [
        ("rerank", {"ratio": 0.5}, "rerank takes no budget; use compress or rerank-compress"),
        ("compress", {"ratio": 0.5, "top_n": 2}, "compress keeps every document"),
        ("compress", {"ratio": 0.5, "threshold": 0.5}, AT_MOST_ONE),
        ("compress", {"budget": DEFAULT_BUDGET, "ratio": 0.5}, AT_MOST_ONE),
        ("rerank_compress", {"max_tokens": 0}, "max_tokens must be a positive integer"),
        ("rerank_compress", {"top_n": 0}, "top_n must be a positive integer or None"),
    ],
)
def test_verb_args_are_checked_once_with_the_library_messages(
    verb: Any, given: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        VerbArgs.check(verb, given)


# --- the client sends the budget; the service checks it ----------------------------------------


def _compressed(text: str) -> dict[str, Any]:
    return {
        "compressed_text": text,
        "documents": [
            {"index": 0, "text": text, "kept_spans": [], "sentence_scores": [0.5]},
        ],
        "origin_tokens": 4,
        "compressed_tokens": 4,
        "ratio": 1.0,
        "tokenizer": "t",
        "method": "m",
        "warnings": [],
    }


def test_client_sends_a_checked_budget_as_its_keyword_and_raw_ones_as_given() -> None:
    sent: list[dict[str, Any]] = []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=_compressed("Paris."))

    with Client("http://test", transport=httpx.MockTransport(server)) as client:
        client.compress("q", "Paris.", budget=Budget(kind="target_tokens", value=8))
        client.compress("q", "Paris.", ratio=0.5, threshold=0.5)  # the service says what is wrong
    assert sent[0] == {"query": "q", "keep_order": True, "context": "Paris.", "target_tokens": 8}
    assert sent[1]["ratio"] == 0.5 and sent[1]["threshold"] == 0.5


def test_client_sends_a_ratios_ceiling_as_max_tokens() -> None:
    sent: list[dict[str, Any]] = []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=_compressed("Paris."))

    capped = Budget(kind="ratio", value=0.2, max_tokens=1024)
    with Client("http://test", transport=httpx.MockTransport(server)) as client:
        client.compress("q", "Paris.", ratio=0.2, max_tokens=1024)
        client.compress("q", "Paris.", budget=capped)
        args = VerbArgs(verb="compress", budget=capped)
        client.compress_checked("q", [Document(text="Paris.")], args)
    for body in sent:
        assert (body["ratio"], body["max_tokens"]) == (0.2, 1024)


def test_the_client_sends_no_budget_when_given_none() -> None:
    # The service gives it DEFAULT_BUDGET (tests/integrations/test_default_budget_doors.py); the
    # client refuses nothing locally and sends a ceiling given alone as it is.
    sent: list[dict[str, Any]] = []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=_compressed("Paris."))

    with Client("http://test", transport=httpx.MockTransport(server)) as client:
        client.compress("q", "Paris.")
        client.compress("q", "Paris.", max_tokens=64)
    budgets = [{k: v for k, v in b.items() if k in (*BUDGET_KEYWORDS, "max_tokens")} for b in sent]
    assert budgets == [{}, {"max_tokens": 64}]


def test_an_adapter_without_a_budget_keeps_the_default_and_one_budget_passes_through() -> None:
    from ragattn.integrations import compress_args

    assert compress_args(None, None, None).compress_budget is DEFAULT_BUDGET
    assert compress_args(None, None, None).compress_budget.keywords() == {
        "ratio": 0.2,
        "max_tokens": 1024,
    }
    assert compress_args(None, 20, None).budget == Budget(kind="target_tokens", value=20)


# --- the pipeline shares the service's checker and checks a question once ----------------------


class _Words:
    """A slow-path tokenizer: one token per whitespace-separated word."""

    def __call__(self, texts: Sequence[str], **_: Any) -> dict[str, Any]:
        spans = [[m.span() for m in re.finditer(r"\S+", t)] for t in texts]
        return {"offset_mapping": spans, "input_ids": [list(range(len(s))) for s in spans]}


class _CountingChecker(LimitChecker):
    def __init__(self) -> None:
        super().__init__(_Words(), Limits(max_query_tokens=4))
        self.query_checks = 0

    def check_query(self, query: str, *, what: str = "query", prechecked: bool = False) -> int:
        self.query_checks += 1
        return super().check_query(query, what=what, prechecked=prechecked)


class _Index:
    def search(self, query: str, k: int = 10, *, mode: Any = "hybrid") -> list[Hit]:
        return [Hit(doc_id="a", score=1.0, rank=1, text="Paris is in France.", index=0)]


class _Generator:
    identity = "echo:v1"

    def generate(self, question: str, context_passages: Sequence[str]) -> GeneratedAnswer:
        return GeneratedAnswer(
            text=question, prompt_tokens=1, completion_tokens=1, seconds=0.0, model="echo"
        )


def test_pipeline_uses_the_checker_it_is_given_and_checks_a_question_once() -> None:
    checker = _CountingChecker()
    pipe = RAGPipeline(_Index(), generator=_Generator(), limits=checker)
    options = PipelineOptions(top_k=1, top_n=1, mode="bm25")
    question = pipe.check_question("where is Paris?")
    assert checker.query_checks == 1
    assert pipe.ask(question, options).answer.text == "where is Paris?"
    assert checker.query_checks == 1  # a Question is trusted by every stage
    pipe.ask("where is Paris?", options)
    assert checker.query_checks == 2
    with pytest.raises(InputTooLargeError, match="question has 5 tokens; the limit is 4"):
        pipe.ask("where is Paris, in France?", options)
    assert isinstance(question, Question)
    assert options.budget == Budget(kind="ratio", value=0.2, max_tokens=1024)
