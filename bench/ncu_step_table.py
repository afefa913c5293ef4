#!/usr/bin/env python3
"""Per-step kernel time tables from an Nsight Compute CSV (ncu --csv --page raw --metrics
gpu__time_duration.sum), as bench/kernel_profile_round.sh writes it.

A step of the CUDA runner opens with the token embedding gather (EmbeddingKernel, one block per
token); the same kernel also gathers the logit rows near the step's end, so a gather opens a new
step only after the step so far ran its final norm (more RMSNorm launches than 2 x --layers).
Steps cut off by the launch window are left out.

  bench/ncu_step_table.py ncu.csv [--layers 32] [--top 14] [--steps 3]
"""
import argparse
import collections
import csv
import re
import sys


def short_name(name):
    """A kernel's name without its return type, namespaces, template arguments and parameters."""
    name = re.sub(r"^void ", "", name).replace("(anonymous namespace)::", "")
    base = name.split("(")[0]
    depth, out = 0, []
    for ch in base:  # drop <...> however nested
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    base = "".join(out).split("::")[-1]
    return base[:70]


def read_launches(path):
    with open(path, newline="") as f:
        lines = [ln for ln in f if not ln.startswith("==")]
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"{path}: no ncu CSV header (did the profiled program launch any kernel?)")
    rows = list(csv.reader(lines[start:]))
    header, units = rows[0], rows[1]
    col = {h: i for i, h in enumerate(header)}
    t = col["gpu__time_duration.sum"]
    scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(units[t], 1e-3)
    launches = []
    for r in rows[2:]:
        if len(r) <= t or not r[t]:
            continue
        grid = [int(g) for g in re.findall(r"\d+", r[col["Grid Size"]])] or [0]
        launches.append((short_name(r[col["Kernel Name"]]), grid[0],
                         float(r[t].replace(",", "")) * scale))
    return launches


def split_steps(launches, layers):
    steps, cur, norms = [], None, 0
    for name, grid, us in launches:
        if name == "EmbeddingKernel" and (cur is None or norms > 2 * layers):
            if cur is not None:
                steps.append(cur)
            cur, norms = {"tokens": grid, "kernels": []}, 0
        if cur is None:
            continue  # before the first step opened: load, warm-up tails
        if name.startswith("RmsNorm"):
            norms += 1
        cur["kernels"].append((name, us))
    return steps  # the last one may be cut off: left out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--steps", type=int, default=3, help="the largest N distinct-token steps")
    a = ap.parse_args()
    steps = split_steps(read_launches(a.csv), a.layers)
    if not steps:
        sys.exit("no whole step in the profiled launches")
    print(f"{len(steps)} whole steps profiled; tokens per step: "
          + ", ".join(str(s["tokens"]) for s in steps))
    shown, seen = [], set()
    for s in sorted(steps, key=lambda s: -s["tokens"]):
        if s["tokens"] not in seen and len(shown) < a.steps:
            seen.add(s["tokens"])
            shown.append(s)
    for s in shown:
        total = sum(us for _, us in s["kernels"])
        by = collections.defaultdict(lambda: [0, 0.0])
        for name, us in s["kernels"]:
            by[name][0] += 1
            by[name][1] += us
        print(f"\n### step of {s['tokens']} tokens: {len(s['kernels'])} kernels, "
              f"{total / 1e3:.2f} ms of kernel time\n")
        print("| kernel | launches | us | share |")
        print("|---|---:|---:|---:|")
        for name, (n, us) in sorted(by.items(), key=lambda kv: -kv[1][1])[:a.top]:
            print(f"| {name} | {n} | {us:,.0f} | {100 * us / total:.1f}% |")


if __name__ == "__main__":
    main()
