"""Issue 30 §4: request bodies are UTF-8 only, and a lone surrogate is a 400, never a 500.

``json.loads(bytes)`` detects UTF-16 and UTF-32 on its own, past the byte-level guards that assume
UTF-8 (depth scan, string blanking, surrogate check). Every such body is refused in the one error
shape before anything parses it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ragattn.cache import cache_key
from ragattn.errors import InvalidInputError

pytestmark = [pytest.mark.slow]

BODY = '{"query": "capital of France", "documents": ["Paris is in France.", "Bananas."]}'
SURROGATE = '{"query": "\\ud800", "documents": ["Paris is in France."]}'
DEEP = "[" * 50_000 + "]" * 50_000
QUOTE_BYTE = '{"query": "\u0122", "documents": ["\u0122\u0122"]}'  # U+0122 is 22 01 in UTF-16-LE

REFUSED: list[tuple[str, bytes]] = [
    ("utf-16-le", BODY.encode("utf-16-le")),
    ("utf-16 with BOM", BODY.encode("utf-16")),
    ("utf-16-be", BODY.encode("utf-16-be")),
    ("utf-32-be", BODY.encode("utf-32-be")),
    ("utf-32 with BOM", BODY.encode("utf-32")),
    ("utf-8 with BOM", b"\xef\xbb\xbf" + BODY.encode()),
    ("latin-1", BODY.replace("Bananas", "Bananes \u00e0 la cr\u00e8me").encode("latin-1")),
    ("surrogate, utf-8", SURROGATE.encode()),
    ("surrogate, utf-16-le", SURROGATE.encode("utf-16-le")),
    ("surrogate, utf-32-be", SURROGATE.encode("utf-32-be")),
    ("surrogate encoded in utf-8", b'{"query": "\xed\xa0\x80", "documents": ["a"]}'),
    ("50,000 deep, utf-16-le", DEEP.encode("utf-16-le")),
    ("quote byte in U+0122, utf-16-le", QUOTE_BYTE.encode("utf-16-le")),
]


@pytest.fixture(scope="module")
def live(production_server: Callable[..., Any]) -> Any:
    with production_server(cache_backend="none", request_timeout_s=0) as server:
        yield server


@pytest.mark.parametrize(("name", "raw"), REFUSED, ids=[n for n, _ in REFUSED])
def test_a_body_that_is_not_utf8_or_holds_a_lone_surrogate_is_a_400(
    live: Any, name: str, raw: bytes
) -> None:
    with httpx.Client(base_url=live.url, timeout=60) as c:
        resp = c.post("/v2/rerank", content=raw, headers={"content-type": "application/json"})
    assert resp.status_code == 400, (name, resp.status_code, resp.text)
    body = resp.json()
    assert set(body) == {"error_type", "message"}
    assert body["error_type"] == "invalid_request"


def test_a_charset_other_than_utf8_is_a_415_and_utf8_is_served(live: Any) -> None:
    with httpx.Client(base_url=live.url, timeout=120) as c:
        refused = c.post(
            "/v2/rerank",
            content=BODY.encode("utf-16"),
            headers={"content-type": "application/json; charset=utf-16"},
        )
        assert refused.status_code == 415, refused.text
        assert refused.json()["error_type"] == "unsupported_media_type"
        assert "UTF-8" in refused.json()["message"]
        text = json.loads(BODY)
        text["documents"][1] = "Bananes \u00e0 la cr\u00e8me, \U0001f34c \U0001f1eb\U0001f1f7"
        ok = c.post(
            "/v2/rerank",
            content=json.dumps(text, ensure_ascii=False).encode(),
            headers={"content-type": "application/json; charset=UTF-8"},
        )
        assert ok.status_code == 200, ok.text
        assert sorted(r["index"] for r in ok.json()["results"]) == [0, 1]


def test_cache_key_refuses_a_lone_surrogate_as_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match=re.escape("lone UTF-16 surrogate")):
        cache_key(model="m", route="rerank:v2", params={}, query="\ud800", documents=["a"])
    # A valid pair is text like any other.
    assert cache_key(model="m", route="r", params={}, query="\U0001f1eb\U0001f1f7", documents=[])
