#include "model/random_engine.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>

#include "model/quant_plan.h"
#include "model/quant_sources.h"

namespace inflight::model {
namespace {

namespace fs = std::filesystem;

// A checkpoint tensor's recipe: what WriteRandomCheckpoint would fill it with.
struct RandomTensor {
  const HfTensorSpec* spec = nullptr;
  std::size_t numel = 0;
};

class RandomWeights {
 public:
  explicit RandomWeights(const RandomCheckpointOptions& o)
      : options_(o), specs_(CheckpointTensors(o)) {
    for (const HfTensorSpec& s : specs_) by_name_.emplace(s.name, &s);
  }

  // The weight plan names GPT-2's tensors without "transformer."; the checkpoint has it.
  Result<RandomTensor> Find(const std::string& plan_name) const {
    auto it = by_name_.find("transformer." + plan_name);
    if (it == by_name_.end()) it = by_name_.find(plan_name);
    if (it == by_name_.end()) {
      return Internal("random engine: no checkpoint tensor \"" + plan_name + "\" for " +
                      options_.arch);
    }
    RandomTensor t{it->second, 1};
    for (std::int64_t d : it->second->shape) t.numel *= static_cast<std::size_t>(d);
    return t;
  }
  // Find, and the tensor must have the weight plan's shape.
  Result<RandomTensor> FindShaped(const std::string& hf_name,
                                  const std::vector<std::int64_t>& shape) const {
    ASSIGN_OR_RETURN(const RandomTensor t, Find(hf_name));
    if (t.spec->shape != shape) {
      return Internal("random engine: tensor \"" + t.spec->name + "\" has shape " +
                      ShapeToString(t.spec->shape) + ", the plan expects " + ShapeToString(shape));
    }
    return t;
  }

  // A checkpoint weight as the build-time quantizer reads it from the written checkpoint: in the
  // checkpoint's dtype, then float32.
  Status Check(const std::string& hf_name, const std::vector<std::int64_t>& shape) const {
    return FindShaped(hf_name, shape).status();
  }
  Status ReadFloats(const std::string& hf_name, const std::vector<std::int64_t>& shape,
                    std::vector<float>* out) const {
    ASSIGN_OR_RETURN(const RandomTensor t, FindShaped(hf_name, shape));
    out->resize(t.numel);
    if (options_.dtype == DType::kFloat32) {
      FillRandomTensor(options_.seed, t.spec->name, t.spec->init, options_.init_std,
                       DType::kFloat32, reinterpret_cast<std::byte*>(out->data()), t.numel);
      return Status::Ok();
    }
    std::vector<std::byte> source(t.numel * DTypeSize(options_.dtype));
    FillRandomTensor(options_.seed, t.spec->name, t.spec->init, options_.init_std, options_.dtype,
                     source.data(), t.numel);
    ConvertToFloat(options_.dtype, source.data(), out->data(), t.numel);
    return Status::Ok();
  }

  // Fills one engine tensor. A piece that is a whole checkpoint tensor in the checkpoint's dtype
  // (every piece of a tp_size 1 Llama engine of the same dtype) is generated in place; others are
  // generated as the checkpoint holds them and gathered like inflight-build does, so the bytes
  // match a build from the written checkpoint (dtype rounding included).
  Status Fill(const EngineWeight& w, DType to, std::byte* dst) const {
    const std::size_t esize = DTypeSize(to);
    std::vector<std::byte> source;
    std::vector<float> scratch;
    for (const WeightPiece& p : w.pieces) {
      const auto rows = static_cast<std::size_t>(p.row_end - p.row_begin);
      const auto cols = static_cast<std::size_t>(p.col_end - p.col_begin);
      if (p.zeros) {
        std::memset(dst, 0, rows * cols * esize);
      } else {
        ASSIGN_OR_RETURN(const RandomTensor t, Find(p.hf_name));
        if (to == options_.dtype && !p.transpose && rows * cols == t.numel) {
          FillRandomTensor(options_.seed, t.spec->name, t.spec->init, options_.init_std, to, dst,
                           t.numel);
        } else {
          source.resize(t.numel * DTypeSize(options_.dtype));
          FillRandomTensor(options_.seed, t.spec->name, t.spec->init, options_.init_std,
                           options_.dtype, source.data(), t.numel);
          TensorInfo info;
          info.name = t.spec->name;
          info.dtype = options_.dtype;
          info.shape = t.spec->shape;
          info.data = source.data();
          info.nbytes = source.size();
          GatherWeightPiece(&info, p, to, dst, &scratch);
        }
      }
      dst += rows * cols * esize;
    }
    return Status::Ok();
  }

 private:
  RandomCheckpointOptions options_;
  std::vector<HfTensorSpec> specs_;
  std::map<std::string, const HfTensorSpec*> by_name_;
};

// The filler of an engine's tensors from the random checkpoint `o` (resolved): float tensors
// generated (and gathered) as a build from the written checkpoint would read them; quantized
// linears through inflight-build's own --qformat quantizer reading those weights, so the bytes are
// a build's of that checkpoint.
EngineWeightFiller MakeRandomFiller(const RandomCheckpointOptions& o, const EngineConfig& config,
                                    std::shared_ptr<const StaticFp8Scales> static_fp8 = nullptr) {
  const auto weights = std::make_shared<const RandomWeights>(o);
  std::shared_ptr<const QuantizedLinearSource> quant_source;
  if (config.quant.any()) {
    FloatWeightSource source;
    source.check = [weights](const std::string& name, const std::vector<std::int64_t>& shape) {
      return weights->Check(name, shape);
    };
    source.read = [weights](const std::string& name, const std::vector<std::int64_t>& shape,
                            std::vector<float>* out) {
      return weights->ReadFloats(name, shape, out);
    };
    quant_source = MakeBuildTimeQuantizer(std::move(source), config.quant, std::move(static_fp8));
  }
  return [weights, quant_source, config](const EngineWeight& w, DType dtype, std::byte* dst) {
    if (w.quant_part || w.kv_cache_scale) return FillQuantizedWeight(config, *quant_source, w, dst);
    return weights->Fill(w, dtype, dst);
  };
}

}  // namespace

Result<BuildSummary> WriteRandomEngine(const RandomCheckpointOptions& checkpoint,
                                       const BuildOptions& build, const BuildProgressFn& progress,
                                       const std::optional<RandomWeightsRecipe>& at_load) {
  if (build.output_dir.empty()) return InvalidArgument("--output_dir is required");
  ASSIGN_OR_RETURN(const RandomCheckpointOptions o, ResolveCheckpointOptions(checkpoint));
  ASSIGN_OR_RETURN(EngineConfig config,
                   MakeEngineConfigFromJson(CheckpointConfigJson(o),
                                            "random " + o.arch + " weights", build, o.dtype));
  if (!at_load) {
    std::shared_ptr<const StaticFp8Scales> static_fp8;
    if (build.calibration != nullptr) {
      ASSIGN_OR_RETURN(StaticFp8Scales planned, PlanStaticFp8Scales(config, *build.calibration));
      static_fp8 = std::make_shared<const StaticFp8Scales>(std::move(planned));
    }
    return WriteEngineFiles(config, MakeRandomFiller(o, config, std::move(static_fp8)),
                            build.output_dir, progress);
  }
  if (build.calibration != nullptr) {
    return Unsupported(
        "--weights_at_load with --calib_dataset: an engine whose weights are made at load records "
        "no scales; build it without --weights_at_load");
  }
  config.random_weights = *at_load;
  // The recipe must give back these options at load (RandomOptionsOf).
  ASSIGN_OR_RETURN(const RandomCheckpointOptions again, RandomOptionsOf(config));
  if (CheckpointConfigJson(again) != CheckpointConfigJson(o) || again.seed != o.seed) {
    return InvalidArgument("--weights_at_load: the engine records only the preset \"" +
                           at_load->preset + "\" and the seed, and these options differ from them");
  }
  std::error_code ec;
  fs::create_directories(build.output_dir, ec);
  if (ec) return Internal("cannot create --output_dir " + build.output_dir + ": " + ec.message());
  // Rank files of an earlier build of the same directory would be ignored: remove them.
  RemoveRankFilesFrom(build.output_dir, 0);
  RETURN_IF_ERROR(SaveEngineConfig(config, build.output_dir));
  BuildSummary summary;
  for (std::int32_t rank = 0; rank < config.tp_size * config.pp_size; ++rank)
    CountPlan(config, RankFilePlan(config, rank), &summary);
  summary.output_files.push_back((fs::path(build.output_dir) / "config.json").string());
  summary.config = config;
  return summary;
}

Result<RandomCheckpointOptions> RandomOptionsOf(const EngineConfig& config) {
  if (!config.random_weights) return InvalidArgument("the engine has no random_weights recipe");
  RandomCheckpointOptions o;
  RETURN_IF_ERROR(ApplyCheckpointPreset(config.random_weights->preset, &o));
  o.seed = config.random_weights->seed;
  o.max_position_embeddings = config.max_position_embeddings;
  return ResolveCheckpointOptions(o);
}

Status WriteRandomRankFile(const EngineConfig& config, const std::vector<EngineWeight>& plan,
                           const std::string& path) {
  ASSIGN_OR_RETURN(const RandomCheckpointOptions o, RandomOptionsOf(config));
  return WriteEngineRankFile(config, plan, MakeRandomFiller(o, config), path,
                             RankFileWorkers(config));
}

}  // namespace inflight::model
