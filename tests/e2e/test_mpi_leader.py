"""Leader and orchestrator modes end to end on CPU: the demo model's engine split over MPI ranks, served by
inflight-server under mpirun as NVIDIA's users start tritonserver (seed 004: `mpirun -n 2 --allow-run-as-root
tritonserver --http-port=... --metrics-port=... --grpc-port=... --model-repo=...`), through
tools/launch_server.py --world_size N, and with TRTLLM_ORCHESTRATOR=1 (workers spawned by the backend).

Checked: the seeds' requests to `ensemble` give the tp 1 server's text, and tensorrt_llm's greedy tokens
and log-probs match tp 1's (fp32 sums over ranks round differently, so log-probs within a small
tolerance, judged as test_llm_ensemble.judge_greedy_runs does); exactly one process of the job listens on
TCP and prints a Started line; a follower killed with SIGKILL ends the job (non-zero, promptly) instead of
hanging it; a world size that does not fit the engine is refused with both numbers named.

Environment (tests/e2e/CMakeLists.txt): INFLIGHT_SERVER, INFLIGHT_BACKEND_DIR, INFLIGHT_LLM_REPO (the
tp 1 demo repository of tools/prepare_demo.sh), INFLIGHT_LLM_CHECKPOINT (its checkpoint),
INFLIGHT_BUILD_TOOL (inflight-build), INFLIGHT_SOURCE_DIR. Needs Open MPI's mpirun (tools/install_deps.sh).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import inflight_client as ic
from seed_replay import set_parameter
from test_llm_ensemble import judge_greedy_runs, llm_inputs

PROMPTS = ["What is machine learning?", "你好，你叫什么名字", "The quick brown fox"]
MAX_TOKENS = 24
# fp32 partial sums added over ranks in another order than one process adds them.
LOG_PROB_TOL = 1e-3
# A killed rank must end the job within this (Open MPI notices at once; the bound is for a loaded CI).
DEATH_BOUND_S = 30.0
STARTUP_S = 180.0


def mpirun_prefix(world_size):
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(world_size)]


class MpiServer(ic.InflightServer):
    """inflight-server started as seed 004 starts tritonserver: `mpirun -n N ... --model-repo=R`."""

    # Open MPI's TCP transport listens in every rank; on one host shared memory carries everything,
    # so with TCP left out any socket a rank listens on is the server's (check_one_listener). Spawned
    # workers (orchestrator mode) need TCP to reach the server's job.
    environment = {"OMPI_MCA_btl": "self,vader"}

    def __init__(self, repo, world_size, extra=()):
        super().__init__(model_repository=repo, backend_directory=os.environ["INFLIGHT_BACKEND_DIR"],
                         startup_timeout=STARTUP_S)
        self.world_size = world_size
        self.extra = list(extra)

    def start(self):
        saved = {k: os.environ.get(k) for k in self.environment}
        os.environ.update(self.environment)
        try:
            return super().start()
        finally:
            for k, v in saved.items():
                if v is None:
                    del os.environ[k]
                else:
                    os.environ[k] = v

    def command(self):
        return mpirun_prefix(self.world_size) + [
            self.binary, "--http-port=0", "--metrics-port=0", "--grpc-port=0",
            f"--model-repo={self.model_repository}", f"--backend-directory={self.backend_directory}",
            "--http-address=127.0.0.1", "--grpc-address=127.0.0.1", *self.extra]

    def leader(self):
        return ranks_of(self.process.pid).get(0)

    def stop_leader(self, timeout=60.0):
        """Stops the job as a clean shutdown does: SIGTERM to rank 0, whose server unloads the model
        (which sends the followers stop); returns mpirun's exit code. (SIGTERM to mpirun itself makes
        mpirun exit 1 however its ranks end.)"""
        leader = self.leader()
        if leader is None:
            return self.stop()
        os.kill(leader, signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None


class CommandServer(MpiServer):
    """A job started by a command line given whole (what launch_server.py prints)."""

    def __init__(self, argv):
        super().__init__("-", 0)
        self.argv = argv

    def command(self):
        return self.argv


def children(pid):
    """The processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after its closing parenthesis.
        if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
            found.append(int(entry))
    return found


def mpi_rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    except OSError:
        return None
    rank = env.get(b"OMPI_COMM_WORLD_RANK")
    return int(rank) if rank is not None else None


def ranks_of(job_pid):
    """{rank: pid} of the processes mpirun started."""
    ranks = {}
    for pid in children(job_pid):
        rank = mpi_rank_of(pid)
        if rank is not None:
            ranks[rank] = pid
    return ranks


def listening_inodes():
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A":  # TCP_LISTEN
                        inodes.add(fields[9])
        except OSError:
            pass
    return inodes


def listens(pid, inodes):
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            match = re.fullmatch(r"socket:\[(\d+)\]", target)
            if match and match.group(1) in inodes:
                return True
    except OSError:
        pass
    return False


def build_engine(tool, checkpoint, out, tp, pp):
    cmd = [tool, "--checkpoint_dir", checkpoint, "--output_dir", out, "--dtype", "float32",
           "--max_batch_size", "64", "--max_input_len", "512", "--max_seq_len", "1024",
           "--tokens_per_block", "64", "--tp_size", str(tp), "--pp_size", str(pp)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")


def repository_for(base_repo, engine, folder):
    """A copy of the demo repository whose tensorrt_llm model serves `engine`."""
    repo = os.path.join(folder, "repo")
    shutil.copytree(base_repo, repo, symlinks=True)
    set_parameter(os.path.join(repo, "tensorrt_llm", "config.pbtxt"), "gpt_model_path", engine)
    return repo


class Answers:
    """What a server answers to the test's requests: ensemble text, and tensorrt_llm's greedy tokens
    and log-probs for the same prompts."""

    def __init__(self, port):
        self.texts = []
        self.tokens = []
        for prompt in PROMPTS:
            # The seeds' curl request to the ensemble, with its fields as the seeds send them.
            status, out = ic.post_json(port, "/v2/models/ensemble/generate",
                                       {"text_input": prompt, "max_tokens": MAX_TOKENS, "bad_words": "",
                                        "stop_words": ""}, timeout=120)
            assert status == 200, (status, out)
            assert out["model_name"] == "ensemble", out
            self.texts.append(out["text_output"])
            status, pre = ic.post_json(port, "/v2/models/preprocessing/generate",
                                       {"QUERY": prompt, "REQUEST_OUTPUT_LEN": 1}, timeout=60)
            assert status == 200, (status, pre)
            status, out = ic.post_json(port, "/v2/models/tensorrt_llm/generate",
                                       llm_inputs(pre["INPUT_ID"], MAX_TOKENS, return_log_probs=[True]),
                                       timeout=120)
            assert status == 200, (status, out)
            self.tokens.append((out["output_ids"], out["output_log_probs"]))


def environment_or_skip():
    for name in ("INFLIGHT_SERVER", "INFLIGHT_BACKEND_DIR", "INFLIGHT_LLM_REPO", "INFLIGHT_LLM_CHECKPOINT",
                 "INFLIGHT_BUILD_TOOL", "INFLIGHT_SOURCE_DIR"):
        ic.env_or_skip(name)
    if shutil.which("mpirun") is None:
        raise unittest.SkipTest("mpirun is not installed (tools/install_deps.sh installs openmpi-bin)")


class SplitEngineCase(unittest.TestCase):
    """Base: the tp 1 reference answers, computed once per process."""
    reference = None
    tmp = None

    @classmethod
    def setUpClass(cls):
        environment_or_skip()
        cls.tmp = tempfile.mkdtemp(prefix="inflight_mpi_")

    @staticmethod
    def reference_answers():
        """The one-rank server's answers (computed once per process)."""
        if SplitEngineCase.reference is None:
            server = ic.InflightServer(model_repository=os.environ["INFLIGHT_LLM_REPO"],
                                       backend_directory=os.environ["INFLIGHT_BACKEND_DIR"],
                                       startup_timeout=STARTUP_S).start()
            try:
                SplitEngineCase.reference = Answers(server.http_port)
            finally:
                server.stop()
        return SplitEngineCase.reference

    @classmethod
    def tearDownClass(cls):
        if cls.tmp:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def split_repo(self, tp, pp):
        folder = os.path.join(self.tmp, f"tp{tp}_pp{pp}")
        if os.path.isdir(os.path.join(folder, "repo")):
            return os.path.join(folder, "repo")
        engine = os.path.join(folder, "engine")
        build_engine(os.environ["INFLIGHT_BUILD_TOOL"], os.environ["INFLIGHT_LLM_CHECKPOINT"], engine, tp, pp)
        return repository_for(os.environ["INFLIGHT_LLM_REPO"], engine, folder)

    def check_answers(self, server, label):
        got = Answers(server.http_port)
        ref = self.reference_answers()
        for i, prompt in enumerate(PROMPTS):
            failure, summary = judge_greedy_runs(ref.tokens[i][0], ref.tokens[i][1],
                                                 got.tokens[i][0], got.tokens[i][1], LOG_PROB_TOL,
                                                 name=f"{label} {prompt!r}")
            print(summary, file=sys.stderr)
            self.assertIsNone(failure, failure)
            self.assertEqual(got.texts[i], ref.texts[i], f"{label}: ensemble text of {prompt!r}")

    def check_one_listener(self, server, world_size):
        ranks = ranks_of(server.process.pid)
        self.assertEqual(sorted(ranks), list(range(world_size)), f"ranks of the job: {ranks}")
        inodes = listening_inodes()
        listening = [rank for rank, pid in ranks.items() if listens(pid, inodes)]
        self.assertEqual(listening, [0], "only rank 0 may listen")
        log = server.log()
        self.assertEqual(len(re.findall(r"Started HTTPService at", log)), 1, log)
        self.assertEqual(len(re.findall(r"Started Metrics Service at", log)), 1, log)

    def serve_and_check(self, server, world_size, label):
        self.reference_answers()  # before the job starts, so that the two servers do not overlap
        try:
            server.start()
            self.check_one_listener(server, world_size)
            self.check_answers(server, label)
        finally:
            code = server.stop_leader()
        # Rank 0 unloads the model, which stops the followers; every rank exits 0.
        self.assertEqual(code, 0, f"{label}: the job did not end cleanly when rank 0 stopped:\n{server.log()}")
        self.assertEqual(len(re.findall(r"the leader stopped the model; this rank exits", server.log())),
                         world_size - 1, server.log())


class TensorParallelTest(SplitEngineCase):
    def test_mpirun_tp2_answers_as_tp1(self):
        repo = self.split_repo(2, 1)
        self.serve_and_check(MpiServer(repo, 2), 2, "tp 2 (mpirun -n 2)")

    def test_launch_server_world_size_2(self):
        repo = self.split_repo(2, 1)
        # launch_server.py refuses to start while any server runs on the machine (ctest runs others
        # beside this one), so it prints its command and the test runs that.
        launcher = os.path.join(os.environ["INFLIGHT_SOURCE_DIR"], "tools", "launch_server.py")
        printed = subprocess.run(
            [sys.executable, launcher, "--world_size=2", f"--model_repo={repo}",
             f"--tritonserver={os.environ['INFLIGHT_SERVER']}",
             f"--backend_directory={os.environ['INFLIGHT_BACKEND_DIR']}", "--http_port=0", "--grpc_port=0",
             "--metrics_port=0", "--print-command"], capture_output=True, text=True, timeout=30, check=True)
        argv = printed.stdout.split()
        self.assertEqual(argv[:2], ["mpirun", "--allow-run-as-root"], printed.stdout)
        self.assertEqual(argv.count("-n"), 2, printed.stdout)
        self.serve_and_check(CommandServer(argv), 2, "tp 2 (launch_server.py --world_size 2)")


class PipelineParallelTest(SplitEngineCase):
    def test_mpirun_pp2_answers_as_tp1(self):
        repo = self.split_repo(1, 2)
        self.serve_and_check(MpiServer(repo, 2), 2, "pp 2")

    def test_mpirun_tp2_pp2_answers_as_tp1(self):
        repo = self.split_repo(2, 2)
        self.serve_and_check(MpiServer(repo, 4), 4, "tp 2 x pp 2")


class WeightsAtLoadTest(SplitEngineCase):
    """inflight-build --random_preset tiny --weights_at_load: config.json alone; each rank of the job
    makes its own weights as it loads, and the job answers as the same engine written to files."""

    TOKEN_PROMPTS = [[1, 5, 17, 2, 901, 44], [7, 3, 3, 650]]

    def random_repo(self, name, at_load):
        folder = os.path.join(self.tmp, name)
        engine = os.path.join(folder, "engine")
        cmd = [os.environ["INFLIGHT_BUILD_TOOL"], "--random_preset", "tiny", "--seed", "7", "--output_dir", engine,
               "--dtype", "float32", "--max_batch_size", "8", "--max_input_len", "64", "--max_seq_len", "128",
               "--tp_size", "2"] + (["--weights_at_load"] if at_load else [])
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
        return engine, repository_for(os.environ["INFLIGHT_LLM_REPO"], engine, folder)

    def greedy_tokens(self, repo):
        server = MpiServer(repo, 2)
        server.start()
        try:
            tokens = []
            for ids in self.TOKEN_PROMPTS:
                status, out = ic.post_json(server.http_port, "/v2/models/tensorrt_llm/generate",
                                           llm_inputs(ids, 12), timeout=120)
                self.assertEqual(status, 200, out)
                tokens.append(out["output_ids"])
            log = server.log()
        finally:
            code = server.stop_leader()
        self.assertEqual(code, 0, server.log())
        return tokens, log

    def test_mpirun_tp2_made_at_load_answers_as_files(self):
        files_engine, files_repo = self.random_repo("random_files", False)
        at_load_engine, at_load_repo = self.random_repo("random_at_load", True)
        self.assertEqual(sorted(os.listdir(at_load_engine)), ["config.json"])
        self.assertIn("rank1.safetensors", os.listdir(files_engine))
        want, _ = self.greedy_tokens(files_repo)
        got, log = self.greedy_tokens(at_load_repo)
        self.assertEqual(got, want)
        for rank in (0, 1):
            self.assertIn(f'rank {rank}: making the random weights of preset "tiny" seed 7', log)


class FaultTest(SplitEngineCase):
    def test_killed_follower_ends_the_job(self):
        repo = self.split_repo(2, 1)
        server = MpiServer(repo, 2)
        server.start()
        try:
            follower = ranks_of(server.process.pid).get(1)
            self.assertIsNotNone(follower, "no rank 1 in the job")
            # A long request in flight while the follower dies: it must end (an error or a closed
            # connection), not hang.
            outcome = {}

            def long_request():
                try:
                    outcome["status"] = ic.post_json(server.http_port, "/v2/models/ensemble/generate",
                                                     {"text_input": PROMPTS[0], "max_tokens": 500},
                                                     timeout=DEATH_BOUND_S * 2)[0]
                except OSError as e:
                    outcome["error"] = repr(e)

            thread = threading.Thread(target=long_request, daemon=True)
            thread.start()
            time.sleep(0.5)
            killed_at = time.monotonic()
            os.kill(follower, signal.SIGKILL)
            try:
                code = server.process.wait(timeout=DEATH_BOUND_S)
            except subprocess.TimeoutExpired:
                self.fail(f"the job still runs {DEATH_BOUND_S} s after rank 1 was killed:\n{server.log()}")
            took = time.monotonic() - killed_at
            thread.join(timeout=DEATH_BOUND_S)
            self.assertFalse(thread.is_alive(), "the request in flight never ended")
            self.assertNotEqual(code, 0, server.log())
            self.assertIn("exited on signal 9", server.log())
            print(f"job ended {took:.1f} s after rank 1 was killed, exit {code}; request: {outcome}",
                  file=sys.stderr)
        finally:
            server.kill()

    def test_world_size_that_does_not_fit_the_engine_is_refused(self):
        # The tp 1 engine under two ranks: the model is unavailable with both numbers named, rank 1
        # leaves, rank 0 serves the rest (--exit-on-error=false; by default, true as tritonserver's,
        # rank 0 would exit instead).
        server = MpiServer(os.environ["INFLIGHT_LLM_REPO"], 2, extra=["--exit-on-error=false"])
        server.wait_ready = False  # not every model is ready
        try:
            server.start()
            status, index = ic.post_json(server.http_port, "/v2/repository/index", {})
            self.assertEqual(status, 200, index)
            reason = next(e.get("reason", "") for e in index if e["name"] == "tensorrt_llm")
            self.assertIn("tp_size 1 x pp_size 1 = 1 ranks, but the MPI world size is 2", reason)
            self.assertEqual(len(re.findall(r"Started HTTPService at", server.log())), 1, server.log())
        finally:
            code = server.stop_leader()
        self.assertEqual(code, 0, server.log())

    def test_num_nodes_that_does_not_match_the_hosts_is_refused(self):
        # NVIDIA's num_nodes counts the hosts the ranks run on; both ranks here share one.
        self.split_repo(2, 1)  # builds the tp 2 engine
        repo = repository_for(os.environ["INFLIGHT_LLM_REPO"], os.path.join(self.tmp, "tp2_pp1", "engine"),
                              os.path.join(self.tmp, "num_nodes"))
        set_parameter(os.path.join(repo, "tensorrt_llm", "config.pbtxt"), "num_nodes", "2")
        server = MpiServer(repo, 2, extra=["--exit-on-error=false"])
        server.wait_ready = False
        try:
            server.start()
            status, index = ic.post_json(server.http_port, "/v2/repository/index", {})
            self.assertEqual(status, 200, index)
            reason = next(e.get("reason", "") for e in index if e["name"] == "tensorrt_llm")
            self.assertIn("num_nodes 2, but the 2 ranks of the MPI world run on 1 host; set num_nodes to 1",
                          reason)
        finally:
            code = server.stop_leader()
        self.assertEqual(code, 0, server.log())

    def test_split_engine_without_mpirun_is_refused(self):
        repo = self.split_repo(2, 1)
        with ic.InflightServer(model_repository=repo, backend_directory=os.environ["INFLIGHT_BACKEND_DIR"],
                               startup_timeout=STARTUP_S, wait_ready=False) as server:
            status, index = ic.post_json(server.http_port, "/v2/repository/index", {})
            reason = next(e.get("reason", "") for e in index if e["name"] == "tensorrt_llm")
        self.assertIn("tp_size 2 x pp_size 1 = 2 ranks, but the MPI world size is 1; start the server with "
                      "mpirun -n 2", reason)


class OrchestratorServer(MpiServer):
    """inflight-server in orchestrator mode: TRTLLM_ORCHESTRATOR=1 and one process (mpirun -n 1), which
    spawns each model instance's workers."""

    environment = {"TRTLLM_ORCHESTRATOR": "1"}

    def __init__(self, repo):
        super().__init__(repo, 1)

    def processes(self, name_prefix):
        found = []
        for pid in children(self.process.pid):
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip().startswith(name_prefix):
                        found.append(pid)
            except OSError:
                pass
        return found

    def workers(self):
        return self.processes("inflight-execut")  # the kernel keeps 15 characters of the name

    def leader(self):
        # The spawned workers are ranks of their own world: the server is the one inflight-server.
        servers = self.processes("inflight-server")
        return servers[0] if servers else None


class OrchestratorTest(SplitEngineCase):
    def serve_orchestrated(self, repo, num_workers, label):
        self.reference_answers()
        server = OrchestratorServer(repo)
        try:
            server.start()
            self.assertEqual(len(server.workers()), num_workers, f"{label}: the spawned workers")
            self.assertEqual(len(re.findall(r"Started HTTPService at", server.log())), 1, server.log())
            self.check_answers(server, label)
        finally:
            code = server.stop_leader()
        self.assertEqual(code, 0, f"{label}: the job did not end cleanly:\n{server.log()}")

    def test_orchestrator_one_worker_answers_as_tp1(self):
        self.serve_orchestrated(os.environ["INFLIGHT_LLM_REPO"], 1, "orchestrator, 1 worker")

    def test_orchestrator_tp2_answers_as_tp1(self):
        self.serve_orchestrated(self.split_repo(2, 1), 2, "orchestrator, tp 2")

    def test_killed_worker_ends_the_job(self):
        server = OrchestratorServer(self.split_repo(2, 1))
        server.start()
        try:
            workers = server.workers()
            self.assertEqual(len(workers), 2, server.log())
            os.kill(workers[-1], signal.SIGKILL)
            try:
                code = server.process.wait(timeout=DEATH_BOUND_S)
            except subprocess.TimeoutExpired:
                self.fail(f"the job still runs {DEATH_BOUND_S} s after a worker was killed:\n{server.log()}")
            self.assertNotEqual(code, 0, server.log())
            self.assertIn("exited on signal 9", server.log())
        finally:
            server.kill()

    def test_orchestrator_needs_world_size_1(self):
        # Every rank refuses the model; rank 1 then ends the job (ranks > 0 never serve).
        server = MpiServer(os.environ["INFLIGHT_LLM_REPO"], 2)
        env = dict(os.environ, TRTLLM_ORCHESTRATOR="1")
        result = subprocess.run(server.command(), env=env, capture_output=True, text=True,
                                timeout=STARTUP_S)
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn("the server must run as one process; the MPI world size is 2", result.stdout)
        self.assertIn("ranks > 0 never serve", result.stdout)

if __name__ == "__main__":
    unittest.main()
