"""inflight-server's command line, start-up report and shutdown, as scripts use them."""

import os
import signal
import subprocess
import tempfile
import unittest

from inflight_client import InflightServer, env_or_skip, get_json, request


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
        # Space-separated flag values, the other accepted form; gRPC is accepted with a warning.
        server = InflightServer(["--grpc-port", "0", "--strict-readiness", "true"], wait_ready=False)
        with server:
            log = server.log()
            self.assertIn("| Model", log)
            self.assertRegex(log, r"\| echo\s+\| 1\s+\| READY")
            self.assertRegex(log, r"\| broken_config\s+\|.*UNAVAILABLE")
            self.assertIn("gRPC is not served", log)
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


if __name__ == "__main__":
    unittest.main()
