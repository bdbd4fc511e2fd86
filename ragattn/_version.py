"""The package version, in a module of its own so that any layer can read it without importing the
public facade (``ragattn/__init__.py`` imports the whole runtime)."""

from __future__ import annotations

__version__ = "0.1.0"
