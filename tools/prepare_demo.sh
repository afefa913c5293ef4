#!/usr/bin/env bash
# Makes a demo model repository: a random-weight GPT-2 checkpoint with GPT-2's real tokenizer, its engine,
# and the inflight_batcher_llm templates filled with fill_template.py as NVIDIA's README does.
#
#   tools/prepare_demo.sh <bin_dir> <tokenizer_dir> <work_dir> [extra tensorrt_llm substitutions]
#
# Extra substitutions ("k:v,k:v") are appended to the tensorrt_llm ones; fill_template.py lets the last
# value of a repeated key win, so they override. Result: <work_dir>/triton_model_repo.
# INFLIGHT_DEMO_DTYPE (float32 | float16 | bfloat16, default float32) is the checkpoint's and the engine's
# dtype; a GPU runs fp32 engines in bfloat16, so float16/bfloat16 give a GPU engine in its own precision.
# 4 heads of 256: head_dim 64, which the CUDA attention kernels take (64, 80, 96, 128; not 32).
set -euo pipefail
bin="$1" tokenizer="$2" work="$3" extra="${4:-}"
dtype="${INFLIGHT_DEMO_DTYPE:-float32}"
root="$(cd "$(dirname "$0")/.." && pwd)"

rm -rf "$work" && mkdir -p "$work"
"$bin/make_checkpoint" --arch gpt2 --hidden_size 256 --num_layers 4 --num_heads 4 \
  --intermediate_size 1024 --max_position_embeddings 1024 --dtype "$dtype" --seed 1 \
  --tokenizer_dir "$tokenizer" --output_dir "$work/gpt2-random"
"$bin/inflight-build" --checkpoint_dir "$work/gpt2-random" --output_dir "$work/engine" \
  --dtype "$dtype" --max_batch_size 64 --max_input_len 512 --max_seq_len 1024 --tokens_per_block 64

repo="$work/triton_model_repo"
mkdir -p "$repo"
for m in preprocessing tensorrt_llm postprocessing ensemble tensorrt_llm_bls; do
  cp -r "$root/all_models/inflight_batcher_llm/$m" "$repo/"
done
fill="python3 $root/tools/fill_template.py -i"
$fill "$repo/preprocessing/config.pbtxt" \
  "tokenizer_dir:$work/gpt2-random,triton_max_batch_size:64,preprocessing_instance_count:1"
$fill "$repo/postprocessing/config.pbtxt" \
  "tokenizer_dir:$work/gpt2-random,triton_max_batch_size:64,postprocessing_instance_count:1"
$fill "$repo/ensemble/config.pbtxt" "triton_max_batch_size:64,logits_datatype:TYPE_FP32"
$fill "$repo/tensorrt_llm_bls/config.pbtxt" \
  "triton_max_batch_size:64,decoupled_mode:True,bls_instance_count:1,accumulate_tokens:False,logits_datatype:TYPE_FP32"
subs="triton_backend:inflight,triton_max_batch_size:64,decoupled_mode:True,max_beam_width:1"
subs+=",engine_dir:$work/engine,max_tokens_in_paged_kv_cache:65536,kv_cache_free_gpu_mem_fraction:0.5"
subs+=",exclude_input_in_output:True,enable_kv_cache_reuse:True,batching_strategy:inflight_fused_batching"
subs+=",max_queue_delay_microseconds:0,enable_chunked_context:True,logits_datatype:TYPE_FP32"
subs+=",encoder_input_features_data_type:TYPE_FP16"
[ -n "$extra" ] && subs+=",$extra"
$fill "$repo/tensorrt_llm/config.pbtxt" "$subs"
echo "prepare_demo: model repository at $repo"
