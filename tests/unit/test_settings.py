from __future__ import annotations

import dataclasses
import re

import pytest

from ragattn.errors import ConfigError
from ragattn.settings import BOUNDS, TOKEN_CEILING, Settings
from ragattn.types import MAX_TARGET_TOKENS


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
            "RAGATTN_EMBED_DTYPE": "Auto",
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
    assert s.embed_dtype == "auto"
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
        (
            {"RAGATTN_EMBED_DTYPE": "int8"},
            "RAGATTN_EMBED_DTYPE must be one of auto, float32, bfloat16",
        ),
        ({"RAGATTN_PORT": "70000"}, "RAGATTN_PORT must be in 1..65535"),
        ({"RAGATTN_REDIS_TIMEOUT_S": "soon"}, "RAGATTN_REDIS_TIMEOUT_S must be a number"),
        ({"RAGATTN_LOG_LEVEL": "loud"}, "RAGATTN_LOG_LEVEL must be one of"),
        (
            {"RAGATTN_RATE_LIMIT_PER_MINUTE": "-1"},
            "RAGATTN_RATE_LIMIT_PER_MINUTE must be an integer >= 0 (0 = off), got -1",
        ),
        ({"RAGATTN_BLOCK_STORE_MB": "-1"}, "RAGATTN_BLOCK_STORE_MB must be an integer >= 0"),
        (
            {"RAGATTN_COMPRESS_SELECTION": "paragraphs"},
            "RAGATTN_COMPRESS_SELECTION must be documents or sentences",
        ),
        *(
            ({"RAGATTN_COMPRESS_CASCADE": bad}, "RAGATTN_COMPRESS_CASCADE must be default, off")
            for bad in (
                "on",
                "0:lexical",
                "1.5",
                "0.8:bert",
                "0.8:",
                "0.8:lexical+both",
                "0.8:lexical,dense=x",
            )
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
    "value",
    [
        "default",
        "off",
        "0.8:lexical",
        "0.6:bm25",
        "1",
        ".9:documents",
        "0.8:lexical+links",
        "0.8:lexical+links@1024,ceiling=2048,precut=2",
        "0.8:lexical,precut=2.5",
        "0.8:lexical+links@1024,ceiling=2048,precut=4,dense=pooled",
    ],
)
def test_a_cascade_setting_is_accepted(value: str) -> None:
    assert Settings.from_env({"RAGATTN_COMPRESS_CASCADE": value}).compress_cascade == value


# --- round five: every number has a bound ----------------------------------------------------


def _env(name: str) -> str:
    return "RAGATTN_" + name.upper()


def _out_of_range(name: str) -> list[str]:
    """Values of ``RAGATTN_<NAME>`` that parse but lie outside its range, or are not finite."""
    bound = BOUNDS[name]
    below = "-1" if bound.low == 0 else str(int(bound.low) - 1)
    values = [below, str(int(bound.high) + 1), "1" * 23, "-" + "9" * 40]
    if bound.integer:
        return values
    return [*values, "1e308", "-1e308", "nan", "inf", "-inf", "1e999"]


@pytest.mark.parametrize(
    ("name", "raw"), [(name, raw) for name in BOUNDS for raw in _out_of_range(name)]
)
def test_a_number_outside_its_range_names_the_variable_and_the_range(name: str, raw: str) -> None:
    bound = BOUNDS[name]
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({_env(name): raw})
    message = str(refused.value)
    assert message.startswith(f"{_env(name)} must be "), message
    assert bound.span() in message, message
    assert len(message) < 200, message


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_the_edges_of_each_range_are_accepted(name: str) -> None:
    bound = BOUNDS[name]
    edges = [bound.high] if bound.open_low else [bound.low, bound.high]
    for edge in edges:
        raw = str(int(edge)) if bound.integer else repr(float(edge))
        assert getattr(Settings.from_env({_env(name): raw}), name) == edge


@pytest.mark.parametrize("name", sorted(n for n, b in BOUNDS.items() if b.integer))
def test_an_integer_setting_takes_no_fraction_and_no_huge_digits(name: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{_env(name)} must be an integer, got '2.5'")):
        Settings.from_env({_env(name): "2.5"})
    # More digits than Python converts (4,300): refused, and echoed cut to 64 characters.
    digits = "7" * 5_000
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({_env(name): digits})
    message = str(refused.value)
    assert f"{'7' * 64!r}... (5000 characters)" in message, message
    assert "7" * 65 not in message


def test_the_reported_settings() -> None:
    """``1e308`` passed the check and crashed the server once the model had loaded; 23 digits of
    ``RAGATTN_MAX_REQUEST_TOKENS`` were accepted as they were."""
    cases = {
        "RAGATTN_TOKENS_PER_SECOND": (
            "1e308",
            "RAGATTN_TOKENS_PER_SECOND must be a number > 0, got 1e+308 (range (0, 1000000000])",
        ),
        "RAGATTN_REQUEST_TIMEOUT_S": (
            "1e308",
            "RAGATTN_REQUEST_TIMEOUT_S must be a number >= 0 (0 = none), got 1e+308 "
            "(range [0, 86400])",
        ),
        "RAGATTN_MAX_REQUEST_TOKENS": (
            "12345678901234567890123",
            "RAGATTN_MAX_REQUEST_TOKENS must be a positive integer (unset: derived from the "
            f"deadline), got 12345678901234567890123 (range 1..{TOKEN_CEILING})",
        ),
    }
    for variable, (raw, message) in cases.items():
        with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
            Settings.from_env({variable: raw})


def test_a_cascade_cap_is_bounded() -> None:
    ok = Settings.from_env({"RAGATTN_COMPRESS_CASCADE": f"0.8:lexical@{TOKEN_CEILING}"})
    assert ok.compress_cascade == f"0.8:lexical@{TOKEN_CEILING}"
    for cap in (str(TOKEN_CEILING + 1), "9" * 5_000):
        with pytest.raises(ConfigError) as refused:
            Settings.from_env({"RAGATTN_COMPRESS_CASCADE": f"0.8:lexical@{cap}"})
        message = str(refused.value)
        assert message.startswith("RAGATTN_COMPRESS_CASCADE: the cap after @ must be at most")
        assert "9" * 65 not in message


def test_every_numeric_setting_has_a_bound() -> None:
    """A numeric field added to Settings must get a range in BOUNDS (and docs/service.md)."""
    numeric = {
        f.name
        for f in dataclasses.fields(Settings)
        if str(f.type).split(" | ")[0] in ("int", "float")
    }
    assert numeric == set(BOUNDS)


def test_settings_and_budgets_share_the_token_ceiling() -> None:
    assert MAX_TARGET_TOKENS == TOKEN_CEILING


def test_the_service_documentation_states_every_range() -> None:
    """docs/service.md's table of ranges is the table of BOUNDS."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "service.md").read_text()
    for name, bound in BOUNDS.items():
        row = f"| `{_env(name)}` | {bound.span()}"
        assert row in text, row
