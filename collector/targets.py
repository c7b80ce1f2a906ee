"""Which switch is reached how: the ``targets`` config resolved against the fabric inventory.

The first ``targets`` entry whose ``switches`` patterns (exact names or globs) match a switch
wins. String fields may use ``{switch}`` and the switch's inventory fields (``{mgmt_address}``,
``{role}``, ``{group}``, ``{rail}``, ``{index}``); a field the inventory lacks is an error naming
the switch. ``--shard I/N`` keeps a deterministic subset, stable across processes and hosts.
"""

from __future__ import annotations

import fnmatch
import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import SecretStr

from collector.config import SnmpV3Config, TargetConfig, TlsConfig
from config.errors import ConfigError
from fabric.model import Fabric, Switch

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SwitchTarget:
    """How to reach one switch (templates resolved)."""

    switch: str
    protocol: Literal["gnmi", "snmp"]
    address: str
    gnmi_target: str | None = None
    profile: str = "openconfig"
    tls: TlsConfig = field(default_factory=TlsConfig)
    #: ``username``/``password`` may go into plaintext metadata (the entry said so, SPEC §10.6).
    allow_plaintext_credentials: bool = False
    #: The config entry this target came from (``targets[2]``): warnings name it.
    entry: str = ""
    username: str | None = None
    password: SecretStr | None = None
    snmp_version: Literal["2c", "3"] = "2c"
    community: SecretStr | None = None
    v3: SnmpV3Config | None = None
    timeout_s: float = 5.0
    retries: int = 2

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.address.rpartition(":")
        return host.strip("[]"), int(port)


def _fields(sw: Switch) -> dict[str, str]:
    values = {"switch": sw.name, "role": str(sw.role), "index": str(sw.index)}
    for name in ("group", "rail", "plane", "mgmt_address"):
        value = getattr(sw, name)
        if value is not None:
            values[name] = str(value)
    return values


def _fill(template: str, values: dict[str, str], where: str) -> str:
    try:
        return template.format_map(values)
    except KeyError as exc:
        raise ConfigError(f"{where}: switch {values['switch']} has no inventory field {exc.args[0]!r}") from None
    except (ValueError, IndexError) as exc:
        raise ConfigError(f"{where}: bad template {template!r}: {exc}") from None


def _secret(value: SecretStr | None, values: dict[str, str], where: str) -> SecretStr | None:
    return None if value is None else SecretStr(_fill(value.get_secret_value(), values, where))


def resolve(entry: TargetConfig, sw: Switch, where: str) -> SwitchTarget:
    """One switch's target from the entry that matched it."""
    values = _fields(sw)
    address = _fill(entry.address, values, f"{where}.address")
    if not address.rpartition(":")[2].isdigit():
        raise ConfigError(f"{where}.address: {address!r} for {sw.name} is not host:port")
    tls = entry.tls
    if tls.server_name is not None:  # "{mgmt_address}" for IP-only certificates, "{switch}.domain"...
        tls = tls.model_copy(update={"server_name": _fill(tls.server_name, values, f"{where}.tls.server_name")})
    v3 = entry.v3
    if v3 is not None:
        v3 = v3.model_copy(update={"context": _fill(v3.context, values, f"{where}.v3.context")})
    return SwitchTarget(
        switch=sw.name,
        protocol=entry.protocol,
        address=address,
        gnmi_target=None if entry.target is None else _fill(entry.target, values, f"{where}.target"),
        profile=entry.profile,
        tls=tls,
        allow_plaintext_credentials=entry.allow_plaintext_credentials,
        entry=where,
        username=None if entry.username is None else _fill(entry.username, values, f"{where}.username"),
        password=entry.password,
        snmp_version=entry.version,
        community=_secret(entry.community, values, f"{where}.community"),
        v3=v3,
        timeout_s=entry.timeout_s,
        retries=entry.retries,
    )


def resolve_targets(entries: Sequence[TargetConfig], fabric: Fabric) -> tuple[list[SwitchTarget], list[str]]:
    """(targets, switches no entry matched), in switch-name order."""
    found: list[SwitchTarget] = []
    unmatched: list[str] = []
    for name in sorted(fabric.switches):
        sw = fabric.switches[name]
        for i, entry in enumerate(entries):
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in entry.switches):
                found.append(resolve(entry, sw, f"targets[{i}]"))
                break
        else:
            unmatched.append(name)
    return found, unmatched


def check_credentials(target: SwitchTarget) -> None:
    """Refuse credentials bound for plaintext gRPC unless the entry allowed it (SPEC §10.6).

    The config refuses such an entry already; this guards targets built in code too, at the one
    place the metadata is made."""
    sends = target.username is not None or target.password is not None
    if target.protocol == "gnmi" and sends and not target.tls.enabled and not target.allow_plaintext_credentials:
        where = f" ({target.entry})" if target.entry else ""
        raise ConfigError(
            f"gNMI target {target.switch}{where}: username/password would travel in plaintext; "
            "enable TLS or set 'allow_plaintext_credentials: true'"
        )


def plaintext_warnings(targets: Sequence[SwitchTarget]) -> list[str]:
    """One warning per config entry whose gNMI switches are reached in plaintext, logged too."""
    by_entry: dict[str, list[str]] = {}
    for t in targets:
        if t.protocol == "gnmi" and not t.tls.enabled:
            by_entry.setdefault(t.entry or "gNMI targets built in code", []).append(t.switch)
    out: list[str] = []
    for entry, switches in by_entry.items():
        shown = ", ".join(switches[:3]) + (f" and {len(switches) - 3} more" if len(switches) > 3 else "")
        out.append(
            f"{entry}: gNMI in plaintext (insecure: true) to {len(switches)} switch"
            f"{'es' if len(switches) != 1 else ''} ({shown}): telemetry travels unencrypted and unauthenticated"
        )
    for message in out:
        log.warning("%s", message)
    return out


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` → (I, N)."""
    index, _, count = text.partition("/")
    i, n = int(index), int(count)
    if not 0 <= i < n:
        raise ConfigError(f"shard {text!r}: need 0 <= I < N")
    return i, n


def shard_of(switch: str, count: int) -> int:
    """The shard a switch belongs to: a stable hash, the same on every host and Python run."""
    return zlib.crc32(switch.encode()) % count


def in_shard(targets: Sequence[SwitchTarget], index: int, count: int) -> list[SwitchTarget]:
    """The targets of shard ``index`` of ``count``."""
    return [t for t in targets if shard_of(t.switch, count) == index]
