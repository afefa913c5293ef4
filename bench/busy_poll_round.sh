#!/usr/bin/env bash
# Busy polling on and off, on one GPU (bench/results/2026-12-01-h200-busy-poll.md): bench/server_overhead.py
# at concurrency 1 with the waits sleeping (--busy_poll false), the executor's spinning (true) and the
# server's io threads' too (true --http_busy_poll), on the small preset (16/16) and on one random
# Llama-3.1-8B bf16 engine (128/64) shared by the three; then offline 128/128 throughput with the
# executor's polling off and on, alternating, to show that it costs nothing there.
#
#   bench/busy_poll_round.sh        # with the package of tests/gpu/package_for_device.sh in .device/
#
# Environment: INFLIGHT_DEVICE_DIR (.device), OUT (where the markdown of each run goes; default
# out/busy-poll), INFLIGHT_BUSY_POLL_REQUESTS (48: 8B requests per run), INFLIGHT_BUSY_POLL_TPUT
# (3000: throughput requests; 0 skips that part).
set -u -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg=${INFLIGHT_DEVICE_DIR:-$root/.device}
dest=${OUT:-$root/out/busy-poll}
requests=${INFLIGHT_BUSY_POLL_REQUESTS:-48}
tput=${INFLIGHT_BUSY_POLL_TPUT:-3000}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
libs="$pkg/lib:$cuda_home/lib64"
mkdir -p "$dest"
work=$(mktemp -d /dev/shm/inflight-busy-poll.XXXXXX)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
rc=0
common=(--bin_dir "$pkg/libexec" --backend_dir "$pkg/backends" --lib_path "$libs" --concurrency 1)
variant_args() {
  case $1 in
    sleeping) echo "--busy_poll false" ;;
    executor) echo "--busy_poll true" ;;
    http) echo "--busy_poll true --http_busy_poll" ;;
  esac
}
overhead() {  # name, server_overhead.py arguments...
  local name=$1
  shift
  python3 "$root/bench/server_overhead.py" "${common[@]}" "$@" --out "$dest/$name.md" >"$work/$name.log" 2>&1 || rc=1
  echo "== $name ($(($(date +%s) - start)) s)"
  grep -E "^server_overhead|^server_phases|FAILED" "$work/$name.log"
}
for v in sleeping executor http; do
  # shellcheck disable=SC2046
  overhead "small-$v" --preset small --shape 16/16 --requests 200 $(variant_args $v)
done
LD_LIBRARY_PATH=$libs "$pkg/libexec/inflight-build" --random_preset llama-3.1-8b --dtype bfloat16 \
  --max_input_len 128 --max_seq_len 256 --max_batch_size 1024 --output_dir "$work/e8b" >"$work/build.log" 2>&1 ||
  { tail -3 "$work/build.log"; exit 1; }
for v in sleeping executor http; do
  # shellcheck disable=SC2046
  overhead "8b-$v" --engine_dir "$work/e8b" --shape 128/64 --requests "$requests" $(variant_args $v)
done
if ((tput > 0)); then
  for v in false true false true; do
    LD_LIBRARY_PATH=$libs "$pkg/libexec/inflight-bench-executor" --engine_dir "$work/e8b" --sections throughput \
      --shapes 128/128 --num_requests "$tput" --kv_cache_reuse=false --kv_cache_free_gpu_mem_fraction 0.95 \
      --busy_poll=$v >"$work/tput.md" 2>"$work/tput.log" || rc=1
    echo "== throughput, busy_poll $v: $(grep -E '^\| +128/128' "$work/tput.md" | head -1)"
  done
fi
exit $rc
