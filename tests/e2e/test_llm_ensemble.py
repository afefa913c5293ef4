"""End to end: inflight-server serving the inflight_batcher_llm repository (filled by fill_template.py as
NVIDIA's README does) with a small random-weight GPT-2 engine and GPT-2's real tokenizer, over real HTTP.

The environment (set by tests/e2e/CMakeLists.txt): INFLIGHT_SERVER, INFLIGHT_BACKEND_DIR, and the two
repositories made by tools/prepare_demo.sh: INFLIGHT_LLM_REPO (default settings) and
INFLIGHT_LLM_TINY_KV_REPO (max_utilization with a 10-block KV cache, so requests must pause and resume).
INFLIGHT_E2E_LOGPROB_TOL (default 0: exact) is the log-prob tolerance of the pause-and-resume comparison; see
judge_greedy_runs.
"""
import concurrent.futures
import json
import os
import socket
import sys
import time
import unittest

import inflight_client as ic

PROMPT = "What is machine learning?"


def llm_inputs(ids, max_tokens, **extra):
    body = {"input_ids": [ids], "input_lengths": [len(ids)], "request_output_len": [max_tokens]}
    body.update(extra)
    return body


def judge_greedy_runs(ref_ids, ref_log_probs, got_ids, got_log_probs, tol, name="request"):
    """Judges two greedy runs of one request; returns (failure message or None, summary line).

    tol == 0: the runs must be identical, tokens and log-probs: fp32 engines with per-row math compute the
    same numbers whatever the batch and however the KV cache was rebuilt.
    tol > 0: for engines whose rounding depends on batch composition and on a resume recomputing the KV
    cache by prefill (bf16 GPU engines). The tokens may diverge once, at a position j, only where it looks
    like a near-tie: every log-prob before j agrees within tol, and at j the two chosen tokens' log-probs
    (each the maximum of its own run's distribution) agree within tol. Past j the runs condition on
    different text, so nothing more is compared. Both runs must generate the same number of tokens.
    """
    for label, ids, lps in (("reference", ref_ids, ref_log_probs), ("got", got_ids, got_log_probs)):
        if len(ids) != len(lps):
            failure = f"{name}: {label} has {len(ids)} tokens but {len(lps)} log-probs"
            return failure, failure
    if len(ref_ids) != len(got_ids):
        failure = f"{name}: {len(got_ids)} tokens generated, the reference has {len(ref_ids)}"
        return failure, failure
    j = next((k for k, (a, b) in enumerate(zip(ref_ids, got_ids)) if a != b), None)
    end = len(ref_ids) if j is None else j
    drift, failure = 0.0, None
    for k in range(end):
        d = abs(got_log_probs[k] - ref_log_probs[k])
        drift = max(drift, d)
        if d > tol and failure is None:
            failure = (f"{name}: position {k}: token {ref_ids[k]} in both, log-probs {ref_log_probs[k]!r} "
                       f"(reference) and {got_log_probs[k]!r} differ by {d:.6g} > tolerance {tol}")
    if failure is None and j is not None:
        d = abs(got_log_probs[j] - ref_log_probs[j])
        if tol == 0:
            failure = (f"{name}: position {j}: token {got_ids[j]} (log-prob {got_log_probs[j]!r}), the "
                       f"reference has {ref_ids[j]} (log-prob {ref_log_probs[j]!r}); tolerance 0 allows no "
                       f"divergence")
        elif d > tol:
            failure = (f"{name}: position {j}: token {got_ids[j]} (log-prob {got_log_probs[j]!r}), the "
                       f"reference has {ref_ids[j]} (log-prob {ref_log_probs[j]!r}): a gap of {d:.6g} > "
                       f"tolerance {tol} is not a near-tie")
    where = "none" if j is None else f"at {j}"
    summary = (f"{name}: {end}/{len(ref_ids)} tokens match, divergence {where}, "
               f"max |delta log-prob| before it {drift:.3g}")
    return failure, summary


def output_token_histogram(text):
    """(count, sum) of the backend's output-token-length histogram (the family's prefix may change)."""
    count = total = None
    for (sample, _), value in ic.parse_metrics(text).items():
        if sample.endswith("output_token_len_count"):
            count = value
        elif sample.endswith("output_token_len_sum"):
            total = value
    if count is None or total is None:
        raise AssertionError("no output_token_len histogram in the metrics")
    return count, total


def metric_value(text, name, **labels):
    """The value of the one sample of `name` whose labels include `labels`."""
    for (sample, sample_labels), value in ic.parse_metrics(text).items():
        if sample == name and set(labels.items()) <= set(sample_labels):
            return value
    raise AssertionError(f"no sample {name} {labels} in metrics")


class Client:
    """A running inflight-server and the requests these tests make of it."""

    def __init__(self, repo):
        self.server = ic.InflightServer(model_repository=repo,
                                        backend_directory=os.environ["INFLIGHT_BACKEND_DIR"]).start()
        self.port = self.server.http_port

    def stop(self):
        return self.server.stop()

    def post(self, path, body):
        return ic.post_json(self.port, path, body, timeout=120)

    def post_json(self, path, body):
        status, out = self.post(path, body)
        if status != 200:
            raise AssertionError(f"POST {path} → {status}: {out}")
        return out

    def stream(self, path, body, max_events=None):
        result = ic.stream_sse(self.port, path, body, max_events=max_events, timeout=120)
        if result.status != 200:
            raise AssertionError(f"POST {path} → {result.status}: {result.body}")
        return result.events

    def metrics(self):
        status, _, text = ic.get_metrics(self.server.metrics_port)
        assert status == 200, status
        return text


class LlmServer(unittest.TestCase):
    repo_env = "INFLIGHT_LLM_REPO"
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Client(ic.env_or_skip(cls.repo_env))

    @classmethod
    def tearDownClass(cls):
        if cls.server and cls.server.stop() != 0:
            raise AssertionError("inflight-server did not exit cleanly:\n" + cls.server.server.log())

    def tokenize(self, text):
        out = self.server.post_json("/v2/models/preprocessing/generate",
                                    {"QUERY": text, "REQUEST_OUTPUT_LEN": 1})
        return out["INPUT_ID"]

    def generate_ids(self, ids, max_tokens, **extra):
        return self.server.post_json("/v2/models/tensorrt_llm/generate", llm_inputs(ids, max_tokens, **extra))

    def stream_ids(self, ids, max_tokens, **extra):
        return self.server.stream("/v2/models/tensorrt_llm/generate_stream",
                                  llm_inputs(ids, max_tokens, streaming=[True], **extra))

    def kv_blocks(self):
        text = self.server.metrics()
        return (metric_value(text, "nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type="free"),
                metric_value(text, "nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type="max"))

    def wait_all_blocks_free(self):
        deadline = time.time() + 10
        while time.time() < deadline:
            free, total = self.kv_blocks()
            if free == total and total > 0:
                return
            time.sleep(0.2)
        self.fail(f"KV blocks not all free: {free} of {total}")


class EnsembleTest(LlmServer):
    def test_generate_answers_the_readme_request(self):
        body = {"text_input": PROMPT, "max_tokens": 20, "bad_words": "", "stop_words": ""}
        first = self.server.post_json("/v2/models/ensemble/generate", body)
        self.assertIsInstance(first["text_output"], str)
        self.assertGreater(len(first["text_output"]), 0)
        # Greedy: the same request gives the same answer, and it is what tensorrt_llm gives for the ids.
        second = self.server.post_json("/v2/models/ensemble/generate", body)
        self.assertEqual(first["text_output"], second["text_output"])
        ids = self.tokenize(PROMPT)
        direct = self.generate_ids(ids, 20)["output_ids"]
        self.assertEqual(len(direct), 20)  # exclude_input_in_output: only the new tokens
        text = self.server.post_json("/v2/models/postprocessing/generate",
                                     {"TOKENS_BATCH": [[direct]], "SEQUENCE_LENGTH": [len(direct)]})
        self.assertEqual(text["OUTPUT"], first["text_output"])
        # The fields of the README's answer that tritonserver's ensemble adds beside text_output.
        self.assertEqual((first["model_name"], first["model_version"]), ("ensemble", "1"))
        self.assertEqual((first["sequence_id"], first["sequence_start"], first["sequence_end"]),
                         (0, False, False))
        self.assertNotIn("sequence_id", text)  # a plain model's answer has none
        tagged = self.server.post_json("/v2/models/ensemble/generate",
                                       dict(body, sequence_id=42, sequence_start=True, sequence_end=True))
        self.assertEqual((tagged["sequence_id"], tagged["sequence_start"], tagged["sequence_end"]),
                         (42, True, True))
        self.assertEqual(tagged["text_output"], first["text_output"])

    def test_generate_stream_gives_the_same_tokens(self):
        ids = self.tokenize(PROMPT)
        whole = self.generate_ids(ids, 12)["output_ids"]
        events = self.stream_ids(ids, 12)
        streamed = []
        for e in events:
            self.assertNotIn("error", e)
            out = e["output_ids"]
            streamed.extend(out if isinstance(out, list) else [out])
        self.assertEqual(streamed, whole)
        self.assertGreaterEqual(len(events), 12)
        text_events = self.server.stream("/v2/models/ensemble/generate_stream",
                                         {"text_input": PROMPT, "max_tokens": 6, "bad_words": "",
                                          "stop_words": "", "stream": True})
        self.assertGreaterEqual(len(text_events), 6)
        for e in text_events:
            self.assertIn("text_output", e)

    def test_stop_words_end_the_output(self):
        ids = self.tokenize("Born in north-east France, Soyer trained as a")
        whole = self.generate_ids(ids, 16)["output_ids"]
        stop = whole[3:5]  # a two-token stop sequence: matched across token boundaries
        first = next(i for i in range(len(whole) - 1) if whole[i:i + 2] == stop)
        # NVIDIA's [2, N] layout: flat ids, then cumulative end offsets padded with -1.
        out = self.generate_ids(ids, 16, stop_words_list=[[stop, [2, -1]]])["output_ids"]
        self.assertEqual(out, whole[:first + 2])

    def test_errors_are_clear_and_do_not_disturb_neighbours(self):
        ids = self.tokenize(PROMPT)
        status, body = self.server.post("/v2/models/tensorrt_llm/generate", llm_inputs(ids, 0))
        self.assertEqual(status, 400)
        self.assertEqual(body["error"], "request_output_len 0 is not accepted: must be >= 1")
        status, body = self.server.post("/v2/models/tensorrt_llm/generate", llm_inputs([1, 99999999], 4))
        self.assertEqual(status, 400)
        self.assertEqual(body["error"], "input_ids[1] = 99999999 is outside the vocabulary [0, 50257)")
        status, body = self.server.post("/v2/models/tensorrt_llm/generate",
                                        llm_inputs(ids, 4, beam_width=[4]))
        self.assertEqual(status, 400)
        self.assertIn("beam search is not implemented yet", body["error"])
        self.assertEqual(len(self.generate_ids(ids, 4)["output_ids"]), 4)
        self.wait_all_blocks_free()

    def test_batch_of_two_rows_tagged_with_batch_index(self):
        a, b = self.tokenize(PROMPT), self.tokenize("Soyer trained as a chef")
        width = max(len(a), len(b))
        body = {"input_ids": [a + [0] * (width - len(a)), b + [0] * (width - len(b))],
                "input_lengths": [[len(a)], [len(b)]], "request_output_len": [[5], [7]]}
        events = self.server.stream("/v2/models/tensorrt_llm/generate_stream", body)
        by_row = {}
        for e in events:
            self.assertNotIn("error", e)
            by_row[e["batch_index"]] = e["output_ids"]
        self.assertEqual(by_row[0], self.generate_ids(a, 5)["output_ids"])
        self.assertEqual(by_row[1], self.generate_ids(b, 7)["output_ids"])

    def test_identical_prompt_reuses_kv_blocks(self):
        ids = (self.tokenize("Born in north-east France, Soyer trained as a chef. ") * 20)[:200]
        first = self.generate_ids(ids, 4, return_perf_metrics=[True])
        second = self.generate_ids(ids, 4, return_perf_metrics=[True])
        # 200 prompt tokens in blocks of 64: (200 - 1) // 64 = 3 full blocks can be shared.
        self.assertEqual(second["kv_cache_reused_blocks"], 3)
        self.assertEqual(first["output_ids"], second["output_ids"])

    def test_client_disconnect_mid_stream_cancels(self):
        ids = self.tokenize(PROMPT)
        before = self.server.metrics()
        count0 = metric_value(before, "nv_llm_output_token_len_count")
        sum0 = metric_value(before, "nv_llm_output_token_len_sum")
        got = self.server.stream("/v2/models/tensorrt_llm/generate_stream", llm_inputs(ids, 900, streaming=[True]),
                                 max_events=3)
        self.assertEqual(len(got), 3)
        deadline = time.time() + 20
        while time.time() < deadline:
            after = self.server.metrics()
            if metric_value(after, "nv_llm_output_token_len_count") > count0:
                break
            time.sleep(0.1)
        self.assertEqual(metric_value(after, "nv_llm_output_token_len_count"), count0 + 1)
        self.assertLess(metric_value(after, "nv_llm_output_token_len_sum") - sum0, 900)
        self.wait_all_blocks_free()

    def test_client_disconnect_of_a_non_streamed_generate_cancels(self):
        # The client of a plain /generate gives up (curl -m1); generation must stop with it, not run on
        # to max_tokens, and every KV block must come back. Through tensorrt_llm alone and the ensemble.
        ids = self.tokenize(PROMPT)
        # The check needs a request that outlasts the disconnect's detection (the cancellation
        # check runs every 100 ms): on an H200 the demo model makes 900 tokens in about 0.3 s, done
        # before the client leaves. Measured here, so the test runs where it can tell.
        start = time.time()
        self.server.post_json("/v2/models/tensorrt_llm/generate", llm_inputs(ids, 64))
        seconds_for_900 = (time.time() - start) * 900 / 64
        if seconds_for_900 < 2.0:
            self.skipTest(f"900 tokens take {seconds_for_900:.2f} s on this runner, too little to see "
                          "generation stop after a disconnect")
        cases = (("tensorrt_llm", llm_inputs(ids, 900)),
                 ("ensemble", {"text_input": PROMPT, "max_tokens": 900, "bad_words": "", "stop_words": ""}))
        for model, body in cases:
            with self.subTest(model=model):
                count0, sum0 = output_token_histogram(self.server.metrics())
                payload = json.dumps(body).encode()
                sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
                sock.sendall(b"POST /v2/models/" + model.encode() + b"/generate HTTP/1.1\r\nHost: t\r\n"
                             b"Content-Type: application/json\r\nContent-Length: " + str(len(payload)).encode() +
                             b"\r\n\r\n" + payload)
                deadline = time.time() + 20
                while time.time() < deadline:  # until the request is generating
                    if ic.first_sample(self.server.metrics(), ic.ACTIVE_FAMILIES, request_type="active") > 0:
                        break
                    time.sleep(0.02)
                # NOTE: past the server's half-close grace (200 ms after the request was read, an EOF
                # is taken as a client that shut down its sending side and still waits for the answer,
                # http_connection.cc's kHalfCloseGrace): closing at 0.2 s after "active" sometimes fell
                # inside it and the request ran to the end.
                time.sleep(0.5)
                sock.close()
                deadline = time.time() + 20
                while time.time() < deadline:
                    count, total = output_token_histogram(self.server.metrics())
                    if count > count0:
                        break
                    time.sleep(0.05)
                self.assertEqual(count, count0 + 1, "the request did not end")
                produced = total - sum0
                print(f"{model}: {produced:.0f} of 900 tokens produced before the disconnect stopped it")
                self.assertLess(produced, 450, "generation went on after the client left")
                self.wait_all_blocks_free()

    def test_64_concurrent_clients(self):
        prompts = [f"Question {i % 8}: what is machine learning?" for i in range(64)]

        def ask(p):
            return self.server.post_json("/v2/models/ensemble/generate",
                                         {"text_input": p, "max_tokens": 16, "bad_words": "", "stop_words": ""})

        with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
            answers = list(pool.map(ask, prompts))
        for i, a in enumerate(answers):
            self.assertEqual(a["text_output"], answers[i % 8]["text_output"], f"client {i}")
        self.wait_all_blocks_free()
        metrics = self.server.metrics()
        self.assertGreaterEqual(metric_value(metrics, "nv_inference_request_success", model="ensemble"), 64)


class TinyKvCacheTest(LlmServer):
    """max_utilization with 10 KV blocks of 64 tokens: eight requests of 100 + 150 tokens need 32 blocks, so
    requests are paused (blocks freed) and resumed (recomputed). Outputs must not change beyond what
    judge_greedy_runs allows."""
    repo_env = "INFLIGHT_LLM_TINY_KV_REPO"

    def test_pause_and_resume_give_identical_outputs(self):
        # bf16 GPU engines cannot match bit for bit (see judge_greedy_runs); their rounds set a tolerance.
        tol = float(os.environ.get("INFLIGHT_E2E_LOGPROB_TOL", "0"))
        reference = Client(os.environ["INFLIGHT_LLM_REPO"])
        try:
            prompts = [(self.tokenize(f"Story {i}: born in north-east France, Soyer trained as a ") * 20)[:100]
                       for i in range(8)]
            expected = [reference.post_json("/v2/models/tensorrt_llm/generate",
                                            llm_inputs(p, 150, return_log_probs=[True])) for p in prompts]
        finally:
            self.assertEqual(reference.stop(), 0)
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            got = list(pool.map(lambda p: self.generate_ids(p, 150, return_log_probs=[True]), prompts))
        failures = []
        for i in range(8):
            for run, out in (("reference", expected[i]), ("concurrent", got[i])):
                self.assertEqual(len(out["output_ids"]), 150, f"request {i}, {run} run")
            if tol == 0:
                self.assertEqual(got[i]["output_ids"], expected[i]["output_ids"], f"request {i}")
            failure, summary = judge_greedy_runs(expected[i]["output_ids"], expected[i]["output_log_probs"],
                                                 got[i]["output_ids"], got[i]["output_log_probs"], tol,
                                                 name=f"request {i}")
            if tol > 0:
                print(summary, file=sys.stderr)
            if failure:
                failures.append(failure)
        self.assertFalse(failures, "\n".join(failures))
        self.wait_all_blocks_free()


if __name__ == "__main__":
    unittest.main()
