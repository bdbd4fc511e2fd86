"""Strict JSON request bodies: the type a route declares, nothing coerced, nothing silently lost.

Litestar decodes a body to plain Python values and then converts them to the route's Struct in
its lenient mode, which reads ``"3"`` as ``3``, keeps the last of two duplicate keys and, for
JSON nested about a thousand levels deep, dies in the decoder with a ``RecursionError`` (a 500).
:class:`StrictRequest` replaces that step for every route with a body:

- more than :data:`MAX_JSON_DEPTH` nested arrays/objects is a 400, found by a scan in C-speed
  regex passes before any decoder recurses, whether or not the brackets balance (1,100 ``[`` never
  closed is as deep to a decoder as 1,100 pairs); should a decoder still overflow its stack, or
  fail in any other way, that is a 400 too, never a 500;
- a number literal of more than :data:`MAX_NUMBER_CHARS` characters, or one beyond the range of
  a 64-bit float (``1e400``), is a 400 naming where it was sent, before it is converted; a
  number over its field's bound is a 400 naming the field, the bound and the value sent (cut to
  64 characters), so no route ever computes with it;
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
import math
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
from ragattn.languages import LANGUAGES
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
_TOO_DEEP = f"the JSON body nests arrays/objects more than {MAX_JSON_DEPTH} levels deep"
MAX_NUMBER_CHARS = 100
"""Longest number literal accepted anywhere in a body (a 64-bit integer has at most 20
characters, a float needs at most 24 to be exact); a longer one is a 400 before it is
converted, whatever field holds it."""
_STATE_VALUE = "ragattn.body"
_STATE_IGNORED = "ragattn.ignored_fields"


def nesting_exceeds(raw: bytes, limit: int) -> bool:
    """True when ``raw`` (JSON text) nests arrays/objects more than ``limit`` levels deep, whether
    or not its brackets balance.

    Strings are blanked first (brackets inside them do not count); then each pass removes the
    innermost empty pairs, one level per pass, so ``limit`` passes empty any balanced document
    at most ``limit`` deep. What no pass removes is unbalanced: openers never closed, a closer
    never opened or of the wrong kind. A decoder reads such text down to its first leftover
    closer (or the end), so its depth there is the leftover openers before that closer plus at
    most one level per pass already made; more than ``limit`` is too deep, as it would be for
    balanced text (``[`` x 1,100 never closed overflowed the decoder's stack: a 500).
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", raw))
    for passes in range(limit):
        if not brackets:
            return False
        shorter = _INNERMOST.sub(b"", brackets)
        if shorter == brackets:  # unbalanced: only the leftover openers can be read deeper
            return passes + len(brackets) - len(brackets.lstrip(b"[{")) > limit
        brackets = shorter
    return bool(brackets)


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


class _BadNumber:
    """A number literal refused before conversion (too long, or beyond a float's range), kept
    where it was in the parsed body so that the field holding it can be named."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def problem(self) -> str:
        """Why it is refused, as a predicate: ``is longer than ...``."""
        if len(self.text) > MAX_NUMBER_CHARS:
            return (
                f"is longer than {MAX_NUMBER_CHARS} characters, the most a number in a request "
                "body may have"
            )
        return "is beyond the range of a 64-bit float"


class _Numbers:
    """The ``parse_int`` / ``parse_float`` hooks of one body; ``refused`` collects the number
    literals no field may take (:class:`_BadNumber`)."""

    def __init__(self) -> None:
        self.refused: list[_BadNumber] = []

    def _refuse(self, text: str) -> _BadNumber:
        bad = _BadNumber(text)
        self.refused.append(bad)
        return bad

    def integer(self, text: str) -> int | _BadNumber:
        if len(text) > MAX_NUMBER_CHARS:
            return self._refuse(text)  # before int(): its cost grows with the square of digits
        return int(text)

    def real(self, text: str) -> int | float | _BadNumber:
        """A JSON number with a fraction or exponent; integral ones become ints.

        JSON Schema counts ``1.0`` as an integer, so the server must too (``top_n: 1.0`` is
        valid); a float field still takes the int. Strings are never numbers.
        """
        if len(text) > MAX_NUMBER_CHARS:
            return self._refuse(text)
        value = float(text)
        if not math.isfinite(value):  # 1e400: no field takes an infinity
            return self._refuse(text)
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


def _parse(raw: bytes) -> tuple[Any, list[_BadNumber]]:
    """The body as Python values, and the number literals in it that no field may take.

    Every failure of the decoders is a 400: a stack overflow (which the depth scan should have
    made impossible) says the body is too deep, anything else that it is malformed.
    """
    text = _utf8_text(raw)
    if nesting_exceeds(raw, MAX_JSON_DEPTH):
        raise InvalidInputError(_TOO_DEEP)
    numbers = _Numbers()
    try:
        if _SURROGATE_HINT.search(raw):
            msgspec.json.decode(raw)
        value = json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_constant=_no_constants,
            parse_float=numbers.real,
            parse_int=numbers.integer,
        )
    except _DuplicateKeyError as exc:
        raise InvalidInputError(
            f"the JSON body repeats the key {quoted(str(exc))} in one object; send each key once"
        ) from None
    except RecursionError:
        raise InvalidInputError(_TOO_DEEP) from None
    except (msgspec.DecodeError, ValueError) as exc:
        raise InvalidInputError(f"malformed JSON body: {_cut_message(str(exc))}") from None
    except MemoryError:
        raise
    except Exception as exc:  # a decoder failure of any other kind is still the body's
        raise InvalidInputError(f"malformed JSON body ({type(exc).__name__})") from None
    return value, numbers.refused


def _cut_message(message: str) -> str:
    """A decoder's message, whose quoted values (e.g. an unknown constant) are cut."""
    return _QUOTED.sub(_cut_quoted, message)


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
        "language": "/v1/compress, /v1/rerank_compress and /v1/ask (on the rerank routes send it "
        "in 'prune', with the budget: a plain rerank splits no sentences)",
    }
)
"""Top-level fields of some routes' bodies, refused (not ignored) on the others, with the routes
that take them: ignoring ``prune`` would answer without the pruned text the caller asked for,
ignoring ``language`` would split sentences by other rules than the caller named."""


def decode_strict(raw: bytes, kind: Any) -> tuple[Any, list[str]]:
    """Decode a JSON body into ``kind`` strictly; returns the value and the ignored field names.

    Raises:
        InvalidInputError: malformed, too deeply nested, duplicate keys, wrong types, or a field
            of :data:`ROUTE_ONLY_FIELDS` this route does not take.
    """
    parsed, refused = _parse(raw)
    ignored = unknown_fields(parsed, kind)
    for name in ignored:
        if name in ROUTE_ONLY_FIELDS:
            raise InvalidInputError(
                f"this route does not take {name!r}; it is a field of {ROUTE_ONLY_FIELDS[name]}"
            )
    try:
        value = msgspec.convert(parsed, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidInputError(_plain(str(exc), kind, parsed)) from None
    except RecursionError:
        raise InvalidInputError(_TOO_DEEP) from None
    if refused:  # in a field that takes any value (metadata) or is ignored: refused all the same
        raise InvalidInputError(f"invalid request body: {_bad_number(refused[0])}")
    return value, ignored


_EMPTY_TEXT = re.compile(r"Expected `str` (of length >= 1|matching regex .*) - at `\$\.(\w+)`$")
_EMPTY_LIST = re.compile(r"Expected `array` of length >= 1 - at `\$\.(documents|texts|context)`$")
_BAD_LANGUAGE = re.compile(r"^Invalid enum value .* - at `\$\.(prune\.)?language`$", re.DOTALL)
_UNKNOWN_KEY = re.compile(r"Object contains unknown field `(.*)` - at `\$\.(\w+)`$", re.DOTALL)
_QUOTED = re.compile(r"`[^`]*`" r"|'(?:[^'\\]|\\.)*'" r'|"(?:[^"\\]|\\.)*"', re.DOTALL)
"""A backquoted name or a Python string literal (``repr``: single or double quotes) in one of
msgspec's messages."""


_AT = re.compile(r" - at `(\$[^`]*)`$")
_BOUND = re.compile(r"Expected `(?:int|float)` [<>]=? \S+ - at `")
_PATH_STEP = re.compile(r"\.(\w+)|\[(\d+)\]")


def _sent(parsed: Any, path: str) -> Any:
    """The value at msgspec's ``path`` (``$.documents[1].id``) in the parsed body, or
    :data:`_MISSING` where the path does not lead to one."""
    value = parsed
    for key, index in _PATH_STEP.findall(path.removeprefix("$")):
        if key and isinstance(value, dict) and key in value:
            value = value[key]
        elif index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return _MISSING
    return value


_MISSING = object()


def _bad_number(bad: _BadNumber, path: str | None = None) -> str:
    if path is None:  # in metadata or an ignored field: no field's bound applies
        return f"the body holds the number {quoted(bad.text)}, which {bad.problem()}"
    return f"the number at `{path}`, {quoted(bad.text)}, {bad.problem()}"


def _shown_number(value: int | float) -> str:
    """A number sent, as text cut to 64 characters with its length (100 digits are not echoed)."""
    text = repr(value)
    if len(text) <= MAX_ECHO_CHARS:
        return text
    return f"{text[:MAX_ECHO_CHARS]}... ({len(text)} characters)"


def _plain(message: str, kind: Any = None, parsed: Any = None) -> str:
    """msgspec's message, or the API's own wording for the constraints clients hit most; a
    refused number is named with the value sent (cut to 64 characters)."""
    at = _AT.search(message)
    if at is not None and parsed is not None:
        sent = _sent(parsed, at.group(1))
        if isinstance(sent, _BadNumber):
            return f"invalid request body: {_bad_number(sent, at.group(1))}"
        number = isinstance(sent, int | float) and not isinstance(sent, bool)
        if number and _BOUND.match(message):
            return f"invalid request body: {message}; sent {_shown_number(sent)}"
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
    plain = f"invalid request body: {_QUOTED.sub(_cut_quoted, message)}"
    if _BAD_LANGUAGE.search(message):
        return f"{plain}; valid languages: auto, {', '.join(LANGUAGES)}"
    return plain


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
    "MAX_NUMBER_CHARS",
    "ROUTE_ONLY_FIELDS",
    "StrictRequest",
    "decode_strict",
    "ignored_fields",
    "nesting_exceeds",
    "require_json",
    "unknown_fields",
]
