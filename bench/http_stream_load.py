#!/usr/bin/env python3
"""The HTTP layer under many concurrent streams: what inflight-server spends per streamed token and
how late tokens and health probes get, with N /generate_stream clients on the CPU demo model.

    bench/http_stream_load.py --server build/bin/inflight-server --backend_dir build/backends \\
        --repo build/e2e_llm/default/triton_model_repo --streams 64,256 --tokens 32

The repository is the one tools/prepare_demo.sh makes (tests/e2e/llm.cmake runs it as
e2e_llm_prepare_repos); only its tensorrt_llm model is loaded. For each N: N clients (one asyncio loop,
one connection each) POST tensorrt_llm/generate_stream with the same 16 prompt ids, streaming, and read
every event; a prober asks /v2/health/ready every 20 ms meanwhile. Printed, one line per N:
  - cpu_ms_per_token: the server process's CPU time (utime + stime from /proc, all threads, model
    included) over the run, divided by the tokens streamed. The model's share is the same in runs of
    two builds with the same repository, so their difference is the HTTP layer's.
  - http_cpu_ms_per_token: the same for the threads named http-io alone (the Beast io pool; builds
    whose HTTP threads have no name of their own print "n/a").
  - ttft p50/p99 and itl p50/p99: time to first token and between tokens, seen by the clients.
  - health p50/p99/max: /v2/health/ready latency during the load.
Python 3 standard library only; Linux (/proc). Exit 0 when every stream finished.
"""
import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

STARTED_HTTP = re.compile(r"Started HTTPService at (\S+):(\d+)")
PROMPT_IDS = [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 632, 318, 257, 922, 1110, 13]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(pid):
    """{thread name: CPU seconds} of every thread of `pid`, and the process total."""
    by_name = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        seconds = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
        by_name[name] = by_name.get(name, 0.0) + seconds
    # The process's own counters also hold the threads that ended.
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    total = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return by_name, total


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]


async def one_stream(port, tokens, result):
    body = json.dumps({"input_ids": [PROMPT_IDS], "input_lengths": [len(PROMPT_IDS)],
                       "request_output_len": [tokens], "streaming": [True]}).encode()
    start = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v2/models/tensorrt_llm/generate_stream HTTP/1.1\r\nHost: bench\r\n"
                 b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
                 b"\r\n\r\n" + body)
    await writer.drain()
    times = []
    status = await reader.readline()
    if b" 200 " not in status:
        result["failed"] += 1
        writer.close()
        return
    while True:
        line = await reader.readline()
        if not line:
            break
        if line.startswith(b"data:"):
            times.append(time.monotonic())
            if b'"error"' in line:
                result["failed"] += 1
        elif line.strip() == b"0":  # the last chunk of the chunked body
            break
    writer.close()
    if times:
        result["ttft"].append(times[0] - start)
        result["itl"].extend(b - a for a, b in zip(times, times[1:]))
    result["tokens"] += len(times)


def probe_health(port, stop, latencies):
    import http.client
    while not stop.is_set():
        start = time.monotonic()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/v2/health/ready")
            conn.getresponse().read()
            conn.close()
            latencies.append(time.monotonic() - start)
        except OSError:
            latencies.append(float("inf"))
        stop.wait(0.02)


async def run_streams(port, n, tokens):
    result = {"ttft": [], "itl": [], "tokens": 0, "failed": 0}
    await asyncio.gather(*(one_stream(port, tokens, result) for _ in range(n)))
    return result


def start_server(args):
    command = [args.server, f"--model-repository={args.repo}", f"--backend-directory={args.backend_dir}",
               "--http-address=127.0.0.1", "--http-port=0", "--allow-grpc=false", "--allow-metrics=false",
               "--model-control-mode=explicit", "--load-model=tensorrt_llm"]
    command += args.server_arg
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        match = STARTED_HTTP.search(line)
        if match:
            threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()
            return process, int(match.group(2))
    process.kill()
    raise RuntimeError("inflight-server did not start:\n" + "".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True)
    parser.add_argument("--backend_dir", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--streams", default="64,256", help="comma-separated concurrencies")
    parser.add_argument("--tokens", type=int, default=32, help="tokens per stream")
    parser.add_argument("--server_arg", action="append", default=[], help="extra inflight-server option")
    parser.add_argument("--label", default="", help="printed on each line (e.g. main or http-beast)")
    args = parser.parse_args()
    process, port = start_server(args)
    ok = True
    try:
        import http.client
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/v2/health/ready")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        asyncio.run(run_streams(port, 4, 4))  # warm-up
        for n in [int(v) for v in args.streams.split(",")]:
            stop, health = threading.Event(), []
            prober = threading.Thread(target=probe_health, args=(port, stop, health))
            threads0, cpu0 = thread_cpu_seconds(process.pid)
            wall0 = time.monotonic()
            prober.start()
            result = asyncio.run(run_streams(port, n, args.tokens))
            stop.set()
            prober.join()
            wall = time.monotonic() - wall0
            threads1, cpu1 = thread_cpu_seconds(process.pid)
            tokens = max(1, result["tokens"])
            http_names = [name for name in threads1 if name.startswith("http-io")]
            http_cpu = sum(threads1[k] - threads0.get(k, 0.0) for k in http_names)
            http_text = f"{1000 * http_cpu / tokens:.3f}" if http_names else "n/a"
            print(f"http_stream_load: {args.label} streams={n} tokens={result['tokens']} failed={result['failed']} "
                  f"wall_s={wall:.2f} cpu_ms_per_token={1000 * (cpu1 - cpu0) / tokens:.3f} "
                  f"http_cpu_ms_per_token={http_text} "
                  f"ttft_p50_ms={1000 * percentile(result['ttft'], 0.5):.1f} "
                  f"ttft_p99_ms={1000 * percentile(result['ttft'], 0.99):.1f} "
                  f"itl_p50_ms={1000 * percentile(result['itl'], 0.5):.2f} "
                  f"itl_p99_ms={1000 * percentile(result['itl'], 0.99):.2f} "
                  f"health_p50_ms={1000 * percentile(health, 0.5):.1f} "
                  f"health_p99_ms={1000 * percentile(health, 0.99):.1f} "
                  f"health_max_ms={1000 * max(health or [0]):.1f} probes={len(health)}", flush=True)
            ok = ok and result["failed"] == 0 and result["tokens"] == n * args.tokens
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
