"""A Hugging Face checkpoint folder as engine_dir: inflight-server's backend converts it at load with
inflight-build's code (the same engine files, byte for byte), caches it under a key of the checkpoint's bytes
and the build options (a changed checkpoint builds anew, an unchanged one is reused), or, without a cache,
converts into a temporary engine removed at unload; and it serves the tokens the prebuilt engine serves.

The checkpoint is make_checkpoint's, with config.json in transformers 5's layout (rope_parameters, dtype) and in
transformers 4's (rope_theta, rope_scaling, torch_dtype): both serve the same tokens."""
import filecmp
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import inflight_client as ic

SUBS = ("triton_backend:inflight,triton_max_batch_size:8,decoupled_mode:False,max_beam_width:1,"
        "engine_dir:{engine},max_tokens_in_paged_kv_cache:2048,kv_cache_free_gpu_mem_fraction:0.5,"
        "exclude_input_in_output:True,enable_kv_cache_reuse:False,batching_strategy:inflight_fused_batching,"
        "max_queue_delay_microseconds:0,encoder_input_features_data_type:TYPE_FP16,logits_datatype:TYPE_FP32,"
        "device:cpu{extra}")
CHECKPOINT = ["--arch", "llama", "--hidden_size", "64", "--num_layers", "2", "--num_heads", "4",
              "--num_kv_heads", "2", "--intermediate_size", "128", "--vocab_size", "300",
              "--max_position_embeddings", "256", "--rope_theta", "500000", "--rope_scaling", "yarn",
              "--rope_factor", "2", "--dtype", "bfloat16", "--init_std", "0.2", "--seed", "22"]
PROMPT = [5, 17, 250, 3, 99, 42, 7]


def make_model(repo, name, engine, extra=""):
    ic.make_llm_model(repo, name, SUBS.format(engine=engine, extra=extra))


def generate(server, model):
    status, out = ic.post_json(server.http_port, f"/v2/models/{model}/generate",
                               {"input_ids": [PROMPT], "input_lengths": [len(PROMPT)], "request_output_len": [12]})
    if status != 200:
        raise AssertionError(f"{model}: {status} {out}")
    return out["output_ids"]


class HfFolderEngineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bin = ic.env_or_skip("INFLIGHT_TOOLS_DIR")
        cls.backends = ic.env_or_skip("INFLIGHT_BACKEND_DIR")
        ic.env_or_skip("INFLIGHT_SERVER")
        cls.tmp = tempfile.mkdtemp(prefix="hf_folder_engine_")
        cls.v5 = os.path.join(cls.tmp, "llama-v5")
        cls.v4 = os.path.join(cls.tmp, "llama-v4")
        cls.engine = os.path.join(cls.tmp, "engine")
        for folder, layout in ((cls.v5, "5"), (cls.v4, "4")):
            subprocess.run([os.path.join(cls.bin, "make_checkpoint"), *CHECKPOINT, "--layout", layout,
                            "--output_dir", folder], check=True, capture_output=True)
        # What a user would have run before: the same build limits the backend takes from the model config.
        subprocess.run([os.path.join(cls.bin, "inflight-build"), "--checkpoint_dir", cls.v5, "--output_dir",
                        cls.engine, "--max_batch_size", "8"], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def server(self, repo):
        return ic.InflightServer(model_repository=repo, backend_directory=self.backends, startup_timeout=120)

    def test_layouts_cache_and_the_prebuilt_engine_agree(self):
        with open(os.path.join(self.v5, "config.json")) as f:
            written = json.load(f)
        self.assertEqual(written["rope_parameters"]["rope_type"], "yarn")  # transformers 5's layout
        self.assertEqual(written["dtype"], "bfloat16")
        cache = os.path.join(self.tmp, "cache")
        repo = os.path.join(self.tmp, "repo")
        make_model(repo, "llm_engine", self.engine)
        make_model(repo, "llm_hf5", self.v5, f",engine_cache_dir:{cache}")
        make_model(repo, "llm_hf4", self.v4, f",engine_cache_dir:{cache}")
        with self.server(repo) as server:
            expected = generate(server, "llm_engine")
            self.assertEqual(len(expected), 12)
            self.assertEqual(generate(server, "llm_hf5"), expected)
            self.assertEqual(generate(server, "llm_hf4"), expected)
            log = server.log()
        self.assertIn("is a Hugging Face checkpoint", log)
        self.assertRegex(log, r"converting the checkpoint: 100% \(\d+/\d+ tensors")
        self.assertIn("with rope yarn (theta 500000, factor 2", log)

        # inflight-build's code wrote it: the same files, byte for byte.
        entries = sorted(os.listdir(cache))
        self.assertEqual(len(entries), 2, entries)  # one per checkpoint folder
        v5_engine = os.path.join(cache, next(e for e in entries if e.startswith("llama-v5-")))
        for name in ("config.json", "rank0.safetensors"):
            self.assertTrue(filecmp.cmp(os.path.join(v5_engine, name), os.path.join(self.engine, name),
                                        shallow=False), name)
        self.assertTrue(re.fullmatch(r"llama-v5-[0-9a-f]{32}", os.path.basename(v5_engine)))

        # A second start reuses the cache.
        with self.server(repo) as server:
            self.assertEqual(generate(server, "llm_hf5"), expected)
            log = server.log()
        self.assertIn("no conversion", log)
        self.assertNotIn("converting the checkpoint", log)

        # A changed checkpoint is never served from the old engine: a new key, a new conversion.
        changed = os.path.join(self.tmp, "changed")
        shutil.copytree(self.v5, changed)
        config_path = os.path.join(changed, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        config["rope_parameters"]["factor"] = 4.0
        with open(config_path, "w") as f:
            json.dump(config, f, indent=2, sort_keys=True)
        repo2 = os.path.join(self.tmp, "repo2")
        make_model(repo2, "llm_changed", changed, f",engine_cache_dir:{cache}")
        with self.server(repo2) as server:
            generate(server, "llm_changed")
            log = server.log()
        self.assertIn("converting the checkpoint: 100%", log)
        self.assertEqual(len(os.listdir(cache)), 3)

    def test_without_a_cache_the_engine_is_temporary(self):
        repo = os.path.join(self.tmp, "repo_nocache")
        make_model(repo, "llm_hf", self.v5)
        server = self.server(repo).start()
        try:
            out = generate(server, "llm_hf")
            self.assertEqual(len(out), 12)
            match = re.search(r"converting it \(.*\) into (\S+), removed", server.log())
            self.assertIsNotNone(match, server.log())
            temporary = match.group(1)
            self.assertTrue(os.path.exists(os.path.join(temporary, "config.json")))
        finally:
            self.assertEqual(server.stop(), 0)
        self.assertFalse(os.path.exists(temporary), "the temporary engine outlived the server")

    def test_a_refused_field_fails_the_model_by_name(self):
        folder = os.path.join(self.tmp, "longrope")
        shutil.copytree(self.v5, folder)
        config_path = os.path.join(folder, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        config["rope_parameters"] = {"rope_type": "longrope", "rope_theta": 10000.0}
        with open(config_path, "w") as f:
            json.dump(config, f)
        repo = os.path.join(self.tmp, "repo_refused")
        make_model(repo, "llm_longrope", folder)
        server = ic.InflightServer(model_repository=repo, backend_directory=self.backends, wait_ready=False).start()
        try:
            status, models = ic.post_json(server.http_port, "/v2/repository/index", {})
            self.assertEqual(status, 200, models)
            model = {m["name"]: m for m in models}["llm_longrope"]
            self.assertEqual(model["state"], "UNAVAILABLE")
            self.assertIn('rope_type "longrope" is not supported; supported: default, linear, dynamic, yarn, llama3',
                          model["reason"])
        finally:
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main()
