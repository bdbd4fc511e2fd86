"""Checks for optional dependencies, so a missing extra fails with one clear message."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from ragattn.errors import MissingDependencyError


def require(module: str, *, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming
    ``pip install ragattn[extra]``."""
    if importlib.util.find_spec(module.split(".")[0]) is None:
        raise MissingDependencyError(
            f"{module!r} is not installed; install it with: pip install 'ragattn[{extra}]'"
        )
    return importlib.import_module(module)
