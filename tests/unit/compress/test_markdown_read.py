"""The read's kept text of a Markdown document is valid Markdown (issue 60, item 2).

Valid, as markdown-it-py parses the kept text on its own: every fence is closed, every kept line
of code sits inside a fenced block, every kept table row sits in a table under its own header, no
line of code is cut, a document's kept spans come in their original order and are exact, and
what the library repeated (fences, headers) is listed apart from them.
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import msgspec
import pytest
from markdown_it import MarkdownIt

from ragattn.client.wire import compression_result as wire_result
from ragattn.compress import Compressor
from ragattn.markdown_units import join_kept, markdown_units
from ragattn.types import CompressedDocument, CompressionResult, Document
from ragattn_api.schemas.verbs import CompressResponse

_MD = MarkdownIt("commonmark").enable("table")

DOC = """---
title: Deploying the service
---
# Deploying the service

The service runs behind a reverse proxy. It listens on port 8080 by default.

## Install

1. Install the package with pip. Use a virtual environment.
2. Write the configuration file:

    ```yaml
    port: 8080
    workers: 4
    # comment: not a heading
    ```

3. Start the server.
   - On Linux, use systemd.
   - On macOS, use launchd.

```python
from service import app

def main() -> None:
    app.run(host="0.0.0.0", port=8080)
```

## Settings

| setting | default | meaning |
|---------|---------|---------|
| `port` | 8080 | the port the server listens on |
| `workers` | 4 | worker processes; `a\\|b` splits nothing |
| `timeout` | 30 | seconds before a request is cut |

> ```sh
> curl localhost:8080/health
> ```

The health route answers 200 when the server is ready.
"""

LONG = (
    "Intro to the generated table of constants.\n\n```python\n"
    + "\n".join(
        f"CONSTANT_{n:03d} = {n * 7}  # the {n}th constant of the table" for n in range(150)
    )
    + "\n```\n\nThe constants are generated.\n"
)

QUESTION = "Which port does the server listen on, and how many workers does it start?"


def _fences(text: str) -> list[tuple[int, int, list[str]]]:
    """The fenced blocks of ``text`` as (first line, last line + 1, content lines stripped of
    whitespace and quote markers)."""
    out = []
    for t in _MD.parse(text):
        if t.type == "fence" and t.map:
            lines = [ln.strip().lstrip("> ").strip() for ln in t.content.splitlines()]
            out.append((t.map[0], t.map[1], lines))
    return out


def _tables(text: str) -> list[tuple[str, list[str]]]:
    """The tables of ``text``: the header row (stripped) and its body rows (stripped)."""
    lines = text.splitlines()
    out: list[tuple[str, list[str]]] = []
    tokens = _MD.parse(text)
    for n, t in enumerate(tokens):
        if t.type == "table_open" and t.map:
            header = lines[t.map[0]].strip()
            rows = [
                lines[r.map[0]].strip()
                for r in tokens[n:]
                if r.type == "tr_open" and r.map and r.map[0] > t.map[0] + 1 and r.map[0] < t.map[1]
            ]
            out.append((header, rows))
    return out


def assert_valid_markdown(source: str, doc: CompressedDocument) -> None:
    """``doc``'s kept text of ``source`` is valid Markdown (the module docstring's sense)."""
    text = doc.text
    out_lines = text.splitlines()
    # every fence in the kept text is closed
    for first, last, _ in _fences(text):
        closing = out_lines[last - 1].strip().lstrip("> ").strip() if last - 1 > first else ""
        assert closing and set(closing) <= set("`~"), f"unclosed fence in:\n{text}"
    code_lines = {ln for _, _, content in _fences(text) for ln in content}
    out_tables = _tables(text)
    src_fences = _fences(source)
    src_tables = _tables(source)
    src_lines = source.splitlines()
    cursor = 0
    spans = sorted(doc.kept_spans, key=lambda s: s.start)
    assert list(doc.kept_spans) == spans, "kept spans out of their original order"
    added = {(a.source_start, a.source_end) for a in doc.added}
    for span in spans:
        assert span.text == source[span.start : span.end]
        assert (span.start, span.end) not in added
        found = text.find(span.text, cursor)
        assert found >= 0, f"kept span {span.text!r} missing or out of order in:\n{text}"
        cursor = found + len(span.text)
        first = source.count("\n", 0, span.start)
        last = source.count("\n", 0, span.end)
        for f_first, f_last, _ in src_fences:
            if f_first < first + 1 <= f_last or f_first <= last < f_last:
                # a code span: whole lines, and each of its code lines inside a fence of the output
                line_start = source.rfind("\n", 0, span.start) + 1
                assert not source[line_start : span.start].strip().strip(">").strip()
                line_end = source.find("\n", span.end)
                line_end = len(source) if line_end < 0 else line_end
                assert not source[span.end : line_end].strip(), f"cut line: {span.text!r}"
                for n in range(max(first, f_first + 1), min(last + 1, f_last - 1)):
                    content = src_lines[n].strip().lstrip("> ").strip()
                    if content:
                        assert content in code_lines, f"{content!r} outside a fence in:\n{text}"
        for header, rows in src_tables:
            if span.text.strip() in rows:
                assert any(h == header and span.text.strip() in r for h, r in out_tables), (
                    f"row {span.text!r} not under {header!r} in:\n{text}"
                )
    for a in doc.added:
        assert a.text == source[a.source_start : a.source_end]
        assert text[a.offset : a.offset + len(a.text)] == a.text


def _random_subsets(n: int, count: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [sorted(rng.sample(range(n), rng.randint(1, n))) for _ in range(count)]


@pytest.mark.parametrize("source", [DOC, DOC.replace("\n", "\r\n"), LONG])
def test_every_subset_of_kept_units_joins_as_valid_markdown(source: str) -> None:
    units = markdown_units(source)
    assert units is not None
    singles = [[n] for n in range(len(units))]
    pairs = [list(p) for p in itertools.combinations(range(len(units)), 2)]
    for kept in singles + pairs + _random_subsets(len(units), 200, seed=60):
        text, added = join_kept(source, units, kept)
        doc = CompressedDocument(
            index=0,
            text=text.replace("\r\n", "\n"),
            kept_spans=(),
            sentence_scores=(),
            sentence_spans=(),
            document=Document(text=source),
            added=(),
        )
        spans_doc = _with_spans(source.replace("\r\n", "\n"), doc, units, kept, source)
        assert_valid_markdown(source.replace("\r\n", "\n"), spans_doc)
        for a in added:
            assert text[a.offset : a.offset + len(a.text)] == a.text


def _with_spans(lf: str, doc: CompressedDocument, units: Any, kept: list[int], source: str) -> Any:
    """``doc`` with its kept spans (the kept units' texts, CRLF read as LF) for the checker."""
    from ragattn.types import KeptSpan

    spans = []
    for n in sorted(kept):
        piece = source[units[n].start : units[n].end].replace("\r\n", "\n")
        start = len(source[: units[n].start].replace("\r\n", "\n"))
        assert lf[start : start + len(piece)] == piece
        spans.append(
            KeptSpan(doc_index=0, start=start, end=start + len(piece), score=1.0, text=piece)
        )
    return CompressedDocument(
        index=0,
        text=doc.text,
        kept_spans=tuple(spans),
        sentence_scores=(),
        sentence_spans=(),
        document=doc.document,
        added=(),
    )


# -- the read, with real forwards of the packaged proxy ---------------------------------------

PROSE_DOC = (
    "The health route was added in version 2. Before it, operators polled the root page. "
    "The proxy forwards every request."
)
BUDGETS = [
    {"ratio": 0.15},
    {"ratio": 0.3},
    {"ratio": 0.6},
    {"target_tokens": 40},
    {"target_tokens": 120},
    {"threshold": 0.5},
]


def _check_result(result: CompressionResult, docs: list[str], counting: Any) -> None:
    for doc in result.documents:
        source = docs[doc.index]
        if markdown_units(source) is not None:
            assert_valid_markdown(source, doc)
        else:
            assert doc.added == ()
    assert result.compressed_tokens == len(
        counting(result.compressed_text, add_special_tokens=False)["input_ids"]
    )


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: "-".join(map(str, b.items())))
def test_compress_keeps_valid_markdown_within_the_budget(compressor: Any, budget: dict) -> None:
    docs = [PROSE_DOC, DOC, LONG]
    tokenizer = compressor.proxy.tokenizer
    result = compressor.compress(QUESTION, docs, **budget)
    _check_result(result, docs, tokenizer)
    assert any(d.kept_spans for d in result.documents)
    if "target_tokens" in budget or "ratio" in budget:
        limit = budget.get("target_tokens") or int(budget["ratio"] * result.origin_tokens)
        over = [w for w in result.warnings if "over the budget" in w]
        assert result.compressed_tokens <= limit or over
    best_first = compressor.compress(QUESTION, docs, keep_order=False, **budget)
    _check_result(best_first, docs, tokenizer)
    for doc in best_first.documents:  # a Markdown document's kept text stays one block
        if doc.text and markdown_units(docs[doc.index]) is not None:
            assert doc.text in best_first.compressed_text


@pytest.mark.parametrize("method", ["sentinel", "lexical"])
def test_the_shipped_methods_and_rerank_and_compress_keep_valid_markdown(
    proxy: Any, method: str
) -> None:
    docs = [PROSE_DOC, DOC, LONG]
    comp = Compressor(proxy, method=method)
    for budget in ({"ratio": 0.2}, {"target_tokens": 80}):
        _check_result(comp.compress(QUESTION, docs, **budget), docs, proxy.tokenizer)
        ranked, result = comp.rerank_and_compress(QUESTION, docs, **budget)
        assert sorted(r.index for r in ranked) == [0, 1, 2]
        _check_result(result, docs, proxy.tokenizer)


def test_a_table_header_is_repeated_once_and_counted(compressor: Any) -> None:
    docs = [DOC]
    units = markdown_units(DOC)
    assert units is not None
    rows = [u for u in units if u.kind == "table_row"]
    # everything but the header kept: the header is repeated exactly once, as an addition
    result = compressor.compress("Which settings are there?", docs, ratio=1.0)
    doc = result.documents[0]
    assert_valid_markdown(DOC, doc)
    header = DOC[slice(*rows[0].header)] if rows[0].header else ""
    assert doc.text.count(header) == 1
    assert all(a.kind != "table_header" for a in doc.added)  # kept whole: nothing repeated
    # a budget that keeps rows but not the header unit: the header comes back, once, counted
    repeated = 0
    for ratio in (0.1, 0.2, 0.3, 0.45):
        result = compressor.compress("What is the default timeout in seconds?", docs, ratio=ratio)
        doc = result.documents[0]
        assert_valid_markdown(DOC, doc)
        kept_rows = [s for s in doc.kept_spans if s.text.startswith("| `")]
        if kept_rows:
            assert doc.text.count(header) == 1
        repeated += sum(a.kind == "table_header" for a in doc.added)
        limit = result.origin_tokens * ratio
        assert result.compressed_tokens <= limit  # the repeated header is within the budget
    assert repeated  # the case this test is about happened


def test_the_added_texts_cross_the_wire(compressor: Any) -> None:
    docs = [PROSE_DOC, DOC, LONG]
    result = compressor.compress(QUESTION, docs, ratio=0.3)
    body = json.loads(
        msgspec.json.encode(CompressResponse.from_result(result, id="x", model="m", warnings=[]))
    )
    assert all("added" not in d for d in body["documents"] if not d.get("added"))
    back = wire_result(body, [Document(text=t) for t in docs], range(len(docs)))
    for sent, got in zip(result.documents, back.documents, strict=True):
        assert got.added == sent.added
        assert got.text == sent.text
        assert got.sentence_spans == sent.sentence_spans  # the SDK re-split them alike
    assert back.warnings == result.warnings
