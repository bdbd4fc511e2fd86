"""Markdown chunked at its headings (:mod:`ragattn.retrieve.sections`): heading paths, blocks
kept whole, exact spans, front matter and CRLF, linear time, and a real documentation folder."""

from __future__ import annotations

import importlib.metadata
import re
import time
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from ragattn.errors import InvalidInputError
from ragattn.retrieve.corpus import read_corpus
from ragattn.retrieve.sections import (
    MarkdownChunk,
    chunk_markdown_documents,
    front_matter_end,
    heading_path,
    heading_text,
    markdown_chunks,
)
from ragattn.types import Document

GUIDE = """# Guide

Intro to the guide.

## Install

Run this:

```bash
# a shell comment, not a heading
pip install guide
```

## API

### get

Reads a key.

#### Options

| name | default |
|------|---------|
| timeout | 5 |

### put

Writes a key.

## FAQ

- one item
- two item
  still two
"""


def _exact(text: str, chunks: list[MarkdownChunk]) -> None:
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.text == chunk.text.rstrip()
        assert chunk.text.strip()


def _blocks(text: str, kind: str) -> list[str]:
    """The source text of every top-level block of ``kind`` (markdown-it's line map)."""
    md = MarkdownIt("commonmark").enable("table").disable("inline")
    lines = re.findall(r"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+$", text)  # markdown-it's line ends
    return [
        "".join(lines[t.map[0] : t.map[1]]).rstrip()
        for t in md.parse(text)
        if t.type == kind and t.level == 0 and t.map
    ]


def test_nested_headings_give_paths_and_sections() -> None:
    chunks = markdown_chunks(GUIDE, title="Guide", max_words=200)
    _exact(GUIDE, chunks)
    assert [c.title for c in chunks] == [
        "Guide",
        "Guide > Install",
        "Guide > API > get",  # "## API" holds nothing but its subsection: read with it
        "Guide > API > get > Options",
        "Guide > API > put",
        "Guide > FAQ",
    ]
    assert chunks[2].text.startswith("## API\n\n### get\n")
    assert chunks[2].headings == ("Guide", "API", "get")
    assert chunks[4].text == "### put\n\nWrites a key."
    # the chunks of a text cover every line of it below the front matter
    assert "\n".join(c.text for c in chunks).split() == GUIDE.split()


def test_code_fence_hash_lines_are_no_headings_and_fences_stay_whole() -> None:
    chunks = markdown_chunks(GUIDE, title=None, max_words=12)
    _exact(GUIDE, chunks)
    assert not any("comment" in " ".join(c.headings) for c in chunks)
    fence = _blocks(GUIDE, "fence")[0]
    holding = [c for c in chunks if fence in c.text]
    assert len(holding) == 1 and not holding[0].split  # the fence (12 words) never cut
    assert all(c.text.count("```") % 2 == 0 for c in chunks)


def test_tables_and_list_items_stay_whole() -> None:
    for size in (4, 6, 11, 12):  # the table has 11 words, the longer item 5
        chunks = markdown_chunks(GUIDE, max_words=size)
        _exact(GUIDE, chunks)
        table = _blocks(GUIDE, "table_open")[0]
        assert sum(table in c.text for c in chunks) == (size >= 11)
        if size >= 5:
            assert any("- two item\n  still two" in c.text for c in chunks)
        assert any(c.split for c in chunks) == (size < 12)  # the fence has 12 words
    items = markdown_chunks(GUIDE, max_words=5)
    assert [c.text for c in items[-2:]] == ["## FAQ\n\n- one item", "- two item\n  still two"]


def test_a_block_longer_than_a_chunk_is_cut_at_lines_and_rows_only() -> None:
    rows = "".join(f"| key{i} | value number {i} |\n" for i in range(30))
    code = "".join(f"call(argument_{i}, other)\n" for i in range(40))
    text = f"# T\n\n| key | value |\n|-----|-------|\n{rows}\n```python\n{code}```\n"
    chunks = markdown_chunks(text, max_words=20)
    _exact(text, chunks)
    table = [c for c in chunks if "| key" in c.text]
    assert table[0].text.startswith("# T\n\n| key | value |\n|-----|-------|\n")
    assert all(c.split for c in table)
    source_lines = set(text.splitlines())
    for c in chunks:
        assert set(c.text.splitlines()) <= source_lines  # every line whole
        assert c.words <= 20 + 2  # the chunk size, besides the heading "# T"
    coded = [c for c in chunks if "call(" in c.text]
    assert coded[0].text.startswith("```python\n") and coded[-1].text.endswith("```")
    assert "".join(c.text for c in coded).count("call(") == 40


def test_a_line_longer_than_a_chunk_is_cut_between_words() -> None:
    text = "## Long\n\n" + " ".join(f"w{i}" for i in range(50))
    chunks = markdown_chunks(text, max_words=10)
    _exact(text, chunks)
    assert [c.words for c in chunks] == [2 + 10, 10, 10, 10, 10]
    assert all(c.split for c in chunks) and all(c.title == "Long" for c in chunks)


def test_front_matter_is_in_no_chunk_and_no_setext_heading() -> None:
    text = "---\ntitle: Real title\ntags: [a]\n---\nBody before.\n\n## Part\n\nMore.\n"
    assert front_matter_end(text) == text.index("Body")
    chunks = markdown_chunks(text, title="Real title", max_words=50)
    _exact(text, chunks)
    assert [c.title for c in chunks] == ["Real title", "Real title > Part"]
    assert chunks[0].text == "Body before."
    assert all("tags" not in c.text for c in chunks)
    # a lone opening rule is no front matter, a byte-order mark is skipped
    assert front_matter_end("---\nno closing\n") == 0
    assert front_matter_end("\ufeff# T\n") == 1


def test_crlf_and_lone_cr_keep_exact_spans() -> None:
    crlf = GUIDE.replace("\n", "\r\n")
    chunks = markdown_chunks(crlf, title="Guide", max_words=200)
    _exact(crlf, chunks)
    assert [c.title for c in chunks] == [
        c.title for c in markdown_chunks(GUIDE, title="Guide", max_words=200)
    ]
    cr = "# A\r\rone\r\r## B\r\rtwo\r"
    chunks = markdown_chunks(cr, max_words=50)
    _exact(cr, chunks)
    assert [(c.title, c.text) for c in chunks] == [("A", "# A\r\rone"), ("A > B", "## B\r\rtwo")]


def test_heading_text_and_path() -> None:
    assert heading_text("**Use** `orjson`  fast") == "Use orjson fast"
    assert heading_path("orjson", ["orjson", "Install"]) == "orjson > Install"
    assert heading_path(None, ["A", "B"]) == "A > B"
    assert heading_path(None, []) is None
    text = "Setext title\n============\n\nbody\n\nSub *part*\n---\n\nmore\n"
    assert [c.title for c in markdown_chunks(text)] == ["Setext title", "Setext title > Sub part"]


def test_overlap_carries_whole_blocks() -> None:
    text = "# T\n\n" + "\n\n".join(f"para {i} has five words." for i in range(6)) + "\n"
    plain = markdown_chunks(text, max_words=12)
    over = markdown_chunks(text, max_words=12, overlap=5)
    _exact(text, over)
    assert len(over) > len(plain)
    for a, b in zip(over, over[1:], strict=False):
        last = a.text.split("\n\n")[-1]
        assert b.text.startswith(last)  # the block carried whole
    with pytest.raises(InvalidInputError, match="overlap"):
        markdown_chunks(text, max_words=5, overlap=5)
    with pytest.raises(InvalidInputError, match="at least 1 word"):
        markdown_chunks(text, max_words=0)


def test_chunk_markdown_documents_ids_and_metadata() -> None:
    docs = [
        Document(id="guide.md", title="Guide", text=GUIDE, metadata={"path": "guide.md"}),
        Document(id="short.md", title="Short", text="# Short\n\nOne line."),
    ]
    out = chunk_markdown_documents(docs, max_words=200)
    assert out[-1] == docs[1]  # one chunk: kept as is
    chunks = out[:-1]
    assert [c.id for c in chunks] == [f"guide.md#{n}" for n in range(6)]
    for n, c in enumerate(chunks):
        meta = c.metadata
        assert meta["path"] == "guide.md" and meta["source_id"] == "guide.md"
        assert meta["chunk"] == n
        assert GUIDE[meta["start"] : meta["end"]] == c.text
    assert chunks[3].title == "Guide > API > get > Options"
    assert chunks[3].metadata["section"] == "Guide > API > get > Options"
    assert chunks[0].metadata["section"] == "Guide"


@pytest.mark.parametrize(
    "text",
    [
        "# " + " " * 1_000_000 + "x\n\nbody",  # a 1 MB heading line of spaces
        "word " * 200_000,  # a 1 MB line without a newline
        "#" * 1_000_000,
        "| a |\n|---|\n" + "|" * 1_000_000,
    ],
    ids=["heading-spaces", "one-line", "hashes", "pipes"],
)
def test_hostile_input_is_linear(text: str) -> None:
    started = time.perf_counter()
    chunks = markdown_chunks(text, max_words=200)
    assert time.perf_counter() - started < 30  # generous: a quadratic pass takes hours
    _exact(text, chunks)
    assert chunks


def test_hostile_heading_is_its_text() -> None:
    chunks = markdown_chunks("# " + " " * 1_000_000 + "x\n\nbody")
    assert [c.title for c in chunks] == ["x"]


README_PACKAGES = ("markdown-it-py", "orjson", "redis", "rich", "typer", "litestar", "torch")


def _readmes() -> dict[str, str]:
    out = {}
    for name in README_PACKAGES:
        try:
            meta = importlib.metadata.metadata(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        text = meta.get_payload() or meta.get("Description") or ""  # type: ignore[attr-defined]
        if "markdown" in (meta.get("Description-Content-Type") or "") and text.strip():
            out[name] = text
    return out


def test_a_real_documentation_folder(tmp_path: Path) -> None:
    readmes = _readmes()
    if len(readmes) < 3:
        pytest.skip(f"only {sorted(readmes)} of {README_PACKAGES} installed with a README")
    for name, text in readmes.items():
        (tmp_path / f"{name}.md").write_text(text, encoding="utf-8", newline="")
    corpus = read_corpus(tmp_path)
    docs = {d.id: d for d in corpus.documents}
    chunks = chunk_markdown_documents(corpus.documents, max_words=120)
    assert len(chunks) > 3 * len(docs)
    fences = tables = 0
    for chunk in chunks:
        source = docs[chunk.metadata["source_id"]].text
        assert source[chunk.metadata["start"] : chunk.metadata["end"]] == chunk.text
        assert chunk.title and chunk.title.startswith(str(docs[chunk.metadata["source_id"]].title))
    for doc_id, doc in docs.items():
        mine = [c for c in chunks if c.metadata["source_id"] == doc_id]
        for kind in ("fence", "table_open"):
            for block in _blocks(doc.text, kind):
                holders = [c for c in mine if block in c.text]
                words = len(block.split())
                if words <= 100:  # fits a chunk, with what follows it: never cut
                    assert holders, (doc_id, block[:80])
                    fences += kind == "fence"
                    tables += kind == "table_open"
                elif not holders:  # cut at lines only: every line of it whole in a piece
                    pieces = [c for c in mine if c.metadata["split"]]
                    joined = "\n".join(c.text for c in pieces)
                    assert all(line in joined for line in block.splitlines())
    assert fences >= 5
