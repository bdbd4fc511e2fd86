"""Prompt spans: exact on any script, with duplicates, and the twin shares the prefix."""

from __future__ import annotations

import pytest

from ragattn.prompt import (
    Kind,
    assemble,
    rerank_pieces,
    sentinel_pieces,
    shared_prefix_length,
    with_query,
)
from ragattn.types import Document

DOCS = [
    Document(text="Plain ASCII text about the Eiffel Tower."),
    Document(text="Café crème à Paris — très bon, naïve façade."),
    Document(text="東京は日本の首都です。大阪は西にあります。"),
    Document(text="Emoji party 😀🚀 with rockets!"),
    Document(text="Emoji party 😀🚀 with rockets!"),
    Document(text="Body text here.", title="A Title"),
]


def decoded(proxy, prompt, span):
    return proxy.tokenizer.decode(prompt.input_ids[span.as_slice()]).strip()


@pytest.mark.parametrize("family", ["chatml", "none"])
def test_document_spans_decode_to_their_text(proxy, family):
    pieces = rerank_pieces("where is the café?", DOCS, list(range(len(DOCS))), family=family)
    prompt = assemble(pieces, proxy.tokenizer)
    for slot, i in enumerate(range(len(DOCS)), start=1):
        body = (DOCS[i].title + "\n" if DOCS[i].title else "") + DOCS[i].text
        assert decoded(proxy, prompt, prompt.document(i).tokens) == f"[{slot}] {body}"
        text_span = prompt.document_text_tokens(i, 0, len(DOCS[i].text))
        assert decoded(proxy, prompt, text_span) == DOCS[i].text


def test_duplicate_documents_get_distinct_spans(proxy):
    prompt = assemble(
        rerank_pieces("q", DOCS, list(range(len(DOCS))), family="chatml"), proxy.tokenizer
    )
    a, b = prompt.document(3).tokens, prompt.document(4).tokens
    assert a.end <= b.start
    assert prompt.input_ids[a.start + 3 : a.end] == prompt.input_ids[b.start + 3 : b.end]


def test_sentence_spans_inside_documents(proxy):
    doc = Document(
        text="First sentence here. Second one! Third, with 3.5 numbers. First sentence here."
    )
    prompt = assemble(sentinel_pieces("what?", [doc]), proxy.tokenizer)
    starts = [0, 21, 33, 58]
    ends = [20, 32, 57, len(doc.text)]
    spans = [prompt.document_text_tokens(0, s, e) for s, e in zip(starts, ends, strict=True)]
    for span, s, e in zip(spans, starts, ends, strict=True):
        assert decoded(proxy, prompt, span) == doc.text[s:e]
    assert all(a.end == b.start for a, b in zip(spans, spans[1:], strict=False))


def test_query_span_and_twin_prefix(proxy):
    pieces = rerank_pieces("Which city is the capital?", DOCS, [5, 4, 3, 2, 1, 0], family="chatml")
    real = assemble(pieces, proxy.tokenizer)
    twin = assemble(with_query(pieces, "N/A"), proxy.tokenizer)
    assert real.text.endswith(
        "Query: Which city is the capital?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert twin.text.endswith("Query: N/A<|im_end|>\n<|im_start|>assistant\n")
    assert decoded(proxy, real, real.query_span).startswith("Please find information")
    assert real.query_span.end == len(real.input_ids)
    assert shared_prefix_length(real, twin) >= real.query_span.start
    assert real.query_span.start == twin.query_span.start
    last_doc = max(real.document(i).tokens.end for i in range(len(DOCS)))
    assert last_doc <= real.query_span.start
    kinds = [p.piece.kind for p in real.pieces]
    assert kinds[0] is Kind.CHAT_PREFIX and kinds[-1] is Kind.CHAT_SUFFIX
