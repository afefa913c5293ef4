"""Tests of tools/launch_server.py: the command lines it builds match NVIDIA's launch_triton_server.py.

Run: python3 -m unittest -v test_launch_server   (from this folder), or through ctest.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.environ.get("INFLIGHT_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO, "tools", "launch_server.py")

spec = importlib.util.spec_from_file_location("launch_server", SCRIPT)
launch_server = importlib.util.module_from_spec(spec)
spec.loader.exec_module(launch_server)


def command(*argv, slots=64):
    args = launch_server.parse_arguments(list(argv))
    return " ".join(launch_server.build_command(args, server="/opt/tritonserver/bin/tritonserver",
                                                slots=slots))


class CommandLineTest(unittest.TestCase):
    def test_world_size_1_with_mpi(self):
        self.assertEqual(
            command("--model_repo=/repo"),
            "mpirun --allow-run-as-root -n 1 /opt/tritonserver/bin/tritonserver --model-repository=/repo "
            "--grpc-port=8001 --http-port=8000 --metrics-port=8002 --disable-auto-complete-config "
            "--backend-config=python,shm-region-prefix-name=prefix0_")

    def test_world_size_1_no_mpi_runs_the_server_directly(self):
        self.assertEqual(
            command("--model_repo=/repo", "--no-mpi", "--http_port=18000", "--grpc_port=18001",
                    "--metrics_port=18002"),
            "/opt/tritonserver/bin/tritonserver --model-repository=/repo --grpc-port=18001 "
            "--http-port=18000 --metrics-port=18002 --disable-auto-complete-config "
            "--backend-config=python,shm-region-prefix-name=prefix0_")

    def test_world_size_2_rank_1_loads_only_the_llm_models(self):
        self.assertEqual(
            command("--world_size=2", "--model_repo=/repo", "--log", "--oversubscribe",
                    "--tensorrt_llm_model_name", "tensorrt_llm,tensorrt_llm_draft"),
            "mpirun --allow-run-as-root --oversubscribe "
            "-n 1 /opt/tritonserver/bin/tritonserver --model-repository=/repo --grpc-port=8001 "
            "--http-port=8000 --metrics-port=8002 --log-verbose=3 --log-file=triton_log.txt "
            "--disable-auto-complete-config --backend-config=python,shm-region-prefix-name=prefix0_ "
            ": -n 1 /opt/tritonserver/bin/tritonserver --model-repository=/repo --grpc-port=8001 "
            "--http-port=8000 --metrics-port=8002 --disable-auto-complete-config "
            "--backend-config=python,shm-region-prefix-name=prefix1_ --model-control-mode=explicit "
            "--load-model=tensorrt_llm --load-model=tensorrt_llm_draft")

    def test_more_ranks_than_cores_oversubscribes(self):
        self.assertTrue(command("--world_size=4", slots=2).startswith(
            "mpirun --allow-run-as-root --oversubscribe -n 1 "))
        self.assertTrue(command("--world_size=2", slots=2).startswith("mpirun --allow-run-as-root -n 1 "))
        self.assertGreaterEqual(launch_server.mpi_slots(), 1)

    def test_backend_directory_is_passed_to_every_rank(self):
        cmd = command("--world_size=2", "--model_repo=/repo", "--backend_directory=/b")
        self.assertEqual(cmd.count("--backend-directory=/b"), 2, cmd)

    def test_inflight_server_in_a_build_tree_gets_its_backends_folder(self):
        with tempfile.TemporaryDirectory() as build:
            os.makedirs(os.path.join(build, "src", "server"))
            os.makedirs(os.path.join(build, "backends", "inflight"))
            server = os.path.join(build, "src", "server", "inflight-server")
            args = launch_server.parse_arguments(["--model_repo=/repo", "--no-mpi"])
            cmd = launch_server.build_command(args, server=server)
            self.assertEqual(cmd[:3], [server, "--model-repository=/repo",
                                       "--backend-directory=" + os.path.join(build, "backends")])

    def test_installed_script_serves_with_the_inflight_server_beside_it(self):
        # <prefix>/bin/launch_server.py, <prefix>/bin/inflight-server, <prefix>/backends/inflight/
        with tempfile.TemporaryDirectory() as prefix:
            os.makedirs(os.path.join(prefix, "bin"))
            os.makedirs(os.path.join(prefix, "backends", "inflight"))
            installed = os.path.join(prefix, "bin", "launch_server.py")
            with open(SCRIPT) as src, open(installed, "w") as dst:
                dst.write(src.read())
            server = os.path.join(prefix, "bin", "inflight-server")
            with open(server, "w") as f:
                f.write("#!/bin/sh\n")
            os.chmod(server, 0o755)
            result = subprocess.run([sys.executable, installed, "--no-mpi", "--print-command"],
                                    capture_output=True, text=True, timeout=30)
            self.assertEqual(result.returncode, 0, result.stderr)
            repo = os.path.join(prefix, "all_models", "inflight_batcher_llm")
            self.assertTrue(result.stdout.startswith(
                f"{server} --model-repository={repo} "
                f"--backend-directory={os.path.join(prefix, 'backends')} "), result.stdout)

    def test_multi_model_environment(self):
        args = launch_server.parse_arguments(["--multi-model"])
        self.assertEqual(launch_server.build_environment(args),
                         {"TRTLLM_ORCHESTRATOR": "1", "TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES": "1"})
        args = launch_server.parse_arguments(["--multi-model", "--disable-spawn-processes", "--world_size=3"])
        self.assertEqual(launch_server.build_environment(args)["TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES"], "0")
        self.assertEqual(launch_server.build_environment(launch_server.parse_arguments([])), {})


class ArgumentErrorsTest(unittest.TestCase):
    def run_script(self, *argv):
        return subprocess.run([sys.executable, SCRIPT, *argv], capture_output=True, text=True, timeout=30)

    def test_no_mpi_needs_world_size_1(self):
        result = self.run_script("--no-mpi", "--world_size=2", "--print-command")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--world_size must be 1; got 2", result.stderr)

    def test_multi_model_with_spawning_needs_world_size_1(self):
        result = self.run_script("--multi-model", "--world_size=4", "--print-command")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("got --world_size 4", result.stderr)

    def test_print_command_prints_environment_and_starts_nothing(self):
        result = self.run_script("--tritonserver=/nonexistent/tritonserver", "--model_repo=/r",
                                 "--multi-model", "--print-command")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(result.stdout.startswith(
            "TRTLLM_ORCHESTRATOR=1 TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES=1 mpirun --allow-run-as-root -n 1 "
            "/nonexistent/tritonserver --model-repository=/r "), result.stdout)


if __name__ == "__main__":
    unittest.main()
