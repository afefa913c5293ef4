#include "random_bench_engine.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "common/dtype.h"
#include "model/checkpoint_converter.h"
#include "model/random_checkpoint.h"
#include "model/random_engine.h"
#include "table.h"

namespace inflight::bench {

void AddRandomEngineFlags(tools::FlagSet* flags, RandomEngineOptions* o) {
  flags->Add("preset", "NAME",
             "random checkpoint: tiny (default), small, llama-3.1-8b, llama-3.1-70b",
             [o](const std::string& v) {
               return tools::ParseChoice(
                   "--preset", v, {"tiny", "small", "llama-3.1-8b", "llama-3.1-70b"}, &o->preset);
             });
  flags->Add(
      "dtype", "NAME", "float32 | float16 | bfloat16 (default: the preset's)",
      [o](const std::string& v) {
        return tools::ParseChoice("--dtype", v, {"float32", "float16", "bfloat16"}, &o->dtype);
      });
  flags->Add(
      "qformat", "fp8|int8_wo|int4_wo",
      "quantize the random engine's decoder linears as inflight-build --qformat does "
      "(default: none)",
      [o](const std::string& v) {
        return tools::ParseChoice("--qformat", v, {"fp8", "int8_wo", "int4_wo"}, &o->qformat);
      });
  flags->Add("group_size", "N", "int4_wo: input columns per scale, >= 2 (default 128)",
             [o](const std::string& v) {
               return tools::ParseInt("--group_size", v, 2, 1 << 20, &o->group_size);
             });
  flags->Add("kv_cache_dtype", "fp8", "store the random engine's KV cache as FP8 E4M3",
             [o](const std::string& v) {
               std::string s;
               RETURN_IF_ERROR(tools::ParseChoice("--kv_cache_dtype", v, {"fp8"}, &s));
               o->kv_cache_fp8 = true;
               return Status::Ok();
             });
  flags->Add("max_batch_size", "N", "engine built here: max_batch_size (default 256)",
             [o](const std::string& v) {
               return tools::ParseInt("--max_batch_size", v, 1, 1 << 16, &o->max_batch_size);
             });
  flags->Add("max_num_tokens", "N", "engine built here: max_num_tokens (default 8192)",
             [o](const std::string& v) {
               return tools::ParseInt("--max_num_tokens", v, 1, 1 << 24, &o->max_num_tokens);
             });
}

Status CheckEngineDirFlags(const tools::FlagSet& flags) {
  if (!flags.WasSet("engine_dir")) return Status::Ok();
  for (const char* name : {"qformat", "group_size", "kv_cache_dtype"}) {
    if (flags.WasSet(name)) {
      return InvalidArgument(std::string("--") + name +
                             " applies to the random --preset engine, not to --engine_dir (an "
                             "engine keeps the quantization it was built with); build a quantized "
                             "engine with inflight-build --qformat / --kv_cache_dtype");
    }
  }
  return Status::Ok();
}

Result<std::string> WriteRandomBenchEngine(const RandomEngineOptions& opt,
                                           std::int32_t max_input_len, std::int32_t max_seq_len,
                                           const std::filesystem::path& work) {
  model::RandomCheckpointOptions ckpt;
  RETURN_IF_ERROR(model::ApplyCheckpointPreset(opt.preset, &ckpt));
  if (!opt.dtype.empty()) {
    std::optional<DType> dtype = ParseDType(opt.dtype);
    if (!dtype) {
      return InvalidArgument("--dtype \"" + opt.dtype +
                             "\" is not one of: float32, float16, bfloat16");
    }
    ckpt.dtype = *dtype;
  }
  ckpt.max_position_embeddings = std::max<std::int64_t>(ckpt.max_position_embeddings, max_seq_len);
  const std::filesystem::path engine = work / "engine";
  model::BuildOptions build;
  build.output_dir = engine.string();
  build.max_batch_size = static_cast<std::int32_t>(opt.max_batch_size);
  build.max_input_len = max_input_len;
  build.max_seq_len = max_seq_len;
  build.max_num_tokens = static_cast<std::int32_t>(opt.max_num_tokens);
  if (!opt.qformat.empty()) {
    ASSIGN_OR_RETURN(build.qformat, model::ParseQuantAlgo(opt.qformat, "--qformat"));
  }
  build.group_size = opt.group_size;
  build.kv_cache_fp8 = opt.kv_cache_fp8;
  std::fprintf(stderr, "[bench] writing a random %s engine (quantization: %s%s) to %s\n",
               opt.preset.c_str(), opt.qformat.empty() ? "none" : opt.qformat.c_str(),
               opt.kv_cache_fp8 ? ", FP8 KV cache" : "", engine.c_str());
  const double t0 = NowSeconds();
  ASSIGN_OR_RETURN(model::BuildSummary summary, model::WriteRandomEngine(ckpt, build));
  const double seconds = NowSeconds() - t0;
  std::cout << "Random " << opt.preset << " engine (" << DescribeQuantization(summary.config.quant)
            << "): " << Fmt(static_cast<double>(summary.num_bytes) / 1e6, 1) << " MB written in "
            << Fmt(seconds, 2) << " s ("
            << Fmt(static_cast<double>(summary.num_bytes) / 1e9 / seconds, 2) << " GB/s) under "
            << work.parent_path().string() << "\n\n"
            << std::flush;
  return engine.string();
}

std::string DescribeQuantization(const model::QuantConfig& q) {
  std::string out;
  switch (q.quant_algo) {
    case model::QuantAlgo::kNone:
      out = "no weight quantization";
      break;
    case model::QuantAlgo::kFp8:
      out = std::string("fp8 (E4M3 weights, ") +
            (q.weight_granularity == model::WeightScaleGranularity::kPerChannel ? "per-channel"
                                                                                : "per-tensor") +
            " scales; activations " +
            (q.activation_scaling == model::ActivationScaling::kStatic ? "static" : "per token") +
            ")";
      break;
    case model::QuantAlgo::kInt8Wo:
    case model::QuantAlgo::kInt4Wo:
      out = std::string(model::QuantAlgoName(q.quant_algo)) +
            (q.weight_granularity == model::WeightScaleGranularity::kPerGroup
                 ? " (group " + std::to_string(q.group_size) + ")"
                 : " (per-channel)");
      break;
  }
  return out + (q.kv_cache_fp8 ? ", FP8 KV cache" : ", KV cache in the engine dtype");
}

}  // namespace inflight::bench
