"""Sentence-level context compression: the :class:`Compressor` and its method registry.

The facade is :mod:`ragattn.compress.compressor`, the result assembly
:mod:`ragattn.compress.assembly`, the methods and their needs :mod:`ragattn.compress.registry`
(:data:`METHODS`). Probe weights load from ``models/<proxy>/<method>.npz`` (``ragattn probe
train`` writes them).
"""

from __future__ import annotations

from ragattn.compress.assembly import DOC_JOINER
from ragattn.compress.cascade import DEFAULT_CASCADE, Cascade
from ragattn.compress.compressor import Compressor
from ragattn.compress.model_files import probe_path
from ragattn.compress.registry import DEFAULT_METHOD, METHODS, PROBE_METHODS

__all__ = [
    "DEFAULT_CASCADE",
    "DEFAULT_METHOD",
    "DOC_JOINER",
    "METHODS",
    "PROBE_METHODS",
    "Cascade",
    "Compressor",
    "probe_path",
]
