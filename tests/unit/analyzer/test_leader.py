"""The leader election's pure parts: the lock key, the timing and the lock session's settings."""

from __future__ import annotations

import pytest

from analyzer.config import AnalyzerConfig
from analyzer.leader import (
    IDLE_TIMEOUT_SINCE,
    LOCK_KEY,
    ElectionTiming,
    _why,
    lock_key,
    process_identity,
    session_settings,
)
from store import migrate


def test_the_lock_key_is_fixed_forever() -> None:
    # Two versions of fabricmon in one pair (a rolling upgrade) must contend for the same lock:
    # this literal may never change.
    assert LOCK_KEY == lock_key("fabricmon-analyzer") == 3775130960053649110
    assert -(2**63) <= LOCK_KEY < 2**63
    assert LOCK_KEY != migrate._LOCK_KEY  # the migrations' lock is another one


@pytest.mark.parametrize("interval_s", [0.1, 0.5, 1.0, 2.0, 10.0, 60.0, 3600.0])
def test_timing_keeps_the_two_interval_promise(interval_s: float) -> None:
    t = ElectionTiming.for_interval(interval_s)
    assert t.retry_s <= min(interval_s / 2, 1.0)  # a standby tries at least once a second
    assert t.takeover_after_exit_s() == t.retry_s
    # a dead leader's successor leads within half an interval, leaving its first round the rest
    assert t.takeover_after_exit_s() <= interval_s / 2
    # a live leader queries every retry_s: idle_session_timeout leaves it seconds of stall
    assert t.idle_timeout_s - t.retry_s >= 2.0
    assert t.takeover_after_freeze_s() == t.idle_timeout_s + t.retry_s
    assert 1.0 <= t.check_timeout_s <= 5.0
    # keepalives (the fallback bound) detect a dead peer a few seconds after the idle bound
    assert t.keepalive_idle_s >= t.idle_timeout_s
    assert t.user_timeout_ms == (t.keepalive_idle_s + t.keepalive_interval_s * t.keepalive_count) * 1000


def test_timing_at_the_default_interval() -> None:
    t = ElectionTiming.for_interval(AnalyzerConfig().interval_s)
    assert (t.retry_s, t.check_timeout_s, t.idle_timeout_s) == (1.0, 5.0, 10.0)
    assert t.takeover_after_freeze_s() == 11.0  # a frozen leader is replaced within 1.1 intervals + a round


def test_session_settings_by_server_version() -> None:
    t = ElectionTiming.for_interval(1.0)
    new = session_settings(t, IDLE_TIMEOUT_SINCE, "pod-a:7")
    assert new == {
        "application_name": "fabricmon-analyzer pod-a:7",
        "tcp_keepalives_idle": "3",
        "tcp_keepalives_interval": "1",
        "tcp_keepalives_count": "3",
        "tcp_user_timeout": "6000",
        "idle_session_timeout": "3000",
    }
    old = session_settings(t, IDLE_TIMEOUT_SINCE - 1, "pod-a:7")
    assert "idle_session_timeout" not in old and old.items() <= new.items()
    long = session_settings(t, 16, "x" * 100)
    assert len(long["application_name"]) == 63  # what PostgreSQL keeps


def test_identity_names_host_and_process() -> None:
    host, _, pid = process_identity().rpartition(":")
    assert host and pid.isdigit()


def test_reasons_read_as_words() -> None:
    assert _why(TimeoutError(), 5.0) == "the lock connection did not answer within 5 s"
    closed = Exception("cannot call Connection.fetchval(): connection has been released back to the pool")
    assert _why(closed, 1.0).startswith("the database closed the lock session")
    assert _why(ConnectionResetError("reset by peer"), 1.0) == "ConnectionResetError: reset by peer"
    assert _why(OSError(), 1.0) == "OSError"


def test_leader_election_is_on_by_default() -> None:
    assert AnalyzerConfig().leader_election is True
    assert AnalyzerConfig.model_validate({"leader_election": False}).leader_election is False
