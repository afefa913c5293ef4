"""inflight-bench-executor's quantized random engines (--qformat, --group_size, --kv_cache_dtype) on
the CPU: the tiny preset measured as int4_wo with an FP8 KV cache, its header saying so, and the
flags refused by name beside --engine_dir; and the decode floor of an engine whose weights are made at
load. INFLIGHT_EXECUTOR_BENCH is the program, INFLIGHT_BUILD inflight-build."""
import os
import re
import subprocess
import tempfile
import unittest

BENCH = os.environ.get("INFLIGHT_EXECUTOR_BENCH")
BUILD = os.environ.get("INFLIGHT_BUILD")
SMALL_RUN = ["--preset", "tiny", "--sections", "decode,throughput", "--shapes", "16/8",
             "--num_requests", "4", "--decode_context", "8", "--decode_steps", "4",
             "--bandwidth_gbps", "10"]


def run(*flags):
    return subprocess.run([BENCH, *flags], capture_output=True, text=True, timeout=240)


def engine_megabytes(stdout):
    m = re.search(r"^Random tiny engine \((.*)\): ([0-9.]+) MB written", stdout, re.M)
    if m is None:
        raise AssertionError("no 'Random tiny engine' line in:\n" + stdout)
    return m.group(1), float(m.group(2))


@unittest.skipUnless(BENCH, "INFLIGHT_EXECUTOR_BENCH is not set")
class QuantizedRandomEngineTest(unittest.TestCase):
    def test_int4_engine_measured_and_described(self):
        done = run(*SMALL_RUN, "--qformat", "int4_wo", "--group_size", "32", "--kv_cache_dtype", "fp8")
        self.assertEqual(done.returncode, 0, done.stderr)
        described, int4_mb = engine_megabytes(done.stdout)
        self.assertEqual(described, "int4_wo (group 32), FP8 KV cache")
        self.assertIn("; quantization int4_wo (group 32), FP8 KV cache; on cpu", done.stdout)
        row = re.search(r"^\|\s*16/8\s*\|\s*4\s*\|\s*([0-9.,]+)\s*\|", done.stdout, re.M)
        self.assertIsNotNone(row, done.stdout)
        self.assertGreater(float(row.group(1).replace(",", "")), 0)
        self.assertIn("TRT-LLM FP16 H100", done.stdout)  # not an FP8 engine

        # The same preset unquantized: the int4 engine's decoder linears take a quarter byte a
        # weight (plus scales) against four, so the whole engine is smaller.
        plain = run(*SMALL_RUN, "--sections", "decode")
        self.assertEqual(plain.returncode, 0, plain.stderr)
        described, float_mb = engine_megabytes(plain.stdout)
        self.assertEqual(described, "no weight quantization, KV cache in the engine dtype")
        self.assertLess(int4_mb, float_mb)

    def test_fp8_engine_compared_with_the_fp8_reference(self):
        done = run(*SMALL_RUN, "--qformat", "fp8", "--sections", "throughput")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("TRT-LLM FP8 H100", done.stdout)
        self.assertIn("fp8 (E4M3 weights, per-channel scales; activations per token)", done.stdout)

    def test_quantization_flags_are_refused_with_an_engine_dir(self):
        with tempfile.TemporaryDirectory() as d:
            for flag, value in (("--qformat", "fp8"), ("--group_size", "64"), ("--kv_cache_dtype", "fp8")):
                done = run("--engine_dir", d, flag, value)
                self.assertNotEqual(done.returncode, 0)
                self.assertIn(flag + " applies to the random --preset engine, not to --engine_dir",
                              done.stderr)

    def test_bad_values_name_the_flag_and_the_choices(self):
        done = run("--qformat", "int3")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("--qformat", done.stderr)
        self.assertIn("int4_wo", done.stderr)
        done = run("--kv_cache_dtype", "int8")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("fp8", done.stderr)


@unittest.skipUnless(BENCH and BUILD, "INFLIGHT_EXECUTOR_BENCH or INFLIGHT_BUILD is not set")
class WeightsMadeAtLoadTest(unittest.TestCase):
    def decode_row(self, engine_dir):
        done = run("--engine_dir", engine_dir, "--sections", "decode", "--decode_context", "8",
                   "--decode_steps", "4", "--bandwidth_gbps", "10")
        self.assertEqual(done.returncode, 0, done.stderr)
        row = re.search(r"^\|\s*(-?[0-9.,]+)\s*\|\s*[0-9.,]+\s*\|\s*[0-9.,]+\s*\|\s*(-?[0-9.]+)\s*\|",
                        done.stdout, re.M)
        self.assertIsNotNone(row, done.stdout)
        return float(row.group(1).replace(",", "")), float(row.group(2))

    def test_floor_counts_the_weights_the_rank_files_would_hold(self):
        # An engine of files and the same engine made at load (no rank files): the decode floor's
        # weight bytes come from the files, or from the plan of the files not written.
        with tempfile.TemporaryDirectory() as d:
            floors = []
            for name, extra in (("files", []), ("at_load", ["--weights_at_load"])):
                out = os.path.join(d, name)
                built = subprocess.run([BUILD, "--random_preset", "tiny", "--qformat", "int4_wo",
                                        "--max_input_len", "8", "--max_seq_len", "16", *extra,
                                        "--output_dir", out], capture_output=True, text=True,
                                       timeout=120)
                self.assertEqual(built.returncode, 0, built.stderr)
                floors.append(self.decode_row(out))
            self.assertFalse(any(f.endswith(".safetensors") for f in os.listdir(os.path.join(d, "at_load"))))
            (mb_files, floor_files), (mb_at_load, floor_at_load) = floors
            self.assertGreater(mb_files, 0)
            self.assertAlmostEqual(mb_at_load, mb_files, delta=0.01 * mb_files)
            self.assertAlmostEqual(floor_at_load, floor_files, delta=0.02 * floor_files)


if __name__ == "__main__":
    unittest.main()
