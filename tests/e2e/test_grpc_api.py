"""inflight-server's gRPC endpoint with the test backend's repository (tests/backends/models), driven by
Python gRPC stubs generated from proto/grpc_service.proto, sending what tritonclient.grpc sends."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest

import grpc_client as gc
from inflight_client import InflightServer, get_metrics, metric, parse_metrics, post_json


class GrpcApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.grpc, cls.pb, _ = gc.stubs()
        cls.server = InflightServer(wait_ready=False).start()
        if cls.server.grpc_port is None:
            cls.server.stop()
            raise unittest.SkipTest("this inflight-server was built without gRPC")
        cls.client = gc.Client(cls.server.grpc_port)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        code = cls.server.stop()
        assert code == 0, f"inflight-server exited with {code}:\n{cls.server.log()}"

    def call_error(self, method, request):
        with self.assertRaises(self.grpc.RpcError) as caught:
            method(request, timeout=30)
        return caught.exception

    def test_health_index_metadata_and_config(self):
        stub, pb = self.client.stub, self.pb
        self.assertTrue(stub.ServerLive(pb.ServerLiveRequest()).live)
        # broken_config and friends never load: a strictly ready server is not ready.
        self.assertFalse(stub.ServerReady(pb.ServerReadyRequest()).ready)
        self.assertTrue(stub.ModelReady(pb.ModelReadyRequest(name="echo")).ready)
        self.assertFalse(stub.ModelReady(pb.ModelReadyRequest(name="broken_config")).ready)
        index = {m.name: m for m in stub.RepositoryIndex(pb.RepositoryIndexRequest()).models}
        self.assertEqual(index["echo"].state, "READY")
        self.assertEqual(index["broken_config"].state, "UNAVAILABLE")
        self.assertNotEqual(index["broken_config"].reason, "")
        ready = [m.name for m in stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True)).models]
        self.assertIn("echo", ready)
        self.assertNotIn("broken_config", ready)

        md = stub.ModelMetadata(pb.ModelMetadataRequest(name="echo"))
        self.assertEqual(md.platform, "inflight_test_echo")
        types = {t.name: (t.datatype, list(t.shape)) for t in md.inputs}
        self.assertEqual(types["IN0"], ("INT32", [-1]))
        self.assertEqual(types["IN1"], ("BYTES", [-1]))  # TYPE_STRING is BYTES on the wire
        config = stub.ModelConfig(pb.ModelConfigRequest(name="echo")).config
        self.assertEqual(config.backend, "inflight_test_echo")
        self.assertEqual(config.instance_group[0].count, 2)
        self.assertEqual(config.input[1].data_type, 13)  # TYPE_STRING

        error = self.call_error(stub.ModelMetadata, pb.ModelMetadataRequest(name="nope"))
        self.assertEqual(error.code(), self.grpc.StatusCode.NOT_FOUND)
        self.assertIn("'nope'", error.details())

    def test_infer_matches_http_and_counts_in_statistics(self):
        request = gc.infer_request("echo", [("IN0", "INT32", [7, -1, 2**31 - 1]),
                                            ("IN1", "BYTES", ["grüße", "", "x" * 1000])],
                                   request_id="abc")
        response = self.client.stub.ModelInfer(request, timeout=30)
        self.assertEqual(response.id, "abc")
        self.assertEqual(response.model_name, "echo")
        out = gc.outputs_of(response)
        self.assertEqual(out["OUT_IN0"], ("INT32", [3], [7, -1, 2**31 - 1]))
        self.assertEqual(out["OUT_IN1"][2], ["grüße".encode(), b"", b"x" * 1000])

        status, http = post_json(self.server.http_port, "/v2/models/echo/infer", {
            "inputs": [{"name": "IN0", "shape": [3], "datatype": "INT32", "data": [7, -1, 2**31 - 1]},
                       {"name": "IN1", "shape": [3], "datatype": "BYTES", "data": ["grüße", "", "x" * 1000]}]})
        self.assertEqual(status, 200, http)
        by_name = {o["name"]: o for o in http["outputs"]}
        self.assertEqual(by_name["OUT_IN0"]["data"], out["OUT_IN0"][2])
        self.assertEqual([s.encode() for s in by_name["OUT_IN1"]["data"]], out["OUT_IN1"][2])

        # A backend reports a request's statistics after it sends the response (the Triton API's
        # order, as test_http_api's count): ask until both requests count.
        deadline = time.monotonic() + 10
        while True:
            stats = self.client.stub.ModelStatistics(self.pb.ModelStatisticsRequest(name="echo"))
            self.assertEqual(len(stats.model_stats), 1)
            if stats.model_stats[0].inference_stats.success.count >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertGreaterEqual(stats.model_stats[0].inference_stats.success.count, 2)
        self.assertEqual(stats.model_stats[0].version, "1")

    def test_errors_carry_grpc_codes_and_name_what_is_wrong(self):
        stub = self.client.stub
        failing = gc.infer_request("echo", [("IN0", "INT32", [1]), ("fail", "BOOL", [True])])
        error = self.call_error(stub.ModelInfer, failing)
        self.assertNotEqual(error.code(), self.grpc.StatusCode.OK)
        self.assertNotEqual(error.details(), "")
        short = gc.infer_request("echo", [("IN0", "INT32", [3], b"\x01\x00\x00\x00")])
        error = self.call_error(stub.ModelInfer, short)
        self.assertEqual(error.code(), self.grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn('inputs[0] "IN0": shape [3] of INT32 needs 12 bytes', error.details())
        wrong_type = gc.infer_request("echo", [("IN0", "INT64", [1])])
        error = self.call_error(stub.ModelInfer, wrong_type)
        self.assertEqual(error.code(), self.grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("IN0", error.details())
        decoupled = gc.infer_request("stream", [("IN0", "INT32", [1])])
        error = self.call_error(stub.ModelInfer, decoupled)
        self.assertEqual(error.code(), self.grpc.StatusCode.UNIMPLEMENTED)
        self.assertIn("doesn't support models with decoupled transaction policy", error.details())

    def test_stream_of_a_decoupled_model(self):
        requests = [gc.infer_request("stream", [("IN0", "INT32", [5]), ("count", "INT32", [4])],
                                     request_id="s1", enable_empty_final_response=True),
                    gc.infer_request("echo", [("IN0", "INT32", [9])], request_id="e1")]
        messages = self.client.stream(requests)
        for m in messages:
            self.assertEqual(m.error_message, "")
        s1 = [m.infer_response for m in messages if m.infer_response.id == "s1"]
        e1 = [m.infer_response for m in messages if m.infer_response.id == "e1"]
        self.assertEqual([gc.outputs_of(r)["INDEX"][2] for r in s1[:-1]], [[0], [1], [2], [3]])
        self.assertEqual([gc.is_final(r) for r in s1], [False] * 4 + [True])
        self.assertEqual(len(s1[-1].outputs), 0)  # the empty final response asked for
        self.assertEqual(len(e1), 1)
        self.assertTrue(gc.is_final(e1[0]))  # a non-decoupled model's only response is final
        self.assertEqual(gc.outputs_of(e1[0])["OUT_IN0"][2], [9])

    def test_a_client_that_disconnects_cancels_its_stream(self):
        # A separate process opens a long stream, reads two responses and dies without a goodbye.
        script = textwrap.dedent(f"""
            import os, sys
            sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
            import grpc_client as gc
            client = gc.Client({self.server.grpc_port})
            request = gc.infer_request("stream", [("IN0", "INT32", [1]), ("count", "INT32", [100000])])
            responses = client.stub.ModelStreamInfer(iter([request]))
            next(responses); next(responses)
            print("read two", flush=True)
            os._exit(0)
        """)
        child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               timeout=60, env=os.environ)
        self.assertIn("read two", child.stdout, child.stderr)

        def inflight():
            status, _, text = get_metrics(self.server.metrics_port)
            self.assertEqual(status, 200)
            return metric(parse_metrics(text), "echo_inflight_requests", model="stream")

        deadline = time.monotonic() + 5
        while inflight() != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        # 100000 responses 20 ms apart would take half an hour: the backend saw the cancellation.
        self.assertEqual(inflight(), 0)


class GrpcShutdownTest(unittest.TestCase):
    def test_sigterm_with_an_open_stream_exits_0(self):
        gc.stubs()
        server = InflightServer(["--exit-timeout-secs=1"], wait_ready=False).start()
        if server.grpc_port is None:
            server.stop()
            self.skipTest("this inflight-server was built without gRPC")
        with gc.Client(server.grpc_port) as client:
            request = gc.infer_request("stream", [("IN0", "INT32", [1]), ("count", "INT32", [100000])])
            responses = client.stub.ModelStreamInfer(iter([request]), timeout=60)
            next(responses)
            start = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            # The core cancels the request at the exit timeout; the stream then ends (how depends on
            # the backend: this one ends a cancelled request with its FINAL flag, so the stream ends
            # OK) long before its 100000 responses.
            received = 1
            try:
                for _ in responses:
                    received += 1
            except gc.stubs()[0].RpcError as e:
                self.assertIn(e.code(), (gc.stubs()[0].StatusCode.CANCELLED,
                                         gc.stubs()[0].StatusCode.UNAVAILABLE), e.details())
            self.assertLess(received, 1000)
            self.assertEqual(server.process.wait(timeout=30), 0, server.log())
            self.assertLess(time.monotonic() - start, 15)


if __name__ == "__main__":
    unittest.main()
