"""Issue 16 §3: the public static route and the log.

NUL bytes, control characters and traversal under ``/static`` answer a 404 in the error shape that
never repeats the path, over a real socket (clients normalise such paths; a socket does not), and
no client-supplied string puts a CR, LF or NUL into a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from ragattn_api.logsafe import clean

pytestmark = pytest.mark.slow

BAD_PATHS = [
    "/static/app.js%00.html",
    "/static/app.js%00",
    "/static/x%0aCRITICAL%20-%20forged%20log%20line",
    "/static/x%0d%0aSet-Cookie:%20a=b",
    "/static/%2e%2e/app.py",
    "/static/../routes/page.py",
    "/static/..%2fapp.py",
    "/static/%2e%2e%2f%2e%2e%2fpyproject.toml",
    "/static/%01%1b[31m",
    "/static/",
]


def test_bad_static_paths_are_a_plain_404(
    production_server: Callable[..., Any], raw_http: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with production_server(api_keys=("k",)) as live, caplog.at_level(logging.DEBUG):
        good = raw_http.exchange(live.port, raw_http.head(live.port, "GET", "/static/app.js"))
        assert good.status == 200 and good.headers["x-content-type-options"] == "nosniff"
        for path in BAD_PATHS:
            resp = raw_http.exchange(live.port, raw_http.head(live.port, "GET", path))
            assert resp.status == 404, (path, resp)
            assert resp.headers["content-type"].startswith("application/json")
            assert resp.headers["x-content-type-options"] == "nosniff"
            assert resp.json() == {"error_type": "not_found", "message": "no such route or file"}
            for piece in ("forged", "app.js", "Set-Cookie", "pyproject", ".."):
                assert piece not in resp.body.decode(), (path, resp.body)
    for record in caplog.records:
        text = record.getMessage()
        assert "\n" not in text and "\r" not in text and "\x00" not in text, text


def test_clean_escapes_control_characters() -> None:
    assert clean("/static/x\nCRITICAL - forged") == "/static/x\\nCRITICAL - forged"
    assert clean("a\r\nb\x00c\x1b[31m") == "a\\r\\nb\\x00c\\x1b[31m"
    assert clean("/v2/rerank") == "/v2/rerank"
    assert clean("é中🙂") == "é中🙂"
    assert len(clean("x" * 5000)) == 300
