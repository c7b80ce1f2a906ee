"""Coverage-guided fuzzing of the gNMI decoder with atheris (libFuzzer for Python).

Each input is one SubscribeResponse as a switch would send it. It is decoded by a fresh stream
of each profile (openconfig, sonic, srlinux), with the C fast path and with the Python alone
(tests/support/gnmi_fuzz.py ``check``): a crash is any exception that escapes, the two decoders
disagreeing, the decoder catching an exception of its own, or the plain message after the input
no longer being decoded. Run from the repository root (docs/fuzzing.md)::

    .venv/bin/pip install atheris
    mkdir -p /tmp/gnmi-corpus
    .venv/bin/python tests/fuzz/fuzz_gnmi_decode.py /tmp/gnmi-corpus tests/fixtures/fuzz/gnmi \
        -max_len=8192 -timeout=10 -rss_limit_mb=2048 -max_total_time=3600

New inputs go to the first directory; a crash is written as ``crash-<sha1>`` in the current
directory. Add a crash that is fixed to :data:`tests.support.gnmi_fuzz.SEEDS`, so the corpus
replays it in every test run. ``-timeout`` is libFuzzer's per-input limit: an input that takes
seconds is a finding (issue 28's 115-byte decimal took minutes).
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris  # type: ignore[import-untyped, import-not-found, unused-ignore]

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports():
    import collector.gnmi_decode
    import collector.gnmi_values
    import collector.profiles  # noqa: F401  (instrumented for coverage)
    from tests.support.gnmi_fuzz import PROFILES, check


def test_one_input(data: bytes) -> None:
    for profile in PROFILES:
        check([data], profile)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
