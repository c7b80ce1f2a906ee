#!/usr/bin/env bash
# Re-vendor uPlot into api/dashboard/vendor/uplot/ from npm, at the version and integrity pinned in
# its VENDOR.json (the dashboard loads nothing from a CDN: it works offline and in the image).
#
#   scripts/vendor-uplot.sh            # fetch the pinned version, check it, copy the files
#   scripts/vendor-uplot.sh 1.6.33     # move the pin: prints the new integrity, updates VENDOR.json
#
# npm uses the registry the machine is configured with; no registry name lives in this repository.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dest="$here/api/dashboard/vendor/uplot"
manifest="$dest/VENDOR.json"
command -v npm >/dev/null || { echo "vendor-uplot: npm is needed (Debian: apt-get install npm)" >&2; exit 1; }
pinned="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$manifest")"
version="${1:-$pinned}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "vendor-uplot: npm pack uplot@$version" >&2
(cd "$work" && npm pack --silent "uplot@$version" >/dev/null)
tarball="$work/uplot-$version.tgz"
integrity="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$version" = "$pinned" ]; then
    want="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["integrity"])' "$manifest")"
    [ "$integrity" = "$want" ] || { echo "vendor-uplot: integrity mismatch: got $integrity, pinned $want" >&2; exit 1; }
fi
tar -xzf "$tarball" -C "$work"
python3 - "$manifest" "$work" "$dest" "$version" "$integrity" <<'PY'
import hashlib, json, shutil, sys
from pathlib import Path
manifest, work, dest, version, integrity = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4], sys.argv[5]
meta = json.loads(manifest.read_text())
for name, src in meta["from"].items():
    shutil.copyfile(work / src, dest / name)
meta.update(version=version, integrity=integrity)
meta["sha256"] = {name: hashlib.sha256((dest / name).read_bytes()).hexdigest() for name in meta["from"]}
manifest.write_text(json.dumps(meta, indent=2) + "\n")
print(f"vendor-uplot: uplot {version} ({integrity[:20]}...) in {dest}", file=sys.stderr)
PY
