"""The link-health leaves a simulated switch serves, per NOS shape (issue 26, SPEC §10.5).

:func:`openconfig_leaves`: the OpenConfig leaves of one port's transceiver and FEC as
(path elements, value) pairs, path elements as the collector's decoders take them
(``(name, ((key, value), ...))``): ``/interfaces/interface[name=I]/state/transceiver`` names the
component, ``/components/component[name=C]/transceiver/physical-channels/channel[index=1]/state/
{input-power,output-power,laser-bias-current}/instant``, ``.../state/temperature/instant``,
``.../transceiver/thresholds/threshold[severity=openconfig-alarm-types:WARNING|CRITICAL]/state/
{input-power-lower,laser-bias-current-upper}``, ``/interfaces/interface[name=I]/ethernet/state/
counters/{fec-corrected-blocks,fec-uncorrectable-blocks,in-symbol-error}`` and
``.../ethernet/state/{pre-fec-ber,post-fec-ber}/instant``.

:func:`sonic_tables`: SONiC's hashes as sonic-gnmi serves them (values are strings): the FEC
fields of ``COUNTERS/<port>``, ``TRANSCEIVER_DOM_SENSOR/<port>`` and
``TRANSCEIVER_DOM_THRESHOLD/<port>`` (STATE_DB).

Not yet wired into the gNMI server's Subscribe/Get families (the leaves are built here, the
stream framing is :mod:`simulator.gnmi_wire`'s): see docs/decisions.md, issue 26.
"""

from __future__ import annotations

from typing import Any

from simulator.optics import OpticReading

Elem = tuple[str, tuple[tuple[str, str], ...]]
_ALARM = "openconfig-alarm-types:"


def _e(elem: str, **keys: str) -> Elem:
    return (elem, tuple(sorted(keys.items())))


def openconfig_leaves(r: OpticReading) -> list[tuple[tuple[Elem, ...], Any]]:
    """One port's OpenConfig link-health leaves."""
    iface = (_e("interfaces"), _e("interface", name=r.port))
    comp = (_e("components"), _e("component", name=r.component))
    chan = (*comp, _e("transceiver"), _e("physical-channels"), _e("channel", index="1"), _e("state"))
    eth = (*iface, _e("ethernet"), _e("state"))
    out: list[tuple[tuple[Elem, ...], Any]] = [
        ((*iface, _e("state"), _e("transceiver")), r.component),
        ((*chan, _e("input-power"), _e("instant")), r.rx_power_dbm),
        ((*chan, _e("output-power"), _e("instant")), r.tx_power_dbm),
        ((*chan, _e("laser-bias-current"), _e("instant")), r.laser_bias_ma),
        ((*comp, _e("state"), _e("temperature"), _e("instant")), r.temperature_c),
        ((*eth, _e("counters"), _e("fec-corrected-blocks")), r.fec_corrected),
        ((*eth, _e("counters"), _e("fec-uncorrectable-blocks")), r.fec_uncorrectable),
        ((*eth, _e("counters"), _e("in-symbol-error")), r.symbol_errors),
        ((*eth, _e("pre-fec-ber"), _e("instant")), r.pre_fec_ber),
        ((*eth, _e("post-fec-ber"), _e("instant")), r.post_fec_ber),
    ]
    t = r.thresholds
    if t is not None:
        for severity, rx, bias in (
            ("WARNING", t.rx_low_warning_dbm, t.bias_high_warning_ma),
            ("CRITICAL", t.rx_low_critical_dbm, t.bias_high_critical_ma),
        ):
            th = (*comp, _e("transceiver"), _e("thresholds"), _e("threshold", severity=_ALARM + severity), _e("state"))
            out.append(((*th, _e("input-power-lower")), rx))
            out.append(((*th, _e("laser-bias-current-upper")), bias))
    return out


def sonic_tables(readings: list[OpticReading]) -> tuple[dict[str, dict[str, str]], ...]:
    """(COUNTERS FEC fields, TRANSCEIVER_DOM_SENSOR, TRANSCEIVER_DOM_THRESHOLD), keyed by port."""
    counters: dict[str, dict[str, str]] = {}
    dom: dict[str, dict[str, str]] = {}
    limits: dict[str, dict[str, str]] = {}
    for r in readings:
        fields = {f"SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S{i}": str(n) for i, n in enumerate(r.fec_bins)}
        fields["SAI_PORT_STAT_IF_IN_FEC_CORRECTABLE_FRAMES"] = str(r.fec_corrected)
        fields["SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES"] = str(r.fec_uncorrectable)
        fields["SAI_PORT_STAT_IF_IN_FEC_SYMBOL_ERRORS"] = str(r.symbol_errors)
        counters[r.port] = fields
        dom[r.port] = {
            "rx1power": f"{r.rx_power_dbm:.4f}", "tx1power": f"{r.tx_power_dbm:.4f}",
            "tx1bias": f"{r.laser_bias_ma:.4f}", "temperature": f"{r.temperature_c:.4f}", "voltage": "3.3",
        }  # fmt: skip
        if r.thresholds is not None:
            t = r.thresholds
            limits[r.port] = {
                "rxpowerlowwarning": f"{t.rx_low_warning_dbm:.4f}",
                "rxpowerlowalarm": f"{t.rx_low_critical_dbm:.4f}",
                "txbiashighwarning": f"{t.bias_high_warning_ma:.4f}",
                "txbiashighalarm": f"{t.bias_high_critical_ma:.4f}",
            }  # fmt: skip
    return counters, dom, limits
