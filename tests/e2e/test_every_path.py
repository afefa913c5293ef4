"""The same greedy text on every path a client can take to the LLM repository (INFLIGHT_LLM_REPO: in CI
the CPU demo; on the device, tests/gpu/device_round.sh points it at a GPU engine's repository):

- HTTP JSON: /v2/models/ensemble/generate, and generate_stream's pieces joined;
- HTTP with KServe binary tensors: /v2/models/ensemble/infer as tritonclient.http sends it;
- gRPC: ModelStreamInfer with stream false (one answer) and true (pieces), as end_to_end_grpc_client.py,
  and ModelInfer;
- the BLS model (tensorrt_llm_bls) over HTTP and gRPC;
- the OpenAI routes: /v1/completions and its stream, temperature 0;
- the three models by hand: preprocessing -> tensorrt_llm -> postprocessing.

/infer and ModelInfer refuse decoupled models (as Triton), so those two go to a second server whose copy of
the repository has tensorrt_llm and tensorrt_llm_bls filled with decoupled false.
Each prompt is sent alone, so every path runs the same batch of one; a path whose text differs from the
ensemble's is named with both texts. INFLIGHT_EVERY_PATH_TOKENS sets the answer length (default 16).
"""
import json
import os
import shutil
import tempfile
import unittest

import inflight_client as ic
import kserve_binary as kb

PROMPTS = ["What is machine learning?", "Born in north-east France, Soyer trained as a",
           "The capital of Japan is"]
MAX_TOKENS = int(os.environ.get("INFLIGHT_EVERY_PATH_TOKENS", "16"))


class EveryPathTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        source = ic.env_or_skip("INFLIGHT_LLM_REPO")
        cls.servers = []
        cls.tmp = tempfile.mkdtemp(prefix="every_path_")
        coupled = os.path.join(cls.tmp, "repo")
        shutil.copytree(source, coupled)
        for model in ("tensorrt_llm", "tensorrt_llm_bls"):
            config = os.path.join(coupled, model, "config.pbtxt")
            with open(config) as f:
                filled = f.read()
            assert "decoupled: True" in filled, f"{config} is not decoupled as prepare_demo.sh fills it"
            with open(config, "w") as f:
                f.write(filled.replace("decoupled: True", "decoupled: False"))
        for repo in (source, coupled):
            cls.servers.append(ic.InflightServer(model_repository=repo,
                                                 backend_directory=os.environ["INFLIGHT_BACKEND_DIR"],
                                                 startup_timeout=300.0).start())
        cls.server, cls.coupled = cls.servers
        cls.port = cls.server.http_port

    @classmethod
    def tearDownClass(cls):
        codes = [(server.stop(), server) for server in cls.servers]
        shutil.rmtree(cls.tmp, ignore_errors=True)
        for code, server in codes:
            assert code == 0, f"inflight-server exited with {code}:\n{server.log()}"

    def post(self, path, body):
        status, out = ic.post_json(self.port, path, body, timeout=300)
        self.assertEqual(status, 200, f"{path}: {out}")
        return out

    def sse(self, path, body):
        result = ic.stream_sse(self.port, path, body, timeout=300)
        self.assertEqual(result.status, 200, f"{path}: {result.body}")
        return result.events

    # --- the paths; each returns the generated text (the prompt excluded) ---

    def http_json(self, model, prompt):
        return self.post(f"/v2/models/{model}/generate",
                         {"text_input": prompt, "max_tokens": MAX_TOKENS})["text_output"]

    def http_stream(self, model, prompt):
        events = self.sse(f"/v2/models/{model}/generate_stream",
                          {"text_input": prompt, "max_tokens": MAX_TOKENS, "stream": True})
        for e in events:
            self.assertNotIn("error", e)
        return "".join(e["text_output"] for e in events)

    def http_binary(self, prompt):
        inputs = [kb.InferInput("text_input", [1, 1], "BYTES", [prompt.encode()]),
                  kb.InferInput("max_tokens", [1, 1], "INT32", [MAX_TOKENS])]
        status, _, out = kb.infer(self.coupled.http_port, "ensemble", inputs,
                                  [kb.requested_output("text_output")])
        self.assertEqual(status, 200, out)
        datatype, _, values = out["text_output"]
        self.assertEqual(datatype, "BYTES")
        return values[0].decode("utf-8")

    def grpc(self, model, prompt, streaming):
        import grpc_client as gc
        gc.stubs()
        inputs = [("text_input", "BYTES", [[prompt]]), ("max_tokens", "INT32", [[MAX_TOKENS]]),
                  ("stream", "BOOL", [[streaming]])]
        with gc.Client(self.server.grpc_port) as client:
            messages = client.stream([gc.infer_request(model, inputs, outputs=["text_output"])],
                                     timeout=300)
        for m in messages:
            self.assertEqual(m.error_message, "")
        pieces = [gc.outputs_of(m.infer_response)["text_output"][2][0]
                  for m in messages if m.infer_response.outputs]
        if not streaming:
            self.assertEqual(len(pieces), 1)
        return b"".join(pieces).decode("utf-8")

    def grpc_unary(self, model, prompt):
        import grpc_client as gc
        gc.stubs()
        inputs = [("text_input", "BYTES", [[prompt]]), ("max_tokens", "INT32", [[MAX_TOKENS]])]
        with gc.Client(self.coupled.grpc_port) as client:
            response = client.stub.ModelInfer(gc.infer_request(model, inputs, outputs=["text_output"]),
                                              timeout=300)
        return gc.outputs_of(response)["text_output"][2][0].decode("utf-8")

    def openai(self, prompt, stream):
        body = {"model": "ensemble", "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0}
        if not stream:
            out = self.post("/v1/completions", body)
            self.assertEqual(out["usage"]["completion_tokens"], MAX_TOKENS)
            return out["choices"][0]["text"]
        status, _, raw = ic.request("POST", self.port, "/v1/completions", {**body, "stream": True},
                                    timeout=300)
        self.assertEqual(status, 200, raw)
        text = ""
        for line in raw.decode("utf-8").splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                choices = json.loads(line[len("data: "):])["choices"]
                text += choices[0]["text"] if choices else ""
        return text

    def by_hand(self, prompt):
        ids = self.post("/v2/models/preprocessing/generate",
                        {"QUERY": prompt, "REQUEST_OUTPUT_LEN": MAX_TOKENS})["INPUT_ID"]
        ids = ids if isinstance(ids, list) else [ids]
        out = self.post("/v2/models/tensorrt_llm/generate",
                        {"input_ids": [ids], "input_lengths": [len(ids)],
                         "request_output_len": [MAX_TOKENS], "exclude_input_in_output": [True]})
        generated = out["output_ids"] if isinstance(out["output_ids"], list) else [out["output_ids"]]
        self.assertEqual(len(generated), MAX_TOKENS)
        return self.post("/v2/models/postprocessing/generate",
                         {"TOKENS_BATCH": [[generated]], "SEQUENCE_LENGTH": [MAX_TOKENS]})["OUTPUT"]

    def test_every_path_gives_the_ensembles_text(self):
        grpc = self.server.grpc_port is not None
        for prompt in PROMPTS:
            expected = self.http_json("ensemble", prompt)
            self.assertTrue(expected)
            paths = {
                "HTTP generate_stream": lambda: self.http_stream("ensemble", prompt),
                "HTTP binary infer": lambda: self.http_binary(prompt),
                "BLS HTTP generate": lambda: self.http_json("tensorrt_llm_bls", prompt),
                "BLS HTTP generate_stream": lambda: self.http_stream("tensorrt_llm_bls", prompt),
                "OpenAI /v1/completions": lambda: self.openai(prompt, False),
                "OpenAI /v1/completions stream": lambda: self.openai(prompt, True),
                "preprocessing, tensorrt_llm, postprocessing": lambda: self.by_hand(prompt),
            }
            if grpc:
                paths.update({
                    "gRPC ensemble": lambda: self.grpc("ensemble", prompt, False),
                    "gRPC ensemble stream": lambda: self.grpc("ensemble", prompt, True),
                    "gRPC BLS": lambda: self.grpc("tensorrt_llm_bls", prompt, False),
                    "gRPC BLS stream": lambda: self.grpc("tensorrt_llm_bls", prompt, True),
                    "gRPC ModelInfer ensemble": lambda: self.grpc_unary("ensemble", prompt),
                    "gRPC ModelInfer BLS": lambda: self.grpc_unary("tensorrt_llm_bls", prompt),
                })
            for name, path in paths.items():
                with self.subTest(prompt=prompt, path=name):
                    self.assertEqual(path(), expected, f"{name} differs from HTTP generate")


if __name__ == "__main__":
    unittest.main()
