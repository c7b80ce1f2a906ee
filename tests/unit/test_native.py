"""Loading the C extensions: built, not built, or refused by the environment."""

from __future__ import annotations

import pytest

from fabric.native import load


def test_a_built_extension_loads() -> None:
    module, why = load("store._copy_binary")
    assert module is not None and why == ""


def test_one_not_built_says_so() -> None:
    module, why = load("store._no_such_extension")
    assert module is None and why.startswith("not built (")


@pytest.mark.parametrize("value", ["1", "yes"])
def test_the_environment_refuses_them_all(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("FABRICMON_PURE_PYTHON", value)
    assert load("store._copy_binary") == (None, "FABRICMON_PURE_PYTHON is set")


def test_zero_or_empty_is_not_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("0", ""):
        monkeypatch.setenv("FABRICMON_PURE_PYTHON", value)
        assert load("store._copy_binary")[0] is not None
