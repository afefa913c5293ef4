#!/usr/bin/env bash
# The multi-GPU part of a device round (tests/gpu/device_round.sh runs it as the step "multigpu" on a
# machine with 2 or more GPUs), with the package of tests/gpu/package_for_device.sh and the Open MPI
# it carries. N is the machine's GPU count:
#   1. gpu_nccl_collectives_test under mpirun -n N: NCCL and CUDA IPC all-reduce / gather / stage
#      hand-overs on device buffers, the CUDA runner split over the ranks (tp, pp with micro-batches
#      in flight) against the CPU runner's whole engine; then inflight-bench-allreduce (NCCL vs IPC
#      by size) on 2 GPUs, and on 4 when there are 4;
#   2. the server in leader mode through tools/launch_server.py --world_size on the demo model's
#      engine built at tp 2 and at pp 2 (and, with 4 GPUs, tp 4 and tp 2 x pp 2), and in orchestrator
#      mode (--multi-model: one process that spawns its two workers) at tp 2: greedy answers of
#      tensorrt_llm (token ids) and of the ensemble (text), compared with the same engine built at
#      tp 1 served by one process; then (step fault) that tp 2 server's rank 1 killed with SIGKILL
#      while clients ask: the job must end within seconds and no client may hang;
#   3. (step throughput, not in the default steps) offline throughput of a random Llama-3.1-8B bf16
#      engine (inflight-build --random_preset, no checkpoint) in each layout of
#      INFLIGHT_THROUGHPUT_LAYOUTS (tp 1 on one GPU, tp 2 on two, ...), each served by the launcher
#      and driven by tools/benchmark_core_model.py with all requests at once (or
#      INFLIGHT_THROUGHPUT_CONCURRENCY at a time), token ids over HTTP; a layout's scaling efficiency
#      is its rate / (its GPUs x tp 1's).
# Prints a markdown section on stdout; logs go to the folder given.
#
#   tests/gpu/multi_gpu_round.sh <log_dir>      # INFLIGHT_DEVICE_DIR (.device), as device_round.sh
#
# Environment: INFLIGHT_MULTI_GPU_STEPS (default "nccl allreduce server fault"; "throughput" adds step 3;
# "fault" kills rank 1 of the server step's tp 2 server while clients ask, INFLIGHT_FAULT_BOUND_S),
# INFLIGHT_CUDA_LIB_DIRS (CUDA's and NCCL's library folders for our programs, as device_round.sh sets
# it), INFLIGHT_THROUGHPUT_PRESET (llama-3.1-8b; tiny for a dry run on a CPU),
# INFLIGHT_THROUGHPUT_SHAPES (128/128,2048/128: input/output tokens, each with :N for its own request
# count, e.g. 128/128:30000), INFLIGHT_THROUGHPUT_REQUESTS (1000 per shape without :N),
# INFLIGHT_THROUGHPUT_CONCURRENCY (default all of them at once; 1 measures batch-1 decode: 1000 / output
# tok/s is the step time, less the prompt's share), INFLIGHT_THROUGHPUT_DIR (where engines are written;
# default the roomier of /dev/shm and /tmp; each is removed after its run), INFLIGHT_THROUGHPUT_LAYOUTS
# ("tp1 tp2": the layouts measured, each tpT or tpTppP, e.g. "tp1 tp2 tp4 tp2pp2"; INFLIGHT_THROUGHPUT_TP="1 2"
# is the older spelling of "tp1 tp2"), INFLIGHT_MULTI_GPU_COUNT (the GPUs to use; default all),
# INFLIGHT_THROUGHPUT_WEIGHTS_AT_LOAD (1: inflight-build --weights_at_load, each rank makes its
# random weights in memory as it loads; 0: rank files written first),
# INFLIGHT_THROUGHPUT_MAX_BATCH_SIZE (256: the engines' and the model's), INFLIGHT_THROUGHPUT_QUANT
# ("": inflight-build's quantization flags, e.g. "--qformat fp8 --kv_cache_dtype fp8"),
# INFLIGHT_THROUGHPUT_CALIBRATION (NxL, with --qformat fp8 in INFLIGHT_THROUGHPUT_QUANT: --calib_dataset of
# N prompts of L random ids, bench/write_calibration_set.py, the pass split over the layout's ranks by
# mpirun -n tp*pp inflight-build; weights written, not made at load),
# INFLIGHT_ACTION_TIMEOUT_S (300: how long one server's requests may take before its ranks' stacks are
# dumped and it is stopped), INFLIGHT_STEP_PROFILE (N: the executor logs where a step's time goes every N
# steps, src/executor/step_profile.h; the throughput step prints rank 0's last summary),
# INFLIGHT_RANK0_NCU (SKIP:COUNT: a kernel profile of rank 0 after each throughput run of more than one
# rank; see profile_rank0),
# INFLIGHT_RANK0_NCU_SHAPE (128/128:512), NCU (ncu on PATH, else Nsight Compute's default install).
set -u -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pkg=${INFLIGHT_DEVICE_DIR:-$root/.device}
logs=${1:?log folder}
steps=" ${INFLIGHT_MULTI_GPU_STEPS:-nccl allreduce server fault} "
action_timeout=${INFLIGHT_ACTION_TIMEOUT_S:-300}
mkdir -p "$logs"
status=0
# shellcheck source=tests/gpu/openmpi_env.sh
source "$root/tests/gpu/openmpi_env.sh" "$pkg"
want() { [[ "$steps" == *" $1 "* ]]; }
# A layout's tp and pp sizes (tp2pp2 -> "2 2", pp2 -> "1 2"), and its ranks (GPUs).
layout_sizes() {
  local tp=1 pp=1
  [[ $1 =~ tp([0-9]+) ]] && tp=${BASH_REMATCH[1]}
  [[ $1 =~ pp([0-9]+) ]] && pp=${BASH_REMATCH[1]}
  echo "$tp $pp"
}
layout_ranks() {
  local tp pp
  read -r tp pp <<<"$(layout_sizes "$1")"
  echo $((tp * pp))
}
gpus=${INFLIGHT_MULTI_GPU_COUNT:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)}
((gpus >= 2)) || gpus=2 # a dry run on a machine without GPUs plays two

echo "## Multi-GPU ($gpus GPUs, Open MPI $(mpirun --version 2>/dev/null | head -1 | grep -oE '[0-9.]+$'))"
echo

if want nccl; then
  s=$(date +%s)
  if timeout 240 mpirun -n "$gpus" "$pkg/bin/gpu_nccl_collectives_test" --gtest_color=no >"$logs/nccl_collectives.log" 2>&1; then
    r=pass
  else
    r="FAIL (exit $?)"; status=1
  fi
  echo "- gpu_nccl_collectives_test, mpirun -n $gpus: $r in $(( $(date +%s) - s )) s;" \
    "$(grep -cE '^\[ +OK \]' "$logs/nccl_collectives.log") OK lines (all ranks)"
  grep -E '^\[  FAILED|Failure|error|Error' "$logs/nccl_collectives.log" | head -8 | sed 's/^/  - /'
fi

if want allreduce && [[ -x "$pkg/bin/inflight-bench-allreduce" ]]; then
  for n in 2 4 8; do
    ((n <= gpus)) || break
    echo
    if ! timeout 90 mpirun -n $n "$pkg/bin/inflight-bench-allreduce" --replays 100 >"$logs/allreduce-bench-$n.txt" 2>&1; then
      echo "- inflight-bench-allreduce on $n GPUs FAILED (exit $?)"; status=1
    fi
    grep -v "pcompress\|dlopen\|Perhaps" "$logs/allreduce-bench-$n.txt"
  done
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

# Host stacks of every server rank and the kernels each GPU is running (cuda-gdb attaches to a
# running process on the device machines), for a server that stopped answering.
dump_stacks() {
  local pid
  for pid in $(pgrep -f "libexec/inflight-(server|executor-worker)"); do
    echo "=== pid $pid: $(tr '\0' ' ' </proc/$pid/cmdline | cut -c1-200)"
    if command -v cuda-gdb >/dev/null; then
      timeout 60 cuda-gdb -q -batch -p "$pid" -ex "info cuda kernels" -ex "thread apply all bt 16" 2>&1 |
        grep -vE "^\[New LWP|^\[Thread debugging|^Using host libthread" | head -400
    else
      cat "/proc/$pid/task/"*/stack 2>/dev/null | head -100
    fi
  done
}

# Starts the launcher on a repository, waits for ready, runs ACTION (a function taking the port and the
# run's name; default ask_into) for at most $action_timeout seconds (then dumps the ranks' stacks),
# stops it. serve NAME REPO WORLD [ACTION [launcher args...]]
ask_into() { ask "$1" >"$logs/answers-$2.json" 2>"$logs/ask-$2.log"; }
serve() {
  local name=$1 repo=$2 world=$3 action=${4:-ask_into} port=8000 ok=0
  local args=(--world_size "$world" --model_repo "$repo" --tritonserver "$pkg/bin/inflight-server"
    --backend_directory "$pkg/backends" --http_port "$port" --grpc_port 8001 --metrics_port 8002 -f)
  [[ "$world" == 1 && $# -le 4 ]] && args+=(--no-mpi)
  args+=("${@:5}")
  if [[ -n "${rank0_wrap:-}" ]]; then
    # Rank 0 under a wrapper (a profiler): the launcher's command line with the wrapper put in
    # front of rank 0's program (after mpirun's first "-n 1", or in front of all without mpirun).
    python3 - "$(python3 "$root/tools/launch_server.py" "${args[@]}" --print-command)" "$rank0_wrap" \
      >"$logs/command-$name.txt" <<'PY' || return 1
import shlex, sys
cmd, wrap = shlex.split(sys.argv[1]), shlex.split(sys.argv[2])
at = cmd.index("-n") + 2 if cmd[0] == "mpirun" else 0
print(shlex.join(cmd[:at] + wrap + cmd[at:]))
PY
    bash "$logs/command-$name.txt" >"$logs/server-$name.log" 2>&1 &
  else
    python3 "$root/tools/launch_server.py" "${args[@]}" --wait >"$logs/server-$name.log" 2>&1 &
  fi
  local lpid=$!
  for _ in $(seq 1 600); do
    if python3 -c "import urllib.request as u; u.urlopen('http://localhost:$port/v2/health/ready', timeout=2)" 2>/dev/null; then
      ok=1; break
    fi
    kill -0 "$lpid" 2>/dev/null || break
    sleep 0.5
  done
  if [[ $ok == 1 ]]; then
    # The action runs in the background so that a stuck server can be looked at before it is killed.
    "$action" $port "$name" &
    local apid=$! waited=0
    while kill -0 "$apid" 2>/dev/null && (( waited < action_timeout * 2 )); do sleep 0.5; waited=$(( waited + 1 )); done
    if kill -0 "$apid" 2>/dev/null; then
      echo "- $name: no answer within ${action_timeout} s; the ranks' stacks are in stacks-$name.txt"
      dump_stacks >"$logs/stacks-$name.txt" 2>&1
      pkill -TERM -P "$apid" 2>/dev/null; kill -TERM "$apid" 2>/dev/null
      ok=0
    fi
    wait "$apid" || ok=0
  fi
  # By process name when wrapped, so that the wrapper (whose command line names the server) is not
  # stopped before its program: a profiler writes its report after the program exits.
  if [[ -n "${rank0_wrap:-}" ]]; then pkill -TERM -x inflight-server; else pkill -TERM -f "inflight-server"; fi 2>/dev/null
  for _ in $(seq 1 60); do kill -0 "$lpid" 2>/dev/null || break; sleep 0.5; done
  kill -KILL "$lpid" 2>/dev/null; pkill -KILL -f "libexec/inflight-server" 2>/dev/null
  pkill -KILL -f "libexec/inflight-executor" 2>/dev/null
  wait "$lpid" 2>/dev/null
  [[ $ok == 1 ]]
}

if want server; then
  work=/tmp/inflight-multi-gpu
  INFLIGHT_DEMO_DTYPE=bfloat16 "$root/tools/prepare_demo.sh" "$pkg/bin" "$root/.testdata/gpt2" "$work/tp1" \
    >"$logs/prepare_demo.log" 2>&1 || { echo "- prepare_demo.sh FAILED: $(tail -1 "$logs/prepare_demo.log")"; status=1; }
  declare -A served ranks_of=([tp1]=1 [orch]="1 + 2 spawned")
  if serve tp1 "$work/tp1/triton_model_repo" 1; then served[tp1]=1; fi
  layouts=("tp2:--tp_size 2" "pp2:--pp_size 2")
  ((gpus >= 4)) && layouts+=("tp4:--tp_size 4" "tp2pp2:--tp_size 2 --pp_size 2")
  names=(tp1)
  for shape in "${layouts[@]}"; do
    name=${shape%%:*}
    names+=("$name")
    ranks_of[$name]=$(layout_ranks "$name")
    # The same checkpoint, split; the repository is tp1's with engine_dir pointing at the split engine.
    # shellcheck disable=SC2086
    "$pkg/bin/inflight-build" --checkpoint_dir "$work/tp1/gpt2-random" --output_dir "$work/engine-$name" \
      --dtype bfloat16 --max_batch_size 64 --max_input_len 512 --max_seq_len 1024 --tokens_per_block 64 \
      ${shape#*:} >"$logs/build-$name.log" 2>&1 || { echo "- inflight-build $name FAILED"; status=1; continue; }
    rm -rf "$work/repo-$name" && cp -r "$work/tp1/triton_model_repo" "$work/repo-$name"
    sed -i "s#$work/tp1/engine#$work/engine-$name#" "$work/repo-$name/tensorrt_llm/config.pbtxt"
    if serve "$name" "$work/repo-$name" "${ranks_of[$name]}"; then served[$name]=1; fi
  done
  names+=(orch)
  # Orchestrator mode: one server process (mpirun -n 1) whose backend spawns the tp 2 engine's workers.
  if [[ -d "$work/repo-tp2" ]] && serve orch "$work/repo-tp2" 1 ask_into --multi-model; then
    served[orch]=1
  fi
  echo
  echo "| engine | ranks | served | tensorrt_llm ids equal tp1's (4 prompts x 32) | ensemble text equal tp1's (2 prompts) |"
  echo "|---|---|---|---|---|"
  for name in "${names[@]}"; do
    ranks=${ranks_of[$name]}
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
    echo "| $name | $ranks | yes | ${cmp%%|*} | ${cmp#*|} |"
  done
  echo
  echo "Answers (tp1): $(head -c 400 "$logs/answers-tp1.json" 2>/dev/null)"
fi

# Rank death on the GPUs (issue 23's fault rule; tests/e2e/test_mpi_leader.py is the CPU twin): the
# tp 2 engine served by the launcher with requests in flight, rank 1 killed with SIGKILL; the job
# must end within $fault_bound s (no rank left spinning in a collective) and the clients must get an
# answer or an error, not hang. fault_kill NAME REPO
fault_bound=${INFLIGHT_FAULT_BOUND_S:-30}
fault_kill() {
  local name=$1 repo=$2 port=8000 lpid cpid pid rank1="" killed ended code
  python3 "$root/tools/launch_server.py" --world_size 2 --model_repo "$repo" --tritonserver "$pkg/bin/inflight-server" \
    --backend_directory "$pkg/backends" --http_port $port --grpc_port 8001 --metrics_port 8002 -f --wait \
    >"$logs/server-$name.log" 2>&1 &
  lpid=$!
  for _ in $(seq 1 600); do
    python3 -c "import urllib.request as u; u.urlopen('http://localhost:$port/v2/health/ready', timeout=2)" 2>/dev/null && break
    kill -0 "$lpid" 2>/dev/null || { echo "- $name: the server did not start"; return 1; }
    sleep 0.5
  done
  # Four clients asking for long answers, one after another, until the server goes.
  python3 - "$port" >"$logs/clients-$name.log" 2>&1 <<'PY' &
import json, sys, threading, urllib.request
port = sys.argv[1]
outcomes = []
def client(i):
    answered = 0
    while True:
        body = {"input_ids": [list(range(100 + i, 160 + i))], "input_lengths": [60], "request_output_len": [900]}
        req = urllib.request.Request(f"http://localhost:{port}/v2/models/tensorrt_llm/generate",
                                     data=json.dumps(body).encode(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                json.load(r)
            answered += 1
        except Exception as e:  # the end we wait for: refused, reset or an error status
            outcomes.append(f"client {i}: {answered} answered, then {type(e).__name__}: {str(e)[:80]}")
            return
threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("\n".join(outcomes))
PY
  cpid=$!
  sleep 3
  for pid in $(pgrep -f "libexec/inflight-server"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && rank1=$pid
  done
  if [[ -z "$rank1" ]]; then
    echo "- $name: no rank 1 process found"; kill -KILL "$lpid" "$cpid" 2>/dev/null; return 1
  fi
  killed=$(date +%s.%N)
  kill -KILL "$rank1"
  for _ in $(seq 1 $((fault_bound * 10))); do kill -0 "$lpid" 2>/dev/null || break; sleep 0.1; done
  ended=$(date +%s.%N)
  if kill -0 "$lpid" 2>/dev/null; then
    echo "- $name: FAIL, the job still runs ${fault_bound} s after rank 1 (pid $rank1) was killed; stacks in stacks-$name.txt"
    dump_stacks >"$logs/stacks-$name.txt" 2>&1
    kill -KILL "$lpid" 2>/dev/null; pkill -KILL -f "libexec/inflight-server" 2>/dev/null
    wait "$lpid" 2>/dev/null; wait "$cpid" 2>/dev/null
    return 1
  fi
  wait "$lpid"; code=$?
  # The clients' timeout is 60 s: one still waiting then would be a hang.
  if ! timeout 75 tail --pid="$cpid" -f /dev/null; then
    echo "- $name: FAIL, a client still waits 75 s after the kill"; kill -KILL "$cpid"; return 1
  fi
  echo "- $name: rank 1 killed with SIGKILL while 4 clients were asking; the job ended" \
    "$(awk -v a="$killed" -v b="$ended" 'BEGIN { printf "%.1f", b - a }') s later, exit $code" \
    "(bound $fault_bound s); clients: $(sed 's/$/;/' "$logs/clients-$name.log" | tr '\n' ' ' | cut -c1-400)"
  ((code != 0)) || { echo "  - FAIL: exit 0 after a rank died"; return 1; }
}

if want fault; then
  [[ -d /tmp/inflight-multi-gpu/repo-tp2 ]] ||
    { echo "- fault: needs the server step's tp 2 repository (INFLIGHT_MULTI_GPU_STEPS with server)"; status=1; }
  [[ -d /tmp/inflight-multi-gpu/repo-tp2 ]] && { fault_kill fault-tp2 /tmp/inflight-multi-gpu/repo-tp2 || status=1; }
fi

# tools/benchmark_core_model.py offline on the served tensorrt_llm, one run per shape in $shapes;
# prints "shape tok/s" lines into $logs/throughput-NAME.txt.
# A shape entry: "in/out", or "in/out:requests" (TensorRT-LLM's tables use a count per shape); sets
# in, out and requests.
shape_parts() {
  local s=${1%%:*}
  in=${s%/*}; out=${s#*/}; requests=$tput_requests
  [[ "$1" == *:* ]] && requests=${1#*:}
}
bench_into() {
  local port=$1 name=$2 shape in out requests
  : >"$logs/throughput-$name.txt"
  for shape in ${tput_shapes//,/ }; do
    shape_parts "$shape"
    python3 "$root/tools/benchmark_core_model.py" -u "localhost:$port" --max-input-len "$in" \
      --num-requests "$requests" --concurrency "${tput_concurrency:-$requests}" --warmup-requests "${tput_warmup:-8}" \
      --vocab-size "$tput_vocab" --exclude-input-in-output token-norm-dist --input-mean "$in" \
      --input-stdev 0 --output-mean "$out" --output-stdev 0 >"$logs/bench-$name-${in}-${out}.log" 2>&1 ||
      return 1
    echo "$shape $(awk -F'|' '/OP tokens\/sec/ {gsub(/ /, "", $3); print $3}' "$logs/bench-$name-${in}-${out}.log")" \
      >>"$logs/throughput-$name.txt"
  done
}

# With INFLIGHT_RANK0_NCU=SKIP:COUNT: the engine served once more with rank 0 under Nsight Compute
# (timing only: gpu__time_duration; clocks and caches left alone; CUDA graphs off so that each kernel
# is its own launch), which skips SKIP kernel launches and times COUNT; the load is
# INFLIGHT_RANK0_NCU_SHAPE (128/128:512) without warm-up requests; bench/ncu_step_table.py prints
# rank 0's steps by kernel. The other ranks run unprofiled and meet rank 0 at each all-reduce early
# or late, so rank 0's all-reduce times are not those of a normal run (on 2 x H200 they read ~180
# us each where ~10-45 is usual): read the other kernels. A 70B-shaped step at tp 2 is ~1,300
# launches. profile_rank0 LAYOUT RANKS ENGINE REPO
profile_rank0() {
  local layout=$1 ranks=$2 engine=$3 repo=$4 nskip ncount ncu layers ok=0
  IFS=: read -r nskip ncount <<<"$INFLIGHT_RANK0_NCU"
  ncu=${NCU:-$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)}
  [[ -x "$ncu" ]] || { echo "- no ncu found (set NCU)"; return 1; }
  layers=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['num_layers'])" "$engine/config.json")
  local s csv="$logs/ncu-$layout.csv"
  s=$(date +%s)
  (
    export INFLIGHT_CUDA_GRAPHS=0
    tput_shapes=${INFLIGHT_RANK0_NCU_SHAPE:-128/128:512}
    # No warm-up requests: one at a time they are hundreds of batch-1 steps, each launch slowed by
    # the profiler, before the load SKIP is counted into.
    tput_warmup=0
    rank0_wrap="$ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
--page raw --launch-skip $nskip --launch-count $ncount --log-file $csv"
    serve "ncu-$layout" "$repo" "$ranks" bench_into
  ) && ok=1
  echo "- $layout, rank 0 under ncu (${INFLIGHT_RANK0_NCU_SHAPE:-128/128:512}, launches $nskip + $ncount):" \
    "$( ((ok)) && echo served || echo FAILED) in $(( $(date +%s) - s )) s"
  echo
  python3 "$root/bench/ncu_step_table.py" "$csv" --layers "$layers" --top 20 | tee "$logs/ncu-steps-$layout.md" ||
    return 1
  echo
  ((ok))
}

if want throughput; then
  preset=${INFLIGHT_THROUGHPUT_PRESET:-llama-3.1-8b}
  tput_shapes=${INFLIGHT_THROUGHPUT_SHAPES:-128/128,2048/128}
  tput_requests=${INFLIGHT_THROUGHPUT_REQUESTS:-1000}
  tput_concurrency=${INFLIGHT_THROUGHPUT_CONCURRENCY:-}
  tput_dir=${INFLIGHT_THROUGHPUT_DIR:-}
  if [[ -z "$tput_dir" ]]; then
    tput_dir=/tmp
    shm=$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $4}')
    (( ${shm:-0} > $(df -Pk /tmp | awk 'NR==2 {print $4}') )) && tput_dir=/dev/shm
  fi
  max_in=0; max_seq=0
  for shape in ${tput_shapes//,/ }; do
    shape_parts "$shape"
    (( in > max_in )) && max_in=$in
    (( in + out > max_seq )) && max_seq=$(( in + out ))
  done
  echo
  tput_batch=${INFLIGHT_THROUGHPUT_MAX_BATCH_SIZE:-256}
  tput_quant=${INFLIGHT_THROUGHPUT_QUANT:-}
  # Weights made by each rank as it loads (config.json alone on disk), unless told to write files.
  at_load=--weights_at_load
  [[ "${INFLIGHT_THROUGHPUT_WEIGHTS_AT_LOAD:-1}" == 0 ]] && at_load=
  tput_calib=()
  if [[ -n "${INFLIGHT_THROUGHPUT_CALIBRATION:-}" ]]; then
    python3 "$root/bench/write_calibration_set.py" "$INFLIGHT_THROUGHPUT_CALIBRATION" \
      "$tput_dir/inflight-tput-calibration.jsonl" || exit 2
    tput_calib=(--calib_dataset "$tput_dir/inflight-tput-calibration.jsonl"
      --calib_size "${INFLIGHT_THROUGHPUT_CALIBRATION%x*}"
      --calib_max_seq_length "${INFLIGHT_THROUGHPUT_CALIBRATION#*x}")
    at_load=  # a calibrated engine records scales: its weights are written
  fi
  if [[ -n "${INFLIGHT_THROUGHPUT_LAYOUTS:-}" ]]; then
    tput_layouts=$INFLIGHT_THROUGHPUT_LAYOUTS
  else
    tput_layouts=""
    for tp in ${INFLIGHT_THROUGHPUT_TP:-1 2}; do tput_layouts+="tp$tp "; done
  fi
  echo "### Throughput, random $preset bf16${tput_quant:+ ($tput_quant${INFLIGHT_THROUGHPUT_CALIBRATION:+, calibrated on ${INFLIGHT_THROUGHPUT_CALIBRATION} random ids})}, layouts ${tput_layouts% } (requests per shape as listed, else $tput_requests; ${tput_concurrency:-all} at a time, max batch $tput_batch)"
  echo
  for layout in $tput_layouts; do
    read -r tp pp <<<"$(layout_sizes "$layout")"
    ranks=$((tp * pp))
    if ((ranks > gpus)); then
      echo "- $layout: $ranks GPUs, this machine has $gpus: not run"; continue
    fi
    engine="$tput_dir/inflight-tput-engine-$layout"
    repo="$tput_dir/inflight-tput-repo-$layout"
    rm -rf "$engine" "$repo"
    s=$(date +%s)
    # A calibration runs one rank of the split float engine a process (mpirun -n tp*pp).
    launch=()
    ((${#tput_calib[@]} > 0 && ranks > 1)) && launch=(mpirun -n "$ranks")
    # shellcheck disable=SC2086
    if ! "${launch[@]}" "$pkg/bin/inflight-build" --random_preset "$preset" --dtype bfloat16 --tp_size "$tp" --pp_size "$pp" \
        --max_batch_size "$tput_batch" --max_input_len "$max_in" --max_seq_len "$max_seq" $tput_quant $at_load \
        "${tput_calib[@]}" --output_dir "$engine" >"$logs/build-tput-$layout.log" 2>&1; then
      echo "- inflight-build $layout FAILED: $(tail -1 "$logs/build-tput-$layout.log")"; status=1; continue
    fi
    echo "- engine $layout written in $(( $(date +%s) - s )) s"
    tput_vocab=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$engine/config.json")
    mkdir -p "$repo" && cp -r "$root/all_models/inflight_batcher_llm/tensorrt_llm" "$repo/"
    python3 "$root/tools/fill_template.py" -i "$repo/tensorrt_llm/config.pbtxt" \
      "triton_backend:inflight,triton_max_batch_size:$tput_batch,decoupled_mode:False,max_beam_width:1,engine_dir:$engine,batching_strategy:inflight_fused_batching,max_queue_delay_microseconds:0,enable_chunked_context:True,enable_kv_cache_reuse:False,exclude_input_in_output:True,kv_cache_free_gpu_mem_fraction:0.9,logits_datatype:TYPE_FP32,encoder_input_features_data_type:TYPE_FP16" \
      >/dev/null
    s=$(date +%s)
    if ! serve "tput-$layout" "$repo" "$ranks" bench_into; then
      echo "- $layout: serving or benchmarking FAILED ($(grep -iE 'error|fail' "$logs/server-tput-$layout.log" | head -1))"
      status=1
    fi
    echo "- $layout served and measured in $(( $(date +%s) - s )) s"
    # With INFLIGHT_STEP_PROFILE=N (inherited by the ranks), rank 0's last summary: host phases, the
    # wait for the device and the device's busy share of a step.
    [[ -n "${INFLIGHT_STEP_PROFILE:-}" ]] &&
      echo "  - $(grep -o 'step profile.*' "$logs/server-tput-$layout.log" | tail -1)"
    if [[ -n "${INFLIGHT_RANK0_NCU:-}" ]] && ((ranks > 1)); then
      profile_rank0 "$layout" "$ranks" "$engine" "$repo" || status=1
    fi
    rm -rf "$engine" "$repo"
  done
  echo
  # A column a layout: output tok/s, and for a layout of several GPUs its ratio to tp1 and its
  # scaling efficiency (rate / (GPUs x tp1's rate)). A layout this machine has too few GPUs for was
  # not run, which is not a failure; one that ran and printed nothing failed.
  header="| shape |" rule="|---|"
  for layout in $tput_layouts; do
    n=$(layout_ranks "$layout")
    header+=" $layout output tok/s ($n GPU$( ((n > 1)) && echo s)) |"; rule+="---:|"
  done
  echo "$header"
  echo "$rule"
  for shape in ${tput_shapes//,/ }; do
    base=$(awk -v s="$shape" '$1 == s {print $2}' "$logs/throughput-tput-tp1.txt" 2>/dev/null)
    row="| $shape |"
    for layout in $tput_layouts; do
      ranks=$(layout_ranks "$layout")
      rate=$(awk -v s="$shape" '$1 == s {print $2}' "$logs/throughput-tput-$layout.txt" 2>/dev/null)
      if [[ -z "$rate" ]]; then
        if ((ranks > gpus)); then row+=" not run |"; else row+=" FAIL |"; fi
        continue
      fi
      row+=" $rate$(awk -v a="${base:-0}" -v b="$rate" -v n="$ranks" \
        'BEGIN { if (a > 0 && n > 1) printf " (%.2fx, %.0f%%)", b / a, 100 * b / (n * a) }') |"
    done
    echo "$row"
  done
fi
exit $status
