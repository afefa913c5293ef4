#!/usr/bin/env python3
"""What inflight-server adds to a request's latency: the same requests on one engine, executor alone
and through the server.

    bench/server_overhead.py --bin_dir build/bin --backend_dir build/backends --preset tiny
    bench/server_overhead.py --bin_dir B --backend_dir D --engine_dir E --concurrency 1,8 \\
        --shape 128/64 --requests 24 [--executor_output executor.md]

1. Executor alone: inflight-bench-executor --engine_dir E --sections latency (closed loop, C requests
   in flight, latency = enqueueRequest to the final response), or its "latency:" lines from an earlier
   run's output (--executor_output) when they cover the same shape, requests and concurrencies, so a
   device round loads the 16 GB engine once less.
2. Through the server: a model repository with only the tensorrt_llm model (all_models template filled
   with tools/fill_template.py: this engine, KV cache reuse off on both sides, chunked context,
   non-decoupled), inflight-server on a free loopback port, then tools/benchmark_core_model.py
   token-norm-dist with fixed lengths at each concurrency (random ids below the engine's vocabulary,
   end_id -1, so every request generates exactly the asked tokens); per-request latency (send to last
   byte) from its --dump-perfetto-trace.
3. A markdown table: p50/p90 of both and the differences, against the target "the server adds <= 1 ms
   p50" (--target_ms), and one "server_overhead:" line per concurrency for scripts.

Without --engine_dir a random engine (--preset, default tiny) is written with inflight-build
--random_preset into the work folder. --lib_path is prepended to LD_LIBRARY_PATH of our programs only
(a device machine's carried libraries). Python 3 standard library only. Exit 0 when every step ran
(whatever the overhead); 1 when one failed.
"""
import argparse
import http.client
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
EXECUTOR_LINE = re.compile(r"^latency: concurrency=(\d+) shape=(\d+/\d+) requests=(\d+) "
                           r"p50_ms=([0-9.]+) p90_ms=([0-9.]+) p99_ms=([0-9.]+)", re.M)
STARTED_HTTP = re.compile(r"Started HTTPService at (\S+):(\d+)")


def parse_shape(text):
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise argparse.ArgumentTypeError(f"\"{text}\" is not <input_len>/<output_len>, both >= 1 (e.g. 128/64)")
    return int(match.group(1)), int(match.group(2))


def parse_concurrency(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"\"{text}\" is not a comma-separated list of integers >= 1")
    return values


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--bin_dir", required=True,
                        help="folder with inflight-bench-executor, inflight-server (and inflight-build)")
    parser.add_argument("--backend_dir", required=True,
                        help="--backend-directory of inflight-server: holds inflight/libtriton_inflight.so")
    parser.add_argument("--engine_dir", default=None, help="engine to use (default: a random --preset one)")
    parser.add_argument("--preset", default="tiny", choices=["tiny", "small", "llama-3.1-8b"],
                        help="random engine without --engine_dir (default tiny)")
    parser.add_argument("--dtype", default=None, help="random engine's dtype (default: the preset's)")
    parser.add_argument("--concurrency", type=parse_concurrency, default=[1, 8],
                        help="requests in flight, one row each (default 1,8)")
    parser.add_argument("--shape", type=parse_shape, default=(128, 64),
                        help="prompt/output tokens of every request (default 128/64)")
    parser.add_argument("--requests", type=int, default=24, help="timed requests per concurrency (default 24)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed requests through the server before each concurrency (default 2)")
    parser.add_argument("--target_ms", type=float, default=1.0, help="target p50 difference (default 1 ms)")
    parser.add_argument("--executor_output", default=None,
                        help="an earlier inflight-bench-executor output with matching \"latency:\" lines")
    parser.add_argument("--busy_poll", default="auto", choices=["auto", "true", "false"],
                        help="the model's busy_poll parameter and the executor's (default auto: on a GPU)")
    parser.add_argument("--http_busy_poll", action="store_true",
                        help="inflight-server --http-busy-poll: its io threads poll while a request is in flight")
    parser.add_argument("--lib_path", default=None, help="prepended to LD_LIBRARY_PATH of our programs")
    parser.add_argument("--work_dir", default=None, help="scratch folder (default: a new temp folder, removed)")
    parser.add_argument("--startup_timeout", type=float, default=600.0,
                        help="seconds for the server to become ready (default 600)")
    parser.add_argument("--out", default=None, help="also write the markdown here")
    args = parser.parse_args(argv)
    if args.requests < 1:
        parser.error(f"--requests {args.requests} is not accepted: it must be >= 1")
    if args.warmup < 0:
        parser.error(f"--warmup {args.warmup} is not accepted: it must be >= 0")
    return args


def percentile(values, fraction):
    """Nearest rank, as inflight-bench-executor and benchmark_core_model.py compute it."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


def parse_executor_latency(text, shape, requests):
    """{concurrency: (p50, p90, p99)} from inflight-bench-executor's "latency:" lines of this shape and
    request count."""
    wanted = f"{shape[0]}/{shape[1]}"
    out = {}
    for m in EXECUTOR_LINE.finditer(text):
        if m.group(2) == wanted and int(m.group(3)) == requests:
            out[int(m.group(1))] = (float(m.group(4)), float(m.group(5)), float(m.group(6)))
    return out


def trace_latencies_ms(path):
    """Per-request latency (ms) from benchmark_core_model.py's perfetto trace (durations in us)."""
    with open(path, encoding="utf-8") as f:
        events = json.load(f)
    return [e["dur"] / 1000.0 for e in events]


def format_row(cells):
    return "| " + " | ".join(cells) + " |"


def overhead_table(shape, requests, executor, server, target_ms):
    """Markdown lines: one row per concurrency present in both {c: (p50, p90, p99)} maps."""
    header = ["concurrency", "in/out", "requests", "executor p50 ms", "server p50 ms", "added p50 ms",
              "executor p90 ms", "server p90 ms", "added p90 ms", f"added p50 <= {target_ms:g} ms"]
    lines = [format_row(header), "|" + "|".join("---:" for _ in header) + "|"]
    machine = []
    for c in sorted(set(executor) & set(server)):
        (e50, e90, _), (s50, s90, _) = executor[c], server[c]
        verdict = "yes" if s50 - e50 <= target_ms else "NO"
        lines.append(format_row([str(c), f"{shape[0]}/{shape[1]}", str(requests), f"{e50:.3f}", f"{s50:.3f}",
                                 f"{s50 - e50:+.3f}", f"{e90:.3f}", f"{s90:.3f}", f"{s90 - e90:+.3f}", verdict]))
        machine.append(f"server_overhead: concurrency={c} shape={shape[0]}/{shape[1]} executor_p50_ms={e50:.4f} "
                       f"server_p50_ms={s50:.4f} added_p50_ms={s50 - e50:.4f} added_p90_ms={s90 - e90:.4f} "
                       f"within_target={verdict}")
    return lines, machine


# ----------------------------------------------------------------------------------------------------
# Running things


class Runner:
    def __init__(self, args):
        self.args = args
        self.env = dict(os.environ)
        if args.lib_path:
            self.env["LD_LIBRARY_PATH"] = args.lib_path + (
                ":" + self.env["LD_LIBRARY_PATH"] if self.env.get("LD_LIBRARY_PATH") else "")

    def program(self, name):
        path = os.path.join(self.args.bin_dir, name)
        if not os.access(path, os.X_OK):
            raise SystemExit(f"server_overhead: {path} is not an executable (--bin_dir)")
        return path

    def run(self, command, log_path, our_program=True, timeout=None):
        """Runs to completion; stdout returned, stdout+stderr kept in log_path."""
        print("$ " + " ".join(command), file=sys.stderr, flush=True)
        with open(log_path, "w", encoding="utf-8") as log:
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True, timeout=timeout,
                                  env=self.env if our_program else None)
            log.write(done.stdout)
        if done.returncode != 0:
            raise RuntimeError(f"{os.path.basename(command[0])} exited with {done.returncode}; see {log_path}:\n"
                               + tail(log_path))
        return done.stdout


def tail(path, lines=15):
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def engine_config(engine_dir):
    with open(os.path.join(engine_dir, "config.json"), encoding="utf-8") as f:
        return json.load(f)


def make_engine(runner, work, args):
    in_len, out_len = args.shape
    engine = os.path.join(work, "engine")
    command = [runner.program("inflight-build"), "--random_preset", args.preset, "--output_dir", engine,
               "--max_input_len", str(in_len), "--max_seq_len", str(in_len + out_len)]
    if args.dtype:
        command += ["--dtype", args.dtype]
    runner.run(command, os.path.join(work, "inflight-build.log"))
    return engine


def make_repository(work, engine_dir, config, busy_poll):
    """Only the tensorrt_llm model: token ids in, token ids out, as the token workloads send."""
    repo = os.path.join(work, "repo")
    model = os.path.join(repo, "tensorrt_llm")
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(os.path.join(REPO, "all_models", "inflight_batcher_llm", "tensorrt_llm"), model)
    subs = {
        "triton_backend": "inflight", "triton_max_batch_size": config["build"]["max_batch_size"],
        "decoupled_mode": "False", "max_beam_width": 1, "engine_dir": engine_dir,
        "batching_strategy": "inflight_fused_batching", "max_queue_delay_microseconds": 0,
        "enable_chunked_context": "True", "enable_kv_cache_reuse": "False",
        "exclude_input_in_output": "True", "logits_datatype": "TYPE_FP32",
        "encoder_input_features_data_type": "TYPE_FP16", "busy_poll": busy_poll,
    }
    text = ",".join(f"{k}:{str(v).replace(',', chr(92) + ',').replace(':', chr(92) + ':')}"
                    for k, v in subs.items())
    subprocess.run([sys.executable, os.path.join(REPO, "tools", "fill_template.py"), "-i",
                    os.path.join(model, "config.pbtxt"), text], check=True, stdout=subprocess.DEVNULL)
    return repo


class Server:
    def __init__(self, runner, repo, work, timeout):
        self.log_path = os.path.join(work, "inflight-server.log")
        self.command = [runner.program("inflight-server"), f"--model-repository={repo}",
                        f"--backend-directory={runner.args.backend_dir}", "--http-address=127.0.0.1",
                        "--http-port=0", "--allow-grpc=false", "--allow-metrics=false"]
        if runner.args.http_busy_poll:
            self.command.append("--http-busy-poll")
        print("$ " + " ".join(self.command), file=sys.stderr, flush=True)
        self.log = open(self.log_path, "w", encoding="utf-8")
        self.lines = []
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, env=runner.env)
        self.reader = threading.Thread(target=self._drain, daemon=True)  # a full pipe would stall logging
        self.reader.start()
        self.port = None
        try:
            self._wait_ready(time.monotonic() + timeout, timeout)
        except BaseException:  # a failed or interrupted start leaves no server behind
            self.stop()
            raise

    def _wait_ready(self, deadline, timeout):
        while time.monotonic() < deadline and self.port is None:
            match = STARTED_HTTP.search("".join(self.lines))
            if match:
                self.port = int(match.group(2))
            elif self.process.poll() is not None:
                raise RuntimeError(f"inflight-server exited with {self.process.returncode}:\n" + "".join(self.lines[-20:]))
            time.sleep(0.05)
        while time.monotonic() < deadline and self.port is not None:
            if self.process.poll() is not None:
                raise RuntimeError(f"inflight-server exited with {self.process.returncode}:\n" + "".join(self.lines[-20:]))
            try:  # http.client, not urllib: no proxy settings in the way of loopback
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/v2/health/ready")
                ready = conn.getresponse().status == 200
                conn.close()
                if ready:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"inflight-server was not ready within {timeout:g} s:\n" + "".join(self.lines[-20:]))

    def _drain(self):
        for line in self.process.stdout:
            self.lines.append(line)
            if not self.log.closed:
                self.log.write(line)

    def stop(self):
        if self.log.closed:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.reader.join(timeout=5)
        self.log.close()


def client_command(port, shape, vocab_size, concurrency, requests, trace):
    in_len, out_len = shape
    return [sys.executable, os.path.join(REPO, "tools", "benchmark_core_model.py"), "-u", f"127.0.0.1:{port}",
            "--max-input-len", str(in_len), "--num-requests", str(requests), "--concurrency", str(concurrency),
            "--warmup-requests", "0", "--vocab-size", str(vocab_size), "--exclude-input-in-output",
            "--dump-perfetto-trace", trace, "token-norm-dist", "--input-mean", str(in_len), "--input-stdev", "0",
            "--output-mean", str(out_len), "--output-stdev", "0"]


def measure_server(runner, server, work, args, vocab_size):
    """{concurrency: (p50, p90, p99)} through the server."""
    out = {}
    for c in args.concurrency:
        if args.warmup:
            trace = os.path.join(work, f"warmup_c{c}.json")
            runner.run(client_command(server.port, args.shape, vocab_size, c, args.warmup, trace),
                       os.path.join(work, f"client_warmup_c{c}.log"), our_program=False)
        trace = os.path.join(work, f"trace_c{c}.json")
        stdout = runner.run(client_command(server.port, args.shape, vocab_size, c, args.requests, trace),
                            os.path.join(work, f"client_c{c}.log"), our_program=False)
        tokens = re.search(r"Avg\. OP tokens per request\s*\|\s*([0-9.]+)", stdout)
        if tokens and abs(float(tokens.group(1)) - args.shape[1]) > 0.01:
            raise RuntimeError(f"concurrency {c}: {tokens.group(1)} output tokens per request, asked {args.shape[1]}")
        latencies = trace_latencies_ms(trace)
        if len(latencies) != args.requests:
            raise RuntimeError(f"concurrency {c}: {len(latencies)} of {args.requests} requests succeeded")
        out[c] = (percentile(latencies, 0.5), percentile(latencies, 0.9), percentile(latencies, 0.99))
    return out


def measure_phases(port, args, vocab_size):
    """Where a concurrency-1 request's time goes through the server: args.requests sequential requests
    with return_perf_metrics on one keep-alive connection. The executor's times (steady_clock, the
    CLOCK_MONOTONIC that time.monotonic_ns reads) split each into: in (client send -> the executor has
    it), wait (-> first scheduled), generate (-> last token), out (-> the client has the last byte).
    {phase: p50 ms}."""
    in_len, out_len = args.shape
    phases = {"in": [], "wait": [], "generate": [], "out": [], "total": []}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        for i in range(args.requests + 1):
            ids = [(7 + 13 * (i * in_len + j)) % vocab_size for j in range(in_len)]
            body = json.dumps({"input_ids": [ids], "input_lengths": [in_len], "request_output_len": [out_len],
                               "end_id": [-1], "return_perf_metrics": [True]})
            sent = time.monotonic_ns()
            conn.request("POST", "/v2/models/tensorrt_llm/generate", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
            done = time.monotonic_ns()
            if response.status != 200:
                raise RuntimeError(f"perf-metrics request: HTTP {response.status}: {data[:300]!r}")
            if i == 0:
                continue  # the connection's first request, untimed
            reply = json.loads(data)
            metric = {k: int(v[0] if isinstance(v, list) else v) for k, v in reply.items()
                      if k.endswith("_time_ns")}
            arrival, first, last = (metric["arrival_time_ns"], metric["first_scheduled_time_ns"],
                                    metric["last_token_time_ns"])
            for name, ns in (("in", arrival - sent), ("wait", first - arrival), ("generate", last - first),
                             ("out", done - last), ("total", done - sent)):
                phases[name].append(ns / 1e6)
    finally:
        conn.close()
    return {name: percentile(values, 0.5) for name, values in phases.items()}


def measure_executor(runner, work, args, engine_dir):
    earlier = {}
    if args.executor_output and os.path.exists(args.executor_output):
        with open(args.executor_output, encoding="utf-8", errors="replace") as f:
            earlier = parse_executor_latency(f.read(), args.shape, args.requests)
    if all(c in earlier for c in args.concurrency):
        return earlier, f"the latency lines of {os.path.basename(args.executor_output)}"
    command = [runner.program("inflight-bench-executor"), "--engine_dir", engine_dir, "--sections", "latency",
               "--latency_concurrency", ",".join(map(str, args.concurrency)),
               "--latency_shape", f"{args.shape[0]}/{args.shape[1]}", "--latency_requests", str(args.requests),
               "--kv_cache_reuse=false", f"--busy_poll={args.busy_poll}"]
    stdout = runner.run(command, os.path.join(work, "executor.log"))
    measured = parse_executor_latency(stdout, args.shape, args.requests)
    missing = [c for c in args.concurrency if c not in measured]
    if missing:
        raise RuntimeError(f"inflight-bench-executor printed no latency line for concurrency {missing}")
    shown = [os.path.basename(command[0])] + ["<engine>" if a == engine_dir else a for a in command[1:]]
    return measured, "measured here (`" + " ".join(shown) + "`)"


def main(argv=None):
    args = parse_arguments(argv)
    # A timeout's SIGTERM unwinds through the finally below, which stops the server.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    runner = Runner(args)
    work = args.work_dir or tempfile.mkdtemp(prefix="inflight-server-overhead-")
    os.makedirs(work, exist_ok=True)
    server = None
    status = 0
    report = [f"## Server overhead ({args.shape[0]}/{args.shape[1]}, {args.requests} requests per concurrency)", ""]
    try:
        engine_dir = args.engine_dir or make_engine(runner, work, args)
        config = engine_config(engine_dir)
        executor, executor_source = measure_executor(runner, work, args, engine_dir)
        repo = make_repository(work, os.path.abspath(engine_dir), config, args.busy_poll)
        started = time.monotonic()
        server = Server(runner, repo, work, args.startup_timeout)
        ready_s = time.monotonic() - started
        measured = measure_server(runner, server, work, args, int(config["vocab_size"]))
        lines, machine = overhead_table(args.shape, args.requests, executor, measured, args.target_ms)
        phases = measure_phases(server.port, args, int(config["vocab_size"]))
        lines += ["", "Concurrency 1 through the server, by phase (p50 of each, ms; return_perf_metrics):", "",
                  "| client send -> executor | -> first scheduled | -> last token | -> client has the reply | "
                  "total |", "|---:|---:|---:|---:|---:|",
                  "| " + " | ".join(f"{phases[p]:.3f}" for p in ("in", "wait", "generate", "out", "total")) + " |"]
        machine.append("server_phases: " + " ".join(f"{p}_ms={phases[p]:.4f}" for p in phases))
        report += lines + [
            "",
            f"Engine: {config.get('architecture')} {config.get('dtype')}, {config.get('num_layers')} layers, "
            f"hidden {config.get('hidden_size')}. Executor alone: {executor_source}. Server: inflight-server "
            f"(ready {ready_s:.1f} s after start) with only the tensorrt_llm model, non-decoupled, KV cache "
            "reuse off; client tools/benchmark_core_model.py token-norm-dist (stdev 0), "
            f"{args.warmup} untimed requests before each concurrency. Latency: executor = enqueueRequest to the "
            "final response; server = HTTP request sent to the last byte of the reply; nearest-rank percentiles.",
            ""] + machine
    except (RuntimeError, OSError, subprocess.SubprocessError, KeyError, ValueError) as e:
        report += [f"FAILED: {e}"]
        status = 1
    finally:
        if server is not None:
            server.stop()
        if not args.work_dir and status == 0:
            shutil.rmtree(work, ignore_errors=True)
        elif status != 0:
            report.append(f"(logs kept in {work})")
    text = "\n".join(report) + "\n"
    print(text, end="", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
