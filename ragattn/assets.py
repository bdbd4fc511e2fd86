"""Where per-proxy learned assets (probe weights, head profiles, model cards) live."""

from __future__ import annotations

import re
from pathlib import Path

from ragattn.proxy import Proxy


def default_models_dir() -> Path:
    """``models/`` at the top of the source tree, beside the ``ragattn`` package."""
    return Path(__file__).resolve().parents[1] / "models"


def proxy_slug(proxy: Proxy) -> str:
    """A directory-safe name for the proxy (``smollm2-135m``, or the last path component)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", Path(proxy.name).name.removesuffix(".gguf")).strip("-")
