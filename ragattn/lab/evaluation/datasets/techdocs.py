"""``techdocs``: questions over public technical documentation, answered in code blocks, tables
and prose (issue 60).

The documents are the Markdown READMEs that installed Python packages carry as their long
description (``importlib.metadata``), chunked at their headings
(:func:`ragattn.retrieve.sections.markdown_chunks`, the index's own chunker) into section
chunks titled with their heading path. The packaged ``techdocs.json`` holds only what was
written for the set: per project the package, the version and the sha256 of the README the
questions were written against, and its split (``dev``, or ``test``: held out, never read
while choosing defaults); per question the question, its kind (``code``, ``table`` or
``prose``: where the answer is) and its answer, a string found verbatim in exactly one chunk.
No README text is stored: it is read from the installed package when the set is loaded, and a
question whose package is missing or whose README differs from the one it was written against
is skipped with a logged message saying which and why.

Each question's candidates are a pool of chunks (the set's ``pool``, 20): its answer's chunk and the
project's other chunks that BM25 ranks best for the question (title and text), then other
projects' chunks when the project has too few, all in BM25's order: a lexical first stage
that is made to hold the answer. The gold sentences are the answer chunk's sentences
(:func:`ragattn.sentences.split_sentences`) that the answer overlaps.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation.datasets.qa import Passage, QAExample
from ragattn.lexical import bm25_scores
from ragattn.retrieve.sections import MarkdownChunk, block_parser, heading_text, markdown_chunks
from ragattn.sentences import split_sentences

logger = logging.getLogger(__name__)

Split = Literal["dev", "test"]
Kind = Literal["code", "table", "prose"]
SPLITS: tuple[Split, ...] = ("dev", "test")
KINDS: tuple[Kind, ...] = ("code", "table", "prose")


@dataclass(frozen=True, slots=True, kw_only=True)
class TechDocsProject:
    """A package whose README the questions were written against."""

    name: str
    version: str
    readme_sha256: str
    split: Split


@dataclass(frozen=True, slots=True, kw_only=True)
class TechDocsQuestion:
    """A question, the project it asks about, where its answer is and the answer itself."""

    qid: str
    project: str
    split: Split
    kind: Kind
    question: str
    answer: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TechDocsSet:
    """The packaged set: projects by name, questions in file order, the chunk size (words)."""

    projects: Mapping[str, TechDocsProject]
    questions: tuple[TechDocsQuestion, ...]
    chunk_words: int
    pool: int


def read_techdocs(path: Path | None = None) -> TechDocsSet:
    """The set in ``path`` (default: the packaged ``techdocs.json``), checked.

    Raises:
        InvalidInputError: a field is missing or of the wrong kind, a question names an unknown
            project or another split than its project's, or two questions share an id.
    """
    if path is None:
        raw = resources.files(__package__).joinpath("techdocs.json").read_text("utf-8")
    else:
        raw = path.read_text("utf-8")
    try:
        data = json.loads(raw)
        projects = {
            p["name"]: TechDocsProject(
                name=str(p["name"]),
                version=str(p["version"]),
                readme_sha256=str(p["readme_sha256"]),
                split=_one_of(p["split"], SPLITS),
            )
            for p in data["projects"]
        }
        questions = tuple(_question(q, projects) for q in data["questions"])
        chunk_words, pool = int(data["chunk_words"]), int(data["pool"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"techdocs set {path or 'techdocs.json'}: {exc}") from exc
    ids = [q.qid for q in questions]
    if len(set(ids)) != len(ids):
        raise InvalidInputError("techdocs: two questions share an id")
    return TechDocsSet(projects=projects, questions=questions, chunk_words=chunk_words, pool=pool)


def _one_of(value: Any, allowed: Sequence[str]) -> Any:
    if value not in allowed:
        raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
    return value


def _question(
    record: Mapping[str, Any], projects: Mapping[str, TechDocsProject]
) -> TechDocsQuestion:
    project = projects.get(record["project"])
    if project is None:
        raise ValueError(f"question {record['id']!r} names unknown project {record['project']!r}")
    if record["split"] != project.split:
        raise ValueError(
            f"question {record['id']!r} is {record['split']}, its project {project.split}"
        )
    if not str(record["answer"]).strip():
        raise ValueError(f"question {record['id']!r} has a blank answer")
    return TechDocsQuestion(
        qid=str(record["id"]),
        project=project.name,
        split=project.split,
        kind=_one_of(record["kind"], KINDS),
        question=str(record["question"]),
        answer=str(record["answer"]),
    )


def installed_readme(name: str) -> str | None:
    """The long description (README) of the installed distribution ``name``; None when it is
    not installed or carries none."""
    try:
        meta = importlib.metadata.metadata(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    text = meta.get_payload() or meta.get("Description") or ""  # type: ignore[attr-defined]
    return str(text) or None


def readme_sha256(text: str) -> str:
    """sha256 (hex) of the README text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def readme_problem(project: TechDocsProject) -> str | None:
    """Why ``project``'s README cannot be read as the questions' (None when it can)."""
    text = installed_readme(project.name)
    if text is None:
        return (
            f"{project.name} is not installed (or has no README); "
            f"pip install '{project.name}=={project.version}'"
        )
    if readme_sha256(text) != project.readme_sha256:
        try:
            version = importlib.metadata.version(project.name)
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover - raced away
            version = "?"
        return (
            f"the README of {project.name} {version} differs from the one the questions were "
            f"written against ({project.version}); pip install '{project.name}=={project.version}'"
        )
    return None


def project_chunks(name: str, text: str, chunk_words: int) -> tuple[MarkdownChunk, ...]:
    """A README's section chunks, titled ``title > heading > ...``: the README's first heading
    when it is of level 1 (``# orjson``), else the package name (a README whose title is an HTML
    ``<h1>`` or a badge row opens with a section, not the project's name)."""
    tokens = block_parser().parse(text)
    first = next((i for i, t in enumerate(tokens) if t.type == "heading_open"), None)
    title = ""
    if first is not None and tokens[first].tag == "h1" and tokens[first].level == 0:
        title = heading_text(tokens[first + 1].content)
    return tuple(markdown_chunks(text, title=title or name, max_words=chunk_words))


def load_techdocs(
    split: Split = "dev",
    limit: int | None = None,
    *,
    language: str = "auto",
    path: Path | None = None,
) -> tuple[QAExample, ...]:
    """The first ``limit`` readable questions of ``split`` (file order) over their pools of
    chunks (see the module docstring); ``language`` splits the chunks' sentences.

    A question whose project's README is missing or differs is skipped, logged with the
    reason, as is one whose answer is not in exactly one chunk of its README.

    Raises:
        InvalidInputError: an unknown split, a malformed set, or no question left to read.
    """
    if split not in SPLITS:
        raise InvalidInputError(f"unknown techdocs split {split!r}; valid: {', '.join(SPLITS)}")
    docs = read_techdocs(path)
    wanted = [q for q in docs.questions if q.split == split]
    chunks: dict[str, tuple[MarkdownChunk, ...]] = {}
    problems: dict[str, str] = {}
    for project in docs.projects.values():
        problem = readme_problem(project)
        if problem is None:
            text = installed_readme(project.name) or ""
            chunks[project.name] = project_chunks(project.name, text, docs.chunk_words)
        else:
            problems[project.name] = problem
    examples: list[QAExample] = []
    skipped: dict[str, int] = {}
    for question in wanted:
        if limit is not None and len(examples) >= limit:
            break
        if question.project in problems:
            skipped[question.project] = skipped.get(question.project, 0) + 1
            continue
        example = _example(question, chunks, docs.pool, language)
        if example is not None:
            examples.append(example)
    for name, count in skipped.items():
        logger.warning("techdocs: skipping %d question(s): %s", count, problems[name])
    if not examples:
        reasons = "; ".join(problems.values()) or "no question in this split"
        raise InvalidInputError(f"techdocs {split}: no question can be read ({reasons})")
    return tuple(examples)


def _example(
    question: TechDocsQuestion,
    chunks: Mapping[str, Sequence[MarkdownChunk]],
    pool: int,
    language: str,
) -> QAExample | None:
    own = chunks[question.project]
    holders = [c for c in own if question.answer in c.text]
    if len(holders) != 1:
        logger.warning(
            "techdocs: skipping %s: its answer is in %d chunks of the %s README, not one",
            question.qid,
            len(holders),
            question.project,
        )
        return None
    gold = holders[0]
    others = [c for c in own if c is not gold]
    if len(others) < pool - 1:
        others += [c for name, found in chunks.items() if name != question.project for c in found]
    scores = bm25_scores(question.question, [_indexed(c) for c in others])
    best = sorted(range(len(others)), key=lambda i: (-scores[i], i))[: pool - 1]
    chosen = [gold, *(others[i] for i in best)]
    ranked = bm25_scores(question.question, [_indexed(c) for c in chosen])
    order = sorted(range(len(chosen)), key=lambda i: (-ranked[i], i))
    return QAExample(
        qid=question.qid,
        question=question.question,
        answers=(question.answer,),
        passages=tuple(
            _passage(chosen[i], question.answer if i == 0 else None, language) for i in order
        ),
    )


def _indexed(chunk: MarkdownChunk) -> str:
    """What the first stage reads of a chunk: its heading path and its text."""
    return f"{chunk.title or ''}\n{chunk.text}"


def _passage(chunk: MarkdownChunk, answer: str | None, language: str) -> Passage:
    spans = tuple((s.start, s.end) for s in split_sentences(chunk.text, language=language))
    supporting: tuple[int, ...] = ()
    if answer is not None:
        start = chunk.text.index(answer)
        end = start + len(answer)
        supporting = tuple(i for i, (a, b) in enumerate(spans) if a < end and b > start)
    return Passage(
        title=chunk.title or "",
        text=chunk.text,
        sentence_spans=spans,
        supporting=supporting,
        is_gold=answer is not None,
    )


__all__ = [
    "KINDS",
    "SPLITS",
    "TechDocsProject",
    "TechDocsQuestion",
    "TechDocsSet",
    "installed_readme",
    "load_techdocs",
    "project_chunks",
    "read_techdocs",
    "readme_problem",
    "readme_sha256",
]
