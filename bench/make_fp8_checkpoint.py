#!/usr/bin/env python3
"""A Llama-3.1-8B-shaped FP8 checkpoint in NVIDIA ModelOpt's layout, for the benchmarks.

TensorRT-LLM's published FP8 rows run checkpoints ModelOpt quantized: E4M3 weights with one scale per
tensor and one static input scale per linear, calibrated on prompts (hf_quant_config.json, quant_algo
FP8). This writes such a checkpoint from seeded random weights (transformers' own initialisation of
LlamaForCausalLM in bfloat16 on the GPU) so that inflight-build reads what a downloaded one holds:
  - <linear>.weight F8_E4M3, <linear>.weight_scale float32 scalar (amax / 448 of the weight),
    <linear>.input_scale float32 scalar (amax / 448 of the linear's input over the calibration prompts);
  - q/k/v and gate/up keep a scale each, as ModelOpt writes them (the engine's fused linears then hold
    one scale a channel unless the parts agree);
  - embeddings, norms and lm_head in bfloat16 (lm_head excluded, as ModelOpt's default).
Calibration: --calib_prompts random prompts of --calib_len tokens through the bfloat16 model.

  python3 bench/make_fp8_checkpoint.py --out /dev/shm/ckpt [--layers 32] [--seed 0]
"""
import argparse
import json
import os
import time

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

FP8_MAX = 448.0
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# Llama-3.1-8B's config.json (meta-llama/Llama-3.1-8B), the shape fields.
LLAMA_31_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                   num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                   rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
                   rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                   bos_token_id=128000, eos_token_id=128001)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="checkpoint folder to write")
    p.add_argument("--layers", type=int, default=32, help="decoder layers (32: the 8B)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--calib_prompts", type=int, default=8)
    p.add_argument("--calib_len", type=int, default=128)
    p.add_argument("--shard_gb", type=float, default=4.0, help="safetensors shard size")
    return p.parse_args()


def decoder_linears(model):
    for name, module in model.named_modules():
        if name.split(".")[-1] in LINEARS:
            yield name, module


@torch.no_grad()
def calibrate(model, prompts, length, seed):
    """amax of each decoder linear's input over the prompts."""
    amax, hooks = {}, []
    for name, module in decoder_linears(model):
        def record(m, args, name=name):
            a = args[0].float().abs().max().item()
            amax[name] = max(amax.get(name, 0.0), a)
        hooks.append(module.register_forward_pre_hook(record))
    g = torch.Generator(device="cuda").manual_seed(seed + 1)
    for _ in range(prompts):
        ids = torch.randint(0, model.config.vocab_size, (1, length), device="cuda", generator=g)
        model(ids, use_cache=False)
    for h in hooks:
        h.remove()
    return amax


@torch.no_grad()
def main():
    args = parse_args()
    t0 = time.time()
    torch.manual_seed(args.seed)
    config = LlamaConfig(**dict(LLAMA_31_8B, num_hidden_layers=args.layers))
    config.torch_dtype = torch.bfloat16
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).eval()
    input_amax = calibrate(model, args.calib_prompts, args.calib_len, args.seed)
    print(f"model made and calibrated in {time.time() - t0:.1f} s", flush=True)

    os.makedirs(args.out, exist_ok=True)
    shards, shard, shard_bytes, weight_map = [], {}, 0, {}

    def add(name, t):
        nonlocal shard, shard_bytes
        shard[name] = t.contiguous().cpu()
        shard_bytes += t.numel() * t.element_size()
        if shard_bytes >= args.shard_gb * 1e9:
            shards.append(shard)
            shard, shard_bytes = {}, 0

    linears = dict(decoder_linears(model))
    for name, p in model.state_dict().items():
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        if module not in linears:
            add(name, p.to(torch.bfloat16))
            continue
        w = p.float()
        scale = (w.abs().max() / FP8_MAX).clamp(min=1e-12)
        add(name, (w / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn))
        add(module + ".weight_scale", scale.reshape([]))
        add(module + ".input_scale", torch.tensor(max(input_amax[module], 1e-12) / FP8_MAX,
                                                  dtype=torch.float32))
    if shard:
        shards.append(shard)
    for i, tensors in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, os.path.join(args.out, file), metadata={"format": "pt"})
        weight_map.update({k: file for k in tensors})
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)
    config.architectures = ["LlamaForCausalLM"]
    config.save_pretrained(args.out)
    with open(os.path.join(args.out, "hf_quant_config.json"), "w") as f:
        json.dump({"producer": {"name": "modelopt", "version": "0.29.0"},
                   "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None,
                                    "exclude_modules": ["lm_head"]}}, f, indent=2)
    print(f"{len(weight_map)} tensors in {len(shards)} shards written to {args.out} "
          f"in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
