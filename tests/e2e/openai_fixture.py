"""The model repository the OpenAI e2e tests serve: a copy of the LLM demo repository (INFLIGHT_LLM_REPO,
made by tools/prepare_demo.sh) whose tokenizer folder gets a chat template, plus `ensemble_plain`, the same
ensemble over the untouched tokenizer folder (no chat template).

The demo's GPT-2 tokenizer has no chat_template; CHAT_TEMPLATE is a small one of our own that also
refuses a role with raise_exception, and render_chat() is what it renders (for expected prompts).
"""
import json
import os
import re
import shutil
import tempfile

import inflight_client as ic

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'tool' %}{{ raise_exception('this template has no tool role') }}{% endif %}"
    "{{ message['role'] }}: {{ message['content'] | trim }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
TEMPLATE_ERROR = "this template has no tool role"


def render_chat(messages):
    """CHAT_TEMPLATE rendered with add_generation_prompt=True."""
    return "".join(f"{m['role']}: {m['content'].strip()}\n" for m in messages) + "assistant:"


def _tokenizer_dir(config_text):
    match = re.search(r'key: "tokenizer_dir"\s*value: \{\s*string_value: "([^"]*)"', config_text)
    if not match:
        raise AssertionError("no tokenizer_dir in the preprocessing config")
    return match.group(1)


def _write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def make_repository():
    """A temporary folder holding the repository (repo/) and the tokenizer copy (tokenizer/). Returns
    (TemporaryDirectory, repository path)."""
    source = ic.env_or_skip("INFLIGHT_LLM_REPO")
    tmp = tempfile.TemporaryDirectory(prefix="openai_e2e_")
    repo = os.path.join(tmp.name, "repo")
    shutil.copytree(source, repo)
    plain_dir = _tokenizer_dir(_read(os.path.join(repo, "preprocessing", "config.pbtxt")))
    chat_dir = os.path.join(tmp.name, "tokenizer")
    os.makedirs(chat_dir)
    for name in os.listdir(plain_dir):
        if name.startswith(("tokenizer", "vocab", "merges", "special_tokens", "added_tokens")):
            shutil.copy(os.path.join(plain_dir, name), chat_dir)
    config_path = os.path.join(chat_dir, "tokenizer_config.json")
    config = json.loads(_read(config_path)) if os.path.exists(config_path) else {}
    config["chat_template"] = CHAT_TEMPLATE
    _write(config_path, json.dumps(config, indent=2))
    for model in ("preprocessing", "postprocessing"):
        path = os.path.join(repo, model, "config.pbtxt")
        _write(path, _read(path).replace(plain_dir, chat_dir))
    # ensemble_plain: the ensemble through preprocessing_plain, which keeps the original folder.
    shutil.copytree(os.path.join(source, "preprocessing"), os.path.join(repo, "preprocessing_plain"))
    path = os.path.join(repo, "preprocessing_plain", "config.pbtxt")
    _write(path, _read(path).replace('name: "preprocessing"', 'name: "preprocessing_plain"'))
    shutil.copytree(os.path.join(repo, "ensemble"), os.path.join(repo, "ensemble_plain"))
    path = os.path.join(repo, "ensemble_plain", "config.pbtxt")
    _write(path, _read(path).replace('name: "ensemble"', 'name: "ensemble_plain"')
           .replace('model_name: "preprocessing"', 'model_name: "preprocessing_plain"'))
    return tmp, repo


def start_server(repo):
    return ic.InflightServer(model_repository=repo,
                             backend_directory=os.environ["INFLIGHT_BACKEND_DIR"],
                             startup_timeout=180.0).start()
