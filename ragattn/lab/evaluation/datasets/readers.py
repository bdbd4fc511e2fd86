"""The file formats of the shared data folder: JSON, JSON Lines, and TREC and BEIR qrels."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ragattn.errors import InvalidInputError

Qrels = dict[str, dict[str, int]]
"""Relevance judgments: ``qrels[qid][doc_id] = grade`` (0 = judged not relevant)."""


def _open(path: Path) -> TextIO:
    if not path.is_file():
        raise InvalidInputError(
            f"{path} does not exist; point the loader at the shared data folder"
        )
    return path.open(encoding="utf-8")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSON Lines file, blank lines skipped.

    Raises:
        InvalidInputError: the file does not exist (on the first item read).
    """
    with _open(path) as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def read_json(path: Path) -> Any:
    """A JSON file's value.

    Raises:
        InvalidInputError: the file does not exist.
    """
    with _open(path) as fh:
        return json.load(fh)


def read_trec_qrels(path: str | Path) -> Qrels:
    """Read TREC qrels lines ``qid iter doc_id grade``."""
    qrels: Qrels = {}
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) == 4:
                qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    return qrels


def read_beir_qrels(path: str | Path) -> Qrels:
    """Read a BEIR qrels TSV (``query-id  corpus-id  score`` with a header line)."""
    qrels: Qrels = {}
    with Path(path).open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        next(reader, None)
        for row in reader:
            if len(row) >= 3:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return qrels


__all__ = ["Qrels", "read_beir_qrels", "read_json", "read_jsonl", "read_trec_qrels"]
