#!/usr/bin/env python3
"""The side-by-side peer of inflight-bench-executor: Hugging Face transformers `generate` on the same
weights and GPU, bf16, greedy, at batch 1 and 64 for the executor's input/output shapes.

    bench/hf_peer.py --engine_dir ENGINE [--shapes 128/128,128/2048] [--batches 1,64] [--max_new_tokens 256]
    bench/hf_peer.py --checkpoint_dir CHECKPOINT ...

Weights: --checkpoint_dir is a Hugging Face folder (config.json + safetensors, e.g. what
make_checkpoint writes) loaded with from_pretrained; --engine_dir is an Inflight engine (tp_size 1,
Llama/Mistral/Qwen2) whose fused tensors are split back into the Hugging Face modules (qkv into
q/k/v_proj, gate_up into gate/up_proj: the builder only concatenates rows), so a benchmark round
needs no checkpoint beside the engine: the same bytes either way.

Each row (batch B, input I, output O; O is capped at --max_new_tokens) runs on random prompt ids
(no padding, all of length I):
  TTFT           the time of generate(max_new_tokens=1): prefill and the first token;
  output tok/s   B * O / the time of generate(max_new_tokens=O, min_new_tokens=O), so EOS never ends a
                 row early (the outputs are checked to have O new tokens);
  TPOT           (that time - TTFT) / (O - 1): one decode step of the whole batch;
  peak GPU       torch.cuda.max_memory_allocated over the row (weights included).
Rows print as they finish; a row that would start after --time_budget_s is skipped and listed, so a
round with a deadline keeps what is done. Out-of-memory is reported as the row's result.

Needs torch and transformers (the device has them); without them it exits 2 with a message naming
what is missing. Parsing, planning and formatting need neither (tests/unit/bench_scripts).
"""
import argparse
import json
import math
import os
import re
import sys
import tempfile
import time

DEFAULT_SHAPES = "128/128,128/2048,2048/128,2048/2048"
# Engine architecture name -> Hugging Face model_type (the ones whose engine layout splits back).
ENGINE_MODEL_TYPES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2"}


class MissingDependency(Exception):
    pass


# ----------------------------------------------------------------------------------------------------
# Arguments and the plan


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        match = re.fullmatch(r"\s*(\d+)/(\d+)\s*", item)
        if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
            raise argparse.ArgumentTypeError(
                f"shape \"{item}\" is not <input_len>/<output_len> with both >= 1 (e.g. 128/2048)")
        shapes.append((int(match.group(1)), int(match.group(2))))
    return shapes


def parse_batches(text):
    try:
        batches = [int(v) for v in text.split(",")]
    except ValueError:
        batches = []
    if not batches or min(batches) < 1:
        raise argparse.ArgumentTypeError(f"\"{text}\" is not a comma-separated list of batch sizes >= 1")
    return batches


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--engine_dir", help="Inflight engine (tp_size 1) to split back into HF modules")
    source.add_argument("--checkpoint_dir", help="Hugging Face checkpoint folder for from_pretrained")
    parser.add_argument("--shapes", type=parse_shapes, default=parse_shapes(DEFAULT_SHAPES),
                        help=f"input/output lengths (default {DEFAULT_SHAPES})")
    parser.add_argument("--batches", type=parse_batches, default=[1, 64], help="batch sizes (default 1,64)")
    parser.add_argument("--max_new_tokens", type=int, default=None,
                        help="cap on the output length of every row, to keep a round short (default: none)")
    parser.add_argument("--time_budget_s", type=float, default=None,
                        help="start no row after this many seconds from the start (default: no limit)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"], help="default bfloat16")
    parser.add_argument("--attn_implementation", default="sdpa", choices=["sdpa", "eager", "flash_attention_2"],
                        help="transformers attention (default sdpa)")
    parser.add_argument("--device", default="cuda", help="torch device (default cuda)")
    parser.add_argument("--seed", type=int, default=0, help="prompt ids seed (default 0)")
    parser.add_argument("--out", default=None, help="also write the markdown here")
    args = parser.parse_args(argv)
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        parser.error(f"--max_new_tokens {args.max_new_tokens} is not accepted: it must be >= 1")
    if args.time_budget_s is not None and args.time_budget_s <= 0:
        parser.error(f"--time_budget_s {args.time_budget_s} is not accepted: it must be > 0")
    return args


def plan_rows(shapes, batches, max_new_tokens=None):
    """(batch, input_len, output_len asked, output_len run) in the order they run: shape by shape as
    given, each at every batch size, so a deadline cuts the long shapes at the end."""
    rows = []
    for in_len, out_len in shapes:
        run = min(out_len, max_new_tokens) if max_new_tokens else out_len
        rows += [(b, in_len, out_len, run) for b in batches]
    return rows


# ----------------------------------------------------------------------------------------------------
# Output


HEADER = ["batch", "in/out", "new tokens", "output tok/s", "TPOT ms", "TTFT ms", "peak GPU GiB", "wall s"]


def format_cells(cells):
    return "| " + " | ".join(cells) + " |"


def format_header():
    return [format_cells(HEADER), "|" + "|".join("---:" for _ in HEADER) + "|"]


def format_number(value, digits):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:,.{digits}f}"


def format_row(result):
    """One table line from a row result: {batch, in_len, out_len, run_len, tok_s, tpot_ms, ttft_ms,
    peak_gib, wall_s} or, for a row that failed, {batch, in_len, out_len, run_len, error}."""
    new_tokens = str(result["run_len"]) + ("" if result["run_len"] == result["out_len"] else
                                           f" (cap; asked {result['out_len']})")
    head = [str(result["batch"]), f"{result['in_len']}/{result['out_len']}", new_tokens]
    if result.get("error"):
        return format_cells(head + [result["error"]] + ["-"] * (len(HEADER) - 4))
    return format_cells(head + [format_number(result["tok_s"], 1), format_number(result["tpot_ms"], 3),
                                format_number(result["ttft_ms"], 2), format_number(result["peak_gib"], 2),
                                format_number(result["wall_s"], 2)])


def derive(batch, run_len, ttft_s, total_s):
    """(output tok/s, TPOT ms, TTFT ms) from the two generate timings."""
    tok_s = batch * run_len / total_s if total_s > 0 else float("nan")
    tpot_ms = (total_s - ttft_s) / (run_len - 1) * 1e3 if run_len > 1 else float("nan")
    return tok_s, tpot_ms, ttft_s * 1e3


# ----------------------------------------------------------------------------------------------------
# Engine -> Hugging Face (no torch needed to plan it)


def engine_rope(engine):
    """The engine's rope as version 2 spells it ({"type", "theta", ...}), from either version: version 1
    had rope_theta and a llama3-only rope_scaling."""
    if "rope" in engine:
        return engine["rope"]
    rope = {"type": "default", "theta": engine["rope_theta"], "attention_factor": 1.0}
    scaling = engine.get("rope_scaling")
    if scaling:
        rope.update({k: v for k, v in scaling.items() if k != "type"}, type=scaling["type"])
    return rope


def hf_rope_scaling(rope):
    """The 4.x rope_scaling object (None for plain RoPE) that makes transformers compute the engine's rope."""
    if rope["type"] == "default":
        return None
    keys = {"linear": ["factor"], "dynamic": ["factor"],
            "llama3": ["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"],
            "yarn": ["factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
                     "mscale_all_dim", "truncate", "attention_factor"]}[rope["type"]]
    scaling = {"rope_type": rope["type"]}
    scaling.update({k: rope[k] for k in keys if rope.get(k) is not None})
    return scaling


def hf_config_from_engine(engine):
    """A Hugging Face config.json dict for an engine's config.json (docs/engine_format.md)."""
    arch = engine["architecture"]
    if arch not in ENGINE_MODEL_TYPES:
        raise ValueError(f"engine architecture {arch} does not split back into a Hugging Face model here; "
                         f"supported: {', '.join(ENGINE_MODEL_TYPES)} (use --checkpoint_dir)")
    tp = engine.get("parallel", {}).get("tp_size", 1)
    if tp != 1:
        raise ValueError(f"engine has tp_size {tp}; only tp_size 1 engines hold every weight in rank0.safetensors")
    model_type = ENGINE_MODEL_TYPES[arch]
    hf = {
        "architectures": [arch], "model_type": model_type, "hidden_act": "silu",
        "hidden_size": engine["hidden_size"], "intermediate_size": engine["intermediate_size"],
        "num_hidden_layers": engine["num_layers"], "num_attention_heads": engine["num_attention_heads"],
        "num_key_value_heads": engine["num_kv_heads"], "head_dim": engine["head_dim"],
        "vocab_size": engine["vocab_size"], "max_position_embeddings": engine["max_position_embeddings"],
        "rope_theta": engine_rope(engine)["theta"], "rms_norm_eps": engine["norm_eps"],
        "tie_word_embeddings": engine["tie_word_embeddings"], "torch_dtype": engine["dtype"],
        "bos_token_id": engine.get("bos_token_id"), "eos_token_id": engine.get("eos_token_id"),
        "attention_dropout": 0.0, "use_cache": True,
    }
    hf["rope_scaling"] = hf_rope_scaling(engine_rope(engine))
    if model_type == "llama":
        hf["attention_bias"] = engine.get("qkv_bias", False) or engine.get("attn_out_bias", False)
        hf["mlp_bias"] = engine.get("mlp_bias", False)
    if model_type == "mistral":
        hf["sliding_window"] = None
    if model_type == "qwen2":
        hf["use_sliding_window"] = False
    return hf


def engine_to_hf_names(engine):
    """[(engine tensor, Hugging Face tensor, first row, rows)]: every HF tensor is a block of rows of
    one engine tensor (docs/engine_format.md: qkv rows are q heads, k heads, v heads; gate_up rows are
    gate, up)."""
    hd, nq, nkv = engine["head_dim"], engine["num_attention_heads"], engine["num_kv_heads"]
    inter = engine["intermediate_size"]
    q_rows, kv_rows = nq * hd, nkv * hd
    out = [("embed.weight", "model.embed_tokens.weight", 0, engine["vocab_size"])]
    for i in range(engine["num_layers"]):
        e, h = f"layers.{i}.", f"model.layers.{i}."
        out.append((e + "attn_norm.weight", h + "input_layernorm.weight", 0, engine["hidden_size"]))
        suffixes = ["weight", "bias"] if engine.get("qkv_bias") else ["weight"]
        for suffix in suffixes:
            out += [(e + "qkv." + suffix, h + "self_attn.q_proj." + suffix, 0, q_rows),
                    (e + "qkv." + suffix, h + "self_attn.k_proj." + suffix, q_rows, kv_rows),
                    (e + "qkv." + suffix, h + "self_attn.v_proj." + suffix, q_rows + kv_rows, kv_rows)]
        out.append((e + "attn_out.weight", h + "self_attn.o_proj.weight", 0, engine["hidden_size"]))
        out.append((e + "mlp_norm.weight", h + "post_attention_layernorm.weight", 0, engine["hidden_size"]))
        out += [(e + "gate_up.weight", h + "mlp.gate_proj.weight", 0, inter),
                (e + "gate_up.weight", h + "mlp.up_proj.weight", inter, inter),
                (e + "down.weight", h + "mlp.down_proj.weight", 0, engine["hidden_size"])]
    out.append(("final_norm.weight", "model.norm.weight", 0, engine["hidden_size"]))
    if not engine["tie_word_embeddings"]:
        out.append(("lm_head.weight", "lm_head.weight", 0, engine["vocab_size"]))
    return out


# ----------------------------------------------------------------------------------------------------
# torch side


def import_backends():
    """(torch, transformers) or MissingDependency naming what is missing."""
    missing = []
    try:
        import torch  # noqa: PLC0415  (imported late: parsing and the unit test need no torch)
    except ImportError as e:
        missing.append(f"torch ({e})")
        torch = None
    try:
        import transformers  # noqa: PLC0415
    except ImportError as e:
        missing.append(f"transformers ({e})")
        transformers = None
    if missing:
        raise MissingDependency(
            "hf_peer.py needs torch and transformers, which this python (" + sys.executable + ") cannot "
            "import: " + "; ".join(missing) + ". They are installed on the device machine; elsewhere: "
            "pip install torch transformers safetensors")
    return torch, transformers


def load_from_engine(torch, transformers, engine_dir, dtype, device, attn):
    from safetensors import safe_open  # noqa: PLC0415  (a transformers dependency)
    with open(os.path.join(engine_dir, "config.json"), encoding="utf-8") as f:
        engine = json.load(f)
    # Through a config.json file, as from_pretrained reads a checkpoint's: the path every
    # transformers version keeps working for older keys (rope_theta, rope_scaling).
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(hf_config_from_engine(engine), f)
        config = transformers.AutoConfig.from_pretrained(folder)
    with torch.device(device):  # built (and randomly initialised) on the GPU, then overwritten
        model = with_dtype(transformers.AutoModelForCausalLM.from_config, config, dtype=dtype,
                           attn_implementation=attn)
    params = dict(model.named_parameters())
    by_engine = {}
    for engine_name, hf_name, first, rows in engine_to_hf_names(engine):
        by_engine.setdefault(engine_name, []).append((hf_name, first, rows))
    filled = set()
    with torch.no_grad(), safe_open(os.path.join(engine_dir, "rank0.safetensors"), framework="pt") as f:
        for engine_name, targets in by_engine.items():
            tensor = f.get_tensor(engine_name).to(device)
            for hf_name, first, rows in targets:
                params[hf_name].copy_(tensor.narrow(0, first, rows))
                filled.add(hf_name)
            del tensor
    unfilled = sorted(set(params) - filled - ({"lm_head.weight"} if engine["tie_word_embeddings"] else set()))
    if unfilled:
        raise ValueError(f"engine {engine_dir} left {len(unfilled)} parameters unset, e.g. {unfilled[:3]}")
    return model, f"engine {engine_dir} ({engine['architecture']}, {engine['dtype']}, split back into HF modules)"


def with_dtype(function, *args, dtype, **kwargs):
    """transformers 5 takes dtype=, 4.x torch_dtype= (and rejects dtype= in model constructors)."""
    try:
        return function(*args, dtype=dtype, **kwargs)
    except TypeError:
        return function(*args, torch_dtype=dtype, **kwargs)


def load_from_checkpoint(torch, transformers, checkpoint_dir, dtype, device, attn):
    load = transformers.AutoModelForCausalLM.from_pretrained
    try:
        model = with_dtype(load, checkpoint_dir, dtype=dtype, attn_implementation=attn, device_map=str(device))
    except (ImportError, ValueError):  # device_map needs accelerate
        model = with_dtype(load, checkpoint_dir, dtype=dtype, attn_implementation=attn).to(device)
    return model, f"checkpoint {checkpoint_dir} (from_pretrained)"


class Device:
    """What timing needs of the device: a CUDA device synchronises and counts peak memory; another
    (a CPU, to try the script without a GPU) does neither."""

    def __init__(self, torch, name):
        self.torch = torch
        self.device = torch.device(name)
        self.cuda = self.device.type == "cuda"

    def name(self):
        return self.torch.cuda.get_device_name(self.device) if self.cuda else f"{self.device} (no GPU)"

    def synchronize(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def reset_peak(self):
        if self.cuda:
            self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats(self.device)

    def peak_gib(self):
        return self.torch.cuda.max_memory_allocated(self.device) / 2**30 if self.cuda else None


def run_row(torch, device, model, batch, in_len, out_len, run_len, generator):
    vocab = model.config.vocab_size
    ids = torch.randint(1, vocab, (batch, in_len), generator=generator).to(device.device)
    common = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "do_sample": False, "num_beams": 1,
              "use_cache": True}

    def timed(new_tokens):
        device.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(max_new_tokens=new_tokens, min_new_tokens=new_tokens, **common)
        device.synchronize()
        return time.perf_counter() - start, out

    device.reset_peak()
    started = time.perf_counter()
    timed(1)  # warm-up: kernels and allocations of this shape
    ttft_s, _ = timed(1)
    total_s, out = timed(run_len)
    generated = out.shape[1] - in_len
    if generated != run_len:
        raise RuntimeError(f"generated {generated} new tokens, asked {run_len}")
    tok_s, tpot_ms, ttft_ms = derive(batch, run_len, ttft_s, total_s)
    return {"batch": batch, "in_len": in_len, "out_len": out_len, "run_len": run_len, "tok_s": tok_s,
            "tpot_ms": tpot_ms, "ttft_ms": ttft_ms, "peak_gib": device.peak_gib(),
            "wall_s": time.perf_counter() - started}


def emit(lines, sink):
    for line in lines:
        print(line, flush=True)
        if sink:
            sink.write(line + "\n")
            sink.flush()


def main(argv=None):
    args = parse_arguments(argv)
    try:
        torch, transformers = import_backends()
    except MissingDependency as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    sink = open(args.out, "w", encoding="utf-8") if args.out else None
    dtype = getattr(torch, args.dtype)
    device = Device(torch, args.device)
    load_start = time.perf_counter()
    if args.engine_dir:
        model, source = load_from_engine(torch, transformers, args.engine_dir, dtype, args.device,
                                         args.attn_implementation)
    else:
        model, source = load_from_checkpoint(torch, transformers, args.checkpoint_dir, dtype, args.device,
                                             args.attn_implementation)
    model.eval()
    # No EOS: every row generates exactly the asked tokens (min_new_tokens says so too; the lengths
    # are checked). Prompts are unpadded, so the pad id only silences a warning.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    device.synchronize()
    load_s = time.perf_counter() - load_start
    generator = torch.Generator().manual_seed(args.seed)
    cuda = getattr(torch.version, "cuda", None)
    emit(["## Hugging Face transformers peer", "",
          f"Device: {device.name()}; torch {torch.__version__}"
          f"{' (CUDA ' + cuda + ')' if cuda else ''}; transformers {transformers.__version__}; {args.dtype}, "
          f"attention {args.attn_implementation}, greedy, min_new_tokens = max_new_tokens (EOS ignored).",
          f"Weights: {source}, loaded in {load_s:.1f} s.", ""] + format_header(), sink)
    rows = plan_rows(args.shapes, args.batches, args.max_new_tokens)
    skipped = []
    for batch, in_len, out_len, run_len in rows:
        if args.time_budget_s is not None and time.monotonic() - t0 > args.time_budget_s:
            skipped.append(f"{batch} x {in_len}/{out_len}")
            continue
        try:
            result = run_row(torch, device, model, batch, in_len, out_len, run_len, generator)
        except torch.cuda.OutOfMemoryError:
            result = {"batch": batch, "in_len": in_len, "out_len": out_len, "run_len": run_len,
                      "error": "out of GPU memory"}
            torch.cuda.empty_cache()
        except RuntimeError as e:
            result = {"batch": batch, "in_len": in_len, "out_len": out_len, "run_len": run_len,
                      "error": str(e).splitlines()[0][:120]}
        emit([format_row(result)], sink)
    notes = ["", "TTFT: generate(max_new_tokens=1), after one untimed call of the same shape. Output tok/s: "
             "batch x new tokens / generate time. TPOT: (generate time - TTFT) / (new tokens - 1). Peak GPU: "
             "torch.cuda.max_memory_allocated over the row, weights included."]
    if skipped:
        notes.append(f"Skipped at the {args.time_budget_s:g} s budget: {', '.join(skipped)}.")
    emit(notes, sink)
    if sink:
        sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
