"""Titles from the folder reader reach the one read: an index over the shipped demo corpus (each
file opens with a ``# Title`` heading) hands titled documents to ``rerank_and_compress``, and
``ragattn ask`` shows them in its title column."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragattn.generate import GeneratedAnswer
from ragattn.pipeline import PipelineOptions, RAGPipeline, demo_corpus_dir
from ragattn.types import Document

pytestmark = pytest.mark.slow

QUESTION = "Who designed the Eiffel Tower?"


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("demo") / "idx"
    Index.build(demo_corpus_dir(), out, dense=False)
    return out


class ReadRecorder:
    """The real compressor, recording the documents each one read is given (a collaborator
    spy: the read itself runs unchanged)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.reads: list[list[Document]] = []
        self.args: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def rerank_and_compress_checked(self, query: str, docs: Sequence[Document], args: Any) -> Any:
        self.reads.append(list(docs))
        self.args.append(args)
        return self.engine.rerank_and_compress_checked(query, docs, args)


class FixedGenerator:
    """Answers without a model: the pipeline's last stage is not what is tested here."""

    identity = "fixed:v1"

    def generate(self, question: str, context_passages: Sequence[str]) -> GeneratedAnswer:
        return GeneratedAnswer(
            text="-", prompt_tokens=1, completion_tokens=1, seconds=0.0, model="fixed"
        )


def test_the_one_read_gets_the_headings_as_titles(demo_index: Path, compressor: Any) -> None:
    from ragattn.pipeline import load_index

    index = load_index(str(demo_index))
    titles = {d.id: d.title for d in index.documents}
    files = {d.metadata.get("source_id", d.id) for d in index.documents}
    assert len(files) == 13 and all(titles.values())  # the Markdown page is three sections
    recorder = ReadRecorder(compressor)
    pipe = RAGPipeline(index, generator=FixedGenerator(), compressor=recorder)
    result = pipe.ask(QUESTION, PipelineOptions(top_k=5, mode="bm25"))
    assert result.flow == "one_read" and len(recorder.reads) == 1
    read = recorder.reads[0]
    assert len(read) >= 2 and [d.title for d in read] == [titles[d.id] for d in read]
    assert "Eiffel Tower" in [d.title for d in read]
    assert {s.id: s.title for s in result.sources} == {d.id: d.title for d in read}


def test_ragattn_ask_shows_the_titles(demo_index: Path) -> None:
    from ragattn.cli import app

    args = ["ask", QUESTION, "--index", str(demo_index), "--mode", "bm25", "--top-k", "3"]
    result = CliRunner().invoke(app, [*args, "--max-tokens", "4", "--threads", "1"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("│")]
    assert any("│ eiffel-tower" in row and "│ Eiffel Tower │" in row for row in rows), rows
    assert any("│ paris.md " in row and "│ Paris " in row for row in rows), rows


def test_the_one_read_gets_the_retrieval_order(demo_index: Path, compressor: Any) -> None:
    """The pipeline's candidates come ranked by its retrieval: the read is told so
    (``first_stage_order``, the candidates as retrieved), and the candidates are those the
    retrieval returned, in its order."""
    from ragattn.pipeline import load_index

    recorder = ReadRecorder(compressor)
    pipe = RAGPipeline(load_index(str(demo_index)), generator=FixedGenerator(), compressor=recorder)
    found = pipe.retrieve(QUESTION, k=5, mode="bm25", rerank=False)
    pipe.ask(QUESTION, PipelineOptions(top_k=5, mode="bm25"))
    (read,), (args,) = recorder.reads, recorder.args
    assert [d.id for d in read] == [c.document.id for c in found.candidates]
    assert args.first_stage_order == tuple(range(len(read)))
