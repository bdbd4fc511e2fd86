"""Devices, dtypes and threads: where and in what precision the proxy's forward passes run.

Resolved once, when a proxy loads (:func:`ragattn.proxy.load_proxy`), and checked against what
this machine has, so a missing device fails at start-up with the list of the available ones.
Also the rule by which a probe fitted on features of one dtype reads features of another
(:func:`probe_accepts_dtype`).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ragattn.errors import ConfigError

DeviceLike = str | torch.device
"""``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"mps"`` or a :class:`torch.device`."""

_DEVICE_PATTERN = re.compile(r"(cpu|mps|cuda)(?::(\d+))?")


def available_devices() -> tuple[str, ...]:
    """The devices torch can run on in this process: ``cpu``, each ``cuda:N``, ``mps``."""
    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return tuple(found)


def resolve_device(device: DeviceLike = "auto") -> torch.device:
    """The :class:`torch.device` to run on, checked against what this machine has.

    Args:
        device: ``"auto"`` (CUDA, then MPS, then CPU), ``"cpu"``, ``"cuda"`` (the current CUDA
            device), ``"cuda:N"``, ``"mps"``, or a :class:`torch.device`.

    Returns:
        A device with an index for CUDA (``cuda:0``), so logs and ``/ready`` name the GPU used.

    Raises:
        ConfigError: an unknown device string, or a device this machine does not have (the
            message lists the available ones).
    """
    name = str(device).strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("mps") if "mps" in available_devices() else torch.device("cpu")
    match = _DEVICE_PATTERN.fullmatch(name)
    if match is None:
        raise ConfigError(f"unknown device {device!r}; use one of: auto, cpu, cuda, cuda:N, mps")
    kind, index = match.group(1), match.group(2)
    if kind == "cpu":
        return torch.device("cpu")
    available = available_devices()
    if kind == "cuda" and torch.cuda.is_available():
        number = torch.cuda.current_device() if index is None else int(index)
        if number < torch.cuda.device_count():
            return torch.device("cuda", number)
    elif kind == "mps" and "mps" in available and index in (None, "0"):
        return torch.device("mps")
    raise ConfigError(f"device {str(device)!r} is not available; available: {', '.join(available)}")


_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}


def resolve_dtype(
    dtype: str | torch.dtype = "auto",
    device: DeviceLike = "cpu",
    *,
    cpu_bf16: bool | None = None,
) -> torch.dtype:
    """The weights' dtype for a forward pass on ``device``.

    ``"auto"`` is bf16 where the device runs it natively and fp32 elsewhere:

    - a CUDA device with native bf16 (compute capability 8.0 and later): bf16;
    - a CPU with native bf16 (AVX-512 BF16 or AMX-BF16, :func:`native_cpu_bf16`): bf16, about
      1.5x faster than fp32; probes read features of either float dtype (BENCHMARKS.md §3;
      :func:`probe_accepts_dtype`);
    - a CPU without it (AVX2, AVX-512 without BF16): fp32, since bf16 would be emulated there,
      about 4x slower;
    - MPS and older GPUs: fp32 (MPS bf16 support depends on the macOS version).

    Captured attention rows are computed in fp32 whatever the weights' dtype.

    Args:
        dtype: ``"auto"``, ``"float32"`` / ``"fp32"``, ``"bfloat16"`` / ``"bf16"``, or a
            :class:`torch.dtype` of those two.
        device: the device the forward runs on (see :func:`resolve_device`); only ``"auto"``
            reads it.
        cpu_bf16: whether the CPU has native bf16; None reads it from the CPU flags
            (:func:`native_cpu_bf16`). Only ``"auto"`` on a CPU reads it.

    Raises:
        ConfigError: an unknown dtype, or an unknown or unavailable device with ``"auto"``.
    """
    if isinstance(dtype, torch.dtype):
        if dtype not in _DTYPES.values():
            raise ConfigError(f"unsupported dtype {dtype}; use float32 or bfloat16")
        return dtype
    name = dtype.strip().lower()
    if name == "auto":
        where = resolve_device(device)
        if where.type == "cuda":
            native = torch.cuda.is_bf16_supported(including_emulation=False)
        elif where.type == "cpu":
            native = native_cpu_bf16() if cpu_bf16 is None else cpu_bf16
        else:
            native = False
        return torch.bfloat16 if native else torch.float32
    if name not in _DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; use one of: auto, float32, bfloat16")
    return _DTYPES[name]


def native_cpu_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU has native bf16 arithmetic (AVX-512 BF16 or AMX-BF16), read from the
    kernel's CPU flags; False where they cannot be read (macOS, Windows) or lack both.

    torch's own ``torch.ops.mkldnn._is_mkldnn_bf16_supported()`` is True on any AVX-512 CPU,
    emulated kernels included, so it cannot tell the machines apart whose bf16 is fast.
    """
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            return bool(flags & {"avx512_bf16", "amx_bf16"})
    return False


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"`` (for logs, ``/ready`` and benchmark tables)."""
    return str(dtype).removeprefix("torch.")


INTERCHANGEABLE_DTYPES = frozenset({"float32", "bfloat16"})
"""Weights' dtypes whose attention features a probe fitted on either may read (see
:func:`probe_accepts_dtype`)."""


def probe_accepts_dtype(fitted: str | None, computed: str | None) -> bool:
    """Whether a probe fitted on attention features of weights in ``fitted`` may read features
    computed in ``computed`` (the ``"dtype"`` of
    :func:`ragattn.sentence_attention.attention_config`: ``float32``, ``bfloat16`` or ``int8``).

    The rule: the same dtype always; float32 and bfloat16 either way
    (:data:`INTERCHANGEABLE_DTYPES`), because bf16 features approximate the fp32 ones within a
    stated tolerance. Measured with ``studies/bench_precision.py`` (BENCHMARKS.md §3), the
    float32-fitted default probe keeps exactly the same sentences on bf16 features (kept@20 %
    1.00 on the 2,152-token benchmark context, the same recall on 20 HotpotQA and 40 SQuAD
    questions); ``tests/unit/proxy/test_bf16.py`` holds the agreement to named tolerances and
    ``studies/bf16_agreement.py`` measures it per question. So a probe fitted on either dtype
    serves a proxy in the other (the packaged sentence probes were fitted on bf16 features, the
    document probe on fp32 ones). int8 dynamic quantisation changes
    the selection (kept@20 % 0.69, SQuAD recall 0.913 -> 0.763), so int8 features only match an
    int8 probe. A probe that recorded no dtype accepts any. Rows and layers are the probes' own
    checks.
    """
    if fitted is None or computed == fitted:
        return True
    return {fitted, computed} <= INTERCHANGEABLE_DTYPES


def set_threads(threads: int | None) -> None:
    """Set torch's intra-op thread count (None keeps torch's default, one per core).

    Raises:
        ConfigError: ``threads < 1``.
    """
    if threads is None:
        return
    if threads < 1:
        raise ConfigError(f"threads must be >= 1, got {threads}")
    torch.set_num_threads(threads)


__all__ = [
    "INTERCHANGEABLE_DTYPES",
    "DeviceLike",
    "available_devices",
    "dtype_name",
    "native_cpu_bf16",
    "probe_accepts_dtype",
    "resolve_device",
    "resolve_dtype",
    "set_threads",
]
