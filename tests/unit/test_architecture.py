"""The package's shape, as ``docs/architecture.md`` draws it: no import circles, no oversized module
without a reason, and a tick that reads as its eight stages in order.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import autoscaler
from autoscaler.daemon import Daemon

PACKAGE = Path(autoscaler.__file__).parent
MAX_LINES = 400  # a module above this says in its docstring why it is one module ("... lines ... because")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every autoscaler module ``path`` imports, at any level (``TYPE_CHECKING`` ones included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in modules}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
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

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_round_a_circle():
    modules = _modules()
    graph = {name: _imports(path, modules) - {name} for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_a_module_over_the_limit_says_why_in_its_docstring():
    unexplained = []
    for name, path in _modules().items():
        text = path.read_text()
        if text.count("\n") <= MAX_LINES:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if "lines" not in doc or "because" not in doc:
            unexplained.append(f"{name} ({text.count(chr(10))} lines)")
    assert unexplained == []


def test_a_tick_calls_the_stages_once_each_in_order():
    source = textwrap.dedent(inspect.getsource(Daemon.run_tick))
    calls = sorted(
        (node.lineno, node.col_offset, ast.unparse(node.func))
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
    )
    names = [name for _, _, name in calls]
    stages = [
        "self.clusters.collect",  # discover + collect, once per cluster
        "self.store.load",
        "self._evaluate",
        "decide_jobs",
        "run_plugins",
        "claim_slots",
        "realize_jobs",
        "self._record",
    ]
    assert [n for n in names if n in stages] == stages
