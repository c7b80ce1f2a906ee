"""slurmrestd on loopback in front of a test cluster (:mod:`tests.support.slurm`), with JWT auth.

The set-up a site runs, scaled down (verified on Debian's Slurm 22.05.8):

* ``slurm.conf`` gets ``AuthAltTypes=auth/jwt`` and ``AuthAltParameters=jwt_key=<key>`` (a random
  HS256 key under the cluster's directory, mode 0600: slurmctld reads it as SlurmUser, root here).
  Debian ships the plugin apart, in ``slurm-wlm-jwt-plugin``: without it slurmctld exits with
  "cannot find auth plugin for auth/jwt";
* ``slurmrestd`` runs with ``SLURM_JWT=daemon`` and ``-a rest_auth/jwt``: each request's
  ``X-SLURM-USER-NAME``/``X-SLURM-USER-TOKEN`` go to slurmctld, which checks the token;
* it refuses to run as root or SlurmUser ("slurmrestd should not be run as the root user"); the
  documented way is ``-u``/``-g`` to an unprivileged account, here ``nobody``/``nogroup``
  (``SLURMRESTD_SECURITY=disable_user_check`` is the other, for set-ups without one);
* only its ``openapi/v*`` plugins are loaded: the ``openapi/dbv*`` ones (accounting) need
  slurmdbd, and without it slurmrestd exits ("slurm not configured with slurmdbd").

Tokens come from ``scontrol token``; :func:`forged_token` makes a well-formed JWT signed with
another key, which slurmctld rejects.
"""

from __future__ import annotations

import base64
import contextlib
import glob
import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.ports import free_port
from tests.support.slurm import SlurmCluster, missing_programs, slurm_cluster

JWT_PLUGIN_GLOBS = (
    "/usr/lib/*/slurm-wlm/auth_jwt.so",
    "/usr/lib*/slurm/auth_jwt.so",
    "/usr/local/lib*/slurm/auth_jwt.so",
)


def slurmrestd_program() -> str | None:
    return shutil.which("slurmrestd") or next((p for p in ["/usr/sbin/slurmrestd"] if Path(p).exists()), None)


def missing() -> str | None:
    """Why slurmrestd tests cannot run here (None: they can), naming the Debian packages."""
    lacking = missing_programs()
    if lacking:
        return f"Slurm is not installed ({', '.join(lacking)}): Debian's slurmctld, slurmd, slurm-client and munge"
    if slurmrestd_program() is None:
        return "slurmrestd is not installed: apt-get install slurmrestd (Debian package)"
    if not any(glob.glob(g) for g in JWT_PLUGIN_GLOBS):
        return "Slurm's JWT plugin auth_jwt.so is missing: apt-get install slurm-wlm-jwt-plugin (Debian package)"
    return None


def jwt_config(key: Path) -> list[str]:
    """The ``slurm.conf`` lines that let slurmctld take JWTs signed with ``key``."""
    return ["AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={key}"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged_token(claims: dict[str, Any], key: bytes = b"not the cluster's key") -> str:
    """An HS256 JWT signed with ``key`` (not the cluster's): well-formed, and rejected by slurmctld."""
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    sig = hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(sig)}"


@dataclass
class SlurmRestd:
    """One slurmrestd listening on 127.0.0.1, in front of ``cluster``."""

    cluster: SlurmCluster
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.cluster.root / "slurmrestd.out"

    def _env(self) -> dict[str, str]:
        return {**self.cluster.env, "SLURM_JWT": "daemon"}

    def _argv(self, *args: str) -> list[str]:
        program = slurmrestd_program()
        assert program is not None
        return [program, "-u", "nobody", "-g", "nogroup", *args]

    def openapi_plugins(self) -> list[str]:
        """The ``openapi/*`` plugins this slurmrestd has, less those that need slurmdbd."""
        out = subprocess.run(
            self._argv("-s", "list"), env=self._env(), capture_output=True, text=True, timeout=20, check=False
        )
        names = [w for line in (out.stdout + out.stderr).splitlines() for w in line.split() if w.startswith("openapi/")]
        return [n for n in names if not n.startswith("openapi/db") and "slurmdbd" not in n]

    def start(self) -> None:
        plugins = ",".join(self.openapi_plugins())
        assert plugins, f"slurmrestd lists no openapi plugins (see {self.log})"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self._argv("-a", "rest_auth/jwt", "-s", plugins, f"127.0.0.1:{self.port}"),
                env=self._env(),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        token = self.token()
        self.cluster.wait(lambda: self.status("/openapi/v3", token) == 200 or self._died(), 20, "slurmrestd to answer")
        assert not self._died(), f"slurmrestd exited {self.proc.returncode}: {self.log.read_text()[-2000:]}"

    def _died(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)  # its clean shutdown
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def token(self, user: str = "root", lifespan_s: int = 3600) -> str:
        """A token from ``scontrol token`` (slurmctld must be up)."""
        out = self.cluster.run("scontrol", "token", f"username={user}", f"lifespan={lifespan_s}")
        return out.strip().removeprefix("SLURM_JWT=")

    def status(self, path: str, token: str, user: str = "root") -> int | None:
        """The HTTP status of ``GET path`` (None: no answer)."""
        req = urllib.request.Request(self.url + path, headers={"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except (urllib.error.URLError, OSError):
            return None

    def openapi(self, token: str) -> dict[str, Any]:
        """Its OpenAPI document (``GET /openapi/v3``)."""
        req = urllib.request.Request(
            self.url + "/openapi/v3", headers={"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": token}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            doc: dict[str, Any] = json.load(resp)
        return doc

    def api_versions(self, token: str) -> list[str]:
        """The ``/slurm/v*`` versions it serves, oldest first."""
        versions = {p.split("/")[2] for p in self.openapi(token)["paths"] if p.startswith("/slurm/v")}
        return sorted(versions, key=lambda v: tuple(int(x) for x in v[1:].split(".")))


@contextlib.contextmanager
def slurm_rest_cluster(nodes: Sequence[str]) -> Iterator[tuple[SlurmCluster, SlurmRestd]]:
    """A JWT-enabled cluster of ``nodes`` and a slurmrestd in front of it.

    Its directory is a fresh one in ``/tmp``, mode 0755, removed afterwards: slurmrestd reads
    ``slurm.conf`` as ``nobody``, which pytest's own temporary directories (mode 0700) shut out.
    """
    root = Path(tempfile.mkdtemp(prefix="fabricmon-slurmrest-", dir="/tmp"))
    root.chmod(0o755)
    key = root / "jwt.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    try:
        with slurm_cluster(root, nodes, extra_config=jwt_config(key)) as cluster:
            restd = SlurmRestd(cluster)
            try:
                restd.start()
                yield cluster, restd
            finally:
                restd.stop()
                with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
                    cluster.reset()  # no job scripts outlive the slurmds
    finally:
        shutil.rmtree(root, ignore_errors=True)
