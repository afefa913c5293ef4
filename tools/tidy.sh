#!/usr/bin/env bash
# Runs clang-tidy (the checks in .clang-tidy) over the project's C++ sources in a configured build's
# compile_commands.json: build/ or $INFLIGHT_BUILD_DIR, after tools/build.sh. Arguments: files to
# check instead of all of src/, tools/ and bench/ (CUDA sources are nvcc's, not clang-tidy's).
# Exits 1 when any check warns.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${INFLIGHT_BUILD_DIR:-$root/build}"
if [[ ! -f "$build/compile_commands.json" ]]; then
  echo "tidy.sh: no $build/compile_commands.json; run tools/build.sh first" >&2
  exit 2
fi
if (( $# > 0 )); then
  files=("$@")
else
  mapfile -t files < <(python3 - "$build/compile_commands.json" "$root" <<'PY'
import json, os, sys
root = sys.argv[2]
for entry in json.load(open(sys.argv[1])):
    path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(path, root)
    if rel.endswith(".cc") and rel.split(os.sep)[0] in ("src", "tools", "bench"):
        print(path)
PY
  )
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# NOTE: the build's GCC-only warning flags are unknown to clang; they are not findings.
printf '%s\n' "${files[@]}" | sort -u |
  xargs -P "${INFLIGHT_JOBS:-$(nproc)}" -n 4 clang-tidy -p "$build" --quiet \
    --extra-arg=-Wno-unknown-warning-option >"$log" 2>/dev/null || true
if grep -qE "(warning|error): " "$log"; then
  grep -E "(warning|error): " "$log" | sort -u
  echo "tidy.sh: findings in $(grep -cE "(warning|error): " "$log") places" >&2
  exit 1
fi
echo "tidy.sh: ${#files[@]} files, no findings"
