"""Identity of everything that can change an answer: proxy weights, scoring code, learned assets.

Result caches key on it (``ragattn.cache.cache_key(model=...)``), so a new checkpoint, a code
change or a retrained probe never serves an answer computed before it. Code that cannot change an
answer (the lab, the CLI, batch jobs, the SDK client, the adapters, the demo corpus) is left out,
so editing it keeps the service's cache.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from ragattn._version import __version__
from ragattn.assets import default_models_dir

PACKAGE_DIR = Path(__file__).resolve().parent
"""The installed ``ragattn`` package (found without importing its facade)."""

NOT_RESULTS = (
    "lab",
    "cli",
    "batch",
    "integrations",
    "data",
    "client",
    "demo.py",
    "cache.py",
    "fingerprint.py",
)
"""Entries of the package that cannot change a rerank, compress or answer result."""

_DIGESTS: dict[int, tuple[Any, str]] = {}
"""sha256 of a model's weights by ``id(model)``; holding the model keeps its id unique."""
_LOCK = threading.Lock()


def weights_digest(model: Any) -> str:
    """sha256 over the raw bytes of every tensor in ``state_dict`` order (about 1 s for 135M).

    Computed once per model object and remembered for the life of the process.
    """
    with _LOCK:
        known = _DIGESTS.get(id(model))
    if known is not None and known[0] is model:
        return known[1]
    import torch

    h = hashlib.sha256()
    with torch.inference_mode():
        for name, tensor in model.state_dict().items():
            h.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
            raw = tensor.detach().contiguous().view(torch.uint8).cpu()  # from any device
            h.update(memoryview(raw.numpy()))
    digest = h.hexdigest()
    with _LOCK:
        _DIGESTS[id(model)] = (model, digest)
    return digest


def result_files() -> list[tuple[str, Path]]:
    """The code and learned assets that can change a result, each with a stable name for hashing.

    The package's files except :data:`NOT_RESULTS` (a wheel's ``ragattn/models`` included) and,
    when the learned assets live elsewhere (``RAGATTN_MODELS_DIR``, or the top-level ``models/`` of
    a source checkout), that directory's files too.
    """
    root = PACKAGE_DIR
    files = [
        (str(p.relative_to(root.parent)), p)
        for p in sorted(root.rglob("*"))
        if "__pycache__" not in p.parts
        and p.suffix not in (".pyc", ".pyo")
        and p.relative_to(root).parts[0] not in NOT_RESULTS
    ]
    models = default_models_dir()
    if models.is_dir() and not models.resolve().is_relative_to(root.resolve()):
        files += [(f"models/{p.relative_to(models)}", p) for p in sorted(models.rglob("*"))]
    return [(name, path) for name, path in files if path.is_file()]


def model_fingerprint(proxy: Any, *parts: str) -> str:
    """A short identity of ``proxy`` plus the scoring configuration in ``parts``.

    The weights are hashed byte for byte; the scoring code and learned assets (head profiles,
    probes; the packaged ones or ``RAGATTN_MODELS_DIR``) by their file contents
    (:func:`result_files`).

    Args:
        proxy: a loaded :class:`ragattn.proxy.Proxy` (``name``, ``source``, ``dtype``, ``model``).
        parts: further strings that change answers, e.g. the rerank and compress method names.

    Returns:
        ``"<proxy name>@<24 hex digits>"``.
    """
    h = hashlib.sha256()
    h.update(f"{__version__}|{proxy.name}|{proxy.source}|{proxy.dtype}|".encode())
    device = getattr(proxy, "device", None)
    if device is not None and device.type != "cpu":
        # Kernels differ by device (rows agree to rounding only): a shared cache keeps them apart.
        h.update(f"device={device.type}|".encode())
    h.update("|".join(parts).encode())
    model = getattr(proxy, "model", None)
    if model is not None:
        h.update(weights_digest(model).encode())
    for name, path in result_files():
        h.update(name.encode())
        h.update(path.read_bytes())
    return f"{proxy.name}@{h.hexdigest()[:24]}"


__all__ = ["model_fingerprint", "result_files", "weights_digest"]
