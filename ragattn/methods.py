"""The method registry design shared by rerank and compress.

Each scoring method is one frozen :class:`MethodSpec`: its name, a one-line description, what it
needs (the proxy's attention, the proxy's generation, trained probe weights, the MiniLM embedder)
and the factory that builds it. A :class:`MethodTable` holds the specs of one kind; the facades
(``Reranker``, ``Compressor``) read the needs to load only what a method uses, and every listing
(CLI help, the unknown-method error, the service's OpenAPI enum) reads the table, so a method is
declared once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from ragattn.errors import ConfigError, InvalidInputError

F = TypeVar("F")


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodSpec(Generic[F]):
    """One selectable method.

    Attributes:
        name: the public name (``Reranker(method=name)``, ``RAGATTN_RERANK_METHOD``).
        factory: builds the method's scorer; its signature is fixed by the table's kind.
        description: one line for listings.
        reads_attention: reads the proxy's attention (a capture forward of
            :mod:`ragattn.attention`).
        generates: writes text with the proxy (:func:`ragattn.greedy.greedy_complete`), e.g.
            HyDE's hypothetical answer. The proxy's weights are loaded only for methods that read
            its attention or generate (:attr:`runs_proxy`).
        needs_probe: reads trained probe weights (``models/<proxy>/<name>.npz``).
        needs_embedder: encodes text with the packaged MiniLM.
        needs_profile: reads a learned head or fusion profile (``models/<proxy>/*.json``).
        score_scale: what ``raw_score`` is and how ``relevance_score`` (in [0, 1]) maps from it,
            for this method on every route that reports it (the CLI demo prints it).
        order_free: the ranking does not depend on the input order of the documents (listwise
            attention methods read the documents in one prompt order and do depend on it).
    """

    name: str
    factory: F
    description: str
    reads_attention: bool = True
    generates: bool = False
    needs_probe: bool = False
    needs_embedder: bool = False
    needs_profile: bool = False
    score_scale: str = ""
    order_free: bool = False

    @property
    def runs_proxy(self) -> bool:
        """The method runs the proxy LLM (reads its attention or generates with it)."""
        return self.reads_attention or self.generates

    def needs(self) -> tuple[str, ...]:
        """The names of what the method needs, for listings (``("attention", "probe")``)."""
        flags = (
            ("attention", self.reads_attention),
            ("generation", self.generates),
            ("probe", self.needs_probe),
            ("embedder", self.needs_embedder),
            ("profile", self.needs_profile),
        )
        return tuple(name for name, needed in flags if needed)


class MethodTable(Mapping[str, MethodSpec[F]]):
    """The methods of one kind (``"rerank"`` or ``"compress"``) by name, iterated in name order."""

    def __init__(self, kind: str, specs: Iterable[MethodSpec[F]]) -> None:
        self.kind = kind
        table: dict[str, MethodSpec[F]] = {}
        for spec in specs:
            if spec.name in table:
                raise ConfigError(f"{kind} method {spec.name!r} is declared twice")
            table[spec.name] = spec
        self._specs = dict(sorted(table.items()))

    def __getitem__(self, name: str) -> MethodSpec[F]:
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"MethodTable({self.kind!r}, {list(self._specs)})"

    def spec(self, name: str) -> MethodSpec[F]:
        """The spec of ``name``.

        Raises:
            InvalidInputError: ``name`` is not a method of this kind; the message lists the valid
                names.
        """
        found = self._specs.get(name) if isinstance(name, str) else None
        if found is None:
            raise InvalidInputError(
                f"unknown {self.kind} method {name!r}; valid: {', '.join(self._specs)}"
            )
        return found

    def describe(self) -> str:
        """One line per method, ``name: description (needs ...)``, for ``--help`` texts."""
        lines = []
        for spec in self._specs.values():
            needs = ", ".join(spec.needs()) or "nothing"
            lines.append(f"{spec.name}: {spec.description} (needs {needs})")
        return "\n".join(lines)


__all__ = ["MethodSpec", "MethodTable"]
