#!/usr/bin/env python3
"""A calibration set of random token ids for inflight-build --calib_dataset, as the bench rounds use:
N prompts of LEN ids below 128,000 (inside Llama-3's vocabulary), seed 0, one JSON line each
({"input_ids": [...]}, the shape `datasets`' to_json writes).

  bench/write_calibration_set.py NxLEN OUT.jsonl
"""
import json
import random
import re
import sys


def main():
    if len(sys.argv) != 3 or not re.fullmatch(r"[1-9][0-9]*x[1-9][0-9]*", sys.argv[1]):
        sys.exit(f"usage: {sys.argv[0]} NxLEN OUT.jsonl (e.g. 8x64); got {sys.argv[1:]}")
    n, length = (int(v) for v in sys.argv[1].split("x"))
    random.seed(0)
    with open(sys.argv[2], "w") as f:
        for _ in range(n):
            f.write(json.dumps({"input_ids": [random.randrange(128000) for _ in range(length)]}) + "\n")


if __name__ == "__main__":
    main()
