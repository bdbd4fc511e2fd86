"""Sentence-level context compression: the :class:`Compressor` and its method registry.

The facade is :mod:`ragattn.compress.compressor`; a call is one read of its context
(:mod:`ragattn.compress.read`), whose stages live in these modules, in the order they run:

- ``sentences``: :mod:`ragattn.markdown_units` and :mod:`ragattn.sentences` (the units);
- ``candidates``: MiniLM's pass, :mod:`ragattn.embed` (or BM25, :mod:`ragattn.lexical`);
- ``cut``: :mod:`ragattn.compress.cascade`;
- ``forward``: :mod:`ragattn.compress.scorers` over :mod:`ragattn.compress.features` (the
  sentence probe, :mod:`ragattn.compress.probe`; ``focal``, :mod:`ragattn.compress.focal`);
- ``documents``: :mod:`ragattn.document_probe`;
- ``selection``: :mod:`ragattn.compress.selection` (with :mod:`ragattn.compress.links`);
- ``ranking`` and the read's scores: :mod:`ragattn.compress.read_scores`;
- ``assembly``: :mod:`ragattn.compress.assembly` under :mod:`ragattn.compress.budget`.

The methods and their needs are :mod:`ragattn.compress.registry` (:data:`METHODS`); their model
files (``models/<proxy>/<method>.npz``, written by ``ragattn probe train``, and the rest) are
found and loaded by :mod:`ragattn.compress.model_files`.
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
