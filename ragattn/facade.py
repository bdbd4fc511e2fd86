"""What the two in-process engines share: a method's spec and a proxy loaded only when it runs.

:class:`~ragattn.Reranker` and :class:`~ragattn.compress.Compressor` each look their method up in
their own registry (:class:`~ragattn.methods.MethodTable`) and hold the proxy as a
:class:`~ragattn.proxy.LazyProxy`: a method that reads attention or generates loads the weights
at construction, any other only applies ``threads`` and loads them on first access.
"""

from __future__ import annotations

from pathlib import Path
from typing import Generic, TypeVar

from ragattn.methods import MethodSpec, MethodTable
from ragattn.proxy import LazyProxy, Proxy

F = TypeVar("F")


class ProxyFacade(Generic[F]):
    """The spec, name and lazily loaded proxy of an in-process engine.

    Attributes:
        spec: the method's :class:`~ragattn.methods.MethodSpec`.
        method: the method's public name.
    """

    spec: MethodSpec[F]
    method: str
    _proxy: LazyProxy

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

    @property
    def proxy(self) -> Proxy:
        """The proxy model, loaded on first access for methods that do not run it."""
        return self._proxy.get()

    @property
    def proxy_name(self) -> str:
        """The proxy's name, known without loading it."""
        return self._proxy.name


__all__ = ["ProxyFacade"]
