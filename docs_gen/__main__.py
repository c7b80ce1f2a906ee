"""``python -m docs_gen``: write the generated reference pages; ``--check``: only say which differ."""

from __future__ import annotations

import argparse
import sys

from docs_gen.pages import ROOT, outdated, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m docs_gen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when a committed page is not current")
    args = parser.parse_args(argv)
    if args.check:
        stale = outdated()
        for path in stale:
            print(f"{path.relative_to(ROOT)} is not current: run python -m docs_gen", file=sys.stderr)
        return 1 if stale else 0
    for path in write():
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
