"""Help texts that list the method registries, rendered only when ``--help`` is asked for.

The registries import torch; building them into every help string would make ``ragattn --help``
and every command's start-up pay for it. :func:`listing_methods` gives a command class that appends
the listing when its own help is formatted.
"""

from __future__ import annotations

from typing import Any, Literal

from typer.core import TyperCommand

Kind = Literal["rerank", "compress"]


def method_listing(kinds: tuple[Kind, ...]) -> str:
    """One paragraph per kind: ``<kind> methods:`` then ``name: description (needs ...)`` lines."""
    return "\n\n".join(_listing(kind) for kind in kinds)


def _listing(kind: Kind) -> str:
    if kind == "rerank":
        from ragattn.rerank import registry as rerank

        default, lines = rerank.DEFAULT_METHOD, rerank.METHODS.describe()
    else:
        from ragattn.compress import registry as compress

        default, lines = compress.DEFAULT_METHOD, compress.METHODS.describe()
    return f"{kind} methods (default {default}):\n{lines}"


def listing_methods(*kinds: Kind) -> type[TyperCommand]:
    """A Typer command class whose ``--help`` ends with the registries of ``kinds``."""

    class _ListingCommand(TyperCommand):
        def format_help(self, ctx: Any, formatter: Any) -> Any:
            if not getattr(self, "_methods_listed", False):
                self.help = f"{self.help or ''}\n\n{method_listing(kinds)}"
                self._methods_listed = True
            return super().format_help(ctx, formatter)

    return _ListingCommand


__all__ = ["listing_methods", "method_listing"]
