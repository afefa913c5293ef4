"""inflight-bench-quant-quality on a tiny Llama: make_checkpoint's random weights, built by inflight-build
plain and with each --qformat and the FP8 KV cache, compared on the CPU runner. The reference against
itself must agree exactly; every quantized engine must differ from it a little (KL > 0, finite, top-1
agreement high but in (0, 1]); int8_wo must stay closer than int4_wo; and bad input is refused by name."""
import math
import os
import shutil
import subprocess
import tempfile
import unittest

CHECKPOINT = ["--arch", "llama", "--hidden_size", "64", "--num_layers", "2", "--num_heads", "4",
              "--num_kv_heads", "2", "--intermediate_size", "128", "--vocab_size", "300",
              "--max_position_embeddings", "256", "--dtype", "float32", "--init_std", "0.3"]
ENGINES = {"fp8": ["--qformat", "fp8"], "int8_wo": ["--qformat", "int8_wo"],
           "int4_wo": ["--qformat", "int4_wo", "--group_size", "32"], "fp8_kv": ["--kv_cache_dtype", "fp8"]}
SEEDS = (31, 7)


def env_or_skip(name):
    value = os.environ.get(name)
    if not value:
        raise unittest.SkipTest(name + " is not set (the tools are not built)")
    return value


def parse_table(text):
    """Rows of the markdown table as {engine: {column: cell}}."""
    lines = [l for l in text.splitlines() if l.startswith("|")]
    headers = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(headers, cells))
    return rows


class QuantQualityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.make_checkpoint = env_or_skip("INFLIGHT_MAKE_CHECKPOINT")
        cls.build = env_or_skip("INFLIGHT_BUILD")
        cls.bench = env_or_skip("INFLIGHT_BENCH_QUANT_QUALITY")
        cls.tmp = tempfile.mkdtemp(prefix="quant_quality_")
        cls.engines = {seed: cls.make_engines(seed) for seed in SEEDS}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def make_engines(cls, seed):
        ckpt = os.path.join(cls.tmp, f"ckpt{seed}")
        subprocess.run([cls.make_checkpoint, *CHECKPOINT, "--seed", str(seed), "--output_dir", ckpt],
                       check=True, capture_output=True)
        dirs = {}
        for name, extra in [("plain", [])] + list(ENGINES.items()):
            out = os.path.join(cls.tmp, f"{name}{seed}")
            subprocess.run([cls.build, "--checkpoint_dir", ckpt, "--output_dir", out, "--max_batch_size", "8",
                            "--max_input_len", "64", "--max_seq_len", "128", "--tokens_per_block", "16", *extra],
                           check=True, capture_output=True)
            dirs[name] = out
        return dirs

    def run_bench(self, *args):
        return subprocess.run([self.bench, "--device", "cpu", *args], capture_output=True, text=True,
                              timeout=300)

    def compare(self, seed, *extra):
        dirs = self.engines[seed]
        names = list(ENGINES)
        proc = self.run_bench("--reference", dirs["plain"], "--candidates",
                              ",".join(dirs[n] for n in names), "--labels", ",".join(names),
                              "--num_prompts", "12", "--prompt_len", "8:24", "--generate", "6",
                              "--batch", "5", *extra)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return parse_table(proc.stdout), proc.stdout

    def test_quantized_engines_against_the_reference(self):
        for seed in SEEDS:
            with self.subTest(seed=seed):
                rows, text = self.compare(seed)
                floor = rows["reference vs itself (floor)"]
                self.assertEqual(float(floor["top-1 agreement"]), 1.0, text)
                self.assertEqual(float(floor["mean KL (nats)"]), 0.0, text)
                self.assertEqual(float(floor["max KL (nats)"]), 0.0, text)
                self.assertEqual(float(floor["identical continuations"]), 1.0, text)
                # 12 prompts of 8..24 tokens: every position is compared.
                positions = int(floor["positions"])
                self.assertGreaterEqual(positions, 12 * 8)
                self.assertLessEqual(positions, 12 * 24)
                for name in ENGINES:
                    row = rows[name]
                    self.assertEqual(int(row["positions"]), positions)
                    agreement, kl, max_kl = (float(row[c]) for c in
                                             ("top-1 agreement", "mean KL (nats)", "max KL (nats)"))
                    self.assertTrue(0.0 < agreement <= 1.0, f"{name}: {text}")
                    self.assertTrue(kl > 0.0 and math.isfinite(kl), f"{name}: {text}")
                    self.assertTrue(max_kl >= kl and math.isfinite(max_kl), f"{name}: {text}")
                    self.assertTrue(0.0 <= float(row["greedy prefix"]) <= 1.0, f"{name}: {text}")
                # More bits, closer: int8 per channel (~0.004 nats on seeds 1-8) < fp8 E4M3 weights and
                # activations (~0.15) < int4 groups of 32 (~0.8); the margins are 4-40x.
                kl = {name: float(rows[name]["mean KL (nats)"]) for name in ENGINES}
                self.assertLess(kl["int8_wo"], kl["fp8"], text)
                self.assertLess(kl["fp8"], kl["int4_wo"], text)
                self.assertIn("int4_wo g32", rows["int4_wo"]["format"])
                self.assertIn("fp8 KV", rows["fp8_kv"]["format"])

    def test_last_positions_limits_the_compared_positions(self):
        rows, text = self.compare(SEEDS[0], "--last_positions", "3")
        self.assertEqual(int(rows["int4_wo"]["positions"]), 12 * 3, text)

    def test_bad_input_is_refused_by_name(self):
        dirs = self.engines[SEEDS[0]]
        proc = self.run_bench("--reference", dirs["plain"], "--candidates", dirs["fp8"], "--device", "tpu")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--device", proc.stderr)
        self.assertIn("tpu", proc.stderr)
        proc = self.run_bench("--reference", dirs["plain"], "--candidates", dirs["fp8"], "--prompt_len", "9:3")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--prompt_len", proc.stderr)
        # A prompt longer than the engines' max_seq_len (128) with the continuation.
        proc = self.run_bench("--reference", dirs["plain"], "--candidates", dirs["fp8"], "--prompt_len", "125",
                              "--generate", "8")
        self.assertEqual(proc.returncode, 1)
        self.assertIn("max_seq_len", proc.stderr)

    def test_engines_of_another_model_are_refused(self):
        other = os.path.join(self.tmp, "other_ckpt")
        args = list(CHECKPOINT)
        args[args.index("--vocab_size") + 1] = "320"
        subprocess.run([self.make_checkpoint, *args, "--seed", "1", "--output_dir", other], check=True,
                       capture_output=True)
        engine = os.path.join(self.tmp, "other_engine")
        subprocess.run([self.build, "--checkpoint_dir", other, "--output_dir", engine], check=True,
                       capture_output=True)
        proc = self.run_bench("--reference", self.engines[SEEDS[0]]["plain"], "--candidates", engine,
                              "--num_prompts", "2", "--prompt_len", "4")
        self.assertEqual(proc.returncode, 1)
        self.assertIn("vocab_size 320", proc.stderr)


if __name__ == "__main__":
    unittest.main()
