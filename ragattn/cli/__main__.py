"""``python -m ragattn.cli``: the ``ragattn`` command."""

from __future__ import annotations

from ragattn.cli import app

app()
