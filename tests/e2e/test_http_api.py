"""inflight-server's KServe v2 and generate endpoints over real HTTP, against the test backend's models."""

import threading
import time
import unittest

from inflight_client import InflightServer, get_json, get_metrics, metric, parse_metrics, post_json, request

# Only models that load: with --strict-readiness the server is ready once these are.
MODELS = ["echo", "stream", "batched", "slow_queue", "exec_error", "ensemble_echo", "ensemble_stream"]
MAX_INPUT = 16384


class HttpApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        args = ["--model-control-mode=explicit", f"--http-max-input-size={MAX_INPUT}"]
        args += [f"--load-model={m}" for m in MODELS]
        cls.server = InflightServer(args).start()
        cls.port = cls.server.http_port

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        assert code == 0, f"inflight-server exited with {code}:\n{cls.server.log()}"

    def post(self, path, body):
        return post_json(self.port, path, body)

    def assert_error(self, path, body, status, *fragments):
        got_status, got = post_json(self.port, path, body)
        self.assertEqual(got_status, status, got)
        self.assertIsInstance(got, dict, got)
        self.assertIn("error", got)
        for fragment in fragments:
            self.assertIn(fragment, got["error"])
        return got["error"]

    # --- health and metadata ---------------------------------------------------------------------

    def test_health(self):
        self.assertEqual(request("GET", self.port, "/v2/health/live")[0], 200)
        self.assertEqual(request("GET", self.port, "/v2/health/ready")[0], 200)

    def test_server_metadata(self):
        status, meta = get_json(self.port, "/v2")
        self.assertEqual(status, 200)
        self.assertEqual(meta["name"], "inflight")
        self.assertIsInstance(meta["version"], str)
        self.assertIn("generate", meta["extensions"])

    def test_model_metadata(self):
        status, meta = get_json(self.port, "/v2/models/echo")
        self.assertEqual(status, 200, meta)
        self.assertEqual(meta["name"], "echo")
        self.assertEqual(meta["versions"], ["1"])
        inputs = {t["name"]: t for t in meta["inputs"]}
        self.assertEqual(inputs["IN0"]["datatype"], "INT32")
        self.assertEqual(inputs["IN0"]["shape"], [-1])
        self.assertEqual(inputs["IN1"]["datatype"], "BYTES")
        outputs = {t["name"]: t for t in meta["outputs"]}
        self.assertEqual(outputs["OUT_IN1"]["datatype"], "BYTES")
        # A batching model shows the batch dim.
        status, meta = get_json(self.port, "/v2/models/batched/versions/1")
        self.assertEqual(status, 200, meta)
        self.assertEqual(meta["inputs"][0]["shape"], [-1, 2])
        self.assertEqual(meta["inputs"][0]["datatype"], "FP32")
        self.assertEqual(get_json(self.port, "/v2/models/ensemble_echo")[1]["platform"], "ensemble")

    def test_model_ready(self):
        self.assertEqual(request("GET", self.port, "/v2/models/echo/ready")[0], 200)
        self.assertEqual(request("GET", self.port, "/v2/models/echo/versions/1/ready")[0], 200)
        self.assertEqual(request("GET", self.port, "/v2/models/no_such_model/ready")[0], 404)

    def test_model_config(self):
        status, config = get_json(self.port, "/v2/models/stream/config")
        self.assertEqual(status, 200, config)
        self.assertEqual(config["name"], "stream")
        self.assertEqual(config["backend"], "inflight_test_echo")
        self.assertTrue(config["model_transaction_policy"]["decoupled"])
        self.assertEqual(config["input"][0]["data_type"], "TYPE_INT32")

    def test_model_stats_count_inferences(self):
        def success_count():
            status, stats = get_json(self.port, "/v2/models/batched/stats")
            self.assertEqual(status, 200, stats)
            entry = stats["model_stats"][0]
            self.assertEqual(entry["name"], "batched")
            return int(entry["inference_stats"]["success"]["count"])

        before = success_count()
        body = {"inputs": [{"name": "IN0", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]}
        self.assertEqual(self.post("/v2/models/batched/infer", body)[0], 200)
        # A backend reports a request's statistics after it sends the response (the Triton API's
        # order), so the client can see the response first: wait a little for the count.
        deadline = time.monotonic() + 5.0
        count = success_count()
        while count == before and time.monotonic() < deadline:
            time.sleep(0.01)
            count = success_count()
        self.assertEqual(count, before + 1)

    def test_repository_index(self):
        status, index = self.post("/v2/repository/index", {})
        self.assertEqual(status, 200, index)
        by_name = {entry["name"]: entry for entry in index}
        self.assertEqual(by_name["echo"]["state"], "READY")
        self.assertEqual(by_name["echo"]["version"], "1")

    # --- infer -----------------------------------------------------------------------------------

    def test_infer_echo_int_and_bytes(self):
        body = {"id": "abc-1",
                "inputs": [{"name": "IN0", "shape": [4], "datatype": "INT32", "data": [[1, -2], [3, 2147483647]]},
                           {"name": "IN1", "shape": [3], "datatype": "BYTES", "data": ["héllo", "", "a b"]}]}
        status, out = self.post("/v2/models/echo/infer", body)
        self.assertEqual(status, 200, out)
        self.assertEqual(out["model_name"], "echo")
        self.assertEqual(out["model_version"], "1")
        self.assertEqual(out["id"], "abc-1")
        outputs = {t["name"]: t for t in out["outputs"]}
        self.assertEqual(outputs["OUT_IN0"]["datatype"], "INT32")
        self.assertEqual(outputs["OUT_IN0"]["shape"], [4])
        self.assertEqual(outputs["OUT_IN0"]["data"], [1, -2, 3, 2147483647])
        self.assertEqual(outputs["OUT_IN1"]["datatype"], "BYTES")
        self.assertEqual(outputs["OUT_IN1"]["data"], ["héllo", "", "a b"])

    def test_infer_requested_outputs_only(self):
        body = {"inputs": [{"name": "IN0", "shape": [1], "datatype": "INT32", "data": [7]},
                           {"name": "IN1", "shape": [1], "datatype": "BYTES", "data": ["x"]}],
                "outputs": [{"name": "OUT_IN1"}]}
        status, out = self.post("/v2/models/echo/infer", body)
        self.assertEqual(status, 200, out)
        self.assertEqual([t["name"] for t in out["outputs"]], ["OUT_IN1"])

    def test_infer_batched_and_ensemble(self):
        body = {"inputs": [{"name": "IN0", "shape": [1, 2], "datatype": "FP32", "data": [0.5, -1.25]}]}
        status, out = self.post("/v2/models/batched/infer", body)
        self.assertEqual(status, 200, out)
        outputs = {t["name"]: t for t in out["outputs"]}
        self.assertEqual(outputs["OUT_IN0"]["data"], [0.5, -1.25])
        self.assertEqual(outputs["OUT_IN0"]["shape"], [1, 2])
        body = {"inputs": [{"name": "INPUT", "shape": [3], "datatype": "INT32", "data": [4, 5, 6]}]}
        status, out = self.post("/v2/models/ensemble_echo/infer", body)
        self.assertEqual(status, 200, out)
        self.assertEqual({t["name"]: t["data"] for t in out["outputs"]}["OUTPUT"], [4, 5, 6])

    def test_infer_refuses_decoupled_models(self):
        body = {"inputs": [{"name": "IN0", "shape": [1], "datatype": "INT32", "data": [1]}]}
        error = self.assert_error("/v2/models/stream/infer", body, 400)
        self.assertEqual(error, "HTTP end point doesn't support models with decoupled transaction policy")

    def test_infer_backend_errors_reach_the_client(self):
        body = {"inputs": [{"name": "IN0", "shape": [1], "datatype": "INT32", "data": [1]}]}
        status, out = self.post("/v2/models/exec_error/infer", body)
        self.assertGreaterEqual(status, 400, out)
        self.assertIn("execute_error is set", out["error"])
        body["inputs"].append({"name": "fail", "shape": [1], "datatype": "BOOL", "data": [True]})
        status, out = self.post("/v2/models/echo/infer", body)
        self.assertGreaterEqual(status, 400, out)
        self.assertIn("error", out)

    def test_malformed_bodies_are_400(self):
        path = "/v2/models/echo/infer"

        def one(shape, datatype, data, name="IN0"):
            return {"inputs": [{"name": name, "shape": shape, "datatype": datatype, "data": data}]}

        self.assert_error(path, '{"inputs": [', 400, "malformed JSON")
        self.assert_error(path, "[1, 2]", 400, "JSON object")
        self.assert_error(path, {"inputs": 3}, 400, "'inputs'")
        self.assert_error(path, one([1], "INT33", [1]), 400, "INT33")
        self.assert_error(path, one([3], "INT32", [1, 2]), 400, "IN0", "3")
        self.assert_error(path, one([1], "INT32", ["one"]), 400, "IN0", "INT32")
        self.assert_error(path, one([1], "INT32", [1 << 40]), 400, str(1 << 40))
        self.assert_error(path, one([-2], "INT32", [1]), 400, "shape")
        self.assert_error(path, one([1], "BYTES", [5], name="IN1"), 400, "IN1", "string")
        self.assert_error(path, {"parameters": {"p": {"nested": 1}}, "inputs": []}, 400, '"p"')
        # The core checks the request against the model: a missing required input, a wrong dtype.
        self.assert_error(path, one([1], "BYTES", ["x"], name="IN1"), 400, "IN0")
        self.assert_error(path, one([1], "FP32", [1.0]), 400, "IN0")
        # /generate: a value the input's datatype cannot hold, a parameter that is a list.
        self.assert_error("/v2/models/echo/generate", {"IN0": "seven"}, 400, "IN0")
        self.assert_error("/v2/models/echo/generate", {"IN0": [1], "stop_words": [1, 2]}, 400, "stop_words")
        self.assert_error("/v2/models/echo/generate", "not json", 400, "malformed JSON")

    def test_unknown_model_is_404(self):
        body = {"inputs": [{"name": "IN0", "shape": [1], "datatype": "INT32", "data": [1]}]}
        self.assert_error("/v2/models/no_such_model/infer", body, 404, "no_such_model")
        self.assert_error("/v2/models/no_such_model/generate", {"IN0": [1]}, 404)
        self.assert_error("/v2/models/no_such_model/generate_stream", {"IN0": [1]}, 404)
        self.assertEqual(get_json(self.port, "/v2/models/no_such_model")[0], 404)
        self.assertEqual(get_json(self.port, "/v2/models/no_such_model/config")[0], 404)

    def test_oversized_body_is_413(self):
        body = {"inputs": [{"name": "IN1", "shape": [1], "datatype": "BYTES", "data": ["x" * (MAX_INPUT * 2)]}]}
        self.assert_error("/v2/models/echo/infer", body, 413, "--http-max-input-size")
        self.assertEqual(request("GET", self.port, "/v2/health/live")[0], 200)

    def test_full_queue_is_503_with_tritons_text(self):
        results = []
        lock = threading.Lock()

        def one(i):
            body = {"inputs": [{"name": "IN0", "shape": [1, 1], "datatype": "INT32", "data": [i]}]}
            got = self.post("/v2/models/slow_queue/infer", body)
            with lock:
                results.append(got)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = sorted(status for status, _ in results)
        self.assertIn(200, statuses, results)
        self.assertIn(503, statuses, results)
        for status, body in results:
            if status == 503:
                self.assertIn("Exceeds maximum queue size", body["error"])

    # --- generate --------------------------------------------------------------------------------

    def test_generate_echo(self):
        status, out = self.post("/v2/models/echo/generate", {"IN0": [1, 2, 3], "IN1": "héllo", "id": "g1"})
        self.assertEqual(status, 200, out)
        self.assertEqual(out["model_name"], "echo")
        self.assertEqual(out["model_version"], "1")
        self.assertEqual(out["OUT_IN0"], [1, 2, 3])
        self.assertEqual(out["OUT_IN1"], "héllo")  # one element: a scalar

    def test_generate_adds_batch_dim(self):
        status, out = self.post("/v2/models/batched/generate", {"IN0": [0.5, 1.5], "temperature": 0.1})
        self.assertEqual(status, 200, out)
        self.assertEqual(out["OUT_IN0"], [0.5, 1.5])
        self.assertEqual(out["BATCH_REQUESTS"], 1)

    def test_generate_on_decoupled_models(self):
        status, out = self.post("/v2/models/stream/generate", {"IN0": [9], "count": 1})
        self.assertEqual(status, 200, out)
        self.assertEqual(out["INDEX"], 0)
        self.assertEqual(out["OUT_IN0"], 9)
        error = self.assert_error("/v2/models/stream/generate", {"IN0": [9], "count": 3}, 400)
        self.assertEqual(error, "generate expects model to produce exactly 1 response, use generate stream "
                                "for model that generates various number of responses")

    def test_generate_ensemble(self):
        status, out = self.post("/v2/models/ensemble_echo/generate", {"INPUT": [4, 5], "TEXT": "t"})
        self.assertEqual(status, 200, out)
        self.assertEqual(out["OUTPUT"], [4, 5])
        self.assertEqual(out["TEXT_OUT"], "t")

    # --- metrics ---------------------------------------------------------------------------------

    def test_metrics_lists_triton_and_backend_families(self):
        body = {"inputs": [{"name": "IN0", "shape": [1], "datatype": "INT32", "data": [1]}]}
        self.assertEqual(self.post("/v2/models/echo/infer", body)[0], 200)
        status, headers, text = get_metrics(self.server.metrics_port)
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/plain"), headers)
        samples = parse_metrics(text)
        success = metric(samples, "nv_inference_request_success", model="echo", version="1")
        self.assertIsNotNone(success, text)
        self.assertGreaterEqual(success, 1)
        self.assertIn("# TYPE echo_requests_total counter", text)
        self.assertGreaterEqual(metric(samples, "echo_requests_total", model="echo"), 1)
        self.assertIn("# TYPE echo_response_count histogram", text)


if __name__ == "__main__":
    unittest.main()
