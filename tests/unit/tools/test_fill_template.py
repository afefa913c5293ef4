"""Tests of tools/fill_template.py: the command-line behaviour of NVIDIA's script, and the filled
copies of our templates that the fuzz corpus (tests/fuzz/corpus) keeps.

Run: python3 -m unittest -v test_fill_template   (from this folder), or through ctest.
Refresh the corpus copies after a template change: python3 test_fill_template.py --write-corpus
"""
import importlib.util
import os
import re
import shutil
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
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import seed_sequences  # noqa: E402  (the seed documents' commands, shared with the e2e replay)

MODELS = ("ensemble", "preprocessing", "postprocessing", "tensorrt_llm", "tensorrt_llm_bls")
# The keys of NVIDIA's templates, v0.11 to today's: today's five templates
# (NVIDIA/TensorRT-LLM triton_backend/all_models/inflight_batcher_llm), the keys its
# docs/model_config.md lists, the fill commands of its READMEs v0.11-v0.14 (seeds 000 and 004) and
# of its CI (ci/L0_backend_trtllm/test.sh: prompt_embedding_table_data_type in tensorrt_llm and
# tensorrt_llm_bls, visual_model_path in preprocessing), plus tokenizer_type and max_num_sequences
# of the v0.7-era templates.
NVIDIA_KEYS = {
    "ensemble": ["triton_max_batch_size", "logits_datatype"],
    "preprocessing": ["tokenizer_dir", "triton_max_batch_size", "preprocessing_instance_count",
                      "add_special_tokens", "max_queue_delay_microseconds", "max_queue_size",
                      "multimodal_model_path", "engine_dir", "max_num_images", "hf_model_path",
                      "visual_model_path", "tokenizer_type"],
    "postprocessing": ["tokenizer_dir", "triton_max_batch_size", "postprocessing_instance_count",
                       "skip_special_tokens", "max_queue_size", "tokenizer_type"],
    "tensorrt_llm": [
        "triton_backend", "triton_max_batch_size", "decoupled_mode", "max_queue_delay_microseconds",
        "max_queue_size", "encoder_input_features_data_type", "logits_datatype",
        "prompt_embedding_table_data_type", "max_beam_width", "batching_strategy", "engine_dir",
        "encoder_engine_dir", "max_tokens_in_paged_kv_cache", "max_attention_window_size",
        "sink_token_length", "batch_scheduler_policy", "kv_cache_free_gpu_mem_fraction",
        "cross_kv_cache_fraction", "kv_cache_host_memory_bytes", "kv_cache_onboard_blocks",
        "enable_trt_overlap", "exclude_input_in_output", "cancellation_check_period_ms",
        "stats_check_period_ms", "iter_stats_max_iterations", "request_stats_max_iterations",
        "enable_kv_cache_reuse", "normalize_log_probs", "enable_chunked_context", "gpu_device_ids",
        "participant_ids", "num_nodes", "lora_cache_optimal_adapter_size",
        "lora_cache_max_adapter_size", "lora_cache_gpu_memory_fraction",
        "lora_cache_host_memory_bytes", "lora_prefetch_dir", "decoding_mode",
        "lookahead_window_size", "lookahead_ngram_size", "lookahead_verification_set_size",
        "medusa_choices", "eagle_choices", "gpu_weights_percent", "enable_context_fmha_fp32_acc",
        "multi_block_mode", "cuda_graph_mode", "cuda_graph_cache_size",
        "speculative_decoding_fast_logits", "tokenizer_dir", "guided_decoding_backend",
        "xgrammar_tokenizer_info_path", "max_num_sequences"],
    "tensorrt_llm_bls": ["triton_max_batch_size", "decoupled_mode", "bls_instance_count",
                         "accumulate_tokens", "tensorrt_llm_model_name",
                         "tensorrt_llm_draft_model_name", "logits_datatype",
                         "multimodal_encoders_name", "prompt_embedding_table_data_type"],
}

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


class DefaultsTest(unittest.TestCase):
    TEXT = 'backend: "${triton_backend}"\nx: { data_type: ${logits_datatype} }\nn: ${n}\n'

    def test_defaults_are_written_marked_and_noted(self):
        notes = []
        text = fill_template.fill(self.TEXT, "n:1", "f", notes)
        self.assertEqual(
            text, 'backend: "inflight"  # triton_backend not given: fill_template.py default\n'
                  "x: { data_type: TYPE_FP32 }  # logits_datatype not given: fill_template.py "
                  "default\nn: 1\n")
        self.assertEqual(notes, ["logits_datatype not given: wrote its default TYPE_FP32",
                                 "triton_backend not given: wrote its default inflight"])

    def test_given_keys_are_not_defaulted(self):
        notes = []
        text = fill_template.fill(self.TEXT, "n:1,logits_datatype:TYPE_FP16,triton_backend:inflight",
                                  "f", notes)
        self.assertEqual(text, 'backend: "inflight"\nx: { data_type: TYPE_FP16 }\nn: 1\n')
        self.assertEqual(notes, [])

    def test_a_later_fill_replaces_a_default(self):
        first = fill_template.fill(self.TEXT, "n:1", "f")
        second = fill_template.fill(first, "logits_datatype:TYPE_FP16", "f")
        self.assertIn("x: { data_type: TYPE_FP16 }\n", second)
        self.assertNotIn("logits_datatype not given", second)
        self.assertIn("# triton_backend not given", second)  # untouched

    def test_bad_data_type_is_refused_naming_what_is_accepted(self):
        with self.assertRaises(fill_template.FillError) as ctx:
            fill_template.fill(self.TEXT, "logits_datatype:TYPE_BF16", "f")
        self.assertIn("logits_datatype:TYPE_BF16 is not accepted", str(ctx.exception))
        self.assertIn("TYPE_FP32, TYPE_FP16", str(ctx.exception))
        path = os.path.join(tempfile.mkdtemp(), "config.pbtxt")
        with open(path, "w") as f:
            f.write(self.TEXT)
        result = run_script("-i", path, "logits_datatype:fp16")
        self.assertEqual(result.returncode, 2)
        self.assertIn(f"fill_template.py: error: {path}: logits_datatype:fp16", result.stderr)
        shutil.rmtree(os.path.dirname(path))

    def test_keys_left_where_a_value_is_needed_are_listed(self):
        notes = []
        # Quoted (a parameter, unset is fine), in a comment, or given a default: not listed.
        fill_template.fill("a: ${triton_max_batch_size}\nb: ${triton_max_batch_size}\n"
                           "s: \"${unset}\"  # ${comment}\nm: ${max_queue_size}\n", "unset:",
                           "f", notes)
        self.assertEqual(notes, ["${triton_max_batch_size} (lines 1, 2) is still unfilled: Triton "
                                 "cannot load the file until it is; give "
                                 "triton_max_batch_size:<integer>"])

    def test_nvidia_keys_left_out_are_refused_with_the_reason(self):
        with self.assertRaises(AssertionError) as ctx:
            fill_template.fill("a: ${a}\n", "multimodal_model_path:/x", "p/config.pbtxt")
        self.assertEqual(str(ctx.exception),
                         "key 'multimodal_model_path' does not exist in the file p/config.pbtxt. "
                         "(NVIDIA's multimodal preprocessing key; Inflight serves text models.)")

    def test_nvidias_backend_name_gets_a_note(self):
        notes = []
        fill_template.fill(self.TEXT, "triton_backend:tensorrtllm,n:1", "f", notes)
        self.assertIn("Inflight's is triton_backend:inflight", notes[0])


def copy_templates(folder):
    for model in MODELS:
        shutil.copytree(os.path.join(TEMPLATES, model), os.path.join(folder, model))


class NvidiaKeysTest(unittest.TestCase):
    def test_every_nvidia_key_is_in_our_template_or_refused_with_a_reason(self):
        for model, keys in NVIDIA_KEYS.items():
            with open(template_path(model)) as f:
                text = f.read()
            for key in keys:
                with self.subTest(model=model, key=key):
                    if "${" + key + "}" not in text:
                        self.assertIn(key, fill_template.ABSENT_KEYS)

    def test_seed_fill_commands_run_unchanged_and_leave_nothing_unfilled(self):
        for sequence in seed_sequences.SEQUENCES:
            commands = seed_sequences.fill_commands(sequence.setup)
            if not commands:
                continue  # seed 002 edits its configs by hand
            with self.subTest(seed=sequence.name), tempfile.TemporaryDirectory() as repo:
                copy_templates(repo)
                variables = dict(re.findall(r"^([A-Z_]+)=(\S*)", sequence.setup, re.MULTILINE))
                variables.update(MODEL_FOLDER=repo, FILL_TEMPLATE_SCRIPT=SCRIPT)
                self.assertEqual(len(commands), 5)
                for line in commands:
                    line = line.replace("triton_backend:tensorrtllm", "triton_backend:inflight")
                    line = re.sub(r"\$\{(\w+)\}", lambda m: variables[m.group(1)], line)
                    result = subprocess.run(line.split(), capture_output=True, text=True)
                    self.assertEqual(result.returncode, 0, f"{line}\n{result.stderr}")
                    self.assertNotIn("still unfilled", result.stderr, line)
                for model in MODELS:
                    with open(os.path.join(repo, model, "config.pbtxt")) as f:
                        left = [u for u in fill_template.find_placeholders(f.read()) if not u[2]]
                    self.assertEqual(left, [], model)

    def test_docs_table_lists_every_key_with_the_templates_that_have_it(self):
        with open(os.path.join(REPO, "docs", "template_keys.md")) as f:
            docs = f.read()
        def rows(section):
            found = {}
            text = docs.split("\n## " + section + "\n")[1].split("\n## ")[0]
            for line in text.splitlines():
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) >= 2 and cells[0].startswith("`"):
                    for key in re.findall(r"`(\w+)`", cells[0]):
                        found[key] = cells[1]
            return found

        every = rows("Every key")
        left_out = rows("NVIDIA keys Inflight's templates leave out")
        ours = {}
        for model, short in zip(MODELS, ("ens", "pre", "post", "llm", "bls")):
            with open(template_path(model)) as f:
                for key in re.findall(r"\$\{(\w+)\}", f.read()):
                    ours.setdefault(key, set()).add(short)
        for key, templates in ours.items():
            with self.subTest(key=key):
                self.assertIn(key, every)
                self.assertEqual(set(re.findall(r"\b(ens|pre|post|llm|bls)\b", every[key])),
                                 templates)
        for model, keys in NVIDIA_KEYS.items():
            for key in keys:
                self.assertTrue(key in every or key in left_out, key)
        for key in fill_template.ABSENT_KEYS:
            self.assertIn(key, left_out)


def write_corpus():
    for model in CORPUS_FILLS:
        with open(os.path.join(CORPUS, f"{model}.filled.pbtxt"), "w") as f:
            f.write(filled_template(model))


if __name__ == "__main__":
    if "--write-corpus" in sys.argv:
        write_corpus()
    else:
        unittest.main()
