"""What the adapters share as pydantic models: the title option of every adapter, and the
engine, budget and sentence language of those that compress (LangChain's compressor and
retriever, LlamaIndex's postprocessor).

Both frameworks' components are pydantic models, so the settings those adapters share are
models mixed into each. This module imports pydantic, which either framework brings: import it
from an adapter module only, after that adapter's ``require``; :mod:`ragattn.integrations`
itself never imports it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, PrivateAttr

from ragattn.contract import VerbArgs
from ragattn.integrations import (
    DEFAULT_TITLE_KEY,
    Engine,
    Order,
    TitleKey,
    compressor_setup,
)
from ragattn.languages import AUTO
from ragattn.types import CompressedDocument, CompressionResult


class Titled(BaseModel):
    """The title option of every adapter: where each document's title comes from.

    The title goes to the engine with the text (``Document.title``): the ranking and the choice
    of sentences both read it; it is never compressed, and kept spans never cover it.

    Attributes:
        title_key: a metadata key (default ``"title"``, as Wikipedia, web and many vector-store
            loaders set it); or a callable given the framework's own document (a LangChain
            ``Document``, a LlamaIndex node) that returns its title; or None: no titles. Only a
            non-blank string is a title: a missing key, None, ``""`` or another type (a number)
            leaves that document untitled, never an error (see
            :func:`~ragattn.integrations.read_title`), so titled and untitled documents mix in
            one call.
    """

    title_key: TitleKey = DEFAULT_TITLE_KEY


class EngineBudget(BaseModel):
    """The engine and the one budget of an adapter that compresses (the compressing adapters,
    and LangChain's one-read retriever).

    Attributes:
        compressor: a ``Compressor`` (in process), ``Client`` or ``AsyncClient`` (the service);
            None: the shared in-process ``Compressor()``, loaded on the first call.
        ratio / target_tokens / threshold: at most one: the fraction of tokens kept in (0, 1],
            tokens of the engine's tokenizer, or a keep score in [0, 1]; none given: every door's
            :data:`~ragattn.types.DEFAULT_BUDGET` (a ratio of 0.2, at most 1,024 tokens).
        max_tokens: with ``ratio`` (or the default one), the most tokens kept whatever the ratio
            gives (a ceiling, in the engine's tokenizer); None: 1,024 under the default ratio,
            no ceiling under a ``ratio`` given.
    """

    compressor: Any = None
    ratio: float | None = None
    target_tokens: int | None = None
    threshold: float | None = None
    max_tokens: int | None = None

    def _budget(self) -> tuple[float | None, int | None, float | None, int | None]:
        """``(ratio, target_tokens, threshold, max_tokens)`` as given, for
        :func:`compress_args`."""
        return self.ratio, self.target_tokens, self.threshold, self.max_tokens


class SentenceLanguage(BaseModel):
    """The language option of the adapters that compress: how their documents are split into
    sentences.

    Attributes:
        language: an ISO 639-1 code of :data:`~ragattn.sentences.LANGUAGES` (``"de"``: German
            abbreviations and dates end no sentence), or ``"auto"`` (default: by each text's
            script); checked when the adapter is built.
    """

    language: str = AUTO


class CompressingAdapter(EngineBudget, SentenceLanguage):
    """The settings of a compressing adapter, checked once by :meth:`_set_up`; with no budget
    given it keeps :data:`~ragattn.types.DEFAULT_BUDGET` (``ratio=0.2``, at most 1,024 tokens).

    Attributes:
        order: ``"rank"`` (one read, best first) or ``"input"`` (compress only, input order).
        top_n: with ``order="rank"``, the best ``top_n`` are compressed (None: all).
        drop_empty: leave out what kept no sentence; False keeps it with empty text.
    """

    order: Order = "rank"
    top_n: int | None = None
    drop_empty: bool = True
    _engine: Engine = PrivateAttr()
    _args: VerbArgs = PrivateAttr()

    def _set_up(self, unit: str) -> None:
        """Check the settings and build the engine; ``unit`` names what the adapter keeps
        (``documents``, ``nodes``) in the error messages.

        Raises:
            InvalidInputError: more than one budget, a wrong engine, ``top_n`` with
                ``order="input"``, or an unknown ``language``.
        """
        self._args, self._engine = compressor_setup(
            self.compressor,
            self.order,
            self.top_n,
            self._budget(),
            unit=unit,
            language=self.language,
        )

    def _kept(self, result: CompressionResult) -> list[CompressedDocument]:
        """The documents of a compress-only ``result``, in input order, without those that kept
        nothing when ``drop_empty``."""
        return [d for d in result.documents if d.text or not self.drop_empty]


__all__ = ["CompressingAdapter", "EngineBudget", "SentenceLanguage", "Titled"]
