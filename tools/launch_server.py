#!/usr/bin/env python3
"""Start a Triton-compatible server on a model repository, one MPI rank per GPU.

Command-line compatible with NVIDIA tensorrtllm_backend's scripts/launch_triton_server.py:

    launch_server.py --world_size 2 --model_repo triton_model_repo [--http_port 8000 ...]

It builds the same command line as NVIDIA's script: with MPI,

    mpirun --allow-run-as-root [--oversubscribe] -n 1 <server> --model-repository=R --grpc-port=G
        --http-port=H --metrics-port=M [--log-verbose=3 --log-file=F] --disable-auto-complete-config
        --backend-config=python,shm-region-prefix-name=prefix0_ : -n 1 <server> ... (rank 1) ...

where rank 0 loads every model and ranks > 0 load only the LLM models (--tensorrt_llm_model_name) in
explicit model-control mode; with --world_size 1 --no-mpi the server runs directly. --multi-model sets
TRTLLM_ORCHESTRATOR=1 and TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES (0 with --disable-spawn-processes).

The server defaults to our inflight-server: the one beside this script (an install prefix's bin/),
else <repo>/build/bin/inflight-server, else inflight-server on PATH, else NVIDIA's
/opt/tritonserver/bin/tritonserver. A real tritonserver works too (--tritonserver PATH). For
inflight-server, --backend-directory defaults to the backends/ folder of its prefix or build tree.

Like NVIDIA's script it refuses to start while a server already runs (a tritonserver or inflight-server
process, or one of the three ports taken) unless --force, which kills those processes first. As NVIDIA's
does, it returns once the server is started; --wait (ours) waits for it and returns its exit status.
--print-command (ours) prints the command and the environment it would set, and starts nothing.
On a host with fewer cores than --world_size, mpirun gets --oversubscribe without being asked (ours).

With --world_size N > 1 the engine must have tp_size x pp_size == N: rank 0 serves and schedules,
ranks > 0 hold their shard inside model loading and never bind ports (docs/multi_gpu.md).
"""
import argparse
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
NVIDIA_TRITONSERVER = "/opt/tritonserver/bin/tritonserver"
SERVER_PROCESS_NAMES = ("tritonserver", "inflight-server")


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world_size", type=int, default=1,
                        help="number of MPI ranks (GPUs: tp_size * pp_size of the engine); default 1")
    parser.add_argument("--tritonserver", type=str, default=None,
                        help="server binary (default: our build's inflight-server, else on PATH, else "
                             + NVIDIA_TRITONSERVER + ")")
    parser.add_argument("--grpc_port", type=int, default=8001, help="default 8001")
    parser.add_argument("--http_port", type=int, default=8000, help="default 8000")
    parser.add_argument("--metrics_port", type=int, default=8002, help="default 8002")
    parser.add_argument("-f", "--force", action="store_true",
                        help="kill servers already running instead of refusing to start")
    parser.add_argument("--log", action="store_true", help="rank 0 logs verbosely (level 3) to --log-file")
    parser.add_argument("--log-file", type=str, default="triton_log.txt", help="default triton_log.txt")
    parser.add_argument("--no-mpi", action="store_true",
                        help="run the server directly, without mpirun (needs --world_size 1)")
    parser.add_argument("--model_repo", type=str,
                        default=os.path.join(REPO, "all_models", "inflight_batcher_llm"),
                        help="model repository (default: this repo's all_models/inflight_batcher_llm)")
    parser.add_argument("--tensorrt_llm_model_name", type=str, default="tensorrt_llm",
                        help="comma-separated LLM model names that ranks > 0 load; default tensorrt_llm")
    parser.add_argument("--multi-model", action="store_true",
                        help="orchestrator mode: several LLM models, workers spawned by the backend "
                             "(needs --world_size 1 unless --disable-spawn-processes)")
    parser.add_argument("--disable-spawn-processes", action="store_true",
                        help="with --multi-model: start every rank here instead of spawning workers")
    parser.add_argument("--oversubscribe", action="store_true",
                        help="pass --oversubscribe to mpirun (passed anyway when the host has fewer "
                             "cores than --world_size)")
    parser.add_argument("--backend_directory", "--backend-directory", type=str, default=None,
                        help="ours: --backend-directory for the server (default for inflight-server: "
                             "<build>/backends next to the binary)")
    parser.add_argument("--print-command", action="store_true",
                        help="ours: print the command (and environment) and start nothing")
    parser.add_argument("--wait", action="store_true",
                        help="ours: wait for the server and exit with its status")
    args = parser.parse_args(argv)
    if args.world_size < 1:
        parser.error(f"--world_size {args.world_size} is not accepted: it must be >= 1")
    if args.no_mpi and args.world_size != 1:
        parser.error(f"--no-mpi runs one process, so --world_size must be 1; got {args.world_size}")
    if args.multi_model and not args.disable_spawn_processes and args.world_size != 1:
        parser.error("--multi-model without --disable-spawn-processes needs --world_size 1 (the backend "
                     f"spawns the workers of multi-GPU models); got --world_size {args.world_size}")
    names = [n for n in args.tensorrt_llm_model_name.split(",") if n]
    if not names:
        parser.error(f"--tensorrt_llm_model_name \"{args.tensorrt_llm_model_name}\" names no model")
    return args


def find_server(explicit=None):
    """The server binary: the one given, else the inflight-server installed beside this script
    (<prefix>/bin), else our build's, else one on PATH."""
    if explicit:
        return explicit
    here = os.path.dirname(os.path.realpath(__file__))
    for built in (os.path.join(here, "inflight-server"),
                  os.path.join(REPO, "build", "bin", "inflight-server")):
        if os.access(built, os.X_OK):
            return built
    for name in ("inflight-server", "tritonserver"):
        found = shutil.which(name)
        if found:
            return found
    return NVIDIA_TRITONSERVER


def default_backend_directory(server):
    """<root>/backends for an inflight-server at <root>/bin/inflight-server (an install prefix or a
    build tree) or at <build>/src/server/inflight-server; None for any other server, which keeps its
    own default (Triton: /opt/tritonserver/backends)."""
    if os.path.basename(server) != "inflight-server":
        return None
    folder = os.path.dirname(os.path.abspath(server))
    for root in (os.path.dirname(folder), os.path.dirname(os.path.dirname(folder))):
        backends = os.path.join(root, "backends")
        if os.path.isdir(os.path.join(backends, "inflight")):
            return backends
    return None


def rank_command(args, server, rank, backend_directory):
    cmd = [server, f"--model-repository={args.model_repo}"]
    if backend_directory:
        cmd.append(f"--backend-directory={backend_directory}")
    cmd += [f"--grpc-port={args.grpc_port}", f"--http-port={args.http_port}",
            f"--metrics-port={args.metrics_port}"]
    if args.log and rank == 0:
        cmd += ["--log-verbose=3", f"--log-file={args.log_file}"]
    cmd += ["--disable-auto-complete-config",
            f"--backend-config=python,shm-region-prefix-name=prefix{rank}_"]
    if rank > 0:
        # Ranks > 0 only run the LLM model's shards; the pre/post-processing models live on rank 0.
        cmd.append("--model-control-mode=explicit")
        cmd += [f"--load-model={name}" for name in args.tensorrt_llm_model_name.split(",") if name]
    return cmd


def mpi_slots():
    """How many processes mpirun starts here without --oversubscribe: Open MPI's default slots are
    the host's physical cores (hwloc's cores, not hardware threads) that this process may use."""
    cores = set()
    core = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("physical id", "core id"):
                    core[key] = value.strip()
                elif not key and core:
                    cores.add((core.get("physical id"), core.get("core id")))
                    core = {}
        if core:
            cores.add((core.get("physical id"), core.get("core id")))
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(len(cores) or usable or 1, usable or 1))


def build_command(args, server=None, slots=None):
    """The full command line (a list of arguments), as NVIDIA's script builds it. mpirun gets
    --oversubscribe when asked, and (ours) when the host has fewer cores than ranks (`slots`:
    mpi_slots()), where mpirun would otherwise refuse to start."""
    server = server or find_server(args.tritonserver)
    backend_directory = args.backend_directory or default_backend_directory(server)
    if args.no_mpi:
        return rank_command(args, server, 0, backend_directory)
    cmd = ["mpirun", "--allow-run-as-root"]
    if args.oversubscribe or args.world_size > (slots if slots is not None else mpi_slots()):
        cmd.append("--oversubscribe")
    for rank in range(args.world_size):
        if rank > 0:
            cmd.append(":")
        cmd += ["-n", "1"] + rank_command(args, server, rank, backend_directory)
    return cmd


def build_environment(args):
    """Variables the backend reads for orchestrator mode; empty unless --multi-model."""
    if not args.multi_model:
        return {}
    return {"TRTLLM_ORCHESTRATOR": "1",
            "TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES": "0" if args.disable_spawn_processes else "1"}


def running_server_pids(extra_name=None):
    names = set(SERVER_PROCESS_NAMES)
    if extra_name:
        names.add(extra_name[:15])  # pgrep matches the 15-character kernel process name
    pids = []
    for name in sorted(names):
        result = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True, check=False)
        pids += [int(p) for p in result.stdout.split()]
    return sorted(set(pids) - {os.getpid()})


def port_in_use(port, host="127.0.0.1"):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def check_nothing_running(args, server):
    pids = running_server_pids(os.path.basename(server))
    ports = [p for p in (args.http_port, args.grpc_port, args.metrics_port) if p > 0 and port_in_use(p)]
    if not pids and not ports:
        return
    if not args.force:
        raise SystemExit(f"Triton server already started on the machine (pids {pids}, ports in use "
                         f"{ports}), please use --force to kill it")
    if pids:
        print(f"Killing existing Triton Server instances: {pids}")
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(1.0)
    busy = [p for p in ports if port_in_use(p)]
    if busy:
        raise SystemExit(f"ports {busy} are still in use by a process that is not a server; free them or "
                         "pick other --http_port/--grpc_port/--metrics_port")


def main(argv=None):
    args = parse_arguments(argv)
    server = find_server(args.tritonserver)
    cmd = build_command(args, server)
    env_changes = build_environment(args)
    if args.print_command:
        prefix = " ".join(f"{k}={v}" for k, v in env_changes.items())
        print((prefix + " " if prefix else "") + shlex.join(cmd))
        return 0
    if not args.no_mpi and shutil.which("mpirun") is None:
        raise SystemExit("mpirun not found on PATH: install MPI, or use --world_size 1 --no-mpi")
    if os.path.sep in server and not os.access(server, os.X_OK):
        raise SystemExit(f"--tritonserver {server}: not an executable file; build inflight-server "
                         "(cmake --build build --target inflight-server) or pass a server path")
    check_nothing_running(args, server)
    env = dict(os.environ, **env_changes)
    process = subprocess.Popen(cmd, env=env)
    print(f"[INFO] Started {os.path.basename(server)} (pid {process.pid}); HTTP port {args.http_port}")
    if args.wait:
        return process.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
