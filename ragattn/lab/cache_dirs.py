"""Where the lab commands keep their on-disk caches (features, MiniLM scores, rerank lists).

The root is ``RAGATTN_CACHE_DIR`` (:attr:`ragattn.settings.Settings.cache_dir`), read by the edge
that calls the lab (``ragattn probe train``, a study script) and passed down; the lab never reads
the environment.
"""

from __future__ import annotations

from pathlib import Path


def lab_cache_dir(cache_dir: str | Path | None, name: str) -> Path:
    """``<cache_dir>/<name>``, with ``cache_dir`` defaulting to ``~/.cache/ragattn``.

    Args:
        cache_dir: the caches' root (``Settings.cache_dir``); None: ``~/.cache/ragattn``.
        name: the cache's folder under the root, e.g. ``features``.
    """
    root = Path(cache_dir).expanduser() if cache_dir else Path.home() / ".cache" / "ragattn"
    return root / name


__all__ = ["lab_cache_dir"]
