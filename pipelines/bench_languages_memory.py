"""What a second proxy costs the service: start-up, memory and the first call not in English.

Starts the real service (``python -m ragattn_api.server``) as a subprocess, once with the default
``RAGATTN_MULTILINGUAL_PROXY=auto`` (SmolLM2-135M reads English, Gemma-3-270M every other
language, loaded on the first such call) and once with ``none`` (SmolLM2 reads every language),
and measures in each, in turn:

- ``ready``: seconds from the process's start to ``/ready`` 200 (the load, the warm-up, the
  request budget's measurement, every method built), then the resident memory;
- ``english``: one English ``/v1/compress`` (seconds, then memory);
- ``german-1``: one German ``/v1/compress``; with ``auto`` it pays Gemma's load (seconds, memory);
- ``german-2``: a second, different German ``/v1/compress`` (seconds, memory).

Memory is the RSS of the server's process tree (psutil), in MiB. Every input is distinct and the
response cache is off (``RAGATTN_CACHE_BACKEND=none``), so nothing is a cache hit. The proxies'
load lines of the server's log (``proxy ... loaded on ... in S s``) are kept beside the numbers:
a first Gemma load on a machine also dequantizes its GGUF weights into the proxy cache folder,
which later loads read.

    python pipelines/bench_languages_memory.py --out /tmp/languages_memory.json
    # writes the JSON and a Markdown table beside it (/tmp/languages_memory.md)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

READY_TIMEOUT_S = 900.0
CONFIGS = ("auto", "none")

ENGLISH = {
    "query": "Which river flows through the old trading town?",
    "documents": [
        "The old trading town grew up on the banks of the Weser, where merchants from the "
        "Hanseatic League unloaded grain and timber. Its market square still has the guild "
        "houses of that time.",
        "A railway line reached the town in 1862. Within twenty years the harbour had lost most of "
        "its trade to the trains.",
        "Today the town is known for its summer music festival, which fills the market square for "
        "two weeks every July.",
    ],
    "ratio": 0.4,
}
GERMAN_1 = {
    "query": "In welchem Jahr wurde die Brücke über die Elbe eröffnet?",
    "documents": [
        "Die Stadt liegt an einem breiten Fluss und hat eine lange Geschichte als Handelsort. Im "
        "Mittelalter kamen Kaufleute aus ganz Europa auf ihre Märkte.",
        "Die neue Brücke über die Elbe wurde im Jahr 1893 eröffnet. Sie verbindet seitdem die "
        "Altstadt mit den Vierteln am anderen Ufer.",
        "Im Sommer finden im Stadtpark viele Konzerte statt. Besonders beliebt ist das Festival "
        "für Jazzmusik im August.",
        "Der Bahnhof wurde nach dem Krieg vollständig neu gebaut. Heute halten dort täglich mehr "
        "als hundert Züge.",
    ],
    "ratio": 0.3,
}
GERMAN_2 = {
    "query": "Wer hat das Rathaus der Stadt entworfen?",
    "documents": [
        "Das Rathaus wurde zwischen 1905 und 1911 nach Plänen des Architekten Heinrich Moser "
        "gebaut. Sein Turm ist 68 Meter hoch.",
        "Die Universität der Stadt hat heute mehr als zwanzigtausend Studierende. Die meisten "
        "studieren Medizin oder Rechtswissenschaften.",
        "Im Winter friert der See im Norden der Stadt manchmal zu. Dann laufen viele Menschen "
        "dort Schlittschuh.",
        "Die Straßenbahn fährt seit 1881 durch die Innenstadt. Zuerst wurden die Wagen von "
        "Pferden gezogen.",
    ],
    "ratio": 0.3,
}
STEPS = (("english", ENGLISH), ("german-1", GERMAN_1), ("german-2", GERMAN_2))
_LOADED = re.compile(r"proxy (\S+) loaded on (\S+) \((\S+)\) in ([\d.]+) s")


@dataclass
class Step:
    """One measured step: its seconds, the server tree's RSS after it (MiB), and for a request
    the tokenizer that counted its tokens and its token counts."""

    name: str
    seconds: float
    rss_mib: float
    tokenizer: str | None = None
    origin_tokens: int | None = None
    compressed_tokens: int | None = None


@dataclass
class Run:
    """One server's start and requests under one ``RAGATTN_MULTILINGUAL_PROXY``."""

    multilingual_proxy: str
    steps: list[Step] = field(default_factory=list)
    proxies_after: dict[str, Any] | None = None
    loads: list[dict[str, Any]] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree_rss_mib(pid: int) -> float:
    """Resident memory of the process and its children, MiB."""
    root = psutil.Process(pid)
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 2**20


def _wait_ready(c: httpx.Client, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited:\n{log.read_text(errors='replace')[-4000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"/ready did not answer 200 in {READY_TIMEOUT_S:.0f} s")
        try:
            if c.get("/ready").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)


def _loads(log: Path) -> list[dict[str, Any]]:
    """The proxies' load lines of the server's log."""
    return [
        {"proxy": m[1], "device": m[2], "dtype": m[3], "seconds": float(m[4])}
        for m in _LOADED.finditer(log.read_text(errors="replace"))
    ]


def measure(multilingual: str, threads: int, workdir: Path) -> Run:
    """Start the service under ``multilingual``, time /ready and the three requests."""
    port = _free_port()
    log = workdir / f"server-{multilingual}.log"
    env = {
        **os.environ,
        "RAGATTN_HOST": "127.0.0.1",
        "RAGATTN_PORT": str(port),
        "RAGATTN_THREADS": str(threads),
        "RAGATTN_CACHE_BACKEND": "none",
        "RAGATTN_LOG_LEVEL": "INFO",
        "RAGATTN_MULTILINGUAL_PROXY": multilingual,
    }
    run = Run(multilingual_proxy=multilingual)
    started = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragattn_api.server"], env=env, stdout=out, stderr=out
        )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as c:
            _wait_ready(c, proc, log)
            ready = time.perf_counter() - started
            run.steps.append(Step("ready", ready, _tree_rss_mib(proc.pid)))
            for name, body in STEPS:
                t0 = time.perf_counter()
                resp = c.post("/v1/compress", json=body)
                seconds = time.perf_counter() - t0
                resp.raise_for_status()
                out_body = resp.json()
                run.steps.append(
                    Step(
                        name,
                        seconds,
                        _tree_rss_mib(proc.pid),
                        tokenizer=out_body["tokenizer"],
                        origin_tokens=out_body["origin_tokens"],
                        compressed_tokens=out_body["compressed_tokens"],
                    )
                )
            run.proxies_after = c.get("/health").json().get("proxies")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    run.loads = _loads(log)
    return run


def markdown(runs: list[Run], capability: str, threads: int) -> str:
    """The runs as one Markdown table: a row per step, a column pair per setting."""
    header = "| step |" + "".join(
        f" {r.multilingual_proxy}: s | {r.multilingual_proxy}: RSS MiB | "
        f"{r.multilingual_proxy}: tokenizer |"
        for r in runs
    )
    rule = "|---|" + "---:|---:|---|" * len(runs)
    rows = [header, rule]
    for i, step in enumerate(runs[0].steps):
        cells = []
        for r in runs:
            s = r.steps[i]
            cells.append(f" {s.seconds:.2f} | {s.rss_mib:.0f} | {s.tokenizer or ''} |")
        rows.append(f"| {step.name} |" + "".join(cells))
    loads = "; ".join(
        f"{r.multilingual_proxy}: "
        + ", ".join(f"{x['proxy']} {x['seconds']:.1f} s ({x['dtype']})" for x in r.loads)
        for r in runs
    )
    proxies = "; ".join(f"{r.multilingual_proxy}: {r.proxies_after}" for r in runs)
    return (
        f"CPU capability {capability}, RAGATTN_THREADS={threads}, cache off; RSS of the server's "
        f"process tree after each step.\n\n" + "\n".join(rows) + f"\n\nProxy loads (server log): "
        f"{loads}\n\n/health's proxies after the requests: {proxies}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON; the .md goes beside")
    parser.add_argument("--threads", type=int, default=2, help="RAGATTN_THREADS of the server")
    parser.add_argument(
        "--config", action="append", choices=CONFIGS, help="RAGATTN_MULTILINGUAL_PROXY (both)"
    )
    args = parser.parse_args()
    import torch

    capability = str(torch.backends.cpu.get_cpu_capability())
    print(f"torch {torch.__version__}, CPU capability {capability}", flush=True)
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-languages-") as tmp:
        for config in args.config or CONFIGS:
            print(f"RAGATTN_MULTILINGUAL_PROXY={config} ...", flush=True)
            runs.append(measure(config, args.threads, Path(tmp)))
    table = markdown(runs, capability, args.threads)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "cpu_capability": capability,
                "torch": torch.__version__,
                "threads": args.threads,
                "runs": [asdict(r) for r in runs],
            },
            indent=2,
        )
    )
    args.out.with_suffix(".md").write_text(table)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
