"""Fixtures for the evaluation tests: counting tokenizers (the shared data folder, ``data_dir``,
is in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


class WhitespaceTokenizer:
    """A transparent stand-in for a HF tokenizer: one token per whitespace-separated word."""

    name_or_path = "whitespace"

    def __call__(self, texts, *, add_special_tokens=False):  # noqa: ANN001, ANN204
        return {"input_ids": [t.split() for t in texts]}


@pytest.fixture()
def ws_tokenizer() -> WhitespaceTokenizer:
    return WhitespaceTokenizer()


@pytest.fixture(scope="session")
def proxy_tokenizer():  # noqa: ANN201
    """The proxy's HF tokenizer from the ragattn model cache."""
    found = sorted((Path.home() / ".cache" / "ragattn").glob("SmolLM2-135M-Instruct.Q4_1-*"))
    if not found:
        pytest.skip("proxy tokenizer not in ~/.cache/ragattn")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(found[0]))
