#!/usr/bin/env bash
# One device round of the performance benchmarks (issue 5), in one device call:
#   1. the device: nvidia-smi read-only queries (name, driver, clocks, power limit), nvcc, disk;
#   2. build: bench/gpu_standalone (CMake + CUDA toolkit only), Release, the device's own arch,
#      only inflight-bench-gpu-ceilings and inflight-bench-gpu-kernels; if that fails, the copies
#      bench/package_gpu_round.sh built on the dev machine are used, and the summary says so;
#   3. inflight-bench-gpu-ceilings: copy bandwidth and cuBLASLt bf16 (and FP8) GEMM rates;
#   4. inflight-bench-gpu-kernels: decode/context attention, norms, RoPE, sampling;
#   5. engine (when executor, server or hf is wanted): one random Llama-3.1-8B bf16 engine written
#      straight from random weights by the carried inflight-build --random_preset (no checkpoint),
#      sized for the shapes, in the roomiest of /dev/shm and $TMPDIR; every later step uses it;
#   6. executor: the carried inflight-bench-executor on that engine, sections decode (batch 1
#      against (weights + KV) / the copy bandwidth of step 3), latency (per-request p50/p90 at
#      concurrency 1 and 8, for step 7) and throughput (the four TensorRT-LLM shapes, --num_requests
#      N each, each shape's row printed when it finishes); stopped early enough to leave the later
#      steps their reserve (the rows printed by then are kept);
#   7. server: bench/server_overhead.py: the same latency requests through the carried
#      inflight-server + tools/benchmark_core_model.py, against step 6's executor-alone figures;
#   8. hf: bench/hf_peer.py: Hugging Face transformers generate on the same engine's weights (split
#      back into HF modules), bf16, greedy, batch 1 and 64, the same shapes with the output capped,
#      until the round's deadline.
# Logs and markdown go to $INFLIGHT_BENCH_OUT (default $OUT, the device tool's output folder, or
# <repo>/out/gpu-round): summary.md (everything, combined), device.txt, ceilings.md, kernels.md,
# executor.md, server.md, hf.md and round-logs.tar.gz (every log): the tool's limit of eight files.
#
#   bench/package_gpu_round.sh              # here, first: fills .device/bench
#   bash bench/run_gpu_round.sh             # on the device, with .device carried
#
# Environment: INFLIGHT_BENCH_OUT; INFLIGHT_BENCH_PACKAGE_DIR (.device/bench);
# INFLIGHT_BENCH_BIN_DIR and INFLIGHT_BENCH_BACKEND_DIR (the package's libexec/ and backends/; a
# CPU build's bin/ and backends/ for a dry run); INFLIGHT_BENCH_BUILD_DIR
# (/tmp/inflight-bench-gpu-build); INFLIGHT_ROUND_DEADLINE_S (540: the last step is stopped then, so
# the round ends inside a 10-minute call); INFLIGHT_BENCH_STEPS (default "build ceilings kernels
# executor server hf"); INFLIGHT_BENCH_EXECUTOR_SECTIONS (decode,latency,throughput: what step 6
# measures; the server step needs latency); INFLIGHT_BENCH_NUM_REQUESTS (64); INFLIGHT_BENCH_SHAPES
# (128/128,128/2048,2048/128,2048/2048); INFLIGHT_BENCH_SERVER_RESERVE_S (120) and
# INFLIGHT_BENCH_HF_RESERVE_S (150): seconds the executor step leaves for each later step wanted;
# INFLIGHT_BENCH_LATENCY_SHAPE (128/64), INFLIGHT_BENCH_LATENCY_REQUESTS (24) and
# INFLIGHT_BENCH_LATENCY_CONCURRENCY (1,8): the requests of steps 6 and 7;
# INFLIGHT_BENCH_HF_BATCHES (1,64) and INFLIGHT_BENCH_HF_MAX_NEW_TOKENS (128: the cap on the HF
# peer's outputs); INFLIGHT_BENCH_KERNEL_ARGS and INFLIGHT_BENCH_CEILING_ARGS (extra arguments);
# INFLIGHT_BENCH_DRY_RUN=1 (no GPU wanted: the benchmarks' "no device" exit is not a failure, the
# standalone is configured but built only with INFLIGHT_BENCH_DRY_BUILD=1, the engine is the tiny
# preset on the CPU with small shapes, and hf without torch is recorded, not failed).
set -u -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg=${INFLIGHT_BENCH_PACKAGE_DIR:-$root/.device/bench}
dest=${INFLIGHT_BENCH_OUT:-${OUT:-$root/out/gpu-round}}
build=${INFLIGHT_BENCH_BUILD_DIR:-/tmp/inflight-bench-gpu-build}
num_requests=${INFLIGHT_BENCH_NUM_REQUESTS:-64}
shapes=${INFLIGHT_BENCH_SHAPES:-128/128,128/2048,2048/128,2048/2048}
steps=" ${INFLIGHT_BENCH_STEPS:-build ceilings kernels executor server hf} "
dry=${INFLIGHT_BENCH_DRY_RUN:-0}
bin=${INFLIGHT_BENCH_BIN_DIR:-$pkg/libexec}
backends=${INFLIGHT_BENCH_BACKEND_DIR:-$pkg/backends}
latency_shape=${INFLIGHT_BENCH_LATENCY_SHAPE:-128/64}
latency_requests=${INFLIGHT_BENCH_LATENCY_REQUESTS:-24}
latency_concurrency=${INFLIGHT_BENCH_LATENCY_CONCURRENCY:-1,8}
hf_batches=${INFLIGHT_BENCH_HF_BATCHES:-1,64}
hf_max_new_tokens=${INFLIGHT_BENCH_HF_MAX_NEW_TOKENS:-128}
if [[ "$dry" == 1 ]]; then
  shapes=16/8,32/16
  num_requests=4
  latency_shape=32/8
  latency_requests=6
  hf_batches=1,2
  hf_max_new_tokens=4
fi
t0=$(date +%s)
deadline=$(( t0 + ${INFLIGHT_ROUND_DEADLINE_S:-540} ))
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
missing=$(for f in "$bin"/* "$backends"/*/*.so; do [[ -f "$f" ]] && with_libs ldd "$f"; done 2>/dev/null |
  awk '/not found/ {print $1}' | sort -u)
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

# Seconds left before the deadline, less the reserves of the later steps still wanted.
time_left() {
  local left=$(( deadline - $(date +%s) )) step
  for step in "$@"; do
    case $step in
      server) want server && left=$(( left - ${INFLIGHT_BENCH_SERVER_RESERVE_S:-120} )) ;;
      hf) want hf && left=$(( left - ${INFLIGHT_BENCH_HF_RESERVE_S:-150} )) ;;
    esac
  done
  echo "$left"
}
# A command line for the summary, without this machine's folders (the results get committed).
show() {
  local text="$*"
  [[ -n "$engine" ]] && text=${text//$engine/<engine>}
  text=${text//$logs/<logs>}
  text=${text//$pkg/<package>}
  text=${text//$root\//}
  echo "$text"
}
# A step's exit code ($1, under a limit of $2 s) as the summary's words in `result`; a failure
# sets `status`. (Not through $(...): a subshell would lose status.)
verdict() {
  case $1 in
    0) result=ok ;;
    124|137) status=1; result="STOPPED at its limit ($2 s): the rows printed so far are kept" ;;
    *) status=1; result="FAILED (exit $1)" ;;
  esac
}

# ---- 5. one random engine for the executor, the server and the HF peer
engine=""
engine_tmp=""
if want executor || want server || want hf; then
  banner "engine"
  s=$(date +%s)
  # 16 GB: the roomiest of /dev/shm and $TMPDIR (tmpfs writes at memory speed).
  tmp_dir=${TMPDIR:-/tmp}
  for d in /dev/shm "${TMPDIR:-/tmp}"; do
    [[ -d "$d" && -w "$d" ]] || continue
    avail=$(df -Pk "$d" 2>/dev/null | awk 'NR==2 {print $4}')
    best=$(df -Pk "$tmp_dir" 2>/dev/null | awk 'NR==2 {print $4}')
    (( ${avail:-0} > ${best:-0} )) && tmp_dir=$d
  done
  # Long enough for every shape, the batch-1 decode row (128 + 64) and the latency requests.
  max_in=128
  max_seq=193
  for shape in ${shapes//,/ } $latency_shape; do
    in=${shape%/*}
    out=${shape#*/}
    (( in > max_in )) && max_in=$in
    (( in + out > max_seq )) && max_seq=$(( in + out ))
  done
  engine_tmp=$(mktemp -d "$tmp_dir/inflight-round-engine.XXXXXX")
  # 16 GB of tmpfs is memory: gone however the round ends.
  trap 'rm -rf "$engine_tmp"' EXIT
  engine="$engine_tmp/engine"
  if [[ "$dry" == 1 ]]; then
    engine_args=(--random_preset tiny)
  else
    engine_args=(--random_preset llama-3.1-8b --dtype bfloat16)
  fi
  engine_args+=(--max_input_len "$max_in" --max_seq_len "$max_seq" --output_dir "$engine")
  echo "   $tmp_dir: $(( $(df -Pk "$tmp_dir" | awk 'NR==2 {print $4}') / 1048576 )) GB free; inflight-build ${engine_args[*]}"
  with_libs timeout 300 "$bin/inflight-build" "${engine_args[@]}" >"$logs/engine.log" 2>&1
  rc=$?
  verdict $rc 300
  if (( rc == 0 )); then
    bytes=$(du -sb "$engine" | cut -f1)
    took=$(( $(date +%s) - s ))
    result="ok: $(( bytes / 1000000 )) MB in ${took} s ($(awk -v b="$bytes" -v t="$took" 'BEGIN { printf "%.2f", b / 1e9 / (t > 0 ? t : 1) }') GB/s) on $tmp_dir"
  else
    tail -5 "$logs/engine.log"
    engine=""
  fi
  echo "   engine: $result"
  record engine $(( $(date +%s) - s )) "$result (\`inflight-build $(show "${engine_args[*]}")\`)"
fi

# ---- 6. executor alone on that engine
if want executor; then
  banner "inflight-bench-executor"
  s=$(date +%s)
  args=(--engine_dir "$engine" --sections "${INFLIGHT_BENCH_EXECUTOR_SECTIONS:-decode,latency,throughput}" --shapes "$shapes"
    --num_requests "$num_requests" --latency_shape "$latency_shape"
    --latency_requests "$latency_requests" --latency_concurrency "$latency_concurrency"
    --kv_cache_reuse=false)
  # The floor of the batch-1 decode row: the GPU copy ceiling of step 3 (the benchmark would
  # otherwise measure the CPU's memcpy).
  [[ -n "$copy_gbps" ]] && args+=(--bandwidth_gbps "$copy_gbps")
  limit=$(time_left server hf)
  echo "   limit ${limit} s: inflight-bench-executor ${args[*]}"
  if [[ -z "$engine" ]]; then
    result="skipped: no engine"
    status=1
    echo "(not run: $result)" >"$logs/executor.md"
  elif (( limit < 60 )); then
    result="skipped: ${limit} s left before the reserves of the later steps"
    echo "(not run: $result)" >"$logs/executor.md"
  else
    with_libs timeout "$limit" "${linebuf[@]}" "$bin/inflight-bench-executor" "${args[@]}" \
      >"$logs/executor.md" 2>"$logs/executor.log"
    verdict $? "$limit"
  fi
  tail -5 "$logs/executor.log" 2>/dev/null
  cat "$logs/executor.md"
  echo "   executor: $result in $(( $(date +%s) - s )) s"
  record executor $(( $(date +%s) - s )) "$result (\`inflight-bench-executor $(show "${args[*]}")\`)"
fi

# ---- 7. what the server adds, same engine and requests
if want server; then
  banner "server overhead"
  s=$(date +%s)
  limit=$(time_left hf)
  args=(--bin_dir "$bin" --backend_dir "$backends" --engine_dir "$engine" --shape "$latency_shape"
    --requests "$latency_requests" --concurrency "$latency_concurrency"
    --executor_output "$logs/executor.md" --lib_path "$pkg/lib:$cuda_libs"
    --work_dir "$logs/server-work" --out "$logs/server.md")
  echo "   limit ${limit} s: bench/server_overhead.py ${args[*]}"
  if [[ -z "$engine" ]]; then
    result="skipped: no engine"
    status=1
  elif (( limit < 30 )); then
    result="skipped: ${limit} s left"
  else
    # timeout signals the whole process group: the server the script started stops with it.
    timeout "$limit" python3 "$root/bench/server_overhead.py" "${args[@]}" >"$logs/server.log" 2>&1
    verdict $? "$limit"
  fi
  [[ -f "$logs/server.md" ]] || { echo "(not run: $result)"; tail -20 "$logs/server.log"; } >"$logs/server.md"
  cat "$logs/server.md"
  echo "   server: $result in $(( $(date +%s) - s )) s"
  record server $(( $(date +%s) - s )) "$result (\`bench/server_overhead.py $(show "${args[*]}")\`)"
fi

# ---- 8. Hugging Face transformers on the same weights, until the deadline
if want hf; then
  banner "hf peer"
  s=$(date +%s)
  limit=$(time_left)
  # Stop starting rows 20 s before the hard limit: a row in flight then still finishes.
  args=(--engine_dir "$engine" --shapes "$shapes" --batches "$hf_batches"
    --max_new_tokens "$hf_max_new_tokens" --time_budget_s "$(( limit > 40 ? limit - 20 : 20 ))"
    --out "$logs/hf.md")
  [[ "$dry" == 1 ]] && args+=(--device cpu)
  echo "   limit ${limit} s: bench/hf_peer.py ${args[*]}"
  if [[ -z "$engine" ]]; then
    result="skipped: no engine"
    status=1
  elif (( limit < 30 )); then
    result="skipped: ${limit} s left"
  else
    # The device's python and its torch; none of our carried libraries.
    timeout "$limit" "${linebuf[@]}" python3 "$root/bench/hf_peer.py" "${args[@]}" >"$logs/hf.log" 2>&1
    rc=$?
    if [[ "$dry" == 1 && $rc == 2 ]]; then
      result="no torch/transformers here (exit 2; dry run)"
    else
      verdict $rc "$limit"
    fi
  fi
  [[ -s "$logs/hf.md" ]] || { echo "(not run: $result)"; tail -20 "$logs/hf.log" 2>/dev/null; } >"$logs/hf.md"
  cat "$logs/hf.md"
  echo "   hf: $result in $(( $(date +%s) - s )) s"
  record hf $(( $(date +%s) - s )) "$result (\`bench/hf_peer.py $(show "${args[*]}")\`)"
fi
[[ -n "$engine_tmp" ]] && rm -rf "$engine_tmp"

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
  echo "- GPU benchmarks $bench_source; inflight-build, inflight-bench-executor, inflight-server and its backend carried (Release, built on the dev machine)."
  echo "- Round: $(elapsed) s, exit $status."
  echo
  cat "$steps_md"
  for part in ceilings kernels executor server hf; do
    [[ -s "$logs/$part.md" ]] || continue
    echo
    echo "---"
    echo
    cat "$logs/$part.md"
  done
} >"$summary"

for f in summary.md device.txt ceilings.md kernels.md executor.md server.md hf.md; do
  [[ -f "$logs/$f" ]] && cp "$logs/$f" "$dest/"
done
tar -czf "$dest/round-logs.tar.gz" -C "$logs" .
banner "done: exit $status; files in $dest"
cat "$steps_md"
[[ -n "$copy_gbps" ]] && grep -h "^ceilings:" "$logs/ceilings.md"
exit $status
