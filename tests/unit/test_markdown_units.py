"""Markdown documents cut along their structure (issue 60, item 1), and prose split as before."""

from __future__ import annotations

import pytest

from ragattn.markdown_units import (
    document_units,
    join_kept,
    looks_like_markdown,
    markdown_units,
)
from ragattn.sentences import MAX_SENTENCE_BYTES, split_sentences

PROSE = [
    "The cathedral was finished in 1345. Dr. Smith restored its nave in 1901.",
    "First paragraph here.\n\nSecond paragraph, after a blank line. It has two sentences.",
    "1. Preheat the oven to 200 C.\n2. Mix the flour and the eggs.\n3. Bake for 20 minutes.",
    "- apples are red\n- pears are green\n  and sometimes yellow\n* plums are purple",
    "Shopping list:\n  * milk\n  * bread\n\nThat is all for today.",
    "C# is a language. The #1 hit of 1999 was a song; tags like #news are not headings.",
    "The ratio a | b | c is written with pipes. A tilde ~~~ run is not a fence here.",
    "Use `print(x)` to show x. The `os.path` module joins paths.",
    "> A quoted line that is not Markdown here.\n> Another one. Really.",
    "Title\n=====\n\nA setext heading alone does not make a text Markdown.",
    "Он пришёл домой. Было поздно.",
    "東京は日本の首都です。人口は多いです。",
    "Line one\r\nLine two. Still prose.\r\n\r\nNew paragraph.",
    "    indented text is not enough either. It has sentences.",
    "",
    "   ",
]


@pytest.mark.parametrize("text", PROSE)
def test_prose_splits_exactly_as_split_sentences(text: str) -> None:
    assert not looks_like_markdown(text)
    assert markdown_units(text) is None
    expected = tuple((s.start, s.end) for s in split_sentences(text))
    assert document_units(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Intro.\n\n```python\nx = 1\n```\n",
        "Intro.\n\n~~~\nplain\n~~~\n",
        "| a | b |\n|---|---|\n| 1 | 2 |\n",
        "## Setup\n\nInstall it.",
    ],
)
def test_a_fence_a_table_or_an_atx_heading_makes_markdown(text: str) -> None:
    assert looks_like_markdown(text)


def _units(text: str):  # type: ignore[no-untyped-def]
    units = markdown_units(text)
    assert units is not None
    for u in units:  # exact, non-overlapping, in order
        assert 0 <= u.start < u.end <= len(text)
    assert all(a.end <= b.start for a, b in zip(units, units[1:], strict=False))
    return units


def _table(text: str) -> list[tuple[str, str]]:
    return [(u.kind, text[u.start : u.end]) for u in _units(text)]


NESTED = """# Guide

Intro sentence one. Intro sentence two.

- Top item. It has a second sentence.
  - Nested item one.
  - Nested item two:

    ```bash
    pip install ragattn
    # a comment, not a heading
    ```

- Last item.
"""


def test_nested_lists_and_a_code_block_in_a_list() -> None:
    assert _table(NESTED) == [
        ("sentence", "Intro sentence one."),
        ("sentence", "Intro sentence two."),
        ("sentence", "- Top item."),
        ("sentence", "It has a second sentence."),
        ("sentence", "- Nested item one."),
        ("sentence", "- Nested item two:"),
        ("code", "    pip install ragattn\n    # a comment, not a heading"),
        ("sentence", "- Last item."),
    ]
    units = _units(NESTED)
    code = units[6]
    assert code.fence is not None and not code.opens and not code.closes  # behind the list
    assert NESTED[slice(*code.fence.opening)] == "```bash"
    assert NESTED[slice(*code.fence.closing)] == "```"
    # every unit falls under the guide's heading; the comment in the fence is no section
    assert {u.section for u in units} == {(0, len("# Guide"))}


TABLE = """## Options

| option | meaning |
|--------|---------|
| `a\\|b` | either `a` or `b` |
| `--fast` | skips the \\| check |
| plain | no code |
"""


def test_table_rows_name_their_header_and_keep_inline_code_and_pipes() -> None:
    units = _units(TABLE)
    kinds = [(u.kind, TABLE[u.start : u.end]) for u in units]
    header = "| option | meaning |\n|--------|---------|"
    assert kinds == [
        ("table_header", header),
        ("table_row", "| `a\\|b` | either `a` or `b` |"),
        ("table_row", "| `--fast` | skips the \\| check |"),
        ("table_row", "| plain | no code |"),
    ]
    for row in units[1:]:
        assert row.header is not None and TABLE[slice(*row.header)] == header
        assert row.block == units[1].block


def test_a_fenced_block_is_one_unit_and_headings_inside_it_are_code() -> None:
    text = "Intro text here.\n\n```markdown\n# Not a heading\n| not | a table |\n```\n\nAfter."
    units = _units(text)
    assert [u.kind for u in units] == ["sentence", "code", "sentence"]
    code = units[1]
    assert text[code.start : code.end] == "```markdown\n# Not a heading\n| not | a table |\n```"
    assert code.opens and code.closes
    assert all(u.section is None for u in units)


def test_front_matter_is_no_unit() -> None:
    text = "---\ntitle: Demo\ntags: [a, b]\n---\n# Demo\n\nBody text. More body.\n"
    assert _table(text) == [
        ("sentence", "Body text."),
        ("sentence", "More body."),
    ]


def test_crlf_line_ends_give_the_same_units_at_their_own_offsets() -> None:
    lf = NESTED + "\n" + TABLE
    crlf = lf.replace("\n", "\r\n")
    assert [t for _, t in _table(crlf)] == [t.replace("\n", "\r\n") for _, t in _table(lf)]
    assert [u.kind for u in _units(crlf)] == [u.kind for u in _units(lf)]


def test_a_long_code_block_is_cut_at_lines_into_pieces_that_carry_the_fence() -> None:
    body = "\n".join(f"value_{n:03d} = compute({n}, scale=2.5)  # step {n}" for n in range(120))
    text = f"Intro.\n\n```python\n{body}\n```\n"
    code = [u for u in _units(text) if u.kind == "code"]
    assert len(code) > 3
    assert code[0].opens and not code[0].closes
    assert code[-1].closes and not code[-1].opens
    lines = set(text.split("\n"))
    for piece in code:
        piece_text = text[piece.start : piece.end]
        assert len(piece_text.encode()) <= MAX_SENTENCE_BYTES
        assert set(piece_text.split("\n")) <= lines  # whole lines only
        assert piece.fence is not None and text[slice(*piece.fence.opening)] == "```python"
    joined = "".join(
        text[a.start : a.end] + text[a.end : b.start] for a, b in zip(code, code[1:], strict=False)
    )
    assert joined + text[code[-1].start : code[-1].end] == f"```python\n{body}\n```"


def test_only_a_line_longer_than_the_bound_is_cut() -> None:
    line = "x=" + "1," * 900  # 1,802 bytes on one line
    text = f"Intro.\n\n```js\n{line}\nshort()\n```\n"
    code = [u for u in _units(text) if u.kind == "code"]
    assert all(len(text[u.start : u.end].encode()) <= MAX_SENTENCE_BYTES for u in code)
    line_start = text.index(line)
    for a, b in zip(code, code[1:], strict=False):
        gap = text[a.end : b.start]
        # a cut inside a line only in the long one; every other piece ends at a line end
        assert gap == "\n" or (gap == "" and line_start < b.start < line_start + len(line))
    rebuilt = "".join(text[a.start : b.start] for a, b in zip(code, code[1:], strict=False))
    assert rebuilt + text[code[-1].start : code[-1].end] == f"```js\n{line}\nshort()\n```"


def _join(text: str, kept: list[str]) -> tuple[str, list[tuple[str, str, int]]]:
    units = _units(text)
    index = {text[u.start : u.end]: n for n, u in enumerate(units)}
    out, added = join_kept(text, units, [index[k] for k in kept])
    for a in added:
        assert (
            out[a.offset : a.offset + len(a.text)] == a.text == text[a.source_start : a.source_end]
        )
    return out, [(a.kind, a.text, a.offset) for a in added]


def test_a_kept_row_is_joined_under_its_header_once() -> None:
    out, added = _join(TABLE, ["| plain | no code |", "| `a\\|b` | either `a` or `b` |"])
    header = "| option | meaning |\n|--------|---------|"
    assert out == f"{header}\n| `a\\|b` | either `a` or `b` |\n| plain | no code |"
    assert added == [("table_header", header, 0)]
    kept_header, added = _join(TABLE, [header, "| plain | no code |"])
    assert kept_header == f"{header}\n| plain | no code |"
    assert added == []  # the header was kept on its own score: nothing repeated


def test_a_heading_is_the_section_of_what_follows_and_never_a_unit() -> None:
    text = "# Guide\n\nIntro.\n\n## Install\n\nRun it.\n\n```bash\npip install x\n```\n"
    units = _units(text)
    assert [text[u.start : u.end] for u in units] == [
        "Intro.",
        "Run it.",
        "```bash\npip install x\n```",
    ]
    assert [text[slice(*u.section)] for u in units if u.section] == [
        "# Guide",
        "## Install",
        "## Install",
    ]


def test_paragraphs_split_as_rendered_soft_breaks_and_inline_code() -> None:
    text = (
        "# Venv\n\nA folder with its own interpreter, so that each\nproject pins its versions."
        " On Windows, run `.venv\\Scripts\\activate` instead. Then `os.path.join` works."
    )
    assert [text[u.start : u.end] for u in _units(text)] == [
        "A folder with its own interpreter, so that each\nproject pins its versions.",
        "On Windows, run `.venv\\Scripts\\activate` instead.",
        "Then `os.path.join` works.",
    ]


def test_code_behind_a_list_is_joined_between_repeated_fences() -> None:
    code = "    pip install ragattn\n    # a comment, not a heading"
    out, added = _join(NESTED, ["- Nested item two:", code, "- Last item."])
    assert out == f"- Nested item two:\n\n```bash\n{code}\n```\n\n- Last item."
    assert [(k, t) for k, t, _ in added] == [("fence", "```bash"), ("fence", "```")]


def test_sentences_of_one_paragraph_keep_their_own_joins() -> None:
    out, added = _join(NESTED, ["Intro sentence one.", "Intro sentence two.", "- Top item."])
    assert out == "Intro sentence one. Intro sentence two.\n\n- Top item."
    assert added == []
    out, _ = _join(NESTED, ["- Nested item one.", "- Nested item two:"])
    assert out == "- Nested item one.\n  - Nested item two:"  # neighbours: the source's own join


def test_a_middle_piece_of_a_long_block_gets_both_fences() -> None:
    body = "\n".join(f"value_{n:03d} = compute({n}, scale=2.5)  # step {n}" for n in range(120))
    text = f"Intro.\n\n```python\n{body}\n```\n"
    units = _units(text)
    middle = [n for n, u in enumerate(units) if u.kind == "code"][1]
    out, added = join_kept(text, units, [middle])
    assert out.startswith("```python\n") and out.endswith("\n```")
    assert out[len("```python\n") : -len("\n```")] == text[units[middle].start : units[middle].end]
    assert [a.kind for a in added] == ["fence", "fence"]
