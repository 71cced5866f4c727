"""Render docs/cli.md and docs/configuration.md from the code they describe (`make docs`).

The command line's parsers and the settings model (`RetrainSettings`) are the sources; the
pages are their text as markdown, committed so a clone reads them without running anything,
and a test fails when a committed page differs from what this module renders now.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from retrain_assets.cli import build_parser
from retrain_assets.settings_model import FIELDS, env_name, number_text, requirement

USAGE_WIDTH = 100  # usage lines wrap here, whatever the terminal that runs `make docs`
COMMAND = "make docs"

CONFIGURATION_INTRO = """\
Every variable below is a field of one typed model, `RetrainSettings` in
`retrain_assets/settings_model/model.py`, with the type, range and default shown here. Every
process (`up` and each child it starts, the command line, the code location) validates the whole
model before it starts anything and refuses a bad value with one message naming it, e.g.
`RETRAIN_POLL_INTERVAL_SECONDS=0: must be a whole number >= 1` (the command line exits 2).

The code location reads its resources' URLs and tokens (`RETRAIN_APP_PG_URL`, `RETRAIN_GPU_URL`,
`RETRAIN_GPU_TOKEN`, `MLFLOW_TRACKING_URI`) through `dg.EnvVar` in `definitions.py`: `up` exports
them to every process, and a run started without one fails naming the variable. The sensors'
`RETRAIN_*_INTERVAL_SECONDS` are read when the code location is built (a bad value is one error
naming it), never at import. Every other variable is read when it is used, so a test or a child
process points the project elsewhere by setting it. The live demo (`up` with its demo tenants)
shortens the sensors' intervals and the rollout's timers for its children
(`DEMO_ENVIRONMENT` in `retrain_assets/runtime/demo_mode.py`); a variable you set wins."""


class _FixedWidth(argparse.HelpFormatter):
    """Wrap usage lines at USAGE_WIDTH, so the page does not depend on the terminal."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=USAGE_WIDTH)


def _banner(source: str) -> str:
    """Return the first line of a generated page: what it is generated from, and how."""
    return f"_Generated from {source} by `{COMMAND}`: edit that, not this page._"


def _markdown(text: str) -> str:
    """Return help text safe in markdown: `<` and `>` outside code spans would be HTML."""
    parts = text.split("`")
    for index in range(0, len(parts), 2):  # the even parts are outside backticks
        parts[index] = parts[index].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _wrapped(text: str) -> str:
    """Return a paragraph wrapped at USAGE_WIDTH, so the page reads well as plain text too."""
    return textwrap.fill(
        " ".join(text.split()), USAGE_WIDTH, break_long_words=False, break_on_hyphens=False
    )


def _cell(text: str) -> str:
    """Return text for a table cell: a `|` would end the cell."""
    return _markdown(text).replace("|", "\\|")


def _subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """Yield (name, short help, parser) of each subcommand of `parser`, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            short = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, short.get(name, ""), sub


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    """Return a table row per argument of `parser` (not -h, not its subcommands)."""
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                name += f" {action.metavar or action.dest.upper()}"
        else:
            name = str(action.metavar or action.dest)
        meaning = action.help or ""
        if action.choices is not None:
            meaning = f"{meaning}; one of {', '.join(map(str, action.choices))}".lstrip("; ")
        rows.append(f"| `{name}` | {_cell(meaning)} |")
    return rows


def _command_section(name: str, short: str, parser: argparse.ArgumentParser) -> list[str]:
    """Return one command's section: heading, what it does, usage, arguments, subcommands."""
    parser.formatter_class = _FixedWidth
    prefix = "usage: "  # dropped, and as much of the continuation lines' indent
    usage = "\n".join(
        line.removeprefix(prefix if index == 0 else " " * len(prefix))
        for index, line in enumerate(parser.format_usage().strip().splitlines())
    )
    level = "##" if name.count(" ") == 1 else "###"
    lines = [f"{level} `{name}`", ""]
    lines += [_wrapped(_markdown(parser.description or short)), "", "```", usage, "```", ""]
    rows = _argument_rows(parser)
    if rows:
        lines += ["| argument | meaning |", "| --- | --- |", *rows, ""]
    for sub_name, sub_short, sub in _subcommands(parser):
        lines += _command_section(f"{name} {sub_name}", sub_short, sub)
    return lines


def cli_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """Return docs/cli.md: every command and subcommand with its usage line and its help."""
    parser = parser or build_parser()
    intro = (parser.description or "").strip().split("\n\n")[0]
    lines = [
        _banner("`build_parser()` in `retrain_assets/cli.py`"),
        "",
        "# CLI reference",
        "",
        _wrapped(_markdown(intro)),
        "",
        _wrapped(
            "The commands are in `.venv/bin` once `make install` (or `make up`) ran; each one's "
            "`--help` prints what this page says of it. A bad input exits 2 with the reason."
        ),
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    commands = list(_subcommands(parser))
    lines += [f"| `{name}` | {_cell(short)} |" for name, short, _ in commands]
    lines.append("")
    for name, short, sub in commands:
        lines += _command_section(f"{parser.prog} {name}", short, sub)
    return "\n".join(lines).rstrip("\n") + "\n"


def default_text(field: str) -> str:
    """Return a field's default as markdown: the value the code has, or what unset means."""
    info = FIELDS[field]
    if info.default is None:
        extra = info.json_schema_extra
        meaning = extra.get("unset") if isinstance(extra, dict) else None
        return f"unset: {meaning}" if meaning else "unset"
    if isinstance(info.default, tuple):
        return f"`{','.join(number_text(item) for item in info.default)}`"
    return f"`{number_text(info.default)}`"


def configuration_markdown(fields: Sequence[str] = tuple(FIELDS)) -> str:
    """Return docs/configuration.md: the explanation, then one row per variable."""
    lines = [
        _banner("`RetrainSettings` in `retrain_assets/settings_model/model.py`"),
        "",
        "# Configuration",
        "",
        CONFIGURATION_INTRO,
        "",
        "| variable | value | default | meaning |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| `{env_name(field)}` | {_cell(requirement(field))} | {_cell(default_text(field))} "
        f"| {_cell(FIELDS[field].description or '')} |"
        for field in fields
    ]
    return "\n".join(lines) + "\n"


PAGES: dict[str, Callable[[], str]] = {
    "docs/cli.md": cli_markdown,
    "docs/configuration.md": configuration_markdown,
}


def main(argv: list[str] | None = None) -> int:
    """Write every generated page under the repository root (default: the current folder)."""
    parser = argparse.ArgumentParser(prog="python -m retrain_assets.reference_docs")
    parser.add_argument("--root", default=".", help="the repository's folder (default: .)")
    root = Path(parser.parse_args(argv).root)
    if not (root / "docs").is_dir():
        print(f"reference_docs: no docs/ folder under {root.resolve()}", file=sys.stderr)
        return 2
    for relative, render in PAGES.items():
        path = root / relative
        text = render()
        changed = not path.is_file() or path.read_text(encoding="utf-8") != text
        if changed:
            path.write_text(text, encoding="utf-8")
        print(f"{relative}: {'written' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
