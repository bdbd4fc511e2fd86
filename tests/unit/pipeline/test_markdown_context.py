"""A Markdown page reaches the generator as valid Markdown (issue 60): over the shipped demo
corpus, whose ``python-venv.md`` holds a fenced code block and a table, the one read of ``ask``
keeps the block whole (both fences and every line) and any kept table row under its header."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragattn.generate import GeneratedAnswer
from ragattn.pipeline import PipelineOptions, RAGPipeline, demo_corpus_dir

pytestmark = pytest.mark.slow

BLOCK = (
    "```bash\npython3 -m venv .venv\nsource .venv/bin/activate\npip install requests==2.32.3\n```"
)
HEADER = "| tool | ships with Python | lock file |\n|---|---|---|"


class ContextRecorder:
    """A generator that records the context it is handed (the pipeline's last stage is not what
    is tested here)."""

    identity = "recorder:v1"

    def __init__(self) -> None:
        self.contexts: list[list[str]] = []

    def generate(self, question: str, context_passages: Sequence[str]) -> GeneratedAnswer:
        self.contexts.append(list(context_passages))
        return GeneratedAnswer(
            text="-", prompt_tokens=1, completion_tokens=1, seconds=0.0, model="recorder"
        )


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("demo") / "idx"
    Index.build(demo_corpus_dir(), out, dense=False)
    return out


@pytest.mark.parametrize(
    ("question", "kept"),
    [
        ("Which command installs requests in a virtual environment?", BLOCK),
        ("Which Python environment tool writes uv.lock as its lock file?", HEADER),
    ],
)
def test_ask_keeps_markdown_blocks_whole(
    demo_index: Path, proxy: Any, question: str, kept: str
) -> None:
    from ragattn.compress import Compressor
    from ragattn.pipeline import load_index

    recorder = ContextRecorder()
    pipe = RAGPipeline(
        load_index(str(demo_index)), generator=recorder, compressor=Compressor(proxy)
    )
    result = pipe.ask(question, PipelineOptions(top_k=20, mode="bm25"))
    assert result.flow == "one_read"
    (context,) = recorder.contexts
    text = "\n\n".join(p for p in context if "venv" in p or "uv.lock" in p)
    assert kept in text, context  # the answer's block whole, or its row under the header
    assert text.count("```") % 2 == 0, text  # every fence closed
    if "python3 -m venv" in text or "pip install" in text:
        assert BLOCK in text, text  # never a line of the block alone
    if any(line.startswith("| ") and "lock file" not in line for line in text.splitlines()):
        assert HEADER in text, text  # a kept row comes with its header
