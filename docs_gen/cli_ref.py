"""The command-line reference, from the argparse parsers :func:`cli.main.build_parser` builds."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from docs_gen.blocks import cell

#: Options every command takes (documented once, above the generated block).
COMMON = frozenset({"help", "config", "json", "verbose"})
WIDTH = 100


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Every leaf and intermediate command, depth first in the order they were registered."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, sub in action.choices.items():
            yield (*path, name), sub, helps.get(name, "")
            yield from _commands(sub, (*path, name))


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    own = [a for a in parser._actions if a.dest not in COMMON]
    formatter.add_usage(parser.usage, own, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _default(action: argparse.Action) -> str:
    value = action.default
    if value is None or value is argparse.SUPPRESS or value is False or value in ([], ""):
        return ""
    if isinstance(action, argparse._StoreTrueAction | argparse._CountAction):
        return ""
    return f"`{value}`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help is argparse.SUPPRESS:
        return ""
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    text = formatter._expand_help(action)
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        text += " (one of: " + ", ".join(f"`{c}`" for c in action.choices) + ")"
    return text


def _name(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{s}`" for s in action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or action.dest.upper()
            names += f" `{metavar if isinstance(metavar, str) else ' '.join(metavar)}`"
        return names
    return f"`{action.metavar or action.dest}`"


def _table(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if action.dest in COMMON or isinstance(action, argparse._SubParsersAction):
            continue
        rows.append(f"| {_name(action)} | {cell(_default(action))} | {cell(_help(parser, action))} |")
    if not rows:
        return []
    return ["| argument | default | meaning |", "|---|---|---|", *rows, ""]


def render() -> str:
    """The reference of every command, as Markdown."""
    from cli.main import build_parser

    out: list[str] = []
    for path, parser, summary in _commands(build_parser()):
        out += [f"### fabricmon {' '.join(path)}", ""]
        text = parser.description or summary
        if text:
            out += [cell(text), ""]
        out += ["```", _usage(parser), "```", ""]
        out += _table(parser)
    return "\n".join(out)
