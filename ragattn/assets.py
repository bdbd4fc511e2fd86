"""Where per-proxy learned assets (probe weights, head profiles, model cards) live.

The committed assets live in the repository's top-level ``models/<proxy>/``; the wheel carries
them as package data under ``ragattn/models/<proxy>/`` (copied there at build time by
``setup.py``), found through :mod:`importlib.resources`. A source checkout (``PYTHONPATH`` or
``pip install -e .``) has no ``ragattn/models`` and reads ``models/`` in place. A user's own
trained assets are picked by :func:`use_models_dir` (the service and the CLI call it with
``RAGATTN_MODELS_DIR``, :attr:`ragattn.settings.Settings.models_dir`; the library never reads the
environment) or by the ``models_dir=`` arguments of the training commands and loaders.
"""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from ragattn.errors import ModelLoadError

if TYPE_CHECKING:
    from ragattn.proxy import Proxy

_chosen_models_dir: Path | None = None
"""The directory :func:`use_models_dir` chose for this process (None: the packaged assets)."""


def use_models_dir(directory: str | Path | None) -> None:
    """Read learned assets from ``directory`` (laid out like ``ragattn/models``: ``<proxy>/<file>``)
    for the rest of this process; None goes back to the packaged ones.

    Process-wide because every loader (rerank profiles, probes, the weight fingerprint) looks the
    assets up by proxy name; the edges call it once with ``Settings.models_dir`` before they build
    an engine, and a ``models_dir=`` argument still overrides it per engine.
    """
    global _chosen_models_dir
    _chosen_models_dir = Path(directory).expanduser() if directory else None


def packaged_models_dir() -> Path:
    """The shipped assets: ``ragattn/models`` inside an installed wheel, else the top-level
    ``models/`` of the source checkout this package was imported from."""
    inside = Path(str(files("ragattn").joinpath("models")))
    if inside.is_dir():
        return inside
    return Path(__file__).resolve().parent.parent / "models"


def default_models_dir() -> Path:
    """The directory chosen by :func:`use_models_dir` (a user's own trained assets), else the
    packaged assets."""
    return _chosen_models_dir or packaged_models_dir()


def required_file(path: Path, what: str, how: str) -> Path:
    """``path``, where a learned asset should be.

    Raises:
        ModelLoadError: it is not a file (``"no <what> at <path>; <how>"``: what is missing and
            the command that writes it).
    """
    if not path.is_file():
        raise ModelLoadError(f"no {what} at {path}; {how}")
    return path


def proxy_slug(proxy: Proxy | str) -> str:
    """A directory-safe name for the proxy (``smollm2-135m``, or the last path component)."""
    name = proxy if isinstance(proxy, str) else proxy.name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", Path(name).name.removesuffix(".gguf")).strip("-")
