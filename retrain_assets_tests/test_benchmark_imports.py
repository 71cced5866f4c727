"""Every benchmark still imports what exists: a moved module breaks no benchmark silently.

The benchmarks import the package inside their functions (each mode runs in a child), so a
module moved by a refactoring is only found when someone measures again. This reads every
`from retrain_assets... import name` in `benchmarks/` and checks the module and the name.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _package_imports(path: Path) -> list[tuple[int, str, str]]:
    """Return (line, module, name) of every `from retrain_assets... import name` in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("retrain_assets"):
            found += [(node.lineno, node.module or "", alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("*.py")), ids=lambda p: p.name)
def test_every_package_name_a_benchmark_imports_exists(path: Path) -> None:
    missing = []
    for line, module, name in _package_imports(path):
        try:
            imported = importlib.import_module(module)
        except ModuleNotFoundError as error:
            missing.append(f"{path.name}:{line}: {module}: {error}")
            continue
        if not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                missing.append(f"{path.name}:{line}: {module} has no {name}")
    assert not missing, "\n".join(missing)
