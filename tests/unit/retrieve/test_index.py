from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragattn.embed import Embedder
from ragattn.errors import InvalidInputError
from ragattn.retrieve.corpus import content_hash
from ragattn.retrieve.index import Index
from ragattn.types import Document

QUERIES = ("a kitten on a rug", "bake bread", "vitamin deficiency", "stock shares")


def _results(index: Index) -> dict[tuple[str, str], list[tuple[str, float]]]:
    return {
        (mode, q): [(h.doc_id, round(h.score, 5)) for h in index.search(q, 3, mode=mode)]  # type: ignore[arg-type]
        for mode in ("bm25", "dense", "hybrid")
        for q in QUERIES
    }


def test_round_trip_same_results_and_manifest(
    beir_file: Path, tmp_path: Path, embedder: Embedder
) -> None:
    out = tmp_path / "idx"
    built = Index.build(beir_file, out, embedder=embedder)
    loaded = Index.load(out, embedder=embedder)
    assert _results(loaded) == _results(built)
    assert loaded.search("bake bread", 1)[0].doc_id == "bread"
    m = json.loads((out / "manifest.json").read_text())
    assert m["documents"] == m["source_documents"] == 5
    assert m["source_format"] == "beir" and m["chunking"] is None
    assert (
        m["dense"]["embedder"] == "minilm-l6"
        and m["dense"]["dim"] == 384
        and m["dense"]["index"] == "flat"
    )
    assert m["bm25"]["backend"] == "bm25s"
    assert m["content_hash"] == content_hash(loaded.documents)
    assert sorted(p.name for p in out.iterdir()) == [
        "bm25",
        "dense.faiss",
        "documents.jsonl",
        "manifest.json",
    ]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_rank_bm25_backend_round_trip_without_dense(beir_file: Path, tmp_path: Path) -> None:
    built = Index.build(beir_file, tmp_path / "idx", bm25_backend="rank_bm25", dense=False)
    loaded = Index.load(tmp_path / "idx")
    assert (
        [h.doc_id for h in loaded.search("cat mat", 2)]
        == [h.doc_id for h in built.search("cat mat", 2)]
        == ["cat"]
    )
    with pytest.raises(InvalidInputError, match="built without dense vectors"):
        loaded.search("cat", mode="dense")


def test_folder_corpus_is_chunked(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "long.md").write_text(" ".join(f"w{i}" for i in range(450)))
    (folder / "short.txt").write_text("tiny note about zebras")
    index = Index.build(folder, tmp_path / "idx", dense=False)
    assert [d.id for d in index.documents] == ["long.md#0", "long.md#1", "long.md#2", "short.txt"]
    assert index.manifest.chunking == {"max_words": 200, "overlap": 40, "markdown": "sections"}
    assert index.search("w400", 5)[0].doc_id == "long.md#2"
    assert index.search("zebras", 5)[0].doc_id == "short.txt"


class _InterruptingEmbedder:
    """Stands in for the embedder to interrupt a build half-way (the writer is under test)."""

    name = "interrupting"
    dim = 384

    def encode(self, texts: list[str], *, show_progress: bool = False, cache: bool = True) -> None:
        raise KeyboardInterrupt


def test_interrupted_build_leaves_previous_index_intact(
    beir_file: Path, tmp_path: Path, embedder: Embedder
) -> None:
    out = tmp_path / "idx"
    Index.build(beir_file, out, embedder=embedder)
    before = _results(Index.load(out, embedder=embedder))
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "new", "text": "entirely new corpus"}\n')
    with pytest.raises(KeyboardInterrupt):
        Index.build(other, out, embedder=_InterruptingEmbedder())  # type: ignore[arg-type]
    assert _results(Index.load(out, embedder=embedder)) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl", "idx", "other.jsonl"]
    # a successful rebuild replaces it
    Index.build(other, out, embedder=embedder)
    assert [d.id for d in Index.load(out, embedder=embedder).documents] == ["new"]


@pytest.mark.slow
def test_killed_build_process_leaves_previous_index_intact(
    beir_file: Path, tmp_path: Path, embedder: Embedder
) -> None:
    out = tmp_path / "idx"
    Index.build(beir_file, out, embedder=embedder)
    before = _results(Index.load(out, embedder=embedder))
    big = tmp_path / "big.jsonl"
    with big.open("w") as fh:
        for i in range(20_000):
            fh.write(
                json.dumps({"id": f"d{i}", "text": f"document number {i} about topic {i % 97}"})
                + "\n"
            )
    script = (
        "import sys; from ragattn.retrieve.index import Index; "
        "Index.build(sys.argv[1], sys.argv[2])"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(big), str(out)])
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob(".idx.tmp-*")):  # created before any stage runs
            assert proc.poll() is None, "build finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert list(tmp_path.glob(".idx.tmp-*")), (
        "the kill landed mid-build: its temp dir is left behind"
    )
    assert _results(Index.load(out, embedder=embedder)) == before


def test_refuses_to_replace_a_non_index_directory(beir_file: Path, tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.mkdir()
    (target / "thesis.tex").write_text("do not delete")
    with pytest.raises(
        InvalidInputError, match="non-empty directory without manifest.json; refusing"
    ):
        Index.build(beir_file, target, dense=False)
    assert (target / "thesis.tex").read_text() == "do not delete"


def test_load_errors(beir_file: Path, tmp_path: Path) -> None:
    with pytest.raises(
        InvalidInputError, match=re.escape(f"{tmp_path} is not a ragattn index (no manifest.json)")
    ):
        Index.load(tmp_path)
    out = tmp_path / "idx"
    Index.build(beir_file, out, dense=False)
    docs = out / "documents.jsonl"
    docs.write_text(docs.read_text().replace("purred", "barked"))
    with pytest.raises(
        InvalidInputError, match="is corrupt: documents.jsonl does not match manifest.json"
    ):
        Index.load(out)


def test_empty_inputs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(InvalidInputError, match="has no documents; point --corpus at"):
        Index.build(empty, tmp_path / "idx")
    with pytest.raises(InvalidInputError, match="from no documents"):
        Index.build([], tmp_path / "idx")
    assert not (tmp_path / "idx").exists()


def test_documents_sequence_input(tmp_path: Path) -> None:
    index = Index.build(
        ["alpha beta", Document(id="g", text="gamma delta")], tmp_path / "i", dense=False
    )
    assert [h.doc_id for h in index.search("gamma", 3)] == ["g"]
    assert index.manifest.source_format == "documents"


class _CountingEmbedder:
    """Delegates to the real MiniLM and records which texts it was asked to encode."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.encoded: list[str] = []

    def encode(  # type: ignore[no-untyped-def]
        self, texts: list[str], *, show_progress: bool = False, cache: bool = True
    ):
        self.encoded += list(texts)
        return self.inner.encode(texts, cache=cache)


def test_rebuild_reencodes_only_changed_documents(
    beir_file: Path, tmp_path: Path, embedder: Embedder
) -> None:
    out = tmp_path / "idx"
    counting = _CountingEmbedder(embedder)
    Index.build(beir_file, out, embedder=counting)  # type: ignore[arg-type]
    assert len(counting.encoded) == 5
    edited = tmp_path / "edited.jsonl"
    edited.write_text(beir_file.read_text().replace("purred at the sleeping dog", "chased a mouse"))
    counting.encoded.clear()
    rebuilt = Index.build(edited, out, embedder=counting)  # type: ignore[arg-type]
    assert counting.encoded == ["The cat sat on the mat and chased a mouse."]
    assert rebuilt.manifest.reused_vectors == 4
    fresh = Index.build(edited, tmp_path / "fresh", embedder=embedder)
    assert _results(Index.load(out, embedder=embedder)) == _results(fresh)


def test_markdown_folder_indexes_its_headings_as_titles(tmp_path: Path) -> None:
    """A folder of Markdown files: each file's first heading (or front-matter title) is the title
    of every chunk of it, stored, loaded back, searchable (BM25 indexes ``title + text``) and on
    every hit; untitled files sit beside titled ones; the text is the file as written."""
    from typer.testing import CliRunner

    from ragattn.cli.index import index_app

    folder = tmp_path / "notes"
    folder.mkdir()
    long_text = "# Zanzibar Archipelago\n\n" + " ".join(f"w{i}" for i in range(300))
    (folder / "long.md").write_text(long_text)
    (folder / "front.md").write_text("---\ntitle: Quokka Island\n---\nA small marsupial.\n")
    (folder / "plain.txt").write_text("tiny note about zebras")
    out = tmp_path / "idx"
    built = Index.build(folder, out, dense=False)
    want = {
        "front.md": "Quokka Island",
        "long.md#0": "Zanzibar Archipelago",
        "long.md#1": "Zanzibar Archipelago",
        "plain.txt": None,
    }
    assert {d.id: d.title for d in built.documents} == want
    loaded = Index.load(out)
    assert {d.id: d.title for d in loaded.documents} == want
    first = loaded.documents[1]  # long.md#0: the heading line stays in the text
    assert first.text.startswith("# Zanzibar Archipelago\n\nw0 w1")
    assert long_text[first.metadata["start"] : first.metadata["end"]] == first.text
    hits = loaded.search("quokka", 2, mode="bm25")  # only the title names it
    assert (hits[0].doc_id, hits[0].title) == ("front.md", "Quokka Island")
    deep = loaded.search("zanzibar w290", 1, mode="bm25")[0]  # a chunk past the heading
    assert (deep.doc_id, deep.title) == ("long.md#1", "Zanzibar Archipelago")

    runner = CliRunner()
    result = runner.invoke(
        index_app,
        ["build", "--corpus", str(folder), "--out", str(out), "--no-dense", "--no-progress"],
    )
    assert result.exit_code == 0, result.output
    assert "titled: 3 of 4 documents" in result.output
    result = runner.invoke(index_app, ["search", str(out), "quokka", "-k", "1", "--mode", "bm25"])
    assert result.exit_code == 0, result.output
    assert "front.md  [Quokka Island]  --- title: Quokka Island" in result.output


def test_an_index_built_without_titles_still_loads(tmp_path: Path) -> None:
    """An index written before folders were titled has ``"title": null`` records: it loads and
    searches as before (its titles arrive with a rebuild)."""
    out = tmp_path / "idx"
    Index.build([Document(id="a.md", text="# Alpha\n\nalpha text")], out, dense=False)
    record = json.loads((out / "documents.jsonl").read_text())
    assert record["title"] is None
    loaded = Index.load(out)
    assert [(h.doc_id, h.title) for h in loaded.search("alpha", 1)] == [("a.md", None)]
