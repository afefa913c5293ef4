#!/usr/bin/env bash
# Where one executor step's device time goes, kernel by kernel, in one device call: a random
# Llama-3.1-8B engine (quantized as INFLIGHT_BENCH_QUANT asks), then inflight-bench-executor's
# throughput section under Nsight Compute (ncu, timing only: gpu__time_duration, clocks and caches
# left alone), CUDA graphs off so each kernel is its own launch. bench/ncu_step_table.py cuts the
# launches into steps at the embedding gather that opens each one and prints, per profiled step,
# its tokens and its time by kernel.
#
#   bash bench/kernel_profile_round.sh          # on the device, with .device carried
#
# Environment: INFLIGHT_BENCH_PACKAGE_DIR (.device), INFLIGHT_BENCH_OUT ($OUT), INFLIGHT_BENCH_QUANT
# ("--qformat fp8 --kv_cache_dtype fp8"), INFLIGHT_BENCH_MAX_BATCH_SIZE (1024), INFLIGHT_PROFILE_RUNS
# (space-separated shape:requests:skip:count items: ncu skips `skip` kernel launches, then times
# `count`; default "2048/2:4:0:1500 128/128:1024:30000:1400"), INFLIGHT_BENCH_CALIBRATION=NxL (with
# --qformat fp8: --calib_dataset of N prompts of L random ids, bench/write_calibration_set.py, so the
# linears run per-tensor static scales as TensorRT-LLM's FP8 engines do), NCU (ncu on PATH, else Nsight
# Compute's default install).
set -u -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg=${INFLIGHT_BENCH_PACKAGE_DIR:-$root/.device}
dest=${INFLIGHT_BENCH_OUT:-${OUT:-$root/out/kernel-profile}}
runs=${INFLIGHT_PROFILE_RUNS:-2048/2:4:0:1500 128/128:1024:30000:1400}
mkdir -p "$dest"
export LD_LIBRARY_PATH="$pkg/lib:${LD_LIBRARY_PATH:-}:${CUDA_HOME:-/usr/local/cuda}/lib64"
ncu=${NCU:-$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)}
[[ -x "$ncu" ]] || { echo "no ncu found (set NCU)"; exit 1; }
max_in=128 max_seq=256
for run in $runs; do
  shape=${run%%:*}
  (( ${shape%/*} > max_in )) && max_in=${shape%/*}
  (( ${shape%/*} + ${shape#*/} > max_seq )) && max_seq=$(( ${shape%/*} + ${shape#*/} ))
done
engine=$(mktemp -d /dev/shm/inflight-kprofile.XXXXXX)
trap 'rm -rf "$engine"' EXIT
calib_flags=()
if [[ -n "${INFLIGHT_BENCH_CALIBRATION:-}" ]]; then
  python3 "$root/bench/write_calibration_set.py" "$INFLIGHT_BENCH_CALIBRATION" "$engine/calibration.jsonl" || exit 2
  calib_flags=(--calib_dataset "$engine/calibration.jsonl" --calib_size "${INFLIGHT_BENCH_CALIBRATION%x*}"
    --calib_max_seq_length "${INFLIGHT_BENCH_CALIBRATION#*x}")
fi
s=$(date +%s)
"$pkg/libexec/inflight-build" --random_preset llama-3.1-8b --dtype bfloat16 --max_input_len "$max_in" \
  --max_seq_len "$max_seq" --max_batch_size "${INFLIGHT_BENCH_MAX_BATCH_SIZE:-1024}" \
  ${INFLIGHT_BENCH_QUANT---qformat fp8 --kv_cache_dtype fp8} "${calib_flags[@]}" --output_dir "$engine/e" \
  >"$dest/engine.log" 2>&1 || { tail "$dest/engine.log"; exit 1; }
echo "engine built in $(( $(date +%s) - s )) s"
rc=0
for run in $runs; do
  IFS=: read -r shape n skip count <<<"$run"
  tag=${shape//\//-}-$n
  echo "== $shape, $n requests: ncu skips $skip launches, times $count"
  s=$(date +%s)
  INFLIGHT_CUDA_GRAPHS=0 "$ncu" --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum --csv --page raw --launch-skip "$skip" --launch-count "$count" \
    --log-file "$dest/ncu-$tag.csv" \
    "$pkg/libexec/inflight-bench-executor" --engine_dir "$engine/e" --sections throughput \
    --shapes "$shape" --num_requests "$n" --kv_cache_reuse=false \
    --kv_cache_free_gpu_mem_fraction 0.9 >"$dest/bench-$tag.md" 2>"$dest/bench-$tag.log" || rc=1
  echo "   $(( $(date +%s) - s )) s"
  python3 "$root/bench/ncu_step_table.py" "$dest/ncu-$tag.csv" | tee "$dest/steps-$tag.md" || rc=1
done
exit $rc
