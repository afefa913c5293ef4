// The CUDA runner against the CPU runner on the same random-weight engines (bf16 and fp16 weights):
// a prompt step, then decode steps, with logits compared relative to their scale; also with sliding
// windows (the checkpoint's, and the runtime's limits with sinks) and Qwen3's q/k norm. Built only
// in the main build (it needs the engine loader); skipped without a device.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "gpu_test_util.h"
#include "model/checkpoint_converter.h"
#include "model/cuda_model_runner.h"
#include "model/random_checkpoint.h"

namespace inflight::gpu_test {
namespace {

// Which keys a case's layers attend: the checkpoint's sliding_window (mistral: every layer; qwen2 /
// qwen3: layers >= max_window_layers) and the runtime's limits.
struct AttentionCase {
  std::optional<std::int64_t> sliding_window;
  std::optional<std::int64_t> max_window_layers;
  model::AttentionLimits limits;
  std::string Describe() const {
    std::string d;
    if (sliding_window) d += " sliding_window=" + std::to_string(*sliding_window);
    if (!limits.max_attention_window.empty()) {
      d += " max_attention_window=" + std::to_string(limits.max_attention_window[0]) +
           ",... sink=" + std::to_string(limits.sink_token_length);
    }
    return d;
  }
};

// max_position_embeddings 2048 unless given; fewer (dynamic RoPE, whose theta grows past them)
// build max_seq_len 128.
std::string MakeEngine(const std::string& arch, DType dtype, std::int64_t head_dim,
                       std::int64_t intermediate = 300, std::int64_t max_num_tokens = 512,
                       const model::RopeConfig& rope = {}, std::int64_t positions = 2048,
                       const AttentionCase& attention = {}, bool kv_fp8 = false) {
  const auto root =
      std::filesystem::temp_directory_path() /
      ("inflight_gpu_runner_" + arch + "_" + DTypeName(dtype) + "_" + std::to_string(head_dim) +
       "_" + std::to_string(intermediate) + "_" + model::RopeTypeName(rope.type) + "_w" +
       std::to_string(attention.sliding_window.value_or(0)) + (kv_fp8 ? "_kvfp8_" : "_") +
       std::to_string(Seed()));
  model::RandomCheckpointOptions ck;
  ck.arch = arch;
  ck.hidden_size = 4 * head_dim;
  ck.num_heads = 4;
  ck.num_kv_heads = arch == "gpt2" ? 4 : 2;
  if (arch != "gpt2") ck.head_dim = head_dim;  // gpt2: hidden / heads
  ck.intermediate_size = intermediate;
  ck.vocab_size = 1111;
  ck.dtype = dtype;
  ck.seed = Seed();
  ck.init_std = 0.05;
  if (arch != "gpt2") ck.rope = rope;
  ck.max_position_embeddings = positions;
  ck.sliding_window = attention.sliding_window;
  ck.max_window_layers = attention.max_window_layers;
  auto written = model::WriteRandomCheckpoint(ck, (root / "hf").string());
  GPU_CHECK(written.ok(), written.status().ToString());
  model::BuildOptions b;
  b.checkpoint_dir = (root / "hf").string();
  b.output_dir = (root / "engine").string();
  b.dtype = dtype;
  b.max_batch_size = 8;
  b.max_num_tokens = max_num_tokens;
  b.tokens_per_block = 16;
  b.kv_cache_fp8 = kv_fp8;  // --kv_cache_dtype fp8
  if (positions < 128) {    // sequences run past the positions (dynamic RoPE)
    b.max_seq_len = 128;
    b.max_input_len = 64;
  }
  auto built = model::BuildEngine(b);
  GPU_CHECK(built.ok(), built.status().ToString());
  return b.output_dir;
}

void CompareRunners(const std::string& arch, DType dtype, std::int64_t head_dim,
                    const model::RopeConfig& rope = {}, std::int64_t positions = 2048,
                    const AttentionCase& attention = {}, bool kv_fp8 = false) {
  const std::string name =
      "runner " + arch + " " + Describe(dtype) + " hd=" + std::to_string(head_dim) + " rope " +
      model::RopeTypeName(rope.type) + attention.Describe() + (kv_fp8 ? " kv_cache fp8" : "");
  const std::string engine =
      MakeEngine(arch, dtype, head_dim, 300, 512, rope, positions, attention, kv_fp8);
  model::RunnerOptions cpu_opts;
  cpu_opts.max_kv_tokens = std::int64_t{64} * 16;
  cpu_opts.attention_limits = attention.limits;
  auto cpu = model::CreateCpuModelRunner(engine, cpu_opts);
  GPU_CHECK(cpu.ok(), cpu.status().ToString());
  model::CudaRunnerOptions gpu_opts;
  gpu_opts.max_kv_tokens = std::int64_t{64} * 16;
  gpu_opts.attention_limits = attention.limits;
  auto gpu = model::CreateCudaModelRunner(engine, gpu_opts);
  GPU_CHECK(gpu.ok(), gpu.status().ToString());

  // Two sequences with shuffled blocks: a 37-token prompt (all logits) and a 5-token prompt; two
  // more join in round 2.
  std::vector<std::int32_t> blocks(64);
  for (int i = 0; i < 64; ++i) blocks[static_cast<std::size_t>(i)] = i;
  std::shuffle(blocks.begin(), blocks.end(), Rng());
  model::StepInput step;
  std::uniform_int_distribution<int> tok(0, 1110);
  // A new sequence with a `len`-token prompt and the next 8 of the shuffled blocks.
  const auto add_prompt = [&](int len, model::SequenceStep::Logits logits) {
    model::SequenceStep s;
    for (int i = 0; i < len; ++i) s.tokens.push_back(tok(Rng()));
    const std::size_t first = step.sequences.size() * 8;
    s.block_table.assign(blocks.begin() + static_cast<std::ptrdiff_t>(first),
                         blocks.begin() + static_cast<std::ptrdiff_t>(first + 8));
    s.logits = logits;
    step.sequences.push_back(s);
  };
  add_prompt(37, model::SequenceStep::Logits::kAll);
  add_prompt(5, model::SequenceStep::Logits::kLast);
  for (int round = 0; round < 4; ++round) {
    auto want = (*cpu)->Step(step);
    auto got = (*gpu)->Step(step);
    GPU_CHECK(want.ok(), want.status().ToString());
    GPU_CHECK(got.ok(), got.status().ToString());
    GPU_CHECK(got->row_begin == want->row_begin, name + ": row_begin differs");
    float scale = 0.0f;
    for (float x : want->logits) scale = std::max(scale, std::fabs(x));
    // Activations are rounded to dtype at every op on the device, kept fp32 on the CPU.
    if (kv_fp8) {
      // The device codes bf16/fp16-rounded k and v in E4M3, the CPU fp32 ones: a value near a
      // rounding boundary takes the neighbouring code (on the H200 of 2026-11-29: up to 11 of
      // 4444 logits past 5% of max|logit|, the worst at 5.9%).
      ExpectCloseThroughFp8(name + " step " + std::to_string(round), got->logits, want->logits,
                            0.05f * scale, 0.10f * scale, 0.01);
    } else {
      ExpectClose(name + " step " + std::to_string(round), got->logits, want->logits, 0.05f * scale,
                  0.0f);
    }
    // Next: one decode token per sequence.
    for (auto& s : step.sequences) {
      s.num_cached += static_cast<std::int32_t>(s.tokens.size());
      s.tokens = {tok(Rng())};
      s.logits = model::SequenceStep::Logits::kLast;
    }
    if (round == 1) {
      // A mixed step: the decodes (decode kernel), a 19-token prompt and a 1-token prompt behind
      // it (context kernel).
      add_prompt(19, model::SequenceStep::Logits::kLast);
      add_prompt(1, model::SequenceStep::Logits::kLast);
    }
  }
}

// A prompt long enough for the fused gate/up + SwiGLU kernel (kernels/cuda/gemm_swiglu.h: 1024+
// rows, intermediate a multiple of 128; where the device has no sm_90a code the runner takes the
// separate path and this repeats the check), then two decode steps (the separate path).
void CompareRunnersLongPrompt(DType dtype) {
  const std::string name = "runner llama long prompt " + Describe(dtype);
  constexpr int kPrompt = 1100, kBlocks = 72;
  constexpr std::int64_t kTokensPerBlock = 16;
  const std::string engine = MakeEngine("llama", dtype, 64, 256, 2048);
  model::RunnerOptions cpu_opts;
  cpu_opts.max_kv_tokens = kBlocks * kTokensPerBlock;
  auto cpu = model::CreateCpuModelRunner(engine, cpu_opts);
  GPU_CHECK(cpu.ok(), cpu.status().ToString());
  model::CudaRunnerOptions gpu_opts;
  gpu_opts.max_kv_tokens = kBlocks * kTokensPerBlock;
  auto gpu = model::CreateCudaModelRunner(engine, gpu_opts);
  GPU_CHECK(gpu.ok(), gpu.status().ToString());
  std::uniform_int_distribution<int> tok(0, 1110);
  model::SequenceStep s;
  for (int i = 0; i < kPrompt; ++i) s.tokens.push_back(tok(Rng()));
  for (int i = 0; i < kBlocks; ++i) s.block_table.push_back(kBlocks - 1 - i);
  s.logits = model::SequenceStep::Logits::kLast;
  model::StepInput step;
  step.sequences.push_back(s);
  for (int round = 0; round < 3; ++round) {
    auto want = (*cpu)->Step(step);
    auto got = (*gpu)->Step(step);
    GPU_CHECK(want.ok(), want.status().ToString());
    GPU_CHECK(got.ok(), got.status().ToString());
    float scale = 0.0f;
    for (float x : want->logits) scale = std::max(scale, std::fabs(x));
    ExpectClose(name + " step " + std::to_string(round), got->logits, want->logits, 0.05f * scale,
                0.0f);
    auto& seq = step.sequences[0];
    seq.num_cached += static_cast<std::int32_t>(seq.tokens.size());
    seq.tokens = {tok(Rng())};
  }
}

GPU_TEST(CudaRunnerMatchesCpuRunner) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    CompareRunners("llama", dtype, 64);
    CompareRunners("gpt2", dtype, 64);
    CompareRunners("qwen2", dtype, 128);
  }
  // The mixed step's two attentions side by side on disjoint SMs (green contexts; where the driver
  // has none the runner runs them in turn and this repeats the check above).
  setenv("INFLIGHT_ATTENTION_SM_SPLIT", "force", 1);
  CompareRunners("llama", DType::kBFloat16, 128);
  unsetenv("INFLIGHT_ATTENTION_SM_SPLIT");
}

// Every RoPE type: yarn's attention factor on cos and sin, dynamic RoPE's table per sequence (the
// 37-token prompt passes 16 positions in its first step, the 5-token one only in round 3).
GPU_TEST(CudaRunnerMatchesCpuRunnerForEveryRopeType) {
  model::RopeConfig rope;
  rope.theta = 1000000.0;
  rope.factor = 4.0;
  rope.type = model::RopeType::kLinear;
  CompareRunners("llama", DType::kBFloat16, 128, rope);
  rope.type = model::RopeType::kYarn;
  rope.original_max_position_embeddings = 32;
  CompareRunners("qwen2", DType::kBFloat16, 128, rope);
  CompareRunners("qwen2", DType::kFloat16, 64, rope);
  rope.type = model::RopeType::kLlama3;
  rope.low_freq_factor = 1.0;
  rope.high_freq_factor = 4.0;
  CompareRunners("llama", DType::kBFloat16, 128, rope);
  rope = {};
  rope.type = model::RopeType::kDynamic;
  rope.factor = 2.0;
  CompareRunners("llama", DType::kBFloat16, 64, rope, 16);
  CompareRunners("mistral", DType::kFloat16, 128, rope, 16);
}

// Sliding windows shorter than the 37-token prompt (Mistral's in every layer; Qwen2's and Qwen3's
// in the layers from max_window_layers, beside full ones), the runtime's max_attention_window_size
// with sinks, and Qwen3's q/k norm (head dims 64, 80 and 128: 4, 5 and 8 threads a head in the
// fused kernel), alone and together, and with yarn's table.
GPU_TEST(CudaRunnerMatchesCpuRunnerWithWindowsAndQkNorm) {
  AttentionCase mistral_window;
  mistral_window.sliding_window = 16;
  AttentionCase upper_layers;  // layer 0 full, layer 1 windowed
  upper_layers.sliding_window = 9;
  upper_layers.max_window_layers = 1;
  AttentionCase limits;
  limits.limits.max_attention_window = {20, 33};
  limits.limits.sink_token_length = 3;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    CompareRunners("mistral", dtype, 64, {}, 2048, mistral_window);
    CompareRunners("llama", dtype, 128, {}, 2048, limits);
    CompareRunners("qwen3", dtype, 128);
    CompareRunners("qwen3", dtype, 80, {}, 2048, upper_layers);
    CompareRunners("qwen2", dtype, 64, {}, 2048, upper_layers);
  }
  model::RopeConfig yarn;
  yarn.theta = 1000000.0;
  yarn.factor = 4.0;
  yarn.type = model::RopeType::kYarn;
  yarn.original_max_position_embeddings = 32;
  CompareRunners("qwen3", DType::kBFloat16, 64, yarn, 2048, upper_layers);
  setenv("INFLIGHT_ATTENTION_SM_SPLIT", "force", 1);
  CompareRunners("qwen3", DType::kBFloat16, 128, {}, 2048, upper_layers);
  unsetenv("INFLIGHT_ATTENTION_SM_SPLIT");
}

// An FP8 KV cache (inflight-build --kv_cache_dtype fp8): both runners store the same E4M3 codes
// (up to the rounding of k to dtype before its code on the device), through prompt, decode and
// mixed steps, with windows, q/k norm, and the mixed step's attentions side by side; the CPU
// runner's logits are the reference.
GPU_TEST(CudaRunnerMatchesCpuRunnerWithFp8KvCache) {
  AttentionCase limits;
  limits.limits.max_attention_window = {20, 33};
  limits.limits.sink_token_length = 3;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    CompareRunners("llama", dtype, 64, {}, 2048, {}, true);
    CompareRunners("qwen2", dtype, 128, {}, 2048, {}, true);
    CompareRunners("llama", dtype, 128, {}, 2048, limits, true);
    CompareRunners("qwen3", dtype, 64, {}, 2048, {}, true);
  }
  setenv("INFLIGHT_ATTENTION_SM_SPLIT", "force", 1);
  CompareRunners("llama", DType::kBFloat16, 128, {}, 2048, {}, true);
  unsetenv("INFLIGHT_ATTENTION_SM_SPLIT");
}

// Head dims with no FP8 attention kernel are refused at load, by name.
GPU_TEST(CudaRunnerRefusesFp8KvCacheAtHeadDim80) {
  const std::string engine =
      MakeEngine("llama", DType::kBFloat16, 80, 300, 512, {}, 2048, {}, true);
  auto gpu = model::CreateCudaModelRunner(engine, model::CudaRunnerOptions{});
  GPU_CHECK(!gpu.ok(), "an FP8 KV cache at head_dim 80 was accepted");
  const std::string message = gpu.status().ToString();
  GPU_CHECK(message.find("kv_cache_quant_algo \"fp8\" with head_dim 80") != std::string::npos,
            message);
}

GPU_TEST(CudaRunnerMatchesCpuRunnerOnLongPrompts) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) CompareRunnersLongPrompt(dtype);
}

}  // namespace
}  // namespace inflight::gpu_test
