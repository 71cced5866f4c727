"""The package's layers point one way: a module imports only its own package or lower layers.

The order is the one `docs/architecture.md` lists. Every import counts, including those inside
functions: a lazy import of a higher layer is still a cycle waiting for the next refactoring.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "retrain_assets"

# Bottom first. Packages in one layer are independent: neither imports the other.
LAYERS: list[set[str]] = [
    {"dagster_private", "known_warnings", "settings_model"},
    {
        "__init__",
        "asset_keys",
        "customer_names",
        "parent_death",
        "settings",
        "server_process",
        "prediction_intervals",
        "run_workers",
    },
    {"customers", "landing"},
    {"store", "registry"},
    {"features", "gpu"},
    {"machines"},
    {"policy", "deployment"},
    {"models"},
    {"automation"},
    {"definitions"},
    {"demo", "serving"},
    {"runtime"},
    {"cli"},
    {"reference_docs"},
]
LAYER_OF = {name: index for index, layer in enumerate(LAYERS) for name in layer}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _unit(module: str) -> str:
    """Return the layer unit of a dotted module: its top-level subpackage or module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imported(path: Path, module: str) -> list[tuple[int, str]]:
    """Return (line, module) of every `retrain_assets` import in a file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
    return [(line, name) for line, name in found if name.split(".")[0] == "retrain_assets"]


def upward_imports() -> list[str]:
    """Return every import of a higher layer or of a sibling package in the same layer."""
    offences = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        unit = _unit(module)
        for line, target in _imported(path, module):
            other = _unit(target)
            if other == unit:
                continue
            if LAYER_OF[other] >= LAYER_OF[unit]:
                where = path.relative_to(PACKAGE.parent)
                offences.append(
                    f"{where}:{line} {module} ({unit}, layer {LAYER_OF[unit]}) imports "
                    f"{target} ({other}, layer {LAYER_OF[other]})"
                )
    return offences


def test_every_package_has_a_layer():
    units = {_unit(_module_name(path)) for path in PACKAGE.rglob("*.py")}
    assert units - set(LAYER_OF) == set(), "add the new package to LAYERS and the docs"


def test_no_module_imports_upward():
    offences = upward_imports()
    assert offences == [], "imports against the layers:\n" + "\n".join(offences)


def test_the_check_sees_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fake = tmp_path / "retrain_assets"
    (fake / "store").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "store" / "__init__.py").write_text("")
    (fake / "store" / "bad.py").write_text("def f():\n    from retrain_assets.models import x\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["_"]), "PACKAGE", fake)
    assert upward_imports() == [
        "retrain_assets/store/bad.py:2 retrain_assets.store.bad (store, layer 3) imports "
        "retrain_assets.models (models, layer 7)"
    ]


def test_the_layers_are_the_documented_ones():
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    for index, layer in enumerate(LAYERS):
        line = f"{index}. " + ", ".join(f"`{name}`" for name in sorted(layer))
        assert line in doc, f"docs/architecture.md should list layer {index} as: {line}"
