#!/usr/bin/env bash
# Installs what fabricmon needs from the operating system, and nothing it already has:
#   - PostgreSQL server binaries and headers, cmake, net-snmp's command-line tools, and the
#     programs the integration tests drive: Slurm, munge, Prometheus, Alertmanager, and Go with
#     grpc-go's sources for the gNMI interop server (Debian);
#   - the TimescaleDB extension, built from Debian's own source package of a newer release
#     (Debian's current suite packages it; this machine's suite does not).
# The newer suite is read through a private apt source list and state directory derived from
# the machine's own apt sources, so no registry host name lives in this repository and nothing
# else on the machine changes. Idempotent: a second run does nothing.
set -euo pipefail

PG_MAJOR="${PG_MAJOR:-15}"
PG_BIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
TSDB_SUITE="${FABRICMON_TSDB_SUITE:-trixie}"
BUILD_ROOT="${FABRICMON_BUILD_DIR:-/var/cache/fabricmon/build}"

log() { printf 'setup-system: %s\n' "$*" >&2; }
die() { printf 'setup-system: error: %s\n' "$*" >&2; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || die "not root and no sudo: install postgresql-${PG_MAJOR}, postgresql-server-dev-${PG_MAJOR}, cmake and snmp by hand"
  SUDO="sudo -n"
fi

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then
    log "apt-get update"
    $SUDO apt-get update -qq >/dev/null
    apt_updated=1
  fi
  log "installing: $*"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# 1. Debian packages from the machine's own suite.
wanted=()
have_pkg "postgresql-${PG_MAJOR}" || wanted+=("postgresql-${PG_MAJOR}")
have_pkg snmp || wanted+=(snmp)
have_pkg docker-compose || wanted+=(docker-compose)
# The dashboard's browser test drives Debian's Chromium through its WebDriver.
have_pkg chromium || wanted+=(chromium)
have_pkg chromium-driver || wanted+=(chromium-driver)
# The scheduler and alerting integrations are tested against the real programs (issue 12):
# Slurm (controller, node daemon, client tools, munge), Prometheus (promtool) and Alertmanager.
for pkg in slurmctld slurmd slurm-client munge slurmrestd slurm-wlm-jwt-plugin prometheus prometheus-alertmanager; do
  have_pkg "$pkg" || wanted+=("$pkg")
done
# Our HTTP/2 gRPC client is tested against a gNMI server built with grpc-go (issue 28), offline
# from Debian's Go and its grpc-go sources (GOPATH /usr/share/gocode).
for pkg in golang-go golang-google-grpc-dev golang-google-protobuf-dev; do
  have_pkg "$pkg" || wanted+=("$pkg")
done
if [ "${#wanted[@]}" -gt 0 ]; then apt_install "${wanted[@]}"; fi

ext_control() { echo "$("${PG_BIN}/pg_config" --sharedir)/extension/timescaledb.control"; }
if [ -f "$(ext_control)" ]; then
  log "TimescaleDB extension present ($(grep default_version "$(ext_control)" | tr -d "'" | awk '{print $3}')), nothing to build"
  exit 0
fi

build_deps=()
have_pkg "postgresql-server-dev-${PG_MAJOR}" || build_deps+=("postgresql-server-dev-${PG_MAJOR}")
have_pkg cmake || build_deps+=(cmake)
have_pkg libssl-dev || build_deps+=(libssl-dev)
have_pkg dpkg-dev || build_deps+=(dpkg-dev)
if [ "${#build_deps[@]}" -gt 0 ]; then apt_install "${build_deps[@]}"; fi

# 2. A private apt view of the newer suite's sources, derived from the machine's own mirror.
mirror_uri() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822: the stanza whose Suites carry the plain release name (not -security).
    awk 'BEGIN{RS=""; FS="\n"}
         /Suites:[^\n]*[a-z]+( |$)/ && !/-security/ {
           for (i=1;i<=NF;i++) if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i,u," "); print u[1]; exit } }' "$f"
  done
  if [ -f /etc/apt/sources.list ]; then
    awk '$1=="deb" && $0 !~ /security/ { for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list
  fi
}
URI="$(mirror_uri | head -n 1)"
[ -n "$URI" ] || die "cannot find a Debian mirror in /etc/apt/sources.list{,.d}; set one up, or install TimescaleDB by hand"

APT_DIR="${BUILD_ROOT}/apt"
mkdir -p "${APT_DIR}/sources" "${APT_DIR}/lists/partial" "${BUILD_ROOT}/src"
cat > "${APT_DIR}/sources/${TSDB_SUITE}-src.sources" <<SRC
Types: deb-src
URIs: ${URI}
Suites: ${TSDB_SUITE}
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
APT_OPTS=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=${APT_DIR}/sources"
          -o "Dir::State::Lists=${APT_DIR}/lists" -o "Dir::Cache::archives=${APT_DIR}/archives"
          -o "Debug::NoLocking=1")
mkdir -p "${APT_DIR}/archives/partial"
log "reading ${TSDB_SUITE} source index (private apt state in ${APT_DIR})"
apt-get "${APT_OPTS[@]}" update -qq >/dev/null
cd "${BUILD_ROOT}/src"
if ! ls timescaledb_*.orig.tar.* >/dev/null 2>&1; then
  log "downloading the timescaledb source package"
  apt-get "${APT_OPTS[@]}" source --download-only -qq timescaledb >/dev/null
fi
tarball="$(ls timescaledb_*.orig.tar.* | sort -V | tail -n 1)"
version="$(basename "$tarball" | sed -E 's/^timescaledb_([^.]+\.[^.]+\.[^.]+)\.orig.*/\1/')"
srcdir="${BUILD_ROOT}/src/timescaledb-${version}"
rm -rf "$srcdir" && mkdir -p "$srcdir"
tar -xf "$tarball" -C "$srcdir" --strip-components=1

# 3. Build the Apache-licensed part against this PostgreSQL, and install it.
log "building TimescaleDB ${version} for PostgreSQL ${PG_MAJOR} (about a minute)"
cd "$srcdir"
./bootstrap -DAPACHE_ONLY=ON -DREGRESS_CHECKS=OFF -DTAP_CHECKS=OFF -DWARNINGS_AS_ERRORS=OFF \
  -DSEND_TELEMETRY_DEFAULT=OFF -DPG_CONFIG="${PG_BIN}/pg_config" >"${BUILD_ROOT}/cmake.log" 2>&1 \
  || die "cmake failed, see ${BUILD_ROOT}/cmake.log"
make -C build -j"$(nproc)" >"${BUILD_ROOT}/make.log" 2>&1 || die "build failed, see ${BUILD_ROOT}/make.log"
$SUDO make -C build install >>"${BUILD_ROOT}/make.log" 2>&1 || die "install failed, see ${BUILD_ROOT}/make.log"
[ -f "$(ext_control)" ] || die "installed, but $(ext_control) is missing"
log "TimescaleDB ${version} installed"
