"""Reference renderer for chat_template_test: Jinja2 set up as transformers' apply_chat_template sets
it up (chat_template_utils.py: sandboxed, trim_blocks and lstrip_blocks, loopcontrols, tojson as
json.dumps, raise_exception, strftime_now), written independently of the server's renderer.

usage: render_reference.py <tokenizer_config.json> <cases.json>
cases.json: [{"messages": [...], "add_generation_prompt": bool}, ...]
prints: a JSON list, per case {"text": rendered} or {"error": the template's message}.
"""
import datetime
import json
import sys

import jinja2.exceptions
import jinja2.ext
import jinja2.sandbox


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def special_tokens(config):
    out = {}
    for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                "mask_token"):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        config = json.load(f)
    with open(sys.argv[2], encoding="utf-8") as f:
        cases = json.load(f)
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, \
        sort_keys=False: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                                    separators=separators, sort_keys=sort_keys)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    template = env.from_string(config["chat_template"])
    results = []
    for case in cases:
        try:
            text = template.render(messages=case["messages"], tools=None, documents=None,
                                   add_generation_prompt=case["add_generation_prompt"],
                                   **special_tokens(config))
            results.append({"text": text})
        except jinja2.exceptions.TemplateError as error:
            results.append({"error": str(error)})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
