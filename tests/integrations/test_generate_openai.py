"""OpenAIChatGenerator against a real OpenAI-compatible HTTP server on loopback (see conftest.py:
the packaged proxy behind ``/v1/chat/completions``), compared with the in-process generator."""

from __future__ import annotations

import re
import socket
from typing import Any

import pytest

from ragattn.errors import GeneratorError, InvalidInputError
from ragattn.generate import LocalGenerator, OpenAIChatGenerator, build_messages

API_KEY = "sk-test-key"  # OPENAI_API_KEY, which tests/integrations/conftest.py requires
QUESTION = "When was the Eiffel Tower completed?"
PASSAGES = [
    "Eiffel Tower: The tower was completed on 31 March 1889.",
    "Banana: Bananas are rich in potassium.",
]

pytestmark = pytest.mark.slow


def test_endpoint_answer_equals_the_local_generator(openai_server: str, proxy: Any) -> None:
    expected = LocalGenerator(proxy, max_new_tokens=24).generate(QUESTION, PASSAGES)
    with OpenAIChatGenerator(
        f"{openai_server}/v1", "smollm2-135m", api_key=API_KEY, max_tokens=24
    ) as gen:
        got = gen.generate(QUESTION, PASSAGES)
    assert got.text == expected.text
    assert "1889" in got.text
    assert got.prompt_tokens == expected.prompt_tokens
    assert got.completion_tokens == expected.completion_tokens
    assert got.model == "smollm2-135m"
    assert got.seconds > 0


def test_wrong_api_key_is_a_generator_error(openai_server: str) -> None:
    with (
        OpenAIChatGenerator(f"{openai_server}/v1", "m", api_key="sk-wrong") as gen,
        pytest.raises(GeneratorError, match=r"HTTP 401 \(the API key was rejected.*Incorrect API"),
    ):
        gen.generate(QUESTION, PASSAGES)


def test_server_error_is_a_generator_error(openai_server: str) -> None:
    with (
        OpenAIChatGenerator(f"{openai_server}/broken/v1", "m") as gen,
        pytest.raises(GeneratorError, match=re.escape("HTTP 500: the model crashed")),
    ):
        gen.generate(QUESTION, PASSAGES)


def test_wrong_route_names_the_base_url(openai_server: str) -> None:
    with (
        OpenAIChatGenerator(openai_server, "m") as gen,  # missing /v1
        pytest.raises(GeneratorError, match=re.escape("HTTP 404 (no such route or model")),
    ):
        gen.generate(QUESTION, PASSAGES)


def test_timeout_is_a_generator_error(openai_server: str) -> None:
    with (
        OpenAIChatGenerator(f"{openai_server}/slow/v1", "m", timeout=0.5) as gen,
        pytest.raises(GeneratorError, match="did not answer within the timeout"),
    ):
        gen.generate(QUESTION, PASSAGES)


def test_non_completion_body_is_a_generator_error(openai_server: str) -> None:
    with (
        OpenAIChatGenerator(f"{openai_server}/notchat/v1", "m") as gen,
        pytest.raises(GeneratorError, match="did not return a chat completion"),
    ):
        gen.generate(QUESTION, PASSAGES)


def test_unreachable_server_is_a_generator_error() -> None:
    with socket.socket() as s:  # a port that was free a moment ago and has no listener now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with (
        OpenAIChatGenerator(f"http://127.0.0.1:{port}/v1", "m", timeout=5) as gen,
        pytest.raises(GeneratorError, match="cannot reach the generator"),
    ):
        gen.generate(QUESTION, PASSAGES)


def test_invalid_arguments() -> None:
    with pytest.raises(InvalidInputError, match="base_url must start with http"):
        OpenAIChatGenerator("localhost:8000/v1", "m")
    with pytest.raises(InvalidInputError, match="question must be a non-empty string"):
        build_messages(" ", PASSAGES)
    with pytest.raises(InvalidInputError, match="context_passages must be a list of strings"):
        build_messages(QUESTION, "one string")


def test_ragattn_ask_with_the_openai_generator(
    openai_server: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from ragattn.cli import app
    from ragattn.retrieve import Index

    corpus = [{"id": "eiffel", "title": "Eiffel Tower", "text": PASSAGES[0].split(": ", 1)[1]}]
    Index.build(corpus, tmp_path / "idx", dense=False, chunk_words=None)
    monkeypatch.setenv("TEST_GENERATOR_KEY", API_KEY)
    args = ["ask", QUESTION, "--index", str(tmp_path / "idx"), "--mode", "bm25", "--no-rerank"]
    endpoint = ["--generator", "openai", "--base-url", f"{openai_server}/v1", "--model", "served"]
    ok = CliRunner().invoke(app, [*args, *endpoint, "--api-key-env", "TEST_GENERATOR_KEY"])
    assert ok.exit_code == 0, ok.output
    # the model name the endpoint echoed (rich may wrap the line anywhere)
    assert re.search(r"completion\s+tokens\s+by\s+served", ok.output)
    rejected = CliRunner().invoke(app, [*args, *endpoint, "--api-key-env", "UNSET_KEY_VARIABLE"])
    assert rejected.exit_code == 2
    assert "HTTP 401" in rejected.output
