"""Client-supplied strings made safe for one log line: no CR, LF, NUL or other control character.

A request path such as ``/static/x%0aCRITICAL - forged`` is decoded by the server before the app
sees it; logged as is, it would start a forged log line. Every client-supplied string that reaches
a log record goes through :func:`clean` first.
"""

from __future__ import annotations

_MAX_CHARS = 300


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


__all__ = ["clean"]
