#!/usr/bin/env python3
"""Benchmark a served LLM over HTTP or gRPC: offline (all requests at once) or at a request rate.

Command-line compatible with NVIDIA tensorrtllm_backend's tools/inflight_batcher_llm/benchmark_core_model.py
and printing the same lines and table, with Python 3's standard library only (plus grpcio for -i grpc):

    benchmark_core_model.py --max-input-len 1024 --num-requests 500 \\
        token-norm-dist --input-mean 256 --input-stdev 0 --output-mean 256 --output-stdev 0
    benchmark_core_model.py --max-input-len 1024 dataset --dataset data.json [--tokenizer-dir DIR]
    benchmark_core_model.py --max-input-len 1024 token-from-histogram --histogram-key example

Workloads
  token-norm-dist, token-from-histogram: random token ids (below --vocab-size) POSTed to
    /v2/models/<model>/generate of the LLM model itself (default tensorrt_llm) as
    {"input_ids": [...], "input_lengths": n, "request_output_len": m, "end_id": -1}; end_id -1 never
    matches, so every request generates exactly m tokens (NVIDIA's script sends the same).
  dataset: a JSON list of {"input", "instruction"?, "output"} (NVIDIA's format; the prompt is input + " " +
    instruction) or ShareGPT-like {"conversations": [{"from": "human", "value"}, {"from": "gpt", ...}]}.
    The output length asked for is words(output) * --op-tokens-per-word.
    Without --tokenizer-dir the prompts go as text to the ensemble ({"text_input", "max_tokens"}) and
      lengths are in WORDS (whitespace-split), an approximation of tokens; non-streaming output counts are
      the lengths asked for, streaming ones count the events received (one per token).
    With --tokenizer-dir (this client has no tokenizer of its own) each prompt is tokenized once, before
      timing, by the server's preprocessing model (which must be configured with that tokenizer_dir), and
      the ids go to the LLM model as in the token workloads: counts are exact.

Output: "[INFO] Warm up for benchmarking.", "[INFO] Start benchmarking on N prompts.",
"[INFO] Total Latency: X ms", "[INFO] Total request latencies: X ms" and the table of NVIDIA's script.
Latencies are per request, from send to the last byte; P99/P90 are nearest-rank percentiles. Ours:
"Avg. InFlight requests" is measured (sum of latencies / total time; NVIDIA's prints 0); with --decoupled
(requests go to /generate_stream) TTFT avg/p50/p99 and TPOT ((last - first token) / (tokens - 1)) rows.
--plot FILE.svg writes latency over time and a latency histogram; --dump-perfetto-trace writes a trace
(NVIDIA's names it prfetto_dump.json; ours defaults to perfetto_dump.json); --op-stats-csv appends a row.

-i grpc (NVIDIA's gRPC mode; -u default localhost:8001): the same requests as tensors of Triton's
GRPCInferenceService, as tritonclient.grpc sends them (raw_input_contents, [1, n] INT32 ids, [1, 1]
scalars): ModelInfer without --decoupled, ModelStreamInfer with it. Needs grpcio and protobuf for Python
(Debian: python3-grpcio python3-protobuf) and the service's Python stubs: the folder in INFLIGHT_GRPC_PY,
else generated once into a temporary folder from proto/grpc_service.proto (beside tools/ in the source
tree, share/inflight/proto in an install) with protoc and grpc_python_plugin (Debian:
protobuf-compiler-grpc).
"""
import argparse
import http.client
import json
import math
import os
import queue
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

# Token-length histograms for token-from-histogram: "<key>_ip" / "<key>_op" → (bucket upper edges,
# counts). Each count draws that many lengths uniformly in (previous edge, edge].
HISTOGRAMS = {
    "example_ip": ([64, 128, 256, 512, 1024], [10, 40, 30, 15, 5]),
    "example_op": ([16, 64, 128, 256, 512], [20, 35, 25, 15, 5]),
}


# ----------------------------------------------------------------------------------------------------
# Workloads


class Prompt:
    """One request to send: token ids (token mode) or text (ensemble mode)."""

    def __init__(self, input_len, output_len, input_ids=None, text=None):
        self.input_len = input_len
        self.output_len = output_len
        self.input_ids = input_ids
        self.text = text


def norm_dist_lengths(rng, mean, stdev, count):
    return [max(1, math.ceil(rng.gauss(mean, stdev))) for _ in range(count)]


def histogram_lengths(rng, key, histograms=HISTOGRAMS):
    if key not in histograms:
        keys = sorted({k.rsplit("_", 1)[0] for k in histograms})
        raise SystemExit(f"--histogram-key: no histogram \"{key}\"; known keys: {', '.join(keys)}")
    edges, counts = histograms[key]
    lengths = []
    lower = 0
    for edge, count in zip(edges, counts):
        lengths += [rng.randint(lower + 1, edge) for _ in range(count)]
        lower = edge
    rng.shuffle(lengths)
    return lengths


def random_ids(rng, length, vocab_size):
    # Id 0 is often padding or <unk>; any other id below the vocabulary is a valid prompt token.
    return [rng.randrange(1, vocab_size) for _ in range(length)]


def read_dataset(path):
    """(prompt, expected output) pairs from NVIDIA's {"input","instruction","output"} list or ShareGPT."""
    with open(path, "r", encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = data.get("data") or data.get("samples") or list(data.values())
    pairs = []
    for item in data:
        if "conversations" in item:
            turns = item["conversations"]
            if len(turns) >= 2:
                pairs.append((turns[0].get("value", ""), turns[1].get("value", "")))
        elif "input" in item:
            prompt = item["input"]
            if item.get("instruction"):
                prompt += " " + item["instruction"]
            pairs.append((prompt, item.get("output", "")))
    if not pairs:
        raise SystemExit(f"--dataset {path}: no prompts found; expected a JSON list of "
                         "{\"input\", \"instruction\"?, \"output\"} or {\"conversations\": [...]} items")
    return pairs


# ----------------------------------------------------------------------------------------------------
# HTTP


def parse_url(url, default_port=8000):
    if "://" not in url:
        url = "http://" + url
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "grpc"):
        raise SystemExit(f"-u {url}: only http:// (or grpc:// with -i grpc) URLs are supported")
    return parsed.hostname or "localhost", parsed.port or default_port


class RequestRecord:
    def __init__(self, index, prompt):
        self.index = index
        self.prompt = prompt
        self.start = 0.0  # time.perf_counter() seconds
        self.end = 0.0
        self.first_token = None
        self.output_tokens = 0
        self.error = None

    @property
    def latency_ms(self):
        return (self.end - self.start) * 1000.0


class Client:
    """One keep-alive connection; each worker thread owns one."""

    def __init__(self, host, port, timeout=600.0):
        self.host, self.port, self.timeout = host, port, timeout
        self.conn = None

    def _connection(self):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self.conn

    def post(self, path, body):
        """(status, response object); the caller reads the body before the next post."""
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
        for attempt in range(2):
            conn = self._connection()
            try:
                conn.request("POST", path, body=data, headers=headers)
                response = conn.getresponse()
                return response.status, response
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # The server closed an idle keep-alive connection: reconnect once.
                self.close()
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def count_ids(value):
    if isinstance(value, list):
        return sum(count_ids(v) for v in value)
    return 0 if value is None or value == -1 else 1


class Sender:
    """Turns a Prompt into a request body and counts the output tokens of the reply."""

    def __init__(self, models, decoupled, exclude_input_in_output, text_mode):
        self.models = models
        self.decoupled = decoupled
        self.exclude_input_in_output = exclude_input_in_output
        self.text_mode = text_mode

    def body(self, prompt):
        if self.text_mode:
            return {"text_input": prompt.text, "max_tokens": prompt.output_len, "stream": self.decoupled}
        body = {"input_ids": prompt.input_ids, "input_lengths": prompt.input_len,
                "request_output_len": prompt.output_len, "end_id": -1}
        if self.decoupled:
            body["streaming"] = True
        return body

    def path(self, index):
        model = urllib.parse.quote(self.models[index % len(self.models)])
        return f"/v2/models/{model}/" + ("generate_stream" if self.decoupled else "generate")

    def output_tokens(self, prompt, reply):
        """Generated tokens in a non-streaming reply (dict)."""
        if self.text_mode:
            return prompt.output_len
        if "sequence_length" in reply:
            total = int(_first(reply["sequence_length"]))
        else:
            total = count_ids(reply.get("output_ids", []))
        return total if self.exclude_input_in_output else total - prompt.input_len

    def event_tokens(self, event):
        """Tokens carried by one streamed event (streaming responses carry only new tokens)."""
        if self.text_mode:
            return 1 if event.get("text_output") else 0
        return count_ids(event.get("output_ids", []))

    def send(self, client, record):
        prompt = record.prompt
        record.start = time.perf_counter()
        try:
            status, response = client.post(self.path(record.index), self.body(prompt))
            if status != 200:
                text = response.read().decode("utf-8", "replace")
                record.error = f"HTTP {status}: {text.strip()[:300]}"
            elif self.decoupled:
                self._read_stream(response, record)
            else:
                reply = json.loads(response.read())
                record.output_tokens = self.output_tokens(prompt, reply)
        except (OSError, http.client.HTTPException, ValueError) as e:
            record.error = f"{type(e).__name__}: {e}"
            client.close()
        record.end = time.perf_counter()

    def _read_stream(self, response, record):
        while True:
            line = response.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            event = json.loads(line[5:])
            if "error" in event:
                record.error = f"stream error: {event['error']}"
                continue
            tokens = self.event_tokens(event)
            if tokens and record.first_token is None:
                record.first_token = time.perf_counter()
            record.output_tokens += tokens


def _first(value):
    while isinstance(value, list):
        value = value[0]
    return value


# ----------------------------------------------------------------------------------------------------
# gRPC (-i grpc)


def grpc_modules():
    """(grpc, grpc_service_pb2, grpc_service_pb2_grpc); SystemExit saying what is missing."""
    try:
        import grpc  # Debian: python3-grpcio
    except ImportError as e:
        raise SystemExit(f"-i grpc needs grpcio for this Python ({sys.executable}): {e}; "
                         "Debian: apt-get install python3-grpcio python3-protobuf")
    folder = os.environ.get("INFLIGHT_GRPC_PY")
    if not folder:
        here = os.path.dirname(os.path.abspath(__file__))
        protos = [p for p in (os.path.join(here, "..", "proto"), os.path.join(here, "..", "share", "inflight", "proto"))
                  if os.path.exists(os.path.join(p, "grpc_service.proto"))]
        protoc, plugin = shutil.which("protoc"), shutil.which("grpc_python_plugin")
        if not protos or not protoc or not plugin:
            raise SystemExit("-i grpc needs the GRPCInferenceService Python stubs: set INFLIGHT_GRPC_PY to their "
                             "folder, or have proto/grpc_service.proto beside tools/ and protoc and "
                             "grpc_python_plugin on PATH (Debian: protobuf-compiler-grpc)")
        folder = tempfile.mkdtemp(prefix="grpc_stubs_")
        subprocess.run([protoc, "-I", protos[0], f"--python_out={folder}", f"--grpc_out={folder}",
                        f"--plugin=protoc-gen-grpc={plugin}", os.path.join(protos[0], "grpc_service.proto"),
                        os.path.join(protos[0], "model_config.proto")], check=True)
    sys.path.insert(0, folder)
    import grpc_service_pb2
    import grpc_service_pb2_grpc
    return grpc, grpc_service_pb2, grpc_service_pb2_grpc


class GrpcSender(Sender):
    """Sender over gRPC: the body's fields become [1, n] / [1, 1] tensors (the Triton types of the LLM
    and ensemble models); replies and stream messages are read back into the same token counts."""

    TYPES = {"input_ids": ("INT32", "i"), "input_lengths": ("INT32", "i"), "request_output_len": ("INT32", "i"),
             "end_id": ("INT32", "i"), "streaming": ("BOOL", "?"), "stream": ("BOOL", "?"),
             "max_tokens": ("INT32", "i")}

    def __init__(self, models, decoupled, exclude_input_in_output, text_mode, host, port):
        super().__init__(models, decoupled, exclude_input_in_output, text_mode)
        self.grpc, self.pb, svc = grpc_modules()
        options = [("grpc.max_send_message_length", 2**31 - 1), ("grpc.max_receive_message_length", 2**31 - 1)]
        self.channel = self.grpc.insecure_channel(f"{host}:{port}", options=options)  # thread-safe
        self.stub = svc.GRPCInferenceServiceStub(self.channel)

    def request(self, index, prompt):
        request = self.pb.ModelInferRequest(model_name=self.models[index % len(self.models)])
        for name, value in self.body(prompt).items():
            tensor = request.inputs.add()
            tensor.name = name
            if name == "text_input":
                data = value.encode("utf-8")
                tensor.datatype, raw = "BYTES", struct.pack("<I", len(data)) + data
                tensor.shape.extend([1, 1])
            else:
                tensor.datatype, fmt = self.TYPES[name]
                values = value if isinstance(value, list) else [value]
                raw = struct.pack("<" + fmt * len(values), *values)
                tensor.shape.extend([1, len(values)])
            request.raw_input_contents.append(raw)
        return request

    @staticmethod
    def outputs(response):
        out = {}
        for tensor, raw in zip(response.outputs, response.raw_output_contents):
            if tensor.datatype == "INT32":
                out[tensor.name] = list(struct.unpack("<" + "i" * (len(raw) // 4), raw))
            elif tensor.datatype == "BYTES":
                out[tensor.name] = raw
        return out

    def send(self, client, record):
        del client  # the channel is shared
        record.start = time.perf_counter()
        request = self.request(record.index, record.prompt)
        try:
            if self.decoupled:
                for message in self.stub.ModelStreamInfer(iter([request]), timeout=600):
                    if message.error_message:
                        record.error = f"stream error: {message.error_message}"
                        continue
                    out = self.outputs(message.infer_response)
                    tokens = (1 if out.get("text_output", b"")[4:] else 0) if self.text_mode else \
                        count_ids(out.get("output_ids", []))
                    if tokens and record.first_token is None:
                        record.first_token = time.perf_counter()
                    record.output_tokens += tokens
            else:
                out = self.outputs(self.stub.ModelInfer(request, timeout=600))
                reply = {k: v for k, v in out.items() if k in ("sequence_length", "output_ids")}
                record.output_tokens = self.output_tokens(record.prompt, reply)
        except self.grpc.RpcError as e:
            record.error = f"gRPC {e.code().name}: {e.details()}"
        record.end = time.perf_counter()


# ----------------------------------------------------------------------------------------------------
# Running


def arrival_offsets(rng, request_rate, dist, count):
    """Seconds after the start at which each request is released (NVIDIA's script sleeps the delay
    before each send, so arrivals are the running sum of the delays)."""
    if request_rate is None or request_rate <= 0:
        return [0.0] * count
    offsets, now = [], 0.0
    for _ in range(count):
        now += (1.0 / request_rate) if dist == "constant" else rng.expovariate(request_rate)
        offsets.append(now)
    return offsets


def run_requests(host, port, sender, prompts, offsets, concurrency):
    """Sends every prompt at its offset through `concurrency` keep-alive connections; returns the records
    and the wall time in seconds from the first release to the last completion."""
    records = [RequestRecord(i, p) for i, p in enumerate(prompts)]
    pending = queue.Queue()
    workers_n = max(1, min(concurrency, len(records)))

    def worker():
        client = Client(host, port)
        while True:
            record = pending.get()
            if record is None:
                break
            sender.send(client, record)
        client.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers_n)]
    for t in threads:
        t.start()
    t0 = time.perf_counter()
    for record, offset in zip(records, offsets):
        delay = t0 + offset - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        pending.put(record)
    for _ in threads:
        pending.put(None)
    for t in threads:
        t.join()
    return records, time.perf_counter() - t0


# ----------------------------------------------------------------------------------------------------
# Statistics and output: benchmark_report.py beside this file (its functions are this module's too, as
# the tests and other scripts use them).

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchmark_report import (append_csv, compute_stats, format_table, percentile,  # noqa: E402,F401
                              write_perfetto, write_plot)


# ----------------------------------------------------------------------------------------------------
# Command line


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="workload", required=True)
    ds = sub.add_parser("dataset", help="prompts from a JSON dataset")
    ds.add_argument("--dataset", required=True, help="JSON dataset path")
    ds.add_argument("--tokenizer-dir", "--tokenizer_dir", default=None,
                    help="tokenize with the server's preprocessing model (set up with this tokenizer)")
    ds.add_argument("--tokenizer-type", "--tokenizer_type", default="auto", choices=["auto", "t5", "llama"],
                    help="accepted for compatibility; the server's tokenizer decides")
    ds.add_argument("--op-tokens-per-word", type=float, default=1.3,
                    help="output length asked for = words in the dataset's output * this (default 1.3)")
    ds.add_argument("--preprocessing-model", default="preprocessing",
                    help="ours: the model that tokenizes with --tokenizer-dir (default preprocessing)")
    nd = sub.add_parser("token-norm-dist", aliases=["token_norm_dist"], help="normally distributed lengths")
    for name in ("input-mean", "input-stdev", "output-mean", "output-stdev"):
        nd.add_argument("--" + name, "--" + name.replace("-", "_"), type=float, required=True,
                        dest=name.replace("-", "_"))
    hist = sub.add_parser("token-from-histogram", aliases=["token_from_histogram"],
                          help="lengths from a histogram")
    hist.add_argument("--histogram-key", "--histogram_key", required=True,
                      help="key of the built-in histograms (" +
                           ", ".join(sorted({k.rsplit('_', 1)[0] for k in HISTOGRAMS})) + ")")

    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("-u", "--url", default=None,
                        help="server URL (default localhost:8000, localhost:8001 with -i grpc)")
    parser.add_argument("-i", "--protocol", default="http", choices=["http", "grpc"],
                        help="http (JSON over /generate) or grpc (ModelInfer, or ModelStreamInfer with --decoupled)")
    parser.add_argument("--decoupled", action="store_true",
                        help="stream: POST to /generate_stream and measure TTFT/TPOT")
    parser.add_argument("-c", "--concurrency", type=int, default=128,
                        help="connections (requests in flight at most); default 128")
    parser.add_argument("--max-input-len", "--max_input_len", type=int, required=True,
                        help="prompts longer than this are dropped")
    parser.add_argument("--request-rate", "--request_rate", type=float, default=-1.0,
                        help="requests/s; -1 (default) sends all at once (offline)")
    parser.add_argument("--time-delay-dist", "--time_delay_dist", default="exponential_dist",
                        choices=["constant", "exponential_dist"])
    parser.add_argument("--num-requests", "--num_requests", type=int, default=30000,
                        help="requests (dataset: at most this many); default 30000")
    parser.add_argument("--exclude-input-in-output", action="store_true",
                        help="the server's output_ids hold only generated tokens")
    parser.add_argument("--dump-perfetto-trace", nargs="?", const="perfetto_dump.json", default=None,
                        metavar="FILE", help="write a perfetto trace (default file perfetto_dump.json)")
    parser.add_argument("--op-stats-csv", default=None, help="append the table as a CSV row")
    parser.add_argument("--model", "--tensorrt-llm-model-name", action="append", dest="models", default=None,
                        help="model to send to (repeatable: round robin); default tensorrt_llm, or "
                             "ensemble for dataset text without --tokenizer-dir")
    parser.add_argument("--vocab-size", type=int, default=1000,
                        help="ours: random prompt ids are in [1, this); default 1000 (valid for any model)")
    parser.add_argument("--plot", default=None, metavar="FILE.svg", help="ours: write an SVG plot")
    parser.add_argument("--seed", type=int, default=420, help="random seed (default 420, as NVIDIA's)")
    parser.add_argument("--warmup-requests", type=int, default=10, help="ours: default 10, as NVIDIA's")
    args = parser.parse_args(argv)
    if args.concurrency < 1:
        parser.error(f"--concurrency {args.concurrency} is not accepted: it must be >= 1")
    if args.num_requests < 1:
        parser.error(f"--num-requests {args.num_requests} is not accepted: it must be >= 1")
    if args.vocab_size < 2:
        parser.error(f"--vocab-size {args.vocab_size} is not accepted: it must be >= 2")
    args.workload = args.workload.replace("_", "-")
    return args


def tokenize_with_server(host, port, model, text):
    client = Client(host, port)
    try:
        status, response = client.post(f"/v2/models/{model}/generate", {"QUERY": text, "REQUEST_OUTPUT_LEN": 1})
        body = response.read()
        if status != 200:
            raise SystemExit(f"tokenizing with model \"{model}\" failed: HTTP {status}: {body[:300]!r}")
        ids = json.loads(body)["INPUT_ID"]
        return ids if isinstance(ids, list) else [ids]
    finally:
        client.close()


def make_prompts(args, rng, host, port):
    """(prompts, text_mode)."""
    if args.workload == "token-norm-dist":
        lengths = norm_dist_lengths(rng, args.input_mean, args.input_stdev, args.num_requests)
        lengths = [n for n in lengths if n <= args.max_input_len]
        outputs = norm_dist_lengths(rng, args.output_mean, args.output_stdev, len(lengths))
    elif args.workload == "token-from-histogram":
        lengths = histogram_lengths(rng, args.histogram_key + "_ip")
        outputs = histogram_lengths(rng, args.histogram_key + "_op")
        count = min(len(lengths), len(outputs), args.num_requests)
        lengths, outputs = [n for n in lengths[:count]], outputs[:count]
        keep = [i for i, n in enumerate(lengths) if n <= args.max_input_len]
        lengths, outputs = [lengths[i] for i in keep], [outputs[i] for i in keep]
    else:
        prompts = []
        for text, expected in read_dataset(args.dataset):
            output_len = max(1, int(len(expected.split()) * args.op_tokens_per_word))
            if args.tokenizer_dir:
                ids = tokenize_with_server(host, port, args.preprocessing_model, text)
                if len(ids) <= args.max_input_len:
                    prompts.append(Prompt(len(ids), output_len, input_ids=ids))
            else:
                words = len(text.split())
                if words <= args.max_input_len:
                    prompts.append(Prompt(words, output_len, text=text))
            if len(prompts) >= args.num_requests:
                break
        return prompts, not args.tokenizer_dir
    prompts = [Prompt(n, m, input_ids=random_ids(rng, n, args.vocab_size)) for n, m in zip(lengths, outputs)]
    return prompts, False


def main(argv=None):
    args = parse_arguments(argv)
    grpc_mode = args.protocol == "grpc"
    host, port = parse_url(args.url or ("localhost:8001" if grpc_mode else "localhost:8000"),
                           8001 if grpc_mode else 8000)
    if grpc_mode and args.workload == "dataset" and args.tokenizer_dir:
        raise SystemExit("-i grpc with --tokenizer-dir is not supported: tokenizing asks the server's "
                         "preprocessing model over HTTP; drop --tokenizer-dir to send text to the ensemble")
    rng = random.Random(args.seed)
    prompts, text_mode = make_prompts(args, rng, host, port)
    if not prompts:
        raise SystemExit(f"no prompt fits --max-input-len {args.max_input_len}")
    models = args.models or (["ensemble"] if text_mode else ["tensorrt_llm"])
    if grpc_mode:
        sender = GrpcSender(models, args.decoupled, args.exclude_input_in_output, text_mode, host, port)
    else:
        sender = Sender(models, args.decoupled, args.exclude_input_in_output, text_mode)
    offsets = arrival_offsets(rng, args.request_rate, args.time_delay_dist, len(prompts))

    print("[INFO] Warm up for benchmarking.", flush=True)
    # 100 tokens as NVIDIA's warm-up asks, or fewer where the benchmark's own requests ask fewer (an
    # engine sized for them may have no room for 100 more than the prompt).
    warm = Prompt(prompts[0].input_len, min(100, prompts[0].output_len), prompts[0].input_ids, prompts[0].text)
    warm_records, _ = run_requests(host, port, sender, [warm] * args.warmup_requests,
                                   [0.0] * args.warmup_requests, 1)
    failed = [r for r in warm_records if r.error]
    if failed:
        print(f"Failed receiving responses: {failed[0].error}")
        return 1

    print(f"[INFO] Start benchmarking on {len(prompts)} prompts.", flush=True)
    records, wall_s = run_requests(host, port, sender, prompts, offsets, args.concurrency)
    print(f"[INFO] Total Latency: {round(wall_s * 1000.0, 3)} ms")
    ok = [r for r in records if r.error is None]
    print(f"[INFO] Total request latencies: {sum(r.latency_ms for r in ok)} ms")
    failed = [r for r in records if r.error]
    if failed:
        print(f"[WARNING] {len(failed)} of {len(records)} requests failed; first: {failed[0].error}")
    if not ok:
        print("Failed receiving responses: every request failed")
        return 1
    rows = compute_stats(records, args.decoupled)
    print(format_table(rows), flush=True)
    if args.op_stats_csv:
        append_csv(args.op_stats_csv, rows)
    if args.dump_perfetto_trace:
        write_perfetto(args.dump_perfetto_trace, records)
    if args.plot:
        write_plot(args.plot, records, rows)
        print(f"[INFO] Plot written to {args.plot}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
