#!/usr/bin/env bash
# The quantized formats side by side in one device call: for each format, inflight-bench-executor
# writes a random Llama-3.1-8B engine quantized at build time (as inflight-build --qformat), then
# measures batch-1 decode against the memory floor (weights + scales + KV over the copy bandwidth)
# and, where asked, offline throughput.
#
#   bash bench/quant_formats_round.sh          # on the device, with .device carried
#
# Environment: INFLIGHT_BENCH_PACKAGE_DIR (.device), INFLIGHT_BENCH_OUT ($OUT), INFLIGHT_QUANT_FORMATS
# (space-separated format:sections items, default "int4_wo:decode,throughput fp8:decode
# int8_wo:decode"; fp8 adds an FP8 KV cache), INFLIGHT_BENCH_SHAPES (128/128),
# INFLIGHT_BENCH_NUM_REQUESTS (3000), INFLIGHT_BENCH_MAX_BATCH_SIZE (1024), INFLIGHT_BENCH_BANDWIDTH_GBPS
# (the floor's bandwidth; default: the benchmark measures the device copy rate),
# INFLIGHT_FORMAT_TIMEOUT_S (240 per format).
set -u -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg=${INFLIGHT_BENCH_PACKAGE_DIR:-$root/.device}
dest=${INFLIGHT_BENCH_OUT:-${OUT:-$root/out/quant-formats}}
mkdir -p "$dest"
export LD_LIBRARY_PATH="$pkg/lib:${LD_LIBRARY_PATH:-}:${CUDA_HOME:-/usr/local/cuda}/lib64"
rc=0
for item in ${INFLIGHT_QUANT_FORMATS:-int4_wo:decode,throughput fp8:decode int8_wo:decode}; do
  format=${item%%:*} sections=${item#*:}
  args=(--preset llama-3.1-8b --dtype bfloat16 --qformat "$format" --sections "$sections"
    --shapes "${INFLIGHT_BENCH_SHAPES:-128/128}" --num_requests "${INFLIGHT_BENCH_NUM_REQUESTS:-3000}"
    --max_batch_size "${INFLIGHT_BENCH_MAX_BATCH_SIZE:-1024}" --kv_cache_reuse=false)
  [[ "$format" == fp8 ]] && args+=(--kv_cache_dtype fp8)
  [[ -n "${INFLIGHT_BENCH_BANDWIDTH_GBPS:-}" ]] && args+=(--bandwidth_gbps "$INFLIGHT_BENCH_BANDWIDTH_GBPS")
  echo "== $format: inflight-bench-executor ${args[*]}"
  s=$(date +%s)
  timeout "${INFLIGHT_FORMAT_TIMEOUT_S:-240}" "$pkg/libexec/inflight-bench-executor" "${args[@]}" \
    >"$dest/$format.md" 2>"$dest/$format.log" || { echo "   FAILED or stopped (exit $?)"; rc=1; }
  echo "   $(( $(date +%s) - s )) s"
  grep -E "^\|" "$dest/$format.md"
done
exit $rc
