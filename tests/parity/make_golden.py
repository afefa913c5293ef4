#!/usr/bin/env python3
"""Golden outputs from Hugging Face transformers for the CPU runner's parity test.

For each case below: make a small random fp32 checkpoint with make_checkpoint (fixed flags and seed),
load it with transformers, and record for a few fixed prompts of token ids (no tokenizer needed):
  - the prompt's logits (first PROMPT_SLICE vocab entries at every position),
  - the last position's logits (first LAST_SLICE entries) and its argmax,
  - 16 greedy tokens from model.generate, cross-checked against a plain argmax loop without a KV cache.
One JSON per case goes to --out. tests/unit/model_cpu/golden_parity_test.cc rebuilds the same checkpoint
with the generator library (the flags in the JSON map one-to-one onto RandomCheckpointOptions), builds an
fp32 engine, and compares our CPU runner against these numbers.

Usage (needs torch + transformers; runs on CPU by default):
  python3 tests/parity/make_golden.py \
      --make_checkpoint build/bin/make_checkpoint --out tests/parity/golden
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from transformers import AutoModelForCausalLM

NEW_TOKENS = 16
LAST_SLICE = 64
PROMPT_SLICE = 16
# A greedy step whose best two logits are closer than this is a near-tie that fp32 noise (~1e-6 of the
# logits) could flip: such a case is rejected (change its seed) rather than recorded.
MIN_TOP2_GAP = 1e-4

# make_checkpoint flags per case. init_std 0.2 (not the usual 0.02) so that attention and the MLP
# move the logits by much more than the parity tolerance.
COMMON = {"hidden_size": 64, "num_layers": 2, "intermediate_size": 128, "vocab_size": 512,
          "max_position_embeddings": 128, "init_std": 0.2, "dtype": "float32"}
CASES = {
    # GQA 4/2, llama3 rope scaling with a short original context so all three frequency bands occur
    # (head_dim 16: wavelengths 6.3 .. 2e4 against band edges 8 and 32), untied lm_head.
    "llama_gqa_llama3": dict(COMMON, arch="llama", num_heads=4, num_kv_heads=2, rope_theta=10000.0,
                             rope_scaling="llama3", rope_factor=8.0, rope_low_freq_factor=1.0,
                             rope_high_freq_factor=4.0, rope_original_max_position_embeddings=32,
                             seed=1101),
    # MQA (6 query heads, 1 kv head), rope_theta 1e6.
    "mistral_mqa": dict(COMMON, arch="mistral", hidden_size=96, num_heads=6, num_kv_heads=1,
                        rope_theta=1000000.0, seed=1102),
    # q/k/v biases, tied embeddings (qwen2's default).
    "qwen2_bias": dict(COMMON, arch="qwen2", num_heads=4, num_kv_heads=2, rope_theta=10000.0,
                       seed=1103),
    # Learned positions, LayerNorm with bias, gelu_new, all biases, tied lm_head.
    "gpt2": dict(COMMON, arch="gpt2", num_heads=4, num_kv_heads=4, intermediate_size=256, seed=1104),
    # Linear RoPE scaling.
    "llama_linear": dict(COMMON, arch="llama", num_heads=4, num_kv_heads=2, rope_theta=10000.0,
                         rope_scaling="linear", rope_factor=4.0, seed=1105),
    # YaRN (attention factor on cos and sin), config.json in transformers 5's layout.
    "qwen2_yarn_v5": dict(COMMON, arch="qwen2", num_heads=4, num_kv_heads=2, rope_theta=10000.0,
                          rope_scaling="yarn", rope_factor=4.0, rope_original_max_position_embeddings=32,
                          layout=5, seed=1106),
    # Llama's attention_bias and mlp_bias, transformers 5's layout.
    "llama_bias_v5": dict(COMMON, arch="llama", num_heads=4, num_kv_heads=2, rope_theta=500000.0,
                          attention_bias=True, mlp_bias=True, layout=5, seed=1107),
}
# Dynamic RoPE is not among them: this file's reference recomputes whole sequences without a cache,
# where transformers' generate (and the engine) rotate each key once, at the length of its step;
# tests/parity/gpu_parity.py replays the cached steps instead.
PROMPTS = [
    [1, 17, 300, 42, 42, 5, 260, 99, 7, 3, 511],
    [0],
    list(range(2, 62, 3)),  # 20 tokens: crosses several KV blocks
]


def make_checkpoint(binary, flags, out_dir):
    cmd = [binary, "--output_dir", out_dir]
    for key, value in flags.items():
        if isinstance(value, bool):
            if value:
                cmd.append("--" + key)
        else:
            cmd += ["--" + key, str(value)]
    subprocess.run(cmd, check=True)


def f32_list(t):
    return [float(x) for x in t.detach().to(torch.float32).cpu().tolist()]


def fingerprint(checkpoint_dir):
    """The first values of the embedding as stored in the file, so the C++ side can check that its
    regenerated checkpoint is byte-for-byte the one loaded here."""
    from safetensors import safe_open
    with safe_open(os.path.join(checkpoint_dir, "model.safetensors"), framework="pt") as f:
        for name in ("model.embed_tokens.weight", "transformer.wte.weight", "wte.weight"):
            if name in f.keys():
                return {"tensor": name, "first": f32_list(f.get_tensor(name).reshape(-1)[:8])}
    raise SystemExit(f"{checkpoint_dir}: no embedding tensor found")


@torch.no_grad()
def run_prompt(model, prompt, device):
    ids = torch.tensor([prompt], dtype=torch.long, device=device)
    logits = model(ids).logits[0].to(torch.float32)  # [n, vocab]
    last = logits[-1]

    # Reference greedy loop: full recompute, no cache, plain argmax.
    seq = list(prompt)
    min_gap = float("inf")
    for _ in range(NEW_TOKENS):
        step_logits = model(torch.tensor([seq], device=device)).logits[0, -1].to(torch.float32)
        top2 = torch.topk(step_logits, 2).values
        min_gap = min(min_gap, float(top2[0] - top2[1]))
        seq.append(int(torch.argmax(step_logits)))
    loop_tokens = seq[len(prompt):]

    gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, num_beams=1,
                         max_new_tokens=NEW_TOKENS)
    gen_tokens = [int(t) for t in gen[0, len(prompt):].tolist()]
    if gen_tokens != loop_tokens:
        raise SystemExit(f"generate() {gen_tokens} disagrees with the argmax loop {loop_tokens}")
    if min_gap < MIN_TOP2_GAP:
        raise SystemExit(f"prompt {prompt}: a greedy step has a top-2 gap of {min_gap:.2e} "
                         f"(< {MIN_TOP2_GAP}); pick another seed for this case")
    return {
        "prompt": prompt,
        "greedy": gen_tokens,
        "min_top2_gap": min_gap,
        "last_argmax": int(torch.argmax(last)),
        "last_logits": f32_list(last[:LAST_SLICE]),
        "prompt_logits": [f32_list(row[:PROMPT_SLICE]) for row in logits],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--make_checkpoint", required=True, help="path to the make_checkpoint binary")
    ap.add_argument("--out", required=True, help="folder for the <case>.json files")
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    ap.add_argument("--cases", nargs="*", default=sorted(CASES), help="subset of: " + ", ".join(CASES))
    args = ap.parse_args()

    # Exact fp32 everywhere: no TF32 on GPUs, no reduced-precision reductions.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)
    os.makedirs(args.out, exist_ok=True)

    for name in args.cases:
        flags = CASES[name]
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = os.path.join(tmp, "checkpoint")
            make_checkpoint(args.make_checkpoint, flags, ckpt)
            model, info = AutoModelForCausalLM.from_pretrained(
                ckpt, attn_implementation="eager", output_loading_info=True)
            # A weight transformers did not find would be randomly initialised: refuse that.
            missing = [k for k in info.get("missing_keys", [])
                       if not k.endswith(("attn.bias", "attn.masked_bias"))]
            if missing or info.get("unexpected_keys") or info.get("mismatched_keys"):
                raise SystemExit(f"{name}: checkpoint does not load cleanly: {info}")
            model = model.float().to(args.device).eval()
            model.generation_config.eos_token_id = None
            model.generation_config.pad_token_id = 0
            golden = {
                "format": "inflight-golden",
                "version": 1,
                "case": name,
                "checkpoint": flags,
                "weights_fingerprint": fingerprint(ckpt),
                "generated_by": {"transformers": transformers.__version__, "torch": torch.__version__,
                                 "device": args.device},
                "new_tokens": NEW_TOKENS,
                "prompts": [run_prompt(model, p, args.device) for p in PROMPTS],
            }
        path = os.path.join(args.out, name + ".json")
        with open(path, "w") as f:
            json.dump(golden, f, indent=1)
            f.write("\n")
        gaps = ", ".join(f"{p['min_top2_gap']:.3g}" for p in golden["prompts"])
        print(f"wrote {path} (min top-2 gaps: {gaps})", file=sys.stderr)


if __name__ == "__main__":
    main()
