"""``fabricmon sim --write-config``: a complete fabricmon config pointing at this simulator.

With ``protocols: mixed`` (the default) leaves are read over gNMI and spines and superspines
over SNMP v2c, as many real fabrics are; ``gnmi`` or ``snmp`` put every switch on one protocol.
The file is plain fabricmon YAML: ``fabricmon run --config FILE`` monitors the simulator.

When the simulator speaks several NOS shapes (``--nos``), each gNMI switch is collected with the
profile of its NOS (:data:`simulator.nos.PROFILES`: openconfig and cumulus → ``openconfig``,
eos → ``eos``, sonic → ``sonic``, xr → ``xr``): one target entry per profile other than
``openconfig`` with the explicit list of its switches comes first (the first matching entry
wins), then the usual pattern entries. SONiC entries set ``username: "{switch}"``: the DB
targets of the SONiC profile do not name the switch, the metadata does.

gNMI entries trust the simulator's CA (``tls: {ca_file: ...}``, :mod:`simulator.sim_tls`) when it
serves TLS, its default; against a ``--plaintext`` simulator they say ``tls: {enabled: false}``
and ``insecure: true`` (SPEC §10.6), and the SONiC entries ``allow_plaintext_credentials: true``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from fabric.model import Fabric, FabricParams, Role
from simulator.nos import PROFILES, Nos

Protocols = Literal["mixed", "gnmi", "snmp"]

#: The simulator answers SNMP within milliseconds; a shorter poll makes demos and tests react faster.
SIM_SNMP_INTERVAL_S = 10.0


def sim_config(
    *,
    gnmi_address: str | None,
    snmp_address: str | None,
    protocols: Protocols = "mixed",
    params: FabricParams | None = None,
    inventory: Path | None = None,
    gnmi_interval_s: float = 10.0,
    snmp_interval_s: float = SIM_SNMP_INTERVAL_S,
    nos: Mapping[str, Nos] | None = None,
    fabric: Fabric | None = None,
    naming: str = "swp",
    ca_file: Path | None = None,
) -> dict[str, Any]:
    """The config as a mapping (``database`` left out: the embedded store).

    ``nos`` (switch → NOS, e.g. ``RunningSim.devices.assignment()``) picks each gNMI switch's
    collector profile; None: every switch speaks OpenConfig. ``fabric``, when its switches are
    not named as the AIPod names them (``lf-*``, ``sp-*``, ``ssp-*``), makes the mixed split
    by role with explicit switch lists. ``naming`` goes into a generated fabric's section.
    ``ca_file``: the simulator serves TLS with this CA; None: it serves plaintext.
    """
    if (protocols in ("mixed", "gnmi") and gnmi_address is None) or (
        protocols in ("mixed", "snmp") and snmp_address is None
    ):
        wanted = "gNMI and SNMP" if protocols == "mixed" else protocols
        raise ValueError(f"protocols={protocols!r} needs the simulator's {wanted} address")
    gnmi: dict[str, Any] = {"protocol": "gnmi", "address": gnmi_address, "target": "{switch}"}
    if ca_file is not None:
        gnmi["tls"] = {"ca_file": str(ca_file)}
    else:
        gnmi.update(tls={"enabled": False}, insecure=True)
    snmp = {"protocol": "snmp", "address": snmp_address, "version": "2c", "community": "{switch}"}
    leaves, above = _by_tier(fabric)
    if protocols == "mixed":
        targets = [{"switches": leaves, **gnmi}, {"switches": above, **snmp}]
    elif protocols == "gnmi":
        targets = [{"switches": ["*"], **gnmi}]
    else:
        targets = [{"switches": ["*"], **snmp}]
    if nos and protocols != "snmp":
        targets = _profile_targets(nos, gnmi, ["*"] if protocols == "gnmi" else leaves) + targets
    section: dict[str, Any]
    if inventory is not None:
        section = {"inventory": str(inventory)}
    else:
        p = params or FabricParams(gpus=512)
        section = {"generate": {"gpus": p.gpus, "rails": p.rails, "radix": p.radix, "speed_gbps": p.speed_gbps}}
        if naming != "swp":
            section["generate"]["naming"] = naming
    return {
        "fabric": section,
        "targets": targets,
        "collector": {"gnmi_interval_s": gnmi_interval_s, "snmp_interval_s": snmp_interval_s},
    }


def _by_tier(fabric: Fabric | None) -> tuple[list[str], list[str]]:
    """Switch patterns (or names) for the leaves, and for the spines and superspines."""
    aipod = (["lf-*"], ["sp-*", "ssp-*"])
    if fabric is None:
        return aipod
    leaves = [n for n, sw in fabric.switches.items() if sw.role is Role.LEAF]
    above = [n for n, sw in fabric.switches.items() if sw.role is not Role.LEAF]
    leaves_named = all(fnmatch.fnmatchcase(n, "lf-*") for n in leaves)
    above_named = all(fnmatch.fnmatchcase(n, "sp-*") or fnmatch.fnmatchcase(n, "ssp-*") for n in above)
    return aipod if leaves_named and above_named else (leaves, above)


def _profile_targets(nos: Mapping[str, Nos], gnmi: dict[str, Any], patterns: list[str]) -> list[dict[str, Any]]:
    """Explicit target entries for the gNMI switches whose NOS needs another profile than openconfig."""
    by_profile: dict[str, list[str]] = {}
    for switch, shape in nos.items():
        profile = PROFILES[shape]
        if profile != "openconfig" and any(fnmatch.fnmatchcase(switch, p) for p in patterns):
            by_profile.setdefault(profile, []).append(switch)
    out: list[dict[str, Any]] = []
    for profile, switches in by_profile.items():
        entry: dict[str, Any] = {"switches": switches, **gnmi, "profile": profile}
        if profile == "sonic":
            entry["username"] = "{switch}"  # the switch behind COUNTERS_DB / APPL_DB (simulator.nos)
            if gnmi.get("insecure"):
                entry["allow_plaintext_credentials"] = True  # a switch name, not a secret
        out.append(entry)
    return out


def write_sim_config(path: Path, config: dict[str, Any]) -> None:
    """Write the config atomically, with a header saying where it came from."""
    text = "# Written by `fabricmon sim --write-config`: fabricmon pointed at the simulator.\n" + yaml.safe_dump(
        config, sort_keys=False
    )
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
