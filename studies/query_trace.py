"""Follow one call's ``query`` through the package: the calls that receive it, in order (issue
62's target: at most 20 calls from ``Compressor.rerank_and_compress``, the document-scoring module
entered at most twice).

One real ``Compressor().rerank_and_compress(query, docs, ratio=0.2)`` (the packaged English proxy,
four short English documents, the default method and cascade) runs under :func:`sys.setprofile`.
A call counts when its function is defined under ``ragattn/`` and one of its arguments (positional,
keyword, ``*args`` or ``**kwargs``) *is* the call's query string (by identity: the query is built at
run time, so no other string is the same object). The chain is printed in call order, indented by
depth, with each call's module and function; then the total, the modules, how many times each
module is entered with the query, and how often the chain climbs back up (a call at a depth no
deeper than the one before it). A second call on the same compressor is the one traced (the first
loads the lazy parts: the document probe, the selection, MiniLM).

    PYTHONPATH=. python studies/query_trace.py
    PYTHONPATH=. python studies/query_trace.py --long  # a context the cascade cuts
    PYTHONPATH=. python studies/query_trace.py --scoring-module ragattn/document_probe.py

Measured (the same script on both checkouts): at 5f11297, 24 calls in 13 modules (``--long``: 35
in 14, the issue's count); with the read's query in its plan
(:class:`~ragattn.compress.read.ReadCall`), 19 in 12 (``--long``: 30 in 14).
``ragattn/document_probe.py`` is entered 0 times in both: the document probe's correction reads
the forward's features, never the query.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import ragattn
from ragattn.compress import Compressor
from ragattn.types import Document

PACKAGE = Path(ragattn.__file__).resolve().parent
ROOT = PACKAGE.parent
DOCS = (
    Document(
        text="The Eiffel Tower is in Paris. It was finished in 1889 for the World's Fair.",
        title="Eiffel Tower",
    ),
    Document(
        text="Bananas are rich in potassium. They grow in tropical climates.",
        title="Banana",
    ),
    Document(
        text="Gustave Eiffel's company built the tower. Its lattice weighs about 7,300 tonnes.",
        title="Gustave Eiffel",
    ),
    Document(text="The Louvre is the world's most visited museum.", title="Louvre"),
)
TOWNS = ("Alder", "Birch", "Cedar", "Dunmore", "Elm", "Fern", "Glen", "Hollis", "Ivy", "Juniper")
LONG_DOCS = tuple(
    Document(
        text=" ".join(
            f"{town} holds a market on day {k} of the month, beside {k + 2} bridges over the river."
            for k in range(1, 9)
        ),
        title=town,
    )
    for town in TOWNS
)
"""Ten titled documents of eight sentences (about 1,900 proxy tokens in all): a context the default
cascade cuts (``--long``)."""


@dataclass(frozen=True, slots=True)
class Hop:
    """One call that received the query: its depth in the traced call's stack (0: the entry), the
    module's path relative to the repository root and the function's qualified name."""

    depth: int
    module: str
    function: str


def receives(frame: FrameType, value: object) -> bool:
    """Whether ``value`` (by identity) is one of the arguments the frame's function was called
    with: a named one, or one of its ``*args`` or ``**kwargs`` (a container passed as one
    argument, a list or a dict holding the value, does not count)."""
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    local = frame.f_locals
    if any(local.get(name) is value for name in code.co_varnames[:n]):
        return True
    if code.co_flags & 0x04:  # CO_VARARGS
        if any(a is value for a in local.get(code.co_varnames[n], ())):
            return True
        n += 1
    if code.co_flags & 0x08:  # CO_VARKEYWORDS
        return any(a is value for a in local.get(code.co_varnames[n], {}).values())
    return False


def trace(compressor: Compressor, query: str, docs: tuple[Document, ...]) -> list[Hop]:
    """The calls under ``ragattn/`` that receive ``query`` during one ``rerank_and_compress``."""
    hops: list[Hop] = []
    depth = 0
    package = str(PACKAGE)

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal depth
        if event == "call":
            depth += 1
            filename = frame.f_code.co_filename
            if filename.startswith(package) and receives(frame, query):
                module = str(Path(filename).resolve().relative_to(ROOT))
                hops.append(Hop(depth, module, frame.f_code.co_qualname))
        elif event == "return":
            depth -= 1

    sys.setprofile(profile)
    try:
        compressor.rerank_and_compress(query, list(docs), ratio=0.2)
    finally:
        sys.setprofile(None)
    base = hops[0].depth if hops else 0
    return [Hop(h.depth - base, h.module, h.function) for h in hops]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scoring-module",
        default="ragattn/document_probe.py",
        help="the module that scores documents (counted apart)",
    )
    parser.add_argument(
        "--long", action="store_true", help="ten long documents, which the cascade cuts"
    )
    args = parser.parse_args()
    docs = LONG_DOCS if args.long else DOCS
    words = ["Which", "town", "holds", "a", "market", "on", "day", "3?"] if args.long else []
    query = " ".join(words or ["Who", "built", "the", "Eiffel", "Tower?"])  # a fresh object
    compressor = Compressor(threads=2)
    compressor.rerank_and_compress(" ".join(["warm", "up"]), list(docs), ratio=0.2)
    hops = trace(compressor, query, docs)
    for hop in hops:
        print(f"{'  ' * hop.depth}{hop.module}:{hop.function}")
    entered = Counter(h.module for h in hops)
    climbs = sum(1 for a, b in zip(hops, hops[1:], strict=False) if b.depth <= a.depth)
    print(f"\ncalls receiving the query: {len(hops)} in {len(entered)} modules")
    for module, n in entered.most_common():
        print(f"  {n:3d}  {module}")
    print(f"{args.scoring_module} entered: {entered.get(args.scoring_module, 0)}")
    print(f"climbs back up: {climbs}")
    warnings = compressor.rerank_and_compress(query, list(docs), ratio=0.2)[1].warnings
    print("the cascade cut" if any("cascade" in w for w in warnings) else "no cut")


if __name__ == "__main__":
    main()
