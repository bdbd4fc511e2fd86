"""Strict JSON request bodies: the type a route declares, nothing coerced, nothing silently lost.

Litestar decodes a body to plain Python values and then converts them to the route's Struct in
its lenient mode, which reads ``"3"`` as ``3``, keeps the last of two duplicate keys and, for
JSON nested about a thousand levels deep, dies in the decoder with a ``RecursionError`` (a 500).
:class:`StrictRequest` replaces that step for every route with a body:

- more than :data:`MAX_JSON_DEPTH` nested arrays/objects is a 400, found by a scan in C-speed
  regex passes before any decoder recurses;
- a duplicate key in any object is a 400;
- the value is converted to the route's type in msgspec's strict mode (numbers are never read
  from strings, booleans are not integers; ``1.0`` is an integer, as JSON Schema has it);
- unknown fields are ignored, as Cohere-compatible clients expect, but named in the response's
  warnings (:func:`ignored_fields`: the first ten, names cut to 64 characters, then a count);
  except a field this API defines on other routes only (:data:`ROUTE_ONLY_FIELDS`): its sender
  expects it to act, so it is a 400 naming the routes that take it;
- the body must be UTF-8 (RFC 8259): a byte order mark, UTF-16 or UTF-32 is a 400 before any
  parsing, and a lone surrogate (``"\\ud800"``) is a 400 too;
- a refused value named in a 400 (a duplicate key, an enum value, an unknown field of ours) is cut
  to 64 characters with its length stated (:func:`ragattn_api.logsafe.quoted`).

:func:`require_json` (a guard) refuses a body not declared ``application/json`` (or declared in
a charset other than UTF-8), or declared in a ``Content-Encoding`` other than ``identity``, with
a 415 before the body is read.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, get_args, get_origin

import anyio.to_thread
import msgspec
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from ragattn.errors import InvalidInputError
from ragattn_api.errors import UnsupportedMediaTypeError
from ragattn_api.logsafe import MAX_ECHO_CHARS, quoted

MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects accepted in a body (the API's own shapes need 4)."""

_THREAD_BYTES = 1 << 20
"""Bodies larger than this are decoded on a worker thread, so the event loop keeps serving."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_INNERMOST = re.compile(rb"\[\]|\{\}")
_SURROGATE_HINT = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
"""A UTF-16 surrogate escape or UTF-8-encoded surrogate: Python's decoder would let a lone one
through (a string that cannot be encoded back), so msgspec's strict decoder judges these bodies."""
_STATE_VALUE = "ragattn.body"
_STATE_IGNORED = "ragattn.ignored_fields"


def nesting_exceeds(raw: bytes, limit: int) -> bool:
    """True when ``raw`` (JSON text) nests arrays/objects more than ``limit`` levels deep.

    Strings are blanked first (brackets inside them do not count); then each pass removes the
    innermost empty pairs, one level per pass, so ``limit`` passes empty any document at most
    ``limit`` deep. Malformed text is left for the decoder to refuse.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", raw))
    for _ in range(limit):
        shorter = _INNERMOST.sub(b"", brackets)
        if shorter == brackets:
            return False  # unbalanced: the decoder says where
        brackets = shorter
        if not brackets:
            return False
    return bool(_INNERMOST.search(brackets))


class _DuplicateKeyError(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return out


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _number(text: str) -> int | float:
    """A JSON number with a fraction or exponent; integral ones become ints.

    JSON Schema counts ``1.0`` as an integer, so the server must too (``top_n: 1.0`` is valid); a
    float field still takes the int. Strings are never numbers.
    """
    value = float(text)
    return int(value) if value.is_integer() else value


_BOMS = (
    (b"\x00\x00\xfe\xff", "UTF-32-BE"),
    (b"\xff\xfe\x00\x00", "UTF-32-LE"),
    (b"\xef\xbb\xbf", "UTF-8"),
    (b"\xfe\xff", "UTF-16-BE"),
    (b"\xff\xfe", "UTF-16-LE"),
)


def _utf8_text(raw: bytes) -> str:
    """The body as text: UTF-8 only (RFC 8259 §8.1), checked before anything parses it.

    Python's ``json.loads(bytes)`` would detect UTF-16 and UTF-32 by itself, past the byte-level
    depth and surrogate checks, which assume UTF-8. A NUL byte never occurs in UTF-8 JSON (control
    characters are escaped in strings), while ASCII text in UTF-16/32 is full of them.
    """
    for bom, name in _BOMS:
        if raw.startswith(bom):
            raise InvalidInputError(
                f"the body starts with a {name} byte order mark; send JSON as UTF-8 without one"
            )
    if b"\x00" in raw:
        raise InvalidInputError(
            "the body holds NUL bytes (UTF-16 or UTF-32 text?); send JSON as UTF-8"
        )
    try:
        return raw.decode("utf-8")  # strict: also refuses UTF-8-encoded surrogates
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"the body is not valid UTF-8 (byte {exc.start}); send JSON as UTF-8"
        ) from None


def _parse(raw: bytes) -> Any:
    text = _utf8_text(raw)
    if nesting_exceeds(raw, MAX_JSON_DEPTH):
        raise InvalidInputError(
            f"the JSON body nests arrays/objects more than {MAX_JSON_DEPTH} levels deep"
        )
    if _SURROGATE_HINT.search(raw):
        try:
            msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise InvalidInputError(f"malformed JSON body: {exc}") from None
    try:
        return json.loads(
            text, object_pairs_hook=_unique_keys, parse_constant=_no_constants, parse_float=_number
        )
    except _DuplicateKeyError as exc:
        raise InvalidInputError(
            f"the JSON body repeats the key {quoted(str(exc))} in one object; send each key once"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"malformed JSON body: {exc}") from None


@functools.cache
def _struct_fields(kind: Any) -> Mapping[str, Any] | None:
    """Wire name -> type of each field of a Struct type (``None`` for any other type).

    Cached per type: ``msgspec.structs.fields`` evaluates the annotations' forward references on
    every call, which was about a quarter of the event loop's time per request under a burst.
    """
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        return MappingProxyType({f.encode_name: f.type for f in msgspec.structs.fields(kind)})
    return None


@functools.cache
def _structs_in(kind: Any) -> tuple[Any, ...]:
    """The Struct types a field accepts directly or as list items (``list[str | DocumentIn]``)."""
    origin = get_origin(kind)
    if origin is list:
        return tuple(t for arg in get_args(kind) for t in _structs_in(arg))
    args = get_args(kind)
    if args and origin is not None:  # a Union / Optional
        return tuple(t for arg in args for t in _structs_in(arg))
    return (kind,) if _struct_fields(kind) is not None else ()


def unknown_fields(value: Any, kind: Any, where: str = "") -> list[str]:
    """Dotted names of the keys in ``value`` that ``kind`` (a Struct type) does not declare.

    Walks nested Structs and lists of them, e.g. ``documents[2].colour``.
    """
    fields = _struct_fields(kind)
    if fields is None or not isinstance(value, dict):
        return []
    found: list[str] = []
    for key, item in value.items():
        name = f"{where}.{key}" if where else key
        if key not in fields:
            found.append(name)
            continue
        for inner in _structs_in(fields[key]):
            if isinstance(item, list):
                for i, element in enumerate(item):
                    found.extend(unknown_fields(element, inner, f"{name}[{i}]"))
            else:
                found.extend(unknown_fields(item, inner, name))
    return found


ROUTE_ONLY_FIELDS: Mapping[str, str] = MappingProxyType(
    {
        "prune": "/v1/rerank, /v2/rerank and /rerank (on /v1/compress and /v1/rerank_compress "
        "send the budget, ratio, target_tokens or threshold, at the top level)",
    }
)
"""Top-level fields of some routes' bodies, refused (not ignored) on the others, with the routes
that take them: ignoring ``prune`` would answer without the pruned text the caller asked for."""


def decode_strict(raw: bytes, kind: Any) -> tuple[Any, list[str]]:
    """Decode a JSON body into ``kind`` strictly; returns the value and the ignored field names.

    Raises:
        InvalidInputError: malformed, too deeply nested, duplicate keys, wrong types, or a field
            of :data:`ROUTE_ONLY_FIELDS` this route does not take.
    """
    parsed = _parse(raw)
    ignored = unknown_fields(parsed, kind)
    for name in ignored:
        if name in ROUTE_ONLY_FIELDS:
            raise InvalidInputError(
                f"this route does not take {name!r}; it is a field of {ROUTE_ONLY_FIELDS[name]}"
            )
    try:
        value = msgspec.convert(parsed, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidInputError(_plain(str(exc), kind)) from None
    return value, ignored


_EMPTY_TEXT = re.compile(r"Expected `str` (of length >= 1|matching regex .*) - at `\$\.(\w+)`$")
_EMPTY_LIST = re.compile(r"Expected `array` of length >= 1 - at `\$\.(documents|texts|context)`$")
_UNKNOWN_KEY = re.compile(r"Object contains unknown field `(.*)` - at `\$\.(\w+)`$", re.DOTALL)
_QUOTED = re.compile(r"`[^`]*`" r"|'(?:[^'\\]|\\.)*'" r'|"(?:[^"\\]|\\.)*"', re.DOTALL)
"""A backquoted name or a Python string literal (``repr``: single or double quotes) in one of
msgspec's messages."""


def _plain(message: str, kind: Any = None) -> str:
    """msgspec's message, or the API's own wording for the constraints clients hit most."""
    if m := _EMPTY_TEXT.match(message):
        return f"{m.group(2)} must be a non-empty string (not only whitespace)"
    if m := _EMPTY_LIST.match(message):
        return f"{m.group(1)} must hold at least one document"
    if m := _UNKNOWN_KEY.match(message):
        # Only objects of ours forbid unknown keys (Cohere's fields ignore them with a warning).
        key, where = m.group(1), m.group(2)
        inner = (_struct_fields(kind) or {}).get(where)
        names = [n for t in _structs_in(inner) for n in (_struct_fields(t) or {})] if inner else []
        known = f"; its fields are {', '.join(names)}" if names else ""
        return f"'{where}' has no field {quoted(key)}{known}"
    return f"invalid request body: {_QUOTED.sub(_cut_quoted, message)}"


def _cut_quoted(match: re.Match[str]) -> str:
    """A value msgspec quotes in its message (e.g. ``Invalid enum value '<5 MB>'``), cut to
    :data:`~ragattn_api.logsafe.MAX_ECHO_CHARS` characters with its length stated."""
    text = match.group(0)
    if len(text) <= MAX_ECHO_CHARS + 2:
        return text
    if text.startswith("`"):
        return f"`{text[1 : MAX_ECHO_CHARS + 1]}`... ({len(text) - 2} characters)"
    try:
        value = ast.literal_eval(text)  # a str literal by construction: no code runs
    except (ValueError, SyntaxError):
        value = text[1:-1]
    return quoted(str(value))


MAX_WARNED_FIELDS = 10
"""Unknown fields named one by one in the warnings; the rest are counted in one more line."""
MAX_FIELD_NAME_CHARS = MAX_ECHO_CHARS
"""Longest unknown field name echoed back; a longer one is cut (a 1 MB key is not sent back)."""


def ignored_fields(request: Request[Any, Any, Any]) -> list[str]:
    """The warnings for fields of this request's body that the server does not know: the first
    :data:`MAX_WARNED_FIELDS` by name (cut to :data:`MAX_FIELD_NAME_CHARS`), then a count."""
    names = request.scope.get("state", {}).get(_STATE_IGNORED) or []
    out = []
    for name in names[:MAX_WARNED_FIELDS]:
        out.append(f"unknown field {quoted(name, limit=MAX_FIELD_NAME_CHARS)} ignored")
    if len(names) > MAX_WARNED_FIELDS:
        out.append(
            f"{len(names) - MAX_WARNED_FIELDS} more unknown fields ignored ({len(names)} in all)"
        )
    return out


class StrictRequest(Request[Any, Any, Any]):
    """Litestar's request with :func:`decode_strict` as the JSON decoder of route bodies."""

    async def json(self) -> Any:
        state = self.scope.setdefault("state", {})
        if _STATE_VALUE not in state:
            field = self.route_handler.parsed_data_field
            kind: Any = field.annotation if field is not None else Any
            raw = await self.body()
            if len(raw) > _THREAD_BYTES:
                value, ignored = await anyio.to_thread.run_sync(decode_strict, raw, kind)
            else:
                value, ignored = decode_strict(raw, kind)
            state[_STATE_VALUE] = value
            state[_STATE_IGNORED] = ignored
        return state[_STATE_VALUE]


_JSON_TYPES = frozenset({"application/json"})


async def require_json(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """Guard: a route that takes a body accepts it only as ``application/json`` in UTF-8, with no
    ``Content-Encoding`` but ``identity`` (else 415)."""
    if getattr(handler, "parsed_data_field", None) is None:
        return
    _require_identity_encoding(connection)
    header = connection.headers.get("content-type", "")
    media, _, parameters = header.partition(";")
    media = media.strip().lower()
    if media not in _JSON_TYPES:
        raise UnsupportedMediaTypeError(
            "send the body as JSON with 'Content-Type: application/json'"
            + (f" (got {quoted(media)})" if media else " (no Content-Type was sent)")
        )
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        charset = value.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset not in ("utf-8", "utf8"):
            raise UnsupportedMediaTypeError(
                f"JSON bodies are UTF-8 only (got charset={quoted(charset)}); send UTF-8"
            )


def _require_identity_encoding(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """Refuse a body labelled with a content coding (gzip, br, zstd, ...): 415.

    The server decodes none, so a compressed body could never be read; and a plain body labelled
    compressed is a client (or proxy) that disagrees with the server about the bytes, which is
    not something to accept silently. ``identity`` (no coding) is the only one accepted.
    """
    codings = [
        coding.strip().lower()
        for header in connection.headers.getall("content-encoding", [])
        for coding in header.split(",")
    ]
    refused = [c for c in codings if c not in ("", "identity")]
    if refused:
        raise UnsupportedMediaTypeError(
            f"this server reads request bodies without a content coding (got Content-Encoding "
            f"{quoted(', '.join(refused))}); send the JSON uncompressed",
            accept_encoding="identity",
        )


__all__ = [
    "MAX_JSON_DEPTH",
    "ROUTE_ONLY_FIELDS",
    "StrictRequest",
    "decode_strict",
    "ignored_fields",
    "nesting_exceeds",
    "require_json",
    "unknown_fields",
]
