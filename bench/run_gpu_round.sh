#!/usr/bin/env bash
# One device round of the performance benchmarks (issue 5), in one device call:
#   1. the device: nvidia-smi read-only queries (name, driver, clocks, power limit), nvcc, disk;
#   2. build: bench/gpu_standalone (CMake + CUDA toolkit only), Release, the device's own arch,
#      only inflight-bench-gpu-ceilings and inflight-bench-gpu-kernels; if that fails, the copies
#      bench/package_gpu_round.sh built on the dev machine are used, and the summary says so;
#   3. inflight-bench-gpu-ceilings: copy bandwidth and cuBLASLt bf16 GEMM rate;
#   4. inflight-bench-gpu-kernels: decode/context attention, norms, RoPE, sampling;
#   5. inflight-bench-executor (carried in .device/bench, built on the dev machine) on a random
#      Llama-3.1-8B bf16 engine: batch-1 decode against (weights + KV) / the copy bandwidth of step
#      3, and offline throughput for the four TensorRT-LLM shapes, --num_requests N each.
# Logs and markdown go to $INFLIGHT_BENCH_OUT (default $OUT, the device tool's output folder, or
# <repo>/out/gpu-round): summary.md (everything, combined), device.txt, ceilings.md, kernels.md,
# executor.md and round-logs.tar.gz (every log): six files, inside the tool's limit of eight.
#
#   bench/package_gpu_round.sh              # here, first: fills .device/bench
#   bash bench/run_gpu_round.sh             # on the device, with .device carried
#
# Environment: INFLIGHT_BENCH_OUT; INFLIGHT_BENCH_PACKAGE_DIR (.device/bench);
# INFLIGHT_BENCH_BUILD_DIR (/tmp/inflight-bench-gpu-build); INFLIGHT_ROUND_DEADLINE_S (450: the
# executor benchmark is stopped then, so the round ends inside a 10-minute call);
# INFLIGHT_BENCH_NUM_REQUESTS (64); INFLIGHT_BENCH_SHAPES (128/128,128/2048,2048/128,2048/2048);
# INFLIGHT_BENCH_STEPS (default "build ceilings kernels executor"); INFLIGHT_BENCH_KERNEL_ARGS and
# INFLIGHT_BENCH_CEILING_ARGS (extra arguments); INFLIGHT_BENCH_DRY_RUN=1 (no GPU wanted: the
# benchmarks' "no device" exit is not a failure, the standalone is configured but built only with
# INFLIGHT_BENCH_DRY_BUILD=1, and the executor runs a tiny preset on the CPU instead).
set -u -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg=${INFLIGHT_BENCH_PACKAGE_DIR:-$root/.device/bench}
dest=${INFLIGHT_BENCH_OUT:-${OUT:-$root/out/gpu-round}}
build=${INFLIGHT_BENCH_BUILD_DIR:-/tmp/inflight-bench-gpu-build}
num_requests=${INFLIGHT_BENCH_NUM_REQUESTS:-64}
shapes=${INFLIGHT_BENCH_SHAPES:-128/128,128/2048,2048/128,2048/2048}
steps=" ${INFLIGHT_BENCH_STEPS:-build ceilings kernels executor} "
dry=${INFLIGHT_BENCH_DRY_RUN:-0}
t0=$(date +%s)
deadline=$(( t0 + ${INFLIGHT_ROUND_DEADLINE_S:-450} ))
logs=$(mktemp -d /tmp/inflight-bench-round.XXXXXX)
mkdir -p "$dest"
status=0
cuda_home=${CUDA_HOME:-/usr/local/cuda}
export PATH="$PATH:$cuda_home/bin"
cuda_libs="$cuda_home/lib64:$cuda_home/lib:$cuda_home/targets/x86_64-linux/lib"
steps_md="$logs/steps.md"
printf '| step | seconds | result |\n|---|---:|---|\n' >"$steps_md"

want() { [[ "$steps" == *" $1 "* ]]; }
elapsed() { echo $(( $(date +%s) - t0 )); }
banner() { printf '\n== [%3ss] %s\n' "$(elapsed)" "$*"; }
record() { echo "| $1 | $2 | $3 |" >>"$steps_md"; }
# Our programs with the carried libraries; CUDA's come from the device's toolkit.
with_libs() { LD_LIBRARY_PATH="$pkg/lib:${LD_LIBRARY_PATH:-}:$cuda_libs" "$@"; }
# Line-buffered stdout where stdbuf exists, so a program stopped at the deadline leaves its tables.
linebuf=()
command -v stdbuf >/dev/null && linebuf=(stdbuf -oL)

# ---- 1. device
banner "device"
{
  echo "round started $(date -u +%F' '%H:%M:%S) UTC"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,clocks.max.memory,power.limit,persistence_mode,mig.mode.current \
      --format=csv 2>&1
    nvidia-smi 2>&1
  else
    echo "nvidia-smi: not found"
  fi
  command -v nvcc >/dev/null && nvcc --version | tail -2 || echo "nvcc: not found"
  echo "cores: $(nproc)"
  free -g 2>/dev/null | head -2
  df -h /tmp /dev/shm "$root" 2>/dev/null
  [[ -f "$pkg/commit.txt" ]] && cat "$pkg/commit.txt" || echo "no $pkg/commit.txt: run bench/package_gpu_round.sh first"
} >"$logs/device.txt" 2>&1
cat "$logs/device.txt"
# CUDA libraries the toolkit folder lacks (cuBLASLt, say) may sit in the pip wheels torch uses.
missing=$(for f in "$pkg"/libexec/*; do with_libs ldd "$f"; done 2>/dev/null | awk '/not found/ {print $1}' | sort -u)
if [[ -n "$missing" ]]; then
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  for lib in $missing; do
    # shellcheck disable=SC2086  # several site folders
    found=$(find $site /usr/local /usr/lib -name "$lib" 2>/dev/null | head -1)
    echo "not in $pkg/lib or $cuda_libs: $lib -> ${found:-NOT FOUND}" | tee -a "$logs/device.txt"
    [[ -n "$found" ]] && cuda_libs="$cuda_libs:$(dirname "$found")"
  done
fi
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
record device "$(elapsed)" "${gpu_name:-no GPU visible}"

# ---- 2. build the GPU benchmarks here (standalone: no protobuf, spdlog, ...)
bin_ceilings="$pkg/libexec/inflight-bench-gpu-ceilings"
bin_kernels="$pkg/libexec/inflight-bench-gpu-kernels"
bench_source="carried from the dev machine (bench/package_gpu_round.sh)"
if want build; then
  banner "build bench/gpu_standalone"
  s=$(date +%s)
  case "$cap" in
    90) archs="90a-real" ;;
    "") archs="90a-real" ;;
    *) archs="${cap}-real" ;;
  esac
  archs=${INFLIGHT_CUDA_ARCHS:-$archs}
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  result="FAILED (configure)"
  if cmake -S "$root/bench/gpu_standalone" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      "-DCMAKE_CUDA_ARCHITECTURES=$archs" -DINFLIGHT_WERROR=OFF >"$logs/configure.log" 2>&1; then
    if [[ "$dry" == 1 && "${INFLIGHT_BENCH_DRY_BUILD:-0}" != 1 ]]; then
      result="configured only (dry run)"
    elif timeout "${INFLIGHT_BENCH_BUILD_TIMEOUT:-300}" cmake --build "$build" -j "$(nproc)" \
        --target inflight-bench-gpu-ceilings inflight-bench-gpu-kernels >"$logs/build.log" 2>&1; then
      result="built (CUDA archs $archs)"
      bin_ceilings="$build/bin/inflight-bench-gpu-ceilings"
      bin_kernels="$build/bin/inflight-bench-gpu-kernels"
      bench_source="built on this machine from bench/gpu_standalone (CUDA archs $archs)"
    else
      result="FAILED (build; see build.log)"
      grep -E "error|Error" "$logs/build.log" | head -20
    fi
  else
    tail -20 "$logs/configure.log"
  fi
  [[ "$result" == FAILED* ]] && status=1
  echo "   $result in $(( $(date +%s) - s )) s; GPU benchmarks: $bench_source"
  record build $(( $(date +%s) - s )) "$result"
fi

# A GPU benchmark: its markdown to $logs/<name>.md. Exit 77 is "no device", a failure unless dry.
run_bench() {
  local name=$1 limit=$2
  shift 2
  local s rc result
  s=$(date +%s)
  with_libs timeout "$limit" "${linebuf[@]}" "$@" >"$logs/$name.md" 2>"$logs/$name.log"
  rc=$?
  case $rc in
    0) result=ok ;;
    77) result="no device (exit 77)"; [[ "$dry" == 1 ]] || status=1 ;;
    124) result="STOPPED at ${limit} s"; status=1 ;;
    *) result="FAILED (exit $rc)"; status=1 ;;
  esac
  cat "$logs/$name.log" >&2
  echo "   $name: $result in $(( $(date +%s) - s )) s"
  record "$name" $(( $(date +%s) - s )) "$result"
}

# ---- 3. ceilings
copy_gbps=""
if want ceilings; then
  banner "inflight-bench-gpu-ceilings"
  # shellcheck disable=SC2086  # extra arguments split on purpose
  run_bench ceilings 120 "$bin_ceilings" ${INFLIGHT_BENCH_CEILING_ARGS:-}
  cat "$logs/ceilings.md"
  copy_gbps=$(sed -n 's/^ceilings: copy_gbps=\([0-9.]*\) .*/\1/p' "$logs/ceilings.md" | head -1)
fi

# ---- 4. kernels
if want kernels; then
  banner "inflight-bench-gpu-kernels"
  # shellcheck disable=SC2086
  run_bench kernels 180 "$bin_kernels" ${INFLIGHT_BENCH_KERNEL_ARGS:-}
  cat "$logs/kernels.md"
fi

# ---- 5. executor on a random Llama-3.1-8B bf16 engine
if want executor; then
  banner "inflight-bench-executor"
  s=$(date +%s)
  # The random checkpoint and the engine take ~2 x 16 GB: the roomiest of /dev/shm and /tmp.
  tmp_dir=${TMPDIR:-/tmp}
  for d in /dev/shm "${TMPDIR:-/tmp}"; do
    [[ -d "$d" && -w "$d" ]] || continue
    avail=$(df -Pk "$d" 2>/dev/null | awk 'NR==2 {print $4}')
    best=$(df -Pk "$tmp_dir" 2>/dev/null | awk 'NR==2 {print $4}')
    (( ${avail:-0} > ${best:-0} )) && tmp_dir=$d
  done
  avail_gb=$(( $(df -Pk "$tmp_dir" | awk 'NR==2 {print $4}') / 1048576 ))
  if [[ "$dry" == 1 ]]; then
    args=(--preset tiny --shapes "16/8,32/16" --num_requests 4)
  else
    args=(--preset llama-3.1-8b --dtype bfloat16 --shapes "$shapes" --num_requests "$num_requests")
  fi
  # The floor of the batch-1 decode row: the GPU copy ceiling of step 3 (the benchmark would
  # otherwise measure the CPU's memcpy).
  [[ -n "$copy_gbps" ]] && args+=(--bandwidth_gbps "$copy_gbps")
  limit=$(( deadline - $(date +%s) ))
  echo "   TMPDIR=$tmp_dir (${avail_gb} GB free), limit ${limit} s: inflight-bench-executor ${args[*]}"
  if (( limit < 60 )); then
    result="skipped: ${limit} s left before the round's deadline"
    echo "(not run: $result)" >"$logs/executor.md"
  else
    TMPDIR=$tmp_dir with_libs timeout "$limit" "${linebuf[@]}" "$pkg/libexec/inflight-bench-executor" \
      "${args[@]}" >"$logs/executor.md" 2>"$logs/executor.log"
    rc=$?
    case $rc in
      0) result=ok ;;
      124) result="STOPPED at the round's deadline (${limit} s): the tables printed so far are kept"; status=1 ;;
      *) result="FAILED (exit $rc)"; status=1 ;;
    esac
    # A stopped run leaves its engine behind.
    rm -rf "$tmp_dir"/inflight-bench-llama-3.1-8b-* "$tmp_dir"/inflight-bench-tiny-* 2>/dev/null
  fi
  tail -5 "$logs/executor.log"
  cat "$logs/executor.md"
  echo "   executor: $result in $(( $(date +%s) - s )) s"
  record executor $(( $(date +%s) - s )) "$result (\`inflight-bench-executor ${args[*]}\`)"
fi

# ---- combined markdown
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active \
    --format=csv >>"$logs/device.txt" 2>&1
fi
summary="$logs/summary.md"
{
  echo "# GPU benchmark round, $(date -u +%F) UTC"
  echo
  echo "- Device: ${gpu_name:-no GPU visible} ($(nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1))"
  echo "- Code: $(head -2 "$pkg/commit.txt" 2>/dev/null | tr '\n' ';' || echo unknown)"
  echo "- GPU benchmarks $bench_source; inflight-bench-executor carried (Release, built on the dev machine)."
  echo "- Round: $(elapsed) s, exit $status."
  echo
  cat "$steps_md"
  for part in ceilings kernels executor; do
    [[ -s "$logs/$part.md" ]] || continue
    echo
    echo "---"
    echo
    cat "$logs/$part.md"
  done
} >"$summary"

for f in summary.md device.txt ceilings.md kernels.md executor.md; do
  [[ -f "$logs/$f" ]] && cp "$logs/$f" "$dest/"
done
tar -czf "$dest/round-logs.tar.gz" -C "$logs" .
banner "done: exit $status; files in $dest"
cat "$steps_md"
[[ -n "$copy_gbps" ]] && grep -h "^ceilings:" "$logs/ceilings.md"
exit $status
