#!/usr/bin/env bash
# The multi-GPU part of a device round (tests/gpu/device_round.sh runs it as the step "multigpu" on a
# machine with 2 or more GPUs), with the package of tests/gpu/package_for_device.sh and the Open MPI
# it carries:
#   1. gpu_nccl_collectives_test under mpirun -n 2: NCCL and CUDA IPC all-reduce / gather / stage
#      hand-overs on device buffers, the CUDA runner at tp 2 and pp 2 (micro-batches in flight)
#      against the CPU runner's whole engine; then inflight-bench-allreduce (NCCL vs IPC by size);
#   2. the server in leader mode through tools/launch_server.py --world_size 2 on the demo model's
#      engine built at tp 2 and at pp 2: greedy answers of tensorrt_llm (token ids) and of the
#      ensemble (text), compared with the same engine built at tp 1 served by one process.
# Prints a markdown section on stdout; logs go to the folder given.
#
#   tests/gpu/multi_gpu_round.sh <log_dir>      # INFLIGHT_DEVICE_DIR (.device), as device_round.sh
#
# Environment: INFLIGHT_MULTI_GPU_STEPS (default "nccl allreduce server"), INFLIGHT_CUDA_LIB_DIRS (CUDA's and
# NCCL's library folders for our programs, as device_round.sh sets it).
set -u -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pkg=${INFLIGHT_DEVICE_DIR:-$root/.device}
logs=${1:?log folder}
steps=" ${INFLIGHT_MULTI_GPU_STEPS:-nccl allreduce server} "
mkdir -p "$logs"
status=0
# shellcheck source=tests/gpu/openmpi_env.sh
source "$root/tests/gpu/openmpi_env.sh" "$pkg"
want() { [[ "$steps" == *" $1 "* ]]; }

echo "## Multi-GPU (2 GPUs, Open MPI $(mpirun --version 2>/dev/null | head -1 | grep -oE '[0-9.]+$'))"
echo

if want nccl; then
  s=$(date +%s)
  if timeout 150 mpirun -n 2 "$pkg/bin/gpu_nccl_collectives_test" >"$logs/nccl_collectives.log" 2>&1; then
    r=pass
  else
    r="FAIL (exit $?)"; status=1
  fi
  echo "- gpu_nccl_collectives_test, mpirun -n 2: $r in $(( $(date +%s) - s )) s;" \
    "$(grep -cE '^\[ +OK \]' "$logs/nccl_collectives.log") OK lines (both ranks)"
  grep -E '^\[  FAILED|Failure|error|Error' "$logs/nccl_collectives.log" | head -8 | sed 's/^/  - /'
fi

if want allreduce && [[ -x "$pkg/bin/inflight-bench-allreduce" ]]; then
  echo
  if ! timeout 90 mpirun -n 2 "$pkg/bin/inflight-bench-allreduce" --replays 100 >"$logs/allreduce-bench.txt" 2>&1; then
    echo "- inflight-bench-allreduce FAILED (exit $?)"; status=1
  fi
  grep -v "pcompress\|dlopen\|Perhaps" "$logs/allreduce-bench.txt"
fi

# One answer per prompt from a running server: ids from tensorrt_llm, text from the ensemble.
ask() {
  python3 - "$1" <<'PY'
import json, sys, urllib.request
port = sys.argv[1]
def post(model, body):
    req = urllib.request.Request(f"http://localhost:{port}/v2/models/{model}/generate",
                                 data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=45) as r:
        return json.load(r)
prompts = [[2061, 318, 4572, 4673, 30], [464, 3139, 286], [40, 588, 284, 467, 257, 1621, 546],
           list(range(100, 160))]
def flat(x):
    return [v for e in x for v in flat(e)] if isinstance(x, list) else [x]
out = {"ids": [], "text": []}
for p in prompts:
    a = post("tensorrt_llm", {"input_ids": [p], "input_lengths": [len(p)], "request_output_len": [32]})
    out["ids"].append(flat(a["output_ids"]))
for q in ["What is machine learning?", "The quick brown fox"]:
    a = post("ensemble", {"text_input": q, "max_tokens": 24, "bad_words": "", "stop_words": ""})
    out["text"].append(a["text_output"])
print(json.dumps(out))
PY
}

# Starts the launcher on a repository, waits for ready, asks, stops it. serve NAME REPO WORLD
serve() {
  local name=$1 repo=$2 world=$3 port=8000 ok=0
  local args=(--world_size "$world" --model_repo "$repo" --tritonserver "$pkg/bin/inflight-server"
    --backend_directory "$pkg/backends" --http_port $port --grpc_port 8001 --metrics_port 8002 -f)
  [[ "$world" == 1 ]] && args+=(--no-mpi)
  python3 "$root/tools/launch_server.py" "${args[@]}" --wait >"$logs/server-$name.log" 2>&1 &
  local lpid=$!
  for _ in $(seq 1 240); do
    if python3 -c "import urllib.request as u; u.urlopen('http://localhost:$port/v2/health/ready', timeout=2)" 2>/dev/null; then
      ok=1; break
    fi
    kill -0 "$lpid" 2>/dev/null || break
    sleep 0.5
  done
  if [[ $ok == 1 ]]; then
    ask $port >"$logs/answers-$name.json" 2>"$logs/ask-$name.log" || ok=0
  fi
  pkill -TERM -f "inflight-server" 2>/dev/null
  for _ in $(seq 1 60); do kill -0 "$lpid" 2>/dev/null || break; sleep 0.5; done
  kill -KILL "$lpid" 2>/dev/null; pkill -KILL -f "libexec/inflight-server" 2>/dev/null
  wait "$lpid" 2>/dev/null
  [[ $ok == 1 ]]
}

if want server; then
  work=/tmp/inflight-multi-gpu
  INFLIGHT_DEMO_DTYPE=bfloat16 "$root/tools/prepare_demo.sh" "$pkg/bin" "$root/.testdata/gpt2" "$work/tp1" \
    >"$logs/prepare_demo.log" 2>&1 || { echo "- prepare_demo.sh FAILED"; status=1; }
  declare -A served
  if serve tp1 "$work/tp1/triton_model_repo" 1; then served[tp1]=1; fi
  for shape in "tp2:--tp_size 2" "pp2:--pp_size 2"; do
    name=${shape%%:*}
    # The same checkpoint, split; the repository is tp1's with engine_dir pointing at the split engine.
    # shellcheck disable=SC2086
    "$pkg/bin/inflight-build" --checkpoint_dir "$work/tp1/gpt2-random" --output_dir "$work/engine-$name" \
      --dtype bfloat16 --max_batch_size 64 --max_input_len 512 --max_seq_len 1024 --tokens_per_block 64 \
      ${shape#*:} >"$logs/build-$name.log" 2>&1 || { echo "- inflight-build $name FAILED"; status=1; continue; }
    rm -rf "$work/repo-$name" && cp -r "$work/tp1/triton_model_repo" "$work/repo-$name"
    sed -i "s#$work/tp1/engine#$work/engine-$name#" "$work/repo-$name/tensorrt_llm/config.pbtxt"
    if serve "$name" "$work/repo-$name" 2; then served[$name]=1; fi
  done
  echo
  echo "| engine | ranks | served | tensorrt_llm ids equal tp1's (4 prompts x 32) | ensemble text equal tp1's (2 prompts) |"
  echo "|---|---|---|---|---|"
  for name in tp1 tp2 pp2; do
    ranks=2; [[ $name == tp1 ]] && ranks=1
    if [[ -z "${served[$name]:-}" ]]; then
      echo "| $name | $ranks | FAIL | | |"; status=1
      grep -iE "error|refus|fail" "$logs/server-$name.log" | head -5 | sed 's/^/  - /'
      continue
    fi
    [[ $name == tp1 ]] && { echo "| tp1 | 1 | yes | (reference) | (reference) |"; continue; }
    cmp=$(python3 - "$logs/answers-tp1.json" "$logs/answers-$name.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def lead(x, y):
    n = 0
    for u, v in zip(x, y):
        if u != v: break
        n += 1
    return n
ids = [lead(x, y) for x, y in zip(a["ids"], b["ids"])]
texts = sum(x == y for x, y in zip(a["text"], b["text"]))
# bf16 partial sums in another order may part the tokens at a near-tie: leading tokens shown.
print(f"{sum(x == y for x, y in zip(a['ids'], b['ids']))}/4 whole (leading equal: {ids})|{texts}/2")
PY
)
    echo "| $name | 2 | yes | ${cmp%%|*} | ${cmp#*|} |"
  done
  echo
  echo "Answers (tp1): $(head -c 400 "$logs/answers-tp1.json" 2>/dev/null)"
fi
exit $status
