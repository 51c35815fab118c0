"""The import graph of ``runtime/`` packages: acyclic, free of the CLI, codegen apart from passes.

The graph is derived from the source, not from a list: every ``import`` / ``from ... import``
statement under ``runtime/`` (module level and inside functions alike) and every
``importlib.import_module`` of a literal ``tilegen.runtime.*`` name (or an f-string starting
with one) is an edge between the top-level packages of ``runtime/`` (``asm``, ``codegen``, ...;
a top-level module such as ``ir.py`` is a package of its own). Imports under
``if TYPE_CHECKING:`` are left out: they only name types for annotations and never run.

Run as a script to print the graph, the cycles and the function-level imports per file::

    .venv/bin/python tests/test_import_graph.py
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import NamedTuple, Optional

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "runtime"

#: modules of the command-line layer, which nothing in runtime/ may import
CLI = ("tilegen.commands", "tilegen.api", "tilegen.cli", "tilegen.tools")

#: CLI imports still allowed (file under runtime/, module prefix): none since runtime/driver.py
#: holds the compile pipeline; an entry here would need its reason beside it
ALLOWED_CLI: set[tuple[str, str]] = set()

_MODULE = re.compile(r"tilegen\.runtime\.[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class Import(NamedTuple):
    file: str  # relative to runtime/
    line: int
    module: str  # the imported module (or module.name for from-imports)
    in_function: bool
    kind: str = "statement"  # statement | import_module (a literal name) | name (a string)


def package_of_file(path: Path) -> str:
    """The top-level runtime package a source file belongs to."""
    parts = path.relative_to(RUNTIME).parts
    return parts[0][: -len(".py")] if len(parts) == 1 else parts[0]


def package_of_module(module: str) -> Optional[str]:
    """``tilegen.runtime.codegen.core`` -> ``codegen``; None outside runtime/."""
    parts = module.split(".")
    if parts[:2] == ["tilegen", "runtime"] and len(parts) > 2:
        return parts[2]
    return None


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _dynamic_target(call: ast.Call) -> Optional[str]:
    """The module named by ``importlib.import_module(<literal or f-string>)``, if literal."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name != "import_module" or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        text = arg.value
    elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        text = str(arg.values[0].value)
    else:
        return None
    m = _MODULE.match(text)
    return m.group(0).rstrip(".") if m else None


def file_imports(path: Path) -> list[Import]:
    """Every import of ``path`` (TYPE_CHECKING blocks excluded), with whether it is in a function.

    String constants that are exactly a ``tilegen.runtime.*`` module name (extension-point tables
    such as ``DIALECT_ATTR_MODULES``) count as imports too: something imports them by name."""
    rel = str(path.relative_to(RUNTIME))
    tree = ast.parse(path.read_text(), str(path))
    out: list[Import] = []

    def visit(node: ast.AST, in_fn: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit_stmt(sub, in_fn)
                continue
            visit_stmt(child, in_fn)

    def visit_stmt(child: ast.AST, in_fn: bool) -> None:
        fn = in_fn or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if isinstance(child, ast.Import):
            for a in child.names:
                out.append(Import(rel, child.lineno, a.name, in_fn))
        elif isinstance(child, ast.ImportFrom):
            base = "." * child.level + (child.module or "")
            out.append(Import(rel, child.lineno, base, in_fn))
            for a in child.names:
                out.append(Import(rel, child.lineno, f"{base}.{a.name}", in_fn))
        elif isinstance(child, ast.Call):
            target = _dynamic_target(child)
            if target:
                out.append(Import(rel, child.lineno, target, in_fn, "import_module"))
        elif isinstance(child, ast.Constant) and isinstance(child.value, str):
            if _MODULE.fullmatch(child.value):
                out.append(Import(rel, child.lineno, child.value, in_fn, "name"))
        visit(child, fn)

    visit(tree, False)
    return out


def all_imports() -> list[Import]:
    return [i for p in sorted(RUNTIME.rglob("*.py")) for i in file_imports(p)]


def function_level_statements(imports: Optional[list[Import]] = None) -> Counter:
    """file -> number of ``import`` statements inside functions (TYPE_CHECKING excluded)."""
    seen: set = set()
    c: Counter = Counter()
    for i in imports if imports is not None else all_imports():
        if i.in_function and i.kind == "statement" and (i.file, i.line) not in seen:
            seen.add((i.file, i.line))
            c[i.file] += 1
    return c


def package_graph(imports: Optional[list[Import]] = None) -> dict[str, dict[str, list[Import]]]:
    """package -> imported package -> the imports that make the edge."""
    g: dict[str, dict[str, list[Import]]] = defaultdict(lambda: defaultdict(list))
    for i in imports if imports is not None else all_imports():
        if i.module.startswith("."):
            raise AssertionError(f"runtime/{i.file}:{i.line}: relative import {i.module}")
        src = package_of_file(RUNTIME / i.file)
        dst = package_of_module(i.module)
        if dst is None or dst == src:
            continue
        if (RUNTIME / dst).is_dir() or (RUNTIME / f"{dst}.py").exists():
            g[src][dst].append(i)
    return g


def find_cycle(g: dict[str, dict[str, list[Import]]]) -> Optional[list[str]]:
    """One cycle of ``g`` as a package path ``[a, b, ..., a]``, or None when ``g`` is acyclic."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(v: str) -> Optional[list[str]]:
        state[v] = 1
        stack.append(v)
        for w in sorted(g.get(v, {})):
            if state.get(w) == 1:
                return stack[stack.index(w) :] + [w]
            if w not in state:
                found = dfs(w)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(g):
        if v not in state:
            found = dfs(v)
            if found:
                return found
    return None


def cyclic_groups(g: dict[str, dict[str, list[Import]]]) -> list[list[str]]:
    """The strongly connected components of ``g`` with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in g.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def describe_cycle(g, cycle: list[str]) -> str:
    lines = [" -> ".join(cycle)]
    for a, b in zip(cycle, cycle[1:]):
        i = g[a][b][0]
        more = f" (+{len(g[a][b]) - 1} more)" if len(g[a][b]) > 1 else ""
        lines.append(f"  {a} -> {b}: runtime/{i.file}:{i.line} imports {i.module}{more}")
    return "\n".join(lines)


def cli_imports(imports: Optional[list[Import]] = None) -> list[Import]:
    """Imports of the CLI modules (``from tilegen import api`` included)."""
    return [
        i
        for i in (imports if imports is not None else all_imports())
        if any(i.module == c or i.module.startswith(c + ".") for c in CLI)
    ]


# ----------------------------------------------------------------------------- tests


def test_graph_is_derived_from_the_source():
    g = package_graph()
    # packages that certainly import one another: the analysis sees module and function level
    assert "ir" in g["asm"] and "types" in g["ir"]
    assert {"asm", "codegen", "passes", "verify"} <= set(g)


def test_runtime_packages_form_an_acyclic_graph():
    g = package_graph()
    cycle = find_cycle(g)
    assert cycle is None, "import cycle between runtime packages:\n" + describe_cycle(g, cycle)


def test_cycle_finder_reports_a_cycle():
    i = Import("x.py", 1, "m", False)
    g = {"a": {"b": [i]}, "b": {"c": [i]}, "c": {"a": [i]}, "d": {"a": [i]}}
    assert find_cycle(g) == ["a", "b", "c", "a"]
    assert "a -> b -> c -> a" in describe_cycle(g, find_cycle(g))
    assert find_cycle({"a": {"b": [i]}, "b": {}}) is None
    assert cyclic_groups(g) == [["a", "b", "c"]]


def test_runtime_does_not_import_the_cli():
    bad = [
        i
        for i in cli_imports()
        if not any(i.file == f and i.module.startswith(m) for f, m in ALLOWED_CLI)
    ]
    assert not bad, "runtime/ imports the CLI: " + ", ".join(
        f"runtime/{i.file}:{i.line} {i.module}" for i in bad
    )


def test_codegen_does_not_call_back_into_passes():
    """Codegen reads the layout stage's decisions from the IR (docs/layouts.md); it never
    imports the pass to recompute them."""
    g = package_graph()
    edges = g.get("codegen", {}).get("passes", [])
    assert not edges, "codegen imports passes: " + ", ".join(
        f"runtime/{i.file}:{i.line} {i.module}" for i in edges
    )


def _report() -> None:
    imports = all_imports()
    g = package_graph(imports)
    n_edges = sum(len(v) for v in g.values())
    print(f"runtime packages: {len(set(g) | {d for v in g.values() for d in v})}, edges: {n_edges}")
    for src in sorted(g):
        print(f"  {src} -> {', '.join(sorted(g[src]))}")
    print("cyclic groups:", cyclic_groups(g) or "none")
    cycle = find_cycle(g)
    print("a cycle:", describe_cycle(g, cycle) if cycle else "none")
    print("CLI imports:", [f"{i.file}:{i.line} {i.module}" for i in cli_imports(imports)] or "none")
    fl = function_level_statements()
    print(f"function-level import statements: {sum(fl.values())}")
    for f, n in fl.most_common():
        print(f"  {n:3d} runtime/{f}")


if __name__ == "__main__":
    _report()
    sys.exit(0)
