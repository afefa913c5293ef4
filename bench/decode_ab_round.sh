#!/usr/bin/env bash
# Batch-1 decode, settings side by side, in one device call: for each engine format, one random
# Llama-3.1-8B engine (INFLIGHT_DECODE_PRESET) whose weights are made at load (inflight-build
# --weights_at_load), then inflight-bench-executor's decode section (tokens a second against the
# weights-and-KV floor) once per setting, the settings in turn INFLIGHT_BENCH_REPEATS times so that
# drift shows as spread. INFLIGHT_BENCH_ARGS runs another of its sections instead, e.g. the closed-loop
# latency rows (p50, TTFT, tok/s a concurrency) with a setting on and off.
#
#   bash bench/decode_ab_round.sh          # on the device, with .device (or a package) carried
#   INFLIGHT_DECODE_FORMATS=bf16 INFLIGHT_BENCH_MAX_BATCH_SIZE=512 INFLIGHT_BENCH_VARIANTS="A=1 A=0" \
#     INFLIGHT_BENCH_ARGS="--sections latency --latency_concurrency 16,64,256 --latency_requests 768" \
#     bash bench/decode_ab_round.sh
#
# Environment: INFLIGHT_BENCH_PACKAGE_DIR (.device: needs libexec/inflight-build and
# libexec/inflight-bench-executor), INFLIGHT_BENCH_OUT ($OUT), INFLIGHT_DECODE_FORMATS
# (space-separated, default "bf16 fp8 int4_wo": bf16 is unquantized, fp8 adds an FP8 KV cache),
# INFLIGHT_BENCH_VARIANTS (space-separated NAME=VALUE settings, settings joined by + make one run;
# default "none"), INFLIGHT_BENCH_REPEATS (2), INFLIGHT_DECODE_CONTEXT (128), INFLIGHT_DECODE_STEPS
# (64), INFLIGHT_DECODE_PRESET (llama-3.1-8b; tiny runs on a CPU in seconds), INFLIGHT_BENCH_ARGS
# (inflight-bench-executor's arguments after --engine_dir; default the decode section above),
# INFLIGHT_BENCH_MAX_BATCH_SIZE (the engine's, default 8).
set -u -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg=${INFLIGHT_BENCH_PACKAGE_DIR:-$root/.device}
dest=${INFLIGHT_BENCH_OUT:-${OUT:-$root/out/decode-ab}}
mkdir -p "$dest"
export LD_LIBRARY_PATH="$pkg/lib:${LD_LIBRARY_PATH:-}:${CUDA_HOME:-/usr/local/cuda}/lib64"
context=${INFLIGHT_DECODE_CONTEXT:-128} steps=${INFLIGHT_DECODE_STEPS:-64}
read -ra bench_args <<<"${INFLIGHT_BENCH_ARGS:---sections decode --decode_context $context --decode_steps $steps}"
work=$(mktemp -d /dev/shm/inflight-decode-ab.XXXXXX)
trap 'rm -rf "$work"' EXIT
rc=0
for format in ${INFLIGHT_DECODE_FORMATS:-bf16 fp8 int4_wo}; do
  quant=()
  case "$format" in
    bf16) ;;
    fp8) quant=(--qformat fp8 --kv_cache_dtype fp8) ;;
    int8_wo | int4_wo) quant=(--qformat "$format") ;;
    *) echo "format $format: accepted: bf16 fp8 int8_wo int4_wo" >&2; exit 2 ;;
  esac
  engine="$work/$format"
  "$pkg/libexec/inflight-build" --random_preset "${INFLIGHT_DECODE_PRESET:-llama-3.1-8b}" \
    --weights_at_load --dtype bfloat16 --max_batch_size "${INFLIGHT_BENCH_MAX_BATCH_SIZE:-8}" \
    --max_input_len "$context" \
    --max_seq_len $(( context + steps + 1 )) "${quant[@]}" --output_dir "$engine" \
    >"$dest/engine-$format.log" 2>&1 ||
    { tail "$dest/engine-$format.log"; rc=1; continue; }
  for (( r = 1; r <= ${INFLIGHT_BENCH_REPEATS:-2}; ++r )); do
    for variant in ${INFLIGHT_BENCH_VARIANTS:-none}; do
      settings=()
      [[ "$variant" != none ]] && IFS=+ read -ra settings <<<"$variant"
      tag="$format-${variant//[^A-Za-z0-9]/_}-$r"
      echo "== $format, $variant, round $r"
      env "${settings[@]}" "$pkg/libexec/inflight-bench-executor" --engine_dir "$engine" \
        "${bench_args[@]}" >"$dest/decode-$tag.md" 2>"$dest/decode-$tag.log" || { tail -3 "$dest/decode-$tag.log"; rc=1; }
      grep -E "^\| *-?[0-9]" "$dest/decode-$tag.md"
    done
  done
done
exit $rc
