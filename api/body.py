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
  warnings (:func:`ignored_fields`).

:func:`require_json` (a guard) refuses a body not declared ``application/json`` with a 415 before
the body is read.
"""

from __future__ import annotations

import json
import re
from typing import Any, get_args, get_origin

import anyio.to_thread
import msgspec
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from api.errors import UnsupportedMediaTypeError
from ragattn.errors import InvalidInputError

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


def _parse(raw: bytes) -> Any:
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
            raw, object_pairs_hook=_unique_keys, parse_constant=_no_constants, parse_float=_number
        )
    except _DuplicateKeyError as exc:
        raise InvalidInputError(
            f"the JSON body repeats the key {str(exc)!r} in one object; send each key once"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"malformed JSON body: {exc}") from None


def _struct_fields(kind: Any) -> dict[str, Any] | None:
    """Wire name -> type of each field of a Struct type (``None`` for any other type)."""
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        return {f.encode_name: f.type for f in msgspec.structs.fields(kind)}
    return None


def _structs_in(kind: Any) -> list[Any]:
    """The Struct types a field accepts directly or as list items (``list[str | DocumentIn]``)."""
    origin = get_origin(kind)
    if origin is list:
        return [t for arg in get_args(kind) for t in _structs_in(arg)]
    args = get_args(kind)
    if args and origin is not None:  # a Union / Optional
        return [t for arg in args for t in _structs_in(arg)]
    return [kind] if _struct_fields(kind) is not None else []


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


def decode_strict(raw: bytes, kind: Any) -> tuple[Any, list[str]]:
    """Decode a JSON body into ``kind`` strictly; returns the value and the ignored field names.

    Raises:
        InvalidInputError: malformed, too deeply nested, duplicate keys, or wrong types.
    """
    parsed = _parse(raw)
    ignored = unknown_fields(parsed, kind)
    try:
        value = msgspec.convert(parsed, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidInputError(_plain(str(exc))) from None
    return value, ignored


_EMPTY_TEXT = re.compile(r"Expected `str` (of length >= 1|matching regex .*) - at `\$\.(\w+)`$")
_EMPTY_LIST = re.compile(r"Expected `array` of length >= 1 - at `\$\.(documents|texts|context)`$")


def _plain(message: str) -> str:
    """msgspec's message, or the API's own wording for the constraints clients hit most."""
    if m := _EMPTY_TEXT.match(message):
        return f"{m.group(2)} must be a non-empty string (not only whitespace)"
    if m := _EMPTY_LIST.match(message):
        return f"{m.group(1)} must hold at least one document"
    return f"invalid request body: {message}"


def ignored_fields(request: Request[Any, Any, Any]) -> list[str]:
    """The warnings for fields of this request's body that the server does not know."""
    names = request.scope.get("state", {}).get(_STATE_IGNORED) or []
    return [f"unknown field {name!r} ignored" for name in names]


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
    """Guard: a route that takes a body accepts it only as ``application/json`` (else 415)."""
    if getattr(handler, "parsed_data_field", None) is None:
        return
    header = connection.headers.get("content-type", "")
    media = header.split(";", 1)[0].strip().lower()
    if media not in _JSON_TYPES:
        raise UnsupportedMediaTypeError(
            "send the body as JSON with 'Content-Type: application/json'"
            + (f" (got {media[:60]!r})" if media else " (no Content-Type was sent)")
        )


__all__ = [
    "MAX_JSON_DEPTH",
    "StrictRequest",
    "decode_strict",
    "ignored_fields",
    "nesting_exceeds",
    "require_json",
    "unknown_fields",
]
