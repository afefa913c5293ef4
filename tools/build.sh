#!/usr/bin/env bash
# Configures and builds Inflight into build/ (or $INFLIGHT_BUILD_DIR). Extra arguments go to cmake.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${INFLIGHT_BUILD_DIR:-$root/build}"
jobs="${INFLIGHT_JOBS:-$(nproc)}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
cmake --build "$build" -j "$jobs"
