"""The README and docs/ say what exists: generated pages current, links, commands, settings.

A newcomer starts at README.md and follows its links and commands; each test here fails naming
the one link, command, path, page or variable that no longer matches the repository.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from retrain_assets.cli import build_parser
from retrain_assets.reference_docs import PAGES
from retrain_assets.settings_model import FIELDS, env_name

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_LIMIT = 12_500  # bytes: the front door is read in ten minutes; the rest is in docs/
MARKDOWN = [README, *sorted((ROOT / "docs").glob("*.md"))]

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
MAKE = re.compile(r"\bmake ([a-z][\w-]*)")
CLI = re.compile(r"\bretrain-assets ([a-z][\w-]*)(?: ([a-z][\w-]*))?")
PATH = re.compile(r"(?<![\w$/.<-])([\w.-]+(?:/[\w.-]+)+/?|[\w-]+\.(?:py|md|yaml|toml|cfg))\b/?")
NAME = re.compile(r"RETRAIN_[A-Z0-9]+(?:_[A-Z0-9]+)*(?![A-Z0-9]|_?\*)")
# Paths that exist only once the project ran: the venv (`make install`) and RETRAIN_HOME.
GENERATED_ROOTS = (".venv/", ".retrain/")


def _code(text: str) -> list[str]:
    """Return the fenced code blocks and the inline code spans of a markdown text."""
    return FENCE.findall(text) + INLINE_CODE.findall(FENCE.sub("", text))


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Return a parser's subcommands by name (none for a command without any)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _make_targets() -> set[str]:
    """Return the Makefile's targets (rules named by a plain word, not a file path)."""
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):(?!=)", text, re.MULTILINE))


def _broken_links(page: Path) -> list[str]:
    """Return the relative link targets of a page that name no file (URLs, anchors skipped)."""
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (page.parent / target.split("#")[0]).exists():
            broken.append(target)
    return broken


def _unknown_targets(text: str) -> set[str]:
    """Return the `make` targets named in a text's code that the Makefile lacks."""
    named = {target for code in _code(text) for target in MAKE.findall(code)}
    return named - _make_targets()


def _unknown_commands(text: str) -> list[str]:
    """Return the `retrain-assets` commands named in a text's code that the parser lacks."""
    commands = _subcommands(build_parser())
    unknown = []
    for code in _code(text):
        for command, sub in CLI.findall(code):
            if command not in commands:
                unknown.append(f"retrain-assets {command}")
                continue
            choices = _subcommands(commands[command])
            if sub and choices and sub not in choices:
                unknown.append(f"retrain-assets {command} {sub}")
    return unknown


def _looks_like_a_file(path: str) -> bool:
    """Return whether a code token names a repository path (not, say, `table/column`)."""
    first = path.split("/")[0]
    return bool(re.search(r"\.\w+$", path)) or (ROOT / first).exists()


def _missing_paths(text: str) -> list[str]:
    """Return the repository paths named in a text's code that do not exist."""
    missing = []
    for code in _code(text):
        for path in PATH.findall(code):
            if path.startswith(GENERATED_ROOTS) or not _looks_like_a_file(path):
                continue
            if not (ROOT / path).exists():
                missing.append(path)
    return missing


def _names_in_string_literals(path: Path) -> set[str]:
    """Return the RETRAIN_* names in a module's string literals (f-strings' text included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.update(NAME.findall(node.value))
    return names


@pytest.mark.parametrize("relative", sorted(PAGES))
def test_generated_pages_are_current(relative: str):
    path = ROOT / relative
    committed = path.read_text(encoding="utf-8") if path.is_file() else "(missing)"
    assert committed == PAGES[relative](), f"{relative} is stale: run `make docs` and commit it"


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_relative_links_point_at_files(page: Path):
    broken = _broken_links(page)
    assert broken == [], f"{page.relative_to(ROOT)} links to files that do not exist: {broken}"


def test_readme_make_targets_exist():
    text = README.read_text()
    assert any(MAKE.findall(code) for code in _code(text)), "no `make` found: the parse broke"
    unknown = _unknown_targets(text)
    assert unknown == set(), f"README.md names make targets the Makefile lacks: {unknown}"


def test_readme_cli_commands_exist():
    text = README.read_text()
    assert any(CLI.findall(code) for code in _code(text)), "no command found: the parse broke"
    unknown = _unknown_commands(text)
    assert unknown == [], f"README.md names commands build_parser() lacks: {unknown}"


def test_readme_paths_exist():
    missing = _missing_paths(README.read_text())
    assert missing == [], f"README.md names repository paths that do not exist: {missing}"


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size < README_LIMIT, (
        f"README.md is {size} bytes, over {README_LIMIT}: move the detail into docs/"
    )


def test_every_setting_in_the_source_is_a_field_of_the_model():
    modelled = {env_name(field) for field in FIELDS}
    missing: dict[str, str] = {}
    for path in sorted((ROOT / "retrain_assets").rglob("*.py")):
        for name in sorted(_names_in_string_literals(path) - modelled):
            missing.setdefault(name, path.relative_to(ROOT).as_posix())
    assert missing == {}, (
        "RETRAIN_* variables missing from RetrainSettings in retrain_assets/settings_model/"
        f"model.py (name: first module naming it): {missing}; add a field and run `make docs`"
    )


def test_the_checks_see_what_is_wrong(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("[gone](docs/nowhere.md) [web](https://example.org) [top](#top) [me](page.md)")
    assert _broken_links(page) == ["docs/nowhere.md"]
    text = (
        "```\nmake up\nmake deploy-all\nretrain-assets policy show NAME\n"
        "retrain-assets policy drop NAME\nretrain-assets launch\n```\n"
        "`benchmarks/gone.py`, `benchmarks/demo_timeline.py`, `$RETRAIN_HOME/pg`, `.venv/bin/x`, "
        "`machine_pointers/_history`"
    )
    assert _unknown_targets(text) == {"deploy-all"}
    assert _unknown_commands(text) == ["retrain-assets policy drop", "retrain-assets launch"]
    assert _missing_paths(text) == ["benchmarks/gone.py"]
    assert NAME.findall("RETRAIN_GPU_* and RETRAIN_GATE_MARGIN, ..._MIN_ACTUALS") == [
        "RETRAIN_GATE_MARGIN"
    ]
