"""One switch's LLDP view over gNMI: a Subscribe ONCE of its NOS profile's state paths.

The profile (:mod:`collector.profiles`, ``targets[*].profile``) says where a NOS keeps its LLDP
neighbours (``/lldp/interfaces/interface/neighbors`` in OpenConfig, ``LLDP_ENTRY_TABLE`` of
APPL_DB on SONiC, ``/system/lldp`` on SR Linux) and its port speeds. Discovery asks for the
profile's subscriptions that reach its LLDP and port-speed leaves in ONCE mode, one RPC per
prefix target, and decodes the answers with the collector's own
:class:`~collector.gnmi_decode.StreamDecoder`, so every wire shape the collector reads is read
here the same way (no counters, no oper-status: :func:`wanted`). The channel is the collector's
(:mod:`collector.gnmi_transport`: our HTTP/2 client or grpc.aio), one per switch, closed after
the read.

:func:`read_ifindex` asks a switch for its ifIndex → name map (``/interfaces/interface/state/
ifindex``), which a Junos neighbour's port id (a local number, its ifIndex) needs; a switch that
does not serve it answers with an error, which costs nothing but the fallback (the port
description). RPC failures become :class:`~discovery.errors.SwitchFailed`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import grpc
from pygnmi.create_gnmi_path import gnmi_path_generator
from pygnmi.spec.v080 import gnmi_pb2

from collector.gnmi_decode import StreamDecoder
from collector.gnmi_settings import GnmiTuning
from collector.gnmi_stream import classify, subscribe_request
from collector.gnmi_transport import Channel, ChannelError, RpcError, build_channel
from collector.gnmi_values import PortState, Resolver, neighbor_order
from collector.profiles import Kind, Profile, Subscription, parse_path, strip_module
from collector.targets import SwitchTarget
from discovery.errors import SwitchFailed
from discovery.tables import Neighbor, SwitchTable, port_id_kind

ONCE = 1  # SubscriptionList.Mode
#: Profiles named for a NOS: the NOS an inventory names (``openconfig`` names none).
PROFILE_NOS = frozenset({"eos", "sonic", "junos", "xr", "srlinux", "iosxe", "huawei"})
#: Where each profile's NOS keeps ifIndex (default: OpenConfig's); None: nowhere we can ask.
IFINDEX_PATHS: dict[str, str | None] = {
    "srlinux": "/interface/ifindex",
    "xr": "openconfig-interfaces:interfaces/interface/state/ifindex",
    "sonic": None,
}
DEFAULT_IFINDEX_PATH = "/interfaces/interface/state/ifindex"


class GnmiReader:
    """Reads switches over gNMI with one transport kind and tuning, sharing decoder caches per profile."""

    def __init__(self, transport: str = "h2", tuning: GnmiTuning | None = None) -> None:
        self.transport = transport
        self.tuning = tuning or GnmiTuning()
        self._resolvers: dict[str, Resolver] = {}
        self._chosen: dict[str, frozenset[Subscription]] = {}
        self.invalid = 0

    def _resolver(self, profile: Profile) -> Resolver:
        found = self._resolvers.get(profile.name)
        if found is None:
            found = self._resolvers[profile.name] = Resolver(profile)
        return found

    def _count(self, _what: str, n: int) -> None:
        self.invalid += n

    def _channel(self, target: SwitchTarget) -> Channel:
        try:
            return build_channel(self.transport, target.address, target.tls, self.tuning)
        except ChannelError as exc:
            raise SwitchFailed(str(exc)) from exc

    async def read(self, target: SwitchTarget, profile: Profile) -> SwitchTable:
        """One switch's LLDP neighbours and port speeds; SwitchFailed when it does not answer."""
        chosen = self._chosen.get(profile.name)
        if chosen is None:
            chosen = self._chosen[profile.name] = frozenset(s for s in profile.subscriptions if wanted(profile, s))
        streams = {t: tuple(s for s in subs if s in chosen) for t, subs in _streams(profile, target)}
        if not any(profile.covers_lldp(subs) for subs in streams.values()):
            raise SwitchFailed(f"gNMI profile {profile.name!r} reads no LLDP table (use SNMP for this switch)")
        resolver = self._resolver(profile)
        ports: dict[str, PortState] = {}
        channel = self._channel(target)
        try:
            for prefix_target, subs in streams.items():
                if not subs:
                    continue
                decoder = StreamDecoder(
                    target.switch, resolver, ports, self._count, owns_lldp=profile.covers_lldp(subs)
                )
                request = subscribe_request(profile, prefix_target, subs, 1.0, poll=False)
                request.subscribe.mode = ONCE
                decoder.begin()
                for raw in await self._once(channel, target, request.SerializeToString()):
                    decoder.feed(raw)
                decoder.close_group()
        finally:
            await channel.close()
        return _table(target.switch, ports, profile)

    async def read_ifindex(self, target: SwitchTarget, profile: Profile) -> dict[int, str]:
        """ifIndex → port name, or {} when the switch does not serve it (or the profile has no path for it)."""
        path = IFINDEX_PATHS.get(profile.name, DEFAULT_IFINDEX_PATH)
        if path is None:
            return {}
        request = gnmi_pb2.SubscribeRequest(
            subscribe=gnmi_pb2.SubscriptionList(
                prefix=gnmi_pb2.Path(target=target.gnmi_target or "", origin=profile.origin),
                subscription=[gnmi_pb2.Subscription(path=gnmi_path_generator(path))],
                mode=ONCE,
                encoding=profile.encoding,
            )
        )
        channel = self._channel(target)
        try:
            raws = await self._once(channel, target, request.SerializeToString())
        except SwitchFailed:
            return {}
        finally:
            await channel.close()
        out: dict[int, str] = {}
        for raw in raws:
            out.update(ifindex_pairs(gnmi_pb2.SubscribeResponse.FromString(raw)))
        return out

    async def _once(self, channel: Channel, target: SwitchTarget, request: bytes) -> list[bytes]:
        """The responses of one ONCE subscription, up to its ``sync_response`` or end."""
        metadata: list[tuple[str, str]] = []
        if target.username is not None:
            metadata.append(("username", target.username))
            metadata.append(("password", target.password.get_secret_value() if target.password is not None else ""))
        out: list[bytes] = []
        try:
            call = await channel.subscribe(metadata)
            try:
                await call.write(request)
                while batch := await call.read_batch():
                    out.extend(batch)
                    if _synced(batch[-1]):
                        break
            finally:
                call.cancel()
        except (grpc.aio.AioRpcError, RpcError) as exc:
            raise SwitchFailed(f"gNMI {target.address}: {classify(exc, tls=target.tls.enabled)[1]}") from exc
        except ChannelError as exc:
            raise SwitchFailed(str(exc)) from exc
        return out


def _synced(raw: bytes) -> bool:
    # A sync_response is a tiny message (field 3, varint 1); updates are larger. Parse only those.
    return len(raw) < 8 and gnmi_pb2.SubscribeResponse.FromString(raw).sync_response


def wanted(profile: Profile, sub: Subscription) -> bool:
    """Whether discovery asks for ``sub``: it reaches the LLDP family, or (ON_CHANGE) a port-speed leaf."""
    if profile.covers_lldp([sub]):
        return True
    if sub.mode != "on_change":
        return False  # a SAMPLE container that holds the speed holds the counters too: not worth it
    names = [n for n, _ in parse_path(sub.path)]
    for fam in profile.families:
        root = [n for n, _ in fam.root]
        for text, spec in fam.leaves.items():
            if spec.kind is not Kind.SPEED:
                continue
            full = root + [n for n, _ in parse_path(text)]
            if len(names) <= len(full) and all(
                t == "{port}" or "*" in n or n == t for n, t in zip(names, full, strict=False)
            ):
                return True
    return False


def _streams(profile: Profile, target: SwitchTarget) -> list[tuple[str, tuple[Subscription, ...]]]:
    return list(profile.streams(target.gnmi_target, target.switch).items())


def _table(switch: str, ports: dict[str, PortState], profile: Profile) -> SwitchTable:
    neighbors: dict[str, tuple[Neighbor, ...]] = {}
    speeds: dict[str, int] = {}
    for port, st in ports.items():
        if st.speed:
            speeds[port] = st.speed // 1_000_000_000
        if st.lldp:
            entries = (st.lldp[nid] for nid in sorted(st.lldp, key=neighbor_order))
            neighbors[port] = tuple(_neighbor(e) for e in entries)
    return SwitchTable(
        switch=switch,
        protocol="gnmi",
        neighbors=neighbors,
        ports=frozenset(ports),
        speeds_gbps=speeds,
        nos=profile.name if profile.name in PROFILE_NOS else None,
    )


def _neighbor(entry: dict[str, str]) -> Neighbor:
    port_id = entry.get("port_id", "")
    return Neighbor(
        system_name=entry.get("system_name", ""),
        port_id=port_id,
        port_description=entry.get("port_description", ""),
        chassis_id=entry.get("chassis_id", ""),
        kind=port_id_kind(port_id),  # the profiles read no port-id-type: the id's shape tells
    )


def ifindex_pairs(resp: Any) -> Iterator[tuple[int, str]]:
    """(ifIndex, interface name) pairs in one SubscribeResponse, leaf by leaf or in JSON containers."""
    if not resp.HasField("update"):
        return
    note = resp.update
    for u in note.update:
        elems = [*note.prefix.elem, *u.path.elem]
        name = _interface_name(elems)
        which = u.val.WhichOneof("value")
        if which in ("json_ietf_val", "json_val"):
            try:
                doc = json.loads(getattr(u.val, which))
            except ValueError:
                continue
            yield from _json_pairs(doc, name)
        elif elems and strip_module(elems[-1].name) == "ifindex" and name:
            number = _number(getattr(u.val, which) if which else None)
            if number is not None:
                yield number, name


def _interface_name(elems: Sequence[Any]) -> str | None:
    for e in reversed(elems):
        if strip_module(e.name) == "interface" and "name" in e.key:
            return str(e.key["name"])
    return None


def _json_pairs(doc: Any, name: str | None) -> Iterator[tuple[int, str]]:
    if isinstance(doc, list):
        for item in doc:
            yield from _json_pairs(item, name)
        return
    if not isinstance(doc, dict):
        return
    plain = {strip_module(k): v for k, v in doc.items()}
    if isinstance(plain.get("name"), str):
        name = plain["name"]
    for key, value in plain.items():
        if key == "ifindex" and name:
            number = _number(value)
            if number is not None:
                yield number, name
        elif isinstance(value, dict | list):
            yield from _json_pairs(value, name)


def _number(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None
