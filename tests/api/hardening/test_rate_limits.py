"""Issue 16 §7: rate limits that hold.

Without keys the limit is per peer address: a made-up bearer token per request and a rotating
``X-Forwarded-For`` from loopback change nothing (forwarded headers are believed only from
``RAGATTN_TRUSTED_PROXIES``). With keys it is per authenticated key, and an unknown token is a 401
that never gets a bucket.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

BODY = {"query": "capital of France?", "documents": ["Paris.", "Rome."]}
LIMIT = 5


def _statuses(url: str, headers: Callable[[int], dict[str, str]], n: int) -> list[int]:
    with httpx.Client(base_url=url, timeout=60) as c:
        return [c.post("/v2/rerank", json=BODY, headers=headers(i)).status_code for i in range(n)]


def test_random_bearer_tokens_share_the_peer_bucket(production_server: Callable[..., Any]) -> None:
    with production_server(rate_limit_per_minute=LIMIT) as live:
        got = _statuses(live.url, lambda i: {"Authorization": f"Bearer {uuid.uuid4()}"}, 12)
    assert got == [200] * LIMIT + [429] * (12 - LIMIT)


def test_forwarded_for_from_an_untrusted_peer_is_ignored(
    production_server: Callable[..., Any],
) -> None:
    with production_server(rate_limit_per_minute=LIMIT) as live:
        got = _statuses(live.url, lambda i: {"X-Forwarded-For": f"10.9.{i}.{i}"}, 8)
    assert got == [200] * LIMIT + [429] * (8 - LIMIT)


def test_forwarded_for_from_a_trusted_proxy_names_the_client(
    production_server: Callable[..., Any],
) -> None:
    with production_server(rate_limit_per_minute=LIMIT, trusted_proxies=("127.0.0.1",)) as live:
        # Each forwarded client has its own bucket behind the trusted proxy...
        spread = _statuses(live.url, lambda i: {"X-Forwarded-For": f"10.9.{i}.{i}"}, 8)
        # ...and one forwarded client is limited like any other.
        one = _statuses(live.url, lambda i: {"X-Forwarded-For": "10.1.1.1"}, LIMIT + 1)
    assert spread == [200] * 8
    assert one == [200] * LIMIT + [429]


def test_with_keys_the_limit_is_per_key_and_unknown_tokens_get_no_bucket(
    production_server: Callable[..., Any],
) -> None:
    with production_server(rate_limit_per_minute=LIMIT, api_keys=("key-a", "key-b")) as live:
        unknown = _statuses(live.url, lambda i: {"Authorization": f"Bearer {uuid.uuid4()}"}, 8)
        a = _statuses(live.url, lambda i: {"Authorization": "Bearer key-a"}, LIMIT + 1)
        b = _statuses(live.url, lambda i: {"Authorization": "Bearer key-b"}, LIMIT + 1)
    assert unknown == [401] * 8
    assert a == [200] * LIMIT + [429]
    assert b == [200] * LIMIT + [429]  # key-a's use did not spend key-b's bucket
