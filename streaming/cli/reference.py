"""The command reference of docs/configuration.md, generated from the parser itself so the manual lists
every option of every command with its default and help, and cannot drift (a test compares them).

``python -m streaming.cli.reference`` prints it."""

from __future__ import annotations

import argparse

from streaming.cli.main import build_parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return dict(action.choices)


def _row(action: argparse.Action) -> str:
    value = f" {action.metavar or action.dest.upper()}" if action.option_strings and action.nargs != 0 else ""
    choices = f" ({', '.join(map(str, action.choices))})" if action.choices else ""
    flag = ", ".join(f"`{o}{value}`" for o in action.option_strings) or f"`{action.dest} ...`"
    flag += choices
    default = "" if action.default in (None, False, [], argparse.SUPPRESS) or action.nargs == 0 else f"`{action.default}`"
    if action.required:
        default = "required"
    text = (action.help or "").replace("|", "\\|").replace("\n", " ")
    return f"| {flag} | {default} | {text} |"


def _table(header: str, actions: list[argparse.Action]) -> list[str]:
    return [f"| {header} | default | meaning |", "|---|---|---|", *map(_row, actions)] if actions else ["No options."]


def markdown() -> str:
    parser = build_parser()
    out = _table("option (before the command)",
                 [a for a in parser._actions if a.option_strings and a.dest not in ("help", "version")])  # noqa: SLF001
    for name, sub in _subcommands(parser).items():
        out += ["", f"### `kcompact {name}`", ""]
        if sub.description:
            out += [sub.description.strip(), ""]
        if name == "run":  # its options are rows of the settings table, listed with it
            out += ["Every option is a run option of the settings table: see [Run options](#run-options)."]
            continue
        out += _table("option", [a for a in sub._actions if a.dest != "help"])  # noqa: SLF001
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown())
