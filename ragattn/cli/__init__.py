"""The ``ragattn`` command line (layer 6): builds settings at the edge and calls the library.

One module per command group (``demo``, ``ask``, ``index``, ``eval``, ``probe``, ``heads``,
``bench``); heavy imports happen inside the commands so ``ragattn --help`` stays fast. Commands of
other distributions or of the service (``ragattn serve`` lives in ``api.cli``) are plugins: entry
points of the group :data:`PLUGIN_GROUP`, so the core never imports the web framework.
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import entry_points

import typer

from ragattn.cli._help import listing_methods
from ragattn.cli._settings import cli_settings
from ragattn.cli.ask import ask
from ragattn.cli.bench import bench_app
from ragattn.cli.demo import demo, version
from ragattn.cli.eval import eval_app
from ragattn.cli.heads import heads_app
from ragattn.cli.index import index_app
from ragattn.cli.probe import probe_app

PLUGIN_GROUP = "ragattn.commands"
"""Entry-point group of extra commands: a function becomes ``ragattn <name>``, a Typer app a group
(``[project.entry-points."ragattn.commands"] serve = "ragattn_api.cli:serve"``)."""

app = typer.Typer(
    name="ragattn",
    help="Attention-based reranking and compression of retrieved context for RAG.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _settings_at_the_edge() -> None:
    # Every command reads RAGATTN_* here first: a bad value stops it with the variable's name,
    # and RAGATTN_MODELS_DIR reaches every loader of learned assets (ragattn.assets).
    cli_settings()


# --- command groups and commands (one line each; keep this block sorted) ---
app.add_typer(bench_app, name="bench")
app.add_typer(eval_app, name="eval")
app.add_typer(heads_app, name="heads")
app.add_typer(index_app, name="index")
app.add_typer(probe_app, name="probe")
app.command("ask", cls=listing_methods("rerank", "compress"))(ask)
app.command("demo")(demo)
app.command("version")(version)

_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def add_unavailable(target: typer.Typer, name: str, exc: ImportError) -> None:
    """Register ``<name>`` on ``target`` as a command that fails with ``exc``'s message (exit
    code 2) whatever its arguments: a missing optional dependency breaks only what needs it."""

    def command() -> None:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2)

    target.command(
        name,
        help=f"Unavailable in this installation: {exc}",
        context_settings=_PASS_THROUGH,
        add_help_option=False,
    )(command)


def _add(name: str, command: object) -> None:
    if isinstance(command, typer.Typer):
        app.add_typer(command, name=name)
    elif callable(command):
        app.command(name)(command)
    else:
        raise TypeError(f"ragattn command {name!r} is neither a Typer app nor a function")


def _add_batch() -> None:
    """``ragattn batch`` from :mod:`ragattn.batch.command` where this build has it."""
    try:
        if not all(importlib.util.find_spec(m) for m in ("ragattn.batch", "ragattn.batch.command")):
            return
        module = importlib.import_module("ragattn.batch.command")
    except ImportError as exc:  # MissingDependencyError (e.g. no ray) is an ImportError
        add_unavailable(app, "batch", exc)
        return
    _add("batch", module.batch_app)


def _add_plugins() -> None:
    for point in entry_points(group=PLUGIN_GROUP):
        try:
            target = point.load()
        except ImportError as exc:
            add_unavailable(app, point.name, exc)
            continue
        _add(point.name, target)


_add_batch()
_add_plugins()

__all__ = ["PLUGIN_GROUP", "add_unavailable", "app"]
