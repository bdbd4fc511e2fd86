"""``ragattn demo`` reports a warm read's seconds stage by stage, and loading apart."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from ragattn.cli import app
from ragattn.compress.read import STAGES


def test_the_demo_shows_a_warm_reads_stages_and_loading_apart(proxy: Any) -> None:
    result = CliRunner().invoke(app, ["demo"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "loaded in" in flat and "compressor ready in" in flat  # loading, reported apart
    assert "s warm, ranking and pruning from one forward" in flat
    line = flat.split("where the read's", 1)[1].split("the context for the generator", 1)[0]
    named = [part.split()[0] for part in line.split(" went: ", 1)[1].split(", ")]
    assert named == list(STAGES)
