from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ragattn.cli.index import index_app

runner = CliRunner()


def test_build_then_search(beir_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "idx"
    result = runner.invoke(
        index_app, ["build", "--corpus", str(beir_file), "--out", str(out), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert (
        f"wrote {out}: 5 documents from 5 (beir), bm25=bm25s, dense=flat dim=384" in result.output
    )
    result = runner.invoke(index_app, ["search", str(out), "sourdough bread", "-k", "2", "--json"])
    assert result.exit_code == 0, result.output
    hits = [json.loads(line) for line in result.stdout.splitlines()]
    assert hits[0]["doc_id"] == "bread" and hits[0]["rank"] == 1 and len(hits) == 2
    result = runner.invoke(index_app, ["search", str(out), "sourdough bread", "--mode", "bm25"])
    assert result.exit_code == 0, result.output
    rank, score, doc_id = result.stdout.splitlines()[0].split()[:3]
    assert (rank, doc_id) == ("1", "bread") and float(score) > 0


def test_errors_exit_2_with_message(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(
        index_app, ["build", "--corpus", str(empty), "--out", str(tmp_path / "idx")]
    )
    assert result.exit_code == 2
    assert "has no non-empty .txt or .md files; point --corpus at" in result.output
    result = runner.invoke(index_app, ["search", str(tmp_path), "q"])
    assert result.exit_code == 2 and "is not a ragattn index" in result.output
