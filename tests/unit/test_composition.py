"""One composition root (issue 44 item 2): every ``RAGATTN_*`` setting that shapes the engines,
the cache or the pipeline reaches what ``ragattn serve`` builds and what ``ragattn ask`` builds.

The settings are read from :class:`Settings` itself, so a new one fails here until it has a case
(or an entry in ``EXEMPT`` saying why only one edge reads it). Each case sets one variable and
goes through both edges' real entries: ``create_app()`` reading the environment, its lifespan
loading on the model thread, and ``ragattn ask`` with no options; then it reads the pipeline each
built. One step is replaced: the proxy's load records its arguments (what ``proxy``, ``device``,
``dtype``, ``threads`` and ``proxy_cache_dir`` must reach) and returns the session's loaded proxy,
since loading other weights, or onto a GPU, is the proxy's own tests' business. Every case also
runs without its variable (the control), which must read differently: no probe passes by reading
a default.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from typer.testing import CliRunner

from ragattn.settings import ENV_PREFIX, Settings

EXEMPT: dict[str, str] = {
    "host": "the address `ragattn serve` binds",
    "port": "the port `ragattn serve` binds",
    "log_level": "the service's log level (the command line prints, it does not log)",
    "api_keys": "HTTP authentication",
    "rate_limit_per_minute": "requests per minute of an HTTP client",
    "trusted_proxies": "which reverse proxies' forwarded headers the server believes",
    "queue_size": "the service's model queue (the command line runs one question)",
    "shutdown_grace_s": "how long the server drains on SIGTERM",
    "body_timeout_s": "how long an HTTP body may take to arrive",
    "max_body_bytes": "the largest HTTP body",
    "max_header_bytes": "the most HTTP header bytes",
    "max_documents": "documents in one HTTP request (the pipeline retrieves its own top_k)",
    "max_request_tokens": "the budget of one HTTP request (tests/api/hardening/"
    "test_request_budget.py); the pipeline holds questions and passages to their own limits",
    "tokens_per_second": "derives the HTTP request budget (tests/unit/test_request_budget.py)",
    "cache_scope": "per-API-key cache partitions: needs api_keys, which only the service has",
    "cache_dir": "the lab commands' on-disk caches (ragattn probe train), read by neither edge",
}
"""Settings only one edge reads, with the reason."""

QUESTION = "When was the Eiffel Tower completed?"
LONG = "The Eiffel Tower in Paris was completed in 1889 for the World's Fair. " * 6
CORPUS = [
    {"id": "eiffel", "title": "Eiffel Tower", "text": LONG},
    {"id": "banana", "title": "Banana", "text": "Bananas are yellow and grow in the tropics."},
]


@dataclass(frozen=True, slots=True)
class Built:
    """What one edge built: its pipeline, the arguments of its one proxy load, and the dtype of
    the shared MiniLM right after (a process-wide choice, so read before the other edge builds)."""

    pipeline: Any
    load: dict[str, Any]
    embed_dtype: str = field(default_factory=lambda: _embed_dtype())
    loads: list[dict[str, Any]] = field(default_factory=list)
    """Every proxy load of the test so far, later ones included (the multilingual proxy's)."""


@dataclass(frozen=True, slots=True)
class Case:
    """One setting: its variable's value, how to read it back from what an edge built, and what
    must be read. ``{placeholders}`` name the fixture's folders and servers; ``companions`` are
    the other variables it needs (in the control too)."""

    value: str
    probe: Callable[[Built], Any]
    expected: Any
    companions: tuple[tuple[str, str], ...] = ()


def _compressor(b: Built) -> Any:
    return b.pipeline.compressor


def _question_refused(b: Built) -> bool:
    from ragattn.errors import InputTooLargeError

    try:
        b.pipeline.check_question(QUESTION)
    except InputTooLargeError:
        return True
    return False


def _cache_dirs(b: Built) -> tuple[Any, Any]:
    """The cache folder of the English proxy's load and of the multilingual proxy's, which the
    compressor loads on its first German call."""
    from ragattn.types import Document

    german = "Der Eiffelturm in Paris wurde im Jahr 1889 für die Weltausstellung fertiggestellt."
    _compressor(b).engine_for("Wann wurde der Eiffelturm fertig?", [Document(text=german)], "auto")
    assert b.loads[-1]["name_or_path"] == "gemma3-270m"
    return b.load["cache_dir"], b.loads[-1]["cache_dir"]


def _passage_truncated(b: Built) -> bool:
    found = b.pipeline.retrieve(QUESTION, k=2, mode="bm25", rerank=False)
    return any("truncated" in w for w in found.warnings)


def _sent(b: Built) -> dict[str, Any]:
    """The request the pipeline's generator sends (the recording endpoint keeps the last one)."""
    b.pipeline.generator.generate(QUESTION, ["The tower was completed in 1889."])
    return Endpoint.last


def _answer_or_timeout(b: Built) -> str:
    from ragattn.generate import GeneratorError

    try:
        b.pipeline.generator.generate(QUESTION, ["The tower was completed in 1889."])
    except GeneratorError as exc:
        return "timed out" if "timeout" in str(exc) else str(exc)
    return "answered"


def _redis_timeout(b: Built) -> Any:
    # redis-py keeps the socket timeout in its pool's connection arguments.
    return b.pipeline.cache._client.connection_pool.connection_kwargs["socket_timeout"]


REDIS = (("cache_backend", "redis"), ("redis_url", "redis://127.0.0.1:9/0"))
ENDPOINT = (("generator_base_url", "{endpoint}"), ("generator_model", "m"))
SLOW_ENDPOINT = (("generator_base_url", "{slow_endpoint}"), ("generator_model", "m"))

CASES: dict[str, Case] = {
    "proxy": Case("my-proxy", lambda b: b.load["name_or_path"], "my-proxy"),
    "proxy_cache_dir": Case("{root}/gguf", _cache_dirs, ("{root}/gguf", "{root}/gguf")),
    "device": Case("cuda:3", lambda b: b.load["device"], "cuda:3"),
    "dtype": Case("bfloat16", lambda b: b.load["dtype"], "bfloat16"),
    "embed_dtype": Case("bfloat16", lambda b: b.embed_dtype, "bfloat16"),
    "threads": Case("3", lambda b: b.load["threads"], 3),
    "rerank_method": Case("icr", lambda b: b.pipeline.reranker.method, "icr"),
    "compress_method": Case("fused", lambda b: _compressor(b).method, "fused"),
    "compress_selection": Case("sentences", lambda b: _compressor(b).selection, "sentences"),
    "compress_cascade": Case(
        "0.6:bm25",
        lambda b: (_compressor(b).cascade.keep, _compressor(b).cascade.scorer),
        (0.6, "bm25"),
    ),
    "compress_first_stage_prior": Case("0.5", lambda b: _compressor(b).first_stage_prior, 0.5),
    "multilingual_proxy": Case("none", lambda b: _compressor(b).multilingual, None),
    "block_store_mb": Case(
        "16",
        lambda b: _compressor(b).blocks and _compressor(b).blocks.store.max_bytes,
        16 << 20,
    ),
    "models_dir": Case(
        "{models}",
        lambda b: (str(_compressor(b).models_dir), str(_chosen_models_dir())),
        ("{models}", "{models}"),
    ),
    "max_query_tokens": Case("4", _question_refused, True),
    "max_tokens_per_doc": Case("8", _passage_truncated, True),
    "cache_backend": Case("none", lambda b: type(b.pipeline.cache).__name__, "NullCache"),
    "cache_ttl_s": Case("60", lambda b: b.pipeline.cache.ttl_s, 60),
    "cache_max_items": Case("5", lambda b: b.pipeline.cache.max_items, 5),
    "redis_url": Case(
        "redis://127.0.0.1:9/5", lambda b: b.pipeline.cache.url, "redis://127.0.0.1:9/5", REDIS
    ),
    "redis_timeout_s": Case("0.25", _redis_timeout, 0.25, REDIS),
    "redis_cooldown_s": Case("7", lambda b: b.pipeline.cache.cooldown_s, 7.0, REDIS),
    "index_dir": Case("{index2}", lambda b: str(b.pipeline.index.path), "{index2}"),
    "generator_base_url": Case(
        "{endpoint}",
        lambda b: getattr(b.pipeline.generator, "base_url", None),
        "{endpoint}",
        (("generator_model", "m"),),
    ),
    "generator_model": Case("my-model", lambda b: _sent(b)["body"]["model"], "my-model", ENDPOINT),
    "generator_api_key": Case(
        "sk-test", lambda b: _sent(b)["authorization"], "Bearer sk-test", ENDPOINT
    ),
    "generator_max_tokens": Case("7", lambda b: b.pipeline.generator.max_new_tokens, 7),
    "request_timeout_s": Case("0.3", _answer_or_timeout, "timed out", SLOW_ENDPOINT),
}


def _embed_dtype() -> str:
    from ragattn.devices import dtype_name
    from ragattn.embed import shared_embedder

    return dtype_name(shared_embedder().dtype)


def _chosen_models_dir() -> Path:
    from ragattn.assets import default_models_dir

    return default_models_dir()


class Endpoint(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that records the last request; under ``/slow`` it
    answers after 1.5 s."""

    last: dict[str, Any] = {}

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Endpoint.last = {"body": body, "authorization": self.headers.get("Authorization")}
        if self.path.startswith("/slow"):
            time.sleep(1.5)
        answer = {"choices": [{"message": {"content": "1889"}}], "model": body["model"]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The folders and endpoints the cases' ``{placeholders}`` name."""
    from ragattn.assets import packaged_models_dir
    from ragattn.retrieve import Index

    root = tmp_path_factory.mktemp("composition")
    for name in ("index", "index2"):
        Index.build(CORPUS, root / name, dense=False, chunk_words=None)
    models = root / "models"
    models.mkdir()
    (models / "smollm2-135m").symlink_to(packaged_models_dir() / "smollm2-135m")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    yield {
        "root": str(root),
        "index": str(root / "index"),
        "index2": str(root / "index2"),
        "models": str(models),
        "endpoint": f"{url}/v1",
        "slow_endpoint": f"{url}/slow/v1",
    }
    server.shutdown()


def _fill(value: Any, places: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**places)
    if isinstance(value, tuple):
        return tuple(_fill(v, places) for v in value)
    return value


class Edges:
    """Runs the service's and the command line's entries under an environment."""

    def __init__(self, proxy: Any, places: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
        self.proxy = proxy
        self.places = places
        self.monkeypatch = monkeypatch
        self.loads: list[dict[str, Any]] = []

    def _environment(self, variables: dict[str, str]) -> None:
        import os

        for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
            self.monkeypatch.delenv(name)
        self.monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        base = {"index_dir": "{index}", "tokens_per_second": "1000"}  # no start-up measurement
        for name, value in {**base, **variables}.items():
            self.monkeypatch.setenv(ENV_PREFIX + name.upper(), _fill(value, self.places))

    def _load(self, name_or_path: str, **options: Any) -> Any:
        self.loads.append({"name_or_path": name_or_path, **options})
        return self.proxy

    async def service(self) -> Built:
        from ragattn_api.app import create_app

        app = create_app()
        async with AsyncTestClient(app):
            deadline = time.monotonic() + 300
            while app.state.get("service") is None:
                if app.state.get("load_error") is not None:
                    raise app.state.load_error
                assert time.monotonic() < deadline, "the service did not load"
                await asyncio.sleep(0.02)
            return Built(app.state.service.pipeline, self.loads[-1], loads=self.loads)

    def command_line(self) -> Built:
        from ragattn.cli import app

        # The package's ``ask`` attribute is the command; the module is where it looks it up.
        ask_command = importlib.import_module("ragattn.cli.ask")
        from ragattn.errors import InvalidInputError

        built: list[Any] = []
        real = ask_command.build_ask_pipeline

        def keep(settings: Settings, **options: bool) -> Any:
            built.append(real(settings, **options))
            raise InvalidInputError("built; not answering")

        with self.monkeypatch.context() as patch:
            patch.setattr(ask_command, "build_ask_pipeline", keep)
            result = CliRunner().invoke(app, ["ask", QUESTION])
        assert "built; not answering" in result.output, result.output
        return Built(built[0], self.loads[-1], loads=self.loads)

    async def both(self, variables: dict[str, str]) -> dict[str, Built]:
        import ragattn.proxy

        self._environment(variables)
        self.monkeypatch.setattr(ragattn.proxy, "load_proxy", self._load)
        return {"service": await self.service(), "ragattn ask": self.command_line()}


@pytest.fixture
def edges(proxy: Any, places: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Edges]:
    from ragattn.assets import use_models_dir
    from ragattn.embed import DEFAULT_EMBED_DTYPE, use_embed_dtype

    yield Edges(proxy, places, monkeypatch)
    use_models_dir(None)  # the process-wide choices of a case must not leak into later tests
    use_embed_dtype(DEFAULT_EMBED_DTYPE)


ROUTED = [f.name for f in dataclasses.fields(Settings) if f.name not in EXEMPT]


def test_every_setting_is_routed_through_both_edges_or_exempt() -> None:
    assert sorted(set(ROUTED) - set(CASES)) == [], "give each new setting a case (or EXEMPT)"
    assert sorted(set(CASES) - set(ROUTED)) == []
    assert sorted(set(EXEMPT) - {f.name for f in dataclasses.fields(Settings)}) == []


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("name", ROUTED)
async def test_a_setting_reaches_the_service_and_ragattn_ask(
    name: str, edges: Edges, places: dict[str, str]
) -> None:
    case = CASES[name]
    expected = _fill(case.expected, places)
    companions = dict(case.companions)
    control = {edge: case.probe(b) for edge, b in (await edges.both(companions)).items()}
    assert expected not in control.values(), f"{name}: the probe reads {expected!r} without it"
    built = await edges.both({**companions, name: case.value})
    assert {edge: case.probe(b) for edge, b in built.items()} == {
        "service": expected,
        "ragattn ask": expected,
    }


@pytest.mark.slow
@pytest.mark.anyio
async def test_both_edges_generate_the_same_number_of_tokens_by_default(edges: Edges) -> None:
    """The command line once generated 64 tokens against the service's 48: one default now."""
    built = await edges.both({})
    assert {edge: b.pipeline.generator.max_new_tokens for edge, b in built.items()} == {
        "service": Settings().generator_max_tokens,
        "ragattn ask": Settings().generator_max_tokens,
    }
