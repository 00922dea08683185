"""``autoscaler.api``, the plugin authors' surface: every exported name resolves and is documented, the
example plugins in ``plugins/`` import nothing else of ``autoscaler``, and the examples in
``docs/plugins.md`` work as written against it.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest

import autoscaler
import autoscaler.api as api
from autoscaler.evaluate.custom import run_evaluators
from autoscaler.plugins.chain import run_chain
from autoscaler.reasons import Reason

ROOT = Path(autoscaler.__file__).resolve().parents[1]
PLUGINS = ROOT / "plugins"
DOC = ROOT / "docs" / "plugins.md"


# ---------------------------------------------------------------------------------------------- __all__
def test_every_exported_name_resolves_once():
    assert len(api.__all__) == len(set(api.__all__))
    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert missing == []


def test_nothing_public_is_importable_from_it_but_what_it_exports():
    """A name a plugin can import from the module is a promise, so every one is listed in ``__all__``."""
    public = {name for name in vars(api) if not name.startswith("_")} - {"annotations"}
    assert public == set(api.__all__)


def test_the_guide_names_every_exported_name():
    text = DOC.read_text()
    assert [name for name in api.__all__ if f"`{name}`" not in text and f"{name}(" not in text] == []


# ------------------------------------------------------------------------------------- plugins' imports
def _autoscaler_imports(source: str) -> list[str]:
    """The ``autoscaler`` modules a source imports from (``import autoscaler.x``, ``from autoscaler.x
    import y``), at any level of the file."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "autoscaler"]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "autoscaler"
        ):
            found.append(node.module)
    return found


def _plugin_sources() -> list[Path]:
    return sorted(p for p in PLUGINS.rglob("*.py") if "build" not in p.relative_to(PLUGINS).parts)


def test_the_example_plugins_import_only_autoscaler_api():
    sources = _plugin_sources()
    assert {p.relative_to(PLUGINS).parts[0] for p in sources} >= {"cpu-gate", "budget-cap"}
    others = {
        str(path.relative_to(ROOT)): module
        for path in sources
        for module in _autoscaler_imports(path.read_text())
        if module != "autoscaler.api"
    }
    assert others == {}


def test_the_scan_sees_every_form_of_import():
    source = (
        "import autoscaler.model\n"
        "from autoscaler.api import VertexChange\n"
        "from autoscaler import api\n"
        "def f():\n    from autoscaler.decide import Decision\n"
        "import autoscalerx, json\n"
    )
    assert _autoscaler_imports(source) == [
        "autoscaler.model",
        "autoscaler.api",
        "autoscaler",
        "autoscaler.decide",
    ]


# ------------------------------------------------------------------------------------- the guide's code
def _doc_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def _doc_namespace() -> dict[str, object]:
    """Every Python example of the guide run in one namespace (they only define classes)."""
    namespace: dict[str, object] = {}
    for block in _doc_blocks():
        exec(compile(block, str(DOC), "exec"), namespace)
    return namespace


def test_the_guides_examples_import_only_autoscaler_api():
    blocks = _doc_blocks()
    assert len(blocks) >= 3  # executor plugin, metric provider, custom evaluator
    assert {m for block in blocks for m in _autoscaler_imports(block)} == {"autoscaler.api"}


@pytest.mark.parametrize(
    ("changes", "kept", "outcome"),
    [
        ({"src": (1, 3), "work": (4, 2)}, {"src": 3}, Reason.SCALING_MODIFIED),
        ({"src": (1, 3)}, {"src": 3}, Reason.SCALING_APPROVED),
        ({"work": (4, 2)}, None, Reason.SCALING_VETOED),
    ],
)
async def test_the_guides_executor_plugin_works_in_the_chain(changes, kept, outcome):
    only_up = _doc_namespace()["OnlyScaleUp"]()
    evaluation = api.make_evaluation([api.vertex_eval("src", 1), api.vertex_eval("work", 4)])
    context = api.PluginContext(evaluation.job, evaluation.sample.target.options, evaluation)
    asked = {vid: api.VertexChange(vid, current, target) for vid, (current, target) in changes.items()}
    result = await run_chain([only_up], context, asked)
    targets = None if result.changes is None else {v: c.target for v, c in result.changes.items()}
    assert targets == kept
    assert [o.outcome for o in result.outcomes] == [outcome] and only_up.priority() == 10


def test_the_guides_custom_evaluator_overrides_a_sources_target_rate():
    topic_rate = _doc_namespace()["TopicRate"]()
    topology = api.make_topology({"src": 2, "work": 4}, [("src", "work", "HASH")])
    options = api.AutoscalerOptions(enabled=True)

    def metrics(vid: str) -> api.VertexMetrics:
        p = topology.vertices[vid].parallelism
        return api.VertexMetrics(vid, p, 128, topology.is_source(vid), 0.5, 1000.0, 1000.0, 0.0, 0.0)

    def run(vid: str) -> api.VertexMetrics:
        base = api.EvaluatorContext(
            api.JobRef("c1", "0" * 32, "job"),
            vid,
            options,
            {},
            topology,
            builtin=metrics(vid),
            evaluated={},
            custom_metrics={api.JOB_SCOPE: {"topic.arrival-rate": (math.nan, 4200.0)}},
        )
        outcome = run_evaluators([(topic_rate, {})], metrics(vid), base)
        assert outcome.failures == ()
        return outcome.metrics

    assert run("src").target_data_rate == 4200.0
    assert run("work") == metrics("work")  # not a source: nothing overridden
