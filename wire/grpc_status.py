"""gRPC status codes and the call error of :mod:`wire.grpc_h2`, without the grpc package.

``wire`` is shared with the simulator and must not pull in grpc (a C extension and its threads)
for an enum: :class:`StatusCode` has gRPC's codes (doc/statuscodes.md) under gRPC's names, so
the collector maps them to ``grpc.StatusCode`` by name or number at its boundary
(:mod:`collector.gnmi_transport`).
"""

from __future__ import annotations

import enum


class StatusCode(enum.IntEnum):
    """gRPC's status codes, numbered as on the wire (``grpc-status``)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


_BY_NUMBER = {int(c): c for c in StatusCode}


class RpcError(Exception):
    """A call that ended without OK: ``code()`` and ``details()`` as grpc.aio's errors have them."""

    def __init__(self, code: StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code, self._details = code, details

    def code(self) -> StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def parse_grpc_status(value: str) -> StatusCode | None:
    """A ``grpc-status`` value as its code: an unknown number is UNKNOWN (gRPC's rule), anything
    but 1-3 ASCII digits is None (malformed)."""
    if not 0 < len(value) <= 3 or not value.isascii() or not value.isdigit():
        return None
    return _BY_NUMBER.get(int(value), StatusCode.UNKNOWN)


#: HTTP statuses as gRPC maps them (doc/http-grpc-status-mapping.md); any other non-200 is UNKNOWN.
HTTP_STATUS = {
    400: StatusCode.INTERNAL,
    401: StatusCode.UNAUTHENTICATED,
    403: StatusCode.PERMISSION_DENIED,
    404: StatusCode.UNIMPLEMENTED,
    429: StatusCode.UNAVAILABLE,
    502: StatusCode.UNAVAILABLE,
    503: StatusCode.UNAVAILABLE,
    504: StatusCode.UNAVAILABLE,
}
#: RST_STREAM error codes as gRPC maps them (PROTOCOL-HTTP2.md); any other is INTERNAL.
RST_STATUS = {
    0x7: StatusCode.UNAVAILABLE,
    0x8: StatusCode.CANCELLED,
    0xB: StatusCode.RESOURCE_EXHAUSTED,
    0xC: StatusCode.PERMISSION_DENIED,
}
