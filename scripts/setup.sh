#!/usr/bin/env bash
# Switchyard set-up: the two commands of README.md.
#   scripts/setup.sh run    install packages, build, fetch the default model, run the main job
#   scripts/setup.sh test   install packages, build (normal + ASan/UBSan), run every test
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential pkg-config meson ninja-build libhwloc-dev hwloc libcjson-dev
  libcriterion-dev ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  python3 python3-pip python3-venv unzip)

log() { printf '== %s\n' "$*"; }

install_packages() {
  # A package counts only where this machine's architecture (or 'all') has
  # it: an arm64 libhwloc-dev from a cross set-up does not build this one.
  local missing=() arch
  arch=$(dpkg --print-architecture)
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status} ${Architecture}\n' "$p" 2>/dev/null |
      grep -qE "^install ok installed ($arch|all)$" || missing+=("$p:$arch")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "packages: all present"
    return
  fi
  log "packages: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# build DIR [meson options...]: configure once, then build.
build() {
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    log "configure $dir $*"
    meson setup "$dir" "$@" >/dev/null
  fi
  log "build $dir"
  ninja -C "$dir" >/dev/null
}

# run_suite DIR LOG: meson test, verbose so Criterion's own summaries show.
run_suite() {
  local dir=$1 out=$2 rc=0
  log "test $dir"
  meson test -C "$dir" --print-errorlogs --verbose --num-processes 1 >"$out" 2>&1 || rc=$?
  grep -E '^\[====\] Synthesis|^(PASS|FAIL) |^[0-9]+ passed, [0-9]+ failed$|^\[----\].*(FAIL|CRASH)|^\[FAIL\]|Test crashed|ERROR: |runtime error:' "$out" || true
  grep -E '^ *[0-9]+/[0-9]+ .*(OK|FAIL|TIMEOUT|SKIP|ERROR)' "$out" | sed 's/^/   /' || true
  return $rc
}

# python_env: a venv with numpy and gguf for the test oracles (never the product).
python_env() {
  if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import numpy, gguf' 2>/dev/null; then
    log "python venv for the oracles (numpy, gguf)"
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check numpy gguf
  fi
}

cmd_test() {
  install_packages
  build build-test -Dbuildtype=debugoptimized
  build build-asan -Dbuildtype=debug -Db_sanitize=address,undefined
  tools/fetch-models.sh
  python_env
  export SY_PYTHON=$PWD/.venv/bin/python
  # One PoCL kernel cache for every suite of both builds: PoCL compiles
  # each OpenCL program once (a minute or more per suite cold, three times
  # that under the sanitizers) and the suites after the first reuse it.
  export POCL_CACHE_DIR=$PWD/build-test/pocl-cache
  local rc=0
  mkdir -p build-test/logs
  run_suite build-test build-test/logs/test.log || rc=1
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    run_suite build-asan build-test/logs/test-asan.log || rc=1
  # Criterion ignores how a test's worker process exits once the test has
  # passed, so a leak LeakSanitizer reports there would not fail the suite:
  # every report in the log counts as a failure.
  local reports
  reports=$(grep -cE 'ERROR: (LeakSanitizer|AddressSanitizer)' build-test/logs/test-asan.log || true)
  if [ "$reports" -gt 0 ]; then
    log "$reports sanitizer report(s) in build-test/logs/test-asan.log"
    rc=1
  fi
  # One closing line over both builds, from Criterion's own synthesis lines.
  local passed failed
  passed=$(cat build-test/logs/test.log build-test/logs/test-asan.log |
    sed -n 's/.*Synthesis: Tested: [0-9]* | Passing: \([0-9]*\).*/\1/p' | awk '{s+=$1} END {print s+0}')
  failed=$(cat build-test/logs/test.log build-test/logs/test-asan.log |
    sed -n 's/.*Failing: \([0-9]*\) | Crashing: \([0-9]*\).*/\1 \2/p' | awk '{s+=$1+$2} END {print s+0}')
  # Non-Criterion suites (the Python oracle) end with "N passed, N failed".
  local opassed ofailed
  opassed=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' build-test/logs/test.log | awk '{s+=$1} END {print s+0}')
  ofailed=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' build-test/logs/test.log | awk '{s+=$1} END {print s+0}')
  passed=$((passed + opassed))
  failed=$((failed + ofailed))
  [ "$passed" -gt 0 ] || rc=1
  [ "$failed" -eq 0 ] || rc=1
  echo "Tests: $passed passed, $failed failed"
  return $rc
}

cmd_run() {
  install_packages
  build build -Dbuildtype=release
  tools/fetch-models.sh
  log "switchyard devices"
  ./build/tools/switchyard devices
  log "switchyard demo"
  ./build/tools/switchyard demo
  log "switchyard run --chat (default model, default prompt)"
  ./build/tools/switchyard run --chat -n 128
}

case "${1:-}" in
  run) cmd_run ;;
  test) cmd_test ;;
  *) echo "usage: $0 run|test" >&2; exit 2 ;;
esac
