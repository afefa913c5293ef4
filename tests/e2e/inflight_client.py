"""Helpers for end-to-end tests of inflight-server, Python 3 standard library only.

InflightServer starts the real binary on 127.0.0.1 with free ports (--http-port=0 / --grpc-port=0 /
--metrics-port=0: the server binds any free port and prints it in its "Started HTTPService at <addr>:<port>"
and "Started GRPCInferenceService at <addr>:<port>" lines), waits for it,
and stops it with SIGTERM. The request helpers speak plain HTTP/1.1: JSON in and out, and Server-Sent
Events for /generate_stream.

Environment (set by tests/e2e/CMakeLists.txt):
  INFLIGHT_SERVER             path of the inflight-server binary
  INFLIGHT_TEST_BACKEND_DIR   --backend-directory holding inflight_test_echo/libtriton_inflight_test_echo.so
  INFLIGHT_TEST_MODEL_REPO    the test model repository (tests/backends/models)
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

_STARTED_HTTP = re.compile(r"Started HTTPService at (\S+):(\d+)")
_STARTED_METRICS = re.compile(r"Started Metrics Service at (\S+):(\d+)")
_STARTED_GRPC = re.compile(r"Started GRPCInferenceService at (\S+):(\d+)")


def make_llm_model(repo, name, substitutions):
    """repo/name: the tensorrt_llm template filled by tools/fill_template.py with `substitutions`
    ("key:value,..."), the model named after its folder. Needs INFLIGHT_SOURCE_DIR."""
    src = env_or_skip("INFLIGHT_SOURCE_DIR")
    model = os.path.join(repo, name)
    shutil.copytree(os.path.join(src, "all_models", "inflight_batcher_llm", "tensorrt_llm"), model)
    config = os.path.join(model, "config.pbtxt")
    subprocess.run([sys.executable, os.path.join(src, "tools", "fill_template.py"), "-i", config,
                    substitutions], check=True)
    with open(config) as f:
        text = f.read()
    with open(config, "w") as f:
        f.write(text.replace('name: "tensorrt_llm"', f'name: "{name}"'))


def env_or_skip(name):
    value = os.environ.get(name)
    if not value:
        raise unittest.SkipTest(f"{name} is not set (run through ctest, or export it)")
    return value


class InflightServer:
    """One inflight-server process. Use as a context manager, or call start() / stop()."""

    def __init__(self, args=(), model_repository=None, backend_directory=None, wait_ready=True,
                 startup_timeout=60.0, log_file=None):
        self.binary = env_or_skip("INFLIGHT_SERVER")
        self.model_repository = model_repository or env_or_skip("INFLIGHT_TEST_MODEL_REPO")
        self.backend_directory = backend_directory or env_or_skip("INFLIGHT_TEST_BACKEND_DIR")
        self.args = list(args)
        self.wait_ready = wait_ready
        self.startup_timeout = startup_timeout
        self.log_file = log_file
        self.process = None
        self.http_port = None
        self.metrics_port = None
        self.grpc_port = None  # None when the server serves no gRPC (--allow-grpc=false, or built without)
        self._lines = []
        self._lines_lock = threading.Lock()
        self._reader = None

    def command(self):
        # The test repository holds models that fail to load on purpose; tests that want tritonserver's
        # default (--exit-on-error=true: exit when one fails) ask for it.
        exit_on_error = [] if any(a.startswith("--exit-on-error") for a in self.args) else ["--exit-on-error=false"]
        return [self.binary, f"--model-repository={self.model_repository}",
                f"--backend-directory={self.backend_directory}", "--http-address=127.0.0.1",
                "--http-port=0", "--grpc-address=127.0.0.1", "--grpc-port=0", "--metrics-port=0",
                *exit_on_error, *self.args]

    def start(self):
        self.process = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # Drained all the time: a full pipe would block the server's logging.
        self._reader = threading.Thread(target=self._read_output, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.startup_timeout
        metrics_wanted = not any(a.startswith("--allow-metrics=false") for a in self.args)
        while time.monotonic() < deadline:
            text = self.log()
            if self.log_file and os.path.exists(self.log_file):
                with open(self.log_file, encoding="utf-8", errors="replace") as f:
                    text += f.read()
            http_match = _STARTED_HTTP.search(text)
            metrics_match = _STARTED_METRICS.search(text)
            if http_match and (metrics_match or not metrics_wanted):
                self.http_port = int(http_match.group(2))
                self.metrics_port = int(metrics_match.group(2)) if metrics_match else None
                grpc_match = _STARTED_GRPC.search(text)
                self.grpc_port = int(grpc_match.group(2)) if grpc_match else None
                break
            if self.process.poll() is not None:
                raise RuntimeError(f"inflight-server exited with {self.process.returncode} before starting:\n"
                                   + self.log())
            time.sleep(0.02)
        else:
            self.kill()
            raise RuntimeError("inflight-server did not print its Started lines in time:\n" + self.log())
        if self.wait_ready:
            try:
                self.wait_until_ready(deadline)
            except RuntimeError:
                self.kill()  # a test that fails here must not leave a server behind
                raise
        return self

    def wait_until_ready(self, deadline):
        while time.monotonic() < deadline:
            try:
                if request("GET", self.http_port, "/v2/health/ready")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("inflight-server never became ready:\n" + self.log())

    def _read_output(self):
        for raw in self.process.stdout:
            with self._lines_lock:
                self._lines.append(raw.decode("utf-8", errors="replace"))

    def log(self):
        with self._lines_lock:
            return "".join(self._lines)

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        """Signals the server and returns its exit code (None if it had to be killed)."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self._reader.join(timeout=5)
        return code

    def kill(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def request(method, port, path, body=None, headers=None, timeout=30.0):
    """One HTTP request on a fresh connection: (status, headers dict with lower-case keys, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode("utf-8")
        all_headers = {"Content-Type": "application/json"} if body is not None else {}
        all_headers.update(headers or {})
        conn.request(method, path, body=body, headers=all_headers)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def _decode(data):
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", errors="replace")


def get_json(port, path, timeout=30.0):
    status, _, data = request("GET", port, path, timeout=timeout)
    return status, _decode(data)


def post_json(port, path, body, timeout=30.0):
    status, _, data = request("POST", port, path, body=body, timeout=timeout)
    return status, _decode(data)


class SseResult:
    def __init__(self, status, content_type, events, arrival_times, body=None):
        self.status = status
        self.content_type = content_type
        self.events = events  # parsed "data:" payloads, in order
        self.arrival_times = arrival_times  # time.monotonic() when each event arrived
        self.body = body  # the JSON error body when the server refused before streaming


def stream_sse(port, path, body, max_events=None, timeout=30.0, on_event=None):
    """POSTs to a generate_stream URL and reads its events. With max_events, hangs up abruptly after that
    many (the socket is closed, as a client that goes away does). on_event(event) is called as each
    arrives."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body).encode("utf-8"),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        content_type = resp.getheader("Content-Type", "")
        if not content_type.startswith("text/event-stream"):
            return SseResult(resp.status, content_type, [], [], _decode(resp.read()))
        events, times, data_lines = [], [], []
        while True:
            line = resp.readline()  # http.client undoes the chunked framing
            if not line:
                break
            line = line.decode("utf-8").rstrip("\r\n")
            if line.startswith("data:"):
                data_lines.append(line[5:].lstrip(" "))
            elif line == "" and data_lines:
                events.append(json.loads("\n".join(data_lines)))
                times.append(time.monotonic())
                data_lines = []
                if on_event:
                    on_event(events[-1])
                if max_events and len(events) >= max_events:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                    break
        return SseResult(resp.status, content_type, events, times)
    finally:
        conn.close()


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Prometheus text → {(name, frozenset(labels.items())): value}."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = frozenset(_LABEL.findall(m.group(2) or ""))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def metric(samples, name, **labels):
    """The value of one sample, or None."""
    return samples.get((name, frozenset(labels.items())))


def get_metrics(port):
    status, headers, data = request("GET", port, "/metrics")
    return status, headers, data.decode("utf-8")


# Metric families of the LLM model's statistics (NVIDIA's names).
KV_FAMILIES = ("nv_trt_llm_kv_cache_block_metrics",)
ACTIVE_FAMILIES = ("nv_trt_llm_request_metrics",)


def first_sample(text, names, **labels):
    """The value of the first sample of any of `names` whose labels include `labels`."""
    for (name, sample_labels), value in parse_metrics(text).items():
        if name in names and set(labels.items()) <= set(sample_labels):
            return value
    raise AssertionError(f"none of {names} {labels} in the metrics")


def wait_llm_idle(metrics_port, timeout=5.0):
    """Waits until the LLM model has no active request and every KV block is free; AssertionError with
    what is left after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        _, _, text = get_metrics(metrics_port)
        active = first_sample(text, ACTIVE_FAMILIES, request_type="active")
        free = first_sample(text, KV_FAMILIES, kv_cache_block_type="free")
        total = first_sample(text, KV_FAMILIES, kv_cache_block_type="max")
        if active == 0 and free == total:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"still {active} active request(s), {free} of {total} KV blocks free")
        time.sleep(0.05)
