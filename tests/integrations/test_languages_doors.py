"""Every language by default, on every door: a German and a Chinese question over short paragraphs
in their language, with no proxy and no language named, are read by the multilingual proxy
(Gemma-3-270M) through the library's verbs, the SDK against a live server, and the LangChain
adapter; an English call through the same doors stays on SmolLM2. Each door keeps the sentence
that answers the question, and the result's ``tokenizer`` (the proxy that counted its tokens)
says which proxy read it: with the choice by language turned off (``multilingual=None``) every
``tokenizer`` assertion on the German and Chinese calls fails.

One default :class:`~ragattn.compress.Compressor` serves the file (the library and the server),
so Gemma is loaded once, on the first call that is not English.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from ragattn.client import Client
from ragattn.compress import Compressor
from ragattn.proxy import DEFAULT_PROXY, MULTILINGUAL_PROXY

pytestmark = pytest.mark.slow

API_KEY = "languages-doors-key"


@dataclass(frozen=True)
class Example:
    """A question, its paragraphs (one holds ``answer``, a whole sentence of it) and the proxy
    that should read it."""

    query: str
    texts: tuple[str, ...]
    answer: str
    reader: str


GERMAN = Example(
    query="In welchem Jahr wurde die Köhlbrandbrücke in Hamburg für den Verkehr freigegeben?",
    texts=(
        "Der Hamburger Hafen ist einer der größten Häfen Europas. Jedes Jahr legen dort "
        "tausende Containerschiffe an. Er liegt an der Elbe, etwa hundert Kilometer von der "
        "Nordsee entfernt.",
        "Die Elbphilharmonie ist ein Konzerthaus in der HafenCity. Sie wurde im Jahr 2017 "
        "eröffnet. Ihr Dach erinnert an Wellen.",
        "Die Köhlbrandbrücke verbindet die Hafengebiete auf beiden Seiten der Süderelbe. Sie "
        "wurde im Jahr 1974 für den Verkehr freigegeben. Mit knapp vier Kilometern ist sie "
        "eine der längsten Brücken Deutschlands.",
        "Hamburg hat mehr Brücken als Venedig und Amsterdam zusammen. Viele davon überqueren "
        "Kanäle und Fleete in der Innenstadt.",
    ),
    answer="Sie wurde im Jahr 1974 für den Verkehr freigegeben.",
    reader=MULTILINGUAL_PROXY,
)

CHINESE = Example(
    query="长江全长大约多少公里？",
    texts=(
        "黄河是中国第二长的河流，被称为中华民族的母亲河。它流经九个省区，最终注入渤海。",
        "长江发源于青藏高原的唐古拉山脉。长江全长约六千三百公里，是亚洲第一长河。"
        "它自西向东流经十一个省级行政区，在上海注入东海。",
        "三峡大坝位于湖北省宜昌市，是世界上装机容量最大的水电站。大坝于二〇〇六年全面建成。",
        "珠江是中国南方最大的河流，全长约两千四百公里。它流经广州，最后注入南海。",
    ),
    answer="长江全长约六千三百公里，是亚洲第一长河。",
    reader=MULTILINGUAL_PROXY,
)

ENGLISH = Example(
    query="When was the Köhlbrand Bridge in Hamburg opened to traffic?",
    texts=(
        "The Port of Hamburg is one of the largest ports in Europe. Thousands of container "
        "ships call there every year.",
        "The Köhlbrand Bridge links the port areas on both sides of the Süderelbe. It was "
        "opened to traffic in 1974. At almost four kilometres it is one of Germany's longest "
        "bridges.",
        "Hamburg has more bridges than Venice and Amsterdam combined. Many of them cross "
        "canals in the city centre.",
    ),
    answer="It was opened to traffic in 1974.",
    reader=DEFAULT_PROXY,
)

EXAMPLES = pytest.mark.parametrize(
    "example", [GERMAN, CHINESE, ENGLISH], ids=["german", "chinese", "english"]
)


@pytest.fixture(scope="module")
def engine() -> Compressor:
    """The library's default compressor: SmolLM2 for English, Gemma built on first other use."""
    return Compressor()


@pytest.fixture(scope="module")
def remote(engine: Compressor, reranker: Any, live_server: Any) -> Iterator[Client]:
    """The SDK's client of a live service (API key required) over ``engine``."""
    from ragattn.settings import Settings
    from ragattn_api import create_app

    app = create_app(Settings(api_keys=(API_KEY,)), reranker=reranker, compressor=engine)
    with live_server(app) as url, Client(url, api_key=API_KEY, timeout_s=300) as client:
        yield client


@EXAMPLES
def test_the_library_reads_each_language_with_its_proxy(
    engine: Compressor, example: Example
) -> None:
    texts = list(example.texts)
    read = engine.compress(example.query, texts)
    assert read.tokenizer == example.reader
    assert example.answer in read.compressed_text
    ranked, both = engine.rerank_and_compress(example.query, texts)
    assert both.tokenizer == example.reader
    assert example.answer in both.compressed_text
    assert len(ranked) == len(texts)


@EXAMPLES
def test_the_sdk_gets_the_same_read_from_the_server(
    remote: Client, engine: Compressor, example: Example
) -> None:
    texts = list(example.texts)
    read = remote.compress(example.query, texts)
    assert read.tokenizer == example.reader
    assert example.answer in read.compressed_text
    assert read == engine.compress(example.query, texts)
    ranked, both = remote.rerank_and_compress(example.query, texts)
    assert both.tokenizer == example.reader
    assert example.answer in both.compressed_text
    want_ranked, want = engine.rerank_and_compress(example.query, texts)
    assert both == want
    # the ranking as the route sends it (its ``raw_score`` is not on the wire)
    assert [(r.index, r.relevance_score) for r in ranked] == [
        (r.index, r.relevance_score) for r in want_ranked
    ]


@EXAMPLES
def test_the_langchain_adapter_keeps_the_answer_from_the_same_read(
    engine: Compressor, example: Example
) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document

    from ragattn.integrations.langchain import RagattnCompressor

    ids = [f"doc-{i}" for i in range(len(example.texts))]
    docs = [Document(page_content=t, id=i) for t, i in zip(example.texts, ids, strict=True)]
    got = RagattnCompressor(compressor=engine).compress_documents(docs, example.query)
    assert any(example.answer in d.page_content for d in got)
    # the adapter's scores are the library's read's, so the same proxy read both
    ranked, read = engine.rerank_and_compress(example.query, list(example.texts))
    assert read.tokenizer == example.reader
    scores = {ids[r.index]: r.raw_score for r in ranked}
    assert got
    assert {d.id: d.metadata["ragattn_raw_score"] for d in got} == {
        d.id: scores[str(d.id)] for d in got
    }
