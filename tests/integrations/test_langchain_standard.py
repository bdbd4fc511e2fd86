"""LangChain's standard retriever suite (``langchain-tests``) on :class:`RagattnRetriever`.

The first stage is a real one: LangChain's ``InMemoryVectorStore`` over six short documents,
embedded with the packaged MiniLM (``ragattn.embed``); the one read runs the packaged proxy with
the shared in-process default ``Compressor()``, with the retriever's defaults (LangChain's
contract that ``k`` documents come back holds by default; ``keep_best_sentence=False``, which
leaves out documents the budget kept nothing of, is tested in test_langchain.py).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

pytest.importorskip("langchain_tests")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from langchain_tests.integration_tests import RetrieversIntegrationTests  # noqa: E402

from ragattn.embed import shared_embedder  # noqa: E402
from ragattn.integrations.langchain import RagattnRetriever  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

TEXTS = (
    "The Seine flows through Paris. Its banks are a World Heritage Site.",
    "The Thames flows through London. It is tidal as far as Teddington Lock.",
    "The Danube flows through Vienna and Budapest. It ends in the Black Sea.",
    "Bananas are a yellow fruit rich in potassium. They grow in the tropics.",
    "The Louvre is the world's most-visited museum. It opened in 1793.",
    "Mount Everest is the highest mountain on Earth. It lies in the Himalayas.",
)


class MiniLMEmbeddings(Embeddings):
    """LangChain embeddings from the packaged MiniLM (unit vectors, 384 dimensions)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in shared_embedder().encode(texts)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


@cache
def vector_retriever() -> BaseRetriever:
    """The first stage: the five nearest of the six documents."""
    docs = [Document(page_content=t, id=f"doc-{i}") for i, t in enumerate(TEXTS)]
    store = InMemoryVectorStore.from_documents(docs, MiniLMEmbeddings())
    return store.as_retriever(search_kwargs={"k": 5})


class TestRagattnRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[RagattnRetriever]:
        return RagattnRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"base_retriever": vector_retriever()}

    @property
    def retriever_query_example(self) -> str:
        return "Which river flows through Paris?"
