#!/usr/bin/env bash
# Inflight end to end on this machine: build, make a small random-weight GPT-2 checkpoint with GPT-2's
# real tokenizer, build an engine, fill the model repository as NVIDIA's README does, start
# inflight-server, ask it a question (plain and streamed), stop it.
#
#   ./tools/quickstart.sh            run once and stop the server
#   ./tools/quickstart.sh --serve    keep serving; prints how to query and stop it
#
# Environment: INFLIGHT_HTTP_PORT (8000), INFLIGHT_METRICS_PORT (8002), INFLIGHT_BUILD_DIR (build/).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
serve=0
[ "${1:-}" = "--serve" ] && serve=1
build="${INFLIGHT_BUILD_DIR:-$root/build}"
port="${INFLIGHT_HTTP_PORT:-8000}"
metrics_port="${INFLIGHT_METRICS_PORT:-8002}"
work="$build/quickstart"

step() { printf '\n== %s\n' "$*"; }

step "Dependencies"
"$root/tools/install_deps.sh"
"$root/tools/fetch_test_data.sh" >/dev/null
tokenizer_src="$root/.testdata/gpt2"

step "Build"
"$root/tools/build.sh" -DINFLIGHT_TESTS=OFF -DINFLIGHT_BENCH=OFF -DINFLIGHT_WERROR=OFF
server="$build/bin/inflight-server"

step "A random-weight GPT-2 checkpoint with GPT-2's tokenizer, its engine, the model repository"
echo "(no pretrained weights can be downloaded here; any real GPT-2/Llama/Mistral/Qwen2 checkpoint works the same way)"
"$root/tools/prepare_demo.sh" "$build/bin" "$tokenizer_src" "$work"
repo="$work/triton_model_repo"

step "inflight-server on port $port"
log="$work/server.log"
"$server" --model-repository="$repo" --backend-directory="$build/backends" \
  --http-port="$port" --metrics-port="$metrics_port" >"$log" 2>&1 &
pid=$!
stop_server() { kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; }
trap stop_server EXIT
for _ in $(seq 1 120); do
  curl -sf "localhost:$port/v2/health/ready" >/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "quickstart: the server exited"; exit 1; }
  sleep 0.5
done
curl -sf "localhost:$port/v2/health/ready" >/dev/null || { cat "$log"; echo "quickstart: server not ready"; exit 1; }

step "Tokenize and detokenize through the preprocessing and postprocessing models"
prompt="Born in north-east France, Soyer trained as a"
ids=$(curl -sf -X POST "localhost:$port/v2/models/preprocessing/generate" \
  -d "{\"QUERY\": \"$prompt\", \"REQUEST_OUTPUT_LEN\": 8}" | python3 -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["INPUT_ID"])))')
echo "token ids: $ids"
ids_json="[[${ids// /,}]]"
curl -sf -X POST "localhost:$port/v2/models/postprocessing/generate" \
  -d "{\"TOKENS_BATCH\": $ids_json, \"SEQUENCE_LENGTH\": [$(wc -w <<<"$ids")]}" | python3 -c 'import json,sys; print("text back:", json.load(sys.stdin)["OUTPUT"])'

step "Generate (random weights: the words are random, the pipeline is real)"
request='{"text_input": "What is machine learning?", "max_tokens": 20, "bad_words": "", "stop_words": ""}'
echo "curl -X POST localhost:$port/v2/models/ensemble/generate -d '$request'"
curl -sf -X POST "localhost:$port/v2/models/ensemble/generate" -d "$request"
echo

step "Generate, streamed"
stream_request='{"text_input": "What is machine learning?", "max_tokens": 8, "bad_words": "", "stop_words": "", "stream": true}'
echo "curl -X POST localhost:$port/v2/models/ensemble/generate_stream -d '$stream_request'"
curl -sf -N -X POST "localhost:$port/v2/models/ensemble/generate_stream" -d "$stream_request"

if [ "$serve" = 1 ]; then
  trap - EXIT
  cat <<MSG

inflight-server is serving (pid $pid, log $log).
  curl -X POST localhost:$port/v2/models/ensemble/generate -d '$request'
  curl localhost:$metrics_port/metrics
Stop it with: kill $pid
MSG
fi
