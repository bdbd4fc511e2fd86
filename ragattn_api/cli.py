"""``ragattn serve``: run the HTTP service (uvicorn, one process).

The command lives with the service so that the core library never imports the web framework; the
``ragattn`` command line finds it through the ``ragattn.commands`` entry point
(``serve = "ragattn_api.cli:serve"`` in pyproject.toml). litestar and uvicorn are imported only
when the command runs, so ``ragattn --help`` and installs without the ``[api]`` extra still work.
"""

from __future__ import annotations

import typer


def serve(
    host: str | None = typer.Option(
        None, help="Bind address (default: RAGATTN_HOST or 127.0.0.1)."
    ),
    port: int | None = typer.Option(None, help="Port (default: RAGATTN_PORT or 8080)."),
) -> None:
    """Serve the HTTP API; other settings come from RAGATTN_* variables (see docs/service.md)."""
    import dataclasses

    from ragattn._optional import require
    from ragattn.errors import ConfigError
    from ragattn.settings import Settings

    require("uvicorn", extra="api")
    require("litestar", extra="api")

    try:
        settings = Settings.from_env()
        settings = dataclasses.replace(
            settings, host=host or settings.host, port=port or settings.port
        )
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    # The server rules (trusted proxies, header cap, drain on SIGTERM) live in api.server.
    from ragattn_api.server import serve as run_server

    error = run_server(settings)
    if error is not None:
        typer.echo(f"error: the model failed to load: {error}", err=True)
        raise typer.Exit(1)


__all__ = ["serve"]
