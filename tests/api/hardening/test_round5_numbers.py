"""Issue "Hardening, round five" §1: every number a caller or an operator sends has a bound.

A budget of hundreds of digits was a 500 (an overflow inside the budget's own check), a ``top_k``
of thousands of digits a 413 that echoed the whole number, and ``RAGATTN_TOKENS_PER_SECOND=1e308``
loaded the model for 15 s and then crashed the server. Now every request number (budgets, counts,
``k``, ``top_k``, ``top_n``, the unused Cohere integers, integer ids) has a bound checked before any
arithmetic: past it is a 400 naming the field, never a 500, with the value cut to 64 characters;
every ``RAGATTN_*`` number is refused at start-up, before the model loads, naming the variable and
its range (the per-variable cases are in ``tests/unit/test_settings.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn.settings import COUNT_CEILING, TOKEN_CEILING
from ragattn_api import schemas
from ragattn_api.body import MAX_NUMBER_CHARS
from ragattn_api.logsafe import MAX_ECHO_CHARS

pytestmark = pytest.mark.anyio

JSON = {"content-type": "application/json"}
CORPUS = [{"id": "a", "text": "Paris is the capital of France."}, {"id": "b", "text": "Rome."}]
V = "@@"
"""Where a test puts the number in a body template."""

_DOCS = '"query": "q", "documents": ["a. b."]'
FIELDS: list[tuple[str, str, str]] = [
    *(
        (route, name, f'{{{_DOCS}, "{name}": {V}}}')
        for route in ("/v2/rerank", "/v1/rerank")
        for name in ("top_n", "top_k", "max_tokens_per_doc", "max_chunks_per_doc", "priority")
    ),
    ("/rerank", "top_n", f'{{"query": "q", "texts": ["a. b."], "top_n": {V}}}'),
    *(
        (route, name, f'{{{_DOCS}, "prune": {{"{name}": {V}}}}}')
        for route in ("/v2/rerank", "/v1/rerank", "/rerank")
        for name in ("target_tokens", "ratio", "threshold")
    ),
    *(
        (route, "max_tokens", f'{{{_DOCS}, "prune": {{"ratio": 0.5, "max_tokens": {V}}}}}')
        for route in ("/v2/rerank", "/v1/rerank", "/rerank")
    ),
    ("/v2/rerank", "id", f'{{"query": "q", "documents": [{{"text": "a", "id": {V}}}]}}'),
    *(
        (route, name, f'{{{_DOCS}, "{name}": {V}}}')
        for route in ("/v1/compress", "/v1/rerank_compress")
        for name in ("target_tokens", "target_token", "ratio", "rate", "threshold")
    ),
    *(
        (route, "max_tokens", f'{{{_DOCS}, "ratio": 0.5, "max_tokens": {V}}}')
        for route in ("/v1/compress", "/v1/rerank_compress")
    ),
    *(
        ("/v1/rerank_compress", name, f'{{{_DOCS}, "ratio": 0.5, "{name}": {V}}}')
        for name in ("top_n", "top_k")
    ),
    *(
        ("/v1/retrieve", name, f'{{"query": "capital", "mode": "bm25", "{name}": {V}}}')
        for name in ("k", "top_n")
    ),
    *(
        ("/v1/ask", name, f'{{"question": "capital", "mode": "bm25", "{name}": {V}}}')
        for name in ("top_k", "top_n", "ratio", "max_context_tokens")
    ),
]
"""Every number field of every route's request: (route, field, body template)."""

MANY_DIGITS = "7" * 2_000
HUNDREDS = "9" * 300
REFUSED_EVERYWHERE: dict[str, str] = {
    "2,000 digits": MANY_DIGITS,
    "300 digits": HUNDREDS,
    "-300 digits": "-" + HUNDREDS,
    "30 digits": "1" * 30,
    "1e300": "1e300",
    "1e400": "1e400",
    "-1e400": "-1e400",
    "a fraction of 2,000 digits": "0." + "3" * 2_000,
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
}
"""Raw JSON numbers (and the constants JSON lacks) that no number field of the API accepts."""
SIGNED = {"priority", "id"}
"""Integers accepted for compatibility, negative ones included (an id, Cohere's ``priority``)."""
FRACTIONS = {"ratio", "rate", "threshold"}


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("numbers-index") / "idx"
    Index.build(CORPUS, out, dense=False, chunk_words=None)
    return out


def _refused_values(field: str) -> dict[str, str]:
    values = dict(REFUSED_EVERYWHERE)
    if field not in SIGNED:
        values["negative"] = "-3"
    if field not in FRACTIONS:
        values["a fraction"] = "2.5"
    return values


def _assert_refused(resp: Any, field: str, raw: str) -> str:
    """A 400 ``invalid_request`` that names the field and repeats at most 64 characters of
    the value."""
    assert resp.status_code == 400, (field, raw[:20], resp.status_code, resp.text[:300])
    body = resp.json()
    assert body["error_type"] == "invalid_request", body
    message: str = body["message"]
    assert len(resp.content) < 500, message
    if len(raw) > MAX_ECHO_CHARS:
        assert raw[: MAX_ECHO_CHARS + 1] not in message, message
        assert f"({len(raw)} characters)" in message, message
    if raw.lstrip("-") not in ("NaN", "Infinity"):  # the JSON parser refuses these: no field
        assert f".{field}`" in message, (field, message)
    return message


def test_every_number_field_is_in_the_table() -> None:
    """A number field added to a request Struct must be added to :data:`FIELDS` too."""
    found = set()
    for struct in (
        schemas.RerankRequest,
        schemas.PruneIn,
        schemas.DocumentIn,
        schemas.CompressRequest,
        schemas.RerankCompressRequest,
        schemas.RetrieveRequest,
        schemas.AskRequest,
    ):
        for field in msgspec.inspect.type_info(struct).fields:
            kinds = getattr(field.type, "types", (field.type,))
            numeric = (msgspec.inspect.IntType, msgspec.inspect.FloatType)
            if any(isinstance(k, numeric) for k in kinds):
                found.add(field.encode_name)
    assert found == {field for _, field, _ in FIELDS}


async def test_every_number_past_its_bound_is_a_400_on_every_route(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    app = make_app(cache_backend="none", index_dir=str(index_dir))
    async with AsyncTestClient(app=app) as c:
        for route, field, template in FIELDS:
            for raw in _refused_values(field).values():
                body = template.replace(V, raw).encode()
                _assert_refused(await c.post(route, content=body, headers=JSON), field, raw)


async def test_the_reported_requests(make_app: Callable[..., Litestar], index_dir: Path) -> None:
    """Budgets of hundreds of digits (a 500) and a ``top_k`` / ``k`` of thousands of digits (a
    413 echoing 2,000 characters)."""
    app = make_app(cache_backend="none", index_dir=str(index_dir))
    async with AsyncTestClient(app=app) as c:
        budgets = {
            "/v2/rerank": f'{{{_DOCS}, "prune": {{"target_tokens": {HUNDREDS}}}}}',
            "/v1/compress": f'{{{_DOCS}, "target_tokens": {HUNDREDS}}}',
            "/v1/rerank_compress": f'{{{_DOCS}, "target_tokens": {HUNDREDS}}}',
        }
        for route, body in budgets.items():
            resp = await c.post(route, content=body.encode(), headers=JSON)
            message = _assert_refused(resp, "target_tokens", HUNDREDS)
            assert f"'{'9' * MAX_ECHO_CHARS}'... (300 characters)" in message, message
            assert f"longer than {MAX_NUMBER_CHARS} characters" in message, message
        counts = {
            "/v1/ask": ("top_k", f'{{"question": "capital", "top_k": {MANY_DIGITS}}}'),
            "/v1/retrieve": ("k", f'{{"query": "capital", "k": {MANY_DIGITS}}}'),
            "/v2/rerank": ("top_k", f'{{{_DOCS}, "top_k": {MANY_DIGITS}}}'),
        }
        for route, (field, body) in counts.items():
            resp = await c.post(route, content=body.encode(), headers=JSON)
            _assert_refused(resp, field, MANY_DIGITS)
        # Within the wire bound but past RAGATTN_MAX_DOCUMENTS: the 413, echoing a short number.
        over = await c.post(
            "/v1/retrieve", json={"query": "capital", "mode": "bm25", "k": COUNT_CEILING}
        )
        assert (over.status_code, over.json()["error_type"]) == (413, "input_too_large")
        assert f"k={COUNT_CEILING} exceeds RAGATTN_MAX_DOCUMENTS" in over.json()["message"]
        past = await c.post(
            "/v1/retrieve", json={"query": "capital", "mode": "bm25", "k": COUNT_CEILING + 1}
        )
        message = _assert_refused(past, "k", str(COUNT_CEILING + 1))
        assert f"<= {COUNT_CEILING} - at `$.k`; sent {COUNT_CEILING + 1}" in message


async def test_the_bounds_themselves_are_served(client: AsyncTestClient[Litestar]) -> None:
    """The bounds are the documented ones: their edges are accepted, one past them is not."""
    top = f'{{"query": "q", "documents": ["a", "b"], "top_n": {COUNT_CEILING}}}'
    ok = await client.post("/v2/rerank", content=top.encode(), headers=JSON)
    assert ok.status_code == 200, ok.text
    assert len(ok.json()["results"]) == 2
    for spelled in (str(TOKEN_CEILING), "1e7", "10000000.0"):
        budget = f'{{{_DOCS}, "target_tokens": {spelled}}}'
        kept = await client.post("/v1/compress", content=budget.encode(), headers=JSON)
        assert kept.status_code == 200, (spelled, kept.text)
    over = await client.post(
        "/v1/compress", content=f'{{{_DOCS}, "target_tokens": 10000001}}'.encode(), headers=JSON
    )
    message = _assert_refused(over, "target_tokens", "10000001")
    assert f"<= {TOKEN_CEILING} - at `$.target_tokens`; sent 10000001" in message


async def test_a_refused_number_outside_the_typed_fields_is_a_400(
    client: AsyncTestClient[Litestar],
) -> None:
    """A number in free-form metadata or in an unknown (ignored) field has the body-wide bound."""
    bodies = {
        "metadata": '{"query": "q", "documents": [{"text": "a", "metadata": {"n": @@}}]}',
        "ignored": '{"query": "q", "documents": ["a"], "colour": @@}',
    }
    for name, template in bodies.items():
        for raw in (HUNDREDS, MANY_DIGITS, "1e999"):
            body = template.replace(V, raw).encode()
            resp = await client.post("/v2/rerank", content=body, headers=JSON)
            assert resp.status_code == 400, (name, resp.text[:300])
            message = resp.json()["message"]
            assert message.startswith("invalid request body: the body holds the number "), message
            assert len(resp.content) < 500, message
            if len(raw) > MAX_ECHO_CHARS:
                assert raw[: MAX_ECHO_CHARS + 1] not in message, message
                assert f"({len(raw)} characters)" in message, message


def test_the_bounds_are_in_the_openapi_document(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    """A client reading the document sees the bounds the server holds."""
    app = make_app(index_dir=str(index_dir))
    props = app.openapi_schema.to_schema()["components"]["schemas"]
    assert props["RerankRequest"]["properties"]["top_n"]["maximum"] == COUNT_CEILING
    assert props["RetrieveRequest"]["properties"]["top_n"]["maximum"] == COUNT_CEILING
    assert props["CompressRequest"]["properties"]["target_tokens"]["maximum"] == TOKEN_CEILING
    assert props["PruneIn"]["properties"]["target_tokens"]["maximum"] == TOKEN_CEILING
    assert props["PruneIn"]["properties"]["max_tokens"]["maximum"] == TOKEN_CEILING
    assert props["CompressRequest"]["properties"]["max_tokens"]["maximum"] == TOKEN_CEILING
    assert props["AskRequest"]["properties"]["max_context_tokens"]["maximum"] == TOKEN_CEILING
    assert props["DocumentIn"]["properties"]["id"]["maximum"] == 2**63 - 1


# --- settings: refused at start-up, before the model loads -----------------------------------


SETTINGS_CASES = {
    "RAGATTN_TOKENS_PER_SECOND": ("1e308", "must be a number > 0, got 1e+308 (range (0, "),
    "RAGATTN_REQUEST_TIMEOUT_S": ("1e308", "got 1e+308 (range [0, 86400])"),
    "RAGATTN_MAX_REQUEST_TOKENS": ("1" * 23, f"got {'1' * 23} (range 1..{TOKEN_CEILING})"),
}


@pytest.mark.parametrize("variable", sorted(SETTINGS_CASES))
def test_the_server_refuses_a_setting_before_loading_the_model(variable: str) -> None:
    """``python -m ragattn_api.server`` (the container's command) exits 2 naming the variable
    and its range; the model loader (transformers) was never imported: nothing was loaded."""
    value, expected = SETTINGS_CASES[variable]
    script = (
        "import sys\n"
        "from ragattn_api.server import main\n"
        "rc = main()\n"
        "print('loaded' if 'transformers' in sys.modules else 'not loaded')\n"
        "sys.exit(rc)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGATTN_")}
    env[variable] = value
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"error: {variable} must be " in done.stderr, done.stderr[-2000:]
    assert expected in done.stderr, done.stderr[-2000:]
    assert done.stdout.strip() == "not loaded"


def test_create_app_refuses_before_building_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    """``create_app()`` reads the environment first: a bad number never reaches the lifespan."""
    from ragattn.errors import ConfigError
    from ragattn_api import create_app

    monkeypatch.setenv("RAGATTN_TOKENS_PER_SECOND", "inf")
    with pytest.raises(ConfigError, match=r"^RAGATTN_TOKENS_PER_SECOND .* \(range \(0, "):
        create_app()
