from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from ragattn.errors import InvalidInputError
from ragattn.retrieve.corpus import (
    chunk_documents,
    chunk_spans,
    markdown_title,
    read_corpus,
    with_ids,
)
from ragattn.types import Document


def test_read_beir(beir_file: Path) -> None:
    corpus = read_corpus(beir_file)
    assert corpus.format == "beir"
    assert [d.id for d in corpus.documents] == ["cat", "market", "bread", "vitamin", "running"]
    assert corpus.documents[3].title == "Vitamin D"
    assert corpus.documents[0].title is None  # BEIR's empty title is no title


def test_read_plain_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": 7, "text": "seven"}\n\n{"id": "b", "text": "bee", "title": "B"}\n')
    corpus = read_corpus(path)
    assert corpus.format == "jsonl"
    assert [(d.id, d.title, d.text) for d in corpus.documents] == [
        ("7", None, "seven"),
        ("b", "B", "bee"),
    ]


def test_read_folder_sorted_relative_ids_skips_hidden_and_empty(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.md").write_text("# B\nbee")
    (tmp_path / "sub" / "a.txt").write_text("ay")
    (tmp_path / "empty.txt").write_text("  \n")
    (tmp_path / ".hidden.txt").write_text("secret")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    corpus = read_corpus(tmp_path)
    assert corpus.format == "folder"
    assert [d.id for d in corpus.documents] == ["b.md", "sub/a.txt"]
    assert corpus.skipped == ("empty.txt: empty",)


def test_read_jsonl_title_from_metadata_when_the_record_has_none(tmp_path: Path) -> None:
    """A record exported from a framework keeps its title in metadata, as the adapters read it;
    a top-level title wins, and a blank or non-string one is no title."""
    path = tmp_path / "docs.jsonl"
    records = [
        {"id": "a", "text": "x", "metadata": {"title": "Meta A"}},
        {"id": "b", "text": "y", "title": "Top B", "metadata": {"title": "Meta B"}},
        {"id": "c", "text": "z", "title": "  ", "metadata": {"title": 3}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    corpus = read_corpus(path)
    assert [(d.id, d.title) for d in corpus.documents] == [
        ("a", "Meta A"),
        ("b", "Top B"),
        ("c", None),
    ]
    assert corpus.documents[0].metadata == {"title": "Meta A"}  # metadata kept as read


def test_read_folder_takes_markdown_headings_as_titles_and_keeps_the_text(tmp_path: Path) -> None:
    """A Markdown file's front-matter title or first heading is its title; the text is the file
    as written (heading and front matter included), so offsets stay offsets into the file; a
    .txt file is untitled, and titled and untitled documents sit in one corpus."""
    files = {
        "eiffel.md": "# Eiffel Tower\n\nThe tower was completed in 1889.\n",
        "front.md": "---\ntitle: 'Louvre Museum'\ntags: [art]\n---\n# Louvre\n\nIt holds art.\n",
        "plain.md": "No heading here, only text.\n",
        "notes.txt": "# Not a title in a text file\n",
        "sub/deep.md": "Intro.\n\n```sh\n# a comment, not a heading\n```\n\n## Rhine ##\nRiver.\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    corpus = read_corpus(tmp_path)
    assert [(d.id, d.title) for d in corpus.documents] == [
        ("eiffel.md", "Eiffel Tower"),
        ("front.md", "Louvre Museum"),
        ("notes.txt", None),
        ("plain.md", None),
        ("sub/deep.md", "Rhine"),
    ]
    assert {d.id: d.text for d in corpus.documents} == files


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("# Eiffel Tower\n\nbody", "Eiffel Tower"),
        ("\ufeff# With a BOM\r\nbody", "With a BOM"),
        ("   ### Indented ###  \nbody", "Indented"),
        ("Intro.\n\n## Later Section\n", "Later Section"),
        ("~~~\n# inside a fence\n~~~\n# After the fence\n", "After the fence"),
        ('---\ntitle: "Say \\"hi\\""\n---\n# Heading\n', 'Say "hi"'),
        ("---\nTitle: plain words # a comment\n...\n# Heading\n", "plain words"),
        ("---\nauthor: me\n# yaml comment\n---\n# Heading\n", "Heading"),
        ("---\ntitle: >\n  folded\n---\n# Heading\n", "Heading"),
        ("---\ntitle: ''\n---\nno heading\n", None),
        ("#hashtag\n#\n####### seven\n    # indented code\n", None),
        ("Title\n=====\nsetext headings are not read\n", None),
    ],
)
def test_markdown_title(text: str, title: str | None) -> None:
    assert markdown_title(text) == title


def test_demo_corpus_is_titled() -> None:
    """The shipped demo corpus starts every file with a heading: all thirteen are titled."""
    from ragattn.pipeline import demo_corpus_dir

    corpus = read_corpus(demo_corpus_dir())
    titles = {d.id: d.title for d in corpus.documents}
    assert len(titles) == 13 and all(titles.values())
    assert titles["eiffel-tower.md"] == "Eiffel Tower"
    assert titles["statue-of-liberty.md"] == "Statue of Liberty"


def test_empty_jsonl_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n")
    with pytest.raises(
        InvalidInputError, match=re.escape(f"corpus {path} has no documents; point --corpus at")
    ):
        read_corpus(path)


def test_folder_without_text_files_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty.md").write_text("")
    with pytest.raises(InvalidInputError, match=re.escape("has no non-empty .txt or .md files")):
        read_corpus(tmp_path)


def test_non_utf8_file_names_the_file_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(
        InvalidInputError, match=re.escape("latin1.txt: not valid UTF-8 (byte 3); convert it")
    ):
        read_corpus(tmp_path)


def test_dangling_symlink_is_an_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "gone.txt").symlink_to(tmp_path / "missing.txt")
    with pytest.raises(InvalidInputError, match=re.escape(f"cannot read {tmp_path / 'gone.txt'}")):
        read_corpus(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_permission_denied(tmp_path: Path) -> None:
    file = tmp_path / "locked.txt"
    file.write_text("x")
    file.chmod(0)
    with pytest.raises(InvalidInputError, match="permission denied; fix its permissions"):
        read_corpus(tmp_path)


def test_bad_json_line_and_missing_id(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n{oops\n')
    with pytest.raises(InvalidInputError, match=re.escape(f"{path}, line 2: not valid JSON")):
        read_corpus(path)
    path.write_text(json.dumps({"text": "x"}) + "\n")
    with pytest.raises(InvalidInputError, match=re.escape("line 1: missing 'id' (or BEIR '_id')")):
        read_corpus(path)


def test_duplicate_ids_rejected(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n')
    with pytest.raises(InvalidInputError, match="document id 'a' appears more than once"):
        read_corpus(path)


def test_missing_path_and_wrong_suffix(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        read_corpus(tmp_path / "nope.jsonl")
    other = tmp_path / "c.csv"
    other.write_text("a,b")
    with pytest.raises(InvalidInputError, match="is not a .jsonl file"):
        read_corpus(other)


def test_chunk_spans_overlap_exactly() -> None:
    text = "w0 w1  w2\nw3 w4 w5 w6"
    spans = chunk_spans(text, max_words=3, overlap=1)
    assert [text[a:b] for a, b in spans] == ["w0 w1  w2", "w2\nw3 w4", "w4 w5 w6"]
    assert chunk_spans("one two", max_words=3, overlap=1) == [(0, 7)]
    assert chunk_spans("   ", max_words=3, overlap=1) == []
    with pytest.raises(InvalidInputError, match=re.escape("chunk overlap must be in [0, 3)")):
        chunk_spans(text, max_words=3, overlap=3)


def test_chunk_documents_ids_metadata_and_substrings() -> None:
    source = Document(id="d", title="T", text="a b c d e", metadata={"k": 1})
    short = Document(id="s", text="tiny")
    chunks = chunk_documents([source, short], max_words=2, overlap=0)
    assert [c.id for c in chunks] == ["d#0", "d#1", "d#2", "s"]
    assert [c.text for c in chunks] == ["a b", "c d", "e", "tiny"]
    for c in chunks[:3]:
        assert source.text[c.metadata["start"] : c.metadata["end"]] == c.text
        assert c.metadata["source_id"] == "d" and c.metadata["k"] == 1 and c.title == "T"


def test_with_ids_fills_positions() -> None:
    docs = with_ids(["x", Document(id="y", text="why"), {"text": "z"}])
    assert [d.id for d in docs] == ["0", "y", "2"]
