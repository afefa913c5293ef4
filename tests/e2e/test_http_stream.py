"""/generate_stream over real HTTP: events in order as they are produced, errors as events, and a client
that hangs up cancelling its request in the backend."""

import time
import unittest

from inflight_client import InflightServer, get_metrics, metric, parse_metrics, stream_sse

MODELS = ["echo", "stream", "ensemble_stream"]


class HttpStreamTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        args = ["--model-control-mode=explicit"] + [f"--load-model={m}" for m in MODELS]
        cls.server = InflightServer(args).start()
        cls.port = cls.server.http_port

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        assert code == 0, f"inflight-server exited with {code}:\n{cls.server.log()}"

    def stream_metrics(self):
        status, _, text = get_metrics(self.server.metrics_port)
        self.assertEqual(status, 200)
        samples = parse_metrics(text)
        inflight = metric(samples, "echo_inflight_requests", model="stream")
        responses = metric(samples, "echo_response_count_sum", model="stream")
        self.assertIsNotNone(inflight, text)
        self.assertIsNotNone(responses, text)
        return inflight, responses

    def test_events_arrive_in_order_as_produced(self):
        result = stream_sse(self.port, "/v2/models/stream/generate_stream", {"IN0": [3, 1], "count": 6})
        self.assertEqual(result.status, 200)
        self.assertTrue(result.content_type.startswith("text/event-stream"), result.content_type)
        self.assertEqual([e["INDEX"] for e in result.events], list(range(6)))
        for event in result.events:
            self.assertEqual(event["model_name"], "stream")
            self.assertEqual(event["OUT_IN0"], [3, 1])
        # The model sleeps 20 ms between responses; events delivered one by one span that time, a buffered
        # body would arrive all at once.
        self.assertGreater(result.arrival_times[-1] - result.arrival_times[0], 0.06)

    def test_ensemble_with_a_streaming_step(self):
        result = stream_sse(self.port, "/v2/models/ensemble_stream/generate_stream", {"INPUT": [8], "COUNT": 4})
        self.assertEqual(result.status, 200, result.body)
        self.assertEqual([e["INDEX"] for e in result.events], [0, 1, 2, 3])
        for event in result.events:
            self.assertEqual(event["OUTPUT"], 8)

    def test_non_decoupled_model_streams_one_event(self):
        result = stream_sse(self.port, "/v2/models/echo/generate_stream", {"IN0": [5, 6]})
        self.assertEqual(len(result.events), 1)
        self.assertEqual(result.events[0]["OUT_IN0"], [5, 6])

    def test_error_becomes_the_last_event(self):
        result = stream_sse(self.port, "/v2/models/stream/generate_stream", {"IN0": [1], "count": 4, "fail": True})
        self.assertEqual(result.status, 200)
        self.assertGreaterEqual(len(result.events), 1)
        self.assertIn("error", result.events[-1])
        self.assertIsInstance(result.events[-1]["error"], str)
        for event in result.events[:-1]:
            self.assertNotIn("error", event)

    def test_refusal_before_inference_is_a_json_error(self):
        result = stream_sse(self.port, "/v2/models/stream/generate_stream", {"IN0": "not a number"})
        self.assertEqual(result.status, 400)
        self.assertIn("IN0", result.body["error"])

    def test_client_disconnect_cancels_the_request(self):
        _, responses_before = self.stream_metrics()
        # 500 responses 20 ms apart would take 10 s; the client leaves after 3.
        result = stream_sse(self.port, "/v2/models/stream/generate_stream", {"IN0": [1], "count": 500},
                            max_events=3)
        self.assertEqual(len(result.events), 3)
        deadline = time.monotonic() + 5
        inflight, responses = self.stream_metrics()
        while time.monotonic() < deadline and inflight != 0:
            time.sleep(0.05)
            inflight, responses = self.stream_metrics()
        self.assertEqual(inflight, 0, "the stream model still runs the abandoned request")
        sent = responses - responses_before
        self.assertGreaterEqual(sent, 3)
        self.assertLess(sent, 250, "the backend did not see the cancellation")


if __name__ == "__main__":
    unittest.main()
