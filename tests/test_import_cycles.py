"""No import cycles among fastapply's modules.

Every ``import`` of a fastapply module counts, wherever it stands: at the top, inside a
function, or under ``TYPE_CHECKING``. A deferred import hides a cycle from Python, not
from a reader: two modules that import each other are one module split in two files.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = (REPO, REPO / "client", REPO / "engine_build", REPO / "loadtest")


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module under the source roots' ``fastapply/``."""
    found = {}
    for root in ROOTS:
        for path in sorted((root / "fastapply").rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The fastapply modules ``name`` (in ``path``) imports, anywhere in its source.

    ``from fastapply.merge import lazy`` names the module ``fastapply.merge.lazy``;
    ``from fastapply.merge import apply_snippet`` names the package ``fastapply.merge``.
    Importing a submodule runs its package's ``__init__`` too, but that is Python's
    order of loading, not a dependency of the importer on the package: it is not counted.
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..y import z
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan).

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_walk_sees_deferred_and_relative_imports(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                   "    from fastapply.a import X\n"
                   "def f():\n    from . import b\n    import fastapply.c\n")
    known = {"fastapply.a", "fastapply.b", "fastapply.c", "fastapply.m"}
    assert imports("fastapply.m", src, known) == {"fastapply.a", "fastapply.b", "fastapply.c"}


def test_no_import_cycles_among_fastapply_modules() -> None:
    modules = _modules()
    known = set(modules)
    assert {"fastapply.merge", "fastapply.server.triton", "fastapply.client.grpc"} <= known
    graph = {name: imports(name, path, known) for name, path in modules.items()}
    assert cycles(graph) == []
