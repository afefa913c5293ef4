#!/usr/bin/env bash
# CI's second build: the host code (no CUDA) built by clang with AddressSanitizer and
# UndefinedBehaviorSanitizer in build-asan/ (or $INFLIGHT_ASAN_BUILD_DIR), then the unit and e2e
# tests and a short run of every libFuzzer target (tests/fuzz, label fuzz) under them. Any
# sanitizer report fails the test that triggered it. Extra arguments go to ctest.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${INFLIGHT_ASAN_BUILD_DIR:-$root/build-asan}"
jobs="${INFLIGHT_JOBS:-$(nproc)}"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# NOTE: line tables are enough for symbolized reports and keep the objects small; NDEBUG as in the
# plain build, so the same code runs. The plain build enforces warnings; clang's own extra
# warnings are not made errors here.
start=$(date +%s)
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
  "-DCMAKE_C_FLAGS=$san" "-DCMAKE_CXX_FLAGS=$san" \
  "-DCMAKE_EXE_LINKER_FLAGS=$san" "-DCMAKE_SHARED_LINKER_FLAGS=$san" \
  -DINFLIGHT_CUDA=OFF -DINFLIGHT_FUZZ=ON -DINFLIGHT_TESTS=ON -DINFLIGHT_WERROR=OFF >/dev/null
cmake --build "$build" -j "$jobs"
echo "test_sanitized.sh: build took $(( $(date +%s) - start )) s"

supp="$root/tools/sanitizers"
clang -shared -fPIC -O2 -o "$build/libkeep_loaded.so" "$supp/keep_loaded.c"
export LD_PRELOAD="$build/libkeep_loaded.so${LD_PRELOAD:+:$LD_PRELOAD}"
# detect_leaks stays on; leaks of libraries we do not own (Open MPI's) are suppressed by name.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
start=$(date +%s)
cd "$build"
status=0
ctest --output-on-failure -j "$jobs" -L "unit|e2e|fuzz" -LE "gpu|soak" "$@" || status=$?
echo "test_sanitized.sh: tests took $(( $(date +%s) - start )) s"
exit $status
