"""bench/server_overhead.py: its parsing and table without a server; with INFLIGHT_BENCH_BIN_DIR and
INFLIGHT_BACKEND_DIR set, the whole comparison on a tiny random engine (CPU)."""
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("INFLIGHT_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(SOURCE, "bench", "server_overhead.py")
spec = importlib.util.spec_from_file_location("server_overhead", SCRIPT)
server_overhead = importlib.util.module_from_spec(spec)
spec.loader.exec_module(server_overhead)

EXECUTOR_OUTPUT = """## Request latency (128/64, 24 requests per concurrency, closed loop)

| concurrency | in/out | ...
latency: concurrency=1 shape=128/64 requests=24 p50_ms=10.5000 p90_ms=11.2500 p99_ms=12.0000
latency: concurrency=8 shape=128/64 requests=24 p50_ms=20.0000 p90_ms=25.0000 p99_ms=30.0000
latency: concurrency=1 shape=128/32 requests=24 p50_ms=1.0 p90_ms=1.0 p99_ms=1.0
latency: concurrency=2 shape=128/64 requests=8 p50_ms=1.0 p90_ms=1.0 p99_ms=1.0
"""


class ParsingTest(unittest.TestCase):
    def test_arguments(self):
        args = server_overhead.parse_arguments(["--bin_dir", "b", "--backend_dir", "d"])
        self.assertEqual((args.concurrency, args.shape, args.requests, args.target_ms, args.preset),
                         ([1, 8], (128, 64), 24, 1.0, "tiny"))
        args = server_overhead.parse_arguments(["--bin_dir", "b", "--backend_dir", "d", "--concurrency", "2,4",
                                                "--shape", "16/8", "--requests", "5"])
        self.assertEqual((args.concurrency, args.shape, args.requests), ([2, 4], (16, 8), 5))
        for bad in (["--shape", "16x8"], ["--concurrency", "0"], ["--requests", "0"], ["--warmup", "-1"]):
            with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
                server_overhead.parse_arguments(["--bin_dir", "b", "--backend_dir", "d"] + bad)

    def test_executor_lines_of_the_same_shape_and_count_only(self):
        self.assertEqual(server_overhead.parse_executor_latency(EXECUTOR_OUTPUT, (128, 64), 24),
                         {1: (10.5, 11.25, 12.0), 8: (20.0, 25.0, 30.0)})
        self.assertEqual(server_overhead.parse_executor_latency(EXECUTOR_OUTPUT, (128, 64), 8),
                         {2: (1.0, 1.0, 1.0)})

    def test_percentile_is_nearest_rank(self):
        values = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6]
        self.assertEqual(server_overhead.percentile(values, 0.5), 5)
        self.assertEqual(server_overhead.percentile(values, 0.9), 9)
        self.assertEqual(server_overhead.percentile([7.0], 0.99), 7.0)

    def test_trace_durations_are_milliseconds(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            with open(path, "w") as f:
                json.dump([{"name": "req_0", "ph": "X", "ts": 0, "dur": 1500.0},
                           {"name": "req_1", "ph": "X", "ts": 10, "dur": 250.0}], f)
            self.assertEqual(server_overhead.trace_latencies_ms(path), [1.5, 0.25])

    def test_table_and_verdict(self):
        lines, machine = server_overhead.overhead_table((128, 64), 24, {1: (10.0, 11.0, 12.0), 8: (20.0, 25.0, 30.0)},
                                                        {1: (10.6, 11.5, 13.0), 8: (22.0, 27.5, 31.0)}, 1.0)
        self.assertEqual(lines[0].count("|"), lines[2].count("|"))
        self.assertEqual(lines[2], "| 1 | 128/64 | 24 | 10.000 | 10.600 | +0.600 | 11.000 | 11.500 | +0.500 | yes |")
        self.assertTrue(lines[3].endswith("| +2.000 | 25.000 | 27.500 | +2.500 | NO |"))
        self.assertIn("added_p50_ms=0.6000", machine[0])
        self.assertIn("within_target=NO", machine[1])


@unittest.skipUnless(os.environ.get("INFLIGHT_BENCH_BIN_DIR") and os.environ.get("INFLIGHT_BACKEND_DIR"),
                     "INFLIGHT_BENCH_BIN_DIR and INFLIGHT_BACKEND_DIR are not set")
class TinyEngineEndToEndTest(unittest.TestCase):
    def test_both_paths_measured_and_compared(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "overhead.md")
            done = subprocess.run([sys.executable, SCRIPT, "--bin_dir", os.environ["INFLIGHT_BENCH_BIN_DIR"],
                                   "--backend_dir", os.environ["INFLIGHT_BACKEND_DIR"], "--preset", "tiny",
                                   "--shape", "32/8", "--requests", "6", "--concurrency", "1,3", "--out", out],
                                  capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            with open(out) as f:
                text = f.read()
            for c in (1, 3):
                self.assertRegex(text, rf"\n\| {c} \| 32/8 \| 6 \| [0-9.]+ \| [0-9.]+ \| [+-][0-9.]+ \|")
                self.assertRegex(text, rf"server_overhead: concurrency={c} shape=32/8 executor_p50_ms=[0-9.]+ ")


if __name__ == "__main__":
    unittest.main()
