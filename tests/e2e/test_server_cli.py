"""inflight-server's command line, start-up report and shutdown, as scripts use them."""

import os
import signal
import socket
import subprocess
import tempfile
import unittest

from inflight_client import InflightServer, env_or_skip, get_json, request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_server(*args, timeout=30):
    binary = env_or_skip("INFLIGHT_SERVER")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)


class ServerCliTest(unittest.TestCase):
    def test_help_lists_flags_and_exits_0(self):
        result = run_server("--help")
        self.assertEqual(result.returncode, 0, result.stderr)
        for flag in ("--model-repository", "--backend-directory", "--http-port", "--metrics-port",
                     "--backend-config", "--model-control-mode", "--load-model", "--log-verbose"):
            self.assertIn(flag, result.stdout)

    def test_unknown_flag_is_named(self):
        result = run_server("--model-repository=/nonexistent", "--no-such-flag=1")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--no-such-flag", result.stderr)

    def test_bad_values_are_refused(self):
        result = run_server("--model-repository=/x", "--http-port=eighty")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("eighty", result.stderr)
        result = run_server("--model-repository=/x", "--model-control-mode=poll")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("none, explicit", result.stderr)
        result = run_server("--model-repository")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("needs a value", result.stderr)

    def test_whole_repository_reports_each_model(self):
        # Space-separated flag values, the other accepted form.
        server = InflightServer(["--grpc-port", "0", "--strict-readiness", "true"], wait_ready=False)
        with server:
            log = server.log()
            self.assertIn("| Model", log)
            self.assertRegex(log, r"\| echo\s+\| 1\s+\| READY")
            self.assertRegex(log, r"\| broken_config\s+\|.*UNAVAILABLE")
            self.assertRegex(log, r"Started GRPCInferenceService at 127\.0\.0\.1:[1-9]\d*")
            status, index = get_json(server.http_port, "/v2/health/live")
            self.assertEqual(status, 200)
            # broken_config and friends never load, so a strictly ready server is not ready.
            self.assertEqual(request("GET", server.http_port, "/v2/health/ready")[0], 400)
            status, index = 0, None
            status, _, body = request("POST", server.http_port, "/v2/repository/index", body={})
            self.assertEqual(status, 200)
            self.assertIn(b"broken_config", body)
            self.assertEqual(request("GET", server.http_port, "/v2/models/broken_config/ready")[0], 400)
            self.assertEqual(request("GET", server.http_port, "/v2/models/echo/ready")[0], 200)

    def test_exit_on_error_stops_when_a_model_fails(self):
        server = InflightServer(["--exit-on-error=true"], wait_ready=False)
        with self.assertRaises(RuntimeError):
            server.start()
        self.assertEqual(server.process.returncode, 1)
        self.assertIn("failed to load all models", server.log())

    def test_exit_on_error_is_on_by_default_as_in_tritonserver(self):
        class DefaultServer(InflightServer):
            def command(self):
                return [c for c in super().command() if c != "--exit-on-error=false"]

        server = DefaultServer(wait_ready=False)
        with self.assertRaises(RuntimeError):
            server.start()
        self.assertEqual(server.process.returncode, 1)
        self.assertIn("failed to load all models", server.log())
        # Only the models asked for count: explicit mode with one good model serves.
        with DefaultServer(["--model-control-mode=explicit", "--load-model=echo"]) as server:
            self.assertEqual(request("GET", server.http_port, "/v2/models/echo/ready")[0], 200)

    def test_sigint_stops_cleanly_and_log_file_is_written(self):
        with tempfile.TemporaryDirectory() as tmp:
            log_file = os.path.join(tmp, "server.log")
            server = InflightServer(["--model-control-mode=explicit", "--load-model=echo", f"--log-file={log_file}",
                                     "--log-verbose=1"], log_file=log_file)
            server.start()
            self.assertEqual(request("GET", server.http_port, "/v2/models/echo/ready")[0], 200)
            self.assertEqual(server.stop(signal.SIGINT), 0, server.log())
            with open(log_file, encoding="utf-8") as f:
                text = f.read()
            self.assertIn("Started HTTPService at 127.0.0.1:", text)
            self.assertIn("Signal (2) received", text)


class TritonCommandLineTest(unittest.TestCase):
    """tritonserver's command-line habits: prefixes, aliases, and the options seeds pass."""

    def test_seed_004_prefixed_command_line_serves(self):
        # mpirun ... tritonserver --http-port=18000 --metrics-port=18002 --grpc-port=18001
        #     --model-repo=${MODEL_FOLDER}  (free ports instead of 18000/18002)
        class PrefixedServer(InflightServer):
            def command(self):
                return [self.binary, "--http-p", "0", "--metrics-port=0", f"--grpc-port={free_port()}",
                        f"--model-repo={self.model_repository}",
                        f"--backend-dir={self.backend_directory}", "--http-a=127.0.0.1",
                        "--model-control-mode=explicit", "--load-model=echo"]

        with PrefixedServer() as server:
            self.assertEqual(request("GET", server.http_port, "/v2/models/echo/ready")[0], 200)
            self.assertRegex(server.log(), r"Started GRPCInferenceService at 0\.0\.0\.0:\d+")

    def test_ambiguous_and_misspelt_options_name_the_candidates(self):
        result = run_server("--model=/x")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("option --model is ambiguous; possibilities: --model-repository, --model-store",
                      result.stderr)
        result = run_server("--model_repo=/x")
        self.assertIn("did you mean --model-repository?", result.stderr)

    def test_unsupported_requests_are_refused_by_name(self):
        result = run_server("--model-store=/x", "--trace-config=rate=100")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--trace-config=rate=100 is not supported", result.stderr)


if __name__ == "__main__":
    unittest.main()
