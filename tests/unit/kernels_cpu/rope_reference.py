#!/usr/bin/env python3
"""RoPE inverse frequencies and rotations as transformers 5 computes them, for rope_golden.json.

Written from transformers' modeling_rope_utils.py (transformers 5: _compute_linear_scaling_rope_parameters,
_compute_dynamic_ntk_parameters, _compute_yarn_parameters, _compute_llama3_parameters, and the models'
compute_default_rope_parameters) and the rotary embedding forward (LlamaRotaryEmbedding: fp32 angles,
cos/sin times attention_scaling; apply_rotary_pos_emb: x * cos + rotate_half(x) * sin). torch computes
these in float32: every step below is rounded to float32 where torch's would be (f32()), so the values
are transformers' to within an ulp or two, without torch.

    python3 tests/unit/kernels_cpu/rope_reference.py > tests/unit/kernels_cpu/rope_golden.json
"""

import json
import math
import random
import struct


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def base_frequencies(base, dim):
    """1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), in fp32."""
    out = []
    for i in range(0, dim, 2):
        exponent = f32(f32(i) / dim)
        out.append(f32(1.0 / f32(f32(base) ** exponent)))
    return out


def default(p, dim):
    return base_frequencies(p["rope_theta"], dim), 1.0


def linear(p, dim):
    return [f32(f / f32(p["factor"])) for f in base_frequencies(p["rope_theta"], dim)], 1.0


def dynamic(p, dim, max_position_embeddings, seq_len):
    # dynamic_rope_update passes seq_len = max(position_ids) + 1 as a tensor: the new base is fp32.
    factor = p["factor"]
    seq_len = max(seq_len, max_position_embeddings)
    ratio = f32(f32(f32(factor * seq_len) / max_position_embeddings) - (factor - 1))
    base = f32(f32(p["rope_theta"]) * f32(ratio ** (dim / (dim - 2))))
    return base_frequencies(base, dim), 1.0


def yarn(p, dim, max_position_embeddings):
    base = p["rope_theta"]
    factor = p.get("factor")
    original = p["original_max_position_embeddings"]
    if factor is None:
        factor = max_position_embeddings / original
    attention_factor = p.get("attention_factor")
    mscale, mscale_all_dim = p.get("mscale"), p.get("mscale_all_dim")

    def get_mscale(scale, m=1):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)
    beta_fast = p.get("beta_fast") or 32
    beta_slow = p.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos = [f32(f32(base) ** f32(f32(i) / dim)) for i in range(0, dim, 2)]
    out = []
    for i, pf in enumerate(pos):
        extrapolation = f32(1.0 / pf)
        interpolation = f32(1.0 / f32(factor * pf))
        ramp = min(max(f32(f32(i - low) / (high - low)), 0.0), 1.0)
        extrapolation_factor = f32(1 - ramp)
        out.append(f32(f32(interpolation * f32(1 - extrapolation_factor)) +
                       f32(extrapolation * extrapolation_factor)))
    return out, attention_factor


def llama3(p, dim):
    inv = base_frequencies(p["rope_theta"], dim)
    factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    old = p["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    out = []
    for f in inv:
        wavelen = f32(2 * math.pi / f)
        g = f32(f / factor) if wavelen > low_wavelen else f
        if not wavelen < high_wavelen and not wavelen > low_wavelen:
            smooth = f32(f32(f32(old / wavelen) - low) / (high - low))
            g = f32(f32(f32(f32(1 - smooth) * g) / factor) + f32(smooth * g))
        out.append(g)
    return out, 1.0


def rotate(x, positions, inv, heads, dim, attention_factor):
    """apply_rotary_pos_emb on fp32 rows of `heads` heads: x * cos + rotate_half(x) * sin."""
    half = dim // 2
    out = []
    for t, p in enumerate(positions):
        cos = [f32(f32(math.cos(f32(p * f))) * attention_factor) for f in inv]
        sin = [f32(f32(math.sin(f32(p * f))) * attention_factor) for f in inv]
        for h in range(heads):
            row = x[(t * heads + h) * dim:(t * heads + h + 1) * dim]
            for i in range(half):
                out.append(f32(f32(row[i] * cos[i]) - f32(row[i + half] * sin[i])))
            for i in range(half):
                out.append(f32(f32(row[i + half] * cos[i]) + f32(row[i] * sin[i])))
    return out


def case(name, head_dim, max_position_embeddings, rope, inv, attention_factor, **extra):
    c = {"name": name, "head_dim": head_dim, "max_position_embeddings": max_position_embeddings,
         "rope": rope, "inv_freq": inv, "attention_factor": attention_factor}
    c.update(extra)
    return c


def main():
    cases = []
    p = {"rope_type": "default", "rope_theta": 10000.0}
    cases.append(case("default_10k_d64", 64, 2048, p, *default(p, 64)))
    p = {"rope_type": "default", "rope_theta": 1000000.0}
    cases.append(case("default_1e6_d128", 128, 32768, p, *default(p, 128)))
    p = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}
    cases.append(case("linear_4_d128", 128, 4096, p, *linear(p, 128)))
    p = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    cases.append(case("llama3_8b", 128, 131072, p, *llama3(p, 128)))
    p = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    cases.append(case("llama3_tiny_d16", 16, 2048, p, *llama3(p, 16)))
    # Qwen2.5-7B-Instruct's documented long-context setting.
    p = {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
         "original_max_position_embeddings": 32768}
    cases.append(case("yarn_qwen25", 128, 32768, p, *yarn(p, 128, 32768)))
    p = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "beta_fast": 16, "beta_slow": 2,
         "mscale": 0.707, "mscale_all_dim": 0.707, "truncate": False,
         "original_max_position_embeddings": 4096}
    cases.append(case("yarn_mscale_untruncated_d64", 64, 163840, p, *yarn(p, 64, 163840)))
    p = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0, "attention_factor": 1.25,
         "original_max_position_embeddings": 64}
    cases.append(case("yarn_given_attention_factor_d32", 32, 128, p, *yarn(p, 32, 128)))
    p = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}
    for seq_len in (100, 2048, 2049, 5000):
        inv, af = dynamic(p, 128, 2048, seq_len)
        cases.append(case("dynamic_2_len%d" % seq_len, 128, 2048, p, inv, af, seq_len=seq_len))

    rng = random.Random(2201)
    rotations = []
    for name, heads, positions in (("yarn_qwen25", 2, [0, 1, 777, 40000]),
                                   ("llama3_8b", 1, [3, 9000, 131000]),
                                   ("dynamic_2_len5000", 1, [4999])):
        c = next(c for c in cases if c["name"] == name)
        dim = c["head_dim"]
        x = [f32(rng.uniform(-1, 1)) for _ in range(len(positions) * heads * dim)]
        rotations.append({"case": name, "heads": heads, "positions": positions, "x": x,
                          "expected": rotate(x, positions, c["inv_freq"], heads, dim,
                                             c["attention_factor"])})
    print(json.dumps({"format": "inflight-rope-golden", "source": "rope_reference.py",
                      "cases": cases, "rotations": rotations}, indent=1))


if __name__ == "__main__":
    main()
