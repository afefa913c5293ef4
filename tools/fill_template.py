#!/usr/bin/env python3
"""Fill ${key} placeholders in a model repository template (config.pbtxt).

Command-line compatible with NVIDIA tensorrtllm_backend's tools/fill_template.py:

    fill_template.py [--in_place|-i] file_path "key1:value1,key2:value2"

Substitutions are split on ',' and then on ':'; a backslash makes the next character literal, so
gpu_device_ids:0\\,1 gives "0,1". "key:" sets an empty value; when a key repeats, the last wins.
Every given key must occur in the file. Placeholders not given are left as they are
(string.Template.safe_substitute); in a parameter's string_value the backend reads that as "unset,
use the default".

Defaults. Triton parses config.pbtxt itself: a placeholder left where it needs a value (a number, a
boolean, a data type) stops the model from loading, and no default can sit in the template without
breaking that file or NVIDIA's substitution rules. So this script writes the defaults when it fills
a file: max_queue_size and max_queue_delay_microseconds 0 (as NVIDIA's script does), and for the keys
that NVIDIA's older templates did not have, so that their READMEs' commands still give a file that
loads: logits_datatype TYPE_FP32, encoder_input_features_data_type TYPE_FP16,
prompt_embedding_table_data_type TYPE_FP16, triton_backend inflight. Those are written with a comment
"# <key> not given: fill_template.py default" and a line on stderr; a later fill naming the key
replaces them. After filling, placeholders still left where a value is needed are listed on stderr
with the key that sets each (docs/template_keys.md has every key).
"""
import argparse
import re
import string
import sys

# Applied unless the substitutions name them, silently (NVIDIA's script does the same).
BUILTIN_DEFAULTS = {"max_queue_size": "0", "max_queue_delay_microseconds": "0"}

# Keys NVIDIA's templates gained after some READMEs were written (the value was fixed in the
# template before): default, accepted values, and what the key sets.
TYPE_DEFAULTS = {
    "logits_datatype": ("TYPE_FP32", ("TYPE_FP32", "TYPE_FP16"),
                        "data type of the context_logits and generation_logits outputs"),
    "encoder_input_features_data_type": ("TYPE_FP16", ("TYPE_FP16", "TYPE_BF16", "TYPE_FP32"),
                                         "data type of the encoder_input_features input"),
    "prompt_embedding_table_data_type": ("TYPE_FP16", ("TYPE_FP16", "TYPE_BF16", "TYPE_FP32"),
                                         "data type of the prompt_embedding_table input"),
}
TEMPLATE_DEFAULTS = dict(
    {key: default for key, (default, _, _) in TYPE_DEFAULTS.items()},
    triton_backend="inflight")
DEFAULT_MARK = "  # {key} not given: fill_template.py default"

# Keys of NVIDIA's templates that Inflight's leave out on purpose, and why; named when given.
ABSENT_KEYS = {
    "multimodal_model_path": "NVIDIA's multimodal preprocessing key; Inflight serves text models",
    "visual_model_path": "NVIDIA's multimodal preprocessing key; Inflight serves text models",
    "hf_model_path": "NVIDIA's multimodal key; Inflight serves text models",
    "max_num_images": "NVIDIA's multimodal preprocessing key; Inflight serves text models",
    "engine_dir": "NVIDIA's preprocessing takes it only for multimodal models; Inflight's "
                  "tensorrt_llm template takes engine_dir",
    "max_num_sequences": "a key of NVIDIA's early tensorrt_llm templates; the engine's "
                         "max_batch_size (inflight-build --max_batch_size) bounds the batch",
}

# What the keys that must be given take, for the "still unfilled" lines.
VALUE_HINTS = {
    "triton_max_batch_size": "<integer>",
    "decoupled_mode": "<true|false>",
    "preprocessing_instance_count": "<integer>",
    "postprocessing_instance_count": "<integer>",
    "bls_instance_count": "<integer>",
}

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class FillError(ValueError):
    """A substitution this script refuses, with the reason."""


def split_escaped(text, delimiter):
    """Split on delimiter; a backslash escapes the character after it (itself included)."""
    parts = [""]
    chars = iter(text)
    for char in chars:
        if char == "\\":
            parts[-1] += next(chars, "")
        elif char == delimiter:
            parts.append("")
        else:
            parts[-1] += char
    return parts


def find_placeholders(text):
    """(key, line, quoted) for every ${key} outside comments, as the config loader finds them."""
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        quote = None
        i = 0
        while i < len(line):
            char = line[i]
            if quote:
                if char == "\\":
                    i += 1
                elif char == quote:
                    quote = None
            elif char == "#":
                break
            elif char in "\"'":
                quote = char
            match = PLACEHOLDER.match(line, i) if char == "$" else None
            if match:
                found.append((match.group(1), number, quote is not None))
                i = match.end()
                continue
            i += 1
    return found


def parse_substitutions(substitutions, template_text, file_path):
    values = {}
    for item in split_escaped(substitutions, ","):
        # Unpacking raises ValueError for an item without exactly one ':' (an empty string too).
        key, value = split_escaped(item, ":")
        message = f"key '{key}' does not exist in the file {file_path}."
        if key in ABSENT_KEYS:
            message += f" ({ABSENT_KEYS[key]}.)"
        assert key in template_text, message
        if key in TYPE_DEFAULTS and value not in TYPE_DEFAULTS[key][1]:
            raise FillError(f"{key}:{value} is not accepted: {key} sets the "
                            f"{TYPE_DEFAULTS[key][2]}, one of {', '.join(TYPE_DEFAULTS[key][1])}")
        values[key] = value
    return values


def refill_defaults(text, values):
    """Replace defaults an earlier fill wrote (marked lines) with values now given."""
    lines = text.split("\n")
    for key, value in values.items():
        if key not in TEMPLATE_DEFAULTS:
            continue
        mark = DEFAULT_MARK.format(key=key)
        for n, line in enumerate(lines):
            if line.endswith(mark):
                code = line[:-len(mark)]
                cut = code.rfind(TEMPLATE_DEFAULTS[key])
                lines[n] = code[:cut] + value + code[cut + len(TEMPLATE_DEFAULTS[key]):]
    return "\n".join(lines)


def apply_template_defaults(text, values, notes):
    """Write the default of every TEMPLATE_DEFAULTS placeholder not given, marking its lines."""
    lines = text.split("\n")
    for key, default in TEMPLATE_DEFAULTS.items():
        if key in values:
            continue
        needle = "${" + key + "}"
        marked = [n for n, line in enumerate(lines) if needle in line.split("#")[0]]
        for n in marked:
            lines[n] = lines[n].replace(needle, default) + DEFAULT_MARK.format(key=key)
        if marked:
            notes.append(f"{key} not given: wrote its default {default}")
    return "\n".join(lines)


def unfilled_notes(text):
    """Placeholders still where a value is needed (not in a quoted string), with their keys."""
    lines_of = {}
    for key, line, quoted in find_placeholders(text):
        if not quoted:
            lines_of.setdefault(key, []).append(str(line))
    return [f"${{{key}}} (line{'s' if len(at) > 1 else ''} {', '.join(at)}) is still unfilled: "
            f"Triton cannot load the file until it is; give {key}:{VALUE_HINTS.get(key, '<value>')}"
            for key, at in lines_of.items()]


def fill(template_text, substitutions, file_path, notes=None):
    """The filled text; `notes` (a list), when given, gets the lines to show the user."""
    notes = [] if notes is None else notes
    values = parse_substitutions(substitutions, template_text, file_path)
    if values.get("triton_backend") == "tensorrtllm":
        notes.append("triton_backend:tensorrtllm names NVIDIA's TensorRT-LLM backend; "
                     "Inflight's is triton_backend:inflight (libtriton_inflight.so)")
    text = refill_defaults(template_text, values)
    text = apply_template_defaults(text, values, notes)
    text = string.Template(text).safe_substitute(dict(BUILTIN_DEFAULTS, **values))
    notes.extend(unfilled_notes(text))
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file_path", help="path of the .pbtxt to fill")
    parser.add_argument(
        "substitutions",
        help="substitutions, in the format key1:value1,key2:value2 (escape , and : with \\)")
    parser.add_argument("--in_place", "-i", action="store_true", help="rewrite the file in place")
    args = parser.parse_args(argv)

    with open(args.file_path) as f:
        text = f.read()
    notes = []
    try:
        filled = fill(text, args.substitutions, args.file_path, notes)
    except FillError as e:
        print(f"fill_template.py: error: {args.file_path}: {e}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"fill_template.py: {args.file_path}: {note}", file=sys.stderr)
    if args.in_place:
        with open(args.file_path, "w") as f:
            f.write(filled)
    else:
        print(filled)
    return 0


if __name__ == "__main__":
    sys.exit(main())
