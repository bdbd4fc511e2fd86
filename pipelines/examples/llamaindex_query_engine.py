"""A LlamaIndex query engine with ragattn rerank and compression as node postprocessors.

A ``SummaryIndex`` hands every node to the postprocessors: :class:`RagattnRerankPostprocessor`
keeps the best two (same node objects, ``score`` = relevance in [0, 1]) and
:class:`RagattnCompressPostprocessor` prunes them to the sentences that answer. The LLM is
LlamaIndex's ``MockLLM``, which echoes its prompt, so the output shows exactly what a real model
would read; everything runs offline. Against a running service, pass ``--url``.

    python pipelines/examples/llamaindex_query_engine.py [--url http://127.0.0.1:8080]
"""

from __future__ import annotations

import argparse

from llama_index.core import SummaryIndex
from llama_index.core.llms import MockLLM
from llama_index.core.schema import TextNode

from ragattn import Reranker, load_proxy
from ragattn.client import Client
from ragattn.compress import Compressor
from ragattn.integrations.llamaindex import (
    RagattnCompressPostprocessor,
    RagattnRerankPostprocessor,
)

NODES = [
    TextNode(
        id_="louvre",
        text="The Louvre is the world's most-visited museum. It opened in 1793.",
        metadata={"source": "louvre.txt"},
    ),
    TextNode(
        id_="seine",
        text="The Seine flows through Paris. Its banks are a World Heritage Site.",
        metadata={"source": "seine.txt"},
    ),
    TextNode(
        id_="eiffel",
        text="The Eiffel Tower was completed in 1889. It was the entrance arch of the "
        "World's Fair. Gustave Eiffel's company designed and built it.",
        metadata={"source": "eiffel.txt"},
    ),
]


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

    engine = SummaryIndex(NODES).as_query_engine(
        llm=MockLLM(),
        node_postprocessors=[
            RagattnRerankPostprocessor(reranker=reranker, top_n=2),
            RagattnCompressPostprocessor(compressor=compressor, ratio=0.6, order="input"),
        ],
    )
    response = engine.query("When was the Eiffel Tower completed?")
    print("source nodes (reranked, top 2, compressed to ratio 0.6 together):")
    for n in response.source_nodes:
        spans = [(s["start"], s["end"]) for s in n.node.metadata["ragattn_kept_spans"]]
        print(f"  {n.node.node_id:<7} score={n.score:.3f} kept={spans} text={n.node.text!r}")
    print("what the LLM read (MockLLM echoes its prompt):")
    print("  " + str(response).strip().replace("\n", "\n  "))


if __name__ == "__main__":
    main()
