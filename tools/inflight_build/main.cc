// inflight-build: a Hugging Face checkpoint → an Inflight engine directory (docs/engine_format.md).
// Flags follow trtllm-build's names so existing scripts carry over.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "common/flags.h"
#include "common/mpi_launch.h"
#include "common/progress_bar.h"
#include "model/checkpoint_converter.h"
#include "model/fp8_calibration.h"
#include "model/random_engine.h"
#ifdef INFLIGHT_BUILD_MPI
#include "model/fp8_calibration_mpi.h"
#include "model/mpi_process.h"
#endif

namespace {

using inflight::Status;
using inflight::model::BuildOptions;
using inflight::tools::FlagSet;

// Where the weights come from when there is no checkpoint: make_checkpoint's preset and seed.
struct RandomSource {
  std::string preset;
  std::int64_t seed = 0;
  bool at_load = false;
};

// --calib_dataset and its settings (model/fp8_calibration.h).
struct Calibration {
  inflight::model::CalibrationDatasetOptions dataset;
  inflight::model::CalibrationRun run;
};

void DefineFlags(FlagSet* flags, BuildOptions* o, RandomSource* random, Calibration* calib) {
  using inflight::tools::ParseChoice;
  using inflight::tools::ParseInt32;
  flags->Add("checkpoint_dir", "DIR",
             "Hugging Face checkpoint: config.json + *.safetensors (or --random_preset)",
             [o](const std::string& v) {
               o->checkpoint_dir = v;
               return v.empty() ? inflight::InvalidArgument("--checkpoint_dir is empty")
                                : Status::Ok();
             });
  flags->Add("output_dir", "DIR", "engine directory to write (required)",
             [o](const std::string& v) {
               o->output_dir = v;
               return v.empty() ? inflight::InvalidArgument("--output_dir is empty") : Status::Ok();
             });
  flags->Add("dtype", "float32|float16|bfloat16",
             "weight dtype (default: config.json's dtype or torch_dtype, else the weights' own)",
             [o](const std::string& v) {
               std::string s;
               RETURN_IF_ERROR(ParseChoice("--dtype", v, {"float32", "float16", "bfloat16"}, &s));
               o->dtype = inflight::ParseDType(s);
               return Status::Ok();
             });
  flags->Add(
      "tp_size", "N", "tensor-parallel ranks, dividing the attention heads (default 1)",
      [o](const std::string& v) { return ParseInt32("--tp_size", v, 1, 1024, &o->tp_size); });
  flags->Add(
      "pp_size", "N",
      "pipeline-parallel stages, at most the layers; rank files hold one stage's layers (default "
      "1)",
      [o](const std::string& v) { return ParseInt32("--pp_size", v, 1, 1024, &o->pp_size); });
  flags->Add("max_batch_size", "N", "most sequences in one step (default 256)",
             [o](const std::string& v) {
               return ParseInt32("--max_batch_size", v, 1, 1 << 20, &o->max_batch_size);
             });
  flags->Add("max_input_len", "N", "longest prompt (default min(1024, max_seq_len))",
             [o](const std::string& v) {
               std::int32_t n = 0;
               RETURN_IF_ERROR(ParseInt32("--max_input_len", v, 1, INT32_MAX, &n));
               o->max_input_len = n;
               return Status::Ok();
             });
  flags->Add(
      "max_seq_len", "N",
      "longest prompt + output, >= max_input_len (default min(max_position_embeddings, 2048))",
      [o](const std::string& v) {
        std::int32_t n = 0;
        RETURN_IF_ERROR(ParseInt32("--max_seq_len", v, 1, INT32_MAX, &n));
        o->max_seq_len = n;
        return Status::Ok();
      });
  flags->Add("max_num_tokens", "N", "most tokens in one step (default 8192)",
             [o](const std::string& v) {
               return ParseInt32("--max_num_tokens", v, 1, INT32_MAX, &o->max_num_tokens);
             });
  flags->Add(
      "tokens_per_block", "N", "KV cache block size, a power of two in [1, 1024] (default 64)",
      [o](const std::string& v) {
        RETURN_IF_ERROR(ParseInt32("--tokens_per_block", v, 1, 1024, &o->tokens_per_block));
        if ((o->tokens_per_block & (o->tokens_per_block - 1)) != 0) {
          return inflight::InvalidArgument("--tokens_per_block " + v +
                                           " is not a power of two (accepted: 1, 2, 4, ..., 1024)");
        }
        return Status::Ok();
      });
  // Quantization, with TensorRT-LLM quantize.py's flag names.
  flags->Add("qformat", "fp8|int8_wo|int4_wo|full_prec",
             "quantize the decoder linears at build time (lm_head and embeddings stay in --dtype): "
             "fp8 = E4M3 weights with per-channel scales and per-token activation scales; "
             "int8_wo / int4_wo = weight-only, per-channel / per-group symmetric (default: as the "
             "checkpoint is, float or pre-quantized)",
             [o](const std::string& v) {
               ASSIGN_OR_RETURN(inflight::model::QuantAlgo a,
                                inflight::model::ParseQuantAlgo(v, "--qformat"));
               o->qformat = a;
               return Status::Ok();
             });
  flags->Add("group_size", "N", "int4_wo: input columns per scale, >= 2 (default 128)",
             [o](const std::string& v) {
               return inflight::tools::ParseInt("--group_size", v, 2, 1 << 20, &o->group_size);
             });
  flags->Add("kv_cache_dtype", "fp8",
             "store the KV cache as FP8 E4M3 (scales from the checkpoint, else 1)",
             [o](const std::string& v) {
               std::string s;
               RETURN_IF_ERROR(ParseChoice("--kv_cache_dtype", v, {"fp8"}, &s));
               o->kv_cache_fp8 = true;
               return Status::Ok();
             });
  flags->Add("calib_dataset", "FILE",
             "calibrate static FP8 scales on these samples (JSON lines with input_ids, text or "
             "article, as datasets' to_json writes them; a JSON array; or one text a line): "
             "--qformat fp8 gets per-tensor weight scales and static input scales, "
             "--kv_cache_dtype fp8 its K and V scales (default: per-token scales at run time, "
             "KV scales 1)",
             [calib](const std::string& v) {
               calib->dataset.path = v;
               return v.empty() ? inflight::InvalidArgument("--calib_dataset is empty")
                                : Status::Ok();
             });
  flags->Add("calib_size", "N", "with --calib_dataset: the first N samples (default 512)",
             [calib](const std::string& v) {
               return inflight::tools::ParseInt("--calib_size", v, 1, INT32_MAX,
                                                &calib->dataset.calib_size);
             });
  flags->Add("calib_max_seq_length", "N",
             "with --calib_dataset: tokens of a sample at most (default 512)",
             [calib](const std::string& v) {
               return inflight::tools::ParseInt("--calib_max_seq_length", v, 1, INT32_MAX,
                                                &calib->dataset.max_seq_length);
             });
  flags->Add("tokenizer_dir", "DIR",
             "with --calib_dataset: the tokenizer of text samples (default: --checkpoint_dir)",
             [calib](const std::string& v) {
               calib->dataset.tokenizer_dir = v;
               return Status::Ok();
             });
  flags->Add("calib_device", "auto|cpu|cuda",
             "with --calib_dataset: where the float model runs (default auto: CUDA device 0 where "
             "one is visible and the model fits, else the CPU)",
             [calib](const std::string& v) {
               ASSIGN_OR_RETURN(calib->run.device, inflight::model::ParseCalibrationDevice(v));
               return Status::Ok();
             });
  flags->Add("calib_threads", "N",
             "with --calib_dataset on the CPU: threads of the pass (default: all)",
             [calib](const std::string& v) {
               std::int32_t n = 0;
               RETURN_IF_ERROR(inflight::tools::ParseInt32("--calib_threads", v, 1, 4096, &n));
               calib->run.num_threads = n;
               return Status::Ok();
             });
  flags->Add("random_preset", "tiny|small|llama-3.1-8b|llama-3.1-70b",
             "instead of --checkpoint_dir: the engine of `make_checkpoint --preset P --seed S`'s "
             "checkpoint, written straight from random weights (no checkpoint written or read; "
             "--qformat and --kv_cache_dtype apply as to that checkpoint)",
             [random](const std::string& v) {
               return inflight::tools::ParseChoice(
                   "--random_preset", v, {"tiny", "small", "llama-3.1-8b", "llama-3.1-70b"},
                   &random->preset);
             });
  flags->AddSwitch("weights_at_load",
                   "with --random_preset: write config.json only, recording the preset and seed; "
                   "each process makes its rank's weights when it loads the engine (in memory, no "
                   "rank files: benchmarks of large shapes)",
                   &random->at_load);
  flags->Add("seed", "N", "with --random_preset: make_checkpoint's --seed (default 0)",
             [random](const std::string& v) {
               return inflight::tools::ParseInt("--seed", v, 0, INT64_MAX, &random->seed);
             });
  flags->Require("output_dir");
}

// Under a launcher of several processes (mpirun -n tp_size*pp_size), the calibration pass runs one
// rank of the split float engine a process (a model larger than one GPU); the build itself stays
// rank 0's. One process: nothing to join.
Status JoinLaunchGroup(const BuildOptions& options, bool calibrate,
                       inflight::model::CalibrationRun* run) {
  ASSIGN_OR_RETURN(const inflight::MpiLaunch launch, inflight::MpiLaunchFromEnvironment());
  if (launch.size == 1) return Status::Ok();
  const std::string job = std::to_string(launch.size) + " processes (" + launch.source + ")";
  if (!calibrate) {
    return inflight::InvalidArgument(
        "inflight-build runs as one process, and this launch has " + job +
        "; several processes only split the --calib_dataset pass (one rank each)");
  }
#ifdef INFLIGHT_BUILD_MPI
  RETURN_IF_ERROR(inflight::model::EnsureMpiInitialized());
  ASSIGN_OR_RETURN(run->group, inflight::model::CreateMpiCalibrationGroup(
                                   MPI_COMM_WORLD, options.tp_size, options.pp_size, run->device,
                                   launch.local_rank));
  return Status::Ok();
#else
  (void)options;
  (void)run;
  return inflight::Unsupported("this launch has " + job +
                               ", and this inflight-build was built without MPI (apt-get install "
                               "libopenmpi-dev and rebuild); run it as one process");
#endif
}

int Fail(const Status& st) {
  std::fprintf(stderr, "inflight-build: error: %s\n", st.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  BuildOptions options;
  RandomSource random;
  Calibration calib;
  FlagSet flags("inflight-build",
                "Converts a Hugging Face checkpoint (LlamaForCausalLM, MistralForCausalLM,\n"
                "Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel; config.json as\n"
                "transformers 4.x or 5.x writes it) into an Inflight engine directory:\n"
                "config.json and rank<N>.safetensors. With --random_preset, writes the engine\n"
                "of a random checkpoint without the checkpoint (for benchmarks).");
  DefineFlags(&flags, &options, &random, &calib);
  auto parsed = flags.Parse(argc, argv);
  if (!parsed.ok()) return Fail(parsed.status());
  if (!*parsed) return 0;
  const bool from_checkpoint = flags.WasSet("checkpoint_dir");
  if (random.at_load && !flags.WasSet("random_preset")) {
    return Fail(inflight::InvalidArgument("--weights_at_load needs --random_preset"));
  }
  if (from_checkpoint == flags.WasSet("random_preset")) {
    return Fail(inflight::InvalidArgument(
        from_checkpoint ? "give --checkpoint_dir or --random_preset, not both"
                        : "flag --checkpoint_dir is required (or --random_preset)"));
  }
  const bool calibrate = flags.WasSet("calib_dataset");
  for (const char* f :
       {"calib_size", "calib_max_seq_length", "tokenizer_dir", "calib_device", "calib_threads"}) {
    if (flags.WasSet(f) && !calibrate) {
      return Fail(inflight::InvalidArgument(std::string("--") + f + " needs --calib_dataset"));
    }
  }
  if (calibrate && random.at_load) {
    return Fail(inflight::Unsupported(
        "--calib_dataset with --weights_at_load: an engine whose weights are made at load "
        "records no scales; build it without --weights_at_load"));
  }

  inflight::model::RandomCheckpointOptions checkpoint;
  std::optional<inflight::model::RandomWeightsRecipe> at_load;
  if (!from_checkpoint) {
    if (Status st = inflight::model::ApplyCheckpointPreset(random.preset, &checkpoint); !st.ok()) {
      return Fail(st);
    }
    checkpoint.seed = static_cast<std::uint64_t>(random.seed);
    // make_checkpoint's preset would refuse a max_seq_len past its positions; the benchmarks
    // size the engine by its shapes, so the positions follow.
    if (options.max_seq_len) {
      checkpoint.max_position_embeddings =
          std::max<std::int64_t>(checkpoint.max_position_embeddings, *options.max_seq_len);
    }
    if (random.at_load) {
      at_load = inflight::model::RandomWeightsRecipe{random.preset,
                                                     static_cast<std::uint64_t>(random.seed)};
    }
  }
  auto build = [&](const BuildOptions& o, const inflight::model::BuildProgressFn& progress) {
    return from_checkpoint ? inflight::model::BuildEngine(o, progress)
                           : inflight::model::WriteRandomEngine(checkpoint, o, progress, at_load);
  };

  if (Status st = JoinLaunchGroup(options, calibrate, &calib.run); !st.ok()) return Fail(st);
  // Rank 0 of a calibration group speaks and builds; the other ranks only run their part.
  const int group_rank = calib.run.group != nullptr ? calib.run.group->rank() : 0;
  if (calibrate) {
    if (calib.dataset.tokenizer_dir.empty()) calib.dataset.tokenizer_dir = options.checkpoint_dir;
    if (group_rank == 0) {
      std::fprintf(stderr, "Calibrating on %s: the float engine first, then its forward pass%s\n",
                   calib.dataset.path.c_str(),
                   calib.run.group == nullptr
                       ? ""
                       : (" (tp_size " + std::to_string(options.tp_size) + " x pp_size " +
                          std::to_string(options.pp_size) + ", one rank a process)")
                             .c_str());
    }
    std::optional<inflight::tools::ProgressBar> samples_bar;
    if (group_rank == 0) samples_bar.emplace("calibration samples");
    auto calibration = inflight::model::CalibrateFromDataset(
        options, [&](const BuildOptions& o) { return build(o, nullptr); }, calib.dataset, calib.run,
        [&](const inflight::model::CalibrationProgress& p) {
          if (!samples_bar) return;
          samples_bar->Update(
              p.samples_done, p.samples_total, 0, 0,
              std::to_string(p.tokens_done) + "/" + std::to_string(p.tokens_total) + " tokens");
        });
    if (samples_bar) samples_bar->Finish();
    if (!calibration.ok()) return Fail(calibration.status());
    options.calibration = *calibration;
  }
  if (group_rank != 0) return 0;

  inflight::tools::ProgressBar bar("tensors");
  auto on_progress = [&](const inflight::model::BuildProgress& p) {
    bar.Update(p.tensors_done, p.tensors_total, p.bytes_done, p.bytes_total,
               "rank" + std::to_string(p.rank) + " " + p.tensor);
  };
  inflight::Result<inflight::model::BuildSummary> summary = build(options, on_progress);
  bar.Finish();
  if (!summary.ok()) return Fail(summary.status());
  const auto& c = summary->config;
  std::fprintf(stderr,
               "Built %s engine in %s: %s, %lld layers, hidden %lld, %lld/%lld heads, vocab %lld\n"
               "  tp_size %d, pp_size %d, max_batch_size %d, max_input_len %d, max_seq_len %d, "
               "max_num_tokens %d, tokens_per_block %d\n"
               "  %lld tensors, %s in %zu file(s), %.1f s\n",
               c.architecture_name.c_str(), options.output_dir.c_str(),
               inflight::DTypeName(c.dtype), static_cast<long long>(c.num_layers),
               static_cast<long long>(c.hidden_size), static_cast<long long>(c.num_attention_heads),
               static_cast<long long>(c.num_kv_heads), static_cast<long long>(c.vocab_size),
               c.tp_size, c.pp_size, c.build.max_batch_size, c.build.max_input_len,
               c.build.max_seq_len, c.build.max_num_tokens, c.build.tokens_per_block,
               static_cast<long long>(summary->num_tensors),
               inflight::tools::FormatBytes(summary->num_bytes).c_str(),
               summary->output_files.size(), bar.elapsed_seconds());
  if (c.quant.any()) {
    std::fprintf(stderr, "  quantization: %s\n",
                 inflight::model::QuantConfigToJson(c.quant).c_str());
  }
  return 0;
}
