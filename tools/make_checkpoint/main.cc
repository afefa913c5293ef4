// make_checkpoint: writes a random-weight Hugging Face checkpoint (config.json, safetensors,
// tokenizer files) for tests and benchmarks. Same flags and seed → same bytes on every machine.
#include <cstdio>
#include <string>

#include "common/flags.h"
#include "common/progress_bar.h"
#include "model/random_checkpoint.h"

namespace {

using inflight::Status;
using inflight::model::RandomCheckpointOptions;
using inflight::tools::FlagSet;
using inflight::tools::ParseDouble;
using inflight::tools::ParseInt;

struct Cli {
  RandomCheckpointOptions o;
  std::string output_dir;
  bool tie = false;
};

// A flag that sets an int64 field within [lo, hi].
FlagSet::Parser IntInto(const char* flag, std::int64_t lo, std::int64_t hi, std::int64_t* out) {
  return [flag, lo, hi, out](const std::string& v) { return ParseInt(flag, v, lo, hi, out); };
}

void DefineFlags(FlagSet* f, Cli* c) {
  RandomCheckpointOptions* o = &c->o;
  constexpr std::int64_t kMax = std::int64_t{1} << 31;
  f->Add("output_dir", "DIR", "where to write the checkpoint (required)",
         [c](const std::string& v) {
           c->output_dir = v;
           return v.empty() ? inflight::InvalidArgument("--output_dir is empty") : Status::Ok();
         });
  f->Add("preset", "tiny|small|llama-3.1-8b|llama-3.1-70b",
         "start from a preset's sizes (flags given explicitly still apply)",
         [](const std::string& v) {
           RandomCheckpointOptions probe;  // applied before parsing; see FindPreset
           return inflight::model::ApplyCheckpointPreset(v, &probe);
         });
  f->Add("arch", "llama|mistral|qwen2|qwen3|gpt2", "architecture (default llama)",
         [o](const std::string& v) {
           return inflight::tools::ParseChoice(
               "--arch", v, {"llama", "mistral", "qwen2", "qwen3", "gpt2"}, &o->arch);
         });
  f->Add("layout", "4|5",
         "config.json as transformers 4.x writes it (rope_theta, rope_scaling, torch_dtype) or "
         "5.x (rope_parameters, dtype, layer_types); default 4",
         [o](const std::string& v) {
           std::string layout;
           RETURN_IF_ERROR(inflight::tools::ParseChoice("--layout", v, {"4", "5"}, &layout));
           o->layout = layout == "5" ? inflight::model::ConfigLayout::kTransformers5
                                     : inflight::model::ConfigLayout::kTransformers4;
           return Status::Ok();
         });
  f->Add("hidden_size", "N", "default 64", IntInto("--hidden_size", 1, kMax, &o->hidden_size));
  f->Add("num_layers", "N", "default 2", IntInto("--num_layers", 1, 100000, &o->num_layers));
  f->Add("num_heads", "N", "default 4", IntInto("--num_heads", 1, 100000, &o->num_heads));
  f->Add("num_kv_heads", "N", "default 2 (gpt2: num_heads)",
         IntInto("--num_kv_heads", 1, 100000, &o->num_kv_heads));
  f->Add("head_dim", "N", "default hidden_size / num_heads", [o](const std::string& v) {
    std::int64_t n = 0;
    RETURN_IF_ERROR(ParseInt("--head_dim", v, 1, 100000, &n));
    o->head_dim = n;
    return Status::Ok();
  });
  f->Add("intermediate_size", "N", "default 128",
         IntInto("--intermediate_size", 1, kMax, &o->intermediate_size));
  f->Add("vocab_size", "N", "default: the tokenizer's vocabulary size, else 1000",
         [o](const std::string& v) {
           std::int64_t n = 0;
           RETURN_IF_ERROR(ParseInt("--vocab_size", v, 1, kMax, &n));
           o->vocab_size = n;
           return Status::Ok();
         });
  f->Add("max_position_embeddings", "N", "default 2048",
         IntInto("--max_position_embeddings", 1, kMax, &o->max_position_embeddings));
  f->Add("rope_theta", "X", "default 10000", [o](const std::string& v) {
    return ParseDouble("--rope_theta", v, 1e-3, 1e12, &o->rope.theta);
  });
  f->Add("rope_scaling", "linear|dynamic|yarn|llama3", "rope type (default: none, \"default\")",
         [o](const std::string& v) {
           std::string type;
           RETURN_IF_ERROR(inflight::tools::ParseChoice(
               "--rope_scaling", v, {"default", "linear", "dynamic", "yarn", "llama3"}, &type));
           o->rope.type = *inflight::model::ParseRopeType(type);
           return Status::Ok();
         });
  auto number_into = [](const char* flag, double* out) -> FlagSet::Parser {
    return [flag, out](const std::string& v) { return ParseDouble(flag, v, 1e-6, 1e6, out); };
  };
  f->Add("rope_factor", "X", "linear, dynamic, yarn, llama3 factor (required; llama3: default 8)",
         number_into("--rope_factor", &o->rope.factor));
  f->Add("rope_low_freq_factor", "X", "llama3 low_freq_factor (default 1)",
         number_into("--rope_low_freq_factor", &o->rope.low_freq_factor));
  f->Add("rope_high_freq_factor", "X", "llama3 high_freq_factor (default 4)",
         number_into("--rope_high_freq_factor", &o->rope.high_freq_factor));
  f->Add("rope_beta_fast", "X", "yarn beta_fast (default 32)",
         number_into("--rope_beta_fast", &o->rope.beta_fast));
  f->Add("rope_beta_slow", "X", "yarn beta_slow (default 1)",
         number_into("--rope_beta_slow", &o->rope.beta_slow));
  f->Add("rope_original_max_position_embeddings", "N",
         "llama3 original context (default 8192); yarn's (default: not written, the reader "
         "takes max_position_embeddings)",
         IntInto("--rope_original_max_position_embeddings", 1, kMax,
                 &o->rope.original_max_position_embeddings));
  f->Add("sliding_window", "N",
         "mistral: every layer's window; qwen2/qwen3: use_sliding_window with this window",
         [o](const std::string& v) {
           std::int64_t n = 0;
           RETURN_IF_ERROR(ParseInt("--sliding_window", v, 1, kMax, &n));
           o->sliding_window = n;
           return Status::Ok();
         });
  f->Add("max_window_layers", "N", "qwen2/qwen3: layers from this index slide (default num_layers)",
         [o](const std::string& v) {
           std::int64_t n = 0;
           RETURN_IF_ERROR(ParseInt("--max_window_layers", v, 0, kMax, &n));
           o->max_window_layers = n;
           return Status::Ok();
         });
  f->AddSwitch("attention_bias", "llama, qwen3: biases on q, k, v and o_proj", &o->attention_bias);
  f->AddSwitch("mlp_bias", "llama: biases on gate, up and down_proj", &o->mlp_bias);
  f->AddSwitch("tie_word_embeddings",
               "share embed and lm_head (default: gpt2, qwen2 yes; others no)", &c->tie);
  f->Add("dtype", "float32|float16|bfloat16", "default float32", [o](const std::string& v) {
    std::string s;
    RETURN_IF_ERROR(
        inflight::tools::ParseChoice("--dtype", v, {"float32", "float16", "bfloat16"}, &s));
    o->dtype = *inflight::ParseDType(s);
    return Status::Ok();
  });
  f->Add("seed", "N", "default 0", [o](const std::string& v) {
    std::int64_t n = 0;
    RETURN_IF_ERROR(ParseInt("--seed", v, 0, INT64_MAX, &n));
    o->seed = static_cast<std::uint64_t>(n);
    return Status::Ok();
  });
  f->Add(
      "init_std", "X", "weight std (default 0.02; norms 1 + noise, biases 0.1 x)",
      [o](const std::string& v) { return ParseDouble("--init_std", v, 0.0, 10.0, &o->init_std); });
  f->Add("shards", "N", "number of safetensors files; > 1 adds model.safetensors.index.json",
         [o](const std::string& v) {
           return inflight::tools::ParseInt32("--shards", v, 1, 9999, &o->shards);
         });
  f->Add("tokenizer_dir", "DIR", "copy tokenizer files from here; bos/eos and vocab size from them",
         [o](const std::string& v) {
           o->tokenizer_dir = v;
           return Status::Ok();
         });
  f->Require("output_dir");
}

// The value of --preset, found before the other flags are parsed so that they can override it.
std::string FindPreset(int argc, char** argv) {
  std::string preset;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--preset" && i + 1 < argc) preset = argv[i + 1];
    if (arg.rfind("--preset=", 0) == 0) preset = arg.substr(9);
  }
  return preset;
}

int Fail(const Status& st) {
  std::fprintf(stderr, "make_checkpoint: error: %s\n", st.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli;
  FlagSet flags(
      "make_checkpoint",
      "Writes a random-weight Hugging Face checkpoint (config.json, model.safetensors or\n"
      "shards with an index, tokenizer files) for llama, mistral, qwen2, qwen3 or gpt2,\n"
      "with config.json in transformers 4.x's or 5.x's layout.");
  // The preset sets the starting sizes; flags given explicitly override them.
  if (const std::string preset = FindPreset(argc, argv); !preset.empty()) {
    if (Status st = inflight::model::ApplyCheckpointPreset(preset, &cli.o); !st.ok())
      return Fail(st);
  }
  DefineFlags(&flags, &cli);
  auto parsed = flags.Parse(argc, argv);
  if (!parsed.ok()) return Fail(parsed.status());
  if (!*parsed) return 0;
  if (flags.WasSet("tie_word_embeddings")) cli.o.tie_word_embeddings = cli.tie;
  if (flags.WasSet("rope_scaling")) {
    inflight::model::RopeConfig& rope = cli.o.rope;
    const bool llama3 = rope.type == inflight::model::RopeType::kLlama3;
    if (!flags.WasSet("rope_factor") && rope.type != inflight::model::RopeType::kDefault) {
      if (!llama3) {
        return Fail(inflight::InvalidArgument(
            std::string("--rope_factor is required with --rope_scaling ") +
            inflight::model::RopeTypeName(rope.type)));
      }
      rope.factor = 8.0;  // Llama 3.1's
    }
    if (llama3 && !flags.WasSet("rope_original_max_position_embeddings")) {
      rope.original_max_position_embeddings = 8192;
    }
  }
  if (cli.o.arch == "gpt2" && !flags.WasSet("num_kv_heads")) cli.o.num_kv_heads = cli.o.num_heads;

  inflight::tools::ProgressBar bar("tensors");
  auto summary = inflight::model::WriteRandomCheckpoint(
      cli.o, cli.output_dir,
      [&](const std::string& name, std::int64_t n, std::int64_t n_total, std::uint64_t bytes,
          std::uint64_t bytes_total) { bar.Update(n, n_total, bytes, bytes_total, name); });
  bar.Finish();
  if (!summary.ok()) return Fail(summary.status());
  std::fprintf(
      stderr, "Wrote %s checkpoint to %s: %lld tensors, %s (%s), vocab %lld, %.1f s\n",
      cli.o.arch.c_str(), cli.output_dir.c_str(), static_cast<long long>(summary->num_tensors),
      inflight::tools::FormatBytes(summary->num_bytes).c_str(), inflight::DTypeName(cli.o.dtype),
      static_cast<long long>(summary->vocab_size), bar.elapsed_seconds());
  return 0;
}
