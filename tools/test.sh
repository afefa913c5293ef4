#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies, fetches test data, builds, runs ctest.
# GPU tests (label gpu) skip themselves when no device is present.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/install_deps.sh"
"$root/tools/fetch_test_data.sh"
start=$(date +%s)
"$root/tools/build.sh" -DINFLIGHT_TESTS=ON
echo "test.sh: build took $(( $(date +%s) - start )) s"
(cd "${INFLIGHT_BUILD_DIR:-$root/build}" && ctest --output-on-failure -j "${INFLIGHT_JOBS:-$(nproc)}" "$@")
# The same host code again under ASan + UBSan, with the fuzzers' short runs (a second build in
# build-asan/; what it costs CI is in bench/results/2026-11-29-fuzzing.md). INFLIGHT_SANITIZED=0
# leaves it out.
if [ "${INFLIGHT_SANITIZED:-1}" != 0 ]; then
  "$root/tools/test_sanitized.sh"
fi
