"""The binary tensor data extension on inflight-server's /v2/models/<m>/infer, with the bodies Python's
tritonclient.http sends byte for byte (kserve_binary.py), against the test echo backend: the outputs
decoded from binary must equal what the JSON path gives for the same request."""

import gzip
import json
import os
import shutil
import struct
import tempfile
import unittest
import zlib

import kserve_binary as kb
from inflight_client import InflightServer, env_or_skip, get_json, post_json, request

MAX_INPUT = 4096

# Every input X comes back as OUT_X (the echo backend), in several datatypes.
MIXED_CONFIG = """
name: "mixed"
backend: "inflight_test_echo"
max_batch_size: 0
input [
  { name: "INT" data_type: TYPE_INT32 dims: [ -1, -1 ] },
  { name: "FLOAT" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] optional: true },
  { name: "FLAG" data_type: TYPE_BOOL dims: [ -1 ] optional: true },
  { name: "HALF" data_type: TYPE_FP16 dims: [ -1 ] optional: true }
]
output [
  { name: "OUT_INT" data_type: TYPE_INT32 dims: [ -1, -1 ] },
  { name: "OUT_FLOAT" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "OUT_TEXT" data_type: TYPE_STRING dims: [ -1 ] },
  { name: "OUT_FLAG" data_type: TYPE_BOOL dims: [ -1 ] },
  { name: "OUT_HALF" data_type: TYPE_FP16 dims: [ -1 ] }
]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

INTS = [1, -2, 2147483647, -2147483648, 0, 7]
FLOATS = [0.5, -2.25, 1024.0, 3.0e-3]
# What comes back: the values as FP32 holds them (3.0e-3 is not exact in binary floating point).
FLOATS_AS_FP32 = [struct.unpack("<f", struct.pack("<f", v))[0] for v in FLOATS]


def ints(binary=True):
    return kb.InferInput("INT", [2, 3], "INT32", INTS, binary)


def floats(binary=True):
    return kb.InferInput("FLOAT", [4], "FP32", FLOATS, binary)


class HttpBinaryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        os.makedirs(os.path.join(cls.repo, "mixed", "1"))
        with open(os.path.join(cls.repo, "mixed", "config.pbtxt"), "w") as f:
            f.write(MIXED_CONFIG)
        models = env_or_skip("INFLIGHT_TEST_MODEL_REPO")
        for name in ("echo", "ensemble_echo"):
            shutil.copytree(os.path.join(models, name), os.path.join(cls.repo, name))
        cls.server = InflightServer([f"--http-max-input-size={MAX_INPUT}"], model_repository=cls.repo).start()
        cls.port = cls.server.http_port

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        shutil.rmtree(cls.repo, ignore_errors=True)
        assert code == 0, f"inflight-server exited with {code}:\n{cls.server.log()}"

    def infer_ok(self, model, inputs, outputs=None, **kw):
        status, headers, out = kb.infer(self.port, model, inputs, outputs, **kw)
        self.assertEqual(status, 200, out)
        return headers, out

    def json_path(self, model, inputs, names):
        """The same request with every input and output as JSON."""
        outputs = [kb.requested_output(n, binary_data=False) for n in names]
        headers, out = self.infer_ok(model, inputs, outputs)
        self.assertNotIn("inference-header-content-length", headers)
        self.assertTrue(headers["content-type"].startswith("application/json"))
        return out

    def test_server_lists_the_extension(self):
        status, meta = get_json(self.port, "/v2")
        self.assertEqual(status, 200)
        self.assertIn("binary_tensor_data", meta["extensions"])

    def test_int32_and_fp32_binary_in_and_out(self):
        outputs = [kb.requested_output("OUT_INT"), kb.requested_output("OUT_FLOAT")]
        body, json_size = kb.infer_body([ints(), floats()], outputs, request_id="7")
        # tritonclient's layout: the JSON, then 24 bytes of INT32 and 16 of FP32.
        self.assertEqual(len(body), json_size + 24 + 16)
        self.assertEqual(json.loads(body[:json_size])["inputs"][0]["parameters"], {"binary_data_size": 24})
        status, headers, data = kb.post_infer(self.port, "mixed", body, json_size)
        self.assertEqual(status, 200, data)
        self.assertEqual(headers["content-type"], "application/octet-stream")
        header_length = int(headers["inference-header-content-length"])
        header = json.loads(data[:header_length])
        self.assertEqual(header["id"], "7")
        sizes = {o["name"]: o["parameters"]["binary_data_size"] for o in header["outputs"]}
        self.assertEqual(sizes, {"OUT_INT": 24, "OUT_FLOAT": 16})
        self.assertTrue(all("data" not in o for o in header["outputs"]))
        got = kb.decode_response(headers, data)
        self.assertEqual(got["OUT_INT"], ("INT32", [2, 3], INTS))
        self.assertEqual(got["OUT_FLOAT"], ("FP32", [4], FLOATS_AS_FP32))
        self.assertEqual(got, self.json_path("mixed", [ints(False), floats(False)], ["OUT_INT", "OUT_FLOAT"]))

    def test_bytes_input_binary(self):
        texts = [b"hello", b"", "\u00fcn\u00efcode".encode("utf-8"), b"two words"]
        text = kb.InferInput("TEXT", [4], "BYTES", texts)
        _, got = self.infer_ok("mixed", [ints(), floats(), text], [kb.requested_output("OUT_TEXT")])
        self.assertEqual(got["OUT_TEXT"], ("BYTES", [4], texts))
        json_text = kb.InferInput("TEXT", [4], "BYTES", texts, binary_data=False)
        self.assertEqual(got, self.json_path("mixed", [ints(), floats(), json_text], ["OUT_TEXT"]))
        # Bytes that are not UTF-8 have no JSON form, but travel as binary unchanged.
        raw = [b"\xff\x00\xfe", b"\x80"]
        _, got = self.infer_ok("mixed", [ints(), floats(), kb.InferInput("TEXT", [2], "BYTES", raw)],
                               [kb.requested_output("OUT_TEXT")])
        self.assertEqual(got["OUT_TEXT"][2], raw)

    def test_mixed_json_and_binary_inputs_and_outputs(self):
        inputs = [ints(binary=False), floats(), kb.InferInput("FLAG", [3], "BOOL", [True, False, True], False),
                  kb.InferInput("HALF", [2], "FP16", [1.5, -0.25]), kb.InferInput("TEXT", [1], "BYTES", [b"x y"])]
        outputs = [kb.requested_output("OUT_INT", False), kb.requested_output("OUT_FLOAT"),
                   kb.requested_output("OUT_FLAG"), kb.requested_output("OUT_HALF", False),
                   kb.requested_output("OUT_TEXT")]
        body, json_size = kb.infer_body(inputs, outputs)
        status, headers, data = kb.post_infer(self.port, "mixed", body, json_size)
        self.assertEqual(status, 200, data)
        header = json.loads(data[:int(headers["inference-header-content-length"])])
        by_name = {o["name"]: o for o in header["outputs"]}
        self.assertEqual(by_name["OUT_INT"]["data"], INTS)  # asked for as JSON: still JSON
        self.assertEqual(by_name["OUT_HALF"]["data"], [1.5, -0.25])
        self.assertEqual(by_name["OUT_FLAG"]["parameters"], {"binary_data_size": 3})
        got = kb.decode_response(headers, data)
        self.assertEqual(got["OUT_FLAG"][2], [True, False, True])
        self.assertEqual(got["OUT_TEXT"][2], [b"x y"])
        json_inputs = [ints(False), floats(False), kb.InferInput("FLAG", [3], "BOOL", [True, False, True], False),
                       kb.InferInput("HALF", [2], "FP16", [1.5, -0.25], False),
                       kb.InferInput("TEXT", [1], "BYTES", [b"x y"], False)]
        self.assertEqual(got, self.json_path("mixed", json_inputs, list(by_name)))

    def test_binary_data_output_sends_every_output_binary(self):
        # No outputs listed: tritonclient asks for binary_data_output and gets every output.
        body, json_size = kb.infer_body([ints(), floats()])
        self.assertEqual(json.loads(body[:json_size])["parameters"], {"binary_data_output": True})
        status, headers, data = kb.post_infer(self.port, "mixed", body, json_size)
        self.assertEqual(status, 200, data)
        header = json.loads(data[:int(headers["inference-header-content-length"])])
        self.assertTrue(all("binary_data_size" in o["parameters"] for o in header["outputs"]))
        self.assertNotIn("parameters", header)  # binary_data_output is not handed to the model
        got = kb.decode_response(headers, data)
        self.assertEqual(got["OUT_INT"][2], INTS)
        self.assertEqual(got["OUT_FLOAT"][2], FLOATS_AS_FP32)
        # An output's own binary_data: false wins over the request's binary_data_output.
        _, got = self.infer_ok("mixed", [ints(), floats()],
                               [kb.requested_output("OUT_INT", False), kb.requested_output("OUT_FLOAT")],
                               parameters={"binary_data_output": True})
        self.assertEqual(got["OUT_INT"][2], INTS)

    def test_ensemble_with_binary_tensors(self):
        inputs = [kb.InferInput("INPUT", [3], "INT32", [4, 5, 6]),
                  kb.InferInput("TEXT", [2], "BYTES", [b"a", b"bc"])]
        _, got = self.infer_ok("ensemble_echo", inputs)
        self.assertEqual(got["OUTPUT"], ("INT32", [3], [4, 5, 6]))
        self.assertEqual(got["TEXT_OUT"], ("BYTES", [2], [b"a", b"bc"]))
        json_inputs = [kb.InferInput("INPUT", [3], "INT32", [4, 5, 6], False),
                       kb.InferInput("TEXT", [2], "BYTES", [b"a", b"bc"], False)]
        self.assertEqual(got, self.json_path("ensemble_echo", json_inputs, ["OUTPUT", "TEXT_OUT"]))

    def assert_refused(self, body, headers, status, *fragments):
        got_status, got_headers, data = kb.post_infer(self.port, "mixed", body, headers=headers)
        self.assertEqual(got_status, status, data)
        error = json.loads(data)["error"]
        for fragment in fragments:
            self.assertIn(fragment, error)
        return got_headers

    def test_malformed_binary_requests_are_400_naming_what_is_wrong(self):
        good, size = kb.infer_body([ints(), floats()])
        header = {"Inference-Header-Content-Length": str(size)}
        self.assert_refused(good, {}, 400, "Inference-Header-Content-Length")  # no header
        self.assert_refused(good, {"Inference-Header-Content-Length": "x1"}, 400, '"x1"', "decimal")
        self.assert_refused(good, {"Inference-Header-Content-Length": str(len(good) + 1)}, 400,
                            str(len(good) + 1), f"{len(good)}-byte request body")
        self.assert_refused(good[:-4], header, 400, 'input "FLOAT"', "binary_data_size 16", "12 bytes")
        self.assert_refused(good + b"\0\0", header, 400, "2 bytes of binary data follow")
        wrong = kb.InferInput("INT", [2, 2], "INT32", INTS)  # 24 bytes for 4 elements
        body, size = kb.infer_body([wrong, floats()])
        self.assert_refused(body, {"Inference-Header-Content-Length": str(size)}, 400,
                            'input "INT"', "binary_data_size 24", "shape [2,2]", "4 elements of 4 bytes")
        text = kb.InferInput("TEXT", [2], "BYTES", [b"only one"])
        body, size = kb.infer_body([ints(), floats(), text])
        self.assert_refused(body, {"Inference-Header-Content-Length": str(size)}, 400,
                            'input "TEXT"', "holds 1 BYTES elements", "shape [2] needs 2")
        both = ints(False)
        both.parameters["binary_data_size"] = 24
        body, size = kb.infer_body([both, floats()])
        self.assert_refused(body, {"Inference-Header-Content-Length": str(size)}, 400,
                            'input "INT"', "both 'data' and parameters.binary_data_size")

    def test_compressed_bodies_inflate_as_tritonclient_sends_them(self):
        # request_compression_algorithm="gzip" / "deflate": the body compressed whole, the header length
        # still that of the uncompressed JSON (tritonclient.http's _client.py infer).
        body, size = kb.infer_body([ints(), floats()], [kb.requested_output("OUT_INT")])
        for coding, compressed in (("gzip", gzip.compress(body)), ("deflate", zlib.compress(body))):
            status, headers, data = kb.post_infer(self.port, "mixed", compressed, size,
                                                  headers={"Content-Encoding": coding})
            self.assertEqual(status, 200, data)
            self.assertEqual(kb.decode_response(headers, data)["OUT_INT"][2], INTS, coding)
        got = self.assert_refused(body, {"Inference-Header-Content-Length": str(size),
                                         "Content-Encoding": "br"}, 415, '"br"', "gzip, deflate, identity")
        self.assertEqual(got["accept-encoding"], "gzip, deflate, identity")
        self.assert_refused(body, {"Inference-Header-Content-Length": str(size), "Content-Encoding": "gzip"},
                            400, "not valid gzip data")
        # The body limit holds for the inflated size: 1 MiB of zeros is about 1 KiB of gzip.
        self.assert_refused(gzip.compress(b"\0" * (1 << 20)), {"Content-Encoding": "gzip"}, 413,
                            f"limit of {MAX_INPUT} bytes")

    def test_answers_are_compressed_as_accept_encoding_asks(self):
        # response_compression_algorithm="gzip" / "deflate" in tritonclient.http.
        body, size = kb.infer_body([ints(), floats()], [kb.requested_output("OUT_INT"),
                                                        kb.requested_output("OUT_FLOAT", False)])
        _, plain_headers, plain = kb.post_infer(self.port, "mixed", body, size)
        self.assertNotIn("content-encoding", plain_headers)
        for coding, inflate in (("gzip", gzip.decompress), ("deflate", zlib.decompress)):
            status, headers, data = kb.post_infer(self.port, "mixed", body, size,
                                                  headers={"Accept-Encoding": coding})
            self.assertEqual(status, 200, data)
            self.assertEqual(headers["content-encoding"], coding)
            self.assertEqual(inflate(data), plain)
            self.assertEqual(headers["inference-header-content-length"],
                             plain_headers["inference-header-content-length"])
            self.assertEqual(kb.decode_response(headers, data), kb.decode_response(plain_headers, plain))

    def test_the_body_limit_still_applies(self):
        big = kb.InferInput("FLOAT", [MAX_INPUT // 4 + 1], "FP32", [0.0] * (MAX_INPUT // 4 + 1))
        body, size = kb.infer_body([ints(), big])
        status, _, _ = kb.post_infer(self.port, "mixed", body, size)
        self.assertEqual(status, 413)

    def test_generate_stays_json(self):
        status, out = post_json(self.port, "/v2/models/echo/generate", {"IN0": [3, 4]})
        self.assertEqual(status, 200, out)
        self.assertEqual(out["OUT_IN0"], [3, 4])
        status, _, data = request("POST", self.port, "/v2/models/echo/generate", body=b'{"IN0":[1]}',
                                  headers={"Content-Encoding": "deflate"})
        self.assertEqual(status, 415, data)


if __name__ == "__main__":
    unittest.main()
