"""The supervisor of ``collect --workers`` (collector/workers.py) over tiny real child processes.

Each "worker" here is a few lines of Python (``python -c``) that behaves like a well- or
badly-behaved collector: it exits on its own, drains on SIGTERM, ignores SIGTERM, fails its drain,
talks a lot, or serves /metrics. That is the supervisor's whole world (argv, env, pipes, signals,
exit codes, HTTP on loopback), so nothing is faked. Each test takes well under two seconds; the
full collector under the supervisor is tests/integration/test_collect_workers.py.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from collector.workers import PARENT_ENV, Backoff, Supervisor, Worker

aio = pytest.mark.asyncio(loop_scope="function")  # a loop per test: the child watchers are its own

# argv: the test's directory, the shard, the worker's metrics port.
PRELUDE = """
import os, signal, sys, time
from pathlib import Path
d, shard, port = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def ready():
    (d / f"ready-{shard}-{os.getpid()}").write_text(os.environ.get("FABRICMON_PARENT_PID", ""))
"""
EXITS_AT_ONCE = PRELUDE + "sys.exit(3)\n"
DRAINS = (
    PRELUDE
    + """
def drain(*_):
    (d / f"drained-{shard}").write_text("ok")
    sys.exit(0)
signal.signal(signal.SIGTERM, drain)
ready()
time.sleep(60)
"""
)
IGNORES_SIGTERM = PRELUDE + "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nready()\ntime.sleep(60)\n"
FAILS_ITS_DRAIN = PRELUDE + "signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))\nready()\ntime.sleep(60)\n"
TALKS = (
    PRELUDE
    + """
print("hello", flush=True)
print("oops", file=sys.stderr, flush=True)
sys.stdout.write("x" * 100_000 + "\\n")
sys.stdout.write("no newline at the end")
sys.stdout.flush()
ready()
time.sleep(60)
"""
)
SERVES_METRICS = (
    PRELUDE
    + """
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"# HELP fabricmon_collector_readings_total r\\n# TYPE fabricmon_collector_readings_total counter\\n"
        body += f"fabricmon_collector_readings_total {10 + int(shard)}\\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body.encode())
    def log_message(self, *a):
        pass
server = HTTPServer(("127.0.0.1", port), H)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
ready()
server.serve_forever()
"""
)


def supervisor(tmp: Path, script: str, shards: Sequence[int] = (0,), **kw: object) -> Supervisor:
    def command(w: Worker) -> list[str]:
        return [sys.executable, "-c", script, str(tmp), str(w.shard), str(w.port)]

    quick: Callable[[], Backoff] = lambda: Backoff(initial_s=0.05, cap_s=0.1)  # noqa: E731
    return Supervisor(shards, max(shards) + 1, command, backoff=quick, **kw)  # type: ignore[arg-type]


async def until_ready(tmp: Path, n: int, within_s: float = 10.0) -> list[Path]:
    deadline = time.monotonic() + within_s
    while len(got := sorted(map(Path, glob.glob(f"{tmp}/ready-*")))) < n:
        assert time.monotonic() < deadline, f"{len(got)} of {n} workers ready"
        await asyncio.sleep(0.02)
    return got


async def running(sup: Supervisor, stop: asyncio.Event) -> asyncio.Task[bool]:
    return asyncio.create_task(sup.run(stop))


@aio
async def test_stop_drains_every_worker(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, DRAINS, shards=(0, 2))
    stop = asyncio.Event()
    task = await running(sup, stop)
    ready = await until_ready(tmp_path, 2)
    assert {p.read_text() for p in ready} == {str(os.getpid())}  # each worker knows whom to die with
    pids = [w.proc.pid for w in sup.workers if w.proc is not None]
    assert sorted(int(p.name.rpartition("-")[2]) for p in ready) == sorted(pids)
    assert [w.state for w in sup.workers] == ["running", "running"]
    stop.set()
    assert await asyncio.wait_for(task, 10) is True
    assert (tmp_path / "drained-0").exists() and (tmp_path / "drained-2").exists()
    assert [w.restarts for w in sup.workers] == [0, 0] and [w.state for w in sup.workers] == ["stopped"] * 2
    assert all(w.proc is not None and w.proc.returncode == 0 for w in sup.workers)


@aio
async def test_a_worker_that_exits_is_restarted_with_backoff_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sup = supervisor(tmp_path, EXITS_AT_ONCE)
    stop = asyncio.Event()
    with caplog.at_level(logging.WARNING, logger="collector.workers"):
        task = await running(sup, stop)
        await until_ready(tmp_path, 0)
        deadline = time.monotonic() + 10
        while sup.workers[0].restarts < 3 or sup.workers[0].state != "restarting":
            assert time.monotonic() < deadline, sup.workers[0]
            await asyncio.sleep(0.001)
        stop.set()  # in its backoff (no await since it was seen there): nothing runs to drain
        assert await asyncio.wait_for(task, 10) is True
    assert "shard 0/1: worker (pid" in caplog.text and "exited with 3; restarting in 0.05 s" in caplog.text
    text = (await sup.scrape()).decode()
    assert f'fabricmon_collector_worker_restarts_total{{shard="0"}} {float(sup.workers[0].restarts)}' in text


@aio
async def test_a_straggler_is_killed_and_the_stop_is_not_clean(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, IGNORES_SIGTERM, drain_timeout_s=0.5)
    stop = asyncio.Event()
    task = await running(sup, stop)
    await until_ready(tmp_path, 1)
    stop.set()
    assert await asyncio.wait_for(task, 10) is False
    proc = sup.workers[0].proc
    assert proc is not None and proc.returncode == -signal.SIGKILL


@aio
async def test_a_worker_failing_its_drain_makes_the_stop_unclean(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, FAILS_ITS_DRAIN)
    stop = asyncio.Event()
    task = await running(sup, stop)
    await until_ready(tmp_path, 1)
    stop.set()
    assert await asyncio.wait_for(task, 10) is False


@aio
async def test_output_is_forwarded_line_by_line_behind_the_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sup = supervisor(tmp_path, TALKS, shards=(1,))
    stop = asyncio.Event()
    task = await running(sup, stop)
    await until_ready(tmp_path, 1)
    await asyncio.sleep(0.2)
    stop.set()
    await asyncio.wait_for(task, 10)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "[shard 1] hello" and "[shard 1] oops" in err.splitlines()
    assert "".join(line.removeprefix("[shard 1] ") for line in lines[1:-1]) == "x" * 100_000  # in pieces
    assert lines[-1] == "[shard 1] no newline at the end"


@aio
async def test_one_metrics_endpoint_for_every_worker(tmp_path: Path) -> None:
    sup = supervisor(tmp_path, SERVES_METRICS, shards=(0, 1))
    stop = asyncio.Event()
    task = await running(sup, stop)
    await until_ready(tmp_path, 2)
    try:
        text = ""
        for _ in range(50):  # the servers listen a moment after they say they are ready
            text = (await sup.scrape()).decode()
            if 'fabricmon_collector_worker_up{shard="1"} 1.0' in text and 'up{shard="0"} 1.0' in text:
                break
            await asyncio.sleep(0.05)
        assert text.count("# TYPE fabricmon_collector_readings_total counter") == 1
        assert 'fabricmon_collector_readings_total{shard="0"} 10.0' in text
        assert 'fabricmon_collector_readings_total{shard="1"} 11.0' in text
        assert 'fabricmon_collector_worker_up{shard="0"} 1.0' in text
        assert 'fabricmon_collector_workers{state="running"} 2.0' in text
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 10) is True


def test_a_worker_dies_with_its_supervisor(tmp_path: Path) -> None:
    """A supervisor killed with SIGKILL leaves no orphan: the worker gets SIGTERM from the kernel."""
    worker = (
        "import os, sys, time\n"
        "from collector.workers import PARENT_ENV, die_with_parent\n"
        "die_with_parent(int(os.environ[PARENT_ENV]))\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = (
        "import os, subprocess, sys, time\n"
        f"env = {{**os.environ, {PARENT_ENV!r}: str(os.getpid())}}\n"
        f"subprocess.Popen([sys.executable, '-c', {worker!r}], env=env)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(child):
            assert time.monotonic() < deadline, "the worker outlived its supervisor"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


def test_a_worker_whose_supervisor_is_already_gone_does_not_start() -> None:
    code = "import os\nfrom collector.workers import die_with_parent\ndie_with_parent(os.getppid() + 1_000_000)\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "is gone" in proc.stderr


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
