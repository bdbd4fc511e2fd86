"""Schemathesis against a live server: every operation of the app's own OpenAPI document.

Positive and negative examples per operation (bounded so CI stays short); checks: no 5xx, every
status code and response body declared in the schema, and schema-violating input refused with a
4xx. Small limits keep generated requests cheap on a shared CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from api import create_app  # noqa: E402
from ragattn.settings import Settings  # noqa: E402

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 12
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
CONFIG = {
    "checks": {
        # Negative data may also trip a size limit before its type is looked at.
        "negative_data_rejection": {
            "expected-statuses": ["400", "401", "404", "405", "413", "415", "422", "429"]
        }
    },
    "generation": {"mode": "all", "max-examples": MAX_EXAMPLES},
}


@pytest.fixture(scope="module")
def live_url(reranker: Any, compressor: Any, live_server: Any) -> Iterator[str]:
    settings_ = Settings(
        max_documents=4,
        max_query_tokens=32,
        max_tokens_per_doc=96,
        max_body_bytes=20_000,
        cache_backend="memory",
        log_level="WARNING",
    )
    app = create_app(settings_, reranker=reranker, compressor=compressor)
    with live_server(app) as url:
        yield url


@pytest.fixture(scope="module")
def api_schema(live_url: str) -> Any:
    from schemathesis.config import SchemathesisConfig

    config = SchemathesisConfig.from_dict(CONFIG)
    return schemathesis.openapi.from_url(f"{live_url}/schema/openapi.json", config=config)


def _operations(schema: Any) -> list[Any]:
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_api_conforms_to_its_openapi_schema(api_schema: Any, live_url: str, mode: str) -> None:
    """Every operation of the served schema, ``MAX_EXAMPLES`` generated requests each."""
    from hypothesis import given
    from schemathesis import GenerationMode

    operations = _operations(api_schema)
    labels = {op.label for op in operations}
    assert {"POST /v2/rerank", "POST /v1/compress", "GET /ready"} <= labels, labels
    calls: list[str] = []
    for operation in operations:
        if mode == "negative" and not len(operation.body):
            continue  # nothing to violate: the GET probes take no input
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
            case.call_and_validate(base_url=live_url, checks=CHECKS, timeout=120)
            calls.append(case.operation.label)

        run()
    assert set(calls) >= {"POST /v2/rerank", "POST /v1/compress"}
