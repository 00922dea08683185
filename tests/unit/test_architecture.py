"""The package's shape, as ``docs/architecture.md`` draws it: layers that import only downward, no
import circles between modules or between packages, the tick's stages in order, and a tick that reads
as its stages in order.

Structure, not length: a module is split when it holds two ideas and merged when two modules are one
idea; how many lines it has is not the test.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from pathlib import Path

import autoscaler
from autoscaler.daemon import Daemon
from autoscaler.tick import steps

PACKAGE = Path(autoscaler.__file__).parent

# Every unit of the package (a subpackage, or a module at the top), top layer first. A unit imports only
# units of its own layer or of layers below it (docs/architecture.md, "Layers"). A new module goes in
# the layer of what it is; the test fails until it has one.
LAYERS: list[tuple[str, frozenset[str]]] = [
    ("entry points", frozenset({"__main__", "cli", "process", "demo", "backtest", "api"})),
    (
        "the daemon and what reads its records",
        frozenset({"daemon", "schedule", "decision_store", "archive", "explain"}),
    ),
    ("the per-job stages", frozenset({"tick", "idle_slots"})),
    (
        "clusters: discover and collect",
        frozenset(
            {
                "cluster",
                "metrics_source",
                "cluster_session",
                "live_jobs",
                "discover",
                "leases",
                "collect",
                "stopping",
            }
        ),
    ),
    (
        "plugins and the slot arithmetic",
        frozenset({"plugins", "memory_advice", "slot_fit", "start_checks", "testing"}),
    ),
    (
        "evaluation and reporting",
        frozenset({"evaluate", "metrics", "vertex_series", "resources", "shards", "unknown_metrics"}),
    ),
    ("what is stored and what Flink answers", frozenset({"state", "flink"})),
    ("values", frozenset({"model", "job_scope", "foresight"})),
    (
        "foundations",
        frozenset(
            {
                "settings",
                "health",
                "job_memory",
                "logs",
                "simulator",
                "calendar",
                "clock",
                "durations",
                "gc_tuning",
                "metric_labels",
                "metrics_page",
                "offload",
                "reasons",
                "safe_text",
                "skew",
            }
        ),
    ),
]
# Upward imports and package knots allowed (none: the stages return values, and the record stage, on top,
# is the one that writes; the test fails if one appears).
KNOWN_UPWARD: set[tuple[str, str]] = set()
KNOWN_KNOTS: list[list[str]] = []
# The tick package's modules, lowest first: each imports only modules before it. The record stage is
# on top: it reads every stage's values and no stage reads it.
TICK_ORDER = [
    "steps",
    "texts",
    "delivery",
    "each",
    "foresee",
    "decide",
    "plugins",
    "slots",
    "realize",
    "record",
]


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


def _unit(module: str) -> str:
    """``autoscaler.evaluate.spark.session`` -> ``evaluate``: the subpackage or top module it belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _unit_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if name == "autoscaler":
            continue
        graph.setdefault(_unit(name), set()).update(
            _unit(m) for m in _imports(path, modules) if m != "autoscaler" and _unit(m) != _unit(name)
        )
    return graph


def test_every_unit_has_a_layer():
    placed = [u for _, units in LAYERS for u in units]
    assert len(placed) == len(set(placed)), "a unit in two layers"
    assert set(_unit_graph()) - set(placed) == set(), "give the new module a layer in LAYERS"
    assert set(placed) - set(_unit_graph()) == set(), "a layer names a unit that no longer exists"


def test_units_import_only_their_own_layer_or_below():
    layer = {u: i for i, (_, units) in enumerate(LAYERS) for u in units}
    upward = {(a, b) for a, targets in _unit_graph().items() for b in targets if layer[b] < layer[a]}
    assert upward == KNOWN_UPWARD


def test_no_package_imports_another_round_a_circle():
    assert _cycles(_unit_graph()) == KNOWN_KNOTS


def test_the_tick_modules_import_only_earlier_ones():
    modules = _modules()
    tick = {
        name.rsplit(".", 1)[1]: path for name, path in modules.items() if name.startswith("autoscaler.tick.")
    }
    assert set(tick) == set(TICK_ORDER), "place the new tick module in TICK_ORDER"
    later = {
        (name, m.rsplit(".", 1)[1])
        for name, path in tick.items()
        for m in _imports(path, modules)
        if m.startswith("autoscaler.tick.")
        and TICK_ORDER.index(m.rsplit(".", 1)[1]) >= TICK_ORDER.index(name)
    }
    assert later == set()


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
        "foresee",
        "decide_jobs",
        "run_plugins",
        "claim_slots",
        "realize_jobs",
        "self._record",
    ]
    assert [n for n in names if n in stages] == stages


# What writes: the state store, the event sink, the metrics, the outcome delivery. Only the record stage
# (and the daemon that hands it the values) may touch them; the other stages return values.
_WRITERS = {"autoscaler.metrics", "autoscaler.state.events", "autoscaler.tick.delivery", "autoscaler.offload"}
_STAGES = ["foresee", "decide", "plugins", "slots", "realize", "each"]


def test_only_the_record_stage_writes():
    modules = _modules()
    for stage in _STAGES:
        path = modules[f"autoscaler.tick.{stage}"]
        imported = {m for m in _imports(path, modules) if any(m.startswith(w) for w in _WRITERS)}
        assert imported == set(), f"tick/{stage}.py imports {imported}: a stage returns values, record writes"
        source = path.read_text()
        assert ".metrics." not in source and ".save(" not in source, f"tick/{stage}.py writes"


def test_every_notice_is_told_by_the_record_stage():
    told = _modules()["autoscaler.tick.record"].read_text()
    for notice in typing.get_args(steps.Notice):
        assert f"{notice.__name__}(" in told, f"the record stage says nothing of {notice.__name__}"
