"""The default request budget follows the deadline (issue 45 item 6): derived from the stated or
measured throughput of the slowest verb, an explicit ``RAGATTN_MAX_REQUEST_TOKENS`` always wins,
and the 413 says how the limit was chosen."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from ragattn.errors import ConfigError, InputTooLargeError
from ragattn.limits import LimitChecker, Limits
from ragattn.request_budget import (
    MAX_TOKENS,
    MEASURE_TOKENS,
    MIN_TOKENS,
    RequestBudget,
    choose_budget,
    derive_budget,
    measure_tokens_per_second,
    synthetic_input,
)
from ragattn.settings import Settings
from ragattn.types import Document


@pytest.mark.parametrize(
    ("tokens_per_second", "deadline_s", "budget"),
    [
        (600.0, 30.0, 14336),  # 14,400 rounded down to a multiple of 256
        (100.0, 30.0, 2304),  # 2,400
        (20.0, 80.0, 1280),  # exactly 1,280
        (10.0, 30.0, MIN_TOKENS),  # 240: a slow machine still takes a few passages
        (5000.0, 30.0, MAX_TOKENS),  # 120,000: a GPU does not lift the ceiling
    ],
)
def test_the_budget_is_what_the_deadline_allows_in_steps_of_256(
    tokens_per_second: float, deadline_s: float, budget: int
) -> None:
    assert derive_budget(tokens_per_second, deadline_s) == budget


def _never() -> float:
    raise AssertionError("measured although the budget did not need it")


def test_an_explicit_setting_wins_over_a_stated_throughput_and_the_measurement() -> None:
    settings = Settings.from_env(
        {
            "RAGATTN_MAX_REQUEST_TOKENS": "3000",
            "RAGATTN_TOKENS_PER_SECOND": "100",
            "RAGATTN_REQUEST_TIMEOUT_S": "30",
        }
    )
    assert choose_budget(settings, _never) == RequestBudget(tokens=3000, source="setting")


def test_a_stated_throughput_gives_the_derived_budget_without_measuring() -> None:
    settings = Settings.from_env(
        {"RAGATTN_TOKENS_PER_SECOND": "100", "RAGATTN_REQUEST_TIMEOUT_S": "30"}
    )
    budget = choose_budget(settings, _never)
    assert (budget.tokens, budget.source, budget.tokens_per_second) == (2304, "stated", 100.0)
    assert budget.basis() == (
        "RAGATTN_MAX_REQUEST_TOKENS unset: 0.8 × the 30 s deadline × 100 tokens/s stated by "
        "RAGATTN_TOKENS_PER_SECOND, in steps of 256 within 1024..16384; set it to change the limit"
    )


def test_unset_the_budget_is_measured_once_on_the_deadline() -> None:
    calls: list[int] = []

    def measure() -> float:
        calls.append(1)
        return 250.0

    budget = choose_budget(Settings(request_timeout_s=30.0), measure)
    assert (budget.tokens, budget.source, calls) == (5888, "measured", [1])  # 6,000 -> 5,888
    assert "measured at start-up" in (budget.basis() or "")


def test_without_a_deadline_or_a_measurement_the_budget_is_the_ceiling() -> None:
    assert choose_budget(Settings(request_timeout_s=0), _never).source == "no_deadline"
    unmeasured = choose_budget(Settings(), None)
    assert (unmeasured.tokens, unmeasured.source) == (MAX_TOKENS, "not_measured")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAGATTN_MAX_REQUEST_TOKENS": "0"}, "RAGATTN_MAX_REQUEST_TOKENS must be a positive"),
        ({"RAGATTN_TOKENS_PER_SECOND": "0"}, "RAGATTN_TOKENS_PER_SECOND must be a number > 0"),
        ({"RAGATTN_TOKENS_PER_SECOND": "fast"}, "RAGATTN_TOKENS_PER_SECOND must be a number"),
    ],
)
def test_bad_budget_settings_are_config_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Settings.from_env(env)


def test_the_413_says_how_the_limit_was_derived(proxy: Any) -> None:
    budget = choose_budget(Settings(tokens_per_second=20.0, request_timeout_s=80.0), None)
    checker = LimitChecker(proxy.tokenizer, Limits.from_settings(Settings(), budget))
    with pytest.raises(InputTooLargeError) as refused:
        checker.check("capital?", [Document(text="Paris is the capital of France. " * 300)])
    message = str(refused.value)
    assert "the limit is 1280 per request (RAGATTN_MAX_REQUEST_TOKENS unset: 0.8 × the 80 s" in (
        message
    )
    assert "set it to change the limit" in message
    # An explicit setting is named as before.
    explicit = LimitChecker(proxy.tokenizer, Limits.from_settings(Settings(max_request_tokens=50)))
    with pytest.raises(InputTooLargeError, match=re.escape("(RAGATTN_MAX_REQUEST_TOKENS);")):
        explicit.check("capital?", [Document(text="Paris is the capital of France. " * 20)])


def test_the_synthetic_input_has_the_stated_number_of_proxy_tokens(proxy: Any) -> None:
    query, docs, counted = synthetic_input(proxy.tokenizer)
    tokens = proxy.tokenizer(query, add_special_tokens=False)["input_ids"]
    recount = len(tokens) + sum(
        len(proxy.tokenizer(d.text, add_special_tokens=False)["input_ids"]) for d in docs
    )
    assert counted == recount
    assert abs(counted - MEASURE_TOKENS) <= 16  # token boundaries move a little on re-encoding
    assert synthetic_input(proxy.tokenizer) == (query, docs, counted)  # the same on every start


@pytest.mark.slow
def test_the_measurement_times_the_slowest_verb(proxy: Any) -> None:
    from ragattn.compress import Compressor

    compressor = Compressor(proxy, method="focal")
    calls: list[str] = []

    class Counting:
        def rerank_and_compress(self, *args: Any, **kwargs: Any) -> Any:
            calls.append("rerank_and_compress")
            return compressor.rerank_and_compress(*args, **kwargs)

    tps = measure_tokens_per_second(Counting(), proxy.tokenizer)  # type: ignore[arg-type]
    assert calls == ["rerank_and_compress"]
    assert math.isfinite(tps) and tps > 0
