#!/usr/bin/env bash
# arm-check.sh: the CPU plugin's ARM tables (neon, dotprod) built with a
# cross-compiler and tested under qemu-aarch64, on an x86-64 Debian machine.
#
#   tools/arm-check.sh [SUITE...]     default suites: core ops plugins
#
# Measured here (2 vCPUs): core, ops and plugins in 2 min.  Every other
# suite passes too: abi, cli, llm (2.5 min), scheduler (4.5), tune (3),
# npusim, example, example-plugin; `SY_PYTHON=.venv/bin/python
# tools/arm-check.sh oracle` (the logits oracle: switchyard under qemu,
# the numpy reference on the host; needs models/) took 8-12 min, 90 cases
# passed at the default (dotprod), neon and scalar levels.  Slow suites
# want ARM_TEST_ARGS=--timeout-multiplier=6.
#
# Needs, once (root):
#   apt-get install gcc-aarch64-linux-gnu qemu-user
#   dpkg --add-architecture arm64 && apt-get update
#   mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc  # if not mounted
#   /usr/lib/systemd/systemd-binfmt /usr/lib/binfmt.d/qemu-aarch64.conf
# The second line only makes arm64 packages known to apt; this script
# installs none of them.  It downloads (apt-get download, no root) the arm64
# hwloc, cJSON and Criterion packages and the libraries they load, unpacks
# them into build-arm-sysroot/ (dpkg -x), and links and runs against that
# tree.  Installing those -dev packages system-wide instead does not work:
# libcriterion-dev and libnanomsg5 for arm64 cannot sit beside the amd64
# ones, and apt removes the amd64 ones that the native build needs.
#
# Then it configures build-arm (cross/aarch64-linux-gnu.ini plus a file
# written here that points pkg-config and qemu at the sysroot), builds it
# and runs the suites with `meson test`.  The conformance cases force every
# ISA table once (scalar, neon, dotprod; the x86 ones are skipped there);
# qemu-aarch64's default CPU ('max') has the dotprod extension, so both
# tables run.  Criterion runs each test in a child it starts by executing
# /proc/self/exe, which under qemu-user only works where the kernel hands
# aarch64 executables to qemu (binfmt_misc, the last two lines above);
# without it every suite stops with "Could not spawn test instance".
# QEMU_LD_PREFIX gives those children the sysroot.  hwloc reads the host's
# topology through qemu (/proc and /sys are the host's).
#
# Environment: ARM_SYSROOT (default build-arm-sysroot), ARM_BUILD (default
# build-arm), ARM_TEST_ARGS (extra `meson test` arguments).
set -euo pipefail
cd "$(dirname "$0")/.."

SYSROOT=$(realpath -m "${ARM_SYSROOT:-build-arm-sysroot}")
BUILD=${ARM_BUILD:-build-arm}
SUITES=("$@")
[ ${#SUITES[@]} -gt 0 ] || SUITES=(core ops plugins)

log() { printf '== %s\n' "$*"; }
die() { printf 'arm-check: %s\n' "$*" >&2; exit 2; }

command -v aarch64-linux-gnu-gcc >/dev/null ||
  die "no aarch64-linux-gnu-gcc: apt-get install gcc-aarch64-linux-gnu"
command -v qemu-aarch64 >/dev/null || die "no qemu-aarch64: apt-get install qemu-user"
grep -qs '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64 ||
  die "the kernel does not hand aarch64 executables to qemu (binfmt_misc): see this script's header"
apt-cache show libc6:arm64 >/dev/null 2>&1 ||
  die "apt knows no arm64 packages: dpkg --add-architecture arm64 && apt-get update"

# The -dev packages give headers, .pc files and link names; the runtime
# libraries (and everything they load, glibc included, for qemu's -L) come
# from apt's dependency closure, arm64 names only.
DEV=(libhwloc-dev:arm64 libcjson-dev:arm64 libcriterion-dev:arm64)
RUNTIME=(libhwloc15:arm64 libcjson1:arm64 libcriterion3:arm64)

fetch_sysroot() {
  if [ -f "$SYSROOT/.complete" ]; then
    log "sysroot: $SYSROOT (present)"
    return
  fi
  log "sysroot: downloading arm64 packages into $SYSROOT"
  rm -rf "$SYSROOT"
  mkdir -p "$SYSROOT/debs"
  local pkgs
  mapfile -t pkgs < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances "${RUNTIME[@]}" | grep -E '^[a-z0-9].*:arm64$' | sort -u)
  (cd "$SYSROOT/debs" && apt-get download -q "${DEV[@]}" "${pkgs[@]}" 2>&1 | grep -v '^W: ' || true)
  local n=0
  for deb in "$SYSROOT"/debs/*.deb; do
    dpkg -x "$deb" "$SYSROOT"
    n=$((n + 1))
  done
  [ "$n" -ge $((${#DEV[@]} + ${#pkgs[@]})) ] ||
    die "downloaded $n of $((${#DEV[@]} + ${#pkgs[@]})) packages (network? apt sources?)"
  # Criterion's .pc names the packages of its static link (Requires.private),
  # whose -dev packages are not unpacked; a shared link needs none of them.
  sed -i '/^Requires.private:/d; /^Libs.private:/d' \
    "$SYSROOT/usr/lib/aarch64-linux-gnu/pkgconfig/criterion.pc"
  touch "$SYSROOT/.complete"
  log "sysroot: $n packages unpacked"
}

write_cross_file() {
  local lib=$SYSROOT/usr/lib/aarch64-linux-gnu
  cat >"$SYSROOT/sysroot.ini" <<EOF
# Written by tools/arm-check.sh: the unpacked arm64 packages in $SYSROOT.
[binaries]
pkg-config = 'pkg-config'
exe_wrapper = ['qemu-aarch64', '-L', '$SYSROOT']

[properties]
sys_root = '$SYSROOT'
pkg_config_libdir = ['$lib/pkgconfig', '$SYSROOT/usr/share/pkgconfig']

[built-in options]
c_link_args = ['-Wl,-rpath-link,$lib:$SYSROOT/lib/aarch64-linux-gnu']
EOF
}

fetch_sysroot
write_cross_file
# Runs a step with its output in $SYSROOT/step.log, shown (its end) if it fails.
quiet() {
  "$@" >"$SYSROOT/step.log" 2>&1 || { tail -40 "$SYSROOT/step.log" >&2; die "failed: $*"; }
}
if [ ! -f "$BUILD/build.ninja" ]; then
  log "configure $BUILD"
  quiet meson setup "$BUILD" --cross-file cross/aarch64-linux-gnu.ini \
    --cross-file "$SYSROOT/sysroot.ini" -Dbuildtype=debugoptimized -Dopencl=disabled -Dtests=enabled
fi
log "build $BUILD"
quiet ninja -C "$BUILD"
log "qemu: $(qemu-aarch64 -L "$SYSROOT" "$BUILD/tools/switchyard" --version 2>&1 | head -1)"
log "test ${SUITES[*]} (qemu-aarch64)"
# shellcheck disable=SC2086
QEMU_LD_PREFIX=$SYSROOT meson test -C "$BUILD" --print-errorlogs ${ARM_TEST_ARGS:-} \
  "${SUITES[@]}"
