"""``fabricmon COMMAND`` imports only COMMAND's module: each run (and each test that starts one)
pays for what it uses, not for the analyzer, the API and the simulator (2 s of CPU each start)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cli.main import COMMANDS, MODULES, build_parser, command_named

HEAVY = ("analyzer.service", "api.app", "simulator.runner", "demo.runner", "collector.runner")


def _subcommands(parser: object) -> list[str]:
    (sub,) = [a for a in parser._actions if a.dest == "command"]  # type: ignore[attr-defined]
    return list(sub.choices)


def test_a_command_loads_only_its_module() -> None:
    code = (
        "import sys, json; from cli.main import build_parser, command_named; "
        "build_parser(command_named(['--json', 'migrate', '--config', 'x.yaml'])); "
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(done.stdout) == []


def test_every_module_registers_exactly_the_commands_named_for_it() -> None:
    assert _subcommands(build_parser()) == list(COMMANDS)  # also the order of --help
    assert list(dict.fromkeys(COMMANDS.values())) == list(MODULES)
    for command, module in COMMANDS.items():
        alone = _subcommands(build_parser(command))
        assert command in alone and {COMMANDS[c] for c in alone} == {module}


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["migrate"], "migrate"),
        (["--json", "-v", "db", "status"], "db"),
        (["--config", "check", "topology"], "topology"),  # a config file named like a command
        (["--conf", "sim", "collect"], "collect"),  # argparse takes the abbreviation
        (["--config=sim", "analyze"], "analyze"),
        (["check", "--json"], "check"),
        (["--help"], None),
        (["nonsense"], None),  # the full parser, so the error lists every command
        ([], None),
    ],
)
def test_the_command_is_the_first_word_that_is_not_an_option_or_its_value(argv: list[str], command: str | None) -> None:
    assert command_named(argv) == command
