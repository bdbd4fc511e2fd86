"""The adapters' default budget is every door's, :data:`~ragattn.types.DEFAULT_BUDGET` (a ratio of
0.2 with the 1,024-token ceiling); a ``ratio`` given keeps none unless ``max_tokens`` gives one.
The adapters are only built here (their engine loads on the first call), so no model is
loaded."""

from __future__ import annotations

import re

import pytest

from ragattn.errors import InvalidInputError
from ragattn.integrations import compress_args
from ragattn.types import DEFAULT_BUDGET, DEFAULT_MAX_CONTEXT_TOKENS, Budget


def test_compress_args_default_budget_has_the_ceiling() -> None:
    assert Budget(kind="ratio", value=0.2, max_tokens=DEFAULT_MAX_CONTEXT_TOKENS) == DEFAULT_BUDGET
    assert DEFAULT_MAX_CONTEXT_TOKENS == 1024
    assert compress_args(None, None, None).budget is DEFAULT_BUDGET
    assert compress_args(None, None, None, verb="rerank_compress").budget is DEFAULT_BUDGET
    # a ratio given: no ceiling unless one is given; a ceiling alone caps the default ratio
    assert compress_args(0.3, None, None).budget == Budget(kind="ratio", value=0.3)
    assert compress_args(0.3, None, None, 200).budget == Budget(
        kind="ratio", value=0.3, max_tokens=200
    )
    assert compress_args(None, None, None, 200).budget == Budget(
        kind="ratio", value=0.2, max_tokens=200
    )
    assert compress_args(None, 64, None).budget == Budget(kind="target_tokens", value=64)
    with pytest.raises(InvalidInputError, match=re.escape("not with target_tokens")):
        compress_args(None, 64, None, 200)


def test_langchain_adapters_carry_the_ceiling() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from ragattn.integrations.langchain import RagattnCompressor, RagattnRetriever

    class Empty(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return []

    assert RagattnCompressor()._args.budget is DEFAULT_BUDGET
    assert RagattnCompressor(ratio=0.4)._args.budget == Budget(kind="ratio", value=0.4)
    capped = RagattnCompressor(ratio=0.4, max_tokens=300)._args.budget
    assert capped == Budget(kind="ratio", value=0.4, max_tokens=300)
    retriever = RagattnRetriever(base_retriever=Empty())
    assert retriever._args is not None
    assert retriever._args.budget is DEFAULT_BUDGET
    with pytest.raises(InvalidInputError, match=re.escape("not with threshold")):
        RagattnCompressor(threshold=0.5, max_tokens=300)
    with pytest.raises(InvalidInputError, match="max_tokens configure the one read"):
        RagattnRetriever(base_retriever=Empty(), compress=RagattnCompressor(), max_tokens=300)


def test_the_llamaindex_postprocessor_carries_the_ceiling() -> None:
    pytest.importorskip("llama_index.core")
    from ragattn.integrations.llamaindex import RagattnCompressPostprocessor

    assert RagattnCompressPostprocessor()._args.budget is DEFAULT_BUDGET
    given = RagattnCompressPostprocessor(ratio=0.25, max_tokens=128)._args.budget
    assert given == Budget(kind="ratio", value=0.25, max_tokens=128)
