"""The embedded default store: a private PostgreSQL + TimescaleDB cluster on a local port.

fabricmon uses it whenever no DSN is configured. One store directory (:func:`default_root`)
holds everything::

    <root>/
      data/            PGDATA, owned by the account the server runs as (mode 700)
        server.log     the server's log
        fabricmon.conf our settings, included from postgresql.conf, rewritten at each start
      socket/          the server's Unix socket (never the system's /var/run/postgresql)
      password         the ``fabricmon`` role's password (mode 600, the invoking user's)
      state.json       port and versions, so ``url`` and ``status`` work while the server is down
      .lock            serialises start and stop between processes

The cluster's only role is the superuser ``fabricmon`` (password auth, scram-sha-256, on
127.0.0.1 only); it owns the database ``fabricmon``, which has the ``timescaledb`` extension.
PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` account (or
``$FABRICMON_PG_USER``) and the default root moves to ``/var/lib/fabricmon/pg``, which that
account can reach. Everything here blocks: async callers use ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from store.errors import EmbeddedStoreError
from store.pgsystem import (
    SETUP_HINT,
    Account,
    find_bindir,
    pick_port,
    port_is_free,
    server_account,
    timescaledb_missing,
    write_private,
)

ROLE = "fabricmon"
DATABASE = "fabricmon"
HOST = "127.0.0.1"
_LOG_TAIL_LINES = 20
_PORT_ATTEMPTS = 3
# Settings appended to postgresql.conf (through fabricmon.conf). Hypertables lock every chunk
# a statement touches, hence the raised max_locks_per_transaction.
_SETTINGS: dict[str, str] = {
    "listen_addresses": f"'{HOST}'",
    "shared_preload_libraries": "'timescaledb'",
    "timescaledb.telemetry_level": "off",
    "timescaledb.max_background_workers": "8",
    "max_worker_processes": "16",
    "shared_buffers": "'256MB'",
    "max_connections": "100",
    "max_locks_per_transaction": "256",
}


def default_root() -> Path:
    """The store dir: ``$FABRICMON_DATA_DIR/pg``, else in the user's (as root, the system's) data dir."""
    configured = os.environ.get("FABRICMON_DATA_DIR")
    if configured:
        return Path(configured).expanduser().absolute() / "pg"
    if os.geteuid() == 0:
        # The postgres account cannot enter /root (mode 700), and initdb refuses root.
        return Path("/var/lib/fabricmon/pg")
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base.absolute() / "fabricmon" / "pg"


@dataclass(frozen=True, slots=True)
class StoreStatus:
    """What ``fabricmon db status`` shows: whether the server runs, and where."""

    running: bool
    initialized: bool
    pid: int | None
    port: int | None
    data_dir: Path
    log_file: Path
    version: str | None
    timescaledb_version: str | None
    dsn: str | None = field(repr=False)

    def as_dict(self, *, reveal_password: bool = False) -> dict[str, Any]:
        """JSON-ready fields; the DSN's password is masked unless asked for."""
        out = asdict(self)
        out["data_dir"], out["log_file"] = str(self.data_dir), str(self.log_file)
        if self.dsn is not None and not reveal_password:
            out["dsn"] = mask_password(self.dsn)
        return out


class EmbeddedStore:
    """One private PostgreSQL + TimescaleDB cluster rooted at a directory; every call blocks."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or default_root()).absolute()
        self.data_dir = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log_file = self.data_dir / "server.log"
        self.password_file = self.root / "password"
        self.state_file = self.root / "state.json"
        self._bindir: Path | None = None
        self._account: Account | None = None

    def start(self, timeout_s: float = 60.0) -> StoreStatus:
        """Create the cluster if needed and start it; returns once it accepts connections."""
        missing = timescaledb_missing(self._bins())
        if missing:
            raise EmbeddedStoreError(f"{missing}; {SETUP_HINT}")
        deadline = time.monotonic() + timeout_s
        self._prepare_dirs()
        with self._locked():
            pid, _, ready = self._postmaster()
            if pid is not None and not ready:
                ready = self._wait_ready(deadline)  # still recovering or starting from an earlier call
            if not ready:
                if not self.is_initialized():
                    self._initdb()
                self._wait_reaped(deadline)  # killed (SIGKILL, OOM): crash recovery runs on start
                self._start_server(deadline)
            if not self._read_state().get("bootstrapped"):
                self._bootstrap()
            return self.status()

    def stop(self, timeout_s: float = 60.0) -> StoreStatus:
        """Stop the server (fast shutdown: sessions are cut, committed data is safe); idempotent."""
        if self._postmaster()[0] is None:
            return self.status()
        with self._locked():
            if self._postmaster()[0] is None:
                return self.status()
            fast = self._pg_ctl("-m", "fast", "stop", timeout_s=timeout_s)
            if fast.returncode != 0 and self._postmaster()[0] is not None:
                hard = self._pg_ctl("-m", "immediate", "stop", timeout_s=30)
                if hard.returncode != 0 and self._postmaster()[0] is not None:
                    raise EmbeddedStoreError(
                        f"cannot stop the embedded store in {self.data_dir}: "
                        f"{_last_line(hard.stderr or fast.stderr)}{self._log_tail()}"
                    )
            return self.status()

    def status(self) -> StoreStatus:
        """The server's state from its pid file and the recorded state; starts nothing."""
        state = self._read_state()
        pid, live_port, ready = self._postmaster()
        port = live_port or _as_int(state.get("port"))
        initialized = self.is_initialized()
        return StoreStatus(
            running=pid is not None and ready,
            initialized=initialized,
            pid=pid,
            port=port,
            data_dir=self.data_dir,
            log_file=self.log_file,
            version=state.get("server_version"),
            timescaledb_version=state.get("timescaledb_version"),
            dsn=self._dsn(port) if initialized and port else None,
        )

    def dsn(self, database: str = DATABASE) -> str:
        """``postgresql://fabricmon:<password>@127.0.0.1:<port>/<database>``, for asyncpg and psql."""
        port = self._postmaster()[1] or _as_int(self._read_state().get("port"))
        if not self.is_initialized() or port is None:
            raise EmbeddedStoreError(f"no embedded store in {self.root} yet; run `fabricmon db start`")
        return self._dsn(port, database)

    def is_initialized(self) -> bool:
        """True once initdb has made the cluster (whether or not it runs)."""
        return (self.data_dir / "PG_VERSION").is_file() and self.password_file.is_file()

    # -- setup ---------------------------------------------------------------------------

    def _prepare_dirs(self) -> None:
        account = self._server_account()
        account.check_reachable(self.root)  # before creating anything
        for parent in reversed(self.root.parents):
            if not parent.exists():
                parent.mkdir(mode=0o755)
                parent.chmod(0o755)  # whatever the umask, the server account must pass through
        self.root.mkdir(mode=0o700, exist_ok=True)
        if account.switch:  # the server account passes through the store dir, without listing it
            self.root.chmod(self.root.stat().st_mode & 0o777 | 0o711)
        for owned in (self.data_dir, self.socket_dir):
            owned.mkdir(mode=0o700, exist_ok=True)
            account.chown(owned)

    def _initdb(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            raise EmbeddedStoreError(
                f"the cluster in {self.data_dir} has lost its password file {self.password_file}; "
                "restore it, or move the store away to start afresh"
            )
        if any(self.data_dir.iterdir()):
            raise EmbeddedStoreError(
                f"{self.data_dir} is not empty but holds no PostgreSQL cluster "
                "(an interrupted setup?); move it away and run `fabricmon db start` again"
            )
        password = secrets.token_urlsafe(24)
        write_private(self.password_file, password + "\n")
        pwfile = self.root / ".initdb-password"  # for initdb only, readable by the server account only
        write_private(pwfile, password + "\n")
        self._server_account().chown(pwfile)
        argv = [str(self._bins() / "initdb"), "-D", str(self.data_dir), "-U", ROLE, f"--pwfile={pwfile}"]
        argv += ["-A", "scram-sha-256", "-E", "UTF8", "--locale=C", "--no-instructions"]
        try:
            result = self._run(argv, as_server=True, timeout=300)
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            self.password_file.unlink(missing_ok=True)
            raise EmbeddedStoreError(f"initdb failed in {self.data_dir}: {_last_line(result.stderr)}")
        with (self.data_dir / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# fabricmon: the embedded store's settings\ninclude_if_exists = 'fabricmon.conf'\n")
        self._write_state({"port": None, "bootstrapped": False, "account": self._server_account().name})

    def _start_server(self, deadline: float) -> None:
        state = self._read_state()
        attempt = 0
        while True:
            attempt += 1
            port = _as_int(state.get("port"))
            if port is None or not port_is_free(HOST, port):
                port = pick_port(HOST)  # recorded and kept, so the DSN stays stable across restarts
            state["port"] = port
            self._write_state(state)
            self._write_conf(port)
            log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
            result = self._pg_ctl("-l", str(self.log_file), "start", timeout_s=deadline - time.monotonic())
            if result.returncode == 0:
                return
            logged = self._read_log(log_offset) + (result.stderr or "")
            if "Address already in use" in logged and attempt < _PORT_ATTEMPTS:
                state["port"] = None  # another program took the port since we checked: choose again
                continue
            if any(m in logged for m in _STILL_DYING) and time.monotonic() + 0.5 < deadline:
                time.sleep(0.2)  # a killed server's last backends still hold its shared memory
                continue
            tail = self._log_tail(log_offset) or f": {_last_line(result.stderr)}"
            raise EmbeddedStoreError(f"the embedded store in {self.data_dir} did not start{tail}")

    def _wait_ready(self, deadline: float) -> bool:
        while time.monotonic() < deadline:
            pid, _, ready = self._postmaster()
            if pid is None or ready:
                return ready
            time.sleep(0.1)
        raise EmbeddedStoreError(f"the embedded store in {self.data_dir} is not ready yet{self._log_tail()}")

    def _write_conf(self, port: int) -> None:
        settings = {**_SETTINGS, "port": str(port), "unix_socket_directories": _conf_quote(self.socket_dir)}
        path = self.data_dir / "fabricmon.conf"
        write_private(path, "".join(f"{k} = {v}\n" for k, v in settings.items()))
        self._server_account().chown(path)

    def _bootstrap(self) -> None:
        """First start only: the ``fabricmon`` database with TimescaleDB; records the versions."""
        self._psql(
            "postgres",
            f"SELECT 'CREATE DATABASE {DATABASE}' WHERE NOT EXISTS "
            f"(SELECT FROM pg_database WHERE datname = '{DATABASE}')\\gexec\n",
        )
        out = self._psql(
            DATABASE,
            "CREATE EXTENSION IF NOT EXISTS timescaledb;\n"
            "SELECT current_setting('server_version'), extversion FROM pg_extension "
            "WHERE extname = 'timescaledb';\n",
        )
        server_version, ts_version = out.strip().splitlines()[-1].split("|")
        state = self._read_state()
        state.update(bootstrapped=True, server_version=server_version, timescaledb_version=ts_version)
        self._write_state(state)

    def _psql(self, database: str, script: str) -> str:
        env = {
            "PGPASSWORD": self._password(),
            "PGCONNECT_TIMEOUT": "10",
            "PGOPTIONS": "-c client_min_messages=warning",
        }
        port = str(self._postmaster()[1])
        argv = [str(self._bins() / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
        argv += ["-h", HOST, "-p", port, "-U", ROLE, "-d", database]
        result = self._run(argv, as_server=False, timeout=120, extra_env=env, stdin=script)
        if result.returncode != 0:
            raise EmbeddedStoreError(
                f"setting up database {database!r} failed: {_last_line(result.stderr)}{self._log_tail()}"
            )
        return result.stdout

    # -- plumbing ------------------------------------------------------------------------

    def _pg_ctl(self, *args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
        wait_s = max(1, int(timeout_s))
        argv = [str(self._bins() / "pg_ctl"), "-D", str(self.data_dir), "-w", "-t", str(wait_s), *args]
        return self._run(argv, as_server=True, timeout=wait_s + 15)

    def _run(
        self,
        argv: list[str],
        *,
        as_server: bool,
        timeout: float,
        extra_env: dict[str, str] | None = None,
        stdin: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        account = self._server_account()
        return account.run(argv, cwd=self.root, as_server=as_server, timeout=timeout, extra_env=extra_env, stdin=stdin)

    def _postmaster(self) -> tuple[int | None, int | None, bool]:
        """(pid, port, ready) from postmaster.pid while that process lives, else (None, None, False).

        A killed postmaster stays a zombie until its parent reaps it: dead, though ``kill(pid, 0)``
        still finds it."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text(encoding="utf-8").splitlines()
            pid = int(lines[0])
            if process_state(pid) != "alive":
                return None, None, False
        except (OSError, ValueError, IndexError):
            return None, None, False
        port = _as_int(lines[3]) if len(lines) > 3 else None
        return pid, port, len(lines) > 7 and lines[7].strip() == "ready"

    def _wait_reaped(self, deadline: float) -> None:
        """Wait while a dead postmaster is still a zombie: PostgreSQL would take its stale pid file
        for a live server ("lock file already exists") and refuse to start."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text(encoding="utf-8").split()[0])
        except (OSError, ValueError, IndexError):
            return
        while process_state(pid) == "zombie" and time.monotonic() < deadline:
            time.sleep(0.05)

    def _bins(self) -> Path:
        if self._bindir is None:
            self._bindir = find_bindir()
        return self._bindir

    def _server_account(self) -> Account:
        if self._account is None:
            self._account = server_account()
        return self._account

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialises start and stop across processes (a ``fabricmon demo`` and a ``db stop``)."""
        with (self.root / ".lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _password(self) -> str:
        try:
            return self.password_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise EmbeddedStoreError(f"cannot read the embedded store's password: {exc}") from exc

    def _dsn(self, port: int, database: str = DATABASE) -> str:
        password, db = quote(self._password(), safe=""), quote(database, safe="")
        return f"postgresql://{ROLE}:{password}@{HOST}:{port}/{db}"

    def _read_state(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return state

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        tmp.chmod(0o644)
        tmp.replace(self.state_file)

    def _read_log(self, offset: int = 0) -> str:
        try:
            with self.log_file.open("rb") as log:
                log.seek(offset)
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _log_tail(self, since: int = 0) -> str:
        """The log's last lines (written after offset ``since``), to explain a failure."""
        size = self.log_file.stat().st_size if self.log_file.exists() else 0
        lines = self._read_log(max(since, size - 16_384)).splitlines()[-_LOG_TAIL_LINES:]
        if not lines:
            return ""
        return f"; last lines of {self.log_file}:\n" + "\n".join(f"  {line}" for line in lines)


#: What PostgreSQL logs when it will not start because a killed server has not quite gone.
_STILL_DYING = ("pre-existing shared memory block", 'lock file "postmaster.pid" already exists')


def process_state(pid: int) -> str:
    """``alive``, ``zombie`` (dead, not reaped yet) or ``gone``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:  # another account's live process
        return "alive"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return "alive"  # no /proc: trust kill(pid, 0)
    return "zombie" if stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] == "Z" else "alive"


def mask_password(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***``, for output and logs."""
    password = urlsplit(dsn).password
    return dsn.replace(f":{password}@", ":***@", 1) if password else dsn


def _conf_quote(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _as_int(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""
