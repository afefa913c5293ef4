#!/usr/bin/env bash
# One device round with the binaries tests/gpu/package_for_device.sh collected into .device/:
#   1. compute-sanitizer memcheck and racecheck on the GPU test binaries (in the background, bounded
#      by the round's deadline);
#   2. every GPU test binary (kernels vs CPU references, CUDA runner vs CPU runner);
#   3. parity with Hugging Face transformers on this GPU (tests/parity/gpu_parity.py);
#   3b. quantized engines of every checkpoint format against transformers on the dequantized values
#      (tests/parity/gpu_quant_parity.py; INFLIGHT_QPARITY_CASES picks cases);
#   4. the server on a GPU engine: prepare_demo.sh with a bfloat16 engine, inflight-server, the
#      ensemble generate and generate_stream requests of tools/quickstart.sh, then the e2e tests
#      test_llm_ensemble.py, test_llm_repository.py and test_every_path.py against GPU repositories;
#   4b. (step hf_folder, not in the default steps) tests/gpu/hf_folder_check.py: a transformers
#      checkpoint folder as engine_dir, served on the GPU, against transformers' greedy tokens;
#   5. with 2 or more GPUs, tests/gpu/multi_gpu_round.sh (NCCL test over all of them, leader-mode
#      servers at tp 2 and pp 2, and with 4 GPUs tp 4 and tp 2 x pp 2, against tp 1).
# summary.md, parity.md and parity.json are written straight to the output folder (so that a round cut
# by its call's limit still brings them back); logs go to a scratch folder, and round-logs.tar.gz
# (every log) are copied to $OUT (the device tool's output folder, which takes back at most 8 files)
# or <repo>/out/device-round.
#
#   tests/gpu/device_round.sh                  # needs .device/ and .testdata/gpt2 in the checkout
#
# Environment: INFLIGHT_DEVICE_DIR (.device), INFLIGHT_ROUND_DEADLINE_S (420: background sanitizer
# runs still going then are stopped), INFLIGHT_SANITIZE_TIMEOUT (90 s per binary and tool),
# INFLIGHT_SANITIZE_FILTER_<binary> (test-name filter for that binary under racecheck only),
# INFLIGHT_GPU_TEST_SEED (repeat a seed), INFLIGHT_ROUND_STEPS (default "gpu sanitize parity qparity e2e multigpu"),
# INFLIGHT_ROUND_E2E_TESTS=0 (only the quickstart requests, not the e2e test files),
# INFLIGHT_ROUND_GPU_TESTS (names of the GPU test binaries to run; default all),
# INFLIGHT_ROUND_ATTENTION_VARIANTS=0 (not the paged-attention test's forced-kernel reruns),
# INFLIGHT_ROUND_E2E_FILES (the tests/e2e modules of step 4; default test_llm_ensemble
# test_llm_repository test_every_path), INFLIGHT_GRPC_PY (gRPC stubs for them; default <package>/grpc_py),
# INFLIGHT_PARITY_TIMEOUT (300 s), INFLIGHT_PARITY_CASES (gpu_parity.py's --cases; default all), INFLIGHT_E2E_TIMEOUT (360 s), INFLIGHT_ROUND_STRIP_PROMPT_TABLE_IDS=0
# (leave the filled repositories as prepare_demo.sh made them).
set -u -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pkg=${INFLIGHT_DEVICE_DIR:-$root/.device}
dest=${OUT:-$root/out/device-round}
out=$(mktemp -d /tmp/inflight-round.XXXXXX)
steps=" ${INFLIGHT_ROUND_STEPS:-gpu sanitize parity qparity e2e multigpu} "
deadline=$(( $(date +%s) + ${INFLIGHT_ROUND_DEADLINE_S:-420} ))
san_timeout=${INFLIGHT_SANITIZE_TIMEOUT:-90}
mkdir -p "$dest"
summary="$dest/summary.md"
: >"$summary"
status=0
export INFLIGHT_GPU_TEST_SEED=${INFLIGHT_GPU_TEST_SEED:-20261121}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
export PATH="$PATH:$cuda_home/bin"
# CUDA's libraries for our programs only: torch brings its own, which must win in python.
cuda_libs="$cuda_home/lib64:$cuda_home/lib:$cuda_home/targets/x86_64-linux/lib"
t0=$(date +%s)

say() { echo "$*" | tee -a "$summary"; }
step() { printf '\n== [%3ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
want() { [[ "$steps" == *" $1 "* ]]; }
# A program from the package with our libraries (the wrappers in bin/ do the same).
with_libs() { LD_LIBRARY_PATH="$pkg/lib:${LD_LIBRARY_PATH:-}:$cuda_libs" "$@"; }
# HTTP without curl (the device may lack it): http GET URL | http POST URL BODY; prints the body as it
# arrives (SSE included), exit 1 on a non-2xx status or no connection.
http() {
  python3 - "$@" <<'PY'
import sys, urllib.request
method, url = sys.argv[1], sys.argv[2]
data = sys.argv[3].encode() if len(sys.argv) > 3 else None
try:
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method), timeout=60) as r:
        for line in r:
            sys.stdout.write(line.decode()); sys.stdout.flush()
except Exception as e:
    print(f"http {method} {url}: {e}", file=sys.stderr); sys.exit(1)
PY
}

step "device"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
  nvcc --version | tail -2
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} 2>&1 | tee "$out/device.txt"
# CUDA libraries the toolkit folder lacks (e.g. cuBLAS) may be in the pip wheels torch uses.
missing=$(for f in "$pkg"/libexec/* "$pkg"/backends/*/*.so; do with_libs ldd "$f"; done 2>&1 |
  awk '/not found/ {print $1}' | sort -u)
if [[ -n "$missing" ]]; then
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))')
  for lib in $missing; do
    found=$(find $site /usr/local /usr/lib -name "$lib" 2>/dev/null | head -1)
    echo "not in our lib/ or $cuda_libs: $lib -> ${found:-NOT FOUND}" | tee -a "$out/device.txt"
    [[ -n "$found" ]] && cuda_libs="$cuda_libs:$(dirname "$found")"
  done
fi
export INFLIGHT_CUDA_LIB_DIRS="$cuda_libs"  # read by the wrappers in .device/bin
say "# Device round $(date -u +%F' '%H:%M) UTC"
say ""
say "Device: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

gpu_tests=()
for exe in "$pkg"/libexec/gpu_*_test; do
  # NOTE: the multi-GPU test runs under mpirun (step 5); alone it only reports itself skipped.
  [[ "$(basename "$exe")" == gpu_nccl_collectives_test ]] && continue
  gpu_tests+=("$exe")
done

# ---- 1. compute-sanitizer, in the background while the rest runs
san_pids=()
if want sanitize; then
  step "compute-sanitizer memcheck and racecheck (background, ${san_timeout}s per binary)"
  mkdir -p "$out/sanitizer"
  sanitize_chain() {
    local tool=$1
    for exe in "${gpu_tests[@]}"; do
      local name filter_var filter=() s rc
      name=$(basename "$exe")
      filter_var="INFLIGHT_SANITIZE_FILTER_${name}"
      [[ "$tool" == racecheck && -n "${!filter_var:-}" ]] && filter=("${!filter_var}")
      s=$(date +%s)
      if (( s + 10 > deadline )); then echo "$tool $name skipped: round deadline"; continue; fi
      local budget=$(( deadline - s < san_timeout ? deadline - s : san_timeout ))
      # NOTE: a TMPDIR of its own: the same binary may run at once under the other tool, and a test
      # that writes a seed-named checkpoint would share (and delete) the other's files.
      TMPDIR=$(mktemp -d) with_libs timeout "$budget" compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$exe" "${filter[@]}" >"$out/sanitizer/$tool-$name.log" 2>&1
      rc=$?
      # Which kernels the reports name: ours, or a library's (cuBLASLt's nvjet_* kernels).
      local kernels
      kernels=$(grep -oE '(Race reported between|Invalid|Error:).* at [A-Za-z_][A-Za-z0-9_]*' \
        "$out/sanitizer/$tool-$name.log" | sed -E 's/.* at //' | sort -u | tr '\n' ' ')
      echo "$tool $name rc=$rc $(( $(date +%s) - s ))s $(grep -cE '^\[ OK \]' "$out/sanitizer/$tool-$name.log") ok" \
        "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer/$tool-$name.log" | tail -1 |
          sed 's/^========= //')${kernels:+ in: $kernels}"
    done >"$out/sanitizer/$tool.txt"
  }
  sanitize_chain memcheck &
  san_pids+=($!)
  sanitize_chain racecheck &
  san_pids+=($!)
fi

# ---- 2. GPU tests (while the sanitizers run: they are slow and mostly wait)
if want gpu; then
  step "GPU tests (seed $INFLIGHT_GPU_TEST_SEED)"
  say ""
  say "## GPU tests"
  say ""
  say "| binary | tests passed | seconds | result |"
  say "|---|---|---|---|"
  # One table row: run_test NAME LOG COMMAND... (a test binary, or env VAR=VALUE binary).
  run_test() {
    local name=$1 log=$2 s r passed
    shift 2
    s=$(date +%s)
    if TMPDIR=$(mktemp -d) with_libs timeout 150 "$@" >"$log" 2>&1; then r=pass; else r="FAIL (exit $?)"; status=1; fi
    passed=$(grep -E "tests passed" "$log" | tail -1 | sed -E 's/ tests passed.*//')
    say "| $name | ${passed:-?} | $(( $(date +%s) - s )) | $r |"
    grep -E "^\[ FAIL \]|mismatch|FAILURE" "$log" | head -5
  }
  for exe in "${gpu_tests[@]}"; do
    # shellcheck disable=SC2076
    [[ -n "${INFLIGHT_ROUND_GPU_TESTS:-}" && ! " $INFLIGHT_ROUND_GPU_TESTS " =~ " $(basename "$exe") " ]] && continue
    run_test "$(basename "$exe")" "$out/$(basename "$exe").log" "$exe"
  done
  # As tests/gpu/CMakeLists.txt: decode attention once with each of its Hopper kernels forced, and
  # context attention (fp16 / bf16 and FP8 caches) with the mma.sync kernel forced.
  exe="$pkg/libexec/gpu_paged_attention_test"
  if [[ -x "$exe" && "${INFLIGHT_ROUND_ATTENTION_VARIANTS:-1}" != 0 ]]; then
    for bulk in 0 1; do
      run_test "gpu_paged_attention_test INFLIGHT_DECODE_BULK=$bulk" \
        "$out/gpu_paged_attention_test.bulk$bulk.log" env INFLIGHT_DECODE_BULK=$bulk "$exe"
    done
    run_test "gpu_paged_attention_test INFLIGHT_CONTEXT_WGMMA=0" \
      "$out/gpu_paged_attention_test.mma_sync.log" env INFLIGHT_CONTEXT_WGMMA=0 "$exe"
  fi
  exe="$pkg/libexec/gpu_fp8_kv_test"
  if [[ -x "$exe" && "${INFLIGHT_ROUND_ATTENTION_VARIANTS:-1}" != 0 ]]; then
    run_test "gpu_fp8_kv_test INFLIGHT_CONTEXT_WGMMA=0" \
      "$out/gpu_fp8_kv_test.mma_sync.log" env INFLIGHT_CONTEXT_WGMMA=0 "$exe"
  fi
fi

# ---- 3. parity with Hugging Face
if want parity; then
  step "parity with Hugging Face on the GPU"
  cases=()
  # shellcheck disable=SC2206
  [[ -n "${INFLIGHT_PARITY_CASES:-}" ]] && cases=(--cases $INFLIGHT_PARITY_CASES)
  if timeout "${INFLIGHT_PARITY_TIMEOUT:-300}" python3 "$root/tests/parity/gpu_parity.py" --bin_dir "$pkg/bin" --work /tmp/inflight-parity "${cases[@]}" \
      --out_md "$dest/parity.md" --json "$dest/parity.json" --log "$out/parity-tools.log" \
      >"$out/parity.log" 2>&1; then r=pass; else r=FAIL; status=1; fi
  tail -40 "$out/parity.log"
  say ""
  say "## Parity with Hugging Face: $r"
  say ""
  sed -n '/^| case/,/^$/p' "$dest/parity.md" 2>/dev/null >>"$summary"
fi

# ---- 3b. quantized checkpoint formats against Hugging Face
if want qparity; then
  step "quantized formats against Hugging Face on the GPU"
  qcases=()
  # shellcheck disable=SC2206
  [[ -n "${INFLIGHT_QPARITY_CASES:-}" ]] && qcases=(--cases $INFLIGHT_QPARITY_CASES)
  if timeout "${INFLIGHT_PARITY_TIMEOUT:-300}" python3 "$root/tests/parity/gpu_quant_parity.py" --bin_dir "$pkg/bin" \
      --work /tmp/inflight-qparity "${qcases[@]}" --out_md "$dest/qparity.md" --json "$dest/qparity.json" \
      --log "$out/qparity-tools.log" >"$out/qparity.log" 2>&1; then r=pass; else r=FAIL; status=1; fi
  tail -40 "$out/qparity.log"
  say ""
  say "## Quantized formats against Hugging Face: $r"
  say ""
  sed -n '/^| case/,/^$/p' "$dest/qparity.md" 2>/dev/null >>"$summary"
fi

# ---- 4. the server on a GPU engine
if want e2e; then
  step "server on a GPU engine"
  work=/tmp/inflight-e2e
  tok="$root/.testdata/gpt2"
  say ""
  say "## Server on a GPU engine (bfloat16)"
  say ""
  prep_ok=1
  INFLIGHT_DEMO_DTYPE=bfloat16 "$root/tools/prepare_demo.sh" "$pkg/bin" "$tok" "$work/default" \
    >"$out/prepare_demo.log" 2>&1 || prep_ok=0
  INFLIGHT_DEMO_DTYPE=bfloat16 "$root/tools/prepare_demo.sh" "$pkg/bin" "$tok" "$work/tiny_kv" \
    max_tokens_in_paged_kv_cache:640,batch_scheduler_policy:max_utilization \
    >>"$out/prepare_demo.log" 2>&1 || prep_ok=0
  if [[ $prep_ok == 0 ]]; then
    tail -20 "$out/prepare_demo.log"; say "prepare_demo.sh FAILED"; status=1
  else
    port=8000
    "$pkg/bin/inflight-server" --model-repository="$work/default/triton_model_repo" \
      --backend-directory="$pkg/backends" --http-port=$port --metrics-port=8002 >"$out/server.log" 2>&1 &
    spid=$!
    for _ in $(seq 1 120); do
      http GET "http://localhost:$port/v2/health/ready" >/dev/null 2>&1 && break
      kill -0 "$spid" 2>/dev/null || break
      sleep 0.5
    done
    base="http://localhost:$port/v2/models"
    prompt="What is machine learning?"
    {
      echo "\$ curl -X POST localhost:$port/v2/models/ensemble/generate"
      http POST "$base/ensemble/generate" \
        "{\"text_input\": \"$prompt\", \"max_tokens\": 20, \"bad_words\": \"\", \"stop_words\": \"\"}"
      echo
      echo "\$ curl -N -X POST localhost:$port/v2/models/ensemble/generate_stream"
      http POST "$base/ensemble/generate_stream" \
        "{\"text_input\": \"$prompt\", \"max_tokens\": 8, \"bad_words\": \"\", \"stop_words\": \"\", \"stream\": true}"
      echo
    } >"$out/curl.txt" 2>&1
    # The same through the models one at a time: the ids of the prompt straight to tensorrt_llm.
    ids=$(http POST "$base/preprocessing/generate" "{\"QUERY\": \"$prompt\", \"REQUEST_OUTPUT_LEN\": 16}" |
      python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["INPUT_ID"]))' 2>/dev/null)
    # GPT-2's ids of the prompt, for when the preprocessing model does not answer.
    [[ -z "$ids" ]] && ids="[2061, 318, 4572, 4673, 30]"
    n=$(python3 -c "import json,sys; print(len(json.loads(sys.argv[1])))" "${ids:-[]}")
    {
      echo "\$ curl -X POST localhost:$port/v2/models/tensorrt_llm/generate (ids of \"$prompt\": $ids)"
      http POST "$base/tensorrt_llm/generate" \
        "{\"input_ids\": [$ids], \"input_lengths\": [$n], \"request_output_len\": [16]}"
      echo
      echo "\$ curl -N -X POST localhost:$port/v2/models/tensorrt_llm/generate_stream"
      http POST "$base/tensorrt_llm/generate_stream" \
        "{\"input_ids\": [$ids], \"input_lengths\": [$n], \"request_output_len\": [4], \"streaming\": [true]}"
      echo
    } >"$out/curl_direct.txt" 2>&1
    kill -TERM "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
    cat "$out/curl.txt" "$out/curl_direct.txt"
    runner_line=$(grep -E "CUDA runner|cuda model runner|CPU runner|cpu model runner" "$out/server.log" | head -3)
    echo "$runner_line"
    cuda=no; grep -q "CUDA runner" "$out/server.log" && cuda=yes
    ens=FAIL
    grep -q '"text_output"' "$out/curl.txt" && [[ $(grep -c '^data: {"[^e]' "$out/curl.txt") -ge 2 ]] && ens=pass
    direct=FAIL
    grep -q '"output_ids"' "$out/curl_direct.txt" && [[ $(grep -c '^data: {"[^e]' "$out/curl_direct.txt") -ge 2 ]] && direct=pass
    [[ $ens == pass && $direct == pass && $cuda == yes ]] || status=1
    say "server log names the CUDA runner: $cuda; ensemble generate + generate_stream: $ens;" \
      "tensorrt_llm generate + generate_stream on the ids: $direct"
    say ""
    say '```'
    head -c 1200 "$out/curl.txt" >>"$summary"
    head -c 1200 "$out/curl_direct.txt" >>"$summary"
    echo "$runner_line" >>"$summary"
    say '```'

    step "e2e tests against the GPU repositories"
    # LOGPROB_TOL: bf16 rounding shifts with batch and resume-by-prefill; the judge lets tokens part only at a near-tie.
    if [[ "${INFLIGHT_ROUND_E2E_TESTS:-1}" == 0 ]]; then
      r="skipped (INFLIGHT_ROUND_E2E_TESTS=0)"; : >"$out/e2e.log"
    elif (cd "$root/tests/e2e" &&
        INFLIGHT_SERVER="$pkg/bin/inflight-server" INFLIGHT_BACKEND_DIR="$pkg/backends" \
        INFLIGHT_LLM_REPO="$work/default/triton_model_repo" \
        INFLIGHT_LLM_TINY_KV_REPO="$work/tiny_kv/triton_model_repo" \
        INFLIGHT_LLM_ENGINE="$work/default/engine" INFLIGHT_SOURCE_DIR="$root" \
        INFLIGHT_GRPC_PY="${INFLIGHT_GRPC_PY:-$pkg/grpc_py}" \
        PYTHONDONTWRITEBYTECODE=1 INFLIGHT_E2E_LOGPROB_TOL=0.05 timeout "${INFLIGHT_E2E_TIMEOUT:-360}" \
        python3 -m unittest -v ${INFLIGHT_ROUND_E2E_FILES:-test_llm_ensemble test_llm_repository test_every_path}) \
        >"$out/e2e.log" 2>&1; then r=pass; else r=FAIL; status=1; fi
    tail -30 "$out/e2e.log"
    say ""
    say "e2e (${INFLIGHT_ROUND_E2E_FILES:-test_llm_ensemble test_llm_repository test_every_path}): $r: $(grep -E '^(Ran|OK|FAILED)' "$out/e2e.log" | tr '\n' ' ')"
    grep -E '^(FAIL|ERROR): ' "$out/e2e.log" | sed 's/^/- /' >>"$summary"
    grep -E '^(AssertionError|RuntimeError)' "$out/e2e.log" | cut -c1-300 | sed 's/^/  - /' >>"$summary"
  fi
fi

# ---- 4b. a Hugging Face folder as engine_dir, served on the GPU
if want hf_folder; then
  step "a Hugging Face folder as engine_dir"
  say ""
  if INFLIGHT_GRPC_PY="" timeout 180 python3 "$root/tests/gpu/hf_folder_check.py" --package "$pkg" --work /tmp/inflight-hf-folder \
      >"$out/hf_folder.md" 2>"$out/hf_folder.err"; then r=pass; else r=FAIL; status=1; fi
  tail -20 "$out/hf_folder.err"
  say "## HF folder as engine_dir: $r"
  cat "$out/hf_folder.md" >>"$summary"
fi

# ---- 5. several GPUs
if want multigpu; then
  gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
  if (( gpus >= 2 )); then
    step "multi-GPU: NCCL test and leader-mode servers"
    say ""
    INFLIGHT_DEVICE_DIR="$pkg" bash "$root/tests/gpu/multi_gpu_round.sh" "$out/multi_gpu" \
      >"$dest/multi_gpu.md" 2>"$out/multi_gpu.err" || status=1
    cat "$dest/multi_gpu.md" "$out/multi_gpu.err" | tail -40
    cat "$dest/multi_gpu.md" >>"$summary"
  else
    say ""
    say "## Multi-GPU: skipped ($gpus GPU)"
  fi
fi

# ---- sanitizer results
if want sanitize; then
  step "waiting for the sanitizer runs"
  for pid in "${san_pids[@]}"; do wait "$pid"; done
  say ""
  say "## compute-sanitizer (timeout ${san_timeout}s per binary and tool)"
  say ""
  say "| tool | binary | exit | seconds | tests ok | summary |"
  say "|---|---|---|---|---|---|"
  for tool in memcheck racecheck; do
    while read -r _ name rc secs nok _ rest; do
      say "| $tool | $name | ${rc#rc=} | ${secs%s} | $nok | $rest |"
      [[ "$rc" == rc=0 ]] || status=1
    done <"$out/sanitizer/$tool.txt"
  done
fi

say ""
say "Round took $(( $(date +%s) - t0 )) s; exit $status"
echo
cat "$summary"
tar -czf "$dest/round-logs.tar.gz" -C "$out" .
exit $status
