"""The package's shape, checked: module and function sizes, imports downward only, one
definition of each shared constant (the redesign's acceptance, kept from rotting).

Counted with ``ast`` on the source under ``src/infoxlm``: a module's lines are its physical
lines; a function's are ``end_lineno - lineno + 1`` (decorators excluded); an import inside a
function counts like one at the top, since it runs just the same.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "infoxlm"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
SHARED_CONSTANTS = ("POOLINGS", "BODY_PREFIX", "OBJECTIVES", "MLQA_LANGUAGES")
# The package's layers, top to bottom, as docs/architecture.md ("Layers") draws them: a unit (a
# first-level subpackage or top-level module) imports only from its own layer or those below.
LAYERS = (
    ("__main__", "cli", "commands"),
    ("bench", "demo"),
    ("finetune", "eval"),
    ("embedding", "tokenizer_training"),
    ("train",),
    ("export", "objectives"),
    ("corpus",),
    ("data",),
    ("model",),
    ("tokenizer", "tokenizer_files", "sentencepiece_charsmap", "unigram_trainer"),
    ("__init__", "shipped", "outputs", "file_lock", "created_paths", "special_tokens", "cli_args", "interrupt",
     "version", "json_files", "errors", "lazy_exports"),
)


def _modules() -> dict[str, Path]:
    """Dotted module name → file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in MODULES.items()}


def _imported(module: str, tree: ast.Module) -> set[str]:
    """The package's modules that ``module`` imports, anywhere in its body."""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bases = [alias.name for alias in node.names]
            names: list[str] = []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            bases, names = [base], [alias.name for alias in node.names]
        else:
            continue
        for base in bases:
            if not (base == "infoxlm" or base.startswith("infoxlm.")):
                continue
            submodules = [f"{base}.{name}" for name in names if f"{base}.{name}" in MODULES]
            targets.update(submodules)
            if len(submodules) < len(names) or not names:  # a name defined in ``base`` itself
                while base not in MODULES:
                    base = base.rpartition(".")[0]
                targets.add(base)
    targets.discard(module)
    return targets


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_module_is_over_the_size_limit() -> None:
    # Tables that are data (ISO codes, the paper's results) live in package data files, not here.
    long = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    assert {name: lines for name, lines in long.items() if lines > MAX_MODULE_LINES} == {}


def test_no_function_is_over_the_size_limit() -> None:
    long = {}
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{name}.{node.name}"] = lines
    assert long == {}


def test_no_import_cycle_among_modules() -> None:
    graph = {name: _imported(name, tree) for name, tree in TREES.items()}
    assert _cycles(graph) == []


def test_no_import_cycle_among_subpackages() -> None:
    def unit(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for name, tree in TREES.items():
        if name == "infoxlm":
            continue  # the package's own __init__ re-exports; it is the top, above every unit
        graph.setdefault(unit(name), set()).update(unit(t) for t in _imported(name, tree) if t != "infoxlm")
    for node, edges in graph.items():
        edges.discard(node)
    assert _cycles(graph) == []


def test_every_import_goes_to_the_same_layer_or_below() -> None:
    rank = {unit: depth for depth, layer in enumerate(LAYERS) for unit in layer}

    def unit(module: str) -> str:
        return module.split(".")[1] if "." in module else "__init__"

    assert sorted({unit(name) for name in MODULES} - rank.keys()) == [], "place the new unit in LAYERS and the docs"
    upward = sorted(
        f"{name} -> {target}" for name, tree in TREES.items() for target in _imported(name, tree)
        if rank[unit(target)] < rank[unit(name)]
    )
    assert upward == []


@pytest.mark.parametrize(("importer", "imported"), [
    ("data", "objectives"),  # batches are built for objectives, never by them: data sits below
    ("library", "commands"),  # strings are parsed at the edge; the library takes typed values
])
def test_a_unit_never_imports_another(importer: str, imported: str) -> None:
    """Two rules the layer order implies, checked on the imports themselves so that a reordered
    LAYERS cannot drop them: data never imports objectives, and only the command line (cli,
    __main__) imports commands."""
    edge = {"__main__", "cli", "commands"}

    def unit(module: str) -> str:
        return module.split(".")[1] if "." in module else "__init__"

    def is_importer(module: str) -> bool:
        return unit(module) not in edge if importer == "library" else unit(module) == importer

    importers = [name for name in MODULES if is_importer(name)]
    assert importers and any(unit(name) == imported for name in MODULES)  # both sides exist: not vacuous
    below = [rank_of(unit(name)) for name in importers]
    assert rank_of(imported) < min(below), "LAYERS must place it above every importer"
    found = sorted(f"{name} -> {target}" for name in importers for target in _imported(name, TREES[name])
                   if unit(target) == imported)
    assert found == []


def rank_of(unit: str) -> int:
    """A unit's layer, 0 at the top."""
    return next(depth for depth, layer in enumerate(LAYERS) if unit in layer)


@pytest.mark.parametrize("constant", SHARED_CONSTANTS)
def test_a_shared_constant_is_defined_once(constant: str) -> None:
    pattern = re.compile(rf"^{constant}\s*[:=]", re.MULTILINE)
    where = [name for name, path in MODULES.items() if pattern.search(path.read_text(encoding="utf-8"))]
    assert len(where) == 1, where


def test_the_cycle_finder_finds_a_cycle() -> None:
    # The check above cannot pass vacuously: a planted two-module loop is reported.
    assert _cycles({"a": {"b"}, "b": {"a", "c"}, "c": set()}) == [["a", "b"]]
