#!/usr/bin/env bash
# One round of GPU checks: configure and build the CUDA kernels and their tests into build-gpu,
# run `ctest -L gpu`, print a summary table. Needs only CMake, a C++20 compiler and the CUDA
# toolkit (the standalone project under tests/gpu/standalone), so it runs on a bare device machine.
#
# Environment: INFLIGHT_GPU_BUILD_DIR (default <repo>/build-gpu), INFLIGHT_GPU_LOG_DIR (default the
# build dir; logs configure.log, build.log, ctest.log, summary.txt), INFLIGHT_CUDA_ARCHS (default
# the device's own, e.g. 90a-real on an H100), INFLIGHT_GPU_SANITIZE=1 (also run every test under
# compute-sanitizer memcheck, each binary capped at INFLIGHT_GPU_SANITIZE_TIMEOUT s, default 120),
# INFLIGHT_GPU_TEST_SEED (repeat a seed).
set -u -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${INFLIGHT_GPU_BUILD_DIR:-$root/build-gpu}
logs=${INFLIGHT_GPU_LOG_DIR:-$build}
mkdir -p "$build" "$logs"

archs=${INFLIGHT_CUDA_ARCHS:-}
if [[ -z "$archs" ]] && command -v nvidia-smi >/dev/null; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  case "$cap" in
    90) archs="90a-real" ;;
    "") ;;
    *) archs="${cap}-real" ;;
  esac
fi
archs=${archs:-"90a-real;80-virtual"}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
jobs=$(nproc 2>/dev/null || echo 2)

status=0
echo "== configure (CUDA archs $archs)"
if ! cmake -S "$root/tests/gpu/standalone" -B "$build" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CUDA_ARCHITECTURES=$archs" >"$logs/configure.log" 2>&1; then
  tail -30 "$logs/configure.log"; echo "configure FAILED"; exit 2
fi
echo "== build (-j$jobs)"
start=$(date +%s)
if ! cmake --build "$build" -j "$jobs" >"$logs/build.log" 2>&1; then
  grep -E "error|Error" "$logs/build.log" | head -40; echo "build FAILED"; exit 3
fi
echo "   built in $(( $(date +%s) - start )) s"

echo "== ctest -L gpu"
# -V keeps every test's output (prefixed "N: "), which the table below is read from.
(cd "$build" && ctest -L gpu -V --timeout 300) >"$logs/ctest.log" 2>&1 || status=1
grep -E "^[0-9]+: (device:|SKIPPED|  FAILURE|  mismatch)" "$logs/ctest.log" | head -60

{
  echo
  echo "| binary | case | result | ms |"
  echo "|---|---|---|---|"
  declare -A binary_of
  while IFS= read -r line; do
    n=${line%%:*}
    binary_of[$n]=$(sed -E 's/.*\/(gpu_[a-z_]+_test).*/\1/' <<<"$line")
  done < <(grep -E "^[0-9]+: Test command: " "$logs/ctest.log")
  grep -E "^[0-9]+: \[ (OK|FAIL) \] " "$logs/ctest.log" |
    sed -E 's/^([0-9]+): \[ (OK|FAIL) \] ([^ ]+) \(([0-9]+) ms\)$/\1 \3 \2 \4/' |
    while read -r n name result ms; do
      [[ "$result" == OK ]] && result=ok
      echo "| ${binary_of[$n]:-?} | $name | $result | $ms |"
    done
  echo
  grep -E "Test +#[0-9]+: gpu_|tests passed, |tests failed" "$logs/ctest.log"
} | tee "$logs/summary.txt"
if [[ "${INFLIGHT_GPU_SANITIZE:-0}" == 1 ]] && command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck"
  for exe in "$build"/tests_gpu/gpu_*_test; do
    if timeout "${INFLIGHT_GPU_SANITIZE_TIMEOUT:-120}" compute-sanitizer --tool memcheck --error-exitcode 9 "$exe" >>"$logs/sanitizer.log" 2>&1; then
      echo "   memcheck clean: $(basename "$exe")"
    else
      echo "   memcheck FAILED: $(basename "$exe")"; status=1
    fi
  done
fi

exit $status
