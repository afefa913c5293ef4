#!/usr/bin/env python3
"""A Hugging Face folder as engine_dir on the GPU (issue 22's last item), for a device round.

transformers writes a small Llama-3-style checkpoint (save_pretrained, bf16, llama3 rope scaling, head dim
128); a tensorrt_llm model filled from the template names that folder as engine_dir with device auto; the
carried inflight-server converts it at load and serves it on the CUDA runner. Its greedy tokens for a few
prompts are compared with transformers' own greedy generate in float32 on the same weights, up to the first
step whose float32 top-2 gap is a near-tie (the parity criterion's rule, 2 x 0.05 x max|logit| here since
the bf16 logits are not read back). Prints a markdown table; exit 1 when a prompt parts before a near-tie.

    python3 tests/gpu/hf_folder_check.py --package .device --work /tmp/hf-folder
"""
import argparse
import json
import os
import sys

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROMPTS = [[1, 17, 300, 42, 42, 5, 260, 99], [7], list(range(2, 62, 3))]
NEW_TOKENS = 24


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--package", required=True, help="the folder package_for_device.sh filled")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    os.environ.setdefault("INFLIGHT_SOURCE_DIR", ROOT)
    os.environ["INFLIGHT_SERVER"] = os.path.join(a.package, "bin", "inflight-server")
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    import inflight_client as ic

    torch.manual_seed(5)
    config = transformers.LlamaConfig(
        vocab_size=512, hidden_size=512, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 32})  # transformers 5
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.06)
    folder = os.path.join(a.work, "hf-llama")
    model.to(torch.bfloat16).save_pretrained(folder)
    judge = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).cuda().eval()

    repo = os.path.join(a.work, "repo")
    subs = ("triton_backend:inflight,triton_max_batch_size:8,decoupled_mode:False,max_beam_width:1,"
            f"engine_dir:{folder},max_tokens_in_paged_kv_cache:4096,kv_cache_free_gpu_mem_fraction:0.2,"
            "exclude_input_in_output:True,enable_kv_cache_reuse:False,batching_strategy:inflight_fused_batching,"
            "max_queue_delay_microseconds:0,encoder_input_features_data_type:TYPE_FP16,"
            "logits_datatype:TYPE_FP32")
    if not os.path.exists(repo):
        os.makedirs(repo)
        ic.make_llm_model(repo, "tensorrt_llm", subs)
    server = ic.InflightServer(model_repository=repo, backend_directory=os.path.join(a.package, "backends"),
                               startup_timeout=120)
    server.start()
    failed = False
    rows = []
    try:
        cuda = "CUDA runner" in server.log() or "cuda model runner" in server.log()
        for prompt in PROMPTS:
            status, out = ic.post_json(server.http_port, "/v2/models/tensorrt_llm/generate",
                                       {"input_ids": [prompt], "input_lengths": [len(prompt)],
                                        "request_output_len": [NEW_TOKENS]}, timeout=60)
            if status != 200:
                raise SystemExit(f"generate: {status} {out}")
            ours = out["output_ids"]
            while isinstance(ours, list) and ours and isinstance(ours[0], list):
                ours = ours[0]
            ids = torch.tensor([prompt], device="cuda")
            with torch.no_grad():
                ref = judge.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False, output_scores=True,
                                     return_dict_in_generate=True, pad_token_id=0)
            theirs = ref.sequences[0, len(prompt):].tolist()
            tie = NEW_TOKENS
            for step, scores in enumerate(ref.scores):
                top2 = torch.topk(scores[0].float(), 2).values
                if (top2[0] - top2[1]).item() <= 2 * 0.05 * scores[0].abs().max().item():
                    tie = step
                    break
            equal = 0
            while equal < min(len(ours), len(theirs)) and ours[equal] == theirs[equal]:
                equal += 1
            ok = equal >= min(tie, NEW_TOKENS)
            failed |= not ok
            rows.append(f"| {len(prompt)} | {equal}/{NEW_TOKENS} | {tie} | {'pass' if ok else 'FAIL'} |")
    finally:
        server.stop()
    print(f"HF folder as engine_dir (transformers {transformers.__version__} save_pretrained, bf16 Llama, "
          f"llama3 rope); served by the CUDA runner: {'yes' if cuda else 'NO'}\n")
    print("| prompt length | greedy tokens equal HF float32's | first near-tie step | result |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    return 1 if failed or not cuda else 0


if __name__ == "__main__":
    sys.exit(main())
