"""The ``ragattn`` command line as a package: every command answers ``--help``, method listings
come from the registries, ``serve`` arrives through its entry point, and a command whose optional
dependency is missing fails alone with that dependency's message."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from ragattn.cli import app
from ragattn.errors import MissingDependencyError

runner = CliRunner()

COMMANDS = [
    ["ask"],
    ["demo"],
    ["version"],
    ["serve"],
    ["eval", "rerank"],
    ["eval", "compress"],
    ["probe", "train"],
    ["heads", "select"],
    ["heads", "detect"],
    ["bench", "attention"],
    ["bench", "levers"],
    ["bench", "compress"],
    ["bench", "rerank"],
    ["bench", "startup"],
    ["index", "build"],
    ["index", "search"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_answers_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert f"ragattn {' '.join(command)} [OPTIONS]" in " ".join(result.output.split())


def test_root_help_lists_every_command_group() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0, result.output
    for name in ("ask", "demo", "version", "serve", "eval", "probe", "heads", "bench", "index"):
        assert f"│ {name} " in result.output


def test_method_help_reads_the_registries() -> None:
    from ragattn.compress import METHODS as COMPRESS
    from ragattn.rerank import METHODS as RERANK

    rerank = " ".join(runner.invoke(app, ["eval", "rerank", "--help"]).output.split())
    ask = " ".join(runner.invoke(app, ["ask", "--help"]).output.split())
    assert all(f"{name}: {spec.description}" in rerank for name, spec in RERANK.items())
    assert all(f"{name}: {spec.description}" in ask for name, spec in COMPRESS.items())
    from ragattn.lab.registry import RERANK_VARIANTS
    from ragattn.rerank import DEFAULT_METHOD

    assert f"rerank methods (default {DEFAULT_METHOD})" in ask
    assert "--language" in ask
    # eval reaches the lab's variants by name and lists them; the service's commands do not
    assert all(f"{name}: {spec.description}" in rerank for name, spec in RERANK_VARIANTS.items())
    assert not any(f"{name}: " in ask for name in RERANK_VARIANTS)


def test_serve_is_the_services_command_found_by_entry_point() -> None:
    import ragattn_api.cli

    command = next(c for c in app.registered_commands if c.name == "serve")
    assert command.callback is ragattn_api.cli.serve


def test_a_command_with_a_missing_dependency_fails_alone_with_its_message() -> None:
    cli = typer.Typer()
    cli.command("ok")(lambda: typer.echo("fine"))
    missing = MissingDependencyError("'ray' is not installed; install it with: pip install ray")
    from ragattn.cli import add_unavailable

    add_unavailable(cli, "batch", missing)
    result = runner.invoke(cli, ["batch", "run", "--input", "x.jsonl"])
    assert result.exit_code == 2
    assert f"error: {missing}" in result.output
    assert runner.invoke(cli, ["ok"]).output == "fine\n"


@pytest.mark.slow  # a fresh interpreter
def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ragattn.cli", "version"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    from ragattn import __version__

    assert done.stdout.strip() == __version__


def _hotpot_file(path: Path, n: int) -> Path:
    """``n`` hotpot-layout questions; question ``i`` asks about ``Town i`` and its gold sentence
    is the only one that names it."""
    records = [
        {
            "_id": f"q{i}",
            "question": f"Which river runs through Town {i}?",
            "answer": f"River {i}",
            "supporting_facts": [[f"Town {i}", 1]],
            "context": [
                [f"Town {i}", [f"Town {i} is a small place.", f"Town {i} lies on River {i}."]],
                ["Weather", ["It rained a lot that year.", "Summers are warm and dry."]],
            ],
        }
        for i in range(n)
    ]
    path.write_text(json.dumps(records))
    return path


def test_eval_compress_offset_skips_the_first_questions(tmp_path: Path) -> None:
    data = _hotpot_file(tmp_path / "hotpot.json", 5)
    out = tmp_path / "report.json"
    args = ["eval", "compress", "--dataset", "hotpotqa", str(data), "--method", "bm25"]
    result = runner.invoke(app, [*args, "--offset", "3", "--limit", "10", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "hotpotqa: 2 questions, from question 3" in result.output
    assert json.loads(out.read_text())["num_examples"] == 2
    past_the_end = runner.invoke(app, [*args, "--offset", "5"])
    assert past_the_end.exit_code == 2
    assert "skips every question" in " ".join(past_the_end.output.split())


def test_bench_rerank_times_a_method_on_a_second_proxy_in_the_same_run(
    tmp_path: Path, proxy: Any
) -> None:
    """``name@proxy`` runs the method on that proxy; every row names the proxy it ran on."""
    from ragattn.lab.bench import bench_rerank

    docs = [
        {"docid": f"d{i}", "rank": i + 1, "bm25_score": 1.0, "text": text}
        for i, text in enumerate(["Paris is in France.", "Bananas are yellow.", "Lyon is big."])
    ]
    queries = [
        {"qid": f"q{n}", "query": f"Where is Paris? ({n})", "candidates": docs} for n in (1, 2)
    ]
    (tmp_path / "candidates_bm25_top100.jsonl").write_text(
        "\n".join(json.dumps(q) for q in queries) + "\n"
    )
    (tmp_path / "qrels.trec.txt").write_text("q1 Q0 d0 1\nq2 Q0 d0 1\n")
    other = dataclasses.replace(proxy, name="smollm2-copy")  # the same weights, no second load
    rows = bench_rerank(
        proxy,
        tmp_path,
        methods=["minilm", "icr@copy"],
        n_docs=3,
        queries=2,
        proxies={"copy": other},
    )
    assert [r["method"] for r in rows] == ["minilm", "icr@copy"]
    assert [r["proxy"] for r in rows] == [proxy.name, "smollm2-copy"]
    assert [len(r["runs_s"]) for r in rows] == [2, 2]
    assert [len(r["warm_runs_s"]) for r in rows] == [2, 2]
    assert rows[0]["ratio_to_first"] == 1.0
    assert rows[0]["warm_to_cold"] == pytest.approx(rows[0]["warm_median_s"] / rows[0]["median_s"])
    assert all(r["cpu_capability"] and r["dtype"] for r in rows)
    with pytest.raises(ValueError, match="names proxy 'elsewhere'"):
        bench_rerank(proxy, tmp_path, methods=["minilm@elsewhere"], n_docs=3, queries=1)


def _tiny_hotpot(folder: Path, questions: int) -> None:
    """A HotpotQA-shaped file of ``questions`` two-paragraph contexts, for the compress benches."""
    rows = [
        {
            "question": f"Who founded company {n}?",
            "context": [
                [f"Company {n}", [f"Company {n} was founded by person {n}.", "It makes tools."]],
                [f"Town {n}", [f"Town {n} lies on river {n}.", f"It has {n} bridges."]],
            ],
        }
        for n in range(questions)
    ]
    (folder / "hotpot_dev_distractor_v1.shared.json").write_text(json.dumps(rows))


def test_bench_compress_baseline_is_the_fp32_naive_forward_whatever_the_served_dtype(
    tmp_path: Path, proxy: Any
) -> None:
    """bf16 (what ``dtype="auto"`` serves on a native-bf16 CPU) is timed against the same fp32
    naive forward, so it counts as a lever; each row names its dtype."""
    import torch

    from ragattn.lab.bench import in_dtype
    from ragattn.lab.bench_compress import bench_read_once

    _tiny_hotpot(tmp_path, 4)
    half = in_dtype(proxy, torch.bfloat16)
    assert half.dtype == torch.bfloat16 and next(half.model.parameters()).dtype == torch.bfloat16
    assert next(proxy.model.parameters()).dtype == torch.float32  # a copy, the fixture untouched
    out = bench_read_once(half, tmp_path, tokens=20, runs=1)
    naive, full = out[0], out[1]
    assert naive["variant"].startswith("naive") and naive["variant"].endswith("float32")
    assert full["variant"].endswith("bfloat16") and full["vs_naive"] > 0
    assert all(r["dtype"] == "bfloat16" for r in out)  # the runtime of the served rows


def test_bench_compress_times_the_joint_call_beside_the_two_calls(
    tmp_path: Path, proxy: Any
) -> None:
    """Issue 28's cost target: one forward for both answers, against the rerank default then the
    compress default, in the same run as the compressor alone."""
    from ragattn.lab.bench_compress import bench_compress

    _tiny_hotpot(tmp_path, 2)
    out = bench_compress(proxy, tmp_path, tokens=20, runs=1, methods=["sentinel"], passes=False)
    names = [r["variant"] for r in out]
    assert "compress, sentinel, selection=sentences" in names
    assert "rerank_and_compress, sentinel (default), one forward" in names
    assert "rerank (minilm) then compress (sentinel)" in names
    assert all(r["median_s"] > 0 and r["documents"] >= 2 for r in out)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--quota", "bogus-train=3"], "expected SOURCE=N"),
        (["--quota", "nq-train=many"], "expected SOURCE=N"),
        (["--quota", "nq-train=0"], "expected SOURCE=N"),
        (["--kind", "rerank", "--quota", "nq-train=3"], "--kind compress only"),
        (["--kind", "selection", "--document-score", "bm25"], "unknown document_score 'bm25'"),
        (["--document-score", "attention"], "selection only"),
    ],
)
def test_probe_train_refuses_a_bad_quota_before_loading_anything(
    args: list[str], message: str
) -> None:
    result = runner.invoke(app, ["probe", "train", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_load_training_refuses_a_quota_for_an_unknown_source(tmp_path: Path) -> None:
    from ragattn.lab.probe_training import SOURCES, load_training

    assert "musique-train" in SOURCES
    with pytest.raises(ValueError, match="unknown sources: \\['nq'\\]"):
        load_training(tmp_path, quotas={"nq": 10})
