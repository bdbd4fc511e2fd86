"""Devices: resolution and its errors, ``device=`` on the facades, ``RAGATTN_DEVICE``, the service's
report of where the proxy runs, rows on CUDA against the CPU, and the device check script.

This machine class has no accelerator: every test here runs on the CPU and the CUDA-only ones
skip; the errors are asserted against :func:`available_devices`, so they hold on any machine.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest
import torch

from ragattn.attention import HeadSet, engine_for
from ragattn.devices import available_devices, native_cpu_bf16, resolve_device, resolve_dtype
from ragattn.errors import ConfigError
from ragattn.settings import Settings

REPO = Path(__file__).resolve().parents[3]
HAS_CUDA = torch.cuda.is_available()
HAS_MPS = "mps" in available_devices()
QUERY = "Where is the Eiffel Tower?"
DOCS = [
    "Bananas grow in tropical climates. They are harvested green.",
    "The Eiffel Tower is in Paris. It was built for the 1889 World's Fair.",
    "The stock market fell on Monday. Investors sold technology shares.",
]


def _unavailable(device: str) -> str:
    return f"device {device!r} is not available; available: {', '.join(available_devices())}"


# ---- resolve_device / resolve_dtype -------------------------------------------------------


def test_auto_picks_cuda_then_mps_then_cpu() -> None:
    expected = "cuda:0" if HAS_CUDA else ("mps" if HAS_MPS else "cpu")
    assert str(resolve_device("auto")) == expected
    assert str(resolve_device()) == expected


@pytest.mark.parametrize("spelling", ["cpu", "CPU", " cpu ", "cpu:0", torch.device("cpu")])
def test_cpu_spellings(spelling: Any) -> None:
    assert resolve_device(spelling) == torch.device("cpu")


@pytest.mark.parametrize(
    "device",
    [
        pytest.param("cuda", marks=pytest.mark.skipif(HAS_CUDA, reason="a GPU is present")),
        pytest.param(
            "cuda:7",
            marks=pytest.mark.skipif(
                HAS_CUDA and torch.cuda.device_count() > 7, reason="eight GPUs are present"
            ),
        ),
        pytest.param("mps", marks=pytest.mark.skipif(HAS_MPS, reason="MPS is present")),
    ],
)
def test_missing_device_is_one_config_error_naming_the_devices_that_exist(device: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(_unavailable(device))):
        resolve_device(device)


@pytest.mark.skipif(HAS_CUDA or HAS_MPS, reason="an accelerator is present")
def test_on_a_cpu_only_machine_the_message_lists_only_the_cpu() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_device("cuda")
    assert str(info.value) == "device 'cuda' is not available; available: cpu"


@pytest.mark.parametrize("garbage", ["gpu", "cuda:x", "cuda:-1", "tpu", "", "meta", "cuda:0:1"])
def test_unknown_device_strings(garbage: str) -> None:
    message = f"unknown device {garbage!r}; use one of: auto, cpu, cuda, cuda:N, mps"
    with pytest.raises(ConfigError, match=re.escape(message)):
        resolve_device(garbage)


def test_dtype_auto_on_the_cpu_is_bf16_exactly_where_it_is_native() -> None:
    assert resolve_dtype("auto", "cpu", cpu_bf16=True) == torch.bfloat16
    assert resolve_dtype("auto", "cpu", cpu_bf16=False) == torch.float32
    native = torch.bfloat16 if native_cpu_bf16() else torch.float32
    assert resolve_dtype("auto", "cpu") == native  # None: read from this CPU's flags


@pytest.mark.parametrize("cpu_bf16", [True, False])
def test_explicit_dtypes_ignore_the_cpu_detection(cpu_bf16: bool) -> None:
    assert resolve_dtype("float32", "cpu", cpu_bf16=cpu_bf16) == torch.float32
    assert resolve_dtype("fp32", "cpu", cpu_bf16=cpu_bf16) == torch.float32
    assert resolve_dtype("bf16", "cpu", cpu_bf16=cpu_bf16) == torch.bfloat16
    assert resolve_dtype(torch.float32, cpu_bf16=cpu_bf16) == torch.float32


@pytest.mark.parametrize("cpu_bf16", [True, False])
@pytest.mark.parametrize(
    ("device", "gpu_bf16", "expected"),
    [
        (torch.device("cuda", 0), True, torch.bfloat16),  # compute capability 8.0 and later
        (torch.device("cuda", 0), False, torch.float32),  # older GPUs
        (torch.device("mps"), True, torch.float32),  # MPS bf16 depends on the macOS version
    ],
)
def test_dtype_auto_on_accelerators_ignores_the_cpu_detection(
    monkeypatch: pytest.MonkeyPatch,
    device: torch.device,
    gpu_bf16: bool,
    expected: torch.dtype,
    cpu_bf16: bool,
) -> None:
    import ragattn.devices

    # This machine has no accelerator: the device and the GPU's capability are given, the rule
    # under test is resolve_dtype's own.
    monkeypatch.setattr(ragattn.devices, "resolve_device", lambda _: device)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: gpu_bf16)
    assert resolve_dtype("auto", "auto", cpu_bf16=cpu_bf16) == expected


def test_dtype_names_are_checked() -> None:
    with pytest.raises(ConfigError, match=re.escape("unknown dtype 'float16'")):
        resolve_dtype("float16")
    with pytest.raises(ConfigError, match=re.escape("unsupported dtype torch.float16")):
        resolve_dtype(torch.float16)


def test_int8_quantisation_keeps_auto_in_fp32_and_the_log_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import ragattn.devices
    import ragattn.proxy

    monkeypatch.setattr(ragattn.devices, "native_cpu_bf16", lambda: True)  # a bf16-native CPU
    assert resolve_dtype("auto", "cpu") == torch.bfloat16
    with caplog.at_level("INFO", logger="ragattn.proxy"):
        quantized = ragattn.proxy.load_proxy("smollm2-135m", quantize="int8")
    assert quantized.dtype == torch.float32
    assert (
        "dtype 'auto' chose float32: int8 dynamic quantisation replaces fp32 linear layers"
        in caplog.messages
    )


@pytest.mark.parametrize(
    ("flags", "native"),
    [
        ("fpu sse avx2 avx512f avx512_bf16 avx512_vnni", True),
        ("fpu avx2 avx512f amx_bf16 amx_tile", True),
        ("fpu sse avx2 fma", False),  # AVX2 only: bf16 would be emulated
        ("fpu avx512f avx512bw avx512vl", False),  # AVX-512 without BF16
    ],
)
def test_native_bf16_is_read_from_the_cpu_flags(tmp_path: Path, flags: str, native: bool) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nmodel name\t: test\nflags\t\t: {flags}\n")
    assert native_cpu_bf16(info) is native
    assert native_cpu_bf16(tmp_path / "absent") is False  # macOS, Windows: no /proc/cpuinfo


@pytest.mark.skipif(HAS_CUDA, reason="a GPU is present")
def test_load_proxy_refuses_a_missing_device_before_reading_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ragattn.proxy

    def never(*_: Any) -> Any:
        raise AssertionError("the model files were looked up before the device was checked")

    monkeypatch.setattr(ragattn.proxy, "_materialize", never)
    with pytest.raises(ConfigError, match=re.escape(_unavailable("cuda"))):
        ragattn.proxy.load_proxy("smollm2-135m", device="cuda")


# ---- facades ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cpu_reranker() -> Any:
    """ICR on a proxy loaded by name with an explicit ``device="cpu"`` (and fp32, the session
    proxy's dtype, which ``"auto"`` is not on a CPU with native bf16)."""
    from ragattn import Reranker

    return Reranker("smollm2-135m", method="icr", device="cpu", dtype="float32")


def test_reranker_on_cpu_runs_there_and_equals_the_default_exactly(
    cpu_reranker: Any, reranker: Any
) -> None:
    assert cpu_reranker.proxy.device == torch.device("cpu")
    assert cpu_reranker.proxy.dtype == torch.float32
    explicit = cpu_reranker.rerank(QUERY, DOCS)
    default = reranker.rerank(QUERY, DOCS)  # the session's Reranker(proxy, method="icr")
    assert [r.index for r in explicit] == [r.index for r in default]
    assert [r.raw_score for r in explicit] == [r.raw_score for r in default]
    assert explicit[0].index == 1


def test_compressor_on_cpu_equals_the_default_exactly(cpu_reranker: Any, compressor: Any) -> None:
    from ragattn.compress import Compressor

    explicit = Compressor(cpu_reranker.proxy, method="focal", device="cpu")
    ours = explicit.compress(QUERY, DOCS, ratio=0.4)
    theirs = compressor.compress(QUERY, DOCS, ratio=0.4)  # the session's focal compressor
    assert ours.compressed_text == theirs.compressed_text
    for a, b in zip(ours.documents, theirs.documents, strict=True):
        assert list(a.sentence_scores) == list(b.sentence_scores)
    assert 0 < ours.compressed_tokens < ours.origin_tokens


@pytest.mark.skipif(HAS_CUDA, reason="a GPU is present")
def test_facades_check_the_device_even_when_the_method_loads_no_proxy(proxy: Any) -> None:
    from ragattn import Reranker
    from ragattn.compress import Compressor

    with pytest.raises(ConfigError, match=re.escape(_unavailable("cuda"))):
        Reranker(method="fused-no-attention", device="cuda")
    with pytest.raises(ConfigError, match=re.escape(_unavailable("cuda:1"))):
        Compressor(method="lexical", device="cuda:1")
    with pytest.raises(ConfigError, match=re.escape(_unavailable("cuda"))):
        Reranker(proxy, method="icr", device="cuda")


def test_captured_rows_stay_on_the_proxy_device(proxy: Any) -> None:
    ids = proxy.tokenizer(QUERY + " " + DOCS[1]).input_ids
    cap = engine_for(proxy).capture(ids, [len(ids) - 1], HeadSet.from_layers([0, 5], 3))
    assert cap.weights.device == proxy.device


def test_index_tensors_are_built_once_per_forward_not_per_layer(
    proxy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No layer builds a tensor from host data: capturing 30 layers builds as many tensors with
    ``torch.tensor`` / ``torch.arange`` as capturing one (the forward itself is the same)."""
    ids = proxy.tokenizer(QUERY + " " + DOCS[1]).input_ids
    rows = list(range(len(ids) - 3, len(ids)))
    engine = engine_for(proxy)
    counts = {"n": 0}
    real_tensor, real_arange = torch.tensor, torch.arange

    def counting(fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts["n"] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(torch, "tensor", counting(real_tensor))
    monkeypatch.setattr(torch, "arange", counting(real_arange))
    made = []
    last = proxy.num_layers - 1
    for heads in (
        HeadSet.from_layers([last], proxy.num_heads),
        HeadSet.all(proxy.num_layers, proxy.num_heads),
    ):
        counts["n"] = 0
        engine.capture(ids, rows, heads, reduce="none", early_exit=False)
        made.append(counts["n"])
    assert made[0] == made[1] > 0


# ---- settings and the service -------------------------------------------------------------


def test_ragattn_device_is_parsed_and_checked() -> None:
    assert Settings.from_env({"RAGATTN_DEVICE": "cpu"}).device == "cpu"
    assert Settings.from_env({"RAGATTN_DEVICE": "CUDA:1"}).device == "cuda:1"
    assert Settings.from_env({"RAGATTN_DTYPE": "auto"}).dtype == "auto"
    assert (Settings().device, Settings().dtype) == ("auto", "auto")
    message = "RAGATTN_DEVICE must be auto, cpu, cuda, cuda:N or mps, got 'gpu'"
    with pytest.raises(ConfigError, match=re.escape(message)):
        Settings.from_env({"RAGATTN_DEVICE": "gpu"})


@pytest.mark.anyio
async def test_health_and_ready_say_where_the_proxy_runs(reranker: Any, compressor: Any) -> None:
    pytest.importorskip("litestar")
    from litestar.testing import AsyncTestClient

    from ragattn_api import create_app

    app = create_app(Settings(device="cpu"), reranker=reranker, compressor=compressor)
    async with AsyncTestClient(app=app) as c:
        assert (await c.get("/health")).json() == {
            "status": "ok",
            "device": "cpu",
            "dtype": "float32",
            "max_request_tokens": 16384,  # engines handed in: not measured, the ceiling
            "proxies": {  # loaded: whether an earlier test in the session read another language
                "english": "smollm2-135m",
                "other_languages": "gemma3-270m",
                "other_languages_loaded": ANY,
            },
        }
        ready = (await c.get("/ready")).json()
        assert (ready["status"], ready["device"], ready["dtype"]) == ("ready", "cpu", "float32")


@pytest.mark.anyio
@pytest.mark.skipif(HAS_CUDA, reason="a GPU is present")
async def test_service_on_a_missing_device_fails_its_load_with_the_message() -> None:
    pytest.importorskip("litestar")
    from litestar.testing import AsyncTestClient

    from ragattn_api import create_app

    app = create_app(Settings(device="cuda"))
    async with AsyncTestClient(app=app) as c:
        deadline = time.monotonic() + 30
        while app.state.load_error is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert isinstance(app.state.load_error, ConfigError)
        assert str(app.state.load_error) == _unavailable("cuda")
        health = await c.get("/health")
        assert (health.status_code, health.json()["error_type"]) == (503, "not_ready")


# ---- CUDA (skips without a GPU) -----------------------------------------------------------


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_rows_on_cuda_equal_the_cpu_rows(proxy: Any) -> None:
    from ragattn import Reranker
    from ragattn.proxy import load_proxy

    gpu = load_proxy("smollm2-135m", device="cuda", dtype="float32")
    assert gpu.device.type == "cuda"
    ids = proxy.tokenizer(QUERY + " " + " ".join(DOCS)).input_ids
    rows = list(range(len(ids) - 4, len(ids)))
    heads = HeadSet.all(proxy.num_layers, proxy.num_heads)
    on_gpu = engine_for(gpu).capture(ids, rows, heads, reduce="none")
    on_cpu = engine_for(proxy).capture(ids, rows, heads, reduce="none")
    assert on_gpu.weights.device.type == "cuda"
    assert float((on_gpu.weights.cpu() - on_cpu.weights).abs().max()) < 1e-4
    tails = [(ids[-6:], rows)]
    shared = engine_for(gpu).capture_shared_prefix(ids[:-6], tails, heads, reduce="none")[0]
    assert float((shared.weights - on_gpu.weights).abs().max()) < 1e-4
    ranked = Reranker(gpu, method="icr").rerank(QUERY, DOCS)
    assert ranked[0].index == 1
    with pytest.raises(ConfigError, match="runs on the CPU only"):
        load_proxy("smollm2-135m", device="cuda", quantize="int8")
    with pytest.raises(ConfigError, match="is loaded on cpu, not cuda:0"):
        Reranker(proxy, method="icr", device="cuda")


# ---- the device check script --------------------------------------------------------------


@pytest.mark.slow
def test_gpu_check_script_passes_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "pipelines" / "gpu_check.py"), "--device", "cpu"]
        + ["--json", str(out), "--shape", "smollm2-135m-shape"],  # the 0.5B shape: GPU runs
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    for model in ("tiny-llama", "tiny-gemma3"):
        for dtype in ("float32", "bfloat16"):
            for check in ("rows = eager", "off-by-one row is caught", "prefix-KV reuse = full"):
                prefix = f"| {model} | cpu | {dtype} | {check} |"
                row = next(line for line in lines if line.startswith(prefix))
                assert row.endswith("| yes |"), row
    for workload in ("rerank 20 x 128 tokens (icr)", "compress 2,000 tokens"):
        prefix = f"| smollm2-135m-shape | {workload} | cpu | float32 |"
        assert any(line.startswith(prefix) for line in lines)
    assert not any(line.startswith("| qwen2.5-0.5b-shape |") for line in lines)
    assert "checks within their bounds: 18 of 18" in lines
    payload = json.loads(out.read_text())
    assert payload["device"] == "cpu"
    assert payload["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert len(payload["checks"]) == 18 and all(c["ok"] for c in payload["checks"])
    assert all(t["median_s"] > 0 for t in payload["timings"]) and len(payload["timings"]) == 2
