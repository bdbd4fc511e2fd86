"""Device check for a lent accelerator: exact attention rows on the device, and CPU-vs-device
timings.

One script, no downloaded weights, a few minutes on a GPU machine (about a minute on 2 CPU cores
with ``--device cpu``):

(a) Correctness on the device. Tiny random-weight Llama and Gemma-3 models (built here, saved with
    the packaged SmolLM2 tokenizer, loaded through :func:`ragattn.load_proxy` like any local model
    directory) capture attention rows with ragattn's engine; the rows must equal transformers' eager
    ``output_attentions`` rows on the same device: within 1e-4 in fp32, and within ``BF16_TOL`` in
    bf16, while a row one position off must not. Early exit and prefix-KV reuse must give the same
    rows as a full forward.
(b) One timing table, CPU and the device in the same run: listwise ICR rerank of 20 x 128-token
    documents and attention compression of a 2,000-token context, with random-weight models of
    SmolLM2-135M's and Qwen2.5-0.5B's shape (the time of a forward does not depend on weight values;
    the vocabulary is the SmolLM2 tokenizer's, 49,152, for both).

Usage::

    python pipelines/gpu_check.py                  # auto: CUDA, then MPS, then CPU
    python pipelines/gpu_check.py --device cpu --shape smollm2-135m-shape  # the tests' run
    python pipelines/gpu_check.py --device cuda --json gpu_check.json

Exit status 0 when every check passes, 1 otherwise. The timing table's head names the device, the
CPU's ``torch.backends.cpu.get_cpu_capability()`` and its thread count.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ragattn import Compressor, Reranker, load_proxy
from ragattn.attention import HeadSet, engine_for
from ragattn.devices import dtype_name, resolve_device, resolve_dtype
from ragattn.lab.registry import compress_spec
from ragattn.proxy import Proxy, load_tokenizer

FP32_TOL = 1e-4
"""Max absolute difference of an attention probability, fp32: the capture and the eager path
reduce the same fp32 logits in a different order (SDPA kernels vs matmul + softmax)."""

BF16_TOL = 5e-2
"""bf16 bound, in probability units. Measured on CPU bf16 (AVX512, torch 2.13) over 5 seeds of both
tiny models, every layer and the prefix-KV twin, with and without ``SHARPEN``: at most 1.2e-2,
typically 2e-3 to 6e-3. No GPU was at hand when it was set; a GPU run prints its own differences.

Two sources of difference, both rounding. (1) At a layer whose queries and keys are the same bf16
tensors in both paths, eager rounds its logits to bf16 (the matmul output and the product with the
scaling, each 2**-9 relative, so ``|dL| <= |L| * 2**-8``) and its probabilities (``p * 2**-9``),
while the capture upcasts q and k and runs the softmax in fp32. A softmax moves ``p_i`` by
``p_i * |dL_i - sum_j p_j dL_j| <= 2 * p_i * max|dL|``; with the largest logit of the check prompt
about 4.5 in these models that is at most ``p * 0.035 + p * 0.002``, under 0.02 for ``p <= 0.5``.
(2) The eager reference is a separate forward: every layer's attention output is rounded to bf16 by
other kernels (eager multiplies bf16-rounded probabilities by V), so later layers' queries and keys
differ by a few bf16 steps and their logits with them; measured, the difference grows up to 6x from
layer 0 to layer 3. The bound leaves 2.5x over (1) and 4x over the largest measured difference, and
stays 5x below what a wrong row costs: a row one position off differs by 0.24 to 0.46 in these
models (the ``off-by-one row is caught`` check asserts it every run, so the bound cannot hide such
a bug)."""

SHARPEN = 6.0
"""Factor on the random query and key projections. At the default init (std 0.02) every logit is
about 0 and each row is nearly uniform (max 0.018 over 56 keys), so a row one position off would
differ by 0.017, within the bf16 bound: the check could not fail. x6 gives rows that peak at 0.2 to
0.5, like a trained model's. Gemma 3 normalizes q and k (QK-norm), so it peaks without it."""

TEXT = (
    "The Eiffel Tower is in Paris. Bananas grow in tropical climates. "
    "The stock market fell on Monday. Question: where is the Eiffel Tower? Answer:"
)


@dataclass(frozen=True, slots=True)
class Check:
    """One correctness check: the largest absolute difference (probability units) and its bound;
    ``must_exceed`` checks are the other way round (a deliberately wrong row must be caught)."""

    model: str
    device: str
    dtype: str
    what: str
    max_abs_diff: float
    tolerance: float
    must_exceed: bool = False

    @property
    def ok(self) -> bool:
        if self.must_exceed:
            return self.max_abs_diff > self.tolerance
        return self.max_abs_diff <= self.tolerance

    @property
    def bound(self) -> str:
        return f"{'>' if self.must_exceed else '<='} {self.tolerance:g}"


@dataclass(frozen=True, slots=True)
class Timing:
    """Median seconds of one workload (distinct inputs each run) on one device."""

    shape: str
    workload: str
    device: str
    dtype: str
    median_s: float
    runs: int


def _tokenizer() -> Any:
    """The packaged SmolLM2 tokenizer (from the dequantized GGUF cache; no hub, no weights)."""
    return load_tokenizer("smollm2-135m")


def _save_random(
    config: Any,
    tokenizer: Any,
    folder: Path,
    *,
    seed: int = 0,
    sharpen: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> Path:
    """A random-weight model of ``config`` saved as a local model directory (safetensors in
    ``dtype``; the timing models use bf16, half the bytes to write and read, and are loaded in
    the dtype each side runs)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    if sharpen != 1.0:
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith(("q_proj.weight", "k_proj.weight")):
                    param.mul_(sharpen)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_configs(vocab: int) -> dict[str, Any]:
    """Tiny random-weight configurations: a Llama (GQA) and a Gemma-3 with sliding layers whose
    window (16 tokens) is shorter than the check prompt, plus its global layers."""
    from transformers import Gemma3TextConfig, LlamaConfig

    llama = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
    )
    gemma = Gemma3TextConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        query_pre_attn_scalar=16,
        sliding_window=16,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        max_position_embeddings=1024,
    )
    return {"tiny-llama": llama, "tiny-gemma3": gemma}


def _eager_rows(proxy: Proxy, ids: list[int], rows: list[int]) -> torch.Tensor:
    model = proxy.model
    implementation = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([ids], device=proxy.device), output_attentions=True)
    finally:
        model.set_attn_implementation(implementation)
    return torch.cat([a[0][:, rows, :].float() for a in out.attentions], dim=0)


def check_rows(name: str, folder: Path, device: str, dtype: str) -> list[Check]:
    """Captured rows against eager ``output_attentions`` on ``device`` in ``dtype``; early exit and
    prefix-KV reuse against a full forward; the sliding window; and that a wrong row is caught."""
    proxy = load_proxy(str(folder), device=device, dtype=dtype)
    where = str(proxy.device)
    tol = FP32_TOL if dtype == "float32" else BF16_TOL
    ids = list(proxy.tokenizer(TEXT * 2).input_ids)
    rows = list(range(len(ids) - 6, len(ids)))
    heads = HeadSet.all(proxy.num_layers, proxy.num_heads)
    engine = engine_for(proxy)
    cap = engine.capture(ids, rows, heads, reduce="none")
    if cap.weights.device != proxy.device:
        raise AssertionError(f"captured rows are on {cap.weights.device}, not {proxy.device}")
    ref = _eager_rows(proxy, ids, rows)

    def diff(a: torch.Tensor, b: torch.Tensor) -> float:
        return float((a - b).abs().max())

    checks = [Check(name, where, dtype, "rows = eager", diff(cap.weights, ref), tol)]
    off_by_one = _eager_rows(proxy, ids, [r - 1 for r in rows])
    checks.append(
        Check(
            name,
            where,
            dtype,
            "off-by-one row is caught",
            diff(cap.weights, off_by_one),
            tol,
            must_exceed=True,
        )
    )
    subset = HeadSet(((1, 0), (1, 3)))
    early = engine.capture(ids, rows, subset, reduce="mean", early_exit=True)
    full = engine.capture(ids, rows, subset, reduce="mean", early_exit=False)
    checks.append(
        Check(name, where, dtype, "early exit = full", diff(early.weights, full.weights), 0.0)
    )
    cut = len(ids) - 8
    shared = engine.capture_shared_prefix(ids[:cut], [(ids[cut:], rows)], heads, reduce="none")[0]
    checks.append(
        Check(name, where, dtype, "prefix-KV reuse = full", diff(shared.weights, cap.weights), tol)
    )
    window = proxy.layer_geometry()[0].sliding_window
    if window:
        outside = float(cap.weights[: proxy.num_heads, -1, : len(ids) - window].abs().max())
        checks.append(Check(name, where, dtype, "sliding window masked", outside, 0.0))
    return checks


def shape_configs(vocab: int) -> dict[str, Any]:
    """Random-weight models of the two proxies' shapes (layers, heads, widths as published)."""
    from transformers import LlamaConfig, Qwen2Config

    smollm2 = LlamaConfig(
        vocab_size=vocab,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        max_position_embeddings=8192,
        rope_theta=100000.0,
        tie_word_embeddings=True,
    )
    qwen = Qwen2Config(
        vocab_size=vocab,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
    )
    return {"smollm2-135m-shape": smollm2, "qwen2.5-0.5b-shape": qwen}


_WORDS = (
    "river",
    "city",
    "museum",
    "tower",
    "bridge",
    "harbour",
    "garden",
    "market",
    "station",
    "library",
    "theatre",
    "castle",
    "forest",
    "mountain",
    "valley",
    "island",
    "bay",
    "coast",
    "lake",
    "field",
    "school",
    "hospital",
    "church",
    "square",
    "palace",
)


def _document(tokenizer: Any, seed: int, n_tokens: int) -> str:
    """A text of about ``n_tokens`` tokens, different for every seed (no cache can serve it)."""
    words, k = [], seed
    while len(tokenizer(" ".join(words)).input_ids) < n_tokens:
        k = (k * 1103515245 + 12345) % 2**31
        words.append(_WORDS[k % len(_WORDS)] + ("." if k % 11 == 0 else ""))
    return " ".join(words)


def _synchronize(device: torch.device) -> None:
    """Wait for the device's queued kernels, so a timing covers the work, not its launch."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_shape(
    shape: str, folder: Path, device: str, dtype: str, runs: int, tokenizer: Any
) -> list[Timing]:
    """Median seconds of rerank (listwise ICR, 20 x 128 tokens) and compression (attention-raw,
    10 x 200 = 2,000 tokens) with the model in ``folder`` on ``device``; new texts every run."""
    proxy = load_proxy(str(folder), device=device, dtype=dtype)
    reranker = Reranker(proxy, method="icr")
    compressor = Compressor(proxy, method=compress_spec("attention-raw"))

    def rerank_inputs(run: int, n: int = 20) -> tuple[str, list[str]]:
        docs = [_document(tokenizer, 1000 * run + i, 128) for i in range(n)]
        return f"which place has a tower, case {run}?", docs

    def compress_inputs(run: int, n: int = 10) -> tuple[str, list[str]]:
        docs = [_document(tokenizer, 7000 * run + i, 200) for i in range(n)]
        return f"where is the market, case {run}?", docs

    def rerank(query: str, docs: list[str]) -> None:
        reranker.rerank(query, docs)

    def compress(query: str, docs: list[str]) -> None:
        compressor.compress(query, docs, ratio=0.3)

    out = []
    workloads = (
        ("rerank 20 x 128 tokens (icr)", rerank_inputs, rerank),
        ("compress 2,000 tokens", compress_inputs, compress),
    )
    for workload, make, fn in workloads:
        # Warm-up (kernels, allocator, cuBLAS handles): the full workload on an accelerator, a
        # small one on the CPU, whose kernels need no warming and whose time CI pays.
        fn(*make(-1, **({} if proxy.device.type != "cpu" else {"n": 2})))
        seconds = []
        for run in range(runs):
            query, docs = make(run)  # new texts each run, built before the clock starts
            _synchronize(proxy.device)
            started = time.perf_counter()
            fn(query, docs)
            _synchronize(proxy.device)
            seconds.append(time.perf_counter() - started)
        out.append(
            Timing(
                shape,
                workload,
                str(proxy.device),
                dtype_name(proxy.dtype),
                statistics.median(seconds),
                runs,
            )
        )
    return out


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple MPS"
    return f"CPU ({torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads)"


def _print_checks(checks: list[Check]) -> None:
    print("\n| model | device | dtype | check | max abs diff | bound | ok |")
    print("|---|---|---|---|---|---|---|")
    for c in checks:
        print(
            f"| {c.model} | {c.device} | {c.dtype} | {c.what} | {c.max_abs_diff:.2e} | "
            f"{c.bound} | {'yes' if c.ok else 'NO'} |"
        )


def _print_timings(timings: list[Timing], device: torch.device) -> None:
    print(
        f"\n{_device_name(device)}; cpu capability {torch.backends.cpu.get_cpu_capability()}, "
        f"{torch.get_num_threads()} CPU threads"
    )
    print("| shape | workload | device | dtype | median s | runs |")
    print("|---|---|---|---|---|---|")
    for t in timings:
        print(
            f"| {t.shape} | {t.workload} | {t.device} | {t.dtype} | {t.median_s:.3f} | {t.runs} |"
        )
    for t in timings:
        if t.device == "cpu":
            continue
        base = next(
            c
            for c in timings
            if c.device == "cpu" and c.shape == t.shape and c.workload == t.workload
        )
        print(f"speed-up {t.shape} / {t.workload}: {base.median_s / t.median_s:.1f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per workload (median)")
    parser.add_argument("--cpu-runs", type=int, default=1, help="timed runs on the CPU side")
    parser.add_argument("--no-timing", action="store_true", help="correctness checks only")
    parser.add_argument("--json", type=Path, help="write checks and timings as JSON here")
    parser.add_argument(
        "--shape",
        action="append",
        dest="shapes",
        help="time only this shape (repeatable; default every shape: "
        "smollm2-135m-shape, qwen2.5-0.5b-shape)",
    )
    args = parser.parse_args(argv)

    device = resolve_device(args.device)
    print(f"device: {device} = {_device_name(device)}")
    print(f"torch {torch.__version__}, cpu capability {torch.backends.cpu.get_cpu_capability()}")
    tokenizer = _tokenizer()
    vocab = len(tokenizer)
    checks: list[Check] = []
    timings: list[Timing] = []
    with tempfile.TemporaryDirectory(prefix="ragattn-gpu-check-") as tmp:
        for name, config in tiny_configs(vocab).items():
            folder = _save_random(config, tokenizer, Path(tmp) / name, sharpen=SHARPEN)
            for dtype in ("float32", "bfloat16"):
                checks += check_rows(name, folder, str(device), dtype)
        _print_checks(checks)
        if not args.no_timing:
            sides = [("cpu", "float32", args.cpu_runs)]
            if device.type != "cpu":
                sides.append((str(device), dtype_name(resolve_dtype("auto", device)), args.runs))
            shapes = shape_configs(vocab)
            if unknown := set(args.shapes or ()) - set(shapes):
                parser.error(f"unknown shape {sorted(unknown)}; valid: {', '.join(shapes)}")
            for shape, config in shapes.items():
                if args.shapes and shape not in args.shapes:
                    continue
                folder = _save_random(config, tokenizer, Path(tmp) / shape, dtype=torch.bfloat16)
                for side, dtype, runs in sides:
                    timings += time_shape(shape, folder, side, dtype, runs, tokenizer)
                shutil.rmtree(folder)  # 1 GB for the Qwen shape
            _print_timings(timings, device)
    if args.json:
        payload = {
            "device": str(device),
            "device_name": _device_name(device),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "checks": [asdict(c) | {"ok": c.ok} for c in checks],
            "timings": [asdict(t) for t in timings],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    failed = [c for c in checks if not c.ok]
    print(f"\nchecks within their bounds: {len(checks) - len(failed)} of {len(checks)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
