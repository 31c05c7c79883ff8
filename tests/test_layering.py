"""The packages follow the run path: no module imports one that stands later on it, and no
import cycle.

The run path, in order: cloudcore (the numerics, which import nothing of the pipeline) → the
pipeline's foundation (errors, ids, geom, config, store, cluster) → inputs → grid (and the
quicklooks' samples store, kept per tile core) → plan → stage → solve → outputs → control and
the run's phase loop → batch → the command line → cloudlab (the evaluation, outside the
product). Every import counts, also those inside functions: a lazy import is still a
dependency. Only imports under ``if TYPE_CHECKING:`` are left out (annotations, never run).
One module of a foundation package stands later: ``pipeline.store.previews``, the quicklooks'
samples kept per tile core, uses the tiles of ``pipeline.grid``.

``pipeline.api`` (the xarray API, which writes a series and runs it) stands at the end of the
pipeline's path, with the command line. One import goes up the path, and only on first use:
the package's ``__getattr__`` (PEP 562) imports it when ``pipeline.remove_clouds`` is first
read, so that ``import pipeline`` (every module's first step) loads no more than before
(:data:`LAZY_EXPORTS`; ``tests/pipeline/test_api.py`` checks that ``import pipeline`` does not
load ``pipeline.api``).
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cloudcore", "pipeline", "cloudlab")

#: Rank on the run path by module prefix (the longest prefix that matches wins).
RANKS = {
    "cloudcore": 0,
    "pipeline": 1,
    "pipeline.errors": 1,
    "pipeline.ids": 1,
    "pipeline.geom": 1,
    "pipeline.config": 1,
    "pipeline.store": 1,
    "pipeline.cluster": 1,
    "pipeline.inputs": 2,
    "pipeline.grid": 3,
    "pipeline.store.previews": 3,
    "pipeline.plan": 4,
    "pipeline.stage": 5,
    "pipeline.solve": 6,
    "pipeline.outputs": 7,
    "pipeline.control": 8,
    "pipeline.run": 8,
    "pipeline.batch": 9,
    "pipeline.cli": 10,
    "pipeline.api": 10,
    "pipeline.__main__": 10,
    "cloudlab": 11,
}


#: The one exception to the ranks: (package, module) where the package's ``__getattr__``
#: imports the module on first use of a public name it re-exports (``pipeline.remove_clouds``).
LAZY_EXPORTS = {("pipeline", "pipeline.api")}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
    }


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(
    nodes: Iterable[ast.AST], module: str, is_package: bool, modules: Collection[str]
) -> Iterator[str]:
    """Every module that the statements ``nodes`` of ``module`` import, at any depth, outside
    ``if TYPE_CHECKING:`` blocks (their ``else:`` counts)."""
    for node in nodes:
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from _imports(node.orelse, module, is_package, modules)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # ``from package import module`` imports the module; ``from module import
                # name`` the module itself.
                sub = f"{base}.{alias.name}"
                yield sub if sub in modules else base
        yield from _imports(ast.iter_child_nodes(node), module, is_package, modules)


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        found = set(_imports(tree.body, name, path.name == "__init__.py", modules))
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _rank(module: str) -> int:
    prefixes = [p for p in RANKS if module == p or module.startswith(p + ".")]
    assert prefixes, f"{module} has no rank on the run path: add it to RANKS"
    return RANKS[max(prefixes, key=len)]


def test_no_module_imports_one_later_on_the_run_path() -> None:
    graph = _graph()
    assert "pipeline.run" in graph and "cloudcore.solvers" in graph  # the walk found the tree
    later = sorted(
        f"{module} (rank {_rank(module)}) imports {target} (rank {_rank(target)})"
        for module, targets in graph.items()
        for target in targets
        if _rank(target) > _rank(module) and (module, target) not in LAZY_EXPORTS
    )
    assert not later, "\n".join(later)


def test_no_import_cycle() -> None:
    """No strongly connected component of more than one module (Tarjan's algorithm).

    The edges are the imports written in the code. Python also runs a package's ``__init__``
    before any of its modules, but that is no dependency of the code and is not an edge.
    Names that a package's ``__getattr__`` imports on first use (``cloudcore``, ``cloudlab``)
    are not edges either: they come from modules below the package, whose own imports are
    checked here.
    """
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_modules_are_small() -> None:
    """No module of the product over 500 lines: one job each."""
    long = {
        name: n
        for name, path in _modules().items()
        if not name.startswith("cloudlab") and (n := len(path.read_text().splitlines())) > 500
    }
    assert not long, long
