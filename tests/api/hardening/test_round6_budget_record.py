"""Issue "Hardening, round six" §4: the fleet's shared budget record expires and is checked.

The throughput the replicas of one deployment share in Redis (round five) had no expiry, so a bad
value was never repaired, and any value in range written by anyone who can write Redis became the
budget of every replica. Now the record is written with a TTL of a day (``BUDGET_TTL_S``; one
found without a TTL is given it), and every replica measures at start-up and adopts the recorded
value only within a factor of 2 of its own measurement (``ADOPT_FACTOR``); a value out of that
range, or one that is not a throughput, is not adopted and is replaced by the replica's own
measurement, with a warning in the log.

Against a real Redis: the record's TTL, a garbage value and an out-of-range value repaired, a
value in range written by hand adopted and given a TTL, two replicas racing over one bad value
agreeing. Against real servers on a real Redis: a replica started after the record was set to
an absurd throughput does not adopt it, records its own measurement with a TTL, and its
``/health`` reports the budget derived from that.
"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from ragattn.request_budget import ADOPT_FACTOR, derive_budget, within_range
from ragattn_api.loading import BUDGET_KEY_PREFIX, BUDGET_TTL_S, RedisThroughput

pytestmark = [pytest.mark.redis]

MEASURED = 600.0
"""A replica's own measurement in the record tests, proxy tokens per second."""


@pytest.fixture
def record(redis_url: str) -> Iterator[tuple[RedisThroughput, Any]]:
    """A record under a fresh key on the session's Redis, and a raw client to plant values."""
    import redis

    key = f"ragattn:test:budget:{uuid.uuid4().hex}"
    raw: Any = redis.Redis.from_url(redis_url)
    try:
        yield RedisThroughput(redis_url, key, timeout_s=1.0), raw
    finally:
        raw.delete(key)
        raw.close()


def _settle(record: RedisThroughput, measured: float = MEASURED) -> float | None:
    return record.settle(measured, functools.partial(within_range, measured=measured))


def test_the_record_is_written_with_an_expiry(record: tuple[RedisThroughput, Any]) -> None:
    throughput, raw = record
    assert _settle(throughput) == MEASURED
    assert 0 < raw.ttl(throughput.key) <= BUDGET_TTL_S
    # A later replica adopts it without extending its life: it still expires a day after it
    # was measured.
    raw.expire(throughput.key, 100)
    assert _settle(throughput, MEASURED * 1.2) == MEASURED
    assert 0 < raw.ttl(throughput.key) <= 100


@pytest.mark.parametrize("planted", [b"fast", b"nan", b"-5", b"1e9", b"2.5"])
def test_a_bad_value_is_not_adopted_and_is_repaired(
    record: tuple[RedisThroughput, Any], planted: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    throughput, raw = record
    raw.set(throughput.key, planted)  # no TTL: as a hand-written SET leaves it
    with caplog.at_level(logging.WARNING, logger="ragattn_api.loading"):
        assert _settle(throughput) == MEASURED
    assert float(raw.get(throughput.key)) == MEASURED
    assert 0 < raw.ttl(throughput.key) <= BUDGET_TTL_S
    warned = [r.getMessage() for r in caplog.records]
    assert any("not adopted" in m and repr(planted) in m for m in warned), warned


def test_a_value_in_range_written_by_hand_is_adopted_and_given_an_expiry(
    record: tuple[RedisThroughput, Any],
) -> None:
    throughput, raw = record
    planted = MEASURED * ADOPT_FACTOR * 0.99
    raw.set(throughput.key, repr(planted))
    assert raw.ttl(throughput.key) == -1
    assert _settle(throughput) == planted  # whoever writes Redis is trusted within the range
    assert 0 < raw.ttl(throughput.key) <= BUDGET_TTL_S


def _race(url: str, key: str, measurements: tuple[float, ...]) -> list[float | None]:
    """What each of ``len(measurements)`` replicas settles on when all start at once."""
    start = threading.Barrier(len(measurements))
    results: list[float | None] = [None] * len(measurements)

    def replica(i: int) -> None:
        start.wait()
        results[i] = _settle(RedisThroughput(url, key, timeout_s=1.0), measurements[i])

    threads = [threading.Thread(target=replica, args=(i,)) for i in range(len(measurements))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def test_two_replicas_that_find_one_bad_value_agree(record: tuple[RedisThroughput, Any]) -> None:
    throughput, raw = record
    for _ in range(20):
        raw.set(throughput.key, b"1e9")
        results = _race(throughput.url, throughput.key, (600.0, 700.0))
        assert results[0] == results[1] == float(raw.get(throughput.key)), results


DEADLINE_S = 10.0


@pytest.mark.slow
def test_a_replica_does_not_adopt_an_out_of_range_record(
    spawn_server: Callable[..., Any], redis_server: Callable[[], Any]
) -> None:
    redis = redis_server()
    common = {
        "cache_backend": "redis",
        "redis_url": redis.url,
        "request_timeout_s": str(DEADLINE_S),
    }
    first = spawn_server(name="first", **common)
    keys = redis.cli("--scan", "--pattern", BUDGET_KEY_PREFIX + "*").split()
    assert len(keys) == 1, keys
    assert 0 < int(redis.cli("ttl", keys[0])) <= BUDGET_TTL_S
    first.proc.terminate()
    first.proc.wait(timeout=60)

    # Anyone who can write Redis sets the throughput to a billion tokens a second, no TTL: every
    # replica started since adopted it, and with it the ceiling budget.
    assert redis.cli("set", keys[0], "1e9") == "OK"
    second = spawn_server(name="second", **common)
    found = redis.cli("--scan", "--pattern", BUDGET_KEY_PREFIX + "*").split()
    assert found == keys, "the code changed between the two starts (it is in the fingerprint)"
    recorded = float(redis.cli("get", keys[0]))
    assert recorded != 1e9  # replaced by the second replica's own measurement
    assert 0 < int(redis.cli("ttl", keys[0])) <= BUDGET_TTL_S
    health = httpx.get(f"{second.url}/health", timeout=30).json()
    assert health["max_request_tokens"] == derive_budget(recorded, DEADLINE_S)
    log = second.text()
    assert "b'1e9'" in log and "not adopted" in log, log[-3000:]
