from __future__ import annotations

import dataclasses
import re

import pytest

from ragattn.errors import ConfigError
from ragattn.settings import Settings


def test_defaults_from_empty_environment() -> None:
    s = Settings.from_env({})
    assert s == Settings()
    assert s.max_documents == 1000
    assert s.cache_backend == "memory"
    assert s.api_keys == ()


def test_parses_every_kind_of_value() -> None:
    s = Settings.from_env(
        {
            "RAGATTN_PROXY": "gemma3-270m",
            "RAGATTN_DTYPE": "BFloat16",
            "RAGATTN_THREADS": "2",
            "RAGATTN_MAX_DOCUMENTS": "50",
            "RAGATTN_MAX_BODY_BYTES": "1_000_000",
            "RAGATTN_CACHE_BACKEND": "Redis",
            "RAGATTN_REDIS_URL": "redis://localhost:6379/0",
            "RAGATTN_REDIS_TIMEOUT_S": "0.5",
            "RAGATTN_API_KEYS": "k1, k2 ,,",
            "RAGATTN_LOG_LEVEL": "debug",
            "RAGATTN_RATE_LIMIT_PER_MINUTE": "120",
            "UNRELATED": "x",
        }
    )
    assert s.proxy == "gemma3-270m"
    assert s.dtype == "bfloat16"
    assert s.threads == 2
    assert s.max_documents == 50
    assert s.max_body_bytes == 1_000_000
    assert s.cache_backend == "redis"
    assert s.redis_timeout_s == 0.5
    assert s.api_keys == ("k1", "k2")
    assert s.log_level == "DEBUG"
    assert s.rate_limit_per_minute == 120


def test_blank_values_keep_defaults() -> None:
    assert Settings.from_env({"RAGATTN_THREADS": "  ", "RAGATTN_PROXY": ""}) == Settings()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAGATTN_MAX_DOCUMENTS": "many"}, "RAGATTN_MAX_DOCUMENTS must be an integer, got 'many'"),
        ({"RAGATTN_MAX_DOCUMENTS": "0"}, "RAGATTN_MAX_DOCUMENTS must be a positive integer, got 0"),
        ({"RAGATTN_QUEUE_SIZE": "-3"}, "RAGATTN_QUEUE_SIZE must be a positive integer, got -3"),
        (
            {"RAGATTN_CACHE_BACKEND": "disk"},
            "RAGATTN_CACHE_BACKEND must be one of memory, redis, none",
        ),
        ({"RAGATTN_CACHE_BACKEND": "redis"}, "RAGATTN_CACHE_BACKEND=redis needs RAGATTN_REDIS_URL"),
        ({"RAGATTN_REDIS_URL": "localhost:6379"}, "RAGATTN_REDIS_URL must start with redis://"),
        ({"RAGATTN_DTYPE": "float16"}, "RAGATTN_DTYPE must be one of auto, float32, bfloat16"),
        ({"RAGATTN_PORT": "70000"}, "RAGATTN_PORT must be in 1..65535"),
        ({"RAGATTN_REDIS_TIMEOUT_S": "soon"}, "RAGATTN_REDIS_TIMEOUT_S must be a number"),
        ({"RAGATTN_LOG_LEVEL": "loud"}, "RAGATTN_LOG_LEVEL must be one of"),
        ({"RAGATTN_RATE_LIMIT_PER_MINUTE": "-1"}, "RAGATTN_RATE_LIMIT_PER_MINUTE must be >= 0"),
        ({"RAGATTN_BLOCK_STORE_MB": "-1"}, "RAGATTN_BLOCK_STORE_MB must be an integer >= 0"),
        (
            {"RAGATTN_COMPRESS_SELECTION": "paragraphs"},
            "RAGATTN_COMPRESS_SELECTION must be documents or sentences",
        ),
        *(
            ({"RAGATTN_COMPRESS_CASCADE": bad}, "RAGATTN_COMPRESS_CASCADE must be default, off")
            for bad in ("on", "0:lexical", "1.5", "0.8:bert", "0.8:", "0.8:lexical+both")
        ),
    ],
)
def test_bad_values_raise_config_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Settings.from_env(env)


def test_frozen_and_keyword_only() -> None:
    s = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.proxy = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Settings("smollm2-135m")  # type: ignore[misc]


def test_secrets_are_masked_in_repr() -> None:
    s = Settings(
        api_keys=("sk-very-secret-key",),
        redis_url="redis://user:hunter2@cache:6379/0",
        generator_api_key="sk-generator-secret",
    )
    text = repr(s)
    assert "sk-generator-secret" not in text
    assert "sk-very-secret-key" not in text
    assert "hunter2" not in text
    assert "redis://user:***@cache:6379/0" in text


def test_every_field_is_settable_from_the_environment() -> None:
    names = {f.name for f in dataclasses.fields(Settings)}
    assert {"proxy", "api_keys", "cache_backend", "max_tokens_per_doc", "index_dir"} <= names
    s = Settings.from_env({"RAGATTN_INDEX_DIR": "/data/index", "RAGATTN_RERANK_METHOD": "icr"})
    assert s.index_dir == "/data/index"
    assert s.rerank_method == "icr"


@pytest.mark.parametrize(
    "value", ["default", "off", "0.8:lexical", "0.6:bm25", "1", ".9:documents", "0.8:lexical+links"]
)
def test_a_cascade_setting_is_accepted(value: str) -> None:
    assert Settings.from_env({"RAGATTN_COMPRESS_CASCADE": value}).compress_cascade == value
