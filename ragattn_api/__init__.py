"""The ragattn HTTP service (Litestar): a thin layer over the library; see docs/service.md."""

from __future__ import annotations

from ragattn_api.app import create_app

__all__ = ["create_app"]
