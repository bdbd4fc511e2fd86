"""Files of a batch job: the inputs (JSONL or Parquet: a file, a folder or a glob), OUT and its
resumption, the errors file, and the counts that prove nothing was dropped.

OUT is JSONL, one line per successful row, in input order: the caller's row unchanged (every
field kept, in its order) with the task's result fields added. Rows whose id is already in OUT
are skipped, so a run stopped at any point and started again appends exactly the missing rows and
ends with the same file as an uninterrupted run. The errors file is rewritten by every run (each
failed row is retried, since only rows in OUT count as done).
"""

from __future__ import annotations

import glob
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from ragattn._optional import require
from ragattn.batch._rows import (
    DUPLICATE_ID,
    LINE,
    RAW,
    RESULT_COLUMNS,
    SOURCE,
    STATUS_OK,
    STATUS_SKIPPED,
    TaskKind,
    row_id_of,
    source_record,
)
from ragattn.errors import InvalidInputError

if TYPE_CHECKING:
    import ray.data

logger = logging.getLogger(__name__)

InputFormat = Literal["jsonl", "parquet"]
SUFFIXES: dict[str, InputFormat] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}


# -- inputs ------------------------------------------------------------------------------------


def resolve_inputs(spec: str | Path) -> tuple[list[Path], InputFormat]:
    """The input files of ``spec`` (one file, a folder's files, or a glob), sorted by path, and
    their one format.

    Raises:
        InvalidInputError: nothing matches, an unknown extension, or JSONL mixed with Parquet.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    elif path.is_file():
        files = [path]
    else:
        files = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
    if not files:
        raise InvalidInputError(f"no input files match {str(spec)!r}")
    unknown = [p for p in files if p.suffix.lower() not in SUFFIXES]
    if unknown:
        raise InvalidInputError(
            f"unknown input type {unknown[0].name!r}; use {', '.join(sorted(SUFFIXES))}"
        )
    formats = {SUFFIXES[p.suffix.lower()] for p in files}
    if len(formats) > 1:
        raise InvalidInputError("the inputs mix JSONL and Parquet; run them as separate jobs")
    return files, formats.pop()


def split_lines(data: bytes, source: str) -> Iterator[dict[str, Any]]:
    """Rows of one JSONL file's bytes: the raw line, its file and 1-based line number.

    Blank lines are not rows. Lines are split on ``\\n`` only (JSON escapes every other control
    character inside strings), so a line's number matches ``sed -n Np``.
    """
    for number, line in enumerate(data.split(b"\n"), start=1):
        line = line.rstrip(b"\r")
        if line.strip():
            yield {RAW: line, SOURCE: source, LINE: number}


def _split_file_row(row: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from split_lines(row["bytes"], row["path"])


def read_dataset(files: list[Path], fmt: InputFormat, *, rows_per_block: int) -> ray.data.Dataset:
    """The inputs as a Ray dataset cut into blocks of at most ``rows_per_block`` rows, so every
    actor of the pool gets work and results stream back block by block.

    JSONL lines stay undecoded bytes until a worker parses them (one bad line fails alone).
    """
    require("ray", extra="batch")
    import ray.data

    paths = [str(p) for p in files]
    if fmt == "jsonl":
        ds = ray.data.read_binary_files(paths, include_paths=True).flat_map(_split_file_row)
    else:
        ds = ray.data.read_parquet(paths)
    return ds.repartition(target_num_rows_per_block=rows_per_block)


def iter_local(files: list[Path], fmt: InputFormat) -> Iterator[dict[str, Any]]:
    """The same rows as :func:`read_dataset`, read in this process (the no-Ray fallback)."""
    for path in files:
        if fmt == "jsonl":
            with path.open("rb") as fh:
                for number, line in enumerate(fh, start=1):
                    line = line.rstrip(b"\r\n")
                    if line.strip():
                        yield {RAW: line, SOURCE: str(path), LINE: number}
        else:
            pq = require("pyarrow.parquet", extra="batch")
            for batch in pq.ParquetFile(path).iter_batches(batch_size=256):
                yield from batch.to_pylist()


# -- OUT and resumption ------------------------------------------------------------------------


def errors_path_for(out: Path) -> Path:
    """The default errors file beside OUT: ``results.jsonl`` -> ``results.errors.jsonl``."""
    return out.with_name(f"{out.stem}.errors.jsonl")


def load_done(out: Path) -> set[str]:
    """Ids already in OUT; a torn last line (a run killed mid-write) is cut off first.

    Raises:
        InvalidInputError: a complete line of OUT is not a JSON object with an id (OUT is not
            this tool's output; move it away).
    """
    if not out.exists():
        return set()
    done: set[str] = set()
    good = 0
    with out.open("rb+") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.endswith(b"\n"):
                logger.warning("OUT %s: cutting a torn last line (line %d)", out, number)
                fh.truncate(good)
                break
            try:
                record = json.loads(line)
                done.add(str(record["id"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise InvalidInputError(
                    f"{out} line {number} is not a row of a batch output ({exc}); "
                    "move the file away or pick another --output"
                ) from exc
            good += len(line)
    return done


# -- writing and counting ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchSummary:
    """What a job did: every row read is skipped, written or failed, nothing else.

    Attributes:
        task: the task run.
        rows_in: rows read from the inputs (blank JSONL lines are not rows).
        skipped: rows whose id was already in OUT.
        written: rows appended to OUT by this run.
        failed: rows written to the errors file.
        seconds: wall time of the run, from reading the first row to the last write.
        output, errors: the two files.
    """

    task: TaskKind
    rows_in: int
    skipped: int
    written: int
    failed: int
    seconds: float
    output: Path
    errors: Path

    @property
    def rows_per_second(self) -> float:
        """Rows run this run (written + failed) per wall-clock second."""
        done = self.written + self.failed
        return done / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        """The one-line summary the command prints last."""
        return (
            f"{self.task}: {self.rows_in} rows in, {self.skipped} skipped (already in OUT), "
            f"{self.written} written to {self.output}, {self.failed} failed"
            + (f" (see {self.errors})" if self.failed else "")
            + f"; {self.rows_per_second:.2f} rows/s over {self.seconds:.1f} s"
        )


def _dumps(record: Mapping[str, Any]) -> str:
    # default=str: Parquet columns may hold dates or decimals; JSON has no type for them.
    return json.dumps(record, ensure_ascii=False, default=str) + "\n"


class ResultWriter:
    """Appends successful rows to OUT and failures to the errors file, counting every row.

    Args:
        kind: the task, naming the result fields copied from a processed row.
        out: OUT (appended; call :func:`load_done` first).
        errors: the errors file (rewritten).
        done: ids already in OUT (their rows arrive with status ``skipped``).
    """

    def __init__(self, kind: TaskKind, out: Path, errors: Path, done: set[str]) -> None:
        self.kind = kind
        self.fields = RESULT_COLUMNS[kind]
        out.parent.mkdir(parents=True, exist_ok=True)
        errors.parent.mkdir(parents=True, exist_ok=True)
        self._out: IO[str] = out.open("a", encoding="utf-8")
        self._errors: IO[str] = errors.open("w", encoding="utf-8")
        self._written_ids = set(done)
        self._skipped_ids: set[str] = set()
        self.rows_in = self.skipped = self.written = self.failed = 0

    def write(self, row: Mapping[str, Any]) -> None:
        """Route one processed row (input columns + outcome + result columns)."""
        self.rows_in += 1
        status = row["status"]
        row_id = row_id_of(row)
        if status == STATUS_SKIPPED:
            if row_id in self._skipped_ids:
                self._fail(row, row_id, DUPLICATE_ID, f"id {row_id!r} appears more than once")
            else:
                self._skipped_ids.add(str(row_id))
                self.skipped += 1
        elif status == STATUS_OK and row_id in self._written_ids:
            self._fail(row, row_id, DUPLICATE_ID, f"id {row_id!r} appears more than once")
        elif status == STATUS_OK:
            record = source_record(row, self.fields)
            record.update({name: row[name] for name in self.fields})
            self._out.write(_dumps(record))
            self._written_ids.add(str(row_id))
            self.written += 1
        else:
            self._fail(row, row_id, row["error_type"], row["error"])

    def _fail(self, row: Mapping[str, Any], row_id: str | None, kind: str, message: str) -> None:
        entry = {
            "id": row_id,
            "source": row.get(SOURCE),
            "line": row.get(LINE),
            "error_type": kind,
            "error": message,
        }
        self._errors.write(_dumps(entry))
        self.failed += 1

    def flush(self) -> None:
        """Make every row written so far survive a kill of this process."""
        self._out.flush()
        self._errors.flush()

    def close(self) -> None:
        self._out.close()
        self._errors.close()

    def check(self) -> None:
        """Every row read was skipped, written or failed (a guard against a lost row)."""
        if self.rows_in != self.skipped + self.written + self.failed:
            raise RuntimeError(
                f"row count mismatch: {self.rows_in} in != {self.skipped} skipped + "
                f"{self.written} written + {self.failed} failed"
            )


__all__ = [
    "BatchSummary",
    "InputFormat",
    "ResultWriter",
    "errors_path_for",
    "iter_local",
    "load_done",
    "read_dataset",
    "resolve_inputs",
    "split_lines",
]
