"""Graceful stop as tritonserver's: on SIGTERM the server refuses new connections, lets requests in flight
finish for up to --exit-timeout-secs, then cancels what is left and exits 0."""

import signal
import socket
import threading
import time
import unittest

from inflight_client import InflightServer, request, stream_sse

MODELS = ["echo", "stream", "ensemble_stream"]


def start_server(*extra):
    args = ["--model-control-mode=explicit"] + [f"--load-model={m}" for m in MODELS] + list(extra)
    return InflightServer(args).start()


class StreamInBackground:
    """A generate_stream request read on a thread; `first_event` is set once the stream is under way."""

    def __init__(self, port, path, body):
        self.first_event = threading.Event()
        self.result = None
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(port, path, body))
        self.thread.start()

    def _run(self, port, path, body):
        try:
            self.result = stream_sse(port, path, body, timeout=60, on_event=lambda e: self.first_event.set())
        except Exception as e:  # reported by the test
            self.error = e
        finally:
            self.first_event.set()

    def join(self, timeout):
        self.thread.join(timeout)
        return not self.thread.is_alive()


def refused(port):
    # A connect that lands in the listen backlog just before the server closes its acceptor is reset by
    # the kernel rather than refused; either way the server did not take it.
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return False
    except (ConnectionRefusedError, ConnectionResetError):
        return True


def closed_by_peer(sock):
    """True once the peer closed `sock`: an orderly end of stream, or a reset when the connection was
    still in the listen backlog (never accepted) as the server closed its acceptor."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


class GracefulStopTest(unittest.TestCase):
    def test_sigterm_lets_a_stream_finish_and_refuses_new_connections(self):
        server = start_server("--exit-timeout-secs=30")
        # 40 responses 20 ms apart: ~0.8 s of streaming, most of it after the signal.
        stream = StreamInBackground(server.http_port, "/v2/models/ensemble_stream/generate_stream",
                                    {"INPUT": [7], "COUNT": 40})
        self.assertTrue(stream.first_event.wait(30))
        start = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not refused(server.http_port) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertTrue(refused(server.http_port), "the server still accepts connections after SIGTERM")
        self.assertTrue(stream.join(30), "the stream never ended")
        self.assertIsNone(stream.error)
        self.assertEqual([e["INDEX"] for e in stream.result.events], list(range(40)))
        code = server.process.wait(timeout=30)
        elapsed = time.monotonic() - start
        self.assertEqual(code, 0, server.log())
        self.assertLess(elapsed, 20, "the drain waited for nothing")
        self.assertIn("Signal (15) received", server.log())

    def test_requests_left_at_the_exit_timeout_are_cancelled(self):
        server = start_server("--exit-timeout-secs=1")
        # 1000 responses 20 ms apart would take 20 s; the exit timeout cuts it after 1 s.
        stream = StreamInBackground(server.http_port, "/v2/models/stream/generate_stream",
                                    {"IN0": [1], "count": 1000})
        self.assertTrue(stream.first_event.wait(30))
        start = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(timeout=30)
        elapsed = time.monotonic() - start
        self.assertEqual(code, 0, server.log())
        self.assertGreaterEqual(elapsed, 0.9)
        self.assertLess(elapsed, 10, "the exit timeout did not cancel the stream")
        self.assertTrue(stream.join(10))
        self.assertIsNone(stream.error)
        events = stream.result.events
        self.assertGreater(len(events), 10)
        self.assertLess(len(events), 1000)
        self.assertIn("still in flight after 1 s; cancelling them", server.log())

    def test_idle_server_stops_at_once(self):
        server = start_server()
        self.assertEqual(request("GET", server.http_port, "/v2/health/ready")[0], 200)
        idle = socket.create_connection(("127.0.0.1", server.http_port))  # keep-alive, no request
        try:
            start = time.monotonic()
            self.assertEqual(server.stop(), 0, server.log())
            self.assertLess(time.monotonic() - start, 10)
            idle.settimeout(10)
            self.assertTrue(closed_by_peer(idle))
        finally:
            idle.close()


if __name__ == "__main__":
    unittest.main()
