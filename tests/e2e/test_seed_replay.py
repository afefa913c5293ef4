"""Replays the deployment sequences of the documents Inflight was started from (seed_sequences.py)
against inflight-server and the CPU demo model, with only the substitutions seed_replay.py lists
(paths, backend name, tritonserver -> inflight-server, free ports; the 2-GPU documents run under
mpirun -n 2 and 4 on the demo model split as many ways), and checks the
answers: the generate responses' model_name, model_version and text_output, and the metrics.

tensorrt_llm_bls: seeds 000 and 002 send it the README's request; the model is Inflight's C++ BLS
backend (the template names it), which answers with the prompt and its continuation where the document
fills its template (seed 000), and is unavailable, naming its unfilled placeholders, where the document
never fills it (seed 002: tritonserver could not parse it either).

Environment (tests/e2e/llm.cmake): INFLIGHT_SERVER, INFLIGHT_SOURCE_DIR, INFLIGHT_LLM_ENGINE (the
demo engine) and INFLIGHT_LLM_CHECKPOINT (its checkpoint folder, which holds GPT-2's tokenizer).
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import seed_replay
import seed_sequences
from inflight_client import env_or_skip, get_json, post_json

SEQUENCES = {s.name: s for s in seed_sequences.SEQUENCES}
# World sizes the documents start that are replayed as written (the others run as one rank).
SPLIT_WORLD_SIZES = (2, 4)
README_PROMPT = "What is machine learning?"
# Values for the keys seed 002's hand edits leave unfilled and that have no fill_template.py default:
# the ones seeds 000 and 004 use.
SEED_002_FILL_VALUES = {"triton_max_batch_size": "4", "decoupled_mode": "false",
                        "preprocessing_instance_count": "1", "postprocessing_instance_count": "1",
                        "bls_instance_count": "1"}


class SeedReplayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = env_or_skip("INFLIGHT_SERVER")
        cls.source_dir = env_or_skip("INFLIGHT_SOURCE_DIR")
        cls.engine = env_or_skip("INFLIGHT_LLM_ENGINE")
        cls.tokenizer = env_or_skip("INFLIGHT_LLM_CHECKPOINT")
        cls.have_mpirun = shutil.which("mpirun") is not None
        # The documents' 2-GPU engines: the demo model with --tp_size 2, served under mpirun -n 2
        # as the documents start it (docs/multi_gpu.md). Without mpirun: one rank.
        cls.engines_tmp = tempfile.TemporaryDirectory(prefix="seed_replay_engines_")
        cls.split_engines = {}
        build_tool = os.environ.get("INFLIGHT_BUILD_TOOL")
        if cls.have_mpirun and build_tool:
            for world in SPLIT_WORLD_SIZES:
                out = os.path.join(cls.engines_tmp.name, f"tp{world}")
                subprocess.run([build_tool, "--checkpoint_dir", cls.tokenizer, "--output_dir", out,
                                "--dtype", "float32", "--max_batch_size", "64", "--max_input_len",
                                "512", "--max_seq_len", "1024", "--tokens_per_block", "64",
                                "--tp_size", str(world)], check=True, capture_output=True,
                               timeout=300)
                cls.split_engines[world] = out

    @classmethod
    def tearDownClass(cls):
        cls.engines_tmp.cleanup()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="seed_replay_")
        self.addCleanup(self.tmp.cleanup)
        self.root = seed_replay.ContainerRoot(self.tmp.name, self.source_dir, self.engine,
                                              self.tokenizer, self.split_engines)

    # ---- the steps ----------------------------------------------------------------------------
    def run_setup(self, sequence):
        # Seed 002's set-up is relative ("cd tensorrtllm_backend"): it runs from the root folder.
        script, _ = seed_replay.setup_script(self.root, sequence.setup)
        result = subprocess.run(["bash", "-c", script], cwd=self.root.root, capture_output=True,
                                text=True, timeout=120)
        self.assertEqual(result.returncode, 0,
                         f"the set-up of seed {sequence.name} failed:\n{script}\n{result.stderr}")
        return result.stderr

    def start(self, sequence):
        script = seed_replay.start_script(self.root, sequence.setup, sequence.start, self.server,
                                          self.have_mpirun)
        return seed_replay.ScriptServer(script, cwd=self.root.root)

    def curl(self, server, line):
        return seed_replay.run_curl(
            seed_replay.curl_command(line, server.http_port, server.metrics_port), self.root.root)

    # ---- the checks ---------------------------------------------------------------------------
    def check_generate(self, server, sequence, line):
        prompt = json.loads(re.search(r"-d '(.*)'", line).group(1))["text_input"]
        answer = json.loads(self.curl(server, line))
        self.assertEqual(answer.get("model_name"), "ensemble", answer)
        self.assertEqual(answer.get("model_version"), "1", answer)
        text = answer.get("text_output")
        self.assertIsInstance(text, str, answer)
        if sequence.prompt_in_output:
            # exclude_input_in_output false: the prompt, then what was generated.
            self.assertTrue(text.startswith(prompt), answer)
            self.assertGreater(len(text), len(prompt), answer)
        else:
            self.assertTrue(text, answer)
            self.assertFalse(text.startswith(prompt), answer)
        return text

    def check_bls(self, server, line):
        """Returns whether the model answered (it is not loaded where the document never fills it)."""
        status, _ = get_json(server.http_port, "/v2/models/tensorrt_llm_bls/ready")
        if status != 200:
            # The document leaves its placeholders unfilled (seed 002 fills only the models its
            # table names): tritonserver could not parse it either, and the answer says which.
            _, index = post_json(server.http_port, "/v2/repository/index", {})
            reason = next(e.get("reason", "") for e in index if e["name"] == "tensorrt_llm_bls")
            self.assertIn("unfilled template placeholders", reason)
            answer = json.loads(self.curl(server, line))
            self.assertIn("tensorrt_llm_bls", answer.get("error", ""), answer)
            return False
        answer = json.loads(self.curl(server, line))
        self.assertEqual(answer.get("model_name"), "tensorrt_llm_bls", answer)
        self.assertEqual(answer.get("model_version"), "1", answer)
        self.assertTrue(answer.get("text_output", "").startswith(README_PROMPT), answer)
        return True

    def check_metrics(self, server, sequence, requests, bls_requests=0):
        text = self.curl(server, sequence.metrics)

        def value(name, labels):
            match = re.search(r"^" + name + r"\{" + re.escape(labels) + r"\} (\S+)$", text,
                              re.MULTILINE)
            self.assertIsNotNone(match, f"no {name}{{{labels}}} in:\n{text}")
            return float(match.group(1))

        # Triton's per-model counters, under Triton's names.
        # The BLS model's requests reach tensorrt_llm too (it tokenizes in process).
        for model in ("ensemble", "preprocessing", "tensorrt_llm", "postprocessing"):
            expected = requests + (bls_requests if model == "tensorrt_llm" else 0)
            self.assertEqual(value("nv_inference_request_success",
                                   f'model="{model}",version="1"'), expected, model)
            for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
                self.assertEqual(value("nv_inference_request_failure",
                                       f'model="{model}",reason="{reason}",version="1"'), 0, model)
        # The LLM model's batch statistics, under the names the documents show.
        self.assertEqual(value("nv_trt_llm_request_metrics",
                               'model="tensorrt_llm",request_type="max",version="1"'), 64)
        self.assertGreater(value("nv_trt_llm_kv_cache_block_metrics",
                                 'kv_cache_block_type="max",model="tensorrt_llm",version="1"'), 0)
        self.assertEqual(value("nv_llm_output_token_len_count",
                               'model="tensorrt_llm",response_metric_type="total_output_tokens",'
                               'version="1"'), requests + bls_requests)

    def replay(self, sequence):
        """Starts the sequence's server, sends its requests and checks the answers; returns the
        server's output."""
        with self.start(sequence) as server:
            ensemble = [line for line in sequence.generate if "/ensemble/" in line]
            for line in ensemble:
                self.check_generate(server, sequence, line)
            bls_answered = 0
            for line in sequence.generate:
                if "/tensorrt_llm_bls/" in line:
                    with self.subTest(request="tensorrt_llm_bls"):
                        bls_answered += self.check_bls(server, line)
            self.check_metrics(server, sequence, len(ensemble), bls_answered)
        return server.log()

    def check_world(self, log, world):
        """The document's world size ran as written where a split engine of that size exists."""
        if world in self.split_engines:
            self.assertIn(f"rank {world - 1} of {world} loads its part of the engine", log)

    # ---- the documents ------------------------------------------------------------------------
    def test_seed_000_readme_v0_11(self):
        notes = self.run_setup(SEQUENCES["000"])
        # The fill commands of that README leave logits_datatype (ensemble, tensorrt_llm,
        # tensorrt_llm_bls) to fill_template.py's default, and name NVIDIA's backend.
        self.assertIn("ensemble/config.pbtxt: logits_datatype not given: wrote its default "
                      "TYPE_FP32", notes)
        self.assertNotIn("still unfilled", notes)
        self.check_world(self.replay(SEQUENCES["000"]), 4)

    def test_seed_002_hand_edits_then_the_keys_the_errors_name(self):
        # One rank: the first start serves a repository whose models cannot load, where ranks > 0
        # of a split engine would end the job (they never serve) before the index can be read.
        root = os.path.join(self.tmp.name, "one_rank")
        self.root = seed_replay.ContainerRoot(root, self.source_dir, self.engine, self.tokenizer)
        sequence = SEQUENCES["002"]
        self.run_setup(sequence)
        repo = self.root.path("/tensorrtllm_backend/triton_model_repo")
        for model, edits in sequence.hand_edits.items():
            for key, value in edits.items():
                if value.startswith("/"):
                    value = self.root.path(value)
                seed_replay.set_parameter(os.path.join(repo, model, "config.pbtxt"), key, value)
        # As written, the repository still has the placeholders the document's table does not
        # mention: each model is UNAVAILABLE with an error naming them and the fill_template.py
        # keys that set them. As tritonserver (--exit-on-error defaults to true), the server prints its
        # model table with each reason, then exits 1.
        fills = {}
        server = self.start(sequence)
        with self.assertRaises(RuntimeError):
            server.start()
        self.assertEqual(server.process.wait(timeout=60), 1, server.log())
        reasons = {}
        for row in re.finditer(r"^\| (\w+)\s+\|[^|]*\| UNAVAILABLE: (.*?) \|$", server.log(), re.M):
            reasons[row.group(1)] = row.group(2)
        self.assertTrue({"preprocessing", "postprocessing", "tensorrt_llm", "ensemble"} <= set(reasons), reasons)
        # Every model the table names is fixed with the keys its error names (tensorrt_llm_bls too: the
        # server stops while any model fails to load).
        for model in sorted(reasons):
            path = os.path.join(repo, model, "config.pbtxt")
            reason = reasons[model]
            self.assertIn(f"{path}: unfilled template placeholders", reason)
            self.assertIn("${triton_max_batch_size}", reason)
            self.assertIn(f"fill_template.py -i {path} ", reason)
            listed = reason.split(". Set them with")[0]
            defaulted = reason.split("without them: ")[1] if "without them: " in reason else ""
            keys = [k for k in re.findall(r"\$\{(\w+)\}", listed) if k + " " not in defaulted]
            self.assertTrue(set(keys) <= set(SEED_002_FILL_VALUES), (model, keys, reason))
            fills[path] = ",".join(f"{k}:{SEED_002_FILL_VALUES[k]}" for k in keys)
        fill_template = self.root.path("/tensorrtllm_backend/tools/fill_template.py")
        for path, subs in fills.items():
            result = subprocess.run(["python3", fill_template, "-i", path, subs],
                                    capture_output=True, text=True, timeout=60)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertNotIn("still unfilled", result.stderr)
        self.replay(sequence)

    def test_seed_004_launch_triton_server(self):
        self.run_setup(SEQUENCES["004_launcher"])
        self.check_world(self.replay(SEQUENCES["004_launcher"]), 2)

    def test_seed_004_mpirun_tritonserver(self):
        self.run_setup(SEQUENCES["004_mpirun"])
        self.check_world(self.replay(SEQUENCES["004_mpirun"]), 2)

    def test_seed_004_second_repository(self):
        sequence = SEQUENCES["004_opti"]
        self.run_setup(sequence)
        repo = self.root.path("/triton_model_repo/Qwen2-14B-Instruct-Int4-2Gpu-Opti")
        with open(os.path.join(repo, "tensorrt_llm_bls", "config.pbtxt")) as f:
            self.assertIn('string_value: "true"', f.read())  # accumulate_tokens:true
        self.replay(sequence)


if __name__ == "__main__":
    unittest.main()
