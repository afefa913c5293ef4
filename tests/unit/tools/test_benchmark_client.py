"""Tests of tools/benchmark_core_model.py: its statistics and output format, against a small in-process
fake of the generate endpoints (this tests the client, not a server).

Run: python3 -m unittest -v test_benchmark_client   (from this folder), or through ctest.
"""
import contextlib
import csv
import http.server
import importlib.util
import io
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REPO = os.environ.get("INFLIGHT_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO, "tools", "benchmark_core_model.py")

spec = importlib.util.spec_from_file_location("benchmark_core_model", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


class FakeGenerate(http.server.BaseHTTPRequestHandler):
    """tensorrt_llm-like /generate: output_ids = prompt + request_output_len tokens (unless the server
    excludes the input), sequence_length = their count. /generate_stream: one SSE event per token."""
    protocol_version = "HTTP/1.1"  # keep-alive, as the client expects
    exclude_input = False
    seen = []  # (path, body) of every request
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.seen.append((self.path, body))
        ids, out_len = body["input_ids"], body["request_output_len"]
        generated = list(range(7, 7 + out_len))
        if self.path.endswith("/generate_stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for token in generated:
                time.sleep(0.001)
                self._chunk(f"data: {json.dumps({'output_ids': token})}\n\n".encode())
            self._chunk(b"")
            return
        output = generated if self.exclude_input else ids + generated
        payload = json.dumps({"model_name": "tensorrt_llm", "output_ids": output,
                              "sequence_length": len(output)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _chunk(self, data):
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


@contextlib.contextmanager
def fake_server(exclude_input=False):
    handler = type("Handler", (FakeGenerate,), {"exclude_input": exclude_input, "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler
    finally:
        server.shutdown()
        server.server_close()


def run_main(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = bench.main(argv)
    return code, out.getvalue()


def table_values(text):
    return {m.group(1).strip(): float(m.group(2)) for m in re.finditer(r"^\|\s*(.+?)\s*\|\s*([-\d.]+)\s*\|$",
                                                                         text, re.M)}


class StatisticsTest(unittest.TestCase):
    def records(self, latencies_ms):
        records = []
        for i, latency in enumerate(latencies_ms):
            r = bench.RequestRecord(i, bench.Prompt(input_len=10 + i % 3, output_len=5))
            r.start, r.end, r.output_tokens = i * 0.001, i * 0.001 + latency / 1000.0, 5 + i % 2
            records.append(r)
        return records

    def test_nearest_rank_percentiles_on_shuffled_latencies(self):
        latencies = list(range(1, 201))  # 1..200 ms
        random.Random(3).shuffle(latencies)
        stats = dict(bench.compute_stats(self.records(latencies), streaming=False))
        self.assertAlmostEqual(stats["P99 latency (ms)"], 198.0, places=6)
        self.assertAlmostEqual(stats["P90 latency (ms)"], 180.0, places=6)
        self.assertAlmostEqual(stats["Avg. latency (ms)"], 100.5, places=6)
        self.assertEqual(stats["Total requests"], 200)
        self.assertAlmostEqual(stats["Avg. OP tokens per request"], 5.5)
        ip = sum(10 + i % 3 for i in range(200)) / 200
        self.assertAlmostEqual(stats["Avg. IP tokens per request"], ip)

    def test_percentile_small_lists(self):
        self.assertEqual(bench.percentile([4.0], 0.99), 4.0)
        self.assertEqual(bench.percentile([1.0, 2.0, 3.0], 0.5), 2.0)
        self.assertEqual(bench.percentile([1.0, 2.0, 3.0, 4.0], 0.5), 2.0)
        self.assertEqual(bench.percentile([1.0, 2.0, 3.0, 4.0], 0.9), 4.0)

    def test_rates_use_first_send_to_last_completion(self):
        records = self.records([100.0, 100.0])  # starts 0 and 1 ms, both 100 ms long: 101 ms total
        stats = dict(bench.compute_stats(records, streaming=False))
        self.assertAlmostEqual(stats["Total latency (ms)"], 101.0, places=6)
        self.assertAlmostEqual(stats["Requests/Sec"], 2 / 0.101, places=6)
        self.assertAlmostEqual(stats["OP tokens/sec"], 11 / 0.101, places=6)
        self.assertAlmostEqual(stats["Avg. InFlight requests"], 0.2 / 0.101, places=6)

    def test_failed_requests_are_left_out(self):
        records = self.records([10.0, 20.0, 30.0])
        records[2].error = "HTTP 500"
        stats = dict(bench.compute_stats(records, streaming=False))
        self.assertEqual(stats["Total requests"], 2)
        self.assertAlmostEqual(stats["Avg. latency (ms)"], 15.0, places=6)

    def test_table_matches_nvidia_layout(self):
        # tabulate's "pretty" layout: one space of margin, cells centred (extra space on the right).
        table = bench.format_table([("Requests/Sec", 40.8212), ("Total requests", 500)])
        self.assertEqual(table.splitlines(), [
            "+----------------+--------+",
            "|      Stat      | Value  |",
            "+----------------+--------+",
            "|  Requests/Sec  | 40.82  |",
            "| Total requests | 500.00 |",
            "+----------------+--------+",
        ])


class EndToEndTest(unittest.TestCase):
    def test_token_norm_dist_against_fake_server(self):
        with fake_server() as (port, handler), tempfile.TemporaryDirectory() as tmp:
            csv_path, plot_path = os.path.join(tmp, "stats.csv"), os.path.join(tmp, "plot.svg")
            trace_path = os.path.join(tmp, "trace.json")
            code, out = run_main([
                "-u", f"127.0.0.1:{port}", "-c", "4", "--max-input-len", "25", "--num-requests", "30",
                "--warmup-requests", "2", "--op-stats-csv", csv_path, "--plot", plot_path,
                "--dump-perfetto-trace", trace_path,
                "token-norm-dist", "--input-mean", "20", "--input-stdev", "10", "--output-mean", "6",
                "--output-stdev", "0"])
            self.assertEqual(code, 0, out)
            lines = out.splitlines()
            self.assertEqual(lines[0], "[INFO] Warm up for benchmarking.")
            self.assertRegex(out, r"\[INFO\] Start benchmarking on (\d+) prompts\.")
            self.assertRegex(out, r"\[INFO\] Total Latency: [\d.]+ ms")
            # The warm-up asks for NVIDIA's 100 tokens at most, here the prompts' own 6 (an engine sized
            # for the benchmark's requests may have no room for 100).
            self.assertEqual([body["request_output_len"] for _, body in handler.seen[:2]], [6, 6])
            sent = [body for path, body in handler.seen[2:]]  # after the 2 warm-up requests
            num = int(re.search(r"Start benchmarking on (\d+) prompts", out).group(1))
            self.assertEqual(len(sent), num)
            self.assertLess(num, 30, "some prompts should exceed --max-input-len 25 (mean 20, stdev 10)")
            values = table_values(out)
            self.assertEqual(values["Total requests"], num)
            self.assertAlmostEqual(values["Avg. OP tokens per request"], 6.0)
            mean_ip = sum(len(b["input_ids"]) for b in sent) / num
            self.assertAlmostEqual(values["Avg. IP tokens per request"], round(mean_ip, 2), places=2)
            for body in sent:
                self.assertEqual(len(body["input_ids"]), body["input_lengths"])
                self.assertLessEqual(body["input_lengths"], 25)
                self.assertEqual(body["end_id"], -1)
                self.assertTrue(all(1 <= t < 1000 for t in body["input_ids"]))
            self.assertTrue(all(p == "/v2/models/tensorrt_llm/generate" for p, _ in handler.seen))
            self.assertGreaterEqual(values["P99 latency (ms)"], values["P90 latency (ms)"])
            self.assertNotIn("Avg. TTFT (ms)", values)
            with open(csv_path, newline="") as f:
                row = next(csv.DictReader(f))
            self.assertEqual(float(row["Total requests"]), num)
            self.assertIn("Avg. Input tokens per request", row)
            with open(plot_path) as f:
                svg = f.read()
            self.assertEqual(svg.count("<circle"), num)
            with open(trace_path) as f:
                self.assertEqual(len(json.load(f)), num)

    def test_exclude_input_in_output_counts_only_generated_ids(self):
        with fake_server(exclude_input=True) as (port, _):
            code, out = run_main(["-u", f"127.0.0.1:{port}", "--max-input-len", "64", "--num-requests", "5",
                                  "--warmup-requests", "0", "--exclude-input-in-output", "token-norm-dist",
                                  "--input-mean", "30", "--input-stdev", "0", "--output-mean", "9",
                                  "--output-stdev", "0"])
        self.assertEqual(code, 0, out)
        values = table_values(out)
        self.assertAlmostEqual(values["Avg. OP tokens per request"], 9.0)
        self.assertAlmostEqual(values["Avg. IP tokens per request"], 30.0)

    def test_decoupled_streams_and_reports_ttft(self):
        with fake_server() as (port, handler):
            code, out = run_main(["-u", f"127.0.0.1:{port}", "--decoupled", "-c", "3", "--max-input-len", "64",
                                  "--num-requests", "6", "--warmup-requests", "1", "--request-rate", "200",
                                  "--time-delay-dist", "constant", "token-norm-dist", "--input-mean", "8",
                                  "--input-stdev", "0", "--output-mean", "12", "--output-stdev", "0"])
        self.assertEqual(code, 0, out)
        values = table_values(out)
        self.assertAlmostEqual(values["Avg. OP tokens per request"], 12.0)
        self.assertEqual(values["Total requests"], 6)
        self.assertLess(values["Avg. TTFT (ms)"], values["Avg. latency (ms)"])
        self.assertGreater(values["Avg. TPOT (ms)"], 0.5)  # the fake sleeps 1 ms per token
        self.assertTrue(all(p.endswith("/generate_stream") and b["streaming"] for p, b in handler.seen))

    def test_dataset_text_goes_to_the_ensemble_with_word_lengths(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "data.json")
            with open(path, "w") as f:
                json.dump([{"input": "one two three", "instruction": "four", "output": "a b c d e f g h i j"},
                           {"conversations": [{"from": "human", "value": "x y"},
                                              {"from": "gpt", "value": "p q r s t"}]}], f)
            prompts, text_mode = bench.make_prompts(bench.parse_arguments(
                ["--max-input-len", "100", "dataset", "--dataset", path]), random.Random(0), "h", 1)
        self.assertTrue(text_mode)
        self.assertEqual([(p.text, p.input_len, p.output_len) for p in prompts],
                         [("one two three four", 4, 13), ("x y", 2, 6)])
        sender = bench.Sender(["ensemble"], False, False, True)
        self.assertEqual(sender.body(prompts[0]),
                         {"text_input": "one two three four", "max_tokens": 13, "stream": False})
        self.assertEqual(sender.path(0), "/v2/models/ensemble/generate")

    def test_grpc_without_a_server_fails_with_a_clear_message(self):
        # Nothing listens on port 1: whether this Python has grpcio or not, the run ends with a message
        # saying what is missing or what failed, not a traceback.
        result = subprocess.run([sys.executable, SCRIPT, "-i", "grpc", "-u", "127.0.0.1:1", "--max-input-len", "10",
                                 "--num-requests", "2", "--warmup-requests", "1", "token-norm-dist",
                                 "--input-mean", "1", "--input-stdev", "0", "--output-mean", "1",
                                 "--output-stdev", "0"], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(result.returncode, 0)
        self.assertNotIn("Traceback", result.stderr)
        self.assertRegex(result.stdout + result.stderr,
                         r"-i grpc needs grpcio|Failed receiving responses: gRPC UNAVAILABLE")

    def test_grpc_request_has_the_tensors_tritonclient_sends(self):
        # The request builder alone (no channel): the body's fields as [1, n] / [1, 1] raw tensors.
        prompt = bench.Prompt(3, 5, input_ids=[11, 12, 13])
        sender = bench.GrpcSender.__new__(bench.GrpcSender)
        bench.Sender.__init__(sender, ["tensorrt_llm"], True, False, False)

        class Message:
            def __init__(self, **kw):
                self.model_name = kw.get("model_name")
                self.inputs, self.raw_input_contents = [], []

        class Tensor:
            def __init__(self):
                self.name, self.datatype, self.shape = None, None, []

        class Inputs(list):
            def add(self):
                self.append(Tensor())
                return self[-1]

        class Pb:
            @staticmethod
            def ModelInferRequest(**kw):
                m = Message(**kw)
                m.inputs = Inputs()
                return m

        sender.pb = Pb
        request = sender.request(0, prompt)
        tensors = {t.name: (t.datatype, t.shape, raw) for t, raw in zip(request.inputs, request.raw_input_contents)}
        self.assertEqual(request.model_name, "tensorrt_llm")
        self.assertEqual(tensors["input_ids"], ("INT32", [1, 3], bytes.fromhex("0b0000000c0000000d000000")))
        self.assertEqual(tensors["request_output_len"], ("INT32", [1, 1], (5).to_bytes(4, "little")))
        self.assertEqual(tensors["end_id"], ("INT32", [1, 1], (-1).to_bytes(4, "little", signed=True)))
        self.assertEqual(tensors["streaming"], ("BOOL", [1, 1], b"\x01"))

if __name__ == "__main__":
    unittest.main()
