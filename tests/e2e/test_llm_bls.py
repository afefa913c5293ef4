"""tensorrt_llm_bls as a C++ model (libtriton_inflight_bls.so) on the demo repository: it must answer as
the ensemble does, over HTTP (generate, generate_stream) and gRPC (what end_to_end_grpc_client.py sends
with --model-name tensorrt_llm_bls), with stop words, accumulate_tokens, batches and cancellation."""
import os
import shutil
import tempfile
import unittest

import inflight_client as ic
from seed_replay import set_parameter

PROMPTS = ["What is machine learning?", "Born in north-east France, Soyer trained as a", "你好，世界"]


class BlsServer(unittest.TestCase):
    accumulate = False
    server = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        repo = os.path.join(cls.tmp, "repo")
        shutil.copytree(ic.env_or_skip("INFLIGHT_LLM_REPO"), repo)
        if cls.accumulate:
            set_parameter(os.path.join(repo, "tensorrt_llm_bls", "config.pbtxt"), "accumulate_tokens", "true")
        cls.server = ic.InflightServer(model_repository=repo,
                                       backend_directory=os.environ["INFLIGHT_BACKEND_DIR"]).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop() if cls.server else 0
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert code == 0, f"inflight-server exited with {code}:\n{cls.server.log()}"

    def post(self, model, body, expect=200):
        status, out = ic.post_json(self.server.http_port, f"/v2/models/{model}/generate", body, timeout=120)
        self.assertEqual(status, expect, out)
        return out

    def stream(self, model, body, max_events=None):
        result = ic.stream_sse(self.server.http_port, f"/v2/models/{model}/generate_stream", body,
                               max_events=max_events, timeout=120)
        self.assertEqual(result.status, 200, result.body)
        for e in result.events:
            self.assertNotIn("error", e)
        return result.events

    def wait_idle(self):
        ic.wait_llm_idle(self.server.metrics_port)


class BlsTest(BlsServer):
    def test_generate_equals_the_ensemble(self):
        for prompt in PROMPTS:
            for extra in ({}, {"exclude_input_in_output": False}, {"temperature": 0.8, "top_k": 5, "seed": 7}):
                body = {"text_input": prompt, "max_tokens": 12, **extra}
                bls = self.post("tensorrt_llm_bls", body)
                ensemble = self.post("ensemble", body)
                self.assertEqual(bls["model_name"], "tensorrt_llm_bls")
                self.assertEqual(bls["text_output"], ensemble["text_output"], (prompt, extra))
                self.assertEqual(bls["batch_index"], 0)

    def test_generate_stream_adds_up_to_generate(self):
        for prompt in PROMPTS:
            whole = self.post("tensorrt_llm_bls", {"text_input": prompt, "max_tokens": 14})["text_output"]
            events = self.stream("tensorrt_llm_bls", {"text_input": prompt, "max_tokens": 14, "stream": True})
            # One per tensorrt_llm response: per token, except where that model holds back ids that end
            # inside a character until the next token completes it (docs/observability.md).
            self.assertGreater(len(events), 1)
            self.assertEqual("".join(e["text_output"] for e in events), whole, prompt)
            # Never a character cut in two, unlike pieces decoded token by token.
            for e in events:
                self.assertNotIn("\ufffd", e["text_output"])

    def test_stop_words_end_the_text_as_in_the_ensemble(self):
        prompt = PROMPTS[1]
        ids = self.post("preprocessing", {"QUERY": prompt, "REQUEST_OUTPUT_LEN": 1})["INPUT_ID"]
        whole = self.post("tensorrt_llm", {"input_ids": [ids], "input_lengths": [len(ids)],
                                           "request_output_len": [16]})["output_ids"]

        def text_of(tokens):
            return self.post("postprocessing", {"TOKENS_BATCH": [[tokens]],
                                                "SEQUENCE_LENGTH": [len(tokens)]})["OUTPUT"]

        def ids_of(text):
            out = self.post("preprocessing", {"QUERY": text, "REQUEST_OUTPUT_LEN": 1})["INPUT_ID"]
            return out if isinstance(out, list) else [out]

        # A generated token whose text tokenizes back to it, so that the stop word finds it again.
        index = next(i for i in range(2, len(whole)) if ids_of(text_of([whole[i]])) == [whole[i]])
        word = text_of([whole[index]])
        first = whole.index(whole[index])
        body = {"text_input": prompt, "max_tokens": 16, "stop_words": [word]}
        bls = self.post("tensorrt_llm_bls", body)["text_output"]
        self.assertEqual(bls, text_of(whole[:first + 1]))  # ends with the stop word
        self.assertEqual(bls, self.post("ensemble", body)["text_output"])

    def test_bad_requests_get_clear_errors(self):
        status, out = ic.post_json(self.server.http_port, "/v2/models/tensorrt_llm_bls/generate",
                                   {"text_input": "hi", "max_tokens": 0})
        self.assertEqual(status, 400, out)
        self.assertIn("max_tokens must be a single value > 0, got 0", out["error"])
        status, out = ic.post_json(self.server.http_port, "/v2/models/tensorrt_llm_bls/generate",
                                   {"text_input": "hi", "max_tokens": 4, "num_draft_tokens": 3})
        self.assertNotEqual(status, 200, out)
        self.assertIn("num_draft_tokens 3 asks for speculative decoding", out["error"])
        status, out = ic.post_json(self.server.http_port, "/v2/models/tensorrt_llm_bls/generate",
                                   {"text_input": "hi", "max_tokens": 4, "beam_width": 1, "lora_task_id": 3})
        self.assertNotEqual(status, 200, out)
        self.assertIn("lora", out["error"].lower())  # tensorrt_llm refuses it by name, through the BLS

    def test_a_client_that_leaves_a_stream_frees_the_generation(self):
        events = self.stream("tensorrt_llm_bls", {"text_input": PROMPTS[0], "max_tokens": 900, "stream": True},
                             max_events=3)
        self.assertEqual(len(events), 3)
        self.wait_idle()

    def test_grpc_end_to_end_client_requests(self):
        import grpc_client as gc
        gc.stubs()
        if self.server.grpc_port is None:
            self.skipTest("this inflight-server was built without gRPC")
        from test_llm_grpc import e2e_inputs
        with gc.Client(self.server.grpc_port) as client:
            for streaming in (False, True):
                request = gc.infer_request("tensorrt_llm_bls", e2e_inputs(PROMPTS[0], 10, streaming),
                                           outputs=["text_output"], request_id="bls-1")
                messages = client.stream([request])
                for m in messages:
                    self.assertEqual(m.error_message, "")
                texts = [gc.outputs_of(m.infer_response)["text_output"][2][0].decode()
                         for m in messages if m.infer_response.outputs]
                body = {"text_input": PROMPTS[0], "max_tokens": 10, "stream": streaming, "beam_width": 1,
                        "temperature": 1.0, "exclude_input_in_output": False}
                if streaming:
                    http = "".join(e["text_output"] for e in self.stream("tensorrt_llm_bls", body))
                    self.assertEqual("".join(texts), http)
                else:
                    self.assertEqual(texts, [self.post("tensorrt_llm_bls", body)["text_output"]])
                    self.assertTrue(texts[0].startswith(PROMPTS[0]))  # exclude_input_in_output false
            # A batch of two rows in one request: each row answers with its batch_index.
            request = gc.infer_request("tensorrt_llm_bls",
                                       [("text_input", "BYTES", [[PROMPTS[0]], [PROMPTS[1]]]),
                                        ("max_tokens", "INT32", [[8], [8]])],
                                       outputs=["text_output", "batch_index"])
            rows = {}
            for m in client.stream([request]):
                self.assertEqual(m.error_message, "")
                out = gc.outputs_of(m.infer_response)
                if out:
                    rows[out["batch_index"][2][0]] = out["text_output"][2][0].decode()
            for i in (0, 1):
                self.assertEqual(rows[i], self.post("tensorrt_llm_bls",
                                                    {"text_input": PROMPTS[i], "max_tokens": 8})["text_output"])


class BlsAccumulateTest(BlsServer):
    accumulate = True

    def test_each_streamed_response_holds_all_the_text_so_far(self):
        prompt = PROMPTS[2]
        whole = self.post("tensorrt_llm_bls", {"text_input": prompt, "max_tokens": 12})["text_output"]
        events = self.stream("tensorrt_llm_bls", {"text_input": prompt, "max_tokens": 12, "stream": True})
        texts = [e["text_output"] for e in events]
        self.assertEqual(texts[-1], whole)
        for before, after in zip(texts, texts[1:]):
            self.assertTrue(after.startswith(before), (before, after))


if __name__ == "__main__":
    unittest.main()
