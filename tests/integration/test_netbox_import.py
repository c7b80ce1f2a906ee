"""``fabricmon inventory import netbox`` over HTTP: the command against a NetBox stand-in on loopback.

The stand-in (tests/support/netbox_server.py) answers with what NetBox 4.4.10 answered, pages
included (a small MAX_PAGE_SIZE makes every list several pages), and refuses as NetBox refuses.
The command runs as a user runs it (a subprocess, the token in ``$NETBOX_TOKEN``); the error
classes are read with the reader itself, over the same HTTP.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import pytest

from discovery.errors import NetboxError
from discovery.netbox import NetboxSource, fetch
from fabric.design import design_report
from fabric.inventory import load_inventory
from fabric.netbox_import import NetboxData
from tests.support.netbox_server import TOKEN, V2_TOKEN, NetboxStandIn, netbox, recorded
from tests.unit.discovery.test_netbox_import import EXPECTED, SCHEMA, links, validator

ROOT = Path(__file__).resolve().parents[2]


async def fabricmon(*args: str, token: str | None = TOKEN) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NETBOX_TOKEN"}
    if token is not None:
        env["NETBOX_TOKEN"] = token
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_command_writes_the_site_s_cabling_plan_and_check_accepts_it(tmp_path: Path) -> None:
    out = tmp_path / "ams1.yaml"
    async with netbox(NetboxStandIn(max_page_size=5)) as nb:
        code, _, err = await fabricmon("inventory", "import", "netbox", "--url", nb.url, "--site", "ams1",
                                       "--out", str(out))  # fmt: skip
        asked = dict(nb.asked)
    assert code == 0, err
    assert "Traceback" not in err
    # 12 devices, 31 interfaces, 17 cables at 5 a page: 3 + 7 + 4 pages.
    assert asked == {"/api/dcim/devices/": 3, "/api/dcim/interfaces/": 7, "/api/dcim/cables/": 4}
    fabric = load_inventory(out)
    assert links(fabric) == EXPECTED and fabric.label == "ams1"
    assert design_report(fabric).clean
    power = "ams1-leaf-a01 PSU1 (dcim.powerport) to ams1-pdu-a01 1 (dcim.poweroutlet)"
    circuit = "ams1-spine-r1-01 Ethernet31/1 (dcim.interface) to DF-1001: Termination A (circuits.circuittermination)"
    assert f"note: cable #16: {power} is not interface to interface: left out" in err
    assert f"note: cable #17: {circuit} is not interface to interface: left out" in err
    assert f"wrote {out}: 6 switches, 4 servers, 12 links from 12 devices and 17 cables" in err
    code, report, err = await fabricmon("inventory", "check", str(out))
    assert code == 0, err
    assert "no anomalies: a rail-optimized, non-blocking design" in report


async def test_a_bad_token_is_one_line_naming_netbox_s_refusal() -> None:
    async with netbox() as nb:
        code, out, err = await fabricmon("inventory", "import", "netbox", "--url", nb.url, "--site", "ams1",
                                         token="0123456789abcdef")  # fmt: skip
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"fabricmon inventory: error: GET {nb.url}/api/dcim/devices/?site=ams1&limit=1000: NetBox refused the "
        "token in $NETBOX_TOKEN (HTTP 403: Invalid token)"
    ]


async def read(nb: NetboxStandIn, url: str | None = None, token: str | None = TOKEN, site: str | None = "ams1",
               timeout_s: float = 10) -> NetboxData:  # fmt: skip
    return await fetch(NetboxSource(url or nb.url, token, site, timeout_s=timeout_s))


async def test_no_token_says_to_set_one() -> None:
    async with netbox() as nb:
        with pytest.raises(NetboxError, match=r"NetBox refused an anonymous read \(HTTP 403: Authentication "
                                              r"credentials were not provided.\): set \$NETBOX_TOKEN"):  # fmt: skip
            await read(nb, token=None)


async def test_a_v2_token_goes_as_a_bearer() -> None:
    async with netbox() as nb:
        data = await read(nb, token=V2_TOKEN)
    assert len(data.devices) == 12


async def test_a_url_that_is_not_netbox_s_address_is_a_404() -> None:
    async with netbox() as nb:
        with pytest.raises(NetboxError, match=r"/dcim/devices/api/dcim/devices/\?site=ams1&limit=1000: HTTP 404: "
                                              r"no NetBox API there; give --url NetBox's address"):  # fmt: skip
            await read(nb, url=f"{nb.url}/dcim/devices/")


async def test_an_html_page_is_not_a_netbox_answer() -> None:
    async with netbox(NetboxStandIn(html_everywhere=True)) as nb:
        with pytest.raises(NetboxError, match=r"not a NetBox API answer \(text/html, starting '<!DOCTYPE html>"):
            await read(nb)


async def test_an_unknown_site_is_named() -> None:
    async with netbox() as nb:
        with pytest.raises(NetboxError, match=r"NetBox has no site 'ams9' \(--site takes a site's slug; HTTP 400: "
                                              r"site: Select a valid choice. ams9 is not one"):  # fmt: skip
            await read(nb, site="ams9")


async def test_nobody_listening_is_named() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with netbox() as nb:
        with pytest.raises(NetboxError, match=rf"cannot reach NetBox at http://127.0.0.1:{port}/api"):
            await read(nb, url=f"http://127.0.0.1:{port}")


async def test_next_links_are_followed_on_the_url_s_own_origin() -> None:
    """NetBox behind a TLS proxy writes http:// links; a link elsewhere would carry the token away."""
    async with netbox(NetboxStandIn(max_page_size=4, next_origin="http://netbox.invalid:1")) as nb:
        data = await read(nb)
    assert len(data.cables) == 17 and nb.asked["/api/dcim/cables/"] == 5


async def test_pages_joined_are_netbox_s_list_in_order() -> None:
    async with netbox(NetboxStandIn(max_page_size=7)) as nb:
        data = await read(nb)
    assert data.cables == recorded("dcim/cables/", {"site": "ams1"})["results"]
    assert data.interfaces == recorded("dcim/interfaces/", {"site": "ams1", "cabled": "true"})["results"]
    page = {"count": len(data.devices), "next": f"{nb.url}/api/dcim/devices/?limit=7&offset=7", "previous": None,
            "results": list(data.devices[:7])}  # fmt: skip
    if SCHEMA:  # where NetBox's schema was recorded (not committed): the stand-in's envelope is NetBox's
        validator("dcim/devices/").validate(page)
