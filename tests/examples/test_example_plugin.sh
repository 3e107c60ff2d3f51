#!/usr/bin/env bash
# The out-of-tree plugin example (docs/examples/example_plugin.c) built as
# a vendor builds a plugin: the headers and pkg-config file installed from
# this build (meson install --tags devel into a staging folder), its
# compiler flags from `pkg-config --cflags switchyard` alone, no link
# against libswitchyard.  The module must export only sy_plugin_query,
# load in `switchyard devices`, and pass `switchyard plugin-check`.
#
# usage: test_example_plugin.sh BUILD_DIR EXAMPLE.c SWITCHYARD MESON CC [CC ARGS...]
set -euo pipefail

build=$1 example=$2 switchyard=$3 meson=$4
shift 4
work=$(mktemp -d "${TMPDIR:-/tmp}/sy-example-plugin.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

echo "== install headers and pkg-config file into $work/stage"
"$meson" install -C "$build" --no-rebuild --destdir "$work/stage" --tags devel --quiet
pc=$(find "$work/stage" -name switchyard.pc -print -quit)
[ -n "$pc" ] || fail "meson install put no switchyard.pc under $work/stage"

# The .pc names the final prefix; the sysroot points it at the staging
# copy (the private requirements, hwloc and cJSON, come from the system
# and are not needed by a plugin).
cflags=$(PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$work/stage" \
  pkg-config --cflags switchyard)
echo "pkg-config --cflags switchyard: $cflags"
header=""
for flag in $cflags; do
  case $flag in
    -I*) [ -f "${flag#-I}/switchyard/plugin.h" ] && header=${flag#-I}/switchyard/plugin.h ;;
  esac
done
case $header in
  "$work/stage"/*) ;;
  "") fail "no -I of '$cflags' holds switchyard/plugin.h" ;;
  *) fail "switchyard/plugin.h comes from $header, outside the staged install" ;;
esac

echo "== build the plugin"
# shellcheck disable=SC2086
"$@" -std=c11 -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror -fPIC -shared \
  -fvisibility=hidden $cflags "$example" -o "$work/sy-example.so" -Wl,--no-undefined
exports=$(nm -D --defined-only "$work/sy-example.so" | awk 'NF == 3 { print $3 }' |
  grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$' || true)
[ "$exports" = "sy_plugin_query" ] || fail "exports '$exports', want only sy_plugin_query"
if readelf -d "$work/sy-example.so" | grep -q 'libswitchyard'; then
  fail "the plugin links libswitchyard"
fi

echo "== switchyard devices"
devices=$(SWITCHYARD_PLUGIN_PATH="$work/sy-example.so" SWITCHYARD_PLUGINS=example \
  "$switchyard" devices)
echo "$devices"
echo "$devices" | grep -q -E '^\s*\[[0-9]+\] example\s' || fail "switchyard devices does not list 'example'"

echo "== switchyard plugin-check"
"$switchyard" plugin-check "$work/sy-example.so" || fail "plugin-check failed"
echo "example plugin: built out of tree, loaded, conformant"
