"""Machinery to replay a document's deployment sequence (seed_sequences.py) on this machine.

The sequences are run as written, with these substitutions and no others (each one must apply, so a
changed document is noticed):
  - absolute paths are re-rooted under a temporary folder laid out like NVIDIA's container: /app,
    /tensorrtllm_backend and /engines, /models, /triton_model_repo there hold our all_models/, our
    tools/fill_template.py, our tools/launch_server.py (as scripts/launch_triton_server.py), the
    CPU demo engine and its tokenizer (random-weight GPT-2 shape, GPT-2's real tokenizer);
  - triton_backend:tensorrtllm becomes triton_backend:inflight;
  - the start line: tritonserver becomes our inflight-server (launch_triton_server.py gets
    --tritonserver=<inflight-server>), and the ports become 0 (the server binds free ones and prints
    them, so tests can run side by side). The document's MPI world size stays where the test has
    engines of that many ranks (the demo model built with --tp_size N: ContainerRoot's
    split_engines), and becomes 1 otherwise (the one-rank demo engine; mpirun -n 1, or no mpirun
    where Open MPI is not installed);
  - the curl lines get those ports instead of 8000/8002 and 18000/18002.
launch_triton_server.py, like NVIDIA's, refuses to start while any server runs on the machine (which
other tests may be doing); so the replay asks it for the command it would run (--print-command) and
runs that command.
"""

import os
import re
import shlex
import shutil
import subprocess

from inflight_client import InflightServer

_ROOTED = ("app", "tensorrtllm_backend", "engines", "models", "triton_model_repo")
# An absolute path at the start of a word or after '=': "/models/" inside a URL is left alone.
_ABSOLUTE = re.compile(r"(?<![^\s=])/(" + "|".join(_ROOTED) + r")(?=/|\s|$)", re.MULTILINE)


def substitute(text, old, new, count_at_least=1):
    """Replaces `old` with `new`, and insists that it occurred."""
    found = text.count(old)
    if found < count_at_least:
        raise AssertionError(f"the document's text changed: {old!r} is not in {text!r}")
    return text.replace(old, new)


class ContainerRoot:
    """A folder laid out like the paths the documents use, pointing at our files."""

    def __init__(self, root, source_dir, engine_dir, tokenizer_dir, split_engines=None):
        """split_engines: {world size: engine dir of the demo model with that many ranks}; a
        document's N-GPU engine folder is that engine when given, else the one-rank engine."""
        self.root = root
        self.split_engines = dict(split_engines or {})
        two_gpu = self.split_engines.get(2, engine_dir)
        four_gpu = self.split_engines.get(4, engine_dir)
        links = {
            "app/all_models": os.path.join(source_dir, "all_models"),
            "app/tools/fill_template.py": os.path.join(source_dir, "tools", "fill_template.py"),
            "app/scripts/launch_triton_server.py": os.path.join(source_dir, "tools", "launch_server.py"),
            "app/examples/gpt/gpt2": tokenizer_dir,
            "engines/gpt/fp16/4-gpu": four_gpu,
            "engines/trt_engines/Qwen2-14B-Instruct-Int4/weight_only/2-gpu": two_gpu,
            "engines/trt_engines/Qwen2-14B-Instruct-Int4/weight_only/2-gpu-opti": two_gpu,
            "models/Qwen2-14B-Instruct": tokenizer_dir,
            "tensorrtllm_backend/all_models": os.path.join(source_dir, "all_models"),
            "tensorrtllm_backend/tools/fill_template.py": os.path.join(source_dir, "tools",
                                                                       "fill_template.py"),
            "tensorrtllm_backend/scripts/launch_triton_server.py": os.path.join(
                source_dir, "tools", "launch_server.py"),
            "tensorrtllm_backend/tensorrt_llm/examples/gpt/gpt2": tokenizer_dir,
            "tensorrtllm_backend/tensorrt_llm/examples/gpt/engines/fp16/4-gpu": four_gpu,
        }
        for relative, target in links.items():
            path = os.path.join(root, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink(os.path.abspath(target), path)

    def reroot(self, text):
        rooted, count = _ABSOLUTE.subn(lambda m: self.root + m.group(0), text)
        return rooted, count

    def path(self, absolute):
        """Where the document's absolute path lies here."""
        rooted, count = self.reroot(absolute)
        assert count == 1, absolute
        return rooted


def setup_script(root, setup):
    """The set-up block, paths re-rooted and the backend name ours."""
    script, count = root.reroot(setup)
    if "triton_backend:tensorrtllm" in script:
        script = substitute(script, "triton_backend:tensorrtllm", "triton_backend:inflight")
    return "set -e\n" + script, count


def variable_lines(setup):
    """The set-up block's shell variable assignments (MODEL_FOLDER=...), which its start line uses."""
    return "\n".join(line for line in setup.splitlines() if re.match(r"[A-Z_][A-Z0-9_]*=", line))


def start_script(root, setup, start, server, have_mpirun):
    """The set-up's variables, then the start line, run by bash as the last command (exec) so that
    the process is the server's (or mpirun's)."""
    script, _ = root.reroot(variable_lines(setup) + "\n" + start)
    lines = script.strip("\n").splitlines()
    command = lines[-1]
    if "launch_triton_server.py" in command:
        world = int(re.search(r"--world_size=(\d+)", command).group(1))
        if not (have_mpirun and world in root.split_engines):
            command = re.sub(r"--world_size=\d+", "--world_size=1", command)
        for flag in ("--http_port", "--grpc_port", "--metrics_port"):
            if flag + "=" in command:
                command = re.sub(flag + r"=\d+", flag + "=0", command)
            else:
                command += f" {flag}=0"
        command += f" --tritonserver={shlex.quote(server)} --print-command"
        if not have_mpirun:
            command += " --no-mpi"
        command = f'eval exec "$({command})"'
    else:
        world = int(re.search(r"mpirun -n (\d+) ", command).group(1))
        if not (have_mpirun and world in root.split_engines):
            command = substitute(command, f"mpirun -n {world} ", "mpirun -n 1 ")
        command = re.sub(r"(?<=\s)tritonserver(?=\s)", shlex.quote(server), command, count=1)
        for port in ("18000", "18001", "18002"):
            command = substitute(command, "=" + port, "=0")
        if not have_mpirun:
            command = command[command.index(shlex.quote(server)):]
        command = "exec " + command
    return "\n".join(lines[:-1] + [command])


def curl_command(curl, http_port, metrics_port):
    for http in ("localhost:8000/", "localhost:18000/"):
        curl = curl.replace(http, f"localhost:{http_port}/")
    for metrics in ("localhost:8002/", "localhost:18002/"):
        curl = curl.replace(metrics, f"localhost:{metrics_port}/")
    if f":{http_port}/" not in curl and f":{metrics_port}/" not in curl:
        raise AssertionError(f"no port substituted in {curl!r}")
    return curl


def set_parameter(config_path, key, value):
    """A hand edit: the string_value of parameter `key` becomes `value`."""
    with open(config_path) as f:
        text = f.read()
    pattern = re.compile(r'(key: "' + re.escape(key) + r'"\s*value: \{\s*string_value: ")[^"]*(")')
    edited, count = pattern.subn(lambda m: m.group(1) + value + m.group(2), text)
    assert count == 1, f"parameter {key} is not in {config_path} once"
    with open(config_path, "w") as f:
        f.write(edited)


class ScriptServer(InflightServer):
    """A server started by a bash script that ends in `exec <server>` (or `exec mpirun ...`, which
    passes SIGTERM on to the server); the Started lines give its ports."""

    def __init__(self, script, cwd, startup_timeout=120.0):
        # The repository and backend folder are the script's business, not InflightServer's.
        super().__init__(model_repository=script, backend_directory=cwd, wait_ready=False,
                         startup_timeout=startup_timeout)
        self.script = script
        self.cwd = cwd

    def command(self):
        return ["bash", "-c", f"cd {shlex.quote(self.cwd)}\n{self.script}"]


def run_curl(curl, cwd):
    """Runs a curl line as a shell would; returns its standard output."""
    if shutil.which("curl") is None:
        raise AssertionError("curl is not installed (tools/install_deps.sh installs it)")
    result = subprocess.run(["bash", "-c", curl], cwd=cwd,
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise AssertionError(f"{curl} failed ({result.returncode}): {result.stderr}")
    return result.stdout
