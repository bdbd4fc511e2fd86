"""The command line's ``RAGATTN_*`` settings: parsed at this edge, once per command.

Every command runs :func:`cli_settings` (the group callback does), so a bad value stops it with
the variable's name (exit 2) and ``RAGATTN_MODELS_DIR`` reaches every loader of learned assets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from ragattn.settings import Settings


def cli_settings() -> Settings:
    """``Settings.from_env()``, with the learned-assets directory applied to this process.

    Raises:
        typer.Exit: code 2, after printing the :class:`~ragattn.errors.ConfigError`.
    """
    from ragattn.assets import use_models_dir
    from ragattn.errors import ConfigError
    from ragattn.settings import Settings

    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    use_models_dir(settings.models_dir)
    return settings


__all__ = ["cli_settings"]
