"""Replicas agree on the request budget (issue "Hardening, round five" §5).

The first replica on a Redis publishes its measured throughput; every later one adopts it when it
lies within a factor of 2 of its own measurement ("Hardening, round six": else it is replaced), a
replica that raced it adopts the first value written, and a Redis that fails leaves each replica
its own measurement (logged). The per-document limit is never above
the request budget, so the per-document 413's advice (``max_tokens_per_doc`` at most that) never
names a value the request budget refuses. The Redis record is tested against a real Redis.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from ragattn.request_budget import RequestBudget, choose_budget, derive_budget
from ragattn.settings import Settings
from ragattn_api.loading import (
    BUDGET_KEY_PREFIX,
    BUDGET_TTL_S,
    RedisThroughput,
    service_limits,
    throughput_record,
)

DEADLINE = Settings(request_timeout_s=30.0)


class Record:
    """A :class:`~ragattn.request_budget.ThroughputRecord` in memory, optionally broken."""

    def __init__(self, value: float | None = None, *, broken: bool = False) -> None:
        self.value = value
        self.broken = broken
        self.published: list[float] = []

    def settle(self, tokens_per_second: float, acceptable: Any) -> float | None:
        if self.broken:
            return None
        if self.value is not None and acceptable(self.value):
            return self.value
        self.published.append(tokens_per_second)
        self.value = tokens_per_second
        return self.value


def _never() -> float:
    raise AssertionError("measured although the budget does not need it")


def test_a_recorded_throughput_within_range_is_adopted() -> None:
    record = Record(250.0)
    budget = choose_budget(DEADLINE, lambda: 300.0, record=record)
    assert budget == RequestBudget(
        tokens=5888, source="shared", tokens_per_second=250.0, deadline_s=30.0
    )
    assert record.published == []
    assert "measured at start-up by the first replica and recorded for all" in (
        budget.basis() or ""
    )


def test_the_first_replica_publishes_and_a_racing_one_adopts_the_first_value() -> None:
    record = Record()
    first = choose_budget(DEADLINE, lambda: 250.0, record=record)
    assert (first.tokens, first.source, record.published) == (5888, "shared", [250.0])
    # A replica that measured 300 tokens/s while the first one published: its own value loses.
    second = choose_budget(DEADLINE, lambda: 300.0, record=record)
    assert (second.tokens, second.tokens_per_second) == (first.tokens, 250.0)
    assert second.basis() == first.basis()  # the same 413 message on both


def test_a_failing_record_leaves_the_replica_its_own_measurement() -> None:
    budget = choose_budget(DEADLINE, lambda: 250.0, record=Record(broken=True))
    assert (budget.tokens, budget.source) == (5888, "measured")


def test_a_stated_or_set_budget_never_reads_the_record() -> None:
    record = Record(broken=True)
    record.settle = _never  # type: ignore[assignment,method-assign]
    stating = Settings(tokens_per_second=100.0, request_timeout_s=30.0)
    assert choose_budget(stating, _never, record=record) == choose_budget(stating, None)
    assert choose_budget(Settings(max_request_tokens=999), _never, record=record).tokens == 999
    # Engines handed in (nothing measured): the ceiling, and no record is consulted.
    assert choose_budget(DEADLINE, None, record=record).source == "not_measured"


@pytest.mark.parametrize(("budget", "per_doc"), [(2304, 2304), (3840, 3840), (14336, 4096)])
def test_the_per_document_limit_is_never_above_the_request_budget(
    budget: int, per_doc: int
) -> None:
    derived = RequestBudget(
        tokens=budget, source="measured", tokens_per_second=budget / 24, deadline_s=30.0
    )
    limits = service_limits(Settings(), derived)
    assert (limits.max_request_tokens, limits.max_tokens_per_doc) == (budget, per_doc)


def test_only_the_redis_backend_shares_the_throughput() -> None:
    assert throughput_record(Settings(), "m@1") is None
    redis = Settings(cache_backend="redis", redis_url="redis://127.0.0.1:1/0")
    record = throughput_record(redis, "m@1")
    assert isinstance(record, RedisThroughput)
    assert record.key.startswith(BUDGET_KEY_PREFIX)
    other = throughput_record(redis, "m@2")
    assert other is not None and other.key != record.key  # another model measures anew


@pytest.mark.redis
def test_the_redis_record_keeps_the_first_value(redis_url: str) -> None:
    import redis

    key = f"ragattn:test:budget:{uuid.uuid4().hex}"
    first = RedisThroughput(redis_url, key, timeout_s=1.0)
    second = RedisThroughput(redis_url, key, timeout_s=1.0)
    raw: Any = redis.Redis.from_url(redis_url)
    try:
        assert first.settle(612.25, lambda _: True) == 612.25
        assert second.settle(700.0, lambda _: True) == 612.25  # came second: adopts the first
        assert 0 < raw.ttl(key) <= BUDGET_TTL_S  # written with an expiry
        assert derive_budget(612.25, 30.0) == 14592
    finally:
        raw.delete(key)
        raw.close()


def test_an_unreachable_redis_is_no_record(caplog: pytest.LogCaptureFixture) -> None:
    record = RedisThroughput("redis://127.0.0.1:1/0", "k", timeout_s=0.2)
    with caplog.at_level(logging.WARNING, logger="ragattn_api.loading"):
        assert record.settle(100.0, lambda _: True) is None
    assert sum("not shared" in r.getMessage() for r in caplog.records) == 1
