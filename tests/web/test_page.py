"""The browser page against a live server: what it shows must equal what the API answered."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragattn.demo import DOCUMENTS, QUERY
from ragattn.settings import Settings
from ragattn_api import create_app
from ragattn_api.routes.page import STATIC_DIR

pytestmark = pytest.mark.slow

MODEL_TIMEOUT_MS = 300_000

KEY = "web-test-key"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def server_url(reranker: Any, compressor: Any, live_server: Any) -> Iterator[str]:
    # With an API key configured, so the page's key field and the public page routes are exercised.
    app = create_app(Settings(api_keys=(KEY,)), reranker=reranker, compressor=compressor)
    with live_server(app) as url:
        yield url


@pytest.fixture
def page(browser: Any, server_url: str, expect: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(MODEL_TIMEOUT_MS)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    # API errors are expected in some tests; a failing GET (asset, example, icon) never is.
    tab.on(
        "response",
        lambda r: (
            errors.append(f"{r.status} {r.url}")
            if r.status >= 400 and r.request.method == "GET"
            else None
        ),
    )
    tab.goto(server_url + "/")
    expect(tab.locator("#server-info")).not_to_have_text("")
    yield tab
    context.close()
    assert errors == [], f"the page failed: {errors}"


def run_and_capture(page: Any, expect: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Press Run; return the rerank and compress JSON bodies the page received."""
    with (
        page.expect_response("**/v2/rerank") as rerank,
        page.expect_response("**/v1/compress") as compress,
    ):
        page.get_by_role("button", name="Run").click()
    expect(page.locator("#status")).not_to_have_text("Running…")
    return rerank.value.json(), compress.value.json()


def test_page_and_assets_are_served_offline_and_public(server_url: str) -> None:
    with httpx.Client(base_url=server_url, timeout=30) as c:
        index = c.get("/")
        assert index.status_code == 200
        assert index.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in index.headers["content-security-policy"]
        for asset, kind in (("app.js", "javascript"), ("style.css", "text/css")):
            resp = c.get(f"/static/{asset}")
            assert resp.status_code == 200 and kind in resp.headers["content-type"]
        demo = c.get("/demo.json").json()
        assert demo["query"] == QUERY
        assert [d["text"] for d in demo["documents"]] == [d.text for d in DOCUMENTS]
        assert c.post("/v2/rerank", json={"query": "q", "documents": ["d"]}).status_code == 401
        # The API docs page loads the vendored Swagger UI from this server only.
        docs = c.get("/schema/swagger")
        assert docs.status_code == 200
        assert not re.search(r"(src|href)=\"(https?:)?//", docs.text), docs.text[:500]
    # Nothing is fetched from another origin: the page must work offline. (The vendored
    # swagger-ui-* files carry link texts in their licence and bundle; the check above covers
    # what their page loads.)
    for path in STATIC_DIR.iterdir():
        if path.name.startswith("swagger-ui"):
            continue
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]", path.read_text()), path.name


def test_example_run_shows_the_api_ranking_and_kept_spans(
    page: Any, expect: Any, reranker: Any, screenshot_dir: Path
) -> None:
    page.get_by_role("button", name="Load example").click()
    expect(page.locator("#documents")).not_to_have_value("")
    page.get_by_label("API key").fill(KEY)
    page.get_by_label("Method").select_option("focal")
    page.get_by_label("ratio").check()
    page.get_by_label("Fraction of tokens to keep").fill("0.4")
    rerank, compress = run_and_capture(page, expect)

    texts = [d.text for d in DOCUMENTS]
    shown = page.locator("#ranking > li")
    order = [int(i) for i in shown.evaluate_all("els => els.map(e => e.dataset.index)")]
    assert order == [r["index"] for r in rerank["results"]]
    # The API's order is the library's: an independent check that the page shows a real ranking.
    assert order == [r.index for r in reranker.rerank(QUERY, texts)]
    assert sorted(order) == list(range(len(texts)))

    by_index = {d["index"]: d for d in compress["documents"]}
    for position, index in enumerate(order):
        item = shown.nth(position)
        assert item.locator(".origin").inner_text() == f"first-stage position {index + 1}"
        marks = item.locator("mark.kept").all_inner_texts()
        assert marks == [s["text"] for s in by_index[index]["kept_spans"]]
        # Highlighted plus greyed text is the whole document: nothing is hidden.
        assert item.locator(".doc-text").text_content() == texts[index]
    assert page.locator("#origin-tokens").inner_text() == str(compress["origin_tokens"])
    assert page.locator("#compressed-tokens").inner_text() == str(compress["compressed_tokens"])
    assert page.locator("#ratio").inner_text().startswith(f"{compress['ratio'] * 100:.1f}%")
    assert page.locator("#status").inner_text().startswith("Done")
    assert page.locator("#errors").inner_text() == ""

    page.screenshot(path=str(screenshot_dir / "web-desktop.png"), full_page=True)
    page.set_viewport_size(PHONE)
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, "the page scrolls sideways at phone width"
    page.screenshot(path=str(screenshot_dir / "web-phone.png"), full_page=True)


def test_api_errors_are_shown_with_their_error_type(
    page: Any, expect: Any, screenshot_dir: Path
) -> None:
    page.get_by_role("button", name="Load example").click()
    expect(page.locator("#documents")).not_to_have_value("")
    page.get_by_label("API key").fill("not-the-key")
    rerank, compress = run_and_capture(page, expect)
    assert rerank["error_type"] == compress["error_type"] == "unauthorized"
    alert = page.get_by_role("alert")
    assert "unauthorized" in alert.inner_text()
    assert "(HTTP 401)" in alert.inner_text()
    assert "/v2/rerank: unauthorized (HTTP 401)" in alert.inner_text()
    assert page.locator("#ranking > li").count() == 0

    page.get_by_label("API key").fill(KEY)
    page.get_by_label("Documents, in first-stage order").fill("")
    rerank, _ = run_and_capture(page, expect)
    assert rerank["error_type"] == "invalid_request"
    assert "invalid_request" in alert.inner_text()
    assert rerank["message"] in alert.inner_text()
    page.screenshot(path=str(screenshot_dir / "web-error.png"))


def test_keyboard_only_and_every_control_labelled(page: Any, expect: Any) -> None:
    unlabelled = page.evaluate(
        """[...document.querySelectorAll('input, select, textarea')]
             .filter(e => e.labels.length === 0).map(e => e.id || e.name)"""
    )
    assert unlabelled == []
    page.get_by_label("API key").fill(KEY)
    page.get_by_role("button", name="Load example").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#documents")).not_to_have_value("")
    page.get_by_label("Method").select_option("focal")
    page.get_by_label("threshold").focus()
    page.keyboard.press("Space")
    assert page.locator("#budget-label").inner_text().startswith("Keep sentences scoring")
    page.get_by_role("button", name="Run").focus()
    with page.expect_response("**/v1/compress") as compress:
        page.keyboard.press("Enter")
    assert compress.value.json()["warnings"] is not None
    expect(page.locator("#ranking > li")).to_have_count(len(DOCUMENTS))
    # Focus moves to the results so keyboard and screen-reader users land on them.
    assert page.evaluate("document.activeElement.id") == "results"


# Issue 30 §5: the API's spans count code points, JavaScript strings UTF-16 code units. An emoji,
# a flag (two regional indicators, four code units) and a combining accent before a kept sentence.
UNICODE_DOCUMENTS = [
    "\U0001f1eb\U0001f1f7\U0001f1eb\U0001f1f7\U0001f1eb\U0001f1f7 Flags open this text. "
    "Paris is the capital of France. The Seine flows through Paris.",
    "Cafe\u0301 au lait is coffee with milk. \U0001f600 It is served in a bowl. "
    "Paris has many cafe\u0301s.",
    "Bananas are yellow \U0001f34c. They grow in warm countries.",
]


def test_kept_spans_after_emoji_flags_and_combining_marks_highlight_the_right_text(
    page: Any, expect: Any
) -> None:
    page.get_by_label("API key").fill(KEY)
    page.get_by_label("Query").fill("What is the capital of France?")
    page.get_by_label("Documents, in first-stage order").fill("\n\n".join(UNICODE_DOCUMENTS))
    page.get_by_label("threshold").check()
    page.locator("#budget-value").fill("0")  # every sentence kept: every span is checked
    rerank, compress = run_and_capture(page, expect)
    assert page.locator("#errors").inner_text() == ""
    by_index = {d["index"]: d for d in compress["documents"]}
    shown = page.locator("#ranking > li")
    order = [int(i) for i in shown.evaluate_all("els => els.map(e => e.dataset.index)")]
    assert sorted(order) == [0, 1, 2]
    for position, index in enumerate(order):
        item = shown.nth(position)
        spans = by_index[index]["kept_spans"]
        assert spans
        marks = item.locator("mark.kept").all_inner_texts()
        # Each mark is exactly the span's text (a shift after the flags would cut "Flags open").
        assert marks == [s["text"] for s in spans]
        assert marks == [UNICODE_DOCUMENTS[index][s["start"] : s["end"]] for s in spans]
        assert item.locator(".doc-text").text_content() == UNICODE_DOCUMENTS[index]
