"""``prune`` on the rerank routes over Markdown documents (issue 60), on a live server over
HTTP with the packaged proxy's real forwards: a result's ``pruned_text`` is valid Markdown, and
the fences and table headers it repeats come in ``added`` (only where it repeats one), as the
compress route's documents carry them; the SDK parses and checks them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from litestar import Litestar
from markdown_it import MarkdownIt

from ragattn.client import Client
from ragattn.client.transport import InvalidResponseError
from ragattn.client.wire import rerank_results
from ragattn.markdown_units import markdown_units
from ragattn.types import AddedText, Document

CODE = (
    "```python\n"
    + "\n".join(
        f"client.set_option('option_{n:02d}', value={n * 3})  # option {n} of the client"
        for n in range(36)
    )
    + "\n```\n"
)
"""A Markdown document that is one fenced block longer than a unit's bound: its units are code
pieces only, none holding both fences, so a pruned text that keeps some but not all of them
repeats a fence."""
TABLE = """## Settings

| setting | default | meaning |
|---------|---------|---------|
| `port` | 8080 | the port the server listens on |
| `workers` | 4 | worker processes |
| `timeout` | 30 | seconds before a request is cut |
"""
PROSE = "The client was first released in 2019. It is maintained by a small team of volunteers."
QUERY = "What value does option_17 of the client get?"

_MD = MarkdownIt("commonmark").enable("table")


def _fences_closed(text: str) -> bool:
    lines = text.splitlines()
    for t in _MD.parse(text):
        if t.type == "fence" and t.map:
            first, end = t.map
            closing = lines[end - 1].strip() if end - 1 > first else ""
            if not (closing.startswith(t.markup) and set(closing) <= {t.markup[0]}):
                return False
    return True


def _wire(added: tuple[AddedText, ...]) -> list[dict[str, Any]]:
    return [
        {
            "kind": a.kind,
            "text": a.text,
            "offset": a.offset,
            "source_start": a.source_start,
            "source_end": a.source_end,
        }
        for a in added
    ]


def test_code_units_hold_no_block_whole() -> None:
    units = markdown_units(CODE)
    assert units is not None and len(units) >= 3
    assert all(u.kind == "code" for u in units)
    assert not any(u.opens and u.closes for u in units)


def test_a_prune_over_markdown_returns_what_it_repeated(
    make_app: Callable[..., Litestar], live_server: Any, compressor: Any
) -> None:
    payload: dict[str, Any] = {
        "query": QUERY,
        "documents": [CODE, TABLE, PROSE],
        "prune": {"target_tokens": 40},
    }
    with live_server(make_app()) as base:
        resp = httpx.post(f"{base}/v2/rerank", json=payload, timeout=120)
        alone = httpx.post(
            f"{base}/v1/rerank",
            json={**payload, "documents": [CODE], "prune": {"target_tokens": 8}},
            timeout=120,
        )
        with Client(base) as sdk:
            parsed = sdk.rerank(QUERY, [CODE, TABLE, PROSE], prune={"target_tokens": 40})
        spec = httpx.get(f"{base}/schema/openapi.json", timeout=30).json()
    documented = spec["components"]["schemas"]["RerankResultOut"]["properties"]
    assert "fences and table headers" in documented["added"]["description"]
    assert "'added'" in documented["pruned_text"]["description"]
    assert resp.status_code == 200, resp.text
    _, pruned = compressor.rerank_and_compress(QUERY, [CODE, TABLE, PROSE], target_tokens=40)
    by_index = {d.index: d for d in pruned.documents}
    for got in resp.json()["results"]:
        want = by_index[got["index"]]
        source = payload["documents"][got["index"]]
        assert got["pruned_text"] == want.text and _fences_closed(got["pruned_text"])
        keys = ["index", "relevance_score", "pruned_text", "kept_spans"]
        assert list(got) == keys + (["added"] if want.added else [])  # only when repeated
        for item in got.get("added", []):
            assert source[item["source_start"] : item["source_end"]] == item["text"]
            offset = item["offset"]
            assert got["pruned_text"][offset : offset + len(item["text"])] == item["text"]
            kept = {(s["start"], s["end"]) for s in got["kept_spans"]}
            assert (item["source_start"], item["source_end"]) not in kept
        assert got.get("added", []) == _wire(want.added)
    assert all("added" not in r for r in resp.json()["results"] if r["index"] == 2)  # prose
    # The block alone, a few tokens: its best piece kept alone, between its own fences.
    assert alone.status_code == 200, alone.text
    (result,) = alone.json()["results"]
    assert result["kept_spans"] and result["pruned_text"].count("```") == 2
    assert _fences_closed(result["pruned_text"])
    assert {a["kind"] for a in result["added"]} == {"fence"}
    fences = [m.start() for m in re.finditer("```", result["pruned_text"])]
    kept_fences = [s["text"].count("```") for s in result["kept_spans"]]
    assert len(result["added"]) == len(fences) - sum(kept_fences) >= 1
    # The SDK carries the same, checked against the documents it sent.
    assert [(r.index, r.pruned_text, r.added) for r in parsed] == [
        (r["index"], by_index[r["index"]].text, by_index[r["index"]].added)
        for r in resp.json()["results"]
    ]
    assert all(("added" in r.to_dict()) == bool(r.added) for r in parsed)


def _body(added: list[dict[str, Any]], pruned_text: str | None = "```python\nx = 1\n```") -> Any:
    result: dict[str, Any] = {"index": 0, "relevance_score": 0.5, "raw_score": 0.5}
    if pruned_text is not None:
        result |= {"pruned_text": pruned_text, "kept_spans": []}
    return {"results": [result | {"added": added}]}


SOURCE = "```python\nx = 1\ny = 2\n```"


def test_the_sdk_refuses_an_added_text_that_is_not_where_it_says() -> None:
    docs = [Document(text=SOURCE)]
    good = {"kind": "fence", "text": "```python", "offset": 0, "source_start": 0, "source_end": 9}
    (result,) = rerank_results(_body([good]), docs)
    assert result.added == (
        AddedText(kind="fence", text="```python", offset=0, source_start=0, source_end=9),
    )
    for bad, field in [
        ({**good, "offset": 3}, "results[0].added[0].offset"),
        ({**good, "source_start": 1}, "results[0].added[0]"),
        ({**good, "kind": "quote"}, "results[0].added[0].kind"),
    ]:
        with pytest.raises(InvalidResponseError) as err:
            rerank_results(_body([bad]), docs)
        assert field in str(err.value)
    with pytest.raises(InvalidResponseError, match="added without pruned_text"):
        rerank_results(_body([good], pruned_text=None), docs)
