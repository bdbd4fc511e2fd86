"""The one read at production shape: its seconds beside the two-pass flow and MiniLM's rerank alone,
in one run (issue 50 item 3; the rule is in docs/research/context.md §1).

Inputs, each a distinct question with candidates no other timed call read:

- ``20x128``, ``50x128``, ``100x128``: HotpotQA fullwiki paragraphs (about 128 proxy tokens each),
  the paragraphs of ``n / 10`` consecutive questions with the first one's question;
- ``scifact-20``: SciFact test claims over their BM25 top-20 abstracts (about 350 tokens each).

For each input every system runs once, in turn (the reads take turns going first), with MiniLM's
embedding LRU and the sentence splits' LRU cleared before each call (cold, never a cache hit); the
first input of each shape is an untimed warm-up. Systems:

- ``read:NAME``: ``Compressor(proxy, cascade=SPEC).rerank_and_compress(query, candidates, BUDGET)``
  for each ``--read NAME=SPEC`` (``default``: the library's default read);
- ``two-pass``: ``Reranker()`` (MiniLM) over every candidate, then ``Compressor().compress`` of the
  best five at ratio 0.5 (the pipeline's ``flow="two_pass"``);
- ``minilm-rerank``: ``Reranker()`` over every candidate, nothing else (what the read replaces).

Each read's stages (``CompressionResult.stage_seconds``: sentences, candidates, cut, forward, ...)
are printed as medians under its shape's table, to show where its seconds go: ``candidates`` is
MiniLM's pass over every candidate, to set beside ``minilm-rerank``.

Medians over the inputs are printed as a Markdown table with the CPU capability and threads:
seconds, the ratio to the two-pass flow and to MiniLM's rerank, and seconds per 1,000 candidate
tokens (proxy tokens, no special tokens).

    python pipelines/bench_read.py --threads 2                       # the issue's table
    python pipelines/bench_read.py --read old=0.8:lexical+links@1024 --read default
    python pipelines/bench_read.py --shape 20x128 --queries 2        # a smoke run
    python pipelines/bench_read.py --embed-dtype float32 --embed-dtype auto   # MiniLM in bf16 too
    python pipelines/bench_read.py --embed-short-batch 128 --embed-short-batch 512   # two widths
    python pipelines/bench_read.py --one-proxy   # with and without the choice of proxy by language
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ragattn.compress import Compressor
from ragattn.compress.cascade import DEFAULT_CASCADE, Cascade
from ragattn.embed import shared_embedder, use_embed_dtype
from ragattn.lab.evaluation.datasets import fullwiki_paragraph_sets, load_scifact_retrieved
from ragattn.lab.timing import runtime_info, runtime_line
from ragattn.proxy import load_proxy
from ragattn.rerank import Reranker
from ragattn.sentences import clear_split_cache
from ragattn.types import Budget, Document

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SHAPES = ("20x128", "50x128", "100x128", "scifact-20")
Input = tuple[str, list[Document]]


def scifact_inputs(data: Path, n_inputs: int) -> list[Input]:
    """SciFact test claims over their BM25 top-20 abstracts (titled)."""
    examples = load_scifact_retrieved(data / "scifact", "test", 20, n_inputs)
    return [
        (ex.question, [Document(text=p.text, title=p.title or None) for p in ex.passages])
        for ex in examples
    ]


def inputs_of(shape: str, data: Path, n_inputs: int) -> list[Input]:
    if shape == "scifact-20":
        return scifact_inputs(data, n_inputs)
    n = int(shape.split("x")[0])
    # 100 candidates take 10 questions an input: each shape starts past the others' questions
    fullwiki = data / "hotpotqa" / "hotpot_dev_fullwiki_v1.shared.json"
    return fullwiki_paragraph_sets(fullwiki, n, n_inputs, skip=300 + 60 * SHAPES.index(shape))


def parse_read(value: str) -> tuple[str, Cascade | None]:
    """``NAME=SPEC`` (a :meth:`Cascade.parse` spec with ``min_room`` 1.5, or ``none``), or
    ``default`` for the library's default read."""
    if value == "default":
        return "default", DEFAULT_CASCADE
    name, _, spec = value.partition("=")
    if not spec:
        raise argparse.ArgumentTypeError(f"--read {value!r}: give NAME=SPEC or default")
    return name, None if spec == "none" else Cascade.parse(spec, min_room=1.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--queries", type=int, default=5, help="timed inputs per shape")
    parser.add_argument("--shape", action="append", choices=SHAPES)
    parser.add_argument("--read", action="append", type=parse_read, help="NAME=SPEC or default")
    parser.add_argument("--ratio", type=float, default=0.2, help="the read's budget (ratio)")
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="a token ceiling on the ratio budget"
    )
    parser.add_argument(
        "--embed-dtype",
        action="append",
        choices=("float32", "auto", "bfloat16"),
        help="MiniLM's weights (repeat to time each, alternating input by input; default float32)",
    )
    parser.add_argument(
        "--embed-short-batch",
        action="append",
        type=int,
        help="MiniLM's tokens a forward for short texts (Embedder.short_batch_tokens; repeat to "
        "time each, alternating input by input; default the embedder's)",
    )
    parser.add_argument(
        "--one-proxy",
        action="store_true",
        help="also time each read with no choice of proxy by language (Compressor(multilingual="
        "None), the read before issue 61), as read:NAME:one-proxy",
    )
    parser.add_argument("--data-dir", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, help="also write the medians as JSON")
    args = parser.parse_args()
    proxy = load_proxy("smollm2-135m", threads=args.threads)
    dtypes = args.embed_dtype or ["float32"]
    widths: list[int | None] = list(args.embed_short_batch or [None])
    variants = [(dtype, width) for dtype in dtypes for width in widths]

    def use(variant: tuple[str, int | None]) -> str:
        """Switch MiniLM to ``variant`` (dtype, short batch); its tag in the table's names."""
        dtype, width = variant
        use_embed_dtype(dtype)
        if width is not None:
            shared_embedder().short_batch_tokens = width
        parts = [f"MiniLM {dtype}"] if len(dtypes) > 1 else []
        parts += [f"short batch {width}"] if len(widths) > 1 else []
        return f" ({', '.join(parts)})" if parts else ""

    for dtype in dtypes:
        use_embed_dtype(dtype)
        print(runtime_line(runtime_info(proxy)))
    reads = dict(args.read or [parse_read("default")])
    compressors = {name: Compressor(proxy, cascade=cascade) for name, cascade in reads.items()}
    if args.one_proxy:
        compressors.update(
            {
                f"{name}:one-proxy": Compressor(proxy, cascade=cascade, multilingual=None)
                for name, cascade in reads.items()
            }
        )
    reranker, two_pass = Reranker(proxy), Compressor(proxy)
    tokenizer = proxy.tokenizer
    budget = budget_of(args.ratio, args.max_tokens)

    def timed(call: Callable[..., object], *args: object, **kwargs: object) -> float:
        return timed_result(call, *args, **kwargs)[0]

    def timed_result(
        call: Callable[..., Any], *args: object, **kwargs: object
    ) -> tuple[float, Any]:
        shared_embedder().clear_cache()
        clear_split_cache()
        start = time.perf_counter()
        result = call(*args, **kwargs)
        return time.perf_counter() - start, result

    def two_pass_call(query: str, docs: list[Document]) -> None:
        ranked = reranker.rerank(query, docs, top_n=5)
        two_pass.compress(query, [docs[r.index] for r in ranked], ratio=0.5)

    table: dict[str, dict[str, float]] = {}
    for shape in args.shape or list(SHAPES):
        warm, *timed_inputs = inputs_of(shape, args.data_dir, args.queries + 1)
        for variant in variants:
            use(variant)
            for compressor in compressors.values():
                compressor.rerank_and_compress(warm[0], warm[1], budget=budget)
            two_pass_call(*warm)
        seconds: dict[str, list[float]] = {}
        stages: dict[str, dict[str, list[float]]] = {}
        tokens: list[int] = []
        for n_input, (query, docs) in enumerate(timed_inputs):
            tokens.append(
                sum(
                    len(ids)
                    for ids in tokenizer([d.text for d in docs], add_special_tokens=False)[
                        "input_ids"
                    ]
                )
            )
            for variant in variants:
                tag = use(variant)
                # The reads take turns going first: the first call on a new input shape pays for
                # kernels and buffers of that shape, which the next call on it reuses.
                names = list(compressors)
                turn = n_input % len(names)
                for name in names[turn:] + names[:turn]:
                    compressor = compressors[name]
                    read = partial(compressor.rerank_and_compress, budget=budget)
                    took, (_, compressed) = timed_result(read, query, docs)
                    seconds.setdefault(f"read:{name}{tag}", []).append(took)
                    for stage, stage_s in compressed.stage_seconds:
                        stages.setdefault(f"read:{name}{tag}", {}).setdefault(stage, []).append(
                            stage_s
                        )
                seconds.setdefault(f"two-pass{tag}", []).append(timed(two_pass_call, query, docs))
                seconds.setdefault(f"minilm-rerank{tag}", []).append(
                    timed(reranker.rerank, query, docs)
                )
        medians = {name: statistics.median(values) for name, values in seconds.items()}
        medians["candidate_tokens"] = statistics.median(tokens)
        table[shape] = medians
        print_shape(shape, medians, len(timed_inputs))
        for name, by_stage in stages.items():
            print(
                f"{name} stages, median s: "
                + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in by_stage.items())
            )
    if args.out:
        args.out.write_text(json.dumps(table, indent=2))


def budget_of(ratio: float, max_tokens: int | None) -> Budget:
    """The read's budget: a ratio, with a token ceiling if given."""
    return Budget(kind="ratio", value=ratio, max_tokens=max_tokens)


def print_shape(shape: str, medians: dict[str, float], n: int) -> None:
    """One shape's table; each system's ratios are to the two-pass flow and MiniLM's rerank run
    with the same MiniLM variant (its name's ``(MiniLM ..., short batch ...)`` tag)."""
    per_k = medians["candidate_tokens"] / 1000
    print(
        f"\n{shape}: medians of {n} inputs, {medians['candidate_tokens']:.0f} candidate tokens\n"
        "| system | s | x two-pass | x MiniLM rerank | s / 1,000 candidate tokens |\n"
        "|---|---|---|---|---|"
    )
    for name, value in medians.items():
        if name == "candidate_tokens":
            continue
        tag = name[name.index(" (") :] if " (" in name else ""
        two, rerank = medians[f"two-pass{tag}"], medians[f"minilm-rerank{tag}"]
        print(
            f"| {name} | {value:.2f} | {value / two:.2f}x | {value / rerank:.2f}x | "
            f"{value / per_k:.2f} |"
        )


if __name__ == "__main__":
    main()
