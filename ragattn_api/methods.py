"""The service's engines by method: checked on the event loop, built once on the model thread.

A request may name its rerank or compress ``method``: the name is checked against the library's
registry on the event loop (an unknown one is a 400 listing the valid names), and an engine for a
method other than the configured one is built on first use, on the model thread, sharing the
loaded proxy, then kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ragattn.compress.registry import DEFAULT_METHOD as DEFAULT_COMPRESS_METHOD
from ragattn.compress.registry import METHODS as COMPRESS_METHODS
from ragattn.errors import InvalidInputError, MissingDependencyError, ModelLoadError
from ragattn.rerank.registry import METHODS as RERANK_METHODS
from ragattn_api.logsafe import quoted

if TYPE_CHECKING:
    from ragattn.compress import Compressor
    from ragattn.proxy import Proxy
    from ragattn.rerank import Reranker

CompressorFactory = Callable[["Proxy", str | None], "Compressor"]
"""Builds the compressor of a method (``None``: the default) on the loaded proxy."""


def _unknown_method(kind: str, name: str, valid: Iterable[str]) -> InvalidInputError:
    """The library's unknown-method error, with the name cut (it may be megabytes long)."""
    return InvalidInputError(f"unknown {kind} method {quoted(name)}; valid: {', '.join(valid)}")


class MethodEngines:
    """The rerankers and compressors of a service, by method name.

    Args:
        reranker: the loaded reranker (its ``proxy`` serves every method; its method is the
            default).
        compressors: compressors already built, by method name (``None`` = the default method).
        compressor_factory: builds a compressor for a method on first use.
        default_compress: the configured compress method (``None``: the library's default).
        unavailable: why the default compressor could not be built (for the 400 it causes).
    """

    def __init__(
        self,
        reranker: Reranker,
        compressors: dict[str | None, Compressor],
        compressor_factory: CompressorFactory,
        *,
        default_compress: str | None = None,
        unavailable: str | None = None,
    ) -> None:
        self.reranker = reranker
        self.proxy = reranker.proxy
        self._default_compress = default_compress
        self._compressor_factory = compressor_factory
        self._compressors = dict(compressors)
        for built in compressors.values():
            # The default compressor also answers requests that name its method explicitly.
            name = getattr(built, "method", None)
            if isinstance(name, str):
                self._compressors.setdefault(name, built)
        self.unavailable = unavailable
        self.rerank_method: str = str(getattr(reranker, "method", ""))
        self._rerankers: dict[str, Reranker] = {self.rerank_method: reranker}

    def _rerank_method(self, requested: str | None) -> str:
        """The rerank method a request resolves to: the one it names, else the configured one.

        Checked on the event loop, before the cache and the model queue, so an unknown name costs
        neither.

        Raises:
            InvalidInputError: an unknown name (the message lists the valid ones).
        """
        if requested is None:
            return self.rerank_method
        if requested not in self._rerankers and requested not in RERANK_METHODS:
            raise _unknown_method("rerank", requested, RERANK_METHODS)
        return requested

    def rerank_engine(self, method: str) -> Reranker:
        """The reranker for ``method``, built once on the proxy already loaded, then kept.

        Called on the model thread (the only thread that touches this dict). A method this server
        cannot build (e.g. its learned profile is missing for this proxy) is a 400 naming the
        reason, so clients can pick another; the configured method keeps working. Only the
        configured reranker ranks calls not in English with another method (its
        ``multilingual``); a method a request names ranks every language itself.
        """
        reranker = self._rerankers.get(method)
        if reranker is None:
            from ragattn.rerank import Reranker

            try:
                reranker = Reranker(self.proxy, method=method, multilingual=None)
            except ModelLoadError as exc:
                raise InvalidInputError(
                    f"rerank method {method!r} is unavailable here: {exc}; "
                    f"the server's default is {self.rerank_method!r}"
                ) from exc
            self._rerankers[method] = reranker
        return reranker

    def _compress_method(self, requested: str | None) -> str | None:
        """The compress method a request names (checked on the event loop, like rerank's), or the
        configured one (``None``: the library's default)."""
        if requested is None:
            return self._default_compress
        if requested not in self._compressors and requested not in COMPRESS_METHODS:
            raise _unknown_method("compress", requested, COMPRESS_METHODS)
        return requested

    def _compress_name(self, method: str | None) -> str:
        """The name of the method that serves ``method`` (for cache keys: a request naming the
        default method and one naming none share their entry)."""
        if method is not None:
            return method
        default = self._compressors.get(None)
        return str(getattr(default, "method", None) or DEFAULT_COMPRESS_METHOD)

    def compressor(self, method: str | None) -> Compressor:
        """The compressor for ``method`` (``None``: the default), built once and kept.

        Called on the model thread. A method this server cannot build (e.g. its probe weights are
        not trained yet) is a 400 naming the reason, so clients can pick another method; rerank
        keeps working.
        """
        compressor = self._compressors.get(method)
        if compressor is None:
            try:
                compressor = self._compressor_factory(self.proxy, method)
            except ModelLoadError as exc:
                raise InvalidInputError(
                    f"compress method {method or 'default'!r} is unavailable here: {exc}"
                ) from exc
            self._compressors[method] = compressor
        self._share_second_proxy(compressor)
        return compressor

    def _loaded_seconds(self) -> list[Compressor]:
        """The multilingual compressors the built compressors have loaded (``Compressor`` keeps
        the one it builds on its first call not in English: ``multilingual_compressor``)."""
        seconds = (getattr(c, "multilingual_compressor", None) for c in self._compressors.values())
        return [second for second in seconds if second is not None]

    def _share_second_proxy(self, compressor: Compressor) -> None:
        """Hand ``compressor`` the multilingual proxy another method's compressor has loaded, so
        that its own first call not in English builds on those weights instead of loading a copy
        (about 780 MiB for Gemma-3-270M in bf16). Called on the model thread, before the call."""
        wanted = getattr(compressor, "multilingual", None)
        if (
            not isinstance(wanted, str)
            or getattr(compressor, "multilingual_compressor", None) is not None
        ):
            return
        for second in self._loaded_seconds():
            if second.proxy_name == wanted:
                compressor.multilingual = second.proxy
                return

    def second_proxy(self) -> tuple[str, bool] | None:
        """The proxy that reads calls not in English where it is not :attr:`proxy`, and whether
        it has loaded (it loads on the first such call a compressor reads); None where the one
        proxy reads every language (``RAGATTN_MULTILINGUAL_PROXY=none``, a proxy of one's own with
        ``auto``, or a multilingual proxy that failed to load). Read from the default compressor
        (else any built one): the compressors of every method share the setting."""
        built = list(self._compressors.values())
        default = self._compressors.get(None) or (built[0] if built else None)
        # getattr: an app may be handed a compressor of its own (a test's wrapper) without it.
        chosen = getattr(default, "multilingual", None)
        if chosen is None:
            return None
        name = chosen if isinstance(chosen, str) else chosen.name
        return name, bool(self._loaded_seconds())

    def build_methods(self) -> dict[str, str]:
        """Build every rerank and compress method of the registries now, on the model thread at
        start-up, so that no request pays a method's build (a latency-bound caller picking a
        method per request gets its first answer as fast as its later ones). They share the
        loaded proxy and embedder. Returns ``{"rerank:<name>" / "compress:<name>": reason}`` for
        those this server cannot build; they stay a 400 naming the reason."""
        missing: dict[str, str] = {}
        for name in RERANK_METHODS:
            try:
                self.rerank_engine(name)
            except (InvalidInputError, MissingDependencyError) as exc:
                missing[f"rerank:{name}"] = str(exc)
        for name in COMPRESS_METHODS:
            try:
                self.compressor(name)
            except (InvalidInputError, ModelLoadError, MissingDependencyError) as exc:
                missing[f"compress:{name}"] = str(exc)
        return missing


__all__ = ["CompressorFactory", "MethodEngines"]
