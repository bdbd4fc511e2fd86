"""A ratio budget's token ceiling (``max_tokens``) and the default ceiling of the front doors'
budgets: the limit, the checks, the wire keywords, the cache keys and the defaults. No model is
loaded here (the read under the default budget is ``tests/unit/compress/test_context_ceiling.py``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from ragattn.cache import cache_key
from ragattn.compress.cascade import DEFAULT_CASCADE
from ragattn.contract import VerbArgs
from ragattn.errors import InvalidInputError
from ragattn.pipeline import FLOWS, PipelineOptions
from ragattn.types import DEFAULT_BUDGET, DEFAULT_MAX_CONTEXT_TOKENS, MAX_TARGET_TOKENS, Budget

CAPPED = Budget(kind="ratio", value=0.2, max_tokens=1024)
PLAIN = Budget(kind="ratio", value=0.2)
TOKENS_20, TOKENS_100 = 20 * 128, 100 * 128
"""The context of 20 and of 100 candidates of ~128 tokens."""


# --- the limit --------------------------------------------------------------------------------


def test_the_ceiling_binds_only_past_it() -> None:
    assert CAPPED.token_limit(TOKENS_20) == PLAIN.token_limit(TOKENS_20) == 512
    assert PLAIN.token_limit(TOKENS_100) == 2560
    assert CAPPED.token_limit(TOKENS_100) == 1024
    assert CAPPED.token_limit(1) == 1  # at least one token, as without a ceiling
    assert Budget(kind="ratio", value=1.0, max_tokens=7).token_limit(10**6) == 7


def test_the_default_ceiling_keeps_the_one_reads_room_under_attentions_ceiling() -> None:
    """1,024 is why: its room (1.5 x 1,024) fits the 2,048 tokens attention reads, so the
    default budget never fills past the read, where 0.2 of 100 candidates uncapped would."""
    assert DEFAULT_MAX_CONTEXT_TOKENS == 1024
    assert DEFAULT_CASCADE.ceiling == 2048 and DEFAULT_CASCADE.min_room == 1.5
    assert DEFAULT_CASCADE.min_room * DEFAULT_MAX_CONTEXT_TOKENS <= DEFAULT_CASCADE.ceiling
    assert not DEFAULT_CASCADE.fills(TOKENS_100, CAPPED.token_limit(TOKENS_100))
    assert DEFAULT_CASCADE.fills(TOKENS_100, PLAIN.token_limit(TOKENS_100))
    for tokens in (TOKENS_20, TOKENS_100, 10 * TOKENS_100):
        share = DEFAULT_CASCADE.read_share(tokens, CAPPED.token_limit(tokens))
        assert share is not None and share * tokens <= DEFAULT_CASCADE.ceiling


# --- the checks -------------------------------------------------------------------------------

POSITIVE = f"max_tokens must be a positive integer of at most {MAX_TARGET_TOKENS}"


@pytest.mark.parametrize(
    ("kind", "value", "max_tokens", "message"),
    [
        ("ratio", 0.2, 0, POSITIVE),
        ("ratio", 0.2, -5, POSITIVE),
        ("ratio", 0.2, True, POSITIVE),
        ("ratio", 0.2, 512.0, POSITIVE),
        ("ratio", 0.2, "512", POSITIVE),
        ("ratio", 0.2, MAX_TARGET_TOKENS + 1, POSITIVE),
        ("ratio", 0.2, 10**400, POSITIVE),
        (
            "target_tokens",
            64,
            512,
            "max_tokens is the token ceiling of a ratio budget; send it with ratio, not with "
            "target_tokens",
        ),
        ("threshold", 0.5, 512, "send it with ratio, not with threshold"),
        ("ratio", 1.5, 512, "ratio is the fraction of tokens kept"),  # the ratio is named first
    ],
)
def test_a_ceiling_is_a_positive_integer_on_a_ratio_only(
    kind: Any, value: Any, max_tokens: Any, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        Budget(kind=kind, value=value, max_tokens=max_tokens)


def test_the_largest_ceiling_is_accepted() -> None:
    assert Budget(kind="ratio", value=0.5, max_tokens=MAX_TARGET_TOKENS).max_tokens == (
        MAX_TARGET_TOKENS
    )


def test_from_args_takes_the_ceiling_with_a_ratio_only() -> None:
    assert Budget.from_args(0.2, max_tokens=1024) == CAPPED
    with pytest.raises(InvalidInputError, match=re.escape("give exactly one budget")):
        Budget.from_args(max_tokens=1024)
    with pytest.raises(InvalidInputError, match=re.escape("not with target_tokens")):
        Budget.from_args(target_tokens=64, max_tokens=1024)
    with pytest.raises(InvalidInputError, match=re.escape("max_tokens is part of the budget")):
        Budget.from_args(given=PLAIN, max_tokens=1024)


# --- the wire keywords and the cache keys -----------------------------------------------------


def test_keywords_carry_the_ceiling_when_set() -> None:
    assert CAPPED.keywords() == {"ratio": 0.2, "max_tokens": 1024}
    assert PLAIN.keywords() == {"ratio": 0.2}
    assert Budget.from_args(**CAPPED.keywords()) == CAPPED  # the keywords rebuild the budget


def test_a_ceiling_makes_another_budget_and_another_cache_key() -> None:
    assert CAPPED != PLAIN and hash(CAPPED) != hash(PLAIN)
    assert Budget(kind="ratio", value=0.2, max_tokens=1024) == CAPPED
    assert hash(CAPPED) == hash(Budget(kind="ratio", value=0.2, max_tokens=1024))
    params = [VerbArgs(verb="compress", budget=b).params() for b in (PLAIN, CAPPED)]
    assert params[1] == {**params[0], "max_tokens": 1024}
    keys = {
        cache_key(model="m", route="compress:v1", params=p, query="q", documents=["d"])
        for p in params
    }
    assert len(keys) == 2


def test_verb_args_take_the_ceiling_as_a_keyword() -> None:
    args = VerbArgs.check("compress", {"ratio": 0.2, "max_tokens": 1024})
    assert args.budget == CAPPED
    # no budget: the default every door gives; a ceiling alone replaces the default budget's
    assert Budget(kind="ratio", value=0.2, max_tokens=DEFAULT_MAX_CONTEXT_TOKENS) == DEFAULT_BUDGET
    alone = VerbArgs.check("rerank_compress", {"max_tokens": 64})
    assert alone.budget == Budget(kind="ratio", value=0.2, max_tokens=64)
    assert VerbArgs.check("compress", {}).budget is DEFAULT_BUDGET
    with pytest.raises(InvalidInputError, match="rerank takes no budget"):
        VerbArgs.check("rerank", {"max_tokens": 64})


# --- the pipeline's defaults ------------------------------------------------------------------


@pytest.mark.parametrize("flow", FLOWS)
def test_the_pipelines_default_budget_has_the_ceiling(flow: Any) -> None:
    options = PipelineOptions(flow=flow)
    assert options.budget.max_tokens == options.max_context_tokens == DEFAULT_MAX_CONTEXT_TOKENS
    assert options.budget.kind == "ratio"
    # the one read's is every door's; two passes keep half of their five passages
    assert (options.budget == DEFAULT_BUDGET) is (flow == "one_read")
    assert options.budget.value == (0.2 if flow == "one_read" else 0.5)


def test_a_callers_ratio_keeps_no_ceiling_unless_one_is_given() -> None:
    assert PipelineOptions(ratio=0.2).budget == PLAIN
    assert PipelineOptions(ratio=0.2).max_context_tokens is None
    assert PipelineOptions(ratio=0.2, max_context_tokens=1024).budget == CAPPED
    assert PipelineOptions(max_context_tokens=300).budget == Budget(
        kind="ratio", value=0.2, max_tokens=300
    )
    assert PipelineOptions(compress=False).max_context_tokens is None
    # the resolved options are the cache key's: a ceiling is another key
    assert PipelineOptions().params() != PipelineOptions(ratio=0.2).params()
    assert (
        PipelineOptions().params() == PipelineOptions(ratio=0.2, max_context_tokens=1024).params()
    )


def test_the_pipeline_refuses_a_ceiling_it_cannot_honour() -> None:
    with pytest.raises(
        InvalidInputError,
        match=re.escape("max_context_tokens caps the compression budget and does not apply with "),
    ):
        PipelineOptions(compress=False, max_context_tokens=512)
    for bad in (0, -1, True, 2.5, MAX_TARGET_TOKENS + 1):
        with pytest.raises(InvalidInputError, match="max_context_tokens must be a positive"):
            PipelineOptions(max_context_tokens=bad)
