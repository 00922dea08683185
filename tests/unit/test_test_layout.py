"""The tests' shape (issue 37, item 6): a test module imports the code, the shared builders
(``tests/builders``) and its suite's own helpers, never another test module; and ``tests/unit`` mirrors
the package, a folder per package.

A helper two test modules need goes to ``tests/builders`` (one module per kind of thing built), so no
test module is run for its helpers, and moving or renaming a test module never breaks another.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import autoscaler

ROOT = Path(autoscaler.__file__).parent.parent
TESTS = ROOT / "tests"
UNIT = TESTS / "unit"
# Names under which only tests can be imported (``unit.collect.test_job``). ``faults`` is not one: it is
# a package for its harness and proxy (tests/faults/__init__.py), which a test may import.
ONLY_TESTS = {"tests", "unit", "integration", "e2e"}
# Folders of tests/unit that mirror something other than a package of ``autoscaler``.
NOT_PACKAGES = {"bench": ROOT / "bench"}


def _python_files() -> list[Path]:
    """Every Python file of the test suites and the builders, and the example plugins' tests."""
    return sorted([*TESTS.rglob("*.py"), *ROOT.glob("plugins/*/tests/**/*.py")])


def _names_a_test_module(name: str) -> bool:
    """A dotted name that is, or leads into, a test module or a conftest."""
    parts = name.split(".")
    return parts[0] in ONLY_TESTS or any(p.startswith("test_") or p == "conftest" for p in parts)


def _imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import, also inside functions, and of ``importlib.import_module``
    with a literal name. ``from m import a`` gives ``m`` and ``m.a``: ``a`` may be a module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}".replace("..", ".")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def _test_module_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines: dict[int, str] = {}
    for line, name in _imported(tree):
        if _names_a_test_module(name):
            lines.setdefault(line, name)
    return [f"{path.relative_to(ROOT)}:{line}: {name}" for line, name in sorted(lines.items())]


def test_no_test_module_imports_another():
    found = [hit for path in _python_files() for hit in _test_module_imports(path)]
    assert not found, "shared helpers belong in tests/builders:\n" + "\n".join(found)


def test_the_check_sees_imports_of_test_modules_anywhere(tmp_path: Path):
    module = tmp_path / "test_x.py"
    module.write_text(
        "import importlib\n"
        "from unit.evaluate.spark.test_evaluator import T0\n"
        "from .test_y import z\n"
        "from unit.collect import test_job\n"
        "def f():\n"
        "    import conftest\n"
        "    return importlib.import_module('test_z')\n"
        "from evaluator_samples import T0\n"
        "from autoscaler.testing import JOB\n"
        "from .harness import Daemon\n"
        "from faults.harness import free_port\n"
        "import unit\n",
        encoding="utf-8",
    )
    tree = ast.parse(module.read_text(encoding="utf-8"))
    hits = {line for line, name in _imported(tree) if _names_a_test_module(name)}
    assert hits == {2, 3, 4, 6, 7, 12}


def test_every_unit_test_folder_mirrors_a_package():
    """tests/unit/<package path>/ for autoscaler/<package path>/: a test's folder says what it tests."""
    folders = {p.parent for p in UNIT.rglob("test_*.py")} - {UNIT}
    strays = []
    for folder in sorted(folders):
        parts = folder.relative_to(UNIT).parts
        if parts[0] in NOT_PACKAGES:
            mirrored = NOT_PACKAGES[parts[0]].joinpath(*parts[1:]).is_dir()
        else:
            mirrored = (ROOT / "autoscaler" / Path(*parts) / "__init__.py").exists()
        if not mirrored:
            strays.append(str(folder.relative_to(ROOT)))
    assert not strays, f"test folders with no package of that name: {strays}"
