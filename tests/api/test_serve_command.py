"""``ragattn serve`` builds settings at the edge and refuses bad ones before loading anything."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ragattn.cli import app


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAGATTN_MAX_DOCUMENTS": "0"}, "RAGATTN_MAX_DOCUMENTS must be a positive integer"),
        ({"RAGATTN_CACHE_BACKEND": "redis"}, "RAGATTN_CACHE_BACKEND=redis needs RAGATTN_REDIS_URL"),
    ],
)
def test_bad_settings_exit_2_with_the_variable_named(env: dict[str, str], message: str) -> None:
    result = CliRunner().invoke(app, ["serve", "--port", "1"], env=env)
    assert result.exit_code == 2
    assert message in result.output


def test_bad_port_option_is_refused() -> None:
    result = CliRunner().invoke(app, ["serve", "--port", "70000"])
    assert result.exit_code == 2
    assert "RAGATTN_PORT must be in 1..65535" in result.output
