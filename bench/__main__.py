"""``make bench``: fabricmon's benchmarks, one JSON object on stdout (docs/benchmarks.md).

Runs against a private, throw-away embedded store so it never touches the user's data.
Each benchmark module exposes ``async def run(dsn) -> dict``; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import (
    analyzer_eval,
    api_latency,
    collect_e2e,
    discover_16k,
    gnmi_collector,
    h2_reader,
    link_health,
    optics_cpu,
    shard_failover,
    sim_scale,
    snmp_collector,
    snmp_dom,
    spool_io,
    tls_read,
    topology_build,
    writer_copy,
)


def _private_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="fabricmon-bench-", dir="/tmp"))
    root.chmod(0o755)  # the postgres account must enter it when we run as root
    return root


async def _main(names: list[str]) -> dict[str, Any]:
    root = _private_root()
    os.environ["FABRICMON_DATA_DIR"] = str(root)
    from store.pgserver import EmbeddedStore

    store = EmbeddedStore()
    try:
        store.start()
        dsn = store.dsn()
        results: dict[str, Any] = {}
        for name in names:
            print(f"bench: {name} ...", file=sys.stderr, flush=True)
            results[name] = await BENCHMARKS[name](dsn)
        return results
    finally:
        store.stop()
        shutil.rmtree(root, ignore_errors=True)


BENCHMARKS = {
    "topology": topology_build.run,
    "writer": writer_copy.run,
    "spool": spool_io.run,
    "sim": sim_scale.run,
    "gnmi_collector": gnmi_collector.run,
    "h2_reader": h2_reader.run,
    "link_health": link_health.run,
    "optics_cpu": optics_cpu.run,
    "tls_read": tls_read.run,
    "collect_e2e": collect_e2e.run,
    "shard_failover": shard_failover.run,
    "snmp_collector": snmp_collector.run,
    "snmp_dom": snmp_dom.run,
    "analyzer": analyzer_eval.run,
    "api": api_latency.run,
    "discover": discover_16k.run,
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", choices=[*BENCHMARKS, []], help="benchmarks to run (default: all)")
    args = parser.parse_args()
    results = asyncio.run(_main(args.names or list(BENCHMARKS)))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
