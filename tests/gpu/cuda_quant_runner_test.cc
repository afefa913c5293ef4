// The CUDA runner against the CPU runner on quantized engines (inflight-build --qformat fp8,
// int8_wo, int4_wo from one random checkpoint; fp8 also calibrated): the same engine file, so both
// read the same codes and scales; the CPU runner dequantizes to fp32 (the reference), the CUDA
// runner runs kernels/cuda/quant_linear.h (the GEMV at decode, the FP8 GEMM or the dequantizing
// fallback at prompt sizes). A prompt step, mixed steps, then greedy decode steps sampled on the
// device, which the runner replays from CUDA graphs after the first.
//
// Bound: logits within 0.05 x the step's largest |logit| (cuda_model_runner_test's bound for float
// engines: activations rounded to the dtype at every op on the device); for fp8 the E4M3 rounding
// of an input rounded to bf16 first may land one E4M3 step away from the CPU's now and then, which
// stays well inside it. A device-sampled greedy token must be one whose CPU logit is within that
// bound of the CPU's largest (fp8: twice it). Main build only; skipped without a device.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "gpu_test_util.h"
#include "model/checkpoint_converter.h"
#include "model/cuda_model_runner.h"
#include "model/fp8_calibration.h"
#include "model/random_checkpoint.h"

namespace inflight::gpu_test {
namespace {

constexpr int kVocab = 1111;

// calibrated: --calib_dataset on random token prompts, with an FP8 KV cache (per-tensor weights
// and static input scales: the scalar-scaled FP8 GEMM; KV scales not 1).
std::string MakeQuantEngine(const std::string& arch, model::QuantAlgo algo, DType dtype,
                            std::int64_t intermediate, std::int64_t group_size, bool calibrated) {
  const auto root = std::filesystem::temp_directory_path() /
                    ("inflight_gpu_quant_" + arch + "_" + model::QuantAlgoName(algo) + "_" +
                     DTypeName(dtype) + "_" + std::to_string(intermediate) +
                     (calibrated ? "_calibrated_" : "_") + std::to_string(Seed()));
  model::RandomCheckpointOptions ck;
  ck.arch = arch;
  ck.hidden_size = 256;
  ck.num_heads = 4;
  ck.num_kv_heads = arch == "gpt2" ? 4 : 2;
  if (arch != "gpt2") ck.head_dim = 64;
  ck.intermediate_size = intermediate;
  ck.vocab_size = kVocab;
  ck.dtype = dtype;
  ck.seed = Seed();
  ck.init_std = 0.05;
  ck.max_position_embeddings = 2048;
  auto written = model::WriteRandomCheckpoint(ck, (root / "hf").string());
  GPU_CHECK(written.ok(), written.status().ToString());
  model::BuildOptions b;
  b.checkpoint_dir = (root / "hf").string();
  b.output_dir = (root / "engine").string();
  b.dtype = dtype;
  b.max_batch_size = 8;
  b.max_num_tokens = 512;
  b.tokens_per_block = 16;
  b.qformat = algo;
  b.group_size = group_size;
  if (calibrated) {
    model::CalibrationDatasetOptions data;
    data.path = (root / "calibration.jsonl").string();
    std::ofstream file(data.path);
    std::mt19937 rng(static_cast<std::uint32_t>(Seed()));
    for (int sample = 0; sample < 6; ++sample) {
      file << "{\"input_ids\": [";
      for (int t = 0; t < 40 + 17 * sample; ++t) file << (t ? ", " : "") << rng() % kVocab;
      file << "]}\n";
    }
    file.close();
    b.kv_cache_fp8 = true;
    auto calibration = model::CalibrateFromDataset(
        b, [](const model::BuildOptions& o) { return model::BuildEngine(o); }, data, {});
    GPU_CHECK(calibration.ok(), calibration.status().ToString());
    b.calibration = *calibration;
  }
  auto built = model::BuildEngine(b);
  GPU_CHECK(built.ok(), built.status().ToString());
  return b.output_dir;
}

float Scale(const std::vector<float>& logits) {
  float scale = 0.0f;
  for (float x : logits) scale = std::max(scale, std::fabs(x));
  return scale;
}

void CompareQuantRunners(const std::string& arch, model::QuantAlgo algo, DType dtype,
                         std::int64_t intermediate, std::int64_t group_size = 128,
                         bool calibrated = false) {
  const std::string name = std::string("quant runner ") + arch + " " + model::QuantAlgoName(algo) +
                           (calibrated ? " calibrated" : "") + " " + Describe(dtype) +
                           " inter=" + std::to_string(intermediate);
  const std::string engine =
      MakeQuantEngine(arch, algo, dtype, intermediate, group_size, calibrated);
  model::RunnerOptions cpu_opts;
  cpu_opts.max_kv_tokens = std::int64_t{64} * 16;
  auto cpu = model::CreateCpuModelRunner(engine, cpu_opts);
  GPU_CHECK(cpu.ok(), cpu.status().ToString());
  model::CudaRunnerOptions gpu_opts;
  gpu_opts.max_kv_tokens = std::int64_t{64} * 16;
  auto gpu = model::CreateCudaModelRunner(engine, gpu_opts);
  GPU_CHECK(gpu.ok(), name + ": " + gpu.status().ToString());

  std::vector<std::int32_t> blocks(64);
  for (int i = 0; i < 64; ++i) blocks[static_cast<std::size_t>(i)] = i;
  std::shuffle(blocks.begin(), blocks.end(), Rng());
  std::uniform_int_distribution<int> tok(0, kVocab - 1);
  model::StepInput step;
  const auto add_prompt = [&](int len, model::SequenceStep::Logits logits) {
    model::SequenceStep s;
    for (int i = 0; i < len; ++i) s.tokens.push_back(tok(Rng()));
    const std::size_t first = step.sequences.size() * 8;
    s.block_table.assign(blocks.begin() + static_cast<std::ptrdiff_t>(first),
                         blocks.begin() + static_cast<std::ptrdiff_t>(first + 8));
    s.logits = logits;
    step.sequences.push_back(s);
  };
  const auto next_tokens = [&]() {
    for (auto& s : step.sequences) {
      s.num_cached += static_cast<std::int32_t>(s.tokens.size());
      s.tokens = {tok(Rng())};
      s.logits = model::SequenceStep::Logits::kLast;
      s.device_sampling.reset();
    }
  };
  // A 37-token prompt (all logits: 37 rows, past the GEMV) and a 5-token one; then decodes, with
  // a 19-token and a 1-token prompt joining in round 2.
  add_prompt(37, model::SequenceStep::Logits::kAll);
  add_prompt(5, model::SequenceStep::Logits::kLast);
  // The CPU and CUDA runners' logits of `step`, checked against each other. max_fp8_fraction: of
  // the logits allowed past the soft bound with FP8 activations (see below).
  const auto compare_step = [&](const std::string& label, double max_fp8_fraction) {
    auto want = (*cpu)->Step(step);
    auto got = (*gpu)->Step(step);
    GPU_CHECK(want.ok(), want.status().ToString());
    GPU_CHECK(got.ok(), name + ": " + got.status().ToString());
    const float scale = Scale(want->logits);
    if (algo == model::QuantAlgo::kFp8) {
      // FP8 activations: the device quantizes bf16/fp16-rounded values (and their per-token amax),
      // the CPU fp32 ones, so some codes differ by a step, 6-12% of that value. Measured on an H200
      // (2026-11-29, seeds 20261121 and 7): bf16 engines up to 8.2% of a step's logits past 5% of
      // max|logit| and the worst at 10.8%; fp16 engines (4x finer rounding) 0.25% and 6.5%. The
      // kernels alone match the CPU on the same inputs to NMSE ~5e-6 (quant_linear_test); a wrong
      // scale or layout is off by the size of the logits. A tighter check needs a CPU reference
      // that rounds activations as the device does.
      ExpectCloseThroughFp8(label, got->logits, want->logits, 0.05f * scale, 0.15f * scale,
                            max_fp8_fraction);
    } else {
      ExpectClose(label, got->logits, want->logits, 0.05f * scale, 0.0f);
    }
  };
  for (int round = 0; round < 4; ++round) {
    compare_step(name + " step " + std::to_string(round), 0.15);
    next_tokens();
    if (round == 1) {
      add_prompt(19, model::SequenceStep::Logits::kLast);
      add_prompt(1, model::SequenceStep::Logits::kLast);
    }
  }
  // Greedy decode steps sampled on the device: all four sequences decode, so the runner captures a
  // CUDA graph of the step on the first and replays it on the others.
  for (int round = 0; round < 3; ++round) {
    auto want = (*cpu)->Step(step);
    GPU_CHECK(want.ok(), want.status().ToString());
    model::StepInput sampled = step;
    for (auto& s : sampled.sequences) {
      s.logits = model::SequenceStep::Logits::kNone;
      model::DeviceSampling greedy;
      greedy.greedy = true;
      s.device_sampling = greedy;
    }
    auto got = (*gpu)->Step(sampled);
    GPU_CHECK(got.ok(), name + ": " + got.status().ToString());
    GPU_CHECK(got->sampled_tokens.size() == step.sequences.size(),
              name + ": no device-sampled tokens");
    // The device's argmax compares two logits, each within the steps' bound of the CPU's; FP8
    // engines: twice that, since either may sit at it (H200, seeds 2 and 8356338925687512479:
    // qwen3 bf16 picked tokens 0.18 below the CPU's best where the bound was 0.14 and the two
    // logits stayed within the steps' check).
    const float bound = (algo == model::QuantAlgo::kFp8 ? 0.1f : 0.05f) * Scale(want->logits);
    for (std::size_t s = 0; s < step.sequences.size(); ++s) {
      const float* row = want->logits.data() + s * kVocab;
      const float best = *std::max_element(row, row + kVocab);
      const int token = got->sampled_tokens[s];
      GPU_CHECK(token >= 0 && token < kVocab, name + ": sampled token out of range");
      if (!(row[token] >= best - bound)) {
        Fail(name + " graph decode round " + std::to_string(round) + " seq " + std::to_string(s) +
             ": greedy token " + std::to_string(token) + " has CPU logit " +
             std::to_string(row[token]) + ", the CPU's largest is " + std::to_string(best) +
             " (bound " + std::to_string(bound) + ")");
      }
    }
    std::printf("  %s graph decode round %d: tokens within bound\n", name.c_str(), round);
    next_tokens();
  }
  // One sequence alone: batch-1 decode steps, whose quantized linears run the one-row GEMV
  // (quant_gemv_half.cu), the others' steps having had two rows or more. One row's logits all come
  // from the same rounded activations, so the share past the soft bound is one correlated sample,
  // not an average over rows: on an H200 it ran 0-5.6% and once 15.4% (qwen3 fp8 bf16, seed
  // 11022404322632910873) with nothing near the hard bound, which is what catches a wrong scale.
  step.sequences.resize(1);
  for (int round = 0; round < 2; ++round) {
    compare_step(name + " one-row step " + std::to_string(round), 0.25);
    next_tokens();
  }
  std::printf("  %s one-row steps: logits within bound\n", name.c_str());
}

// intermediate 384: every linear's inputs whole code chunks, so decode takes the GEMV everywhere;
// 300: down's 300 inputs are not (and 300 / 128 leaves a partial group), so it falls back.
GPU_TEST(CudaRunnerMatchesCpuRunnerOnFp8Engines) {
  CompareQuantRunners("llama", model::QuantAlgo::kFp8, DType::kBFloat16, 384);
  CompareQuantRunners("llama", model::QuantAlgo::kFp8, DType::kFloat16, 300);
  // --qformat takes the Llama family only (GPT-2 is refused by name at build): Qwen3 adds q/k norm.
  CompareQuantRunners("qwen3", model::QuantAlgo::kFp8, DType::kBFloat16, 384);
}

// The calibration pass on the CUDA runner against the CPU runner's on one float engine: every
// layer's amax at every point within 4% (bf16 activations on the device, fp32 on the CPU: a few
// bf16 ulps through the layers). qwen3: K after its q/k norm and rotation.
GPU_TEST(CudaCalibrationMatchesCpu) {
  for (const std::string arch : {"llama", "qwen3"}) {
    const std::string engine =
        MakeQuantEngine(arch, model::QuantAlgo::kNone, DType::kBFloat16, 384, 128, false);
    std::vector<VecTokens> samples;
    std::mt19937 rng(static_cast<std::uint32_t>(Seed()));
    for (const int n : {20, 90, 7, 64, 33}) {
      VecTokens ids;
      for (int t = 0; t < n; ++t) ids.push_back(static_cast<TokenIdType>(rng() % kVocab));
      samples.push_back(ids);
    }
    model::ActivationAmax found[2];
    for (int d = 0; d < 2; ++d) {
      model::CalibrationRun run;
      run.device = d == 0 ? model::CalibrationDevice::kCpu : model::CalibrationDevice::kCuda;
      auto amax = model::ObserveActivationAmax(engine, samples, run);
      GPU_CHECK(amax.ok(), arch + ": " + amax.status().ToString());
      found[d] = *amax;
    }
    GPU_CHECK(found[0].layers.size() == found[1].layers.size(), arch + ": layer counts differ");
    for (std::size_t l = 0; l < found[0].layers.size(); ++l) {
      for (int p = 0; p < model::kNumAmaxPoints; ++p) {
        const float cpu = found[0].layers[l][p], gpu = found[1].layers[l][p];
        if (!(cpu > 0.0f) || !(std::fabs(gpu - cpu) <= 0.04f * cpu)) {
          Fail(arch + " layer " + std::to_string(l) + " point " + std::to_string(p) + ": CUDA " +
               std::to_string(gpu) + ", CPU " + std::to_string(cpu));
        }
      }
    }
    std::printf("  %s: CUDA calibration amax within 4%% of the CPU's at every point\n",
                arch.c_str());
  }
}

// inflight-build --calib_dataset: per-tensor weights (one scale for q/k/v and for gate/up), static
// input scales, FP8 KV cache scales from the calibration.
GPU_TEST(CudaRunnerMatchesCpuRunnerOnCalibratedFp8Engines) {
  CompareQuantRunners("llama", model::QuantAlgo::kFp8, DType::kBFloat16, 384, 128, true);
  CompareQuantRunners("qwen3", model::QuantAlgo::kFp8, DType::kFloat16, 300, 128, true);
}

GPU_TEST(CudaRunnerMatchesCpuRunnerOnInt8Engines) {
  CompareQuantRunners("llama", model::QuantAlgo::kInt8Wo, DType::kBFloat16, 384);
  CompareQuantRunners("qwen2", model::QuantAlgo::kInt8Wo, DType::kFloat16, 300);
}

GPU_TEST(CudaRunnerMatchesCpuRunnerOnInt4Engines) {
  CompareQuantRunners("llama", model::QuantAlgo::kInt4Wo, DType::kBFloat16, 384);
  CompareQuantRunners("llama", model::QuantAlgo::kInt4Wo, DType::kFloat16, 300, 64);
  CompareQuantRunners("qwen3", model::QuantAlgo::kInt4Wo, DType::kBFloat16, 384, 32);
}

}  // namespace
}  // namespace inflight::gpu_test
