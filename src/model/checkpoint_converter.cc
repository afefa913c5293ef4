#include "model/checkpoint_converter.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "common/logging.h"
#include "model/build_defaults.h"
#include "model/checkpoint_index.h"
#include "model/hf_config.h"
#include "model/parallel_safetensors_writer.h"
#include "model/quant_plan.h"
#include "model/quant_sources.h"

namespace inflight::model {
namespace {

namespace fs = std::filesystem;

bool IsFloat(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

float LoadFloat(DType t, const std::byte* base, std::size_t index) {
  switch (t) {
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, base + 4 * index, 4);
      return f;
    }
    case DType::kFloat16:
    case DType::kBFloat16: {
      std::uint16_t u;
      std::memcpy(&u, base + 2 * index, 2);
      return t == DType::kFloat16 ? Fp16ToFloat(u) : Bf16ToFloat(u);
    }
    default:
      return 0.0f;  // unreachable: dtypes are checked before gathering
  }
}

// Converts n contiguous elements; the same dtype is a plain copy, so bf16 → bf16 is bit-exact.
void ConvertRun(DType from, const std::byte* src, DType to, std::byte* dst, std::size_t n,
                std::vector<float>* scratch) {
  if (from == to) {
    std::memcpy(dst, src, n * DTypeSize(to));
    return;
  }
  // Through fp32 in bounded steps, so a 2 GB embedding needs no 2 GB scratch.
  constexpr std::size_t kStep = std::size_t{1} << 16;
  scratch->resize(std::min(n, kStep));
  const std::size_t from_size = DTypeSize(from), to_size = DTypeSize(to);
  for (std::size_t i = 0; i < n; i += kStep) {
    const std::size_t m = std::min(kStep, n - i);
    ConvertToFloat(from, src + i * from_size, scratch->data(), m);
    ConvertFromFloat(to, scratch->data(), dst + i * to_size, m);
  }
}

using Checkpoint = CheckpointIndex;

Status CheckPiece(const Checkpoint& ckpt, const EngineWeight& w, const WeightPiece& p) {
  if (p.zeros) return Status::Ok();
  const TensorInfo* t = ckpt.Find(p.hf_name);
  if (t == nullptr) {
    return NotFound("checkpoint tensor \"" + p.hf_name + "\" (needed for engine tensor \"" +
                    w.name + "\") is missing; searched " + ckpt.Describe());
  }
  if (t->shape != p.hf_shape) {
    return InvalidArgument("checkpoint tensor \"" + t->name + "\" in " + ckpt.FileOf(t) +
                           " has shape " + ShapeToString(t->shape) + ", expected " +
                           ShapeToString(p.hf_shape) + " from config.json");
  }
  if (!IsFloat(t->dtype)) {
    return Unsupported("checkpoint tensor \"" + t->name + "\" in " + ckpt.FileOf(t) +
                       " has dtype " + DTypeName(t->dtype) +
                       "; supported: float32, float16, bfloat16");
  }
  return Status::Ok();
}

Result<std::string> ReadText(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status CheckRange(const char* flag, std::int64_t value, std::int64_t lo, std::int64_t hi) {
  if (value < lo || value > hi) {
    return InvalidArgument(std::string(flag) + " " + std::to_string(value) + " is outside [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return Status::Ok();
}

constexpr const char* kModelOptConfigName = "hf_quant_config.json";

// The engine's quantization from the checkpoint's (already in c.quant) and the flags.
Status ApplyQuantOptions(const BuildOptions& o, const std::string& source, EngineConfig* c) {
  QuantConfig& q = c->quant;
  if (o.qformat && *o.qformat != QuantAlgo::kNone) {
    const std::string flag = std::string("--qformat ") + QuantAlgoName(*o.qformat);
    if (q.quantized_weights()) {
      return Unsupported(flag + ": " + source + " is already quantized (" + q.source +
                         ", quant_algo " + QuantAlgoName(q.quant_algo) +
                         "); build it without --qformat");
    }
    if (c->architecture == Architecture::kGpt2) {
      return Unsupported(flag +
                         " is not supported for GPT2LMHeadModel; accepted architectures: "
                         "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                         "Qwen3ForCausalLM");
    }
    q.quant_algo = *o.qformat;
    q.source = "inflight-build " + flag;
    switch (*o.qformat) {
      case QuantAlgo::kFp8:
        if (o.calibration != nullptr) {
          // TensorRT-LLM's FP8 recipe: one scale per weight (shared by the pieces of one GEMM)
          // and per linear input, from the calibration; the GEMM takes both as scalars.
          q.weight_granularity = WeightScaleGranularity::kPerTensor;
          q.activation_scaling = ActivationScaling::kStatic;
        } else {
          // Per output channel (a row scale in the GEMM epilogue), tokens scaled at run time.
          q.weight_granularity = WeightScaleGranularity::kPerChannel;
          q.activation_scaling = ActivationScaling::kDynamicPerToken;
        }
        break;
      case QuantAlgo::kInt8Wo:
        q.weight_granularity = WeightScaleGranularity::kPerChannel;
        break;
      case QuantAlgo::kInt4Wo:
        if (o.group_size < 2) {
          return InvalidArgument("--group_size " + std::to_string(o.group_size) +
                                 " is not accepted; accepted: a group size >= 2 (default 128)");
        }
        q.weight_granularity = WeightScaleGranularity::kPerGroup;
        q.group_size = o.group_size;
        break;
      case QuantAlgo::kNone:
        break;
    }
  }
  if (o.kv_cache_fp8) {
    q.kv_cache_fp8 = true;
    if (q.source.empty()) q.source = "inflight-build --kv_cache_dtype fp8";
  }
  if (o.calibration != nullptr) {
    RETURN_IF_ERROR(CheckCalibrationFlags(o));  // its layers: PlanStaticFp8Scales
    q.source += " --calib_dataset " + o.calibration->source;
  }
  if (!q.any()) return Status::Ok();
  RETURN_IF_ERROR(q.Validate());
  return CheckQuantizedLayout(*c);
}

}  // namespace

Status CheckCalibrationFlags(const BuildOptions& o) {
  if (o.qformat != QuantAlgo::kFp8 && !o.kv_cache_fp8) {
    return InvalidArgument(
        "--calib_dataset calibrates the scales of --qformat fp8 and --kv_cache_dtype fp8, and "
        "neither is set" +
        std::string(o.qformat && *o.qformat != QuantAlgo::kNone
                        ? std::string(" (--qformat ") + QuantAlgoName(*o.qformat) +
                              " is weight-only, rounded to nearest)"
                        : ""));
  }
  if (o.checkpoint_dir.empty()) return Status::Ok();
  ASSIGN_OR_RETURN(CheckpointQuantization cq, ReadCheckpointQuantization(o.checkpoint_dir));
  if (cq.format != CheckpointQuantFormat::kNone) {
    return Unsupported("--calib_dataset: " + o.checkpoint_dir + " is already quantized (" +
                       CheckpointQuantFormatName(cq.format) +
                       ") with its own scales; build it without --calib_dataset");
  }
  return Status::Ok();
}

Result<CheckpointQuantization> ReadCheckpointQuantization(const std::string& dir) {
  auto text = ReadText(fs::path(dir) / "config.json");
  if (!text.ok()) return text.status();
  const std::string origin = (fs::path(dir) / "config.json").string();
  ASSIGN_OR_RETURN(HfConfigReading hf, ReadHuggingFaceConfig(*text, origin));
  const fs::path modelopt = fs::path(dir) / kModelOptConfigName;
  std::error_code ec;
  if (!fs::exists(modelopt, ec)) return hf.checkpoint_quant;
  ASSIGN_OR_RETURN(std::string mo_text, ReadText(modelopt));
  ASSIGN_OR_RETURN(CheckpointQuantization mo, ReadModelOptQuantConfig(mo_text, modelopt.string()));
  if (hf.checkpoint_quant.format != CheckpointQuantFormat::kNone &&
      hf.checkpoint_quant.format != CheckpointQuantFormat::kModelOpt) {
    return Unsupported(modelopt.string() + " (ModelOpt) and " + origin +
                       "'s quantization_config (quant_method \"" +
                       CheckpointQuantFormatName(hf.checkpoint_quant.format) +
                       "\") both describe the weights; keep one");
  }
  return mo;
}

namespace {}  // namespace

void GatherWeightPiece(const TensorInfo* source, const WeightPiece& p, DType to, std::byte* dst,
                       std::vector<float>* scratch) {
  const std::size_t esize = DTypeSize(to);
  const auto rows = static_cast<std::size_t>(p.row_end - p.row_begin);
  const auto cols = static_cast<std::size_t>(p.col_end - p.col_begin);
  if (p.zeros) {
    std::memset(dst, 0, rows * cols * esize);
    return;
  }
  const TensorInfo* t = source;
  const std::size_t src_esize = DTypeSize(t->dtype);
  if (!p.transpose) {
    // View [rows, cols] of the tensor as stored: rows are contiguous.
    const std::size_t stride = p.hf_shape.size() == 1 ? 1 : static_cast<std::size_t>(p.hf_shape[1]);
    if (p.col_begin == 0 && cols == stride) {
      ConvertRun(t->dtype, t->data + p.row_begin * stride * src_esize, to, dst, rows * cols,
                 scratch);
      return;
    }
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t src_off = (p.row_begin + r) * stride + p.col_begin;
      ConvertRun(t->dtype, t->data + src_off * src_esize, to, dst + r * cols * esize, cols,
                 scratch);
    }
    return;
  }
  // Transposed view of a stored [in, out] tensor: view(r, c) = stored(c, r).
  const auto out_features = static_cast<std::size_t>(p.hf_shape[1]);
  scratch->resize(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      (*scratch)[c] =
          LoadFloat(t->dtype, t->data, (p.col_begin + c) * out_features + p.row_begin + r);
    }
    ConvertFromFloat(to, scratch->data(), dst + r * cols * esize, cols);
  }
}

Result<EngineConfig> MakeEngineConfig(const BuildOptions& o, bool log_reading) {
  if (o.checkpoint_dir.empty()) return InvalidArgument("--checkpoint_dir is required");
  const fs::path hf_config = fs::path(o.checkpoint_dir) / "config.json";
  auto text = ReadText(hf_config);
  if (!text.ok()) {
    return NotFound("--checkpoint_dir " + o.checkpoint_dir +
                    " has no config.json (expected a Hugging Face checkpoint folder)");
  }
  // Needed only when neither --dtype nor config.json names a dtype (transformers 5 then loads the
  // weights as they are stored).
  std::optional<DType> weights_dtype;
  if (!o.dtype) {
    auto shards = ListCheckpointShards(o.checkpoint_dir);
    if (shards.ok() && !shards->empty()) {
      if (auto file = SafetensorsFile::Open(shards->front()); file.ok()) {
        for (const std::string& name : (*file)->names()) {
          const DType t = (*file)->Find(name)->dtype;
          if (IsFloat(t)) {
            weights_dtype = t;
            break;
          }
        }
      }
    }
  }
  // ModelOpt's settings live in hf_quant_config.json beside config.json.
  std::optional<QuantConfig> modelopt;
  std::error_code ec;
  if (fs::exists(fs::path(o.checkpoint_dir) / kModelOptConfigName, ec)) {
    ASSIGN_OR_RETURN(CheckpointQuantization cq, ReadCheckpointQuantization(o.checkpoint_dir));
    modelopt = cq.engine;
  }
  return MakeEngineConfigFromJson(*text, hf_config.string(), o, weights_dtype, log_reading,
                                  modelopt ? &*modelopt : nullptr);
}

Result<EngineConfig> MakeEngineConfigFromJson(const std::string& hf_config_json,
                                              const std::string& source, const BuildOptions& o,
                                              std::optional<DType> weights_dtype, bool log_reading,
                                              const QuantConfig* file_quant) {
  ASSIGN_OR_RETURN(HfConfigReading hf, ReadHuggingFaceConfig(hf_config_json, source));
  EngineConfig c = std::move(hf.config);
  if (file_quant != nullptr) {
    if (c.quant.any() && c.quant.source != "modelopt") {
      return Unsupported(source + ": quantization_config (" + c.quant.source + ") and " +
                         kModelOptConfigName + " both describe the weights; keep one");
    }
    c.quant = *file_quant;
  }
  if (log_reading && !hf.unread_keys.empty()) {
    std::string keys;
    for (const std::string& k : hf.unread_keys) keys += (keys.empty() ? "" : ", ") + k;
    LOG_WARN("{}: keys not read by the converter ({} does not use them, or they are unknown): {}",
             source, c.architecture_name, keys);
  }
  if (o.dtype) {
    if (!IsFloat(*o.dtype)) {
      return InvalidArgument(std::string("--dtype ") + DTypeName(*o.dtype) +
                             " is not one of: float32, float16, bfloat16");
    }
    c.dtype = *o.dtype;
  } else if (hf.config_dtype) {
    c.dtype = *hf.config_dtype;
  } else if (!hf.config_dtype_text.empty()) {
    return InvalidArgument(source + ": dtype \"" + hf.config_dtype_text +
                           "\" is not one of: float32, float16, bfloat16; choose the engine's "
                           "with --dtype");
  } else if (weights_dtype) {
    c.dtype = *weights_dtype;
    if (log_reading)
      LOG_INFO("{}: no dtype or torch_dtype; the engine takes the weights' dtype, {}", source,
               DTypeName(c.dtype));
  } else {
    return InvalidArgument(source +
                           ": no dtype or torch_dtype, and no weights to take one from; choose "
                           "the engine's with --dtype");
  }
  RETURN_IF_ERROR(CheckRange("--tp_size", o.tp_size, 1, 1024));
  RETURN_IF_ERROR(CheckRange("--pp_size", o.pp_size, 1, 1024));
  if (o.pp_size > c.num_layers) {
    return InvalidArgument("--pp_size " + std::to_string(o.pp_size) + " is more than the model's " +
                           std::to_string(c.num_layers) +
                           " layers: every pipeline stage needs at least one");
  }
  c.tp_size = o.tp_size;
  c.pp_size = o.pp_size;
  if (c.num_attention_heads % o.tp_size != 0 ||
      (c.num_kv_heads >= o.tp_size ? c.num_kv_heads % o.tp_size : o.tp_size % c.num_kv_heads) !=
          0) {
    return InvalidArgument("--tp_size " + std::to_string(o.tp_size) +
                           " must divide num_attention_heads " +
                           std::to_string(c.num_attention_heads) +
                           " and divide (or be a multiple of) "
                           "num_kv_heads " +
                           std::to_string(c.num_kv_heads));
  }
  RETURN_IF_ERROR(CheckRange("--max_batch_size", o.max_batch_size, 1, 1 << 20));
  RETURN_IF_ERROR(CheckRange("--max_num_tokens", o.max_num_tokens, 1, INT32_MAX));
  RETURN_IF_ERROR(CheckRange("--tokens_per_block", o.tokens_per_block, 1, 1024));
  if ((o.tokens_per_block & (o.tokens_per_block - 1)) != 0) {
    return InvalidArgument("--tokens_per_block " + std::to_string(o.tokens_per_block) +
                           " is not a power of two (accepted: 1, 2, 4, ..., 1024)");
  }
  const auto default_seq = static_cast<std::int32_t>(
      std::min<std::int64_t>(c.max_position_embeddings, kDefaultMaxSeqLenCap));
  const std::int32_t max_seq_len = o.max_seq_len.value_or(default_seq);
  const std::int32_t max_input_len =
      o.max_input_len.value_or(std::min(kDefaultMaxInputLenCap, max_seq_len));
  RETURN_IF_ERROR(CheckRange("--max_input_len", max_input_len, 1, INT32_MAX));
  if (max_seq_len < max_input_len) {
    return InvalidArgument(
        "--max_seq_len " + std::to_string(max_seq_len) +
        (o.max_seq_len ? "" : " (the default, min(max_position_embeddings, 2048))") +
        " must be >= --max_input_len " + std::to_string(max_input_len));
  }
  if (c.position_embedding == PositionEmbedding::kLearned &&
      max_seq_len > c.max_position_embeddings) {
    return InvalidArgument("--max_seq_len " + std::to_string(max_seq_len) +
                           " exceeds the model's " + std::to_string(c.max_position_embeddings) +
                           " learned positions");
  }
  c.build = {o.max_batch_size, max_input_len, max_seq_len, o.max_num_tokens, o.tokens_per_block};
  CanonicalizeAttentionWindows(&c);
  RETURN_IF_ERROR(c.Validate());
  RETURN_IF_ERROR(ApplyQuantOptions(o, source, &c));
  if (log_reading && c.position_embedding == PositionEmbedding::kRope) {
    LOG_INFO("{}: {} with rope {}{}", source, c.architecture_name, DescribeRope(c.rope),
             c.attention_windows.empty() ? "" : ", sliding-window attention");
  }
  return c;
}

Result<BuildSummary> BuildEngine(const BuildOptions& o, const BuildProgressFn& progress) {
  if (o.output_dir.empty()) return InvalidArgument("--output_dir is required");
  ASSIGN_OR_RETURN(EngineConfig config, MakeEngineConfig(o));
  std::error_code ec;
  if (fs::exists(o.output_dir, ec) && fs::equivalent(o.output_dir, o.checkpoint_dir, ec)) {
    return InvalidArgument("--output_dir " + o.output_dir +
                           " is the checkpoint folder; the engine would overwrite its config.json");
  }
  ASSIGN_OR_RETURN(auto ckpt,
                   Checkpoint::Open(o.checkpoint_dir, config.architecture == Architecture::kGpt2));

  // Quantized linears come from the checkpoint's own quantized tensors, or are quantized here.
  std::unique_ptr<QuantizedLinearSource> quant_source;
  if (config.quant.any()) {
    ASSIGN_OR_RETURN(CheckpointQuantization cq, ReadCheckpointQuantization(o.checkpoint_dir));
    std::shared_ptr<const StaticFp8Scales> static_fp8;
    if (o.calibration != nullptr) {
      ASSIGN_OR_RETURN(StaticFp8Scales planned, PlanStaticFp8Scales(config, *o.calibration));
      static_fp8 = std::make_shared<const StaticFp8Scales>(std::move(planned));
    }
    quant_source = cq.format == CheckpointQuantFormat::kNone
                       ? MakeBuildTimeQuantizer(*ckpt, config.quant, std::move(static_fp8))
                       : MakePrequantizedSource(*ckpt, cq);
  }

  // Check everything first: a bad checkpoint fails before any file is written.
  for (std::int32_t rank = 0; rank < config.tp_size * config.pp_size; ++rank) {
    for (const EngineWeight& w : QuantizeRankPlan(config, PlanFileWeights(config, rank))) {
      if (w.kv_cache_scale) {
        RETURN_IF_ERROR(
            quant_source->KvCacheScales(std::stoll(w.name.substr(std::string("layers.").size())))
                .status());
        continue;
      }
      if (w.quant_part) {
        if (*w.quant_part != QuantPart::kWeight) continue;
        for (const WeightPiece& p : w.pieces)
          RETURN_IF_ERROR(quant_source->Check(p.hf_name, p.hf_shape));
        continue;
      }
      for (const WeightPiece& p : w.pieces) RETURN_IF_ERROR(CheckPiece(*ckpt, w, p));
    }
  }

  const Checkpoint* c = ckpt.get();
  const QuantizedLinearSource* qs = quant_source.get();
  auto gather = [c, qs, &config](const EngineWeight& w, DType dtype, std::byte* dst) -> Status {
    if (w.quant_part || w.kv_cache_scale) return FillQuantizedWeight(config, *qs, w, dst);
    std::vector<float> scratch;
    const std::size_t esize = DTypeSize(dtype);
    for (const WeightPiece& p : w.pieces) {
      GatherWeightPiece(p.zeros ? nullptr : c->Find(p.hf_name), p, dtype, dst, &scratch);
      dst +=
          static_cast<std::size_t>((p.row_end - p.row_begin) * (p.col_end - p.col_begin)) * esize;
    }
    // After the whole tensor: GPT-2's q, k and v pieces come from one checkpoint tensor.
    for (const WeightPiece& p : w.pieces) {
      if (!p.zeros) c->Release(c->Find(p.hf_name));
    }
    return Status::Ok();
  };
  ASSIGN_OR_RETURN(BuildSummary summary, WriteEngineFiles(config, gather, o.output_dir, progress));
  summary.checkpoint_files = ckpt->paths();
  LOG_DEBUG("built engine in {}: {} tensors, {} bytes", o.output_dir, summary.num_tensors,
            summary.num_bytes);
  return summary;
}

std::uint64_t EngineWeightBytes(const EngineWeight& w, DType dtype) {
  std::uint64_t n = DTypeSize(dtype);
  for (std::int64_t d : w.shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

std::vector<EngineWeight> RankFilePlan(const EngineConfig& config, std::int32_t rank) {
  return QuantizeRankPlan(config, PlanFileWeights(config, rank));
}

void CountPlan(const EngineConfig& config, const std::vector<EngineWeight>& plan,
               BuildSummary* summary) {
  for (const EngineWeight& w : plan) {
    summary->num_tensors += 1;
    summary->num_bytes += EngineWeightBytes(w, w.stored_dtype.value_or(config.dtype));
  }
}

void RemoveRankFilesFrom(const std::string& dir, std::int32_t first) {
  std::error_code ec;
  for (std::int32_t r = first;; ++r) {
    if (!fs::remove(fs::path(dir) / ("rank" + std::to_string(r) + ".safetensors"), ec)) break;
  }
}

unsigned RankFileWorkers(const EngineConfig& config) {
  // Quantizing is the build's CPU-bound part (an 8B engine's FP8 build took 67 s with 4 workers
  // on a 16-core device host, bf16 9 s): one worker a core, up to 16 (each holds the float copy
  // of the largest linear it quantizes: 0.9 GB for a 70B gate or up, so 16 hold 15 GB).
  return config.quant.quantized_weights() ? std::clamp(std::thread::hardware_concurrency(), 1u, 16u)
                                          : 0;
}

Status WriteEngineRankFile(const EngineConfig& config, const std::vector<EngineWeight>& plan,
                           const EngineWeightFiller& fill, const std::string& path,
                           unsigned workers,
                           const ParallelSafetensorsWriter::ProgressFn& progress) {
  ParallelSafetensorsWriter writer(workers);
  for (const EngineWeight& w : plan) {
    const DType dtype = w.stored_dtype.value_or(config.dtype);
    RETURN_IF_ERROR(writer.AddLazy(
        w.name, dtype, w.shape,
        [&fill, &w, dtype](std::byte* dst, std::size_t) { return fill(w, dtype, dst); }));
  }
  return writer.Write(path, progress);
}

Result<BuildSummary> WriteEngineFiles(const EngineConfig& config, const EngineWeightFiller& fill,
                                      const std::string& output_dir,
                                      const BuildProgressFn& progress) {
  std::vector<std::vector<EngineWeight>> plans;
  BuildSummary summary;
  const std::int32_t num_files = config.tp_size * config.pp_size;
  for (std::int32_t rank = 0; rank < num_files; ++rank) {
    plans.push_back(RankFilePlan(config, rank));
    CountPlan(config, plans.back(), &summary);
  }

  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec) return Internal("cannot create --output_dir " + output_dir + ": " + ec.message());
  fs::remove(fs::path(output_dir) / "config.json", ec);  // an interrupted build leaves no engine
  RemoveRankFilesFrom(output_dir, num_files);            // the rank<N> files below are replaced

  BuildProgress state;
  state.tensors_total = summary.num_tensors;
  state.bytes_total = summary.num_bytes;
  const unsigned workers = RankFileWorkers(config);
  std::mutex progress_mu;
  auto path_of = [&](std::int32_t rank) {
    return (fs::path(output_dir) / ("rank" + std::to_string(rank) + ".safetensors")).string();
  };
  auto write_rank = [&](std::int32_t rank, unsigned rank_workers) -> Status {
    return WriteEngineRankFile(config, plans[static_cast<std::size_t>(rank)], fill, path_of(rank),
                               rank_workers, [&](const std::string& name, std::size_t nbytes) {
                                 std::lock_guard<std::mutex> lock(progress_mu);
                                 state.rank = rank;
                                 state.tensor = name;
                                 state.tensors_done += 1;
                                 state.bytes_done += nbytes;
                                 if (progress) progress(state);
                               });
  };
  if (config.quant.quantized_weights() && num_files > 1) {
    // The ranks of a quantized engine are written at once, the workers split between them: each
    // rank asks for the same checkpoint tensors in the same order, so one quantization of a
    // tensor serves every rank (the quantizer keeps its recent loads) instead of one a rank.
    const unsigned per_rank = std::max(1u, workers / static_cast<unsigned>(num_files));
    std::vector<Status> written(static_cast<std::size_t>(num_files));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(num_files));
    for (std::int32_t rank = 0; rank < num_files; ++rank) {
      threads.emplace_back(
          [&, rank] { written[static_cast<std::size_t>(rank)] = write_rank(rank, per_rank); });
    }
    for (std::thread& t : threads) t.join();
    for (const Status& st : written) RETURN_IF_ERROR(st);
  } else {
    for (std::int32_t rank = 0; rank < num_files; ++rank)
      RETURN_IF_ERROR(write_rank(rank, workers));
  }
  for (std::int32_t rank = 0; rank < num_files; ++rank)
    summary.output_files.push_back(path_of(rank));
  RETURN_IF_ERROR(SaveEngineConfig(config, output_dir));
  summary.output_files.push_back((fs::path(output_dir) / "config.json").string());
  summary.config = config;
  return summary;
}

}  // namespace inflight::model
