"""``ragattn serve``: run the HTTP service (uvicorn, one process).

The command lives with the service so that the core library never imports the web framework; the
``ragattn`` command line finds it through the ``ragattn.commands`` entry point
(``serve = "api.cli:serve"`` in pyproject.toml). litestar and uvicorn are imported only when the
command runs, so ``ragattn --help`` and installs without the ``[api]`` extra still work.
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

    uvicorn = require("uvicorn", extra="api")
    require("litestar", extra="api")
    from api.app import create_app

    try:
        settings = Settings.from_env()
        settings = dataclasses.replace(
            settings, host=host or settings.host, port=port or settings.port
        )
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    from ragattn.memory import tune_malloc

    tune_malloc()  # before the model loads: keeps the resident set near the weights' size
    # One process: the proxy is loaded once and the worker queue, cache and rate limits are shared.
    app = create_app(settings)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            # On SIGTERM in-flight requests get this long to finish before the lifespan closes.
            timeout_graceful_shutdown=settings.shutdown_grace_s or None,
        )
    )
    # The model loads in the background (/ready is 503 meanwhile); a failed load stops the server.
    app.state.on_load_failure = lambda: setattr(server, "should_exit", True)
    server.run()
    if app.state.load_error is not None:
        typer.echo(f"error: the model failed to load: {app.state.load_error}", err=True)
        raise typer.Exit(1)


__all__ = ["serve"]
