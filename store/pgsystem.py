"""What the embedded store needs from the operating system: the PostgreSQL binaries, the
account the server runs as (and running programs as it), private files and free local ports.
Blocking helpers for :mod:`store.pgserver`.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from store.errors import EmbeddedStoreError

REQUIRED_BINARIES = ("initdb", "pg_ctl", "postgres", "psql")
SETUP_HINT = "run `make setup`"
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True, slots=True)
class Account:
    """The OS account PostgreSQL runs as; ``switch`` when we are root and must drop to it."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    switch: bool

    def chown(self, path: Path) -> None:
        """Give ``path`` to this account (a no-op unless we run as root on its behalf)."""
        if self.switch:
            os.chown(path, self.uid, self.gid)

    def can_enter(self, path: Path) -> bool:
        """Whether this account may traverse directory ``path``, judged by its mode bits."""
        st = path.stat()
        if st.st_uid == self.uid:
            return bool(st.st_mode & stat.S_IXUSR)
        if st.st_gid == self.gid or st.st_gid in self.groups:
            return bool(st.st_mode & stat.S_IXGRP)
        return bool(st.st_mode & stat.S_IXOTH)

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        as_server: bool,
        timeout: float,
        extra_env: dict[str, str] | None = None,
        stdin: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a PostgreSQL program (as this account when ``as_server``), capturing its output."""
        drop = as_server and self.switch
        if drop:  # another account gets none of our environment (it may carry secrets)
            env = {"PATH": _SAFE_PATH, "HOME": self.home, "USER": self.name, "LOGNAME": self.name}
            env.update({k: os.environ[k] for k in ("TZ",) if k in os.environ})
        else:  # inherited PG* variables (PGDATA, PGPORT, PGHOST...) would retarget the programs
            env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", **(extra_env or {}))
        if drop:
            if not Path(argv[0]).exists():
                raise EmbeddedStoreError(f"cannot run {argv[0]}: no such file; {SETUP_HINT}")
            argv = [*self._as_account(), *argv]
        try:
            return subprocess.run(
                argv,
                cwd=cwd,
                env=env,
                input=stdin,
                stdin=None if stdin is not None else subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise EmbeddedStoreError(f"{Path(argv[0]).name} took longer than {timeout:.0f} s") from exc
        except OSError as exc:
            raise EmbeddedStoreError(f"cannot run {argv[0]}: {exc}; {SETUP_HINT}") from exc

    def _as_account(self) -> list[str]:
        """``setpriv`` (util-linux, on every Debian) switching to this account, then exec'ing.

        Not ``subprocess``'s ``user=``/``group=``: those make Python ``fork()`` instead of
        ``vfork()``, and a ``fork()`` from a process running gRPC's threads (the collectors, the
        simulator) can crash the child before it reaches ``exec`` (grpc/grpc#13873, #32992):
        seen here as a segfault when a test restarted the store mid-stream.
        """
        groups = ",".join(str(g) for g in self.groups)
        return [
            shutil.which("setpriv") or "/usr/bin/setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            f"--groups={groups}" if groups else "--clear-groups",
            "--",
        ]

    def check_reachable(self, root: Path) -> None:
        """Raise unless this account can reach ``root`` through every existing parent directory."""
        if not self.switch:
            return
        for directory in [*reversed(root.parents), root]:
            if directory.exists() and not self.can_enter(directory):
                raise EmbeddedStoreError(
                    f"PostgreSQL runs as the {self.name!r} account, which cannot enter {directory} "
                    f"(mode {stat.filemode(directory.stat().st_mode)}); set FABRICMON_DATA_DIR to a "
                    f"directory it can reach (e.g. under /var/lib), or `chmod o+x {directory}`"
                )


def server_account() -> Account:
    """The current user; as root, ``$FABRICMON_PG_USER`` (default ``postgres``), since initdb refuses root."""
    if os.geteuid() != 0:
        try:
            me = pwd.getpwuid(os.geteuid())
            name, home = me.pw_name, me.pw_dir
        except KeyError:  # an unnamed uid, as in some containers
            name, home = str(os.geteuid()), os.environ.get("HOME", "/")
        return Account(name, os.geteuid(), os.getegid(), (), home, switch=False)
    name = os.environ.get("FABRICMON_PG_USER") or "postgres"
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise EmbeddedStoreError(
            f"running as root, the embedded store runs PostgreSQL as the {name!r} account, which does not "
            f"exist; {SETUP_HINT} (it creates it) or set FABRICMON_PG_USER"
        ) from None
    if entry.pw_uid == 0:
        raise EmbeddedStoreError(f"PostgreSQL refuses to run as root; FABRICMON_PG_USER={name!r} is root")
    groups = tuple(g for g in os.getgrouplist(name, entry.pw_gid) if g != entry.pw_gid)
    return Account(name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir, switch=True)


def find_bindir() -> Path:
    """The server binaries' dir: ``$FABRICMON_PG_BIN``, ``initdb`` on PATH, else the newest Debian one."""
    configured = os.environ.get("FABRICMON_PG_BIN")
    candidates: list[Path] = []
    if configured:
        candidates.append(Path(configured))
    else:
        on_path = shutil.which("initdb")
        if on_path:
            candidates.append(Path(on_path).resolve().parent)
        installed = Path("/usr/lib/postgresql").glob("*/bin")
        candidates.extend(sorted(installed, key=lambda p: _version_key(p.parent.name), reverse=True))
    for bindir in candidates:
        if all(os.access(bindir / name, os.X_OK) for name in REQUIRED_BINARIES):
            return bindir
    where = f"FABRICMON_PG_BIN={configured}" if configured else "PATH or /usr/lib/postgresql/*/bin"
    raise EmbeddedStoreError(
        f"PostgreSQL server binaries ({', '.join(REQUIRED_BINARIES)}) not found in {where}; {SETUP_HINT}"
    )


def timescaledb_missing(bindir: Path) -> str | None:
    """Why the TimescaleDB extension is not installed for ``bindir``'s PostgreSQL, or None if it is."""
    pg_config = bindir / "pg_config"
    if not os.access(pg_config, os.X_OK):
        return None  # cannot tell; a server that lacks it says so in its log at start
    try:
        out = subprocess.run(
            [str(pg_config), "--sharedir", "--pkglibdir"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return None
    sharedir, pkglibdir = Path(out[0].strip()), Path(out[1].strip())
    control = sharedir / "extension" / "timescaledb.control"
    if not control.is_file() or not (pkglibdir / "timescaledb.so").is_file():
        return f"the TimescaleDB extension is not installed in the PostgreSQL of {bindir} (no {control})"
    return None


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by its owner only, replacing it atomically."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    tmp.replace(path)


def pick_port(host: str) -> int:
    """A port that is free on ``host`` right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
    return port


def port_is_free(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now (with SO_REUSEADDR, as PostgreSQL binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name)) or (0,)
