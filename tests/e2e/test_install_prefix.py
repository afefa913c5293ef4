"""`cmake --install <build> --prefix P` gives a prefix that serves on its own: P/backends/<name>/ as
tritonserver's --backend-directory expects, $ORIGIN RPATHs and no build-tree path, one
libinflight_proto.so that both backends (and inflight-server) share, and bin/ programs that run
from P: make_checkpoint, inflight-build, fill_template.py on P/all_models, launch_server.py and
inflight-server, which serves a repository that uses both backends.

Environment (tests/e2e/llm.cmake): CMAKE_COMMAND, INFLIGHT_BUILD_DIR, INFLIGHT_LLM_CHECKPOINT (a
folder holding GPT-2's tokenizer files).
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

import seed_replay
from inflight_client import env_or_skip, post_json

ELF_MAGIC = b"\x7fELF"


def run(*args, **kwargs):
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=300, **kwargs)
    if result.returncode != 0:
        raise AssertionError(f"{shlex.join(args)} failed ({result.returncode}):\n{result.stdout}\n"
                             f"{result.stderr}")
    return result.stdout


def runpath(elf):
    """The RUNPATH (or RPATH) entries of an ELF file."""
    out = run("readelf", "-d", elf)
    match = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out)
    return [p for p in match.group(1).split(":") if p] if match else []


def resolved(lib, soname):
    for line in run("ldd", lib).splitlines():
        parts = line.split()
        if parts and parts[0] == soname and len(parts) >= 3:
            return os.path.realpath(parts[2])
    return None


class InstallPrefixTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.build = os.path.realpath(env_or_skip("INFLIGHT_BUILD_DIR"))
        cmake = env_or_skip("CMAKE_COMMAND")
        cls.tokenizer = env_or_skip("INFLIGHT_LLM_CHECKPOINT")
        cls.tmp = tempfile.TemporaryDirectory(prefix="install_prefix_")
        cls.prefix = os.path.join(os.path.realpath(cls.tmp.name), "prefix")
        run(cmake, "--install", cls.build, "--prefix", cls.prefix)
        # The server under test is the installed one (ScriptServer, an InflightServer, reads it).
        os.environ["INFLIGHT_SERVER"] = os.path.join(cls.prefix, "bin", "inflight-server")
        cls.source = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def p(self, *parts):
        return os.path.join(self.prefix, *parts)

    def elf_files(self):
        for folder in ("bin", "backends"):
            for dirpath, _, names in os.walk(self.p(folder)):
                for name in names:
                    path = os.path.join(dirpath, name)
                    with open(path, "rb") as f:
                        if f.read(4) == ELF_MAGIC:
                            yield path

    def test_layout_is_a_backend_directory(self):
        for path in ("backends/inflight/libtriton_inflight.so",
                     "backends/inflight/libinflight_proto.so",
                     "backends/inflight_tokenizer/libtriton_inflight_tokenizer.so",
                     "bin/inflight-server", "bin/inflight-build", "bin/make_checkpoint",
                     "bin/fill_template.py", "bin/launch_server.py",
                     "all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt"):
            self.assertTrue(os.path.isfile(self.p(path)), path)
        for program in ("inflight-server", "fill_template.py", "launch_server.py",
                        "benchmark_core_model.py"):
            self.assertTrue(os.access(self.p("bin", program), os.X_OK), program)
        # The benchmark client imports its report module from its own folder.
        usage = run(sys.executable, self.p("bin", "benchmark_core_model.py"), "--help", cwd="/")
        self.assertIn("--max-input-len", usage)
        copies = [os.path.join(d, n) for d, _, names in os.walk(self.prefix) for n in names
                  if n.startswith("libinflight_proto.so")]
        self.assertEqual(copies, [self.p("backends", "inflight", "libinflight_proto.so")])

    def test_runpaths_are_origin_relative_and_name_no_build_tree(self):
        expected = {
            self.p("backends", "inflight", "libtriton_inflight.so"): "$ORIGIN",
            self.p("backends", "inflight_tokenizer", "libtriton_inflight_tokenizer.so"):
                "$ORIGIN/../inflight",
            self.p("bin", "inflight-server"): "$ORIGIN/../backends/inflight",
        }
        elves = list(self.elf_files())
        self.assertGreaterEqual(len(elves), 6)
        for elf in elves:
            entries = runpath(elf)
            for entry in entries:
                self.assertFalse(entry.startswith((self.build, self.source)), f"{elf}: {entries}")
            if elf in expected:
                self.assertEqual(entries[:1], [expected[elf]], elf)

    def test_backends_copied_into_another_server_resolve_one_proto_library(self):
        # The deployment step: cp -r P/backends/* /opt/tritonserver/backends/
        triton = os.path.join(self.tmp.name, "opt_tritonserver_backends")
        os.makedirs(triton)
        run("bash", "-c", f"cp -r {shlex.quote(self.p('backends'))}/* {shlex.quote(triton)}/")
        want = os.path.join(triton, "inflight", "libinflight_proto.so")
        for lib in ("inflight/libtriton_inflight.so",
                    "inflight_tokenizer/libtriton_inflight_tokenizer.so"):
            self.assertEqual(resolved(os.path.join(triton, lib), "libinflight_proto.so"), want, lib)

    def test_serves_a_repository_of_both_backends_from_the_prefix(self):
        work = os.path.join(self.tmp.name, "work")
        os.makedirs(work)
        run(self.p("bin", "make_checkpoint"), "--arch", "gpt2", "--hidden_size", "64",
            "--num_layers", "2", "--num_heads", "2", "--intermediate_size", "128",
            "--max_position_embeddings", "256", "--dtype", "float32", "--seed", "3",
            "--tokenizer_dir", self.tokenizer, "--output_dir", os.path.join(work, "ckpt"))
        run(self.p("bin", "inflight-build"), "--checkpoint_dir", os.path.join(work, "ckpt"),
            "--output_dir", os.path.join(work, "engine"), "--dtype", "float32",
            "--max_batch_size", "4", "--max_input_len", "64", "--max_seq_len", "128")
        repo = os.path.join(work, "repo")
        os.makedirs(repo)
        for model in ("ensemble", "preprocessing", "tensorrt_llm", "postprocessing"):
            shutil.copytree(self.p("all_models", "inflight_batcher_llm", model),
                            os.path.join(repo, model))
        fill = self.p("bin", "fill_template.py")
        ckpt = os.path.join(work, "ckpt")
        for model, subs in (
                ("ensemble", "triton_max_batch_size:4"),
                ("preprocessing", f"tokenizer_dir:{ckpt},triton_max_batch_size:4,"
                                  "preprocessing_instance_count:1"),
                ("postprocessing", f"tokenizer_dir:{ckpt},triton_max_batch_size:4,"
                                   "postprocessing_instance_count:1"),
                ("tensorrt_llm", f"triton_backend:inflight,triton_max_batch_size:4,"
                                 f"decoupled_mode:false,engine_dir:{work}/engine,"
                                 "batching_strategy:inflight_fused_batching")):
            run(fill, "-i", os.path.join(repo, model, "config.pbtxt"), subs)
        command = run(self.p("bin", "launch_server.py"), "--world_size=1", "--no-mpi",
                      f"--model_repo={repo}", "--http_port=0", "--grpc_port=0", "--metrics_port=0",
                      "--print-command").strip()
        args = shlex.split(command)
        self.assertEqual(args[0], self.p("bin", "inflight-server"))
        self.assertIn(f"--backend-directory={self.p('backends')}", args)
        with seed_replay.ScriptServer("unset LD_LIBRARY_PATH; exec " + command, cwd=work) as server:
            status, answer = post_json(server.http_port, "/v2/models/ensemble/generate",
                                       {"text_input": "Hello world", "max_tokens": 8})
            self.assertEqual(status, 200, answer)
            self.assertEqual(answer["model_name"], "ensemble")
            self.assertTrue(answer["text_output"].startswith("Hello world"), answer)
            self.assertGreater(len(answer["text_output"]), len("Hello world"), answer)
            with open(f"/proc/{server.process.pid}/maps") as f:
                mapped = {os.path.realpath(line.split()[-1]) for line in f
                          if len(line.split()) >= 6 and line.split()[-1].startswith("/")}
            protos = sorted(m for m in mapped if os.path.basename(m) == "libinflight_proto.so")
            self.assertEqual(protos, [self.p("backends", "inflight", "libinflight_proto.so")],
                             json.dumps(sorted(mapped), indent=1))
            for lib in ("inflight/libtriton_inflight.so",
                        "inflight_tokenizer/libtriton_inflight_tokenizer.so"):
                self.assertIn(self.p("backends", lib), mapped)


if __name__ == "__main__":
    unittest.main()
