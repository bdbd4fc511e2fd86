"""Issue 30 §5: ``kept_spans`` offsets count code points, as documented.

Python strings index code points; a JavaScript client indexes UTF-16 code units, so an emoji or a
flag before a span shifts it there (the page converts, see tests/web). Here the API's contract: each
span's ``[start, end)`` slices the document, as a sequence of code points, to the span's text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.slow]

DOCUMENTS = [
    "\U0001f1eb\U0001f1f7\U0001f1eb\U0001f1f7\U0001f1eb\U0001f1f7 Flags open this text. "
    "Paris is the capital of France. The Seine flows through Paris.",
    "Cafe\u0301 au lait is coffee with milk. \U0001f600 It is served in a bowl. "
    "Paris has many cafe\u0301s.",
    "Bananas are yellow \U0001f34c. They grow in warm countries.",
]


def test_kept_spans_slice_the_document_by_code_points(
    production_server: Callable[..., Any],
) -> None:
    with (
        production_server(cache_backend="none", request_timeout_s=0) as live,
        httpx.Client(base_url=live.url, timeout=300) as c,
    ):
        resp = c.post(
            "/v1/compress",
            json={
                "query": "What is the capital of France?",
                "documents": DOCUMENTS,
                "threshold": 0,
            },
        )
    assert resp.status_code == 200, resp.text
    shifted = 0
    for out in resp.json()["documents"]:
        text = DOCUMENTS[out["index"]]
        units = text.encode("utf-16-le")
        assert out["kept_spans"], out
        for span in out["kept_spans"]:
            assert text[span["start"] : span["end"]] == span["text"], (span, text)
            # The same offsets read as UTF-16 code units would be another text after an emoji.
            as_utf16 = units[2 * span["start"] : 2 * span["end"]].decode("utf-16-le", "replace")
            shifted += as_utf16 != span["text"]
    assert shifted > 0, "no span follows a character outside the BMP: the test proves nothing"
