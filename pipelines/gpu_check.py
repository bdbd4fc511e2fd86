"""Device check for a lent accelerator: exact attention rows on the device, and CPU-vs-device timings.

One script, no downloaded weights, a few minutes on a GPU machine:

(a) Correctness on the device. Tiny random-weight Llama and Gemma-3 models (built here, saved with the
    packaged SmolLM2 tokenizer, loaded through :func:`ragattn.load_proxy` like any local model
    directory) capture attention rows with ragattn's engine; the rows must equal transformers' eager
    ``output_attentions`` rows on the same device: within 1e-4 in fp32, and within ``BF16_TOL`` in
    bf16. Early exit and prefix-KV reuse must give the same rows as a full forward.
(b) One timing table, CPU and the device in the same run: listwise ICR rerank of 20 x 128-token
    documents and attention compression of a 2,000-token context, with random-weight models of
    SmolLM2-135M's and Qwen2.5-0.5B's shape (the time of a forward does not depend on weight values;
    the vocabulary is the SmolLM2 tokenizer's, 49,152, for both).

Usage::

    python pipelines/gpu_check.py                  # auto: CUDA, then MPS, then CPU
    python pipelines/gpu_check.py --device cpu     # the same checks on the CPU (part of the tests)
    python pipelines/gpu_check.py --device cuda --json gpu_check.json

Exit status 0 when every check passes, 1 otherwise. Every timing line carries
``torch.backends.cpu.get_cpu_capability()`` and the device's name.
"""

from __future__ import annotations

import argparse
import json
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
from ragattn.proxy import Proxy, resolve_device

FP32_TOL = 1e-4
"""Max absolute difference of an attention probability, fp32: the capture and the eager path
reduce the same fp32 logits in a different order (SDPA kernels vs matmul + softmax)."""

BF16_TOL = 2e-2
"""bf16: both paths start from the same bf16 queries and keys, but eager rounds its logits and its
probabilities to bf16 (8 significand bits: a relative step of 2**-8 = 0.0039), while the capture
upcasts q and k and runs the softmax in fp32. A logit of magnitude L rounded to bf16 moves by up
to L * 2**-9, which moves a probability p by about p * L * 2**-9; with |L| <= 8 that is p/64, and
rounding p itself adds p * 2**-9. For p <= 1 both stay under 0.02; a wrong row (another head,
another position, a missing mask) differs by far more."""

TEXT = (
    "The Eiffel Tower is in Paris. Bananas grow in tropical climates. "
    "The stock market fell on Monday. Question: where is the Eiffel Tower? Answer:"
)


@dataclass(frozen=True, slots=True)
class Check:
    """One correctness check: the largest absolute difference (probability units) and its bound."""

    model: str
    device: str
    dtype: str
    what: str
    max_abs_diff: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.tolerance


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
    """The packaged SmolLM2 tokenizer (from the dequantized GGUF cache; no hub)."""
    return load_proxy("smollm2-135m", device="cpu").tokenizer


def _save_random(config: Any, tokenizer: Any, folder: Path, seed: int = 0) -> Path:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
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
            out = model(
                input_ids=torch.tensor([ids], device=proxy.device), output_attentions=True
            )
    finally:
        model.set_attn_implementation(implementation)
    return torch.cat([a[0][:, rows, :].float() for a in out.attentions], dim=0)


def check_rows(name: str, folder: Path, device: str, dtype: str) -> list[Check]:
    proxy = load_proxy(str(folder), device=device, dtype=dtype)
    tol = FP32_TOL if dtype == "float32" else BF16_TOL
    ids = list(proxy.tokenizer(TEXT * 2).input_ids)
    rows = list(range(len(ids) - 6, len(ids)))
    heads = HeadSet.all(proxy.num_layers, proxy.num_heads)
    engine = engine_for(proxy)
    cap = engine.capture(ids, rows, heads, reduce="none")
    ref = _eager_rows(proxy, ids, rows)
    checks = [
        Check(name, device, dtype, "rows = eager", (cap.weights - ref).abs().max().item(), tol)
    ]
    subset = HeadSet(((1, 0), (1, 3)))
    early = engine.capture(ids, rows, subset, reduce="mean", early_exit=True)
    full = engine.capture(ids, rows, subset, reduce="mean", early_exit=False)
    checks.append(
        Check(name, device, dtype, "early exit = full", (early.weights - full.weights).abs().max().item(), 0.0)
    )
    cut = len(ids) - 8
    shared = engine.capture_shared_prefix(ids[:cut], [(ids[cut:], rows)], heads, reduce="none")[0]
    checks.append(
        Check(name, device, dtype, "prefix-KV reuse = full", (shared.weights - cap.weights).abs().max().item(), tol)
    )
    if proxy.layer_geometry()[0].sliding_window:
        window = proxy.layer_geometry()[0].sliding_window
        outside = cap.weights[: proxy.num_heads, -1, : len(ids) - window].abs().max().item()
        checks.append(Check(name, device, dtype, "sliding window masked", outside, 0.0))
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
    "river city museum tower bridge harbour garden market station library theatre castle forest "
    "mountain valley island bay coast lake field school hospital church square palace"
).split()


def _document(tokenizer: Any, seed: int, n_tokens: int) -> str:
    """A text of about ``n_tokens`` tokens, different for every seed (no cache can serve it)."""
    words, k = [], seed
    while len(tokenizer(" ".join(words)).input_ids) < n_tokens:
        k = (k * 1103515245 + 12345) % 2**31
        words.append(_WORDS[k % len(_WORDS)] + ("." if k % 11 == 0 else ""))
    return " ".join(words)


def time_shape(
    shape: str, folder: Path, device: str, dtype: str, runs: int, tokenizer: Any
) -> list[Timing]:
    proxy = load_proxy(str(folder), device=device, dtype=dtype)
    reranker = Reranker(proxy, method="icr")
    compressor = Compressor(proxy, method="attention-raw")

    def rerank(run: int) -> None:
        docs = [_document(tokenizer, 1000 * run + i, 128) for i in range(20)]
        reranker.rerank(f"which place has a tower, case {run}?", docs)

    def compress(run: int) -> None:
        docs = [_document(tokenizer, 7000 * run + i, 200) for i in range(10)]
        compressor.compress(f"where is the market, case {run}?", docs, ratio=0.3)

    out = []
    for workload, fn in (("rerank 20 x 128 tokens (icr)", rerank), ("compress 2,000 tokens", compress)):
        fn(-1)  # warm-up: kernels, allocator
        seconds = []
        for run in range(runs):
            if proxy.device.type == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
            fn(run)
            if proxy.device.type == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - started)
        out.append(Timing(shape, workload, str(proxy.device), str(proxy.dtype).removeprefix("torch."), statistics.median(seconds), runs))
    return out


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple MPS"
    return f"CPU ({torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per workload (median)")
    parser.add_argument("--cpu-runs", type=int, default=1, help="timed runs on the CPU side")
    parser.add_argument("--no-timing", action="store_true", help="correctness checks only")
    parser.add_argument("--json", type=Path, help="write checks and timings as JSON here")
    args = parser.parse_args(argv)

    device = resolve_device(args.device)
    print(f"device: {device} = {_device_name(device)}")
    print(f"torch {torch.__version__}, cpu capability {torch.backends.cpu.get_cpu_capability()}")
    tokenizer = _tokenizer()
    vocab = len(tokenizer)
    checks: list[Check] = []
    timings: list[Timing] = []
    dtypes = ["float32", "bfloat16"]
    with tempfile.TemporaryDirectory(prefix="ragattn-gpu-check-") as tmp:
        for name, config in tiny_configs(vocab).items():
            folder = _save_random(config, tokenizer, Path(tmp) / name)
            for dtype in dtypes:
                checks += check_rows(name, folder, str(device), dtype)
        print("\n| model | device | dtype | check | max abs diff | bound | ok |")
        print("|---|---|---|---|---|---|---|")
        for c in checks:
            print(f"| {c.model} | {c.device} | {c.dtype} | {c.what} | {c.max_abs_diff:.2e} | {c.tolerance:g} | {'yes' if c.ok else 'NO'} |")
        if not args.no_timing:
            auto_dtype = "bfloat16" if device.type == "cuda" else "float32"
            sides = [("cpu", "float32", args.cpu_runs)]
            if device.type != "cpu":
                sides.append((str(device), auto_dtype, args.runs))
            for shape, config in shape_configs(vocab).items():
                folder = _save_random(config, tokenizer, Path(tmp) / shape)
                for side, dtype, runs in sides:
                    timings += time_shape(shape, folder, side, dtype, runs, tokenizer)
            print(f"\n| shape | workload | device | dtype | median s | runs |  ({_device_name(device)}; "
                  f"cpu capability {torch.backends.cpu.get_cpu_capability()})")
            print("|---|---|---|---|---|---|")
            for t in timings:
                print(f"| {t.shape} | {t.workload} | {t.device} | {t.dtype} | {t.median_s:.3f} | {t.runs} |")
            if device.type != "cpu":
                for t in timings:
                    if t.device == "cpu":
                        continue
                    base = next(c for c in timings if c.device == "cpu" and c.shape == t.shape and c.workload == t.workload)
                    print(f"speed-up {t.shape} / {t.workload}: {base.median_s / t.median_s:.1f}x")
    if args.json:
        args.json.write_text(json.dumps({
            "device": str(device), "device_name": _device_name(device),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "checks": [asdict(c) | {"ok": c.ok} for c in checks],
            "timings": [asdict(t) for t in timings],
        }, indent=2) + "\n")
    failed = [c for c in checks if not c.ok]
    print(f"\nchecks within their bounds: {len(checks) - len(failed)} of {len(checks)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
