"""bench/hf_peer.py without torch: arguments, the row plan, the table, and the engine -> Hugging Face
mapping, checked byte for byte against a checkpoint and the engine inflight-build makes from it when
INFLIGHT_MAKE_CHECKPOINT and INFLIGHT_BUILD name those programs."""
import contextlib
import importlib.util
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("INFLIGHT_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(SOURCE, "bench", "hf_peer.py")
spec = importlib.util.spec_from_file_location("hf_peer", SCRIPT)
hf_peer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hf_peer)


def parse(*argv):
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            return hf_peer.parse_arguments(list(argv)), ""
        except SystemExit:
            return None, err.getvalue()


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} with the standard library: 8-byte header length, JSON, data."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {name: (t["dtype"], t["shape"], data[t["data_offsets"][0]:t["data_offsets"][1]])
            for name, t in header.items()}


def engine(**overrides):
    config = {"architecture": "LlamaForCausalLM", "dtype": "bfloat16", "vocab_size": 1000, "hidden_size": 64,
              "num_layers": 2, "num_attention_heads": 4, "num_kv_heads": 2, "head_dim": 16,
              "intermediate_size": 128, "norm_eps": 1e-5, "max_position_embeddings": 2048, "rope_theta": 10000.0,
              "rope_scaling": None, "qkv_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
              "bos_token_id": 1, "eos_token_id": 2, "parallel": {"tp_size": 1, "pp_size": 1}}
    config.update(overrides)
    return config


class ArgumentsTest(unittest.TestCase):
    def test_defaults_are_the_executor_shapes_at_batch_1_and_64(self):
        args, _ = parse("--engine_dir", "e")
        self.assertEqual(args.shapes, [(128, 128), (128, 2048), (2048, 128), (2048, 2048)])
        self.assertEqual(args.batches, [1, 64])
        self.assertIsNone(args.max_new_tokens)
        self.assertEqual(args.dtype, "bfloat16")

    def test_flags(self):
        args, _ = parse("--checkpoint_dir", "c", "--shapes", "16/8, 32/4", "--batches", "2,3",
                        "--max_new_tokens", "5", "--time_budget_s", "90")
        self.assertEqual((args.checkpoint_dir, args.shapes, args.batches, args.max_new_tokens, args.time_budget_s),
                         ("c", [(16, 8), (32, 4)], [2, 3], 5, 90.0))

    def test_errors_name_the_flag_and_value(self):
        for argv, text in [(("--engine_dir", "e", "--shapes", "128x128"), "shape \"128x128\""),
                           (("--engine_dir", "e", "--shapes", "0/5"), "shape \"0/5\""),
                           (("--engine_dir", "e", "--batches", "1,0"), "batch sizes"),
                           (("--engine_dir", "e", "--max_new_tokens", "0"), "--max_new_tokens 0"),
                           (("--engine_dir", "e", "--time_budget_s", "-1"), "--time_budget_s"),
                           (("--engine_dir", "e", "--checkpoint_dir", "c"), "not allowed with"),
                           ((), "one of the arguments --engine_dir --checkpoint_dir is required")]:
            args, err = parse(*argv)
            self.assertIsNone(args, argv)
            self.assertIn(text, err, argv)


class PlanAndTableTest(unittest.TestCase):
    def test_rows_run_shape_by_shape_with_the_cap(self):
        self.assertEqual(hf_peer.plan_rows([(128, 128), (128, 2048)], [1, 64], 256),
                         [(1, 128, 128, 128), (64, 128, 128, 128), (1, 128, 2048, 256), (64, 128, 2048, 256)])
        self.assertEqual(hf_peer.plan_rows([(8, 9)], [2]), [(2, 8, 9, 9)])

    def test_derived_figures(self):
        tok_s, tpot_ms, ttft_ms = hf_peer.derive(64, 128, 0.5, 4.31)
        self.assertAlmostEqual(tok_s, 64 * 128 / 4.31)
        self.assertAlmostEqual(tpot_ms, (4.31 - 0.5) / 127 * 1e3)
        self.assertAlmostEqual(ttft_ms, 500.0)
        self.assertNotEqual(hf_peer.derive(1, 1, 0.1, 0.1)[1], hf_peer.derive(1, 1, 0.1, 0.1)[1])  # NaN

    def test_table_lines(self):
        header, rule = hf_peer.format_header()
        self.assertEqual(header, "| batch | in/out | new tokens | output tok/s | TPOT ms | TTFT ms | peak GPU GiB "
                                 "| wall s |")
        self.assertEqual(rule.count("---:"), 8)
        row = hf_peer.format_row({"batch": 64, "in_len": 128, "out_len": 2048, "run_len": 256, "tok_s": 12345.678,
                                  "tpot_ms": 20.1234, "ttft_ms": 91.5, "peak_gib": 17.25, "wall_s": 9.5})
        self.assertEqual(row, "| 64 | 128/2048 | 256 (cap; asked 2048) | 12,345.7 | 20.123 | 91.50 | 17.25 | 9.50 |")
        self.assertEqual(row.count("|"), header.count("|"))
        row = hf_peer.format_row({"batch": 1, "in_len": 8, "out_len": 1, "run_len": 1, "tok_s": 3.0,
                                  "tpot_ms": float("nan"), "ttft_ms": 1.0, "peak_gib": 0.5, "wall_s": 1.0})
        self.assertIn("| 1 | 8/1 | 1 | 3.0 | - | 1.00 |", row)
        failed = hf_peer.format_row({"batch": 64, "in_len": 2048, "out_len": 2048, "run_len": 2048,
                                     "error": "out of GPU memory"})
        self.assertEqual(failed, "| 64 | 2048/2048 | 2048 | out of GPU memory | - | - | - | - |")


class EngineMappingTest(unittest.TestCase):
    def test_config_for_llama3_scaling_and_qwen2(self):
        scaling = {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192}
        hf = hf_peer.hf_config_from_engine(engine(rope_scaling=scaling))
        self.assertEqual(hf["model_type"], "llama")
        self.assertEqual(hf["rope_scaling"], {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
        self.assertEqual((hf["num_hidden_layers"], hf["num_key_value_heads"], hf["attention_bias"]), (2, 2, False))
        # Version 2 engines keep the rope in one object.
        v2 = engine(rope={"type": "yarn", "theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 32768,
                          "beta_fast": 32.0, "beta_slow": 1.0, "mscale": None, "mscale_all_dim": None,
                          "truncate": True, "attention_factor": 1.1386})
        del v2["rope_theta"], v2["rope_scaling"]
        hf = hf_peer.hf_config_from_engine(v2)
        self.assertEqual(hf["rope_theta"], 1e6)
        self.assertEqual(hf["rope_scaling"], {"rope_type": "yarn", "factor": 4.0,
                                              "original_max_position_embeddings": 32768, "beta_fast": 32.0,
                                              "beta_slow": 1.0, "truncate": True, "attention_factor": 1.1386})
        qwen = hf_peer.hf_config_from_engine(engine(architecture="Qwen2ForCausalLM", qkv_bias=True,
                                                    tie_word_embeddings=True))
        self.assertEqual((qwen["model_type"], qwen["tie_word_embeddings"]), ("qwen2", True))
        self.assertNotIn("attention_bias", qwen)

    def test_unsupported_engines_are_refused_with_the_reason(self):
        with self.assertRaisesRegex(ValueError, "GPT2LMHeadModel .*--checkpoint_dir"):
            hf_peer.hf_config_from_engine(engine(architecture="GPT2LMHeadModel"))
        with self.assertRaisesRegex(ValueError, "tp_size 2"):
            hf_peer.hf_config_from_engine(engine(parallel={"tp_size": 2, "pp_size": 1}))

    def test_blocks_tile_every_fused_tensor(self):
        cfg = engine(qkv_bias=True)
        rows = {}
        for engine_name, _, first, count in hf_peer.engine_to_hf_names(cfg):
            rows.setdefault(engine_name, []).append((first, count))
        for name, blocks in rows.items():
            blocks.sort()
            ends = [0] + [f + c for f, c in blocks]
            self.assertEqual([f for f, _ in blocks], ends[:-1], name)  # contiguous from row 0
        self.assertEqual(rows["layers.1.qkv.weight"], [(0, 64), (64, 32), (96, 32)])
        self.assertEqual(rows["layers.0.gate_up.weight"], [(0, 128), (128, 128)])
        self.assertIn("lm_head.weight", rows)
        self.assertNotIn("lm_head.weight", dict((e, h) for e, h, _, _ in
                                                hf_peer.engine_to_hf_names(engine(tie_word_embeddings=True))))


@unittest.skipUnless(os.environ.get("INFLIGHT_MAKE_CHECKPOINT") and os.environ.get("INFLIGHT_BUILD"),
                     "INFLIGHT_MAKE_CHECKPOINT and INFLIGHT_BUILD are not set")
class EngineAgainstCheckpointTest(unittest.TestCase):
    """make_checkpoint writes a Hugging Face checkpoint; the engine split back gives its bytes."""

    def check(self, *checkpoint_flags):
        with tempfile.TemporaryDirectory() as tmp:
            ckpt, eng = os.path.join(tmp, "ckpt"), os.path.join(tmp, "engine")
            subprocess.run([os.environ["INFLIGHT_MAKE_CHECKPOINT"], "--preset", "tiny", "--output_dir", ckpt,
                            *checkpoint_flags], check=True, capture_output=True)
            subprocess.run([os.environ["INFLIGHT_BUILD"], "--checkpoint_dir", ckpt, "--output_dir", eng],
                           check=True, capture_output=True)
            with open(os.path.join(ckpt, "config.json")) as f:
                hf_written = json.load(f)
            with open(os.path.join(eng, "config.json")) as f:
                engine_config = json.load(f)
            checkpoint = read_safetensors(os.path.join(ckpt, "model.safetensors"))
            fused = read_safetensors(os.path.join(eng, "rank0.safetensors"))

            hf = hf_peer.hf_config_from_engine(engine_config)
            for key in ("architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                        "num_attention_heads", "num_key_value_heads", "vocab_size", "max_position_embeddings",
                        "tie_word_embeddings", "bos_token_id", "eos_token_id", "torch_dtype"):
                self.assertEqual(hf[key], hf_written[key], key)
            for key in ("rope_theta", "rms_norm_eps"):
                self.assertAlmostEqual(hf[key], hf_written[key], delta=1e-6 * hf_written[key])
            self.assertEqual(hf["rope_scaling"], hf_written.get("rope_scaling"))

            covered = set()
            for engine_name, hf_name, first, count in hf_peer.engine_to_hf_names(engine_config):
                dtype, shape, data = fused[engine_name]
                row_bytes = len(data) // shape[0]
                want_dtype, want_shape, want = checkpoint[hf_name]
                self.assertEqual(dtype, want_dtype, hf_name)
                self.assertEqual([count] + shape[1:], want_shape, hf_name)
                self.assertTrue(data[first * row_bytes:(first + count) * row_bytes] == want, hf_name)
                covered.add(hf_name)
            self.assertEqual(covered, set(checkpoint))

    def test_llama_bf16_with_llama3_scaling(self):
        self.check("--dtype", "bfloat16", "--rope_scaling", "llama3", "--vocab_size", "300")

    def test_qwen2_biases_and_tied_embeddings(self):
        self.check("--arch", "qwen2", "--vocab_size", "300")

    def test_mistral(self):
        self.check("--arch", "mistral", "--dtype", "float16")


class WithoutTorchTest(unittest.TestCase):
    @unittest.skipIf(importlib.util.find_spec("torch") and importlib.util.find_spec("transformers"),
                     "torch and transformers are installed here")
    def test_a_clear_message_and_exit_2(self):
        done = subprocess.run([sys.executable, SCRIPT, "--engine_dir", "missing"], capture_output=True, text=True)
        self.assertEqual(done.returncode, 2)
        self.assertIn("needs torch and transformers", done.stderr)
        self.assertIn("device machine", done.stderr)

    def test_help_needs_no_torch(self):
        done = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0)
        self.assertIn("--max_new_tokens", done.stdout)


if __name__ == "__main__":
    unittest.main()
