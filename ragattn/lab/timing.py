"""Timing of benchmark variants: wall-clock seconds with the device synchronised, peak memory,
and the runtime line (device, dtype, CPU capability, threads) every benchmark table starts with.
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ragattn.devices import dtype_name
from ragattn.proxy import Proxy


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """Wall-clock seconds of repeated runs of one variant, and the process's peak RSS after them."""

    name: str
    seconds: tuple[float, ...]
    peak_rss_mb: float

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def runtime_info(proxy: Proxy) -> dict[str, str | int]:
    """Where a benchmark ran: the proxy's device and dtype, MiniLM's dtype (the shared
    embedder's), the CPU's vector capability (``torch.backends.cpu.get_cpu_capability()``: which
    kernels the CPU side used) and threads."""
    from ragattn.embed import shared_embedder

    name = "cpu"
    if proxy.device.type == "cuda":
        name = torch.cuda.get_device_name(proxy.device)
    elif proxy.device.type == "mps":
        name = "Apple MPS"
    return {
        "device": str(proxy.device),
        "device_name": name,
        "dtype": dtype_name(proxy.dtype),
        "embedder_dtype": dtype_name(shared_embedder().dtype),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }


def runtime_line(info: dict[str, str | int]) -> str:
    """One line for the head of every benchmark table, from :func:`runtime_info`."""
    where = (
        info["device"] if info["device"] == "cpu" else f"{info['device']} ({info['device_name']})"
    )
    return (
        f"device {where}, dtype {info['dtype']} (MiniLM {info.get('embedder_dtype', '?')}), "
        f"cpu capability {info['cpu_capability']}, "
        f"{info['threads']} threads"
    )


def synchronize() -> None:
    """Wait for queued CUDA kernels, so a timing covers the work and not only its launch."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def time_runs(name: str, fn: Callable[[], object], runs: int, warmup: int = 1) -> Timing:
    """``runs`` timed calls of ``fn`` after ``warmup`` untimed ones (first-call costs out)."""
    for _ in range(warmup):
        fn()
    seconds = []
    for _ in range(runs):
        synchronize()
        started = time.perf_counter()
        fn()
        synchronize()
        seconds.append(time.perf_counter() - started)
    return Timing(name=name, seconds=tuple(seconds), peak_rss_mb=peak_rss_mb())


def time_once(fn: Callable[[], object]) -> float:
    """Wall seconds of one call, the device synchronised on both sides."""
    synchronize()
    started = time.perf_counter()
    fn()
    synchronize()
    return time.perf_counter() - started


__all__ = [
    "Timing",
    "peak_rss_mb",
    "runtime_info",
    "runtime_line",
    "synchronize",
    "time_once",
    "time_runs",
]
