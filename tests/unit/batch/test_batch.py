"""``ragattn batch`` and ``ragattn.batch``: results equal the library's, resumption, bad rows.

The Ray tests start one local Ray (3 logical CPUs: two actors and the reading tasks) for the
module and run the real packaged proxy in its actors; they are marked ``slow``.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragattn.batch import BatchTask
from ragattn.batch.command import batch_app
from ragattn.batch.io import load_done, resolve_inputs
from ragattn.errors import InvalidInputError
from ragattn.types import DEFAULT_BUDGET

GOOD = [
    {
        "id": "paris",
        "query": "What is the capital of France?",
        "documents": [
            "Berlin is the capital of Germany. It lies on the Spree.",
            "Paris is the capital of France. The Louvre is in Paris.",
            {"text": "The Rhine flows from the Alps to the North Sea.", "id": "rhine"},
        ],
    },
    {
        "id": 7,
        "query": "Who discovered radium?",
        "documents": [
            "The banana is an elongated edible fruit.",
            "Marie Curie discovered radium and polonium. She won two Nobel Prizes.",
        ],
    },
    {
        "id": "everest",
        "query": "How high is Mount Everest?",
        "documents": [
            {"text": "Mount Everest is 8,849 metres high. It lies in the Himalayas.", "id": "e1"},
            "Scurvy is caused by a lack of vitamin C.",
            "The Statue of Liberty stands in New York Harbor.",
        ],
    },
    {
        "id": "python",
        "query": "Who created the Python language?",
        "documents": [
            "Photosynthesis turns light into chemical energy.",
            "Python was created by Guido van Rossum. It was first released in 1991.",
        ],
    },
]
"""Rows the library answers; their ids in input order are GOOD_IDS."""
GOOD_IDS = ["paris", "7", "everest", "python"]

BAD_LINES: list[tuple[bytes, str]] = [
    (json.dumps({"id": "blank-q", "query": " ", "documents": ["x"]}).encode(), "invalid_request"),
    (json.dumps({"id": "no-docs", "query": "q", "documents": []}).encode(), "invalid_request"),
    (b'{"id": "latin1", "query": "caf\xe9?", "documents": ["a"]}', "invalid_utf8"),
    (b"{not json", "invalid_json"),
    (json.dumps({"query": "no id", "documents": ["a"]}).encode(), "invalid_row"),
    (json.dumps({"id": "paris", "query": "again", "documents": ["a"]}).encode(), "duplicate_id"),
]
"""Lines that must land in the errors file with these types (the last repeats an id)."""


def _write_input(path: Path, *, bad: bool = True, rows: list[dict[str, Any]] = GOOD) -> Path:
    """GOOD rows with the bad lines interleaved (and a blank line, which is not a row)."""
    lines = [json.dumps(r).encode() for r in rows]
    if bad:
        for k, (line, _) in enumerate(BAD_LINES):
            lines.insert(min(len(lines), 1 + 2 * k), line)
        lines.append(b"")
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(batch_app, [*args, "--no-progress", "--quiet"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def _assert_errors(errors: Path) -> None:
    entries = _read_jsonl(errors)
    assert sorted(e["error_type"] for e in entries) == sorted(t for _, t in BAD_LINES)
    by_id = {e["id"]: e for e in entries}
    assert by_id["blank-q"]["error"] == "query must be a non-empty string"
    assert by_id["no-docs"]["error"] == "documents must hold at least one document"
    assert by_id["latin1"]["error_type"] == "invalid_utf8"  # the id is salvaged for the report
    assert by_id["paris"]["error_type"] == "duplicate_id"
    assert all(e["source"] and e["line"] >= 1 for e in entries)


def _assert_rerank_equal(out_rows: list[dict[str, Any]], reranker: Any, top_n: int | None) -> None:
    assert [str(r["id"]) for r in out_rows] == GOOD_IDS  # input order, nothing dropped
    for row, source in zip(out_rows, GOOD, strict=True):
        assert {k: row[k] for k in source} == source  # the caller's row is kept as it was
        expected = reranker.rerank(source["query"], source["documents"], top_n=top_n)
        assert [r["index"] for r in row["results"]] == [r.index for r in expected]
        for got, want in zip(row["results"], expected, strict=True):
            assert got["relevance_score"] == pytest.approx(want.relevance_score, abs=1e-6)
            assert got["raw_score"] == pytest.approx(want.raw_score, abs=1e-6)
        assert row["warnings"] == list(expected.warnings)


def _assert_compression_equal(got: dict[str, Any], want: Any, documents: list[Any]) -> None:
    assert got["compressed_text"] == want.compressed_text
    assert (got["origin_tokens"], got["compressed_tokens"]) == (
        want.origin_tokens,
        want.compressed_tokens,
    )
    assert got["ratio"] == pytest.approx(want.ratio, abs=1e-9)
    assert got["warnings"] == list(want.warnings)
    spans = [s for d in got["documents"] for s in d["kept_spans"]]
    assert [(s["doc_index"], s["start"], s["end"]) for s in spans] == [
        (s.doc_index, s.start, s.end) for s in want.kept_spans
    ]
    for span, ref in zip(spans, want.kept_spans, strict=True):
        assert span["score"] == pytest.approx(ref.score, abs=1e-6)
        doc = documents[span["doc_index"]]
        text = doc if isinstance(doc, str) else doc["text"]
        assert text[span["start"] : span["end"]] == span["text"]  # offsets slice back


# -- no model, no Ray ---------------------------------------------------------------------------


def test_task_is_validated_before_anything_runs() -> None:
    # no budget: the default every door gives (issue 62); two budgets are refused
    assert BatchTask(kind="compress").args.budget is DEFAULT_BUDGET
    with pytest.raises(InvalidInputError, match="give at most one budget"):
        BatchTask(kind="compress", ratio=0.5, threshold=0.2)
    with pytest.raises(InvalidInputError, match=re.escape("rerank takes no budget")):
        BatchTask(kind="rerank", ratio=0.5)
    with pytest.raises(InvalidInputError, match="top_n is for rerank tasks"):
        BatchTask(kind="compress", ratio=0.5, top_n=2)
    with pytest.raises(InvalidInputError, match="unknown rerank method 'nope'; valid: .*icr"):
        BatchTask(kind="rerank", method="nope")
    with pytest.raises(InvalidInputError, match="unknown batch task"):
        BatchTask(kind="summarise")  # type: ignore[arg-type]


def test_the_compress_tasks_take_a_language() -> None:
    assert BatchTask(kind="compress", ratio=0.5, language="de").args.language == "de"
    with pytest.raises(InvalidInputError, match=re.escape("unknown language 'xx'; valid: auto")):
        BatchTask(kind="rerank-compress", ratio=0.5, language="xx")
    compress = " ".join(CliRunner().invoke(batch_app, ["compress", "--help"]).output.split())
    rerank = " ".join(CliRunner().invoke(batch_app, ["rerank", "--help"]).output.split())
    assert "--language" in compress and "--language" not in rerank


def test_the_compress_tasks_take_a_token_ceiling_on_the_ratio() -> None:
    assert BatchTask(kind="compress", ratio=0.5, max_tokens=64).budget == {
        "ratio": 0.5,
        "max_tokens": 64,
    }
    with pytest.raises(InvalidInputError, match="max_tokens"):
        BatchTask(kind="rerank-compress", target_tokens=50, max_tokens=64)
    compress = " ".join(CliRunner().invoke(batch_app, ["compress", "--help"]).output.split())
    rerank = " ".join(CliRunner().invoke(batch_app, ["rerank", "--help"]).output.split())
    assert "--max-tokens" in compress and "--max-tokens" not in rerank
    # The Python API offers the same arguments per task as the command line.
    import inspect

    from ragattn.batch import compress_dataset, rerank_compress_dataset, rerank_dataset

    for task in (compress_dataset, rerank_compress_dataset):
        assert {"max_tokens", "language"} <= set(inspect.signature(task).parameters)
    assert not {"max_tokens", "language"} & set(inspect.signature(rerank_dataset).parameters)


@pytest.mark.slow
def test_in_process_compress_under_a_ceiling_equals_the_library(
    tmp_path: Path, compressor: Any
) -> None:
    # A ratio that alone would keep nearly everything: the ceiling decides, row by row, exactly
    # as the library's ``ratio=..., max_tokens=...`` does.
    src = _write_input(tmp_path / "in.jsonl", bad=False)
    out = tmp_path / "out.jsonl"
    result = _invoke(
        "compress", "-i", str(src), "-o", str(out), "--workers", "0", "--ratio", "0.9",
        "--max-tokens", "12",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    got = _read_jsonl(out)
    assert [str(r["id"]) for r in got] == GOOD_IDS
    for row, source in zip(got, GOOD, strict=True):
        want = compressor.compress(source["query"], source["documents"], ratio=0.9, max_tokens=12)
        _assert_compression_equal(row["compression"], want, source["documents"])
        assert 0 < row["compression"]["compressed_tokens"] <= 12


@pytest.mark.slow
def test_in_process_compress_without_a_budget_keeps_the_default(tmp_path: Path) -> None:
    # The CLI's door (issue 62): no budget named is DEFAULT_BUDGET, row by row exactly the
    # explicit ``--ratio 0.2 --max-tokens 1024`` on the same engine, and not the ratio 0.5.
    src = _write_input(tmp_path / "in.jsonl", bad=False)

    def run(name: str, *budget: str) -> list[dict[str, Any]]:
        out = tmp_path / f"{name}.jsonl"
        args = ("-i", str(src), "-o", str(out), "--workers", "0", *budget)
        result = _invoke("compress", *args)
        assert result.exit_code == 0, result.output
        rows = _read_jsonl(out)
        assert [str(r["id"]) for r in rows] == GOOD_IDS
        return [r["compression"] for r in rows]

    keys = ("compressed_text", "origin_tokens", "compressed_tokens", "documents", "warnings")
    default = [{k: c[k] for k in keys} for c in run("default")]
    explicit = [
        {k: c[k] for k in keys} for c in run("explicit", "--ratio", "0.2", "--max-tokens", "1024")
    ]
    assert default == explicit
    half = run("half", "--ratio", "0.5")
    assert sum(c["compressed_tokens"] for c in default) < sum(c["compressed_tokens"] for c in half)


def test_bad_options_exit_2_before_ray_starts(tmp_path: Path) -> None:
    src = _write_input(tmp_path / "in.jsonl")
    out = str(tmp_path / "out.jsonl")
    result = _invoke("compress", "-i", str(src), "-o", out, "--ratio", "0.5", "--threshold", "0.2")
    assert result.exit_code == 2
    assert "give at most one budget" in result.output
    result = _invoke("rerank", "-i", str(tmp_path / "none*.jsonl"), "-o", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2
    assert "no input files match" in result.output
    assert not (tmp_path / "out.jsonl").exists()


def test_resolve_inputs_file_folder_glob(tmp_path: Path) -> None:
    for name in ("b.jsonl", "a.jsonl", "notes.txt"):
        (tmp_path / name).write_text("{}\n")
    files, fmt = resolve_inputs(tmp_path)
    assert ([f.name for f in files], fmt) == (["a.jsonl", "b.jsonl"], "jsonl")
    assert [f.name for f in resolve_inputs(tmp_path / "*.jsonl")[0]] == ["a.jsonl", "b.jsonl"]
    assert [f.name for f in resolve_inputs(tmp_path / "b.jsonl")[0]] == ["b.jsonl"]
    (tmp_path / "c.parquet").write_bytes(b"")
    with pytest.raises(InvalidInputError, match="mix JSONL and Parquet"):
        resolve_inputs(tmp_path)


def test_load_done_cuts_a_torn_last_line(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"id": "a", "results": []}\n{"id": 2, "results": []}\n{"id": "c", "resu')
    assert load_done(out) == {"a", "2"}
    assert out.read_bytes() == b'{"id": "a", "results": []}\n{"id": 2, "results": []}\n'
    out.write_bytes(b"not json\n")
    with pytest.raises(InvalidInputError, match="line 1 is not a row of a batch output"):
        load_done(out)


def test_import_ragattn_never_imports_ray() -> None:
    code = (
        "import sys, ragattn, ragattn.batch, ragattn.batch.command\n"
        "assert 'ray' not in sys.modules, 'ray imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


# -- the in-process fallback (real model, no Ray) ----------------------------------------------


@pytest.fixture(scope="module")
def reranker() -> Any:
    from ragattn.rerank import Reranker

    return Reranker()


@pytest.fixture(scope="module")
def compressor() -> Any:
    from ragattn.compress import Compressor

    return Compressor()


@pytest.mark.slow
def test_in_process_rerank_equals_library_and_reports_bad_rows(
    tmp_path: Path, reranker: Any
) -> None:
    src = _write_input(tmp_path / "in.jsonl")
    out = tmp_path / "out.jsonl"
    result = _invoke("rerank", "-i", str(src), "-o", str(out), "--workers", "0", "--top-n", "2")
    assert result.exit_code == 1, result.output  # rows failed: the job finished, exit says so
    assert f"{len(GOOD) + len(BAD_LINES)} rows in, 0 skipped" in result.output
    assert f"{len(GOOD)} written" in result.output and f"{len(BAD_LINES)} failed" in result.output
    _assert_rerank_equal(_read_jsonl(out), reranker, top_n=2)
    _assert_errors(tmp_path / "out.errors.jsonl")


# -- Ray Data, local ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_ray() -> Any:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_rerank_equals_library_for_every_row(
    tmp_path: Path, local_ray: Any, reranker: Any
) -> None:
    src = _write_input(tmp_path / "in.jsonl")
    out = tmp_path / "out.jsonl"
    result = _invoke(
        "rerank", "-i", str(src), "-o", str(out), "--workers", "2", "--batch-size", "2"
    )
    assert result.exit_code == 1, result.output
    _assert_rerank_equal(_read_jsonl(out), reranker, top_n=None)
    _assert_errors(tmp_path / "out.errors.jsonl")


@pytest.mark.slow
def test_ray_compress_of_parquet_equals_library_for_every_row(
    tmp_path: Path, local_ray: Any, compressor: Any
) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    # Parquet holds one type per column: every document as a {text, id} struct.
    rows = [
        {
            "id": str(r["id"]),
            "query": r["query"],
            "documents": [
                d if isinstance(d, dict) else {"text": d, "id": None} for d in r["documents"]
            ],
        }
        for r in GOOD
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    out = tmp_path / "out.jsonl"
    result = _invoke(
        "compress", "-i", str(tmp_path / "*.parquet"), "-o", str(out), "--ratio", "0.5"
    )
    assert result.exit_code == 0, result.output
    got = _read_jsonl(out)
    assert [r["id"] for r in got] == GOOD_IDS
    for row, source in zip(got, rows, strict=True):
        assert {k: row[k] for k in source} == source
        want = compressor.compress(source["query"], source["documents"], ratio=0.5)
        _assert_compression_equal(row["compression"], want, source["documents"])


@pytest.mark.slow
def test_ray_interrupted_run_resumed_gives_the_same_files(tmp_path: Path, local_ray: Any) -> None:
    src = _write_input(tmp_path / "in.jsonl")
    whole = tmp_path / "whole.jsonl"
    args = ("--workers", "1", "--batch-size", "3")
    assert _invoke("rerank", "-i", str(src), "-o", str(whole), *args).exit_code == 1
    # The interrupted run: it got through the first lines of the file, then died while writing
    # the next row (a torn line without its newline is what a kill mid-write leaves).
    lines = src.read_bytes().splitlines(keepends=True)
    prefix = tmp_path / "prefix" / "in.jsonl"
    prefix.parent.mkdir()
    prefix.write_bytes(b"".join(lines[:5]))
    resumed = tmp_path / "resumed.jsonl"
    assert _invoke("rerank", "-i", str(prefix), "-o", str(resumed), *args).exit_code == 1
    done = len(_read_jsonl(resumed))
    assert 0 < done < len(GOOD)
    with resumed.open("ab") as fh:
        fh.write(b'{"id": "python", "query": "Who cr')
    result = _invoke("rerank", "-i", str(src), "-o", str(resumed), *args)
    assert result.exit_code == 1, result.output
    assert f"{done} skipped" in result.output
    assert resumed.read_bytes() == whole.read_bytes()
    assert (tmp_path / "resumed.errors.jsonl").read_bytes() == (
        tmp_path / "whole.errors.jsonl"
    ).read_bytes()


@pytest.mark.slow
def test_rerank_compress_dataset_python_api(local_ray: Any, compressor: Any) -> None:
    import ray.data

    from ragattn.batch import rerank_compress_dataset

    rows = [
        {**r, "id": str(r["id"]), "documents": [_text(d) for d in r["documents"]]} for r in GOOD
    ]
    rows.insert(1, {"id": "blank", "query": "", "documents": ["a"]})
    ds = rerank_compress_dataset(
        ray.data.from_items(rows), top_n=2, ratio=0.5, workers=1, threads=1, skip_ids={"python"}
    )
    got = ds.take_all()
    assert [g["id"] for g in got] == [r["id"] for r in rows]
    assert [g["status"] for g in got] == ["ok", "failed", "ok", "ok", "skipped"]
    assert got[1]["error_type"] == "invalid_request"
    for row in (r for r in got if r["status"] == "ok"):
        ranked, want = compressor.rerank_and_compress(
            row["query"], list(row["documents"]), top_n=2, ratio=0.5
        )
        assert [r["index"] for r in row["results"]] == [r.index for r in ranked]
        for g, w in zip(row["results"], ranked, strict=True):
            assert g["relevance_score"] == pytest.approx(w.relevance_score, abs=1e-6)
        _assert_compression_equal(row["compression"], want, list(row["documents"]))


def _text(doc: Any) -> str:
    return doc if isinstance(doc, str) else doc["text"]
