"""Loading the C extensions: built, not built, or refused by the environment."""

from __future__ import annotations

import pytest

from collector import speedups
from fabric.native import load
from store import copy_binary


def test_a_built_extension_loads() -> None:
    module, why = load("store._copy_binary", copy_binary.ABI)
    assert module is not None and why == ""
    assert load("collector._speedups", speedups.ABI)[0] is not None


def test_one_not_built_says_so() -> None:
    module, why = load("store._no_such_extension", 1)
    assert module is None and why.startswith("not built (")


def test_one_built_from_an_older_source_is_not_used() -> None:
    """An editable install not rebuilt after a pull: its functions take other arguments."""
    module, why = load("store._copy_binary", copy_binary.ABI + 1)
    assert module is None and "run make setup" in why


@pytest.mark.parametrize("value", ["1", "yes"])
def test_the_environment_refuses_them_all(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("FABRICMON_PURE_PYTHON", value)
    assert load("store._copy_binary", copy_binary.ABI) == (None, "FABRICMON_PURE_PYTHON is set")


def test_zero_or_empty_is_not_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("0", ""):
        monkeypatch.setenv("FABRICMON_PURE_PYTHON", value)
        assert load("store._copy_binary", copy_binary.ABI)[0] is not None
