"""``fabricmon db start|stop|status|url``: the embedded default store.

A private PostgreSQL + TimescaleDB cluster under ``$FABRICMON_DATA_DIR/pg`` (or the user's
data dir), used whenever no DSN is configured. ``url`` prints the DSN alone, so
``psql "$(fabricmon db url)"`` works.
"""

from __future__ import annotations

import argparse

from cli.output import emit
from store.pgserver import EmbeddedStore, StoreStatus


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add ``db`` and its actions to the command line."""
    p = sub.add_parser("db", parents=[common], help="the embedded PostgreSQL + TimescaleDB store")
    # Leaves repeat --json with a suppressed default, so it works before or after the action.
    leaf = argparse.ArgumentParser(add_help=False)
    leaf.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON output")
    actions = p.add_subparsers(dest="db_action", metavar="ACTION", required=True)
    start = actions.add_parser("start", parents=[leaf], help="create the store if needed and start it")
    start.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds to wait for it (60)")
    stop = actions.add_parser("stop", parents=[leaf], help="stop the store (fast shutdown)")
    stop.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds to wait for it (60)")
    actions.add_parser("status", parents=[leaf], help="whether the store runs, and where")
    actions.add_parser("url", parents=[leaf], help="print the store's DSN (postgresql://...)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Carry out one ``db`` action; 0 unless it raised (``status`` is 0 whether or not it runs)."""
    store = EmbeddedStore()
    action: str = args.db_action
    if action == "url":
        dsn = store.dsn()
        emit(args.json, {"dsn": dsn}, dsn)
        return 0
    if action == "start":
        status = store.start(timeout_s=args.timeout)
        emit(args.json, status.as_dict(), f"embedded store running on {_where(status)}")
        return 0
    if action == "stop":
        was_running = store.status().running
        status = store.stop(timeout_s=args.timeout)
        human = "embedded store stopped" if was_running else "embedded store was not running"
        emit(args.json, status.as_dict(), f"{human} (data: {status.data_dir})")
        return 0
    status = store.status()
    emit(args.json, status.as_dict(), lambda: _describe(status))
    return 0


def _where(status: StoreStatus) -> str:
    return f"127.0.0.1:{status.port} (data: {status.data_dir})"


def _describe(status: StoreStatus) -> str:
    """The human ``status`` report: one headline, then where things are."""
    if not status.initialized:
        return f"embedded store not created yet (data: {status.data_dir}); `fabricmon db start` creates it"
    if status.running:
        lines = [f"embedded store running on {_where(status)}", f"pid:     {status.pid}"]
    else:
        lines = [f"embedded store not running (data: {status.data_dir}, port {status.port})"]
    if status.version:
        lines.append(f"version: PostgreSQL {status.version}, TimescaleDB {status.timescaledb_version}")
    lines.append(f"log:     {status.log_file}")
    return "\n".join(lines)
