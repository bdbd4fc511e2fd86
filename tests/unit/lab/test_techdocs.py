"""The ``techdocs`` evaluation set (:mod:`ragattn.lab.evaluation.datasets.techdocs`): its
questions and splits, answers verbatim in one section chunk of the README they were written
against and in the kind of block they name, the loader's pools, and clean skips when a package is
missing or its README differs."""

from __future__ import annotations

import bisect
import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation import context as ctx
from ragattn.lab.evaluation.datasets.techdocs import (
    TechDocsSet,
    installed_readme,
    load_techdocs,
    project_chunks,
    read_techdocs,
    readme_problem,
)
from ragattn.retrieve.sections import block_parser, line_starts

SET = read_techdocs()


def _readable(names: list[str]) -> list[str]:
    return [n for n in names if readme_problem(SET.projects[n]) is None]


def test_the_set_has_dev_and_held_out_questions_of_every_kind() -> None:
    questions = SET.questions
    assert len(questions) >= 24
    by_split = Counter(q.split for q in questions)
    assert by_split["test"] * 3 == len(questions)  # a third held out
    dev = {q.project for q in questions if q.split == "dev"}
    test = {q.project for q in questions if q.split == "test"}
    assert len(dev | test) >= 6 and not dev & test  # held out by project
    for split in ("dev", "test"):
        kinds = Counter(q.kind for q in questions if q.split == split)
        assert kinds["code"] == kinds["table"] == kinds["prose"]
    assert all(q.answer.strip() and q.question.endswith("?") for q in questions)


def test_the_file_stores_no_readme_text() -> None:
    raw = json.loads(Path(ctx.ds.techdocs.__file__).with_name("techdocs.json").read_text())
    assert set(raw) == {"name", "about", "chunk_words", "pool", "projects", "questions"}
    assert all(set(p) == {"name", "version", "readme_sha256", "split"} for p in raw["projects"])
    longest = max(len(q["answer"]) for q in raw["questions"])
    assert longest < 120  # answers are strings of a chunk, never the chunk


def _kind_at(text: str, offset: int) -> str:
    """Where ``offset`` lies by a Markdown parse: a code block, a table, or else prose."""
    line = bisect.bisect_right(line_starts(text), offset) - 1
    found = "prose"
    for token in block_parser().parse(text):
        if token.map and token.map[0] <= line < token.map[1]:
            if token.type in ("fence", "code_block"):
                return "code"
            if token.type == "table_open":
                found = "table"
    return found


def test_each_answer_is_in_one_chunk_and_in_the_block_its_kind_names() -> None:
    readable = _readable(list(SET.projects))
    if not readable:
        pytest.skip("no techdocs package is installed with the README of the set")
    for name in readable:
        text = installed_readme(name) or ""
        chunks = project_chunks(name, text, SET.chunk_words)
        for q in (q for q in SET.questions if q.project == name):
            holders = [c for c in chunks if q.answer in c.text]
            assert len(holders) == 1, q.qid
            offset = holders[0].start + holders[0].text.index(q.answer)
            assert _kind_at(text, offset) == q.kind, q.qid
            assert holders[0].title and holders[0].title.count(" > ") >= 1, q.qid


def test_the_loader_gives_pools_of_section_chunks_in_bm25_order() -> None:
    readable = _readable([n for n, p in SET.projects.items() if p.split == "dev"])
    if not readable:
        pytest.skip("no dev package of techdocs is installed with its README")
    questions = ctx.load_context_set("techdocs", Path("unused"), limit=4)
    assert 1 <= len(questions) <= 4
    for q in questions:
        assert q.ranked and len(q.candidates) == SET.pool
        assert len({d.text for d in q.candidates}) == SET.pool
        gold = [i for i, g in enumerate(q.gold) if g]
        assert len(gold) == 1  # the answer's chunk, the one gold candidate
        assert q.answers[0] in q.candidates[gold[0]].text
        assert all(g in q.candidates[gold[0]].text for g in q.gold[gold[0]])
        assert all(d.title for d in q.candidates)
    plain = ctx.load_context_set("techdocs", Path("unused"), limit=4, titles=False)
    assert [[d.text for d in q.candidates] for q in plain] == [
        [d.text for d in q.candidates] for q in questions
    ]
    assert all(d.title is None for q in plain for d in q.candidates)


def _write(tmp_path: Path, projects: list[dict[str, str]], questions: list[dict[str, str]]) -> Path:
    path = tmp_path / "techdocs.json"
    data = {"name": "t", "about": "", "chunk_words": 200, "pool": 20}
    path.write_text(json.dumps({**data, "projects": projects, "questions": questions}))
    return path


def test_a_missing_package_or_a_changed_readme_is_skipped_with_its_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    real = [n for n in _readable(list(SET.projects))]
    if not real:
        pytest.skip("no techdocs package is installed with the README of the set")
    keep = SET.projects[real[0]]
    question = next(q for q in SET.questions if q.project == keep.name)
    projects = [
        {"name": keep.name, "version": keep.version, "readme_sha256": keep.readme_sha256},
        {"name": "ragattn-no-such-package", "version": "1.0", "readme_sha256": "0" * 64},
        {"name": keep.name + "-changed", "version": "1.0", "readme_sha256": "0" * 64},
    ]
    projects = [{**p, "split": "dev"} for p in projects]
    questions = [
        {"id": "kept", "project": keep.name, "kind": question.kind},
        {"id": "missing", "project": "ragattn-no-such-package", "kind": "prose"},
    ]
    questions = [
        {**q, "split": "dev", "question": question.question, "answer": question.answer}
        for q in questions
    ]
    path = _write(tmp_path, projects, questions)
    with caplog.at_level(logging.WARNING, logger="ragattn.lab.evaluation.datasets.techdocs"):
        examples = load_techdocs("dev", path=path)
    assert [e.qid for e in examples] == ["kept"]
    assert "skipping 1 question(s): ragattn-no-such-package is not installed" in caplog.text
    changed = dict(projects[0], readme_sha256="f" * 64)
    path = _write(tmp_path, [changed], questions[:1])
    with pytest.raises(InvalidInputError, match="differs from the one the questions were written"):
        load_techdocs("dev", path=path)


def test_a_malformed_set_is_refused(tmp_path: Path) -> None:
    project = {"name": "x", "version": "1", "readme_sha256": "0", "split": "dev"}
    question = {"id": "a", "project": "x", "split": "test", "kind": "code"}
    question |= {"question": "q?", "answer": "a"}
    with pytest.raises(InvalidInputError, match="is test, its project dev"):
        read_techdocs(_write(tmp_path, [project], [question]))
    with pytest.raises(InvalidInputError, match="'poem' is not one of code, table, prose"):
        read_techdocs(_write(tmp_path, [project], [question | {"split": "dev", "kind": "poem"}]))
    with pytest.raises(InvalidInputError, match="unknown techdocs split"):
        load_techdocs("train")  # type: ignore[arg-type]
    assert isinstance(SET, TechDocsSet)
