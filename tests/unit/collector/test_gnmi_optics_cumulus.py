"""Cumulus Linux 5.15's link-health paths (collector/optics_decode.py via collector/gnmi_optics.py):
``/interfaces/interface[name]/phy/...`` FEC counters, BER and the FEC histogram.

No capture exists (../shared/fixtures has none; NVIDIA's gNMI Streaming documentation names the
paths, the profile cites it): the golden form is the simulator's Cumulus shape
(simulator/gnmi_optics.py, family ``OPTICS_CUMULUS``), plus hand-built histograms of other bins.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from collector.gnmi_optics import OpticsDecoder
from collector.profile_load import load_profile
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.gnmi_optics import OPTICS_LEAVES, OpticsRenderer, select_optics
from simulator.gnmi_paths import Family, Selection, parse_xpath
from simulator.gnmi_shapes import CumulusShape, Shape
from simulator.gnmi_wire import Encoding, Renderer, notification, timestamp

NOW = time.time_ns()
STATE = FabricState(build_aipod(FabricParams(gpus=128, radix=16)), seed=6, clock=lambda: NOW)


@pytest.fixture(autouse=True)
def _now_is_when_the_test_runs() -> None:
    """The device's time is taken when each test runs: the decoder bounds it against the receive time."""
    global NOW
    NOW = time.time_ns()


SWITCH = "lf-g1-r1"
READINGS = STATE.transceivers(SWITCH)


def decoder() -> tuple[OpticsDecoder, Counter[str]]:
    bad: Counter[str] = Counter()
    return OpticsDecoder(SWITCH, "openconfig", lambda kind, n: bad.update({kind: n})), bad


def test_the_cumulus_profile_asks_for_what_the_cumulus_shape_serves_and_only_it_serves() -> None:
    profile = load_profile("cumulus")
    phy = [s.path for s in profile.optics_subscriptions if "/phy/" in s.path]
    assert len(phy) == 5
    for path in phy:
        assert select_optics(parse_xpath(path), CumulusShape.optics_families), path
        assert not select_optics(parse_xpath(path), Shape.optics_families), path  # not OpenConfig's
    assert isinstance(CumulusShape(Renderer()), Shape)


def test_cumulus_phy_leaves_and_fec_histogram_decode_to_the_simulated_readings() -> None:
    """Cumulus 5.15's ``phy`` paths (NVIDIA's metric names) as the simulator's Cumulus shape serves them."""
    r = OpticsRenderer()
    dec, bad = decoder()
    sel = Selection(Family.OPTICS_CUMULUS, tuple(range(len(OPTICS_LEAVES[Family.OPTICS_CUMULUS]))))
    for g in r.render(SWITCH, sel, Encoding.PROTO, READINGS):
        raw = notification(timestamp(NOW), g.prefix, g.updates)
        dec.feed(raw)
    fec, _ = dec.take_samples()
    assert not bad and len(fec) == len(READINGS)
    for reading, f in zip(READINGS, fec, strict=True):
        assert f.bins == reading.fec_bins  # rs-num-corr-err[upper-boundary=0..15]/count
        assert f.corrected == sum(reading.fec_bins[1:])  # no such counter: from the histogram
        assert (f.uncorrectable, f.symbol_errors) == (reading.fec_uncorrectable, reading.symbol_errors)
        assert f.pre_fec_ber == reading.pre_fec_ber and f.post_fec_ber == reading.post_fec_ber


def test_a_histogram_not_of_kp4_bins_is_passed_over_and_the_worst_lane_is_the_raw_ber() -> None:
    dec, bad = decoder()
    note = gnmi_pb2.Notification(timestamp=NOW)
    base = [gnmi_pb2.PathElem(name="interfaces"), gnmi_pb2.PathElem(name="interface", key={"name": "swp1"})]
    for bound in ("0", "1", "64"):  # a histogram of other bins: no S0..S15
        hist = [gnmi_pb2.PathElem(name=n) for n in ("phy", "histograms", "state")]
        hist += [
            gnmi_pb2.PathElem(name="rs-num-corr-err", key={"upper-boundary": bound}),
            gnmi_pb2.PathElem(name="count"),
        ]
        note.update.add(path=gnmi_pb2.Path(elem=base + hist), val=gnmi_pb2.TypedValue(uint_val=5))
    for lane, ber in (("1", "1e-9"), ("2", "3e-7")):
        chan = [gnmi_pb2.PathElem(name="phy"), gnmi_pb2.PathElem(name="channels")]
        chan += [gnmi_pb2.PathElem(name="channel", key={"id": lane})]
        chan += [gnmi_pb2.PathElem(name=n) for n in ("ber", "state", "raw-ber")]
        note.update.add(path=gnmi_pb2.Path(elem=base + chan), val=gnmi_pb2.TypedValue(string_val=ber))
    dec.feed(gnmi_pb2.SubscribeResponse(update=note).SerializeToString())
    (f,), _ = dec.take_samples()
    assert (f.bins, f.corrected, f.pre_fec_ber) == (None, None, 3e-7) and not bad
