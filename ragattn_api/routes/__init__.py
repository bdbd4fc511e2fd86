"""Route controllers: health, rerank, compress."""

from __future__ import annotations
