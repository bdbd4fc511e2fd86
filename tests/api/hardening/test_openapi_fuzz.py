"""Schemathesis against a live server: every operation of the app's own OpenAPI document, every
check schemathesis has (``schemathesis.toml`` beside this file says why 413 and 422 are valid
answers to schema-valid requests), with and without API keys.

Positive and negative examples per operation, bounded so CI stays short; the larger campaign is
the ``st run`` command in docs/service.md. Small limits keep generated requests cheap.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.config import SchemathesisConfig  # noqa: E402

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI (the dev extra installs it there)
    import tomli as tomllib

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 12
KEY = "fuzz-key"
LIMITS: dict[str, Any] = {
    "max_documents": 4,
    "max_query_tokens": 32,
    "max_tokens_per_doc": 96,
    "max_body_bytes": 20_000,
    "cache_backend": "memory",
    "log_level": "WARNING",
    "request_timeout_s": 0,
}
CONFIG_FILE = Path(__file__).with_name("schemathesis.toml")


@pytest.fixture(scope="module", params=["open", "keyed"])
def live(
    request: pytest.FixtureRequest, production_server: Callable[..., Any]
) -> Iterator[tuple[str, dict[str, str]]]:
    keys = (KEY,) if request.param == "keyed" else ()
    with production_server(api_keys=keys, **LIMITS) as server:
        yield server.url, ({"Authorization": f"Bearer {KEY}"} if keys else {})


@pytest.fixture(scope="module")
def api_schema(live: tuple[str, dict[str, str]]) -> Any:
    url, _ = live
    data = tomllib.loads(CONFIG_FILE.read_text())
    data["generation"] = {"mode": "all", "max-examples": MAX_EXAMPLES}
    config = SchemathesisConfig.from_dict(data)
    return schemathesis.openapi.from_url(f"{url}/schema/openapi.json", config=config)


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_api_conforms_to_its_openapi_schema(
    api_schema: Any, live: tuple[str, dict[str, str]], mode: str
) -> None:
    """Every operation of the served schema: ``MAX_EXAMPLES`` requests each, all checks."""
    url, headers = live
    operations = [result.ok() for result in api_schema.get_all_operations()]
    labels = {op.label for op in operations}
    assert {"POST /v2/rerank", "POST /v1/compress", "GET /ready", "HEAD /health"} <= labels, labels
    calls: list[str] = []
    for operation in operations:
        if mode == "negative" and not len(operation.body):
            continue  # nothing to violate: the probes take no input
        strategy = operation.as_strategy(generation_mode=GenerationMode(mode))

        @given(case=strategy)
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: Any) -> None:
            case.call_and_validate(base_url=url, headers=headers, timeout=120)
            calls.append(case.operation.label)

        run()
    assert set(calls) >= {"POST /v2/rerank", "POST /v1/compress"}
