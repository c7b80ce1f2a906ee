"""The SNMP codec/transport layer: one small interface, two implementations, chosen per target.

* :class:`~collector.snmp_gufo.GufoClient` (gufo-snmp, a Rust BER/USM core): the default
  wherever it can serve the target: SNMPv2c, and SNMPv3 with an empty context name (gufo-snmp
  0.13 always sends an empty contextName) and any of its auth (MD5, SHA-1/224/256/384/512) and
  privacy (DES, AES-128/192/256, Cisco/Reeder key extension as pysnmp's) protocols.
* :class:`~collector.snmp_pysnmp.PysnmpClient` (pysnmp 7, numeric OIDs, ``lookupMib=False``):
  everything else, in particular SNMPv3 with a context name (the simulator's per-switch
  contexts, Cisco's per-VRF contexts).

Measured here (bench/snmp_collector.py, 384 simulated spines/superspines of a 16K-GPU fabric):
about 270-350K varbinds per CPU-second of the whole collector over gufo-snmp, readings
included (net-snmp's snmpbulkwalk: ~250K per CPU-second of its processes), against 10-12K
over pysnmp, which spends most of its time in pyasn1's BER decoding.

Errors (one root, builtin bases where they fit)::

    SnmpError
    ├── SnmpTimeout(TimeoutError)         no valid answer within timeout x (retries + 1)
    ├── SnmpAuthError(PermissionError)    SNMPv3 USM refused us: wrong user, key or protocol
    └── SnmpProtocolError                 the agent answered with an error-status we cannot walk past
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import ClassVar, Literal

from collector.oids import Column
from collector.snmp_walk import Value, Walked
from collector.targets import SwitchTarget

Backend = Literal["auto", "gufo", "pysnmp"]

#: Reports ``n`` invalid things (``what``) seen from the target: garbage datagrams, loops.
InvalidSink = Callable[[str, int], None]


class SnmpError(Exception):
    """Root of the SNMP collector's errors."""


class SnmpTimeout(SnmpError, TimeoutError):
    """No (valid) response within the target's timeout, after every retry."""


class SnmpAuthError(SnmpError, PermissionError):
    """The agent's USM refused the request (RFC 3414 §3.2 reports) or its reply did not verify."""


class SnmpProtocolError(SnmpError):
    """A response with a non-zero error-status (e.g. genErr) for a request we cannot retry."""


class SnmpClient(abc.ABC):
    """One target's SNMP session: GET of scalars and multi-column table walks.

    Implementations own their sockets, apply the target's timeout and retries to every
    request, count garbage through ``on_invalid`` and raise only :class:`SnmpError` subclasses.
    """

    backend: ClassVar[str]

    def __init__(self, target: SwitchTarget, on_invalid: InvalidSink) -> None:
        self.target = target
        self.on_invalid = on_invalid
        self.requests = 0
        self.varbinds = 0

    @abc.abstractmethod
    async def get(self, oids: Sequence[str]) -> dict[str, Value]:
        """GET these instances; the ones the agent lacks (noSuch*) are absent from the result."""

    @abc.abstractmethod
    async def walk(self, columns: Sequence[Column], rows_hint: int | None = None) -> Walked:
        """Walk these columns (sharing one index) to their ends; ``rows_hint`` sizes the requests."""

    async def close(self) -> None:  # noqa: B027  # optional hook, most clients hold nothing to close
        """Release sockets (idempotent)."""


def gufo_supports(target: SwitchTarget) -> str | None:
    """None when gufo-snmp can serve ``target``, else why not."""
    if target.snmp_version == "2c":
        return None
    v3 = target.v3
    if v3 is None:
        return "SNMPv3 without credentials"
    if v3.context:
        return f"gufo-snmp sends no SNMPv3 context name (target wants {v3.context!r})"
    return None


def choose_backend(target: SwitchTarget, preferred: Backend = "auto") -> Literal["gufo", "pysnmp"]:
    """``gufo`` where it serves the target (or was asked for and can), else ``pysnmp``."""
    if preferred == "pysnmp":
        return "pysnmp"
    return "gufo" if gufo_supports(target) is None else "pysnmp"
