"""The tensorrt_llm template, filled as NVIDIA's README fills it, loads into inflight-server; what is wrong
with it is reported per model with a clear reason, and the rest of the repository still serves."""
import os
import tempfile
import unittest

import inflight_client as ic

README_SUBS = ("triton_backend:inflight,triton_max_batch_size:64,decoupled_mode:False,max_beam_width:1,"
               "engine_dir:{engine},max_tokens_in_paged_kv_cache:2560,max_attention_window_size:2560,"
               "kv_cache_free_gpu_mem_fraction:0.5,exclude_input_in_output:True,enable_kv_cache_reuse:False,"
               "batching_strategy:{strategy},max_queue_delay_microseconds:0,"
               "encoder_input_features_data_type:TYPE_FP16,logits_datatype:TYPE_FP32")


def make_model(repo, name, engine, strategy):
    ic.make_llm_model(repo, name, README_SUBS.format(engine=engine, strategy=strategy))


class RepositoryTest(unittest.TestCase):
    def test_readme_fill_reports_only_what_is_missing(self):
        with tempfile.TemporaryDirectory() as repo:
            missing = os.path.join(repo, "no_engine_here")
            make_model(repo, "llm_missing_engine", missing, "inflight_fused_batching")
            make_model(repo, "llm_bad_strategy", os.environ["INFLIGHT_LLM_ENGINE"], "foo")
            make_model(repo, "llm_good", os.environ["INFLIGHT_LLM_ENGINE"], "inflight_fused_batching")
            server = ic.InflightServer(model_repository=repo, wait_ready=False,
                                       backend_directory=os.environ["INFLIGHT_BACKEND_DIR"]).start()
            try:
                status, models = ic.post_json(server.http_port, "/v2/repository/index", {})
                self.assertEqual(status, 200, models)
                index = {m["name"]: m for m in models}
                self.assertEqual(index["llm_good"]["state"], "READY")
                self.assertEqual(index["llm_missing_engine"]["state"], "UNAVAILABLE")
                self.assertIn(missing, index["llm_missing_engine"]["reason"])
                self.assertEqual(index["llm_bad_strategy"]["state"], "UNAVAILABLE")
                self.assertIn('Invalid gpt_model_type "foo". Must be v1/inflight_batching/inflight_fused_batching.',
                              index["llm_bad_strategy"]["reason"])
                # The good model serves (not decoupled: one response).
                status, out = ic.post_json(server.http_port, "/v2/models/llm_good/generate",
                                           {"input_ids": [[1, 2, 3]], "input_lengths": [3], "request_output_len": [4]})
                self.assertEqual(status, 200, out)
                self.assertEqual(len(out["output_ids"]), 4)
            finally:
                self.assertEqual(server.stop(), 0)

    def test_busy_poll_serves_what_sleeping_waits_serve(self):
        # busy_poll true makes the backend's response thread and the executor spin (the default on a
        # GPU only): the same greedy answers as with it off, and the server still stops cleanly.
        with tempfile.TemporaryDirectory() as repo:
            engine = os.environ["INFLIGHT_LLM_ENGINE"]
            for name, poll in (("llm_sleeping", "False"), ("llm_spinning", "True")):
                ic.make_llm_model(repo, name, README_SUBS.format(engine=engine, strategy="inflight_fused_batching") +
                                  f",busy_poll:{poll}")
            server = ic.InflightServer(model_repository=repo,
                                       backend_directory=os.environ["INFLIGHT_BACKEND_DIR"]).start()
            try:
                answers = {}
                for name in ("llm_sleeping", "llm_spinning"):
                    answers[name] = []
                    for prompt in ([1, 2, 3], [7, 5, 9, 11, 13], [4]):
                        status, out = ic.post_json(server.http_port, f"/v2/models/{name}/generate",
                                                   {"input_ids": [prompt], "input_lengths": [len(prompt)],
                                                    "request_output_len": [6]})
                        self.assertEqual(status, 200, out)
                        answers[name].append(out["output_ids"])
                self.assertEqual(answers["llm_sleeping"], answers["llm_spinning"])
                self.assertEqual(len(answers["llm_spinning"][0]), 6)
            finally:
                self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main()
