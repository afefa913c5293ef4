#!/usr/bin/env python3
"""Fill ${key} placeholders in a model repository template (config.pbtxt).

Command-line compatible with NVIDIA tensorrtllm_backend's tools/fill_template.py:

    fill_template.py [--in_place|-i] file_path "key1:value1,key2:value2"

Substitutions are split on ',' and then on ':'; a backslash makes the next character literal, so
gpu_device_ids:0\\,1 gives "0,1". "key:" sets an empty value; when a key repeats, the last wins.
max_queue_size and max_queue_delay_microseconds default to 0 unless given. Every given key must
occur in the file. Placeholders not given are left as they are (string.Template.safe_substitute),
which the backend reads as "unset, use the default".
"""
import argparse
import string
import sys

# Applied unless the substitutions name them (NVIDIA's script does the same).
BUILTIN_DEFAULTS = {"max_queue_size": 0, "max_queue_delay_microseconds": 0}


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


def parse_substitutions(substitutions, template_text, file_path):
    values = dict(BUILTIN_DEFAULTS)
    for item in split_escaped(substitutions, ","):
        # Unpacking raises ValueError for an item without exactly one ':' (an empty string too).
        key, value = split_escaped(item, ":")
        assert key in template_text, f"key '{key}' does not exist in the file {file_path}."
        values[key] = value
    return values


def fill(template_text, substitutions, file_path):
    values = parse_substitutions(substitutions, template_text, file_path)
    return string.Template(template_text).safe_substitute(values)


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
    filled = fill(text, args.substitutions, args.file_path)
    if args.in_place:
        with open(args.file_path, "w") as f:
            f.write(filled)
    else:
        print(filled)
    return 0


if __name__ == "__main__":
    sys.exit(main())
