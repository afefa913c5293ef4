"""Tests of tools/fill_template.py: the command-line behaviour of NVIDIA's script, and the filled
copies of our templates that the fuzz corpus (tests/fuzz/corpus) keeps.

Run: python3 -m unittest -v test_fill_template   (from this folder), or through ctest.
Refresh the corpus copies after a template change: python3 test_fill_template.py --write-corpus
"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.environ.get("INFLIGHT_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO, "tools", "fill_template.py")
TEMPLATES = os.path.join(REPO, "all_models", "inflight_batcher_llm")
CORPUS = os.path.join(REPO, "tests", "fuzz", "corpus")

spec = importlib.util.spec_from_file_location("fill_template", SCRIPT)
fill_template = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fill_template)

# The substitutions of NVIDIA's README (with triton_backend:inflight), and small fills of the
# other models. Each (model, substitutions) gives tests/fuzz/corpus/<model>.filled.pbtxt.
README_LLM_SUBS = (
    "triton_backend:inflight,triton_max_batch_size:64,decoupled_mode:False,max_beam_width:1,"
    "engine_dir:engines/llama-7b,max_tokens_in_paged_kv_cache:2560,"
    "max_attention_window_size:2560,kv_cache_free_gpu_mem_fraction:0.5,"
    "exclude_input_in_output:True,enable_kv_cache_reuse:False,"
    "batching_strategy:inflight_fused_batching,max_queue_delay_microseconds:0,"
    "encoder_input_features_data_type:TYPE_FP16,logits_datatype:TYPE_FP32")
CORPUS_FILLS = {
    "tensorrt_llm": README_LLM_SUBS,
    "preprocessing": "tokenizer_dir:tokenizer,triton_max_batch_size:64,"
                     "preprocessing_instance_count:1,add_special_tokens:True",
    "postprocessing": "tokenizer_dir:tokenizer,triton_max_batch_size:64,"
                      "postprocessing_instance_count:1,skip_special_tokens:True",
    "ensemble": "triton_max_batch_size:64,logits_datatype:TYPE_FP32",
    "tensorrt_llm_bls": "triton_max_batch_size:64,decoupled_mode:False,bls_instance_count:1,"
                        "accumulate_tokens:False,logits_datatype:TYPE_FP32",
}


def template_path(model):
    return os.path.join(TEMPLATES, model, "config.pbtxt")


def filled_template(model):
    with open(template_path(model)) as f:
        return fill_template.fill(f.read(), CORPUS_FILLS[model], template_path(model))


def run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class FillTemplateTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, text):
        path = os.path.join(self.tmp.name, "config.pbtxt")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_substitutes_and_prints_to_stdout(self):
        path = self.write("a: ${a}\nb: ${b}\n")
        result = run_script(path, "a:1,b:two")
        self.assertEqual(result.returncode, 0, result.stderr)
        # print() adds one newline after the text.
        self.assertEqual(result.stdout, "a: 1\nb: two\n\n")
        with open(path) as f:
            self.assertEqual(f.read(), "a: ${a}\nb: ${b}\n")

    def test_in_place_long_and_short_flag(self):
        for flag in ("--in_place", "-i"):
            path = self.write("v: ${v}\n")
            result = run_script(flag, path, "v:7")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(result.stdout, "")
            with open(path) as f:
                self.assertEqual(f.read(), "v: 7\n")

    def test_backslash_escapes_delimiters(self):
        text = "ids: ${gpu_device_ids}\n"
        self.assertEqual(fill_template.fill(text, r"gpu_device_ids:0\,1", "f"), "ids: 0,1\n")
        self.assertEqual(fill_template.fill(text, r"gpu_device_ids:0\,1;2\,3", "f"),
                         "ids: 0,1;2,3\n")

    def test_split_escaped(self):
        self.assertEqual(fill_template.split_escaped(r"a\,b,c", ","), ["a,b", "c"])
        self.assertEqual(fill_template.split_escaped(r"a\\,b", ","), ["a\\", "b"])
        self.assertEqual(fill_template.split_escaped("", ","), [""])
        self.assertEqual(fill_template.split_escaped("a,", ","), ["a", ""])

    def test_empty_value_and_last_repeated_key_wins(self):
        text = "x: '${x}' y: ${y}\n"
        self.assertEqual(fill_template.fill(text, "x:,y:1,y:2", "f"), "x: '' y: 2\n")

    def test_builtin_queue_defaults_apply_only_when_not_given(self):
        text = "size: ${max_queue_size} delay: ${max_queue_delay_microseconds} b: ${b}\n"
        self.assertEqual(fill_template.fill(text, "b:1", "f"), "size: 0 delay: 0 b: 1\n")
        self.assertEqual(fill_template.fill(text, "max_queue_size:16,max_queue_delay_microseconds:50",
                                            "f"), "size: 16 delay: 50 b: ${b}\n")

    def test_unknown_key_is_an_assertion_naming_the_file(self):
        with self.assertRaises(AssertionError) as ctx:
            fill_template.fill("a: ${a}\n", "nope:1", "some/config.pbtxt")
        self.assertEqual(str(ctx.exception), "key 'nope' does not exist in the file some/config.pbtxt.")
        path = self.write("a: ${a}\n")
        result = run_script(path, "nope:1")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f"AssertionError: key 'nope' does not exist in the file {path}.", result.stderr)

    def test_key_check_is_a_substring_test(self):
        # As NVIDIA's: a key only needs to occur somewhere in the text, not as a placeholder.
        self.assertEqual(fill_template.fill("name: ${a}\n", "name:1", "f"), "name: ${a}\n")

    def test_empty_or_malformed_substitutions_raise_value_error(self):
        for subs in ("", "novalue", "a:b:c"):
            with self.assertRaises(ValueError, msg=subs):
                fill_template.fill("a: ${a} novalue\n", subs, "f")
        path = self.write("a: ${a}\n")
        self.assertIn("ValueError", run_script(path, "").stderr)

    def test_safe_substitute_rules(self):
        text = "a: $a b: ${b} c: $$ d: ${d} e: ${not a name}\n"
        self.assertEqual(fill_template.fill(text, "a:1,b:2", "f"),
                         "a: 1 b: 2 c: $ d: ${d} e: ${not a name}\n")

    def test_usage_names_the_flags(self):
        result = run_script("--help")
        self.assertEqual(result.returncode, 0)
        self.assertIn("--in_place", result.stdout)
        self.assertIn("file_path", result.stdout)
        self.assertIn("substitutions", result.stdout)


class TemplateFillTest(unittest.TestCase):
    def test_readme_fill_of_tensorrt_llm(self):
        text = filled_template("tensorrt_llm")
        self.assertIn('backend: "inflight"', text)
        self.assertIn("max_batch_size: 64", text)
        self.assertIn("decoupled: False", text)
        self.assertIn("default_queue_policy: { max_queue_size: 0 }", text)
        self.assertIn('string_value: "inflight_fused_batching"', text)
        self.assertIn('string_value: "0.5"', text)
        self.assertIn("data_type: TYPE_FP16", text)
        self.assertNotIn("${logits_datatype}", text)
        # Keys not given stay as placeholders: the backend uses their defaults.
        self.assertIn('string_value: "${batch_scheduler_policy}"', text)
        self.assertIn('string_value: "${device}"', text)

    def test_every_template_key_of_the_fills_exists(self):
        for model in CORPUS_FILLS:
            with self.subTest(model=model):
                filled_template(model)  # raises AssertionError on an unknown key

    def test_corpus_copies_match_the_templates(self):
        for model in CORPUS_FILLS:
            with self.subTest(model=model):
                path = os.path.join(CORPUS, f"{model}.filled.pbtxt")
                with open(path) as f:
                    self.assertEqual(f.read(), filled_template(model),
                                     f"{path} is stale: run test_fill_template.py --write-corpus")


def write_corpus():
    for model in CORPUS_FILLS:
        with open(os.path.join(CORPUS, f"{model}.filled.pbtxt"), "w") as f:
            f.write(filled_template(model))


if __name__ == "__main__":
    if "--write-corpus" in sys.argv:
        write_corpus()
    else:
        unittest.main()
