"""End to end on the demo repository (see test_llm_ensemble.py): streamed text that never splits a
character, NVIDIA's metric families and Triton's failure reasons on /metrics, backend log lines through
TRITONSERVER_LogMessage, and the warning for an unknown config key.
"""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import inflight_client as ic
from test_llm_ensemble import Client, llm_inputs, metric_value

GPT2_VOCAB = 50257
NI_LEAD, NI_TAIL = 19526, 254  # GPT-2's two byte-level tokens of 你 (E4 BD, then A0)
FFFD = "\ufffd"

# Prompts for the ensemble's streamed/non-streamed comparison; the random model answers in whatever
# bytes its greedy choices give, often byte fragments.
PROMPTS = ["你好，世界。今天天气很好", "family 👨‍👩‍👧‍👦 and 👋🏽", "Cafe\u0301 مرحبا بالعالم", "What is machine learning?"]


class ObservabilityTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Client(ic.env_or_skip("INFLIGHT_LLM_REPO"))
        # Before any request: the limits are there already.
        cls.metrics_at_start = cls.server.metrics()

    @classmethod
    def tearDownClass(cls):
        if cls.server and cls.server.stop() != 0:
            raise AssertionError("inflight-server did not exit cleanly:\n" + cls.server.server.log())

    def tokenize(self, text):
        return self.server.post_json("/v2/models/preprocessing/generate",
                                     {"QUERY": text, "REQUEST_OUTPUT_LEN": 1})["INPUT_ID"]

    def detokenize(self, ids):
        return self.server.post_json("/v2/models/postprocessing/generate",
                                     {"TOKENS_BATCH": [[ids]], "SEQUENCE_LENGTH": [len(ids)]})["OUTPUT"]

    def forced_split_inputs(self, max_tokens):
        """tensorrt_llm inputs that make the random model spell 你 as its two tokens, again and again: both
        ids get a large bias, and a frequency penalty makes the one generated less often win."""
        bias = [0.0] * GPT2_VOCAB
        bias[NI_LEAD] = bias[NI_TAIL] = 1000.0
        return llm_inputs(self.tokenize("Say it:"), max_tokens, embedding_bias=[bias],
                          frequency_penalty=[50.0])

    def test_streamed_ids_end_on_whole_characters(self):
        body = self.forced_split_inputs(12)
        whole_ids = self.server.post_json("/v2/models/tensorrt_llm/generate", body)["output_ids"]
        whole_text = self.detokenize(whole_ids)
        self.assertIn("你", whole_text, f"the bias did not give split characters: {whole_ids}")
        body["streaming"] = [True]
        events = self.server.stream("/v2/models/tensorrt_llm/generate_stream", body)
        streamed_ids, pieces = [], []
        for e in events:
            self.assertNotIn("error", e)
            ids = e["output_ids"] if isinstance(e["output_ids"], list) else [e["output_ids"]]
            streamed_ids.extend(ids)
            # What the ensemble's postprocessing does: decode each streamed response alone.
            pieces.append(self.detokenize(ids) if ids else "")
        self.assertEqual(streamed_ids, whole_ids)  # the same ids, only grouped differently
        self.assertEqual("".join(pieces), whole_text)
        for piece in pieces:
            if FFFD not in whole_text:
                self.assertNotIn(FFFD, piece)
        # A response never ends on the lead half of 你 (E4 BD) when the next one starts with its tail.
        chunks = [e["output_ids"] if isinstance(e["output_ids"], list) else [e["output_ids"]] for e in events]
        chunks = [c for c in chunks if c]
        for this, after in zip(chunks, chunks[1:]):
            self.assertFalse(this[-1] == NI_LEAD and after[0] == NI_TAIL, f"a response ended inside 你: {chunks}")

    def test_ensemble_stream_concatenates_to_the_whole_text(self):
        for prompt in PROMPTS:
            body = {"text_input": prompt, "max_tokens": 24, "bad_words": "", "stop_words": ""}
            whole = self.server.post_json("/v2/models/ensemble/generate", body)["text_output"]
            body["stream"] = True
            events = self.server.stream("/v2/models/ensemble/generate_stream", body)
            self.assertEqual("".join(e["text_output"] for e in events), whole, prompt)

    def test_nvidia_metric_families_with_limits_at_load(self):
        start = self.metrics_at_start
        self.assertGreater(metric_value(start, "nv_trt_llm_kv_cache_block_metrics",
                                        kv_cache_block_type="max", model="tensorrt_llm"), 0)
        self.assertGreater(metric_value(start, "nv_trt_llm_kv_cache_block_metrics",
                                        kv_cache_block_type="tokens_per", model="tensorrt_llm"), 0)
        self.assertEqual(metric_value(start, "nv_trt_llm_request_metrics", request_type="max",
                                      model="tensorrt_llm"), 64)
        self.assertNotIn("inflight_kv_cache_block_metrics", start)
        ids = self.tokenize("What is machine learning?")
        self.server.post_json("/v2/models/tensorrt_llm/generate", llm_inputs(ids, 8))
        deadline = time.time() + 10
        while True:
            text = self.server.metrics()
            if metric_value(text, "nv_trt_llm_general_metrics", general_type="iteration_counter") > 0:
                break
            self.assertLess(time.time(), deadline, "no iteration statistics reported")
            time.sleep(0.2)
        for label in ("total_context_tokens", "generation_requests", "micro_batch_id", "paused_requests"):
            metric_value(text, "nv_trt_llm_inflight_batcher_metrics", inflight_batcher_specific_metric=label)
        for memory in ("cpu", "gpu", "pinned"):
            metric_value(text, "nv_trt_llm_runtime_memory_metrics", memory_type=memory)
        self.assertGreater(metric_value(text, "nv_trt_llm_general_metrics", general_type="timestamp"), 1.6e9)
        self.assertGreaterEqual(metric_value(text, "nv_llm_input_token_len_count",
                                             response_metric_type="total_input_tokens"), 1)
        self.assertGreaterEqual(metric_value(text, "nv_llm_output_token_len_sum",
                                             response_metric_type="total_output_tokens"), 8)
        self.assertGreaterEqual(metric_value(text, "nv_llm_time_to_first_token_seconds_count",
                                             model="tensorrt_llm"), 1)
        self.assertGreaterEqual(metric_value(text, "nv_llm_time_per_output_token_seconds_count",
                                             model="tensorrt_llm"), 1)
        self.assertGreater(metric_value(text, "nv_llm_time_to_first_token_seconds_sum", model="tensorrt_llm"), 0)
        # Batch statistics reach Triton's counters.
        self.assertGreaterEqual(metric_value(text, "nv_inference_exec_count", model="tensorrt_llm"), 1)
        self.assertGreaterEqual(metric_value(text, "nv_inference_count", model="tensorrt_llm"), 1)

    def test_cancelled_stream_counts_as_canceled(self):
        def counts():
            text = self.server.metrics()
            out = {"success": metric_value(text, "nv_inference_request_success", model="tensorrt_llm")}
            for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
                out[reason] = metric_value(text, "nv_inference_request_failure", model="tensorrt_llm",
                                           reason=reason)
                metric_value(text, "nv_inference_request_failure", model="ensemble", reason=reason)
            return out

        before = counts()
        ids = self.tokenize("What is machine learning?")
        got = self.server.stream("/v2/models/tensorrt_llm/generate_stream",
                                 llm_inputs(ids, 900, streaming=[True]), max_events=2)
        self.assertEqual(len(got), 2)
        deadline = time.time() + 20
        while counts()["CANCELED"] == before["CANCELED"]:
            self.assertLess(time.time(), deadline, f"the cancelled stream was never counted: {counts()}")
            time.sleep(0.1)
        after = counts()
        self.assertEqual(after["CANCELED"], before["CANCELED"] + 1)
        for key in ("success", "REJECTED", "BACKEND", "OTHER"):
            self.assertEqual(after[key], before[key], key)
        ic.wait_llm_idle(self.server.server.metrics_port, timeout=10)

    def test_cancelled_ensemble_stream_counts_as_canceled_in_both_models(self):
        def value(text, model, **labels):
            name = "nv_inference_request_failure" if labels else "nv_inference_request_success"
            return metric_value(text, name, model=model, **labels)

        before = self.server.metrics()
        body = {"text_input": PROMPTS[0], "max_tokens": 900, "bad_words": "", "stop_words": "", "stream": True}
        got = self.server.stream("/v2/models/ensemble/generate_stream", body, max_events=2)
        self.assertEqual(len(got), 2)
        deadline = time.time() + 20
        while True:
            after = self.server.metrics()
            if (value(after, "ensemble", reason="CANCELED") > value(before, "ensemble", reason="CANCELED") and
                    value(after, "tensorrt_llm", reason="CANCELED") >
                    value(before, "tensorrt_llm", reason="CANCELED")):
                break
            self.assertLess(time.time(), deadline, "the cancelled ensemble stream was not counted as CANCELED "
                                                   "in both models:\n" + after)
            time.sleep(0.1)
        for model in ("ensemble", "tensorrt_llm"):
            self.assertEqual(value(after, model, reason="CANCELED"), value(before, model, reason="CANCELED") + 1)
            self.assertEqual(value(after, model), value(before, model), f"{model} counted a success")
        ic.wait_llm_idle(self.server.server.metrics_port, timeout=10)

    def test_backend_lines_go_through_triton_log_message(self):
        # inflight-server writes a backend's TRITONSERVER_LogMessage lines as "<file>:<line>] <message>".
        log = self.server.server.log()
        self.assertRegex(log, r"stream_holdback\.cc:\d+\] model 'tensorrt_llm': streamed output_ids end on "
                              r"whole characters")
        self.assertRegex(log, r"model_state\.cc:\d+\] model 'postprocessing': postprocessing with the tokenizer")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ConfigWarningTest(unittest.TestCase):
    def test_unknown_key_is_named_with_the_nearest_key_and_info_lines_obey_log_info(self):
        source = ic.env_or_skip("INFLIGHT_LLM_REPO")
        work = tempfile.mkdtemp(prefix="inflight_typo_")
        try:
            repo = os.path.join(work, "repo")
            shutil.copytree(source, repo)
            config = os.path.join(repo, "tensorrt_llm", "config.pbtxt")
            with open(config, encoding="utf-8") as f:
                text = f.read()
            with open(config, "w", encoding="utf-8") as f:
                f.write(text + '\nparameters: { key: "kv_cache_free_gpu_mem_fracton" value: { string_value: "0.5" } }\n')
            # --log-info=false also hides the "Started ..." lines that tell the ports: give fixed ones.
            http_port, metrics_port, grpc_port = free_port(), free_port(), free_port()
            server = ic.InflightServer(args=["--log-info=false", f"--http-port={http_port}",
                                             f"--metrics-port={metrics_port}", f"--grpc-port={grpc_port}"],
                                       model_repository=repo, backend_directory=os.environ["INFLIGHT_BACKEND_DIR"])
            server.process = subprocess.Popen(server.command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            server._reader = threading.Thread(target=server._read_output, daemon=True)
            server._reader.start()
            server.http_port = http_port
            try:
                server.wait_until_ready(time.monotonic() + 60)
                log = server.log()
            finally:
                self.assertEqual(server.stop(), 0)
            warnings = re.findall(r'unknown parameter "kv_cache_free_gpu_mem_fracton".*', log)
            self.assertEqual(len(warnings), 1, log)
            self.assertIn('the nearest known key is "kv_cache_free_gpu_mem_fraction"', warnings[0])
            # --log-info=false reaches the backends: none of their info lines is written.
            self.assertNotIn("streamed output_ids end on whole characters", log)
            self.assertNotIn("postprocessing with the tokenizer", log)
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
