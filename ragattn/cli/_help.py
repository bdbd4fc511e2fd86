"""Help texts that list the method registries, rendered only when ``--help`` is asked for.

The registries import torch; building them into every help string would make ``ragattn --help``
and every command's start-up pay for it. :func:`listing_methods` gives a command class that appends
the listing when its own help is formatted.
"""

from __future__ import annotations

from typing import Any, Literal

from typer.core import TyperCommand

DTYPE_HELP = (
    "Weights dtype: auto (bf16 where native: CUDA with compute capability 8.0+, a CPU with "
    "AVX-512 BF16 or AMX; else fp32), float32 or bfloat16."
)

Kind = Literal["rerank", "compress"]


def method_listing(kinds: tuple[Kind, ...], *, lab: bool = False) -> str:
    """One paragraph per kind: ``<kind> methods:`` then ``name: description (needs ...)`` lines;
    with ``lab``, a second paragraph per kind lists the lab's variants (``ragattn eval``)."""
    return "\n\n".join(_listing(kind, lab) for kind in kinds)


def _listing(kind: Kind, lab: bool) -> str:
    if kind == "rerank":
        from ragattn.rerank import registry as rerank

        default, lines = rerank.DEFAULT_METHOD, rerank.METHODS.describe()
    else:
        from ragattn.compress import registry as compress

        default, lines = compress.DEFAULT_METHOD, compress.METHODS.describe()
    text = f"{kind} methods (default {default}):\n{lines}"
    if lab:
        from ragattn.lab.registry import COMPRESS_VARIANTS, RERANK_VARIANTS

        variants = RERANK_VARIANTS if kind == "rerank" else COMPRESS_VARIANTS
        text += f"\n\n{kind} lab methods (variants and ablations):\n{variants.describe()}"
    return text


def listing_methods(*kinds: Kind, lab: bool = False) -> type[TyperCommand]:
    """A Typer command class whose ``--help`` ends with the registries of ``kinds`` (and, with
    ``lab``, the lab's variants)."""

    class _ListingCommand(TyperCommand):
        def format_help(self, ctx: Any, formatter: Any) -> Any:
            if not getattr(self, "_methods_listed", False):
                self.help = f"{self.help or ''}\n\n{method_listing(kinds, lab=lab)}"
                self._methods_listed = True
            return super().format_help(ctx, formatter)

    return _ListingCommand


__all__ = ["listing_methods", "method_listing"]
