"""Where per-proxy learned assets (probe weights, head profiles, model cards) live.

The committed assets live in the repository's top-level ``models/<proxy>/``; the wheel carries
them as package data under ``ragattn/models/<proxy>/`` (copied there at build time by
``setup.py``), found through :mod:`importlib.resources`. A source checkout (``PYTHONPATH`` or
``pip install -e .``) has no ``ragattn/models`` and reads ``models/`` in place. A user's own
trained assets are picked
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
    """The shipped assets: ``ragattn/models`` inside an installed wheel, else the top-level
    ``models/`` of the source checkout this package was imported from."""
    inside = Path(str(files("ragattn").joinpath("models")))
    if inside.is_dir():
        return inside
    return Path(__file__).resolve().parent.parent / "models"


def default_models_dir() -> Path:
    """``$RAGATTN_MODELS_DIR`` when set (a user's own trained assets), else the packaged assets."""
    override = os.environ.get(MODELS_DIR_ENV, "").strip()
    return Path(override).expanduser() if override else packaged_models_dir()


def proxy_slug(proxy: Proxy | str) -> str:
    """A directory-safe name for the proxy (``smollm2-135m``, or the last path component)."""
    name = proxy if isinstance(proxy, str) else proxy.name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", Path(name).name.removesuffix(".gguf")).strip("-")
