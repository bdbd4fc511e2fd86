"""The proxy's HyDE answers to many queries, cached on disk so an interrupted run resumes.

Shared by ``fit_hyde_weight.py`` (training lists) and ``hyde_sweep.py`` (held-out sets). Answers are
the runtime's :class:`~ragattn.rerank.hyde.HypotheticalAnswers`, stored in one JSON file under a
key naming the proxy, the prompt and the token cap.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from ragattn.proxy import load_proxy
from ragattn.rerank.hyde import HYDE_INSTRUCTION, HYDE_MAX_NEW_TOKENS, HypotheticalAnswers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--proxy", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--answers", type=Path, default=Path("hyde-answers.json"))
    parser.add_argument("--instruction", default=HYDE_INSTRUCTION, help="Prompt before the query.")
    parser.add_argument("--max-new-tokens", type=int, default=HYDE_MAX_NEW_TOKENS)


def answer_all(args: argparse.Namespace, queries: Sequence[str]) -> tuple[dict[str, str], str]:
    """Every query's answer, and a line saying how many were written, at what cost, with what."""
    key = f"{args.proxy}|{args.instruction}|{args.max_new_tokens}"
    stored = json.loads(args.answers.read_text()) if args.answers.exists() else {}
    cached: dict[str, str] = stored.get(key, {})
    writer = HypotheticalAnswers(
        load_proxy(args.proxy, threads=args.threads),
        instruction=args.instruction,
        max_new_tokens=args.max_new_tokens,
    )
    started, fresh = time.perf_counter(), 0
    for query in tqdm(queries, desc="answers"):
        if query not in cached:
            cached[query] = writer(query)
            fresh += 1
            if fresh % 20 == 0:
                args.answers.write_text(json.dumps({**stored, key: cached}, indent=1))
    args.answers.write_text(json.dumps({**stored, key: cached}, indent=1))
    seconds = (time.perf_counter() - started) / max(fresh, 1)
    return cached, (
        f"{fresh} answers written at {seconds:.2f} s each "
        f"(prompt {args.instruction!r}, at most {args.max_new_tokens} tokens)"
    )
