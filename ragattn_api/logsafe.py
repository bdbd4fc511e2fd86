"""Client-supplied strings made safe to repeat: in one log line, and in an error message.

A request path such as ``/static/x%0aCRITICAL - forged`` is decoded by the server before the app
sees it; logged as is, it would start a forged log line. Every client-supplied string that reaches
a log record goes through :func:`clean` first.

An error message names the value it refuses, so the client sees what was wrong; a refused value
can be megabytes long (an unknown ``method``, an enum value, a duplicate key), and a message that
repeats it whole costs the server that much again and hands the client its own input back. Every
client-supplied value in a message goes through :func:`quoted`: at most :data:`MAX_ECHO_CHARS`
characters of it, with its length stated when cut.
"""

from __future__ import annotations

_MAX_CHARS = 300
MAX_ECHO_CHARS = 64
"""Most characters of a client-supplied value repeated in an error message or warning."""


def clean(value: object, *, limit: int = _MAX_CHARS) -> str:
    """``value`` as a printable one-line string: control characters escaped, at most ``limit``
    characters (longer values end in ``…``)."""
    text = str(value)
    if text.isprintable() and len(text) <= limit:
        return text
    escaped = "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text
    )
    return escaped if len(escaped) <= limit else escaped[: limit - 1] + "…"


def quoted(value: str, *, limit: int = MAX_ECHO_CHARS) -> str:
    """``value`` quoted for a message (``repr``); a longer one is cut to its first ``limit``
    characters followed by ``... (N characters)``, N its whole length."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


__all__ = ["MAX_ECHO_CHARS", "clean", "quoted"]
