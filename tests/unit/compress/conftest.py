"""Shared inputs of the compress tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ragattn.types import Document

EIFFEL = "The Eiffel Tower was completed in 1889. It stands in Paris. " * 2


def town_pool(n_docs: int, *, titled: bool = False) -> list[Document]:
    """``n_docs`` distinct paragraphs of about 60 proxy tokens, the middle one about the Eiffel
    Tower (``titled``: each with a title, "Town N" or "Eiffel Tower")."""
    docs = [
        Document(
            text=" ".join(
                f"Town {d} has a market on day {k} where traders sell item {d * 7 + k}."
                for k in range(4)
            ),
            title=f"Town {d}" if titled else None,
        )
        for d in range(n_docs)
    ]
    docs[n_docs // 2] = Document(text=EIFFEL, title="Eiffel Tower" if titled else None)
    return docs


@pytest.fixture
def pool() -> Callable[..., list[Document]]:
    """:func:`town_pool`: many candidates, one of them relevant to an Eiffel Tower question."""
    return town_pool
