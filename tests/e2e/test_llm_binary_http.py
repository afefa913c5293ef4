"""The LLM models through /v2/models/<m>/infer with the bodies tritonclient.http sends by default (binary
tensors in, binary tensors out; kserve_binary.py), as NVIDIA's client scripts call them
(tools/inflight_batcher_llm/end_to_end_test.py: the ensemble, and preprocessing -> tensorrt_llm ->
postprocessing by hand). Each answer must equal the JSON path's for the same request.

The repository is INFLIGHT_LLM_REPO's models with tensorrt_llm and tensorrt_llm_bls made non-decoupled:
HTTP infer, like tritonserver's, refuses decoupled models."""

import os
import shutil
import tempfile
import unittest

import inflight_client as ic
import kserve_binary as kb

PROMPT = "What is machine learning?"
MAX_TOKENS = 12


def text(name, value, binary=True):
    """A [1, 1] BYTES input, as np.array([[value]]).astype(object) gives it."""
    return kb.InferInput(name, [1, 1], "BYTES", [value.encode("utf-8")], binary)


def int32(name, values, shape, binary=True):
    return kb.InferInput(name, shape, "INT32", values, binary)


class LlmBinaryHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        source = ic.env_or_skip("INFLIGHT_LLM_REPO")
        cls.repo = tempfile.mkdtemp()
        for model in ("preprocessing", "postprocessing", "ensemble", "tensorrt_llm", "tensorrt_llm_bls"):
            shutil.copytree(os.path.join(source, model), os.path.join(cls.repo, model))
        for model in ("tensorrt_llm", "tensorrt_llm_bls"):
            config = os.path.join(cls.repo, model, "config.pbtxt")
            with open(config) as f:
                filled = f.read()
            assert "decoupled: True" in filled, f"{config} is not decoupled as prepare_demo.sh fills it"
            with open(config, "w") as f:
                f.write(filled.replace("decoupled: True", "decoupled: False"))
        cls.server = ic.InflightServer(model_repository=cls.repo,
                                       backend_directory=os.environ["INFLIGHT_BACKEND_DIR"]).start()
        cls.port = cls.server.http_port

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        shutil.rmtree(cls.repo, ignore_errors=True)
        if code != 0:
            raise AssertionError(f"inflight-server exited with {code}:\n{cls.server.log()}")

    def infer(self, model, inputs, outputs=None, **kw):
        status, headers, out = kb.infer(self.port, model, inputs, outputs, **kw)
        self.assertEqual(status, 200, out)
        return out

    def infer_json(self, model, inputs, names):
        outputs = [kb.requested_output(n, binary_data=False) for n in names]
        return self.infer(model, inputs, outputs)

    def ensemble_inputs(self, binary=True):
        # As NVIDIA's scripts build them: [[prompt]], [[max_tokens]] INT32, [[""]] bad and stop words.
        return [text("text_input", PROMPT, binary), int32("max_tokens", [MAX_TOKENS], [1, 1], binary),
                text("bad_words", "", binary), text("stop_words", "", binary)]

    def test_ensemble_as_nvidias_client_calls_it(self):
        body, json_size = kb.infer_body(self.ensemble_inputs(), request_id="0")
        status, headers, data = kb.post_infer(self.port, "ensemble", body, json_size)
        self.assertEqual(status, 200, data)
        self.assertEqual(headers["content-type"], "application/octet-stream")
        got = kb.decode_response(headers, data)
        datatype, _, values = got["text_output"]
        self.assertEqual(datatype, "BYTES")
        self.assertEqual(len(values), 1)
        self.assertGreater(len(values[0]), 0)
        # Every output the ensemble gives comes back binary, and each matches the all-JSON answer.
        all_json = self.infer("ensemble", self.ensemble_inputs(False),
                              parameters={"binary_data_output": False})
        self.assertEqual(sorted(got), sorted(all_json))
        for name, (datatype, shape, _) in all_json.items():
            self.assertEqual(got[name][:2], (datatype, shape), name)
        self.assertEqual(got["text_output"], all_json["text_output"])
        generated = ic.post_json(self.port, "/v2/models/ensemble/generate",
                                 {"text_input": PROMPT, "max_tokens": MAX_TOKENS, "bad_words": "",
                                  "stop_words": ""}, timeout=120)[1]
        self.assertEqual(values[0].decode("utf-8"), generated["text_output"])

    def test_preprocessing_tensorrt_llm_postprocessing_by_hand(self):
        pre_inputs = [text("QUERY", PROMPT), text("BAD_WORDS_DICT", ""), text("STOP_WORDS_DICT", ""),
                      int32("REQUEST_OUTPUT_LEN", [MAX_TOKENS], [1, 1])]
        pre = self.infer("preprocessing", pre_inputs, request_id="0")
        json_pre = self.infer("preprocessing", [kb.InferInput(i.name, i.shape, i.datatype,
                                                              _values(i), False) for i in pre_inputs],
                              parameters={"binary_data_output": False})
        self.assertEqual(pre, json_pre)
        _, ids_shape, ids = pre["INPUT_ID"]
        _, _, lengths = pre["REQUEST_INPUT_LEN"]
        self.assertEqual(ids_shape, [1, len(ids)])
        self.assertEqual(lengths, [len(ids)])

        # The prompt's ids, detokenized, are the prompt.
        echo = self.infer("postprocessing", [int32("TOKENS_BATCH", ids, [1, 1, len(ids)]),
                                             int32("SEQUENCE_LENGTH", [len(ids)], [1, 1])])
        self.assertEqual(echo["OUTPUT"][2], [PROMPT.encode("utf-8")])

        llm_inputs = [int32("input_ids", ids, ids_shape), int32("input_lengths", lengths, [1, 1]),
                      int32("request_output_len", [MAX_TOKENS], [1, 1])]
        out = self.infer("tensorrt_llm", llm_inputs, [kb.requested_output("output_ids"),
                                                      kb.requested_output("sequence_length")])
        json_out = self.infer_json("tensorrt_llm", [kb.InferInput(i.name, i.shape, i.datatype, _values(i),
                                                                  False) for i in llm_inputs],
                                   ["output_ids", "sequence_length"])
        self.assertEqual(out, json_out)
        _, out_shape, out_ids = out["output_ids"]
        self.assertEqual(out_shape, [1, 1, MAX_TOKENS])

        post = self.infer("postprocessing", [int32("TOKENS_BATCH", out_ids, out_shape),
                                             int32("SEQUENCE_LENGTH", out["sequence_length"][2], [1, 1])])
        ensemble = self.infer("ensemble", self.ensemble_inputs(), [kb.requested_output("text_output")])
        self.assertEqual(post["OUTPUT"][2], ensemble["text_output"][2])

    def test_bls_with_binary_tensors(self):
        inputs = [text("text_input", PROMPT), int32("max_tokens", [MAX_TOKENS], [1, 1]),
                  text("bad_words", ""), text("stop_words", "")]
        got = self.infer("tensorrt_llm_bls", inputs, [kb.requested_output("text_output")])
        json_got = self.infer_json("tensorrt_llm_bls", self.ensemble_inputs(False), ["text_output"])
        self.assertEqual(got, json_got)
        ensemble = self.infer("ensemble", self.ensemble_inputs(), [kb.requested_output("text_output")])
        self.assertEqual(got["text_output"][2], ensemble["text_output"][2])


def _values(tensor):
    """The element values of a binary InferInput, to build its JSON twin."""
    if tensor.datatype == "BYTES":
        return kb.deserialize_bytes(tensor.raw)
    code = kb.STRUCT_CODES[tensor.datatype]
    return list(kb.struct.unpack("<%d%s" % (len(tensor.raw) // kb.struct.calcsize(code), code), tensor.raw))


if __name__ == "__main__":
    unittest.main()
