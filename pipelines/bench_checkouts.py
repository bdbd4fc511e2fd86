"""The default read of several checkouts timed side by side in one run (issue 62 item 5).

Each ``--checkout NAME=PATH`` (a git worktree of this repository, e.g. made with
``git worktree add /tmp/ck-e005e96 e005e96``) gets one worker process: this venv's python with
``PYTHONPATH=PATH``, so it imports PATH's own ``ragattn`` (checked, and printed). A worker loads the
packaged proxy once and answers JSON lines ``{query, documents, ratio, max_tokens?}`` with
``{seconds, compressed_tokens, stage_seconds?}``: one ``Compressor(proxy).rerank_and_compress`` with
MiniLM's embedding LRU and the sentence splits' LRU cleared before it (cold, never a cache hit).

The inputs are built once, here, from this tree's ``pipelines/bench_read.py`` (``20x128``,
``50x128``, ``100x128``: HotpotQA fullwiki paragraphs; ``scifact-20``: SciFact abstracts), titled
as there or plain (the same texts, no titles), and sent to every worker, so every checkout reads
the same inputs. Per shape, one untimed warm-up input per checkout, then each timed input goes to
every checkout in turn, the first checkout rotating input by input (order effects cancel).

The budget is the front doors' (ratio 0.2, at most ``DEFAULT_MAX_CONTEXT_TOKENS``); a checkout
whose ``Budget`` has no ``max_tokens`` (before the ceiling existed, e.g. e005e96) reads at the
ratio alone, says so, and its compressed tokens then differ where the ceiling binds.

    python pipelines/bench_checkouts.py --checkout e005e96=/tmp/ck-e005e96 \\
        --checkout today=/tmp/ck-2200ffd --checkout new=/work/main --threads 2   # the issue's run
    python pipelines/bench_checkouts.py --checkout old=/tmp/ck-e005e96 --checkout new=/work/main \\
        --shape 20x128 --titled --queries 1                                        # a smoke run

The issue's run takes about 10-12 minutes on 2 free cores (96 reads: 4 shapes, titled and plain,
a warm-up and 3 timed inputs, 3 checkouts). For the AVX2 numbers on an AVX-512 CPU, prefix it with
``ATEN_CPU_CAPABILITY=avx2`` (the workers inherit it; the table's header prints the capability).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

TITLINGS = ("titled", "plain")


def _clear_caches() -> None:
    """Forget MiniLM's vectors and the sentence splits (older checkouts: whichever exists)."""
    import ragattn.sentences as sentences
    from ragattn.embed import shared_embedder

    shared_embedder().clear_cache()
    clear = getattr(sentences, "clear_split_cache", None)
    if clear is None:  # before clear_split_cache: the bare lru_cache
        clear = getattr(getattr(sentences, "_split_cached", None), "cache_clear", None)
    if clear is not None:
        clear()


def worker(root: str, threads: int) -> None:
    """Serve timed reads on stdin/stdout until stdin closes; stdout carries only the replies."""
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything the library prints goes to stderr, not into the replies
    sys.stdout = sys.stderr
    import torch

    import ragattn
    from ragattn.compress import Compressor
    from ragattn.proxy import load_proxy
    from ragattn.types import Budget, Document

    where = Path(ragattn.__file__).resolve()
    if not where.is_relative_to(Path(root).resolve()):
        raise SystemExit(f"worker for {root} imported ragattn from {where}")
    torch.set_num_threads(threads)
    compressor = Compressor(load_proxy("smollm2-135m", threads=threads))
    has_ceiling = "max_tokens" in getattr(Budget, "__dataclass_fields__", {})
    hello = {"ragattn": str(where), "cpu": torch.backends.cpu.get_cpu_capability()}
    hello["note"] = "" if has_ceiling else "no Budget.max_tokens: ratio alone"
    proto.write(json.dumps(hello) + "\n")
    proto.flush()
    for line in sys.stdin:
        req = json.loads(line)
        docs = [Document(**d) for d in req["documents"]]
        ceiling = req.get("max_tokens") if has_ceiling else None
        kw = {"max_tokens": ceiling} if ceiling else {}
        budget = Budget(kind="ratio", value=req["ratio"], **kw)
        _clear_caches()
        start = time.perf_counter()
        out = compressor.rerank_and_compress(req["query"], docs, budget=budget)
        seconds = time.perf_counter() - start
        result = out[1] if isinstance(out, tuple) else out
        reply: dict[str, Any] = {"seconds": seconds, "compressed_tokens": result.compressed_tokens}
        if getattr(result, "stage_seconds", None):
            reply["stage_seconds"] = dict(result.stage_seconds)
        proto.write(json.dumps(reply) + "\n")
        proto.flush()


class Worker:
    """One checkout's worker process, spoken to in JSON lines with a timeout on every reply."""

    def __init__(self, name: str, path: Path, threads: int, timeout: float) -> None:
        self.name, self.path, self.timeout = name, path, timeout
        env = dict(os.environ, PYTHONPATH=str(path))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(path), str(threads)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, cwd=path
        )
        self.hello: dict[str, str] = {}

    def read(self, timeout: float | None = None) -> dict[str, Any]:
        stdout: IO[str] = self.proc.stdout  # type: ignore[assignment]
        ready, _, _ = select.select([stdout], [], [], timeout or self.timeout)
        line = stdout.readline() if ready else ""
        if not line:
            raise SystemExit(f"worker {self.name} ({self.path}) gave no reply (exit or timeout)")
        return dict(json.loads(line))

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        stdin: IO[str] = self.proc.stdin  # type: ignore[assignment]
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def commit_of(path: Path) -> str:
    """The short commit checked out at ``path``, ``+dirty`` with uncommitted tracked changes."""
    git = ["git", "-C", str(path)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    return head.stdout.strip() + ("+dirty" if dirty else "")


def cpu_name() -> str:
    """The CPU's model name, from ``/proc/cpuinfo`` (Linux)."""
    info = Path("/proc/cpuinfo")
    names = [line for line in info.read_text().splitlines() if line.startswith("model name")]
    return names[0].split(":", 1)[1].strip() if names else "unknown CPU"


def checkout_arg(value: str) -> tuple[str, Path]:
    name, _, path = value.partition("=")
    if not name or not path or not (Path(path) / "ragattn").is_dir():
        raise argparse.ArgumentTypeError(f"--checkout {value!r}: give NAME=PATH of a worktree")
    return name, Path(path).resolve()


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    from bench_read import DATA, SHAPES, inputs_of

    from ragattn.types import DEFAULT_MAX_CONTEXT_TOKENS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", type=checkout_arg, required=True)
    parser.add_argument("--shape", action="append", choices=SHAPES)
    parser.add_argument("--titled", dest="titling", action="append_const", const="titled")
    parser.add_argument("--plain", dest="titling", action="append_const", const="plain")
    parser.add_argument("--queries", type=int, default=3, help="timed inputs per shape")
    parser.add_argument("--threads", type=int, default=2, help="torch threads in each worker")
    parser.add_argument("--ratio", type=float, default=0.2)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_CONTEXT_TOKENS,
        help="the ratio's token ceiling (0: none)",
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds a reply may take")
    parser.add_argument("--data-dir", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, help="also write the medians and seconds as JSON")
    args = parser.parse_args()
    checkouts: list[tuple[str, Path]] = args.checkout
    names = [name for name, _ in checkouts]
    if len(set(names)) != len(names):
        parser.error("--checkout names must differ")
    workers = [Worker(name, path, args.threads, args.timeout) for name, path in checkouts]
    try:
        for w in workers:
            w.hello = {k: str(v) for k, v in w.read(timeout=max(args.timeout, 900)).items()}
        header = {
            "cpu": cpu_name(),
            "capability": torch.backends.cpu.get_cpu_capability(),
            "threads": args.threads,
            "ratio": args.ratio,
            "max_tokens": args.max_tokens,
            "checkouts": {
                w.name: {"path": str(w.path), "commit": commit_of(w.path), **w.hello}
                for w in workers
            },
        }
        print(
            f"CPU: {header['cpu']} ({header['capability']}), torch threads {args.threads}, "
            f"budget ratio {args.ratio}, max_tokens {args.max_tokens or 'none'}"
        )
        for name, info in header["checkouts"].items():
            note = f" [{info['note']}]" if info["note"] else ""
            where = f"ragattn {info['ragattn']} ({info['cpu']})"
            print(f"- {name}: {info['commit']} at {info['path']}, {where}{note}")
        rows = run(workers, args, inputs_of)
    finally:
        for w in workers:
            w.close()
    print_table(rows, names)
    if args.out:
        args.out.write_text(json.dumps({**header, "rows": rows}, indent=2))


def requests_of(inputs: Any, titles: str, base: dict[str, Any]) -> list[dict[str, Any]]:
    """The workers' requests for ``inputs``: documents as ``{text, title?}``, titled or plain."""
    return [
        {**base, "query": query, "documents": [
            {"text": d.text, **({"title": d.title} if titles == "titled" and d.title else {})}
            for d in docs
        ]}
        for query, docs in inputs
    ]  # fmt: skip


def run(workers: list[Worker], args: argparse.Namespace, inputs_of: Any) -> list[dict[str, Any]]:
    """Every shape and titling: warm each worker once, then the timed inputs, alternating."""
    rows = []
    base = {"ratio": args.ratio, **({"max_tokens": args.max_tokens} if args.max_tokens else {})}
    for shape in args.shape or ["20x128", "50x128", "100x128", "scifact-20"]:
        inputs = inputs_of(shape, args.data_dir, args.queries + 1)
        for titles in dict.fromkeys(args.titling or TITLINGS):
            warm, *requests = requests_of(inputs, titles, base)
            for w in workers:
                w.call(warm)
            seconds: dict[str, list[float]] = {w.name: [] for w in workers}
            stages: dict[str, dict[str, list[float]]] = {w.name: {} for w in workers}
            tokens: list[dict[str, int]] = []
            for i, request in enumerate(requests):
                turn = workers[i % len(workers) :] + workers[: i % len(workers)]
                replies = {w.name: w.call(request) for w in turn}
                for name, reply in replies.items():
                    seconds[name].append(reply["seconds"])
                    for stage, took in reply.get("stage_seconds", {}).items():
                        stages[name].setdefault(stage, []).append(took)
                tokens.append({w.name: replies[w.name]["compressed_tokens"] for w in workers})
                took = ", ".join(f"{n} {r['seconds']:.2f}s" for n, r in replies.items())
                print(f"{shape} {titles} input {i}: {took}", flush=True)
            rows.append({
                "shape": shape, "titles": titles, "inputs": len(tokens), "seconds": seconds,
                "median_seconds": {n: statistics.median(v) for n, v in seconds.items()},
                "stage_median_seconds": {n: {k: statistics.median(v) for k, v in by.items()}
                                         for n, by in stages.items()},
                "compressed_tokens": tokens,
                "tokens_agree": sum(len(set(t.values())) == 1 for t in tokens),
            })  # fmt: skip
    return rows


def print_table(rows: list[dict[str, Any]], names: list[str]) -> None:
    """The medians as Markdown, each checkout's ratio to the first; then the stages, and the
    inputs whose compressed tokens differ between checkouts."""
    ratios = "".join(f" {n} / {names[0]} |" for n in names[1:])
    print(f"\n| shape | titles |{''.join(f' {n} s |' for n in names)}{ratios} tokens agree |")
    print("|" + "---|" * (2 * len(names) + 2))
    for row in rows:
        med = row["median_seconds"]
        cells = [f"{med[n]:.2f}" for n in names]
        cells += [f"{med[n] / med[names[0]]:.2f}x" for n in names[1:]]
        agree = f"{row['tokens_agree']}/{row['inputs']}"
        print(f"| {row['shape']} | {row['titles']} | {' | '.join(cells)} | {agree} |")
    for row in rows:
        for name, by_stage in row["stage_median_seconds"].items():
            if by_stage:
                took = ", ".join(f"{k} {v:.2f}" for k, v in by_stage.items())
                print(f"{row['shape']} {row['titles']} {name} stages, median s: {took}")
        for i, tokens in enumerate(row["compressed_tokens"]):
            if len(set(tokens.values())) > 1:
                print(f"{row['shape']} {row['titles']} input {i}: compressed tokens {tokens}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]))
    else:
        main()
