"""``ragattn eval context`` on Markdown candidates (issue 60): the stuffing systems
(``rerank-stuff``, ``first-stage``, the demo's rerank and stuff) split and join a Markdown
candidate as the read does, so no output of theirs breaks its structure, the fences and headers
they repeat counted in the tokens they are given; prose is stuffed and scored byte for byte as
before.

The structure is judged by :mod:`ragattn.lab.evaluation.markdown_checks` (the eval's own count)
and, independently, by a markdown-it parse of the kept text.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from markdown_it import MarkdownIt

from ragattn.lab.evaluation import context as ctx
from ragattn.lab.evaluation.markdown_checks import StructureBreaks, open_fences
from ragattn.lab.evaluation.markdown_checks import structure_breaks as markdown_breaks
from ragattn.markdown_units import document_units, markdown_units
from ragattn.sentences import split_sentences
from ragattn.types import Budget, Document

_CODE = "\n".join(
    f"    client.set_option('option_{n:02d}', value={n * 3})  # option {n} of the client"
    for n in range(30)
)
SETUP = f"""# Installing the client

Install the client with pip. It needs Python 3.10 or later.

```python
from client import Client

def configure(client: Client) -> None:
{_CODE}
```

Call `configure` once, before the first request.
"""
"""A fenced block longer than a unit's bound: three pieces, the first holding the opening
fence, the last the closing one."""
SETTINGS = """## Settings

| setting | default | meaning |
|---------|---------|---------|
| `port` | 8080 | the port the server listens on |
| `workers` | 4 | worker processes |
| `timeout` | 30 | seconds before a request is cut |

The defaults suit a laptop.
"""
STEPS = """## Deploying

1. Build the image.
2. Write the service file:

    ```ini
    [Service]
    ExecStart=/usr/bin/client serve --port 8080
    ```

3. Start the service. Check its log.
"""
"""A fenced block inside a list item: its code is a unit without its fences, which are repeated
around it when it is kept."""
PROSE = "The client was first released in 2019. It is maintained by a small team of volunteers."

MARKDOWN = ctx.ContextQuestion(
    qid="md",
    query="Which port does the server listen on by default?",
    candidates=tuple(Document(text=t) for t in (SETUP, SETTINGS, STEPS, PROSE)),
    gold=((), ("| `port` | 8080 | the port the server listens on |",), (), ()),
    answers=("8080",),
)

_MD = MarkdownIt("commonmark").enable("table")


def _valid(text: str) -> bool:
    """An independent reading of the kept text: every fence a parse finds is closed, and every
    line that looks like a table row sits in a table the parse finds."""
    lines = text.splitlines()
    tokens = _MD.parse(text)
    for t in tokens:
        if t.type == "fence" and t.map:
            first, end = t.map
            closing = lines[end - 1].strip() if end - 1 > first else ""
            if not (closing.startswith(t.markup) and set(closing) <= {t.markup[0]}):
                return False
    in_tables = {
        n for t in tokens if t.type == "table_open" and t.map for n in range(t.map[0], t.map[1])
    }
    in_code = {
        n for t in tokens if t.type in ("fence", "code_block") and t.map for n in range(*t.map)
    }
    rows = {n for n, line in enumerate(lines) if line.lstrip().startswith("| `")}
    return rows - in_code <= in_tables


def _by_candidate(spans: Any) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for doc, start, end in spans:
        out.setdefault(doc, []).append((start, end))
    return out


def _orders() -> list[tuple[int, ...]]:
    return list(itertools.permutations(range(len(MARKDOWN.candidates))))


def _limits(question: ctx.ContextQuestion, order: tuple[int, ...], tokenizer: Any) -> list[int]:
    """Every limit at which stuffing in ``order`` keeps a different context: each prefix of the
    units in that order, counted whole (and one token short of it)."""
    spans: list[ctx.SpanRef] = []
    out = {0}
    for doc in order:
        for start, end in question.units[doc]:
            spans.append((doc, start, end))
            full = ctx.n_tokens(tokenizer, ctx.context_text(question, spans))
            out |= {full - 1, full}
    return sorted(out)


def test_markdown_candidates_are_split_as_the_read_splits_them() -> None:
    for doc, units in zip(MARKDOWN.candidates, MARKDOWN.units, strict=True):
        assert units == document_units(doc.text, language=MARKDOWN.language)
    structure = markdown_units(SETUP)
    assert structure is not None
    code = [u for u in structure if u.kind == "code"]
    assert len(code) == 3 and code[0].opens and code[-1].closes  # the long block, in pieces
    assert MARKDOWN.units[3] == tuple((s.start, s.end) for s in split_sentences(PROSE))


@pytest.mark.parametrize("order", _orders())
def test_stuffing_markdown_breaks_no_structure_at_any_limit(
    ws_tokenizer: Any, order: tuple[int, ...]
) -> None:
    added_seen = 0
    for limit in _limits(MARKDOWN, order, ws_tokenizer):
        kept = ctx.stuff(MARKDOWN, order, limit, ws_tokenizer)
        assert ctx.n_tokens(ws_tokenizer, kept.text) <= limit
        assert ctx.structure_breaks(MARKDOWN, kept.spans) == StructureBreaks(), kept.text
        assert open_fences(kept.text) == 0 and _valid(kept.text), kept.text
        # the kept units are in the text, in their order; what else is there was repeated
        for doc, ranges in _by_candidate(kept.spans).items():
            text, added = ctx.kept_document(MARKDOWN, doc, ranges)
            assert text in kept.text
            source = MARKDOWN.candidates[doc].text
            for a in added:
                assert a.text == source[a.source_start : a.source_end]
                assert text[a.offset : a.offset + len(a.text)] == a.text
                assert (a.source_start, a.source_end) not in ranges
            added_seen += len(added)
    assert added_seen  # some limits keep a code piece alone: its fences were repeated, counted


def test_a_repeated_fence_counts_in_the_tokens_given(ws_tokenizer: Any) -> None:
    """The first piece of the long block alone needs its closing fence: stuffing pays one
    whitespace token for it, and stops a unit earlier when that token is not there."""
    order = (0, 1, 2, 3)
    first_piece = MARKDOWN.units[0][:3]
    spans = tuple((0, a, b) for a, b in first_piece)
    text = ctx.context_text(MARKDOWN, spans)
    assert text.endswith("\n```") and open_fences(text) == 0
    pieces = [SETUP[a:b] for a, b in first_piece]
    bare = ctx.n_tokens(ws_tokenizer, " ".join(pieces))
    assert ctx.n_tokens(ws_tokenizer, text) == bare + 1  # the repeated closing fence
    assert ctx.stuff(MARKDOWN, order, bare + 1, ws_tokenizer).spans == spans
    assert ctx.stuff(MARKDOWN, order, bare, ws_tokenizer).spans == spans[:2]


def test_a_list_items_code_is_stuffed_between_its_fences(ws_tokenizer: Any) -> None:
    kept = ctx.stuff(MARKDOWN, (2,), 100, ws_tokenizer)
    assert "    ```ini\n    [Service]" not in kept.text  # the code alone, fences repeated
    assert "```ini\n    [Service]\n    ExecStart=/usr/bin/client serve --port 8080\n```" in (
        kept.text
    )
    assert _valid(kept.text) and ctx.structure_breaks(MARKDOWN, kept.spans) == StructureBreaks()


def _sentence_stuffing(
    question: ctx.ContextQuestion, order: Any, limit: int, tokenizer: Any
) -> tuple[str, list[ctx.SpanRef], dict[int, str]]:
    """Stuffing as it was before Markdown units (an independent reference): each candidate's
    sentences (:func:`split_sentences`), each kept one followed by the whitespace after it up to
    the next sentence, candidates joined by a blank line; the text, the spans and each
    candidate's kept text."""
    units = [[(s.start, s.end) for s in split_sentences(d.text)] for d in question.candidates]

    def per_candidate(spans: list[ctx.SpanRef]) -> dict[int, str]:
        out = {}
        for doc, ranges in _by_candidate(spans).items():
            text = question.candidates[doc].text
            nxt = [next((a for a, _ in units[doc] if a >= end), len(text)) for _, end in ranges]
            out[doc] = "".join(text[a:n] for (a, _), n in zip(ranges, nxt, strict=True)).rstrip()
        return out

    spans: list[ctx.SpanRef] = []
    kept: tuple[str, dict[int, str]] = ("", {})
    for doc in order:
        for start, end in units[doc]:
            trial = [*spans, (doc, start, end)]
            texts = per_candidate(trial)
            joined = "\n\n".join(texts.values())
            if ctx.n_tokens(tokenizer, joined) > limit:
                return kept[0], spans, kept[1]
            spans, kept = trial, (joined, texts)
    return kept[0], spans, kept[1]


def test_sentence_stuffing_broke_this_set(ws_tokenizer: Any) -> None:
    """The checks above can fail: stuffing the same candidates by sentences, as before, leaves
    fences open."""
    breaks = StructureBreaks()
    invalid = 0
    for limit in range(0, 420, 7):
        text, spans, texts = _sentence_stuffing(MARKDOWN, (0, 1, 2, 3), limit, ws_tokenizer)
        for doc, ranges in _by_candidate(spans).items():
            breaks += markdown_breaks(MARKDOWN.candidates[doc].text, ranges, texts[doc])
        invalid += not _valid(text)
    assert breaks.fences > 0 and invalid > 0


PROSE_QUESTION = ctx.ContextQuestion(
    qid="prose",
    query="Which river flows through Paris?",
    candidates=(
        Document(text="Alpha beta gamma delta.  Epsilon zeta eta.\nTheta iota kappa lambda mu."),
        Document(text="Paris is in France. The river is the Seine.", title="Paris"),
        Document(text="Bananas are yellow fruit. Epsilon zeta eta. Mr. Smith # 3 | 4 likes them."),
        Document(text=PROSE),
    ),
    gold=(("Epsilon zeta eta.",), ("The river is the Seine.",), (), ()),
    answers=("Seine",),
)


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 2, 1, 0), (1, 3, 0, 2)])
def test_prose_is_stuffed_and_scored_byte_for_byte_as_before(
    ws_tokenizer: Any, order: tuple[int, ...]
) -> None:
    for doc, units in zip(PROSE_QUESTION.candidates, PROSE_QUESTION.units, strict=True):
        assert markdown_units(doc.text) is None
        assert units == tuple((s.start, s.end) for s in split_sentences(doc.text))
    for limit in range(0, 50):
        kept = ctx.stuff(PROSE_QUESTION, order, limit, ws_tokenizer)
        text, spans, texts = _sentence_stuffing(PROSE_QUESTION, order, limit, ws_tokenizer)
        assert (kept.text, list(kept.spans)) == (text, spans)
        assert ctx.candidate_texts(PROSE_QUESTION, kept.spans) == texts
        assert ctx.structure_breaks(PROSE_QUESTION, kept.spans) == StructureBreaks()
        for doc, ranges in _by_candidate(kept.spans).items():
            assert ctx.kept_document(PROSE_QUESTION, doc, ranges)[1] == ()


def test_ranges_that_are_not_units_are_joined_as_sentences_were() -> None:
    """Hand-made or stale ranges (a cached outcome of another split) are read as before: each
    range with the whitespace after it; nothing repeated."""
    cut = SETTINGS.index("| `port`")
    ranges = [(cut, cut + len("| `port` | 8080 |"))]
    text, added = ctx.kept_document(MARKDOWN, 1, ranges)
    assert (text, added) == (SETTINGS[cut : SETTINGS.index("| `workers`")].rstrip(), ())
    assert ctx.structure_breaks(MARKDOWN, [(1, *ranges[0])]) == StructureBreaks(rows=1)


def test_every_system_keeps_markdown_whole(proxy: Any) -> None:
    """Every system of the eval, over the packaged proxy's real forwards, at two budgets: no
    output breaks a fence, a table or a line of code; the stuffing systems stay within the one
    read's tokens, repeated fences and headers counted."""
    from ragattn.lab.evaluation.context_report import summarize
    from ragattn.lab.evaluation.context_systems import ContextSystems

    systems = ContextSystems.from_proxy(proxy)
    for budget in (Budget(kind="ratio", value=0.3), Budget(kind="target_tokens", value=120)):
        read = systems.run(ctx.SYSTEM_UNDER_TEST, MARKDOWN, budget)
        assert read.tokens > 0
        outcomes = [read, systems.run("compress", MARKDOWN, budget)]
        outcomes += [systems.run(s, MARKDOWN, budget, read.tokens) for s in sorted(ctx.MATCHED)]
        for outcome in outcomes:
            row = summarize(
                [outcome], budget=outcome.budget, system=outcome.system, questions={"md": MARKDOWN}
            )
            assert row.breaks == StructureBreaks(), (outcome.system, outcome.spans)
            assert open_fences(ctx.context_text(MARKDOWN, outcome.spans)) == 0
            if outcome.system in ("rerank-stuff", "first-stage"):
                assert 0 < outcome.tokens <= read.tokens
                assert _valid(ctx.context_text(MARKDOWN, outcome.spans))
        stuffed = next(o for o in outcomes if o.system == "rerank-stuff")
        ranked, _ = systems._rank(MARKDOWN)
        assert stuffed.spans[0][0] == ranked[0]  # the reranker's best candidate comes first
