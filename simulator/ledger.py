"""The sent-ledger: which counter samples the gNMI target actually handed to its subscribers.

Fault tests ("storage never loses a row") need the ground truth on the sending side: for every
(switch, interface), the device timestamps of the samples *carrying counters* that went out on a
Subscribe stream. :class:`SentLedger` keeps exactly that when ``SimOptions(ledger=True)``
(``RunningSim.ledger``); with the option off no ledger exists and the send path is unchanged.

What counts, and where it is taken:

* A sample is one (interface, Notification timestamp) whose Notification carries at least one of
  the leaves the collector stores as a ``port_counters`` counter column (:data:`COUNTER_PATHS`:
  the openconfig ``state/counters/*`` counters and the 802.3x pause frames; not ``last-clear``,
  ``last-change``, status, speed, PFC or LLDP). That is the rule by which the collector writes a
  row (collector/counters.py): a reading without counters is state, stored only when it changes
  the port's status, and such rows are not the ledger's business.
* It is recorded from the bytes themselves, after ``context.write`` returned for them (handed to
  gRPC), so it is what the shapes, diffs, fault effects and clocks decided, not what they meant
  to send. A batch cut off by an error counts only the messages written before it.
* Interfaces are the ``name`` key of ``/interfaces/interface`` (``swp1``): what the collector
  stores as ``port``; switches are the simulator's names (the collector's ``{switch}`` target).
* A sample time seen again in a later batch (a resubscribe's dump at an instant already sent)
  is kept once and counted in :attr:`LedgerSnapshot.resends`. Several Notifications of one
  batch with the same timestamp (EOS's one per container) are one sample.

Only the wire forms whose counter paths are decoded here are accepted (:data:`SUPPORTED`:
openconfig, cumulus, eos); :func:`check_supported` refuses the others with a ValueError rather
than keep a ledger that would be silently wrong (XR puts counters in JSON containers, SONiC in
Redis table paths with other port names).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from simulator.gnmi_paths import IF_FIELDS, LEAVES, ROOTS, Family, Kind
from simulator.nos import Nos

#: The NOS shapes whose counter Notifications the ledger decodes.
SUPPORTED: frozenset[Nos] = frozenset({Nos.OPENCONFIG, Nos.CUMULUS, Nos.EOS})

#: PortCounters fields that are UINT leaves but no ``port_counters`` counter (they are instants).
_NOT_COUNTERS = frozenset({"last_clear_ns", "last_change_ns"})
_ROOT = tuple(e.name for e in ROOTS[Family.INTERFACES])  # ("interfaces", "interface")

#: Leaf paths below ``/interfaces/interface[name=X]`` (element names) that are counter columns.
COUNTER_PATHS: frozenset[tuple[str, ...]] = frozenset(
    tuple(e.name for e in leaf.rel)
    for leaf in LEAVES[Family.INTERFACES]
    if leaf.kind is Kind.UINT and IF_FIELDS[leaf.column] not in _NOT_COUNTERS
)
#: The PortCounters field behind each of :data:`COUNTER_PATHS` (checked against the collector's).
COUNTER_FIELDS: frozenset[str] = frozenset(
    IF_FIELDS[leaf.column]
    for leaf in LEAVES[Family.INTERFACES]
    if leaf.kind is Kind.UINT and IF_FIELDS[leaf.column] not in _NOT_COUNTERS
)

Key = tuple[str, str]  # (switch, interface)


def check_supported(nos: Iterable[Nos]) -> None:
    """Raise ValueError unless every shape in ``nos`` is one the ledger records correctly."""
    other = sorted({n.value for n in nos} - {n.value for n in SUPPORTED})
    if other:
        raise ValueError(
            f"the sent-ledger decodes the {', '.join(sorted(n.value for n in SUPPORTED))} wire forms only; "
            f"not {', '.join(other)} (their counters travel in JSON containers or Redis table paths)"
        )


@dataclass(frozen=True, slots=True)
class LedgerSnapshot:
    """A copy of the ledger at one moment: per (switch, interface), sorted unique device times (ns)."""

    samples: Mapping[Key, tuple[int, ...]]
    #: Per key: how many times a sample time already recorded was sent again (in a later batch).
    resends: Mapping[Key, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Distinct samples sent."""
        return sum(len(v) for v in self.samples.values())

    @property
    def resent(self) -> int:
        """Sample times sent more than once, over all keys."""
        return sum(self.resends.values())

    def switches(self) -> frozenset[str]:
        """The switches that sent at least one sample."""
        return frozenset(sw for sw, _ in self.samples)


class SentLedger:
    """Per (switch, interface): the device timestamps of the counter samples written to subscribers."""

    def __init__(self) -> None:
        self._times: dict[Key, set[int]] = {}
        self._resends: dict[Key, int] = {}
        self._frozen = False
        #: Messages decoded (for the curious: the ledger's cost is one protobuf parse each).
        self.messages = 0

    def record(self, switch: str, messages: Sequence[bytes]) -> None:
        """Note the samples of one batch of SubscribeResponse bytes that ``switch`` wrote."""
        if self._frozen or not messages:
            return
        batch: set[tuple[str, int]] = set()
        for raw in messages:
            found = _counter_sample(raw)
            if found is not None:
                batch.add(found)
        self.messages += len(messages)
        for port, ts in batch:
            key = (switch, port)
            times = self._times.get(key)
            if times is None:
                times = self._times[key] = set()
            if ts in times:
                self._resends[key] = self._resends.get(key, 0) + 1
            else:
                times.add(ts)

    def samples(self) -> dict[Key, list[int]]:
        """Per (switch, interface), the distinct sample times sent so far, sorted (ns)."""
        return {k: sorted(v) for k, v in self._times.items()}

    @property
    def resends(self) -> dict[Key, int]:
        """Per key, sample times sent again (see the module docstring)."""
        return dict(self._resends)

    def snapshot(self) -> LedgerSnapshot:
        """An immutable copy; the ledger goes on recording."""
        return LedgerSnapshot(
            MappingProxyType({k: tuple(sorted(v)) for k, v in self._times.items()}),
            MappingProxyType(dict(self._resends)),
        )

    def freeze(self) -> LedgerSnapshot:
        """Stop recording (what is sent afterwards is not noted) and return the final copy."""
        self._frozen = True
        return self.snapshot()

    @property
    def frozen(self) -> bool:
        """Whether :meth:`freeze` was called."""
        return self._frozen


def _counter_sample(raw: bytes) -> tuple[str, int] | None:
    """(interface, timestamp) when this SubscribeResponse is a Notification carrying a counter."""
    resp: Any = gnmi_pb2.SubscribeResponse.FromString(raw)
    if not resp.HasField("update"):
        return None
    note = resp.update
    prefix = note.prefix.elem
    if len(prefix) < 2 or (prefix[0].name, prefix[1].name) != _ROOT:
        return None
    port = prefix[1].key.get("name")
    if not port:
        return None
    below = tuple(_name(e.name) for e in prefix[2:])
    for update in note.update:
        if below + tuple(_name(e.name) for e in update.path.elem) in COUNTER_PATHS:
            return str(port), int(note.timestamp)
    return None


def _name(text: str) -> str:
    return text.partition(":")[2] if ":" in text else text
