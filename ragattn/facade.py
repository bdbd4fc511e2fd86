"""What the two in-process engines share: a method's spec and a proxy loaded only when it runs.

:class:`~ragattn.Reranker` and :class:`~ragattn.compress.Compressor` each look their method up in
their own registry (:class:`~ragattn.methods.MethodTable`) and hold the proxy as a
:class:`~ragattn.proxy.LazyProxy`: a method that reads attention or generates loads the weights
at construction, any other only applies ``threads`` and loads them on first access.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from ragattn.errors import MissingDependencyError, ModelLoadError
from ragattn.methods import MethodSpec, MethodTable
from ragattn.proxy import LazyProxy, Proxy

F = TypeVar("F")
E = TypeVar("E", bound="ProxyFacade[Any]")

logger = logging.getLogger(__name__)


class ProxyFacade(Generic[F]):
    """The spec, name and lazily loaded proxy of an in-process engine.

    Attributes:
        spec: the method's :class:`~ragattn.methods.MethodSpec`.
        method: the method's public name.
    """

    spec: MethodSpec[F]
    method: str
    _proxy: LazyProxy
    multilingual: str | Proxy | None
    """What builds the engine of calls not in English (None: this one reads every language)."""
    _like_this: Callable[[str | Proxy], Any]
    """Builds that engine with this one's settings from :attr:`multilingual`."""
    _second: Any
    """That engine once a call has built it, else None."""

    def _bind(
        self,
        method: str | MethodSpec[F],
        table: MethodTable[F],
        proxy: str | Proxy,
        *,
        device: str,
        dtype: str,
        threads: int | None,
        cache_dir: str | Path | None = None,
    ) -> None:
        """Resolve ``method`` in ``table`` (a spec is taken as is) and hold ``proxy`` unloaded
        (a named one loads with these arguments of :func:`~ragattn.proxy.load_proxy`).

        Raises:
            InvalidInputError: an unknown method (the message lists the valid ones).
            ConfigError: a device this machine does not have.
        """
        self.spec = method if isinstance(method, MethodSpec) else table.spec(method)
        self.method = self.spec.name
        self._proxy = LazyProxy(
            proxy, device=device, dtype=dtype, threads=threads, cache_dir=cache_dir
        )

    def _start(self) -> None:
        """Load the proxy's weights when the method runs the proxy, else only apply ``threads``."""
        if self.spec.runs_proxy:
            self._proxy.get()
        else:
            self._proxy.apply_threads()

    def _multilingual_engine(self: E, language: str) -> E:
        """The engine of a call in ``language`` (not English): built on the first such call from
        :attr:`multilingual`; this one, with a warning logged once (:attr:`multilingual` turns
        None), where it cannot be built (its package or a model file is missing)."""
        if self._second is None:
            try:
                self._second = self._like_this(self.multilingual)  # type: ignore[arg-type]
            except (ModelLoadError, MissingDependencyError) as exc:
                logger.warning(
                    "calls in %s are read by %s with method %s: its multilingual engine did "
                    "not load (%s)",
                    language,
                    self.proxy_name,
                    self.method,
                    exc,
                )
                self.multilingual = None
                return self
        second: E = self._second
        return second

    @property
    def proxy(self) -> Proxy:
        """The proxy model, loaded on first access for methods that do not run it."""
        return self._proxy.get()

    @property
    def proxy_name(self) -> str:
        """The proxy's name, known without loading it."""
        return self._proxy.name


__all__ = ["ProxyFacade"]
