"""Service and CLI settings: one frozen dataclass, parsed from ``RAGATTN_*`` variables at the edges.

Library classes never read the environment; ``create_app(settings=None)`` and the CLI call
:meth:`Settings.from_env` once and pass explicit values down. Tests pass a plain dict.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from ragattn.errors import ConfigError
from ragattn.validation import shown as _shown

CacheBackend = Literal["memory", "redis", "none"]
CacheScope = Literal["shared", "key"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

ENV_PREFIX = "RAGATTN_"
_CACHE_BACKENDS = ("memory", "redis", "none")
_CACHE_SCOPES = ("shared", "key")
_DTYPES = ("auto", "float32", "bfloat16")
_CASCADE = re.compile(
    r"default|off|(?:1(?:\.0*)?|0?\.\d*[1-9]\d*)(?::(?:bm25|documents|lexical)(?:\+links)?)?"
    r"(?:@[1-9]\d*)?(?:,ceiling=[1-9]\d{0,6})?(?:,precut=[1-9]\d{0,2}(?:\.\d{1,3})?)?"
    r"(?:,dense=(?:sentences|pooled))?"
)
"""``RAGATTN_COMPRESS_CASCADE``: default, off, or
KEEP[:SCORER[+links]][@CAP][,ceiling=N][,precut=P][,dense=D] with KEEP in (0, 1], CAP the most
proxy tokens attention reads for a small budget, N for any budget, P the share of the read the
lexical first cut embeds, and D where its MiniLM cosines come from (``sentences`` or ``pooled``)
(:class:`ragattn.compress.cascade.Cascade`)."""
_DEVICE = re.compile(r"auto|cpu|mps|cuda(?::\d+)?")
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_MULTILINGUAL_WORDS = ("auto", "none")
"""``RAGATTN_MULTILINGUAL_PROXY``'s two words; anything else names a proxy."""


_MASK = "***"
"""What a secret is shown as in ``repr`` (the whole value: not even its length is shown)."""

COUNT_CEILING = 1_000_000
"""The most documents any setting (``RAGATTN_MAX_DOCUMENTS``) or request (``top_n``, ``top_k``,
``k``) may name: a bound checked before any arithmetic, not a tuning knob."""
TOKEN_CEILING = 10_000_000
"""The most proxy tokens any setting (``RAGATTN_MAX_*_TOKENS``, a cascade's ``@CAP``) or budget
(``target_tokens``) may name."""


@dataclass(frozen=True, slots=True)
class Bound:
    """The range of one numeric setting: ``low``..``high`` inclusive (``low`` excluded when
    ``open_low``); ``integer`` settings take whole numbers only. ``note`` says what the lowest
    value means (``0 = off``)."""

    low: float
    high: float
    integer: bool = True
    open_low: bool = False
    note: str = ""

    def span(self) -> str:
        """The range as the documentation writes it: ``1..1000000``, ``(0, 1000000000]``."""
        low, high = _plain_number(self.low), _plain_number(self.high)
        if self.integer:
            return f"{low}..{high}"
        return f"{'(' if self.open_low else '['}{low}, {high}]"

    def describe(self) -> str:
        """What the setting takes: ``a positive integer``, ``a number >= 0 (0 = none)``."""
        low = _plain_number(self.low)
        if self.integer:
            kind = "a positive integer" if self.low == 1 else f"an integer >= {low}"
        else:
            kind = f"a number {'>' if self.open_low else '>='} {low}"
        return kind + (f" ({self.note})" if self.note else "")

    def admits(self, value: object) -> bool:
        """``value`` is a number of the right kind within the range (NaN and infinities never)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        above = value > self.low if self.open_low else value >= self.low
        return above and value <= self.high


def _plain_number(value: float) -> str:
    """``1000000`` rather than ``1e+06``: a bound as an operator types it."""
    return str(int(value)) if float(value).is_integer() else str(value)


_OFF = "0 = off"
_NONE = "0 = none"
BOUNDS: Mapping[str, Bound] = MappingProxyType(
    {
        "threads": Bound(1, 1024),
        "block_store_mb": Bound(0, 1_048_576, note=_OFF),
        "max_documents": Bound(1, COUNT_CEILING),
        "max_query_tokens": Bound(1, TOKEN_CEILING),
        "max_tokens_per_doc": Bound(1, TOKEN_CEILING),
        "max_request_tokens": Bound(1, TOKEN_CEILING),
        "tokens_per_second": Bound(0, 1e9, integer=False, open_low=True),
        "max_body_bytes": Bound(1, 1 << 30),
        "max_header_bytes": Bound(1, 1 << 20),
        "body_timeout_s": Bound(0, 86_400, integer=False, note=_NONE),
        "redis_timeout_s": Bound(0, 3_600, integer=False, open_low=True),
        "cache_ttl_s": Bound(1, 315_360_000),
        "cache_max_items": Bound(1, 100_000_000),
        "rate_limit_per_minute": Bound(0, 1_000_000, note=_OFF),
        "queue_size": Bound(1, 100_000),
        "request_timeout_s": Bound(0, 86_400, integer=False, note=_NONE),
        "shutdown_grace_s": Bound(0, 86_400, integer=False),
        "redis_cooldown_s": Bound(0, 3_600, integer=False),
        "generator_max_tokens": Bound(1, 100_000),
        "port": Bound(1, 65_535),
        "compress_first_stage_prior": Bound(0, 1_000, integer=False),
    }
)
"""The range of every numeric ``RAGATTN_*`` setting (docs/service.md, "Settings", states each):
a value outside it, NaN or an infinity is a :class:`ConfigError` naming the variable and the
range, raised by :meth:`Settings.from_env` before anything is loaded. Bounded so that no value
can overflow what is computed from it (``RAGATTN_TOKENS_PER_SECOND`` x
``RAGATTN_REQUEST_TIMEOUT_S`` is the request budget)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything the service and CLI can be configured with; every field has a safe default."""

    proxy: str = "smollm2-135m"
    """Proxy model: a packaged name, a ``.gguf`` path, a model directory or an offline HF id."""
    multilingual_proxy: str = "auto"
    """The proxy that reads calls not in English (:mod:`ragattn.call_language`: the documents'
    language, else the query's): ``auto`` (``Compressor(multilingual="auto")``: Gemma-3-270M
    where ``proxy`` is the packaged English default, else none), ``none`` (``proxy`` reads every
    language), or a name or path as ``proxy`` takes. The second proxy loads on the first call
    not in English, not at start-up."""
    proxy_cache_dir: str | None = None
    """Where dequantized GGUF weights are cached (default ``~/.cache/ragattn``)."""
    device: str = "auto"
    """Where the proxy runs: ``auto`` (CUDA, then MPS, then CPU), ``cpu``, ``cuda``, ``cuda:N`` or
    ``mps``; a device the machine lacks fails the model load with the devices it has."""
    dtype: str = "auto"
    """Proxy weights dtype: ``auto`` (bf16 where the device runs it natively: CUDA with compute
    capability 8.0+ or a CPU with AVX-512 BF16 or AMX; fp32 elsewhere), ``float32`` or
    ``bfloat16``."""
    embed_dtype: str = "float32"
    """MiniLM's weights dtype (the shared embedder, :func:`ragattn.embed.use_embed_dtype`):
    ``float32`` (the default), ``auto`` (bf16 where the CPU or GPU runs it natively: 2.2-2.5x
    faster on AVX-512 BF16, level on the rerank sets) or ``bfloat16``."""
    threads: int | None = None
    """Torch intra-op threads for the forward pass (None = torch's default)."""
    rerank_method: str | None = None
    """Rerank method name from ``ragattn.rerank.METHODS`` (None = the library default)."""
    compress_method: str | None = None
    """Default compression method name (None = the library default); requests may override it."""
    compress_selection: str = "documents"
    """``documents``: with several documents a sentence's keep score also weighs its document's
    relevance from the same forward (:mod:`ragattn.compress.selection`); ``sentences``: each
    sentence on its own probe score (the behaviour before issue 28)."""
    compress_cascade: str = "default"
    """The lexical cascade in front of the attention compress methods
    (:mod:`ragattn.compress.cascade`): ``default`` (the library's, ``DEFAULT_CASCADE``), ``off``
    (every context read whole), or ``KEEP:SCORER`` (e.g. ``0.8:lexical``, ``0.8:bm25``,
    ``0.8:documents``; the share of a long context's proxy tokens attention reads), optionally
    ``+links`` (``0.8:lexical+links``, the default's spelling: linked documents kept first)."""
    compress_first_stage_prior: float = 0.0
    """How much a request's ``first_stage_order`` (its retriever's order; the pipeline passes its
    own) moves the one read: ``Compressor(first_stage_prior=...)``, the rank prior's weight beside
    the document probe's score. 0 (the default, chosen by the rule in docs/research/context.md:
    every weight above 0 cost a multi-hop choice set 2.7 points) checks the order and reads
    nothing."""
    block_store_mb: int = 0
    """Passages read once (:mod:`ragattn.blocks`) for the attention compress methods: the size of
    the in-memory block store in MiB (0 = off, the default). A cached passage costs about 45 KiB
    per proxy token (SmolLM2-135M, fp32); with the packaged probes it loses 6 points of recall on
    HotpotQA-52 (BENCHMARKS.md, "Passages read once"), hence opt-in."""

    max_documents: int = 1000
    """Most documents accepted in one request; more is a 413 ``input_too_large``."""
    max_query_tokens: int = 2048
    """Longest query in proxy tokens; longer is a 413 ``input_too_large``."""
    max_tokens_per_doc: int = 4096
    """Longest document in proxy tokens; longer is a 413 (a request's own, smaller
    ``max_tokens_per_doc`` truncates instead, reported in ``meta.warnings``)."""
    max_request_tokens: int | None = None
    """Most proxy tokens in one request (query plus every document after truncation), checked
    before the request is queued; more is a 413 ``input_too_large``. None (the default): what the
    model thread finishes inside ``request_timeout_s``, derived at start-up from the measured (or
    stated, ``tokens_per_second``) throughput of the slowest verb (:mod:`ragattn.request_budget`);
    a value here always wins."""
    tokens_per_second: float | None = None
    """Stated throughput of the slowest verb (``rerank_compress``) in proxy tokens per second on
    this machine; the default request budget is derived from it instead of a start-up
    measurement (None: measured)."""
    max_body_bytes: int = 10_000_000
    """Largest request body in bytes; larger is a 413."""
    max_header_bytes: int = 16_384
    """Most bytes of request headers (names and values together); more is a 431."""
    body_timeout_s: float = 30.0
    """Longest a request body may take to arrive, seconds (0 = none); a slower or unfinished body
    is a 408 ``request_timeout`` and its connection is closed."""

    cache_backend: CacheBackend = "memory"
    """Result cache: ``memory`` (in-process LRU), ``redis`` (needs ``redis_url``) or ``none``."""
    redis_url: str | None = None
    """Redis URL for ``cache_backend=redis``, e.g. ``redis://localhost:6379/0``."""
    redis_timeout_s: float = 1.0
    """Socket and connect timeout for Redis calls; a slow Redis is a counted miss, not an error."""
    cache_ttl_s: int = 86_400
    """Time to live of a cached response, seconds."""
    cache_max_items: int = 10_000
    """Most entries the in-process LRU keeps."""
    cache_scope: CacheScope = "shared"
    """Who shares cached responses: ``shared`` (every client) or ``key`` (each API key has its own
    partition; needs ``api_keys``)."""

    api_keys: tuple[str, ...] = field(default=(), repr=False)
    """Accepted Bearer keys (comma-separated in the environment); empty = no authentication."""
    rate_limit_per_minute: int = 0
    """Requests per minute per client: per API key when keys are configured, else per peer
    address; 0 = unlimited."""
    trusted_proxies: tuple[str, ...] = ()
    """Addresses or CIDR ranges of reverse proxies whose ``X-Forwarded-For`` / ``-Proto`` headers
    are believed (comma-separated in the environment); empty = the headers are ignored and the
    peer address is the client."""
    queue_size: int = 64
    """Most model jobs waiting or running; one more is a 429 ``overloaded`` with Retry-After."""
    request_timeout_s: float = 120.0
    """Deadline of one model request, seconds (0 = none); a job not started by then is dropped
    and the request is a 503 ``deadline_exceeded``."""
    shutdown_grace_s: float = 30.0
    """On SIGTERM, how long in-flight requests may take to finish before the server closes."""
    redis_cooldown_s: float = 1.0
    """After Redis is found unreachable, how long the cache and the rate limit both bypass it,
    seconds (one circuit per Redis); a Redis that answers with an error (a full one refusing
    writes) pauses only the cache's writes this long, so it still serves hits."""

    models_dir: str | None = None
    """A directory laid out like the packaged learned assets (``<proxy>/<file>``: probes, head
    profiles) that replaces them, e.g. a user's own trained probes (None: the packaged ones)."""
    cache_dir: str | None = None
    """Root of the lab commands' on-disk caches (sentence features, MiniLM scores, rerank lists;
    None: ``~/.cache/ragattn``). The service and ``ragattn ask`` never read it."""

    index_dir: str | None = None
    """Retrieval index directory served by ``/v1/retrieve`` (``ragattn index build`` writes one)."""
    generator_base_url: str | None = None
    """OpenAI-compatible API root incl. ``/v1`` that ``/v1/ask`` sends its prompts to (None: the
    proxy itself generates)."""
    generator_model: str | None = None
    """The ``model`` sent to ``generator_base_url`` (required with it)."""
    generator_api_key: str | None = field(default=None, repr=False)
    """Bearer key for ``generator_base_url``; masked in repr and logs."""
    generator_max_tokens: int = 48
    """Most tokens generated per ``/v1/ask`` answer."""
    host: str = "127.0.0.1"
    """Address ``ragattn serve`` binds."""
    port: int = 8080
    """Port ``ragattn serve`` binds."""
    log_level: LogLevel = "INFO"
    """Python logging level of the service."""

    def __post_init__(self) -> None:
        _validate(self)

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "api_keys":
                value = tuple(_MASK for _ in value)
            elif f.name == "redis_url" and value:
                value = _mask_url(value)
            elif f.name == "generator_api_key" and value:
                value = _MASK
            parts.append(f"{f.name}={value!r}")
        return f"Settings({', '.join(parts)})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``RAGATTN_<FIELD>`` variables (upper case); unset ones keep defaults.

        Args:
            environ: the variables to read; ``os.environ`` when None.

        Raises:
            ConfigError: a value does not parse or is out of range; the message names the variable.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            name = ENV_PREFIX + f.name.upper()
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                continue
            values[f.name] = _PARSERS.get(f.name, _parse_str)(name, raw.strip())
        return cls(**values)


def _mask_url(url: str) -> str:
    """Hide a password in ``scheme://user:password@host``."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def _parse_str(name: str, raw: str) -> str:
    return raw


def _parse_int(name: str, raw: str) -> int:
    try:
        return int(raw.replace("_", ""))
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {_shown(raw)}") from None


def _parse_float(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {_shown(raw)}") from None


def _parse_keys(name: str, raw: str) -> tuple[str, ...]:
    return tuple(k.strip() for k in raw.split(",") if k.strip())


def _parse_upper(name: str, raw: str) -> str:
    return raw.upper()


def _parse_lower(name: str, raw: str) -> str:
    return raw.lower()


def _parse_multilingual(name: str, raw: str) -> str:
    """``auto`` and ``none`` in any case; a proxy name or path as written (paths keep case)."""
    return raw.lower() if raw.lower() in _MULTILINGUAL_WORDS else raw


_PARSERS: dict[str, Callable[[str, str], Any]] = {
    "threads": _parse_int,
    "max_documents": _parse_int,
    "max_query_tokens": _parse_int,
    "max_tokens_per_doc": _parse_int,
    "max_request_tokens": _parse_int,
    "max_body_bytes": _parse_int,
    "max_header_bytes": _parse_int,
    "body_timeout_s": _parse_float,
    "trusted_proxies": _parse_keys,
    "cache_ttl_s": _parse_int,
    "cache_max_items": _parse_int,
    "rate_limit_per_minute": _parse_int,
    "block_store_mb": _parse_int,
    "tokens_per_second": _parse_float,
    "queue_size": _parse_int,
    "port": _parse_int,
    "generator_max_tokens": _parse_int,
    "redis_timeout_s": _parse_float,
    "request_timeout_s": _parse_float,
    "shutdown_grace_s": _parse_float,
    "redis_cooldown_s": _parse_float,
    "compress_first_stage_prior": _parse_float,
    "api_keys": _parse_keys,
    "log_level": _parse_upper,
    "cache_backend": _parse_lower,
    "cache_scope": _parse_lower,
    "dtype": _parse_lower,
    "embed_dtype": _parse_lower,
    "device": _parse_lower,
    "multilingual_proxy": _parse_multilingual,
}


def _env(field_name: str) -> str:
    return ENV_PREFIX + field_name.upper()


def _validate(s: Settings) -> None:
    _validate_numbers(s)
    _validate_choices(s)


def _validate_numbers(s: Settings) -> None:
    """Every numeric setting within its :data:`BOUNDS` (``None`` where it means unset)."""
    optional = ("threads", "max_request_tokens", "tokens_per_second")
    for name, bound in BOUNDS.items():
        value = getattr(s, name)
        if value is None and name in optional:
            continue
        if not bound.admits(value):
            raise ConfigError(_out_of_range(name, bound, value))


def _out_of_range(name: str, bound: Bound, value: object) -> str:
    if name == "port":
        return f"{_env(name)} must be in {bound.span()}, got {_shown(value)}"
    unset = " (unset: derived from the deadline)" if name == "max_request_tokens" else ""
    return (
        f"{_env(name)} must be {bound.describe()}{unset}, got {_shown(value)} "
        f"(range {bound.span()})"
    )


def _validate_choices(s: Settings) -> None:
    env = _env
    if s.compress_selection not in ("documents", "sentences"):
        raise ConfigError(
            f"{env('compress_selection')} must be documents or sentences, "
            f"got {s.compress_selection!r}"
        )
    if not _CASCADE.fullmatch(s.compress_cascade):
        raise ConfigError(
            f"{env('compress_cascade')} must be default, off or KEEP:SCORER with KEEP in (0, 1] "
            f"and SCORER one of bm25, documents, lexical, optionally +links, @CAP tokens, "
            f",ceiling=N tokens, ,precut=P and ,dense=sentences|pooled (e.g. 0.8:lexical or "
            f"0.8:lexical+links@1024,ceiling=2048,precut=2), "
            f"got {_shown(s.compress_cascade)}"
        )
    _, at, cap = s.compress_cascade.split(",")[0].partition("@")
    # The pattern admits digits only; the length first, so that no huge number is converted.
    if at and (len(cap) > len(str(TOKEN_CEILING)) or int(cap) > TOKEN_CEILING):
        raise ConfigError(
            f"{env('compress_cascade')}: the cap after @ must be at most {TOKEN_CEILING} tokens, "
            f"got {_shown(cap)}"
        )
    if s.generator_base_url and not s.generator_model:
        raise ConfigError(f"{env('generator_base_url')} needs {env('generator_model')}")
    if s.generator_base_url and not s.generator_base_url.startswith(("http://", "https://")):
        raise ConfigError(f"{env('generator_base_url')} must start with http:// or https://")
    if not isinstance(s.device, str) or _DEVICE.fullmatch(s.device) is None:
        raise ConfigError(
            f"{env('device')} must be auto, cpu, cuda, cuda:N or mps, got {s.device!r}"
        )
    if s.dtype not in _DTYPES:
        raise ConfigError(f"{env('dtype')} must be one of {', '.join(_DTYPES)}, got {s.dtype!r}")
    if s.embed_dtype not in _DTYPES:
        raise ConfigError(
            f"{env('embed_dtype')} must be one of {', '.join(_DTYPES)}, got {s.embed_dtype!r}"
        )
    if s.cache_backend not in _CACHE_BACKENDS:
        raise ConfigError(
            f"{env('cache_backend')} must be one of {', '.join(_CACHE_BACKENDS)}, "
            f"got {s.cache_backend!r}"
        )
    if s.cache_scope not in _CACHE_SCOPES:
        raise ConfigError(
            f"{env('cache_scope')} must be one of {', '.join(_CACHE_SCOPES)}, got {s.cache_scope!r}"
        )
    if s.cache_scope == "key" and not s.api_keys:
        raise ConfigError(f"{env('cache_scope')}=key needs {env('api_keys')}")
    if s.cache_backend == "redis" and not s.redis_url:
        raise ConfigError(f"{env('cache_backend')}=redis needs {env('redis_url')}")
    if s.redis_url and not s.redis_url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(f"{env('redis_url')} must start with redis://, rediss:// or unix://")
    if s.log_level not in _LOG_LEVELS:
        raise ConfigError(f"{env('log_level')} must be one of {', '.join(_LOG_LEVELS)}")
    if not s.proxy:
        raise ConfigError(f"{env('proxy')} must not be empty")
    if not isinstance(s.multilingual_proxy, str) or not s.multilingual_proxy.strip():
        raise ConfigError(
            f"{env('multilingual_proxy')} must be auto, none or a proxy name or path, "
            f"got {_shown(s.multilingual_proxy)}"
        )
    if any(not k or any(c.isspace() for c in k) for k in s.api_keys):
        raise ConfigError(f"{env('api_keys')} entries must be non-empty and contain no spaces")
    for proxy in s.trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise ConfigError(
                f"{env('trusted_proxies')} entries must be IP addresses or CIDR ranges, "
                f"got {proxy!r}"
            ) from None


__all__ = [
    "BOUNDS",
    "COUNT_CEILING",
    "TOKEN_CEILING",
    "Bound",
    "CacheBackend",
    "CacheScope",
    "Settings",
]
