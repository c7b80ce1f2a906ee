"""The ``fabricmon`` command line: one sub-command per module in ``cli/commands``.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` to a function ``(args) -> int``. Errors rooted at :class:`FabricmonError`
become one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from fabric.errors import FabricmonError

#: The modules of ``cli/commands``, in the order ``--help`` lists their commands.
MODULES = ("topology", "inventory", "slo", "db", "migrate", "sim", "collect", "analyze", "serve", "record", "demo",
           "drill")  # fmt: skip
#: Each command and the module that registers it. A run imports only its command's module: ``fabricmon
#: migrate`` does not load the analyzer, the API and the simulator (2 s of CPU at every start).
COMMANDS: dict[str, str] = {
    "topology": "topology",
    "inventory": "inventory",
    "slo": "slo",
    "db": "db",
    "migrate": "migrate",
    "sim": "sim",
    "collect": "collect",
    "analyze": "analyze",
    "check": "analyze",
    "api": "serve",
    "run": "serve",
    "record": "record",
    "demo": "demo",
    "drill": "drill",
}

#: Exit code for bad input and failures. ``check`` uses 0/1/2 for health, so it reports errors as 3.
EXIT_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other fabricmon error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see --help)\n")


def _common_options(*, top: bool) -> argparse.ArgumentParser:
    """The options every command takes, before or after its name.

    The copy attached to each command defaults to SUPPRESS, so ``fabricmon --json db status``
    keeps the value given before the command name.
    """
    common = _Parser(add_help=False)
    suppress = argparse.SUPPRESS

    def default(value: object) -> object:
        return value if top else suppress

    common.add_argument(
        "--config",
        metavar="FILE",
        default=default(os.environ.get("FABRICMON_CONFIG")),
        help="YAML configuration (default: $FABRICMON_CONFIG, else built-in defaults)",
    )
    common.add_argument("--json", action="store_true", default=default(False), help="machine-readable JSON output")
    common.add_argument("-v", "--verbose", action="count", default=default(0), help="more logging (-vv: debug)")
    return common


def command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, if it names one: the first word that is neither an option before
    it nor ``--config``'s value (``None`` for ``--help`` alone, or a word no module registers)."""
    words = iter(argv)
    for word in words:
        if word.startswith("--c") and "--config".startswith(word):  # --config FILE (or its abbreviation)
            next(words, None)
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` alone (its module is the only one imported)."""
    common = _common_options(top=False)
    parser = _Parser(
        prog="fabricmon",
        description="Fabric health for AI training clusters.",
        parents=[_common_options(top=True)],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in MODULES if command is None else (COMMANDS[command],):
        module: ModuleType = importlib.import_module(f"cli.commands.{name}")
        module.register(sub, common)
    return parser


def _setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if level > logging.DEBUG:
        # asyncpg's pool logs a traceback on every reconnect attempt of a database outage; the
        # writers say it once. One line each, the traceback only with -vv.
        logging.getLogger("asyncpg.pool").addFilter(_one_line)


def _one_line(record: logging.LogRecord) -> bool:
    """A log filter: the exception's last line instead of its traceback."""
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        record.msg, record.args = f"{record.getMessage()}: {type(exc).__name__}: {exc}", ()
        record.exc_info, record.exc_text = None, None
    return True


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(command_named(argv)).parse_args(argv)
    _setup_logging(args.verbose)
    try:
        code: int = args.handler(args)
    except FabricmonError as exc:
        print(f"fabricmon {args.command}: error: {exc}", file=sys.stderr)
        return 3 if args.command == "check" else EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except (asyncio.CancelledError, BrokenPipeError):
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
