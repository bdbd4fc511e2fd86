"""The layer order of ``ragattn/`` (README "Layout"): imports only go down, never in a circle.

The layer table is written once, here; the README states the same order. A module imports only
from its own layer or below; rerank and compress never import each other; training and web
libraries stay out of the runtime. The walk reads every ``import`` statement, function-level ones
included, without importing anything. Imports under ``if TYPE_CHECKING:`` never run, but they still
tie two modules together (a reader, and mypy, must read both), so they count for the layers and for
cycles alike.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "ragattn"

LAYERS: dict[str, int] = {
    # 1: values, errors, settings, argument checks: no project imports beyond this layer
    "ragattn._optional": 1,
    "ragattn._version": 1,
    "ragattn.cancel": 1,
    "ragattn.contract": 1,
    "ragattn.languages": 1,
    "ragattn.errors": 1,
    "ragattn.first_stage": 1,
    "ragattn.memory": 1,
    "ragattn.methods": 1,
    "ragattn.settings": 1,
    "ragattn.types": 1,
    "ragattn.validation": 1,
    # 2: loading and text
    "ragattn.assets": 2,
    "ragattn.attention": 2,
    "ragattn.demo": 2,
    "ragattn.devices": 2,
    "ragattn.embed": 2,
    "ragattn.greedy": 2,
    "ragattn.limits": 2,
    "ragattn.markdown_units": 2,
    "ragattn.names": 2,
    "ragattn.prompt": 2,
    "ragattn.proxy": 2,
    "ragattn.request_budget": 2,
    "ragattn.sdpa": 2,
    "ragattn.sentence_attention": 2,
    "ragattn.sentences": 2,
    "ragattn.call_language": 3,
    "ragattn.token_bounds": 2,
    # 3: runtime methods (learned assets are loaded here, never fitted)
    "ragattn.block_store": 3,
    "ragattn.blocks": 3,
    "ragattn.compress": 3,
    "ragattn.document_probe": 3,
    "ragattn.facade": 3,
    "ragattn.lexical": 3,
    "ragattn.rerank": 3,
    "ragattn.retrieve": 3,
    # 4: composition; the package facade re-exports from here and below
    "ragattn": 4,
    "ragattn.composition": 4,
    "ragattn.batch": 4,
    "ragattn.cache": 4,
    "ragattn.client": 4,
    "ragattn.fingerprint": 4,
    "ragattn.generate": 4,
    "ragattn.integrations": 4,
    "ragattn.pipeline": 4,
    # 5: training, head detection, evaluation, benchmarks, model cards
    "ragattn.lab": 5,
    # 6: edges (the service, ragattn_api/, is the other edge and lives outside the package)
    "ragattn.batch.command": 6,
    "ragattn.cli": 6,
}
"""Each module's layer: the entry of its longest dotted prefix in this table. ``"ragattn"`` is the
package facade only, not a default for modules missing here."""

RUNTIME_TOP = 4
LAB_ONLY = ("sklearn", "tqdm", "peft", "lightgbm")
"""Third-party packages only the lab may import."""
NEVER = ("litestar", "ragattn_api")
"""Packages no module of ``ragattn`` imports: the service is an edge beside the CLI."""
APART = (("ragattn.rerank", "ragattn.compress"), ("ragattn.compress", "ragattn.rerank"))


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    line: int
    typing_only: bool

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def layer_of(module: str) -> int:
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS:
            return LAYERS[prefix]
    if module == "ragattn":
        return LAYERS[module]
    raise AssertionError(f"{module} has no layer: add it (or its package) to LAYERS")


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(source: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = source.split(".")
    is_package = MODULES[source].name == "__init__.py"
    base = package if is_package else package[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(source: str) -> list[Edge]:
    """Every import in ``source``'s file, as edges to absolute module names."""
    tree = ast.parse(MODULES[source].read_text(), filename=str(MODULES[source]))
    edges: list[Edge] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing_only)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                edges.append(Edge(source, alias.name, node.lineno, typing_only))
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(source, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                target = sub if sub in MODULES else base
                edges.append(Edge(source, target, node.lineno, typing_only))
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only)

    visit(tree, False)
    return edges


EDGES = [edge for module in MODULES for edge in imports_of(module)]
PROJECT_EDGES = [e for e in EDGES if within(e.target, "ragattn")]


def test_every_module_has_a_layer() -> None:
    assert len(MODULES) > 40  # the walk found the package
    for module in MODULES:
        layer_of(module)


def test_no_module_imports_a_higher_layer() -> None:
    upward = [
        f"{edge} imports layer {layer_of(edge.target)} from layer {layer_of(edge.source)}"
        for edge in PROJECT_EDGES
        if layer_of(edge.target) > layer_of(edge.source)
    ]
    assert upward == []


def import_cycle(edges: list[Edge]) -> list[str] | None:
    """A cycle among ``edges`` (typing-only ones included), or None."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for edge in edges:
        if edge.target != edge.source:
            graph.setdefault(edge.source, set()).add(edge.target)
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return None


def test_no_import_cycle_between_ragattn_modules() -> None:
    cycle = import_cycle(PROJECT_EDGES)
    assert cycle is None, f"import cycle: {' -> '.join(cycle or [])}"


def test_a_typing_only_import_closes_a_cycle() -> None:
    # Guards the cycle check itself: a TYPE_CHECKING import back from proxy to attention (the
    # circle this package had) is caught, not excused.
    back = Edge("ragattn.proxy", "ragattn.attention", 1, typing_only=True)
    assert import_cycle(PROJECT_EDGES) is None
    assert import_cycle([*PROJECT_EDGES, back]) is not None


def test_rerank_and_compress_never_import_each_other() -> None:
    crossing = [
        str(edge)
        for edge in PROJECT_EDGES
        for one, other in APART
        if within(edge.source, one) and within(edge.target, other)
    ]
    assert crossing == []


def test_training_and_web_libraries_stay_out_of_the_runtime() -> None:
    def top(edge: Edge) -> str:
        return edge.target.split(".")[0]

    lab_only = [
        str(edge)
        for edge in EDGES
        if top(edge) in LAB_ONLY and layer_of(edge.source) <= RUNTIME_TOP
    ]
    never = [str(edge) for edge in EDGES if top(edge) in NEVER]
    assert lab_only == [] and never == []


def test_the_walk_sees_function_level_and_type_checking_imports() -> None:
    # Guards the walk itself: a lazy import inside a function and a typing-only import are found.
    cli = [e for e in EDGES if e.source == "ragattn.cli.eval"]
    assert any(e.target == "ragattn.lab.evaluation.systems" for e in cli)
    assets = [e for e in EDGES if e.source == "ragattn.assets"]
    assert [e.typing_only for e in assets if e.target == "ragattn.proxy"] == [True]
    # The loader registers the capturing SDPA of ragattn.sdpa; the engine imports the loader.
    proxy = [e.target for e in EDGES if e.source == "ragattn.proxy"]
    assert "ragattn.sdpa" in proxy and "ragattn.attention" not in proxy
    attention = [e for e in EDGES if e.source == "ragattn.attention"]
    assert any(e.target == "ragattn.proxy" and not e.typing_only for e in attention)


@pytest.mark.slow  # a fresh interpreter imports torch
def test_importing_the_library_loads_no_training_web_or_lab_code() -> None:
    # torch.hub imports tqdm when it is installed; blocking the three packages makes any import of
    # them by ragattn fail loudly, while torch falls back to its own stand-in.
    code = (
        "import sys\n"
        "for name in ('sklearn', 'tqdm', 'litestar'):\n"
        "    sys.modules[name] = None\n"
        "import ragattn\n"
        "from ragattn import Compressor, Reranker\n"
        "loaded = [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print(sorted(m for m in loaded if m.split('.')[0] in ('sklearn', 'tqdm', 'litestar', "
        "'ragattn_api') or m == 'ragattn.lab' or m.startswith(('ragattn.lab.', 'ragattn.cli.')) "
        "or m == 'ragattn.cli'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_sdk_client_loads_no_torch() -> None:
    # The package facade loads its names on first use: a user of the HTTP client only (and the
    # client's own module) pays for neither torch nor transformers.
    code = (
        "import sys\n"
        "import ragattn.client\n"
        "from ragattn import Client, Document\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
