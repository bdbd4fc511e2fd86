"""Issue "Hardening, round five" §5: replicas on one Redis agree on the request budget.

The budget derived from a timed call varied from one start to the next (3,328 to 3,840 tokens on
one machine at a 30 s deadline), so two replicas refused different requests. Two real server
processes are started at once on one private Redis with the budget unset: the first to finish
its measurement records it, the other adopts it. Both report the same ``max_request_tokens`` on
``/health``, derived from the one throughput recorded in Redis; both refuse a request just over it
with the same message, naming the recorded throughput (a replica that measured for itself would
name its own); and the per-document limit either advises is not above the budget.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ragattn.request_budget import derive_budget
from ragattn_api.loading import BUDGET_KEY_PREFIX

pytestmark = [pytest.mark.redis, pytest.mark.slow]

DEADLINE_S = 10.0
WORD = " Paris"  # one proxy token each, after the first


def _wait_ready(spawned: Any, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert spawned.proc.poll() is None, spawned.text()
        try:
            if httpx.get(f"{spawned.url}/ready", timeout=10).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, spawned.text()
        time.sleep(0.2)


def _refusal(url: str, body: dict[str, Any]) -> str:
    resp = httpx.post(f"{url}/v2/rerank", json=body, timeout=120)
    assert resp.status_code == 413, resp.text
    assert resp.json()["error_type"] == "input_too_large"
    return str(resp.json()["message"])


def test_two_replicas_on_one_redis_report_and_enforce_one_budget(
    spawn_server: Callable[..., Any], redis_server: Callable[[], Any]
) -> None:
    redis = redis_server()
    common = {
        "cache_backend": "redis",
        "redis_url": redis.url,
        "request_timeout_s": str(DEADLINE_S),
    }
    # Started together: both measure unless one finds the other's record; both race to write it.
    replicas = [spawn_server(name=f"replica-{n}", ready=False, **common) for n in "ab"]
    for replica in replicas:
        _wait_ready(replica)

    keys = redis.cli("--scan", "--pattern", BUDGET_KEY_PREFIX + "*").split()
    assert len(keys) == 1, keys
    recorded = float(redis.cli("get", keys[0]))
    budget = derive_budget(recorded, DEADLINE_S)
    reported = [httpx.get(f"{r.url}/health", timeout=30).json() for r in replicas]
    assert [h["max_request_tokens"] for h in reported] == [budget, budget]

    # Just over the budget on both: the same 413, naming the one recorded throughput.
    over = {"query": "capital?", "documents": [WORD * 64] * (budget // 64 + 2)}
    messages = [_refusal(r.url, over) for r in replicas]
    assert messages[0] == messages[1]
    assert f"the limit is {budget} per request" in messages[0]
    assert f"× {recorded:.0f} tokens/s" in messages[0]
    assert "measured at start-up by the first replica and recorded for all" in messages[0]

    # One document over the per-document limit: the advice leaves room for the query and the
    # prompt within the request budget (issue 59), the same on both replicas.
    # Three times over, so that even the lower bound before the tokenizer finds it too long.
    long_doc = {"query": "capital?", "documents": [WORD * 3 * max(budget, 4096)]}
    advice = [_refusal(r.url, long_doc) for r in replicas]
    assert advice[0] == advice[1]
    advised = re.search(r"send max_tokens_per_doc=(\d+)", advice[0])
    assert advised is not None, advice[0]
    # Within the per-document limit (4,096) and leaving room in the budget: on a machine whose
    # measured budget is above the per-document limit plus that room, the limit itself.
    assert int(advised.group(1)) <= 4096 and int(advised.group(1)) < budget
