"""Shared fixtures for retrieval tests: small hand-built corpora and the real packaged MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragattn.embed import Embedder, shared_embedder
from ragattn.types import Document

DOCS = [
    Document(id="cat", text="The cat sat on the mat and purred at the sleeping dog."),
    Document(id="market", text="Stock markets fell sharply as investors sold bank shares."),
    Document(
        id="bread", text="Knead the sourdough dough, let it rise overnight, then bake the bread."
    ),
    Document(id="vitamin", title="Vitamin D", text="Vitamin D deficiency is linked to weak bones."),
    Document(id="running", text="Runners running marathons train their legs for endurance."),
]


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return shared_embedder()


@pytest.fixture()
def docs() -> list[Document]:
    return list(DOCS)


@pytest.fixture()
def beir_file(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for d in DOCS:
            fh.write(
                json.dumps({"_id": d.id, "title": d.title or "", "text": d.text, "metadata": {}})
            )
            fh.write("\n")
    return path
