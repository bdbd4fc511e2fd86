"""Where the adapters find a document's title: ``read_title`` on plain values, no model."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ragattn.integrations import DEFAULT_TITLE_KEY, read_title


@pytest.mark.parametrize(
    ("metadata", "title"),
    [
        ({"title": "Eiffel Tower"}, "Eiffel Tower"),
        ({"title": " Eiffel Tower "}, " Eiffel Tower "),  # passed as given: the prompt strips it
        ({}, None),
        (None, None),
        ({"title": None}, None),
        ({"title": ""}, None),
        ({"title": "  \n"}, None),
        ({"title": 1889}, None),  # a number is no title: never str() of a stray value
        ({"title": ["Eiffel", "Tower"]}, None),
        ({"name": "Eiffel Tower"}, None),
    ],
)
def test_the_default_key_reads_only_non_blank_strings(
    metadata: dict[str, Any] | None, title: str | None
) -> None:
    assert DEFAULT_TITLE_KEY == "title"
    assert read_title(object(), metadata, DEFAULT_TITLE_KEY) == title


def test_another_key_a_callable_or_none() -> None:
    doc = SimpleNamespace(metadata={"title": "T", "name": "N"}, page_content="text")
    assert read_title(doc, doc.metadata, "name") == "N"
    assert read_title(doc, doc.metadata, lambda d: d.metadata["name"].lower()) == "n"
    assert read_title(doc, doc.metadata, lambda d: 7) is None
    assert read_title(doc, doc.metadata, lambda d: None) is None
    assert read_title(doc, doc.metadata, None) is None
