"""``fabricmon sim``: simulated switches over real gNMI and SNMP, with faults and replay (SPEC §7)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from cli.output import emit
from fabric.errors import FabricmonError
from fabric.model import FabricParams
from fabric.naming import NAMINGS
from simulator.nos import Devices, NosError, parse_nos
from simulator.runner import RunningSim, SimOptions, run_sim
from simulator.sim_tls import default_tls_dir


class SimError(FabricmonError, ValueError):
    """Bad ``sim`` arguments."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("sim", parents=[common], help="serve simulated switches over gNMI and SNMP")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--gpus", type=int, help="simulate a generated AIPod fabric of N GPUs (default 512)")
    src.add_argument("--inventory", type=Path, help="simulate the fabric of an inventory file")
    src.add_argument("--replay", type=Path, help="serve a recording made by `fabricmon record`")
    p.add_argument("--rails", type=int, default=8)
    p.add_argument("--radix", type=int, default=128)
    p.add_argument("--speed-gbps", type=int, default=400)
    p.add_argument(
        "--naming",
        default="swp",
        choices=NAMINGS,
        help="port names of a generated fabric: swp, one NOS's (eos, sonic, junos...) or mixed; each switch then "
        "speaks its NOS's gNMI shape, LLDP and ifIndex scheme",
    )
    p.add_argument("--gnmi", default="127.0.0.1:9339", metavar="HOST:PORT", help="gNMI listen address ('' to disable)")
    p.add_argument("--snmp", default="127.0.0.1:1161", metavar="HOST:PORT", help="SNMP listen address ('' to disable)")
    p.add_argument("--control", default="127.0.0.1:9340", metavar="HOST:PORT", help="fault control endpoint ('' off)")
    p.add_argument("--scenario", metavar="NAME|FILE", help="fault timeline (built-in name or YAML file)")
    p.add_argument("--speedup", type=float, default=1.0, help="play scenario/replay X times faster")
    p.add_argument("--seed", type=int, default=0, help="traffic model seed (deterministic)")
    p.add_argument("--write-config", type=Path, metavar="FILE", help="write a fabricmon config for this simulator")
    p.add_argument("--protocols", choices=["mixed", "gnmi", "snmp"], default="mixed", help="for --write-config")
    p.add_argument(
        "--tls-dir",
        type=Path,
        metavar="DIR",
        help="gNMI is served over TLS with a CA kept here (DIR/ca/ca.pem, made once) and a server certificate "
        "issued at each start; default: sim-tls/ beside --write-config's file, else ~/.cache/fabricmon/sim-tls",
    )
    p.add_argument(
        "--tls-name", action="append", default=[], metavar="NAME", help="another name (or IP) the certificate carries"
    )
    p.add_argument("--plaintext", action="store_true", help="serve gNMI without TLS (collectors need insecure: true)")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: until Ctrl-C)")
    p.add_argument(
        "--nos",
        default="openconfig",
        metavar="NAME[,NAME...]",
        help="gNMI notification shapes, round-robin over the switches: openconfig, eos, sonic, xr, cumulus, mixed",
    )
    p.add_argument("--clock-skew-s", type=float, default=0.0, metavar="S", help="each switch's clock off by up to ±S s")
    p.add_argument("--clock-jitter-ms", type=float, default=0.0, metavar="MS", help="per-notification time noise ±MS")
    p.set_defaults(handler=run)


def options_of(args: argparse.Namespace) -> SimOptions:
    """Validated options from the command line."""
    if args.speedup <= 0:
        raise SimError("--speedup must be > 0")
    params = None
    if args.replay is None and args.inventory is None:
        params = FabricParams(gpus=args.gpus or 512, rails=args.rails, radix=args.radix, speed_gbps=args.speed_gbps)
    if args.replay is not None and args.scenario:
        raise SimError("--scenario applies to a simulated fabric, not to --replay")
    if args.plaintext and (args.tls_dir is not None or args.tls_name):
        raise SimError("--plaintext serves no TLS: drop --tls-dir and --tls-name")
    tls_dir = None if args.plaintext else (args.tls_dir or default_tls_dir(args.write_config))
    try:
        nos = parse_nos(args.nos)
        Devices((), nos, clock_skew_s=args.clock_skew_s, clock_jitter_ms=args.clock_jitter_ms)  # checks the figures
    except NosError as exc:
        raise SimError(str(exc)) from None
    return SimOptions(
        params=params,
        inventory=args.inventory,
        gnmi=args.gnmi or None,
        snmp=args.snmp or None,
        control=args.control or None,
        scenario=args.scenario,
        replay=args.replay,
        speedup=args.speedup,
        seed=args.seed,
        write_config=args.write_config,
        protocols=args.protocols,
        duration_s=args.duration,
        nos=nos,
        naming=args.naming,
        clock_skew_s=args.clock_skew_s,
        clock_jitter_ms=args.clock_jitter_ms,
        tls_dir=tls_dir,
        tls_names=tuple(args.tls_name),
    )


def _nos_counts(sim: RunningSim) -> dict[str, int] | None:
    """How many switches imitate each NOS (None when all are plain OpenConfig ones)."""
    if sim.devices is None or sim.devices.uniform:
        return None
    counts: dict[str, int] = {}
    for nos in sim.devices.assignment().values():
        counts[nos.value] = counts.get(nos.value, 0) + 1
    return counts


def run(args: argparse.Namespace) -> int:
    opts = options_of(args)

    def ready(sim: RunningSim) -> None:
        where = sim.addresses(opts)
        switches = list(sim.view.switch_names())
        data = {
            "switches": len(switches),
            "gnmi": where["gnmi"],
            "snmp": where["snmp"],
            "control": where["control"],
            "replay": str(opts.replay) if opts.replay else None,
            "scenario": opts.scenario,
            "config": str(opts.write_config) if opts.write_config else None,
            "tls_ca": str(sim.tls.ca_file) if sim.tls is not None else None,
            "nos": _nos_counts(sim),
            "clock": f"±{opts.clock_skew_s:g} s skew, ±{opts.clock_jitter_ms:g} ms jitter"
            if opts.clock_skew_s or opts.clock_jitter_ms
            else None,
        }
        lines = [f"simulating {len(switches)} switches" + (f" from {opts.replay}" if opts.replay else "")]
        lines += [f"  {k:<9}{v}" for k, v in data.items() if v is not None and k != "switches"]
        lines.append("Ctrl-C to stop")
        emit(args.json, data, "\n".join(lines))
        sys.stdout.flush()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_sim(opts, ready, stop)

    try:
        asyncio.run(main())
    except OSError as exc:
        raise SimError(f"cannot listen: {exc}") from None
    except ValueError as exc:
        if isinstance(exc, FabricmonError):
            raise
        raise SimError(str(exc)) from None
    return 0
