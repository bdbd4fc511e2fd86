"""Issue 59, class 3: the folder indexer on a hostile corpus (an archive, a clone, a shared drive).

Every test builds a real index from a real folder. A check that the old code failed by hanging
(a quadratic heading, a FIFO) runs the real ``ragattn index build`` in a child process with a
timeout, so it fails in a bounded time instead of blocking the suite.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ragattn.errors import InvalidInputError
from ragattn.retrieve.corpus import markdown_title, read_corpus, read_folder
from ragattn.retrieve.index import Index

MB = 1_000_000
# The child's budget: a cold start of the CLI is about 3 s on a loaded 2-core machine; the old
# parser took hours on one file below and the old reader blocked forever on the FIFO.
CHILD_TIMEOUT_S = 120


def _cli_build(corpus: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragattn.cli", "index", "build", "--corpus", str(corpus)]
        + ["--out", str(out), "--no-dense", "--no-progress", *extra],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )


def _indexed(out: Path) -> dict[str, dict]:
    lines = (out / "documents.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["id"]: r for r in map(json.loads, lines)}


def _error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The child's stderr, which must be exactly one 'error:' line and no traceback."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "│" not in done.stderr, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


# --- 1. linear-time parsing of every line the indexer reads --------------------------------------


def test_megabyte_pathological_lines_are_parsed_in_linear_time(tmp_path: Path) -> None:
    """1 MB lines of spaces, tabs, backticks and one word: the old heading pattern took hours on
    the first (21.6 s at 32,000 characters, growing with the square); each file is now read in
    one pass, with the title CommonMark gives it."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    files = {
        "spaces.md": "# x" + " " * MB + "y\n\nlions roam the savanna\n",
        "spaces-closed.md": "# Savanna" + " " * MB + "#\n\nzebras graze\n",
        "tabs.md": "#" + " \t" * (MB // 2) + "#\n\n## Tabs\ngiraffes browse\n",
        "front.md": "---\ntitle:" + " " * MB + "Front Title\n---\nhippos wallow\n",
        "fence.md": "`" * MB + "\n# inside a fence\n" + "`" * MB + "\n# After\nrhinos charge\n",
        "word.txt": "w" * MB + " elephants trumpet\n",
    }
    for name, text in files.items():
        (corpus / name).write_text(text, encoding="utf-8")
    out = tmp_path / "idx"
    done = _cli_build(corpus, out)
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["build_seconds"]["read"] < 5.0  # generous; the old parser: hours
    titles = {d["metadata"]["path"]: d["title"] for d in _indexed(out).values()}
    assert titles == {
        "fence.md": "After",
        "front.md": "Front Title",
        "spaces-closed.md": "Savanna",
        "spaces.md": "x" + " " * MB + "y",  # CommonMark keeps inner spaces
        "tabs.md": "Tabs",  # a heading of only a closing sequence is empty: the next one
        "word.txt": None,
    }
    assert Index.load(out).search("giraffes", 1, mode="bm25")[0].doc_id.startswith("tabs.md")


@pytest.mark.parametrize(
    ("line", "title"),
    [
        ("# Title #", "Title"),
        ("# Title#", "Title#"),  # no space before the '#': part of the text
        ("## Title ##   ", "Title"),
        ("#\tTabbed\t#\t", "Tabbed"),
        ("# #", None),  # only a closing sequence: an empty heading
        ("# ## x", "## x"),
        ("   # three spaces", "three spaces"),
        ("#" + " " * 50_000 + "#", None),
        ("# a" + " \t" * 10_000 + "b #", "a" + " \t" * 10_000 + "b"),
    ],
)
def test_atx_heading_rules(line: str, title: str | None) -> None:
    assert markdown_title(line + "\nbody") == title


# --- 2. symbolic links that lead outside the corpus folder ---------------------------------------


def _corpus_with_links(tmp_path: Path) -> Path:
    """A corpus whose links lead to a secret file and folder outside it, inside it, and in loops."""
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "secret.md").write_text("# Secret\nthe zebra password is hunter2\n")
    (outside / "folder" / "private.txt").write_text("okapi bank account details\n")
    (outside / "folder" / "again").symlink_to(outside / "folder")  # a loop outside
    (outside / "folder" / "corpus").symlink_to(tmp_path / "corpus")  # back into the corpus
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "a.md").write_text("# Lions\nlions hunt at night\n")
    (corpus / "innocent.md").symlink_to(outside / "secret.md")
    (corpus / "shared").symlink_to(outside / "folder")
    (corpus / "alias.md").symlink_to(corpus / "a.md")  # inside: read under the link's name
    (corpus / "sub" / "up").symlink_to(corpus)  # a loop inside: not descended
    return corpus


def test_links_leading_outside_the_folder_are_skipped_and_never_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = _corpus_with_links(tmp_path)
    with caplog.at_level(logging.WARNING):
        Index.build(corpus, tmp_path / "idx", dense=False)
    index = Index.load(tmp_path / "idx")
    assert sorted(d.id for d in index.documents) == ["a.md", "alias.md"]
    assert not any("hunter2" in d.text or "okapi" in d.text for d in index.documents)
    for query in ("zebra password hunter2", "okapi bank account"):
        assert index.search(query, 5, mode="bm25") == []
    skipped = index.manifest.skipped
    assert "innocent.md: symbolic link leading outside the corpus folder, not followed; " in (
        "\n".join(skipped)
    )
    assert any(
        s.startswith("shared: symbolic link to a folder outside the corpus") for s in skipped
    )
    assert any(s.startswith("sub/up: symbolic link to a folder inside the corpus") for s in skipped)
    assert f"symbolic link {corpus / 'innocent.md'} leads to {tmp_path / 'outside'}" in caplog.text


def test_follow_symlinks_opts_in_and_reads_each_folder_once(tmp_path: Path) -> None:
    corpus = _corpus_with_links(tmp_path)
    read = read_folder(corpus, follow_symlinks=True)
    assert [d.id for d in read.documents] == [
        "a.md",
        "alias.md",
        "innocent.md",
        "shared/private.txt",
    ]
    assert read.documents[2].title == "Secret"
    assert "shared/again: symbolic link to a folder already read (a loop or a second link)" in (
        read.skipped
    )
    assert any(
        s.startswith("shared/corpus: symbolic link to a folder inside") for s in read.skipped
    )
    done = _cli_build(corpus, tmp_path / "idx", "--follow-symlinks")
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(_indexed(tmp_path / "idx")) == [d.id for d in read.documents]


# --- 3. FIFOs, sockets, devices ------------------------------------------------------------------


def test_special_files_named_like_documents_are_skipped_unopened(tmp_path: Path) -> None:
    """The old reader opened pipe.md and waited for a writer forever."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Lions\nlions hunt at night\n")
    os.mkfifo(corpus / "pipe.md")
    (corpus / "pipe-link.txt").symlink_to(corpus / "pipe.md")
    (corpus / "null.txt").symlink_to("/dev/null")  # a device, outside the folder
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(corpus / "sock.txt"))
        done = _cli_build(corpus, tmp_path / "idx")
    assert done.returncode == 0, done.stderr[-2000:]
    assert list(_indexed(tmp_path / "idx")) == ["a.md"]
    skipped = json.loads((tmp_path / "idx" / "manifest.json").read_text())["skipped"]
    assert skipped == [
        "null.txt: symbolic link leading outside the corpus folder, not followed; "
        "follow_symlinks=True (--follow-symlinks) follows it",
        "pipe-link.txt: symbolic link to a FIFO, not a regular file; not read",
        "pipe.md: not a regular file (a FIFO); only files are read",
        "sock.txt: not a regular file (a socket); only files are read",
    ]
    assert "skipped 4: null.txt: " in done.stderr


def test_a_fifo_given_as_the_corpus_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "corpus.jsonl")
    with pytest.raises(InvalidInputError, match="is neither a file nor a folder"):
        read_corpus(tmp_path / "corpus.jsonl")


# --- 4. a corpus with nothing to search ---------------------------------------------------------


@pytest.mark.parametrize("backend", ["bm25s", "rank_bm25"])
def test_a_corpus_without_a_searchable_word_is_a_clear_error(tmp_path: Path, backend: str) -> None:
    """bm25s raised a raw ValueError on the empty vocabulary; rank_bm25 built an index that
    matched nothing."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "stop.txt").write_text("The and of it is a to in.\n")
    (corpus / "marks.md").write_text("# ?\n\n! - , . ; x y z 1 2\n")
    with pytest.raises(
        InvalidInputError,
        match=re.escape("no searchable word in the 2 document(s): every word is a stop word, one"),
    ):
        Index.build(corpus, tmp_path / "idx", dense=False, bm25_backend=backend)  # type: ignore[arg-type]
    assert not (tmp_path / "idx").exists()


# --- every refusal is one line -----------------------------------------------------------------


def test_every_refusal_of_the_cli_is_one_line(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "stop.txt").write_text("the of and\n")
    line = _error_line(_cli_build(corpus, tmp_path / "idx"))
    assert line.startswith("error: no searchable word in the 1 document(s)")

    (corpus / "bad\nname.txt").write_bytes("caf\xe9 lions".encode("latin-1"))
    line = _error_line(_cli_build(corpus, tmp_path / "idx"))
    assert line == f"error: cannot read {corpus}/bad\\nname.txt: not valid UTF-8 (byte 3); " + (
        "convert it to UTF-8 or remove it from the corpus"
    )

    (corpus / "bad\nname.txt").unlink()
    (corpus / "lions.txt").write_text("lions hunt\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    line = _error_line(_cli_build(corpus, blocker / "idx"))
    assert line.startswith(f"error: cannot write the index to {blocker / 'idx'}: ")


def test_a_file_name_that_is_not_utf8_is_skipped_not_a_crash(tmp_path: Path) -> None:
    """The old reader indexed the name as a lone surrogate, and writing the index failed."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "lions.md").write_text("# Lions\nlions hunt\n")
    with open(os.fsencode(corpus) + b"/caf\xe9.md", "w") as fh:
        fh.write("# Cafe\ncoffee\n")
    index = Index.build(corpus, tmp_path / "idx", dense=False)
    assert [d.id for d in index.documents] == ["lions.md"]
    assert index.manifest.skipped == (
        "caf\\xe9.md: its name is not valid UTF-8; rename it to read it",
    )
    assert Index.load(tmp_path / "idx").manifest.skipped == index.manifest.skipped
