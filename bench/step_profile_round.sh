#!/usr/bin/env bash
# Where the executor's step time goes at scale, in one device call: one random Llama-3.1-8B bf16
# engine, then inflight-bench-executor's throughput section with INFLIGHT_STEP_PROFILE on, so the log
# shows per step the host phases beside the device wait (executor/step_profile.h).
#
#   bench/package_gpu_round.sh                  # here, first: fills .device/bench
#   bash bench/step_profile_round.sh            # on the device, with .device/bench carried
#
# Environment: INFLIGHT_BENCH_RUNS ("128/128:256": shape:requests items, one executor run each),
# INFLIGHT_BENCH_MAX_BATCH_SIZE (256: the engine's), INFLIGHT_BENCH_KV_FRACTION (0.9),
# INFLIGHT_STEP_PROFILE (64: steps per logged summary), INFLIGHT_BENCH_OUT ($OUT),
# INFLIGHT_BENCH_QUANT ("": inflight-build's quantization flags for the engine, e.g. "--qformat fp8
# --kv_cache_dtype fp8"), INFLIGHT_BENCH_CHECKPOINT=modelopt-fp8 (the engine from the FP8 checkpoint
# bench/make_fp8_checkpoint.py writes, ModelOpt's layout with calibrated static scales, instead of
# --random_preset; INFLIGHT_BENCH_QUANT then adds e.g. "--kv_cache_dtype fp8"),
# INFLIGHT_BENCH_CALIBRATION=NxL (with --qformat fp8 and/or --kv_cache_dtype fp8 in INFLIGHT_BENCH_QUANT:
# --calib_dataset of N prompts of L random token ids, seed 0, written here), and any INFLIGHT_*
# switch the executor reads (INFLIGHT_CUDA_GRAPHS=0, INFLIGHT_DISABLE_PDL=1, ...); INFLIGHT_BENCH_VARIANTS (space-separated NAME=VALUE settings: each
# run once per setting, for A/B comparisons in one engine build, e.g. "INFLIGHT_DECODE_FP8_BLOCKS=2
# INFLIGHT_DECODE_FP8_BLOCKS=3"; settings joined by + make one run, e.g. "A=0+B=0"; a setting starting
# with -- is an inflight-bench-executor flag instead, e.g. "--executor_max_batch_size=1024
# --executor_max_batch_size=2048", or "A=1+--executor_max_batch_size=1024").
set -u -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg=${INFLIGHT_BENCH_PACKAGE_DIR:-$root/.device/bench}
dest=${INFLIGHT_BENCH_OUT:-${OUT:-$root/out/step-profile}}
runs=${INFLIGHT_BENCH_RUNS:-128/128:256}
mkdir -p "$dest"
cuda_home=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH="$pkg/lib:${LD_LIBRARY_PATH:-}:$cuda_home/lib64"
export INFLIGHT_STEP_PROFILE=${INFLIGHT_STEP_PROFILE:-64}
max_in=128 max_seq=256
for run in $runs; do
  shape=${run%%:*}
  (( ${shape%/*} > max_in )) && max_in=${shape%/*}
  (( ${shape%/*} + ${shape#*/} > max_seq )) && max_seq=$(( ${shape%/*} + ${shape#*/} ))
done
engine=$(mktemp -d /dev/shm/inflight-profile.XXXXXX)
trap 'rm -rf "$engine"' EXIT
source_flags=(--random_preset llama-3.1-8b)
case "${INFLIGHT_BENCH_CHECKPOINT:-}" in
  "") ;;
  modelopt-fp8)
    python3 "$root/bench/make_fp8_checkpoint.py" --out "$engine/ckpt" >"$dest/checkpoint.log" 2>&1 ||
      { tail "$dest/checkpoint.log"; exit 1; }
    tail -1 "$dest/checkpoint.log"
    source_flags=(--checkpoint_dir "$engine/ckpt") ;;
  *) echo "INFLIGHT_BENCH_CHECKPOINT=$INFLIGHT_BENCH_CHECKPOINT: accepted: modelopt-fp8" >&2; exit 2 ;;
esac
calib_flags=()
if [[ -n "${INFLIGHT_BENCH_CALIBRATION:-}" ]]; then
  python3 "$root/bench/write_calibration_set.py" "$INFLIGHT_BENCH_CALIBRATION" "$engine/calibration.jsonl" || exit 2
  calib_flags=(--calib_dataset "$engine/calibration.jsonl" --calib_size "${INFLIGHT_BENCH_CALIBRATION%x*}"
    --calib_max_seq_length "${INFLIGHT_BENCH_CALIBRATION#*x}")
fi
"$pkg/libexec/inflight-build" "${source_flags[@]}" --dtype bfloat16 --max_input_len "$max_in" \
  --max_seq_len "$max_seq" --max_batch_size "${INFLIGHT_BENCH_MAX_BATCH_SIZE:-256}" \
  ${INFLIGHT_BENCH_QUANT:-} "${calib_flags[@]}" --output_dir "$engine/e" >"$dest/engine.log" 2>&1 || { tail "$dest/engine.log"; exit 1; }
rm -rf "$engine/ckpt"
# The card's SM clock and power while a run is busy, sampled by nvidia-smi beside it: an FP8 run of the
# 8B holds the 700 W cap at ~1,600 MHz of 1,980 (bench/NOTES.md entry 21), so figures of two runs
# compare only at like clocks. INFLIGHT_BENCH_CLOCKS=0 turns it off.
start_clocks() {
  clocks_pid=
  [[ "${INFLIGHT_BENCH_CLOCKS:-1}" == 0 ]] || ! command -v nvidia-smi >/dev/null && return
  nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_event_reasons.active \
    --format=csv,noheader,nounits -lms 500 >"$engine/clocks-$1.csv" 2>/dev/null &
  clocks_pid=$!
}
stop_clocks() {
  [[ -n "$clocks_pid" ]] || return 0
  kill "$clocks_pid" 2>/dev/null; wait "$clocks_pid" 2>/dev/null
  python3 - "$engine/clocks-$1.csv" <<'PY'
import sys
busy = []  # (MHz, W, power-capped) of samples drawing over 300 W: the run, not its load or idle tail
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    try:
        mhz, watts, reasons = float(f[0]), float(f[1]), int(f[2], 16)
    except (ValueError, IndexError):
        continue
    if watts > 300:
        busy.append((mhz, watts, reasons & 0x4 != 0))  # 0x4: software power cap
if busy:
    n = len(busy)
    print(f"   GPU while busy ({n} samples of 0.5 s): SM clock {sum(b[0] for b in busy) / n:,.0f} MHz "
          f"({min(b[0] for b in busy):,.0f}-{max(b[0] for b in busy):,.0f}), "
          f"{sum(b[1] for b in busy) / n:,.0f} W, power-capped in {100 * sum(b[2] for b in busy) / n:.0f}%")
PY
}
rc=0
for run in $runs; do
  for variant in ${INFLIGHT_BENCH_VARIANTS:-none}; do
    shape=${run%%:*} n=${run#*:} tag=${run//[\/:]/-}
    settings=() args=()
    if [[ "$variant" != none ]]; then
      IFS=+ read -ra parts <<<"$variant"
      for part in "${parts[@]}"; do
        if [[ "$part" == --* ]]; then args+=("$part"); else settings+=("$part"); fi
      done
    fi
    label=
    [[ "$variant" != none ]] && { tag+="-${variant//[^A-Za-z0-9]/_}"; label=" $variant"; }
    echo "== $shape, $n requests$label"
    start_clocks "$tag"
    env "${settings[@]}" "$pkg/libexec/inflight-bench-executor" --engine_dir "$engine/e" "${args[@]}" \
      --sections throughput --shapes "$shape" --num_requests "$n" --kv_cache_reuse=false \
      --kv_cache_free_gpu_mem_fraction "${INFLIGHT_BENCH_KV_FRACTION:-0.9}" \
      >"$dest/profile-$tag.md" 2>"$dest/profile-$tag.log" || rc=1
    grep -E '^\| *([0-9]+/[0-9]+|in/out) ' "$dest/profile-$tag.md"
    stop_clocks "$tag"
    # The executor logs to stdout beside its tables (spdlog's default logger), failures to stderr.
    grep -hE "step profile|KV pool|executor:" "$dest/profile-$tag.md" "$dest/profile-$tag.log" |
      cut -c1-400 | awk 'NR % 4 == 1'
  done
done
exit $rc
