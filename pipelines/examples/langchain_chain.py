"""A LangChain RAG chain: a first-stage retriever, ragattn rerank + compression, then the prompt.

The first stage is a deliberately poor keyword retriever; ``ContextualCompressionRetriever``
reranks its hits with :class:`RagattnRerank` and prunes them with :class:`RagattnCompressor`.
The chain ends at the prompt an LLM would receive (plug any chat model after it); everything
runs offline on the packaged proxy. Against a running service, pass ``--url``.

    python pipelines/examples/langchain_chain.py [--url http://127.0.0.1:8080]
"""

from __future__ import annotations

import argparse
import asyncio

from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough

from ragattn import Reranker, load_proxy
from ragattn.client import Client
from ragattn.compress import Compressor
from ragattn.integrations.langchain import RagattnCompressor, RagattnRerank

DOCS = [
    Document(
        id="louvre",
        page_content="The Louvre is the world's most-visited museum. It opened in 1793.",
        metadata={"source": "louvre.txt"},
    ),
    Document(
        id="seine",
        page_content="The Seine flows through Paris. Its banks are a World Heritage Site.",
        metadata={"source": "seine.txt"},
    ),
    Document(
        id="eiffel",
        page_content="The Eiffel Tower was completed in 1889. It was the entrance arch of the "
        "World's Fair. Gustave Eiffel's company designed and built it.",
        metadata={"source": "eiffel.txt"},
    ),
]


class KeywordRetriever(BaseRetriever):
    """Every document sharing a word with the query, in corpus order: a weak first stage."""

    documents: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        words = {w.strip("?.,").lower() for w in query.split()}
        return [d for d in self.documents if words & set(d.page_content.lower().split())]


PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer from the context only.\n\nContext:\n{context}"),
        ("human", "{question}"),
    ]
)


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(f"[{d.metadata['source']}] {d.page_content}" for d in docs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running ragattn service (default: in process)")
    args = parser.parse_args()
    if args.url:
        reranker = compressor = Client(args.url)  # the one line that changes
    else:
        proxy = load_proxy("smollm2-135m")
        reranker = Reranker(proxy, method="icr")
        compressor = Compressor(proxy)  # the trained default method, "sentinel"

    retriever = ContextualCompressionRetriever(
        base_compressor=DocumentCompressorPipeline(
            transformers=[
                RagattnRerank(reranker=reranker, top_n=2),
                RagattnCompressor(compressor=compressor, ratio=0.5, order="input"),
            ]
        ),
        base_retriever=KeywordRetriever(documents=DOCS),
    )
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | PROMPT

    question = "When was the Eiffel Tower completed?"
    print("first stage:", [d.id for d in KeywordRetriever(documents=DOCS).invoke(question)])
    docs = retriever.invoke(question)
    print("reranked (top 2) and compressed (ratio 0.5; documents with nothing kept are dropped):")
    for d in docs:
        spans = [(s["start"], s["end"]) for s in d.metadata["ragattn_kept_spans"]]
        print(f"  {d.id:<7} relevance={d.metadata['relevance_score']:.3f} kept={spans}")
        print(f"          {d.page_content!r}")
    same = asyncio.run(retriever.ainvoke(question)) == docs
    print("async equals sync:", same)
    print("prompt for the LLM:")
    for message in chain.invoke(question).to_messages():
        print(f"  {message.type}: {message.content!r}")


if __name__ == "__main__":
    main()
