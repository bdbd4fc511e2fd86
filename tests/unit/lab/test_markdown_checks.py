"""Broken Markdown structure in a kept context (:mod:`ragattn.lab.evaluation.markdown_checks`):
hand-made broken and valid outputs, and the count in a context report's row."""

from __future__ import annotations

import pytest

from ragattn.lab.evaluation import context as ctx
from ragattn.lab.evaluation.context_report import summarize
from ragattn.lab.evaluation.markdown_checks import StructureBreaks, open_fences, structure_breaks
from ragattn.types import Document

SOURCE = """## Install

Run the install.

| flag | meaning |
|------|---------|
| -k | results |
| -o | output |

```python
import thing
thing.run(fast=True)
```

Done.
"""


def _span(text: str, piece: str) -> tuple[int, int]:
    start = SOURCE.index(text)
    return start, start + len(piece)


def _line(text: str) -> tuple[int, int]:
    return _span(text, text)


def _breaks(*spans: tuple[int, int]) -> StructureBreaks:
    return structure_breaks(SOURCE, list(spans))


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("```python\nx = 1\n```", 0),
        ("~~~\nx\n~~~~\n", 0),  # a longer closing fence closes
        ("> ```\n> x\n> ```\n", 0),  # inside a block quote
        ("no fence at all", 0),
        ("```python\nx = 1\n", 1),  # the closing line cut away
        ("x = 1\n```", 1),  # a closing line kept alone opens a block never closed
        ("```\nx\n~~~\n", 1),  # another fence character does not close
        ("```\na\n```\n\n```js\nb\n", 1),
        ("```\n", 1),
    ],
)
def test_open_fences_by_a_parse(text: str, count: int) -> None:
    assert open_fences(text) == count


def test_whole_blocks_kept_break_nothing() -> None:
    assert _breaks((0, len(SOURCE))) == StructureBreaks()
    table = SOURCE.index("| flag")
    assert _breaks((table, SOURCE.index("\n\n```"))) == StructureBreaks()
    assert _breaks(_line("Run the install.")) == StructureBreaks()
    fence = SOURCE.index("```python")
    assert _breaks((fence, SOURCE.index("\n\nDone"))) == StructureBreaks()
    assert _breaks(_line("thing.run(fast=True)")) == StructureBreaks()  # a whole line of code


def test_a_row_without_its_header_is_counted_once_per_row() -> None:
    assert _breaks(_line("| -k | results |")) == StructureBreaks(rows=1)
    rows = _span("| -k | results |", "| -k | results |\n| -o | output |")
    assert _breaks(rows) == StructureBreaks(rows=2)
    # the header kept above them: nothing broken
    assert _breaks(_line("| flag | meaning |"), rows) == StructureBreaks()
    # a header cut in the middle is no header
    assert _breaks(_span("| flag", "| flag |"), rows).rows == 2


def test_a_code_line_cut_in_the_middle_is_counted() -> None:
    assert _breaks(_span("thing.run", "thing.run(")) == StructureBreaks(code_lines=1)
    assert _breaks(_span("import thing", "import thing\nthing")).code_lines == 1
    fence = SOURCE.index("```python")
    opened = structure_breaks(SOURCE, [(fence, SOURCE.index("thing.run"))])
    assert opened == StructureBreaks(fences=1)  # whole lines, but the block left open


def test_the_kept_text_is_what_the_fence_parse_reads() -> None:
    fence = SOURCE.index("```python")
    spans = [(fence, SOURCE.index("\n\nDone"))]
    assert structure_breaks(SOURCE, spans).fences == 0
    assert structure_breaks(SOURCE, spans, kept_text="```python\nimport thing").fences == 1
    assert structure_breaks(SOURCE, []) == StructureBreaks()


def test_a_report_row_counts_broken_structure_per_question() -> None:
    question = ctx.ContextQuestion(
        qid="q",
        query="Which flag sets the results?",
        candidates=(Document(text=SOURCE), Document(text="Plain prose. Nothing else.")),
        gold=((), ()),
        answers=("-k",),
    )
    row_start = SOURCE.index("| -k")
    row_end = row_start + len("| -k | results |")
    code = SOURCE.index("thing.run")

    def outcome(spans: tuple[ctx.SpanRef, ...]) -> ctx.Outcome:
        return ctx.Outcome(
            qid="q",
            system="lexical",
            budget="256 tokens",
            tokens=10,
            limit=10,
            seconds=0.1,
            gold_kept=0,
            gold_present=0,
            answer_kept=True,
            passages=1,
            spans=spans,
        )

    broken = outcome(((0, row_start, row_end), (0, code, code + 5), (1, 0, 12)))
    row = summarize([broken], budget="256 tokens", system="lexical", questions={"q": question})
    assert row.breaks == StructureBreaks(rows=1, code_lines=1)
    assert row.broken == pytest.approx(2.0)
    whole = outcome(((1, 0, 12),))
    row = summarize(
        [broken, whole], budget="256 tokens", system="lexical", questions={"q": question}
    )
    assert row.broken == pytest.approx(1.0)
    assert summarize([whole], budget="256 tokens", system="lexical").broken is None
