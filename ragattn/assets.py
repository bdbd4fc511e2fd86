"""Where per-proxy learned assets (probe weights, head profiles, model cards) live.

The committed assets are package data under ``ragattn/models/<proxy>/``, found through
:mod:`importlib.resources`, so a wheel install carries them. A user's own trained assets are picked
by ``RAGATTN_MODELS_DIR`` (read when an asset is looked up, not at import) or by the ``models_dir=``
arguments of the training commands and loaders.
"""

from __future__ import annotations

import os
import re
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragattn.proxy import Proxy

MODELS_DIR_ENV = "RAGATTN_MODELS_DIR"
"""Environment variable naming a directory laid out like ``ragattn/models`` (``<proxy>/<file>``)."""


def packaged_models_dir() -> Path:
    """The assets shipped inside the installed ``ragattn`` package (``ragattn/models``)."""
    return Path(str(files("ragattn").joinpath("models")))


def default_models_dir() -> Path:
    """``$RAGATTN_MODELS_DIR`` when set (a user's own trained assets), else the packaged assets."""
    override = os.environ.get(MODELS_DIR_ENV, "").strip()
    return Path(override).expanduser() if override else packaged_models_dir()


def proxy_slug(proxy: Proxy | str) -> str:
    """A directory-safe name for the proxy (``smollm2-135m``, or the last path component)."""
    name = proxy if isinstance(proxy, str) else proxy.name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", Path(name).name.removesuffix(".gguf")).strip("-")
