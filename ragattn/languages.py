"""The languages sentence splitting has rules for, and the check of a call's ``language``.

A value module (no project imports beyond errors and validation), so the contract can check a
call's ``language`` where arguments enter; :mod:`ragattn.sentences` splits by it.
"""

from __future__ import annotations

from ragattn.errors import InvalidInputError
from ragattn.validation import shown

LANGUAGES: tuple[str, ...] = (
    "am", "ar", "bg", "da", "de", "el", "en", "es", "fa", "fr", "hi", "hy",
    "it", "ja", "kk", "mr", "my", "nl", "pl", "ru", "sk", "ur", "zh",
)  # fmt: skip
"""The ISO 639-1 codes :func:`~ragattn.sentences.split_sentences` has rules for (pysbd's),
besides :data:`AUTO`."""
AUTO = "auto"
"""The language read from the text's script (:func:`~ragattn.sentences.resolve_language`)."""


def check_language(language: object) -> str:
    """``language`` itself when it is ``"auto"`` or a code of :data:`LANGUAGES`.

    Raises:
        InvalidInputError: anything else (the message lists the valid codes).
    """
    if not isinstance(language, str) or (language != AUTO and language not in LANGUAGES):
        raise InvalidInputError(
            f"unknown language {shown(language)}; valid: {AUTO}, {', '.join(LANGUAGES)}"
        )
    return language


__all__ = ["AUTO", "LANGUAGES", "check_language"]
