// inflight-bench-quant-quality: how close quantized engines come to the unquantized engine of the
// same checkpoint. Every engine (--reference, then each of --candidates) runs the same prompts
// through its model runner (CPU, or CUDA where built), one forward pass per batch of prompts with
// the logits of every prompt position; then each engine continues every prompt greedily for
// --generate tokens, feeding back its own argmax.
//
// Per candidate, over every compared position (every prompt position by default; the last
// --last_positions of each prompt when given), beside the reference's distribution there:
//   top-1 agreement   fraction of positions whose argmax is the reference's
//   mean / max KL     KL(reference || candidate) in nats, from log-softmax in double
//   greedy prefix     mean share of the --generate tokens before the first difference
// The first row runs the reference engine again as its own candidate: agreement 1 and KL 0 unless
// the runner is not deterministic (the floor every other row is read against).
//
// The engines must be of one checkpoint (same architecture, sizes and vocabulary): e.g.
// inflight-build of one checkpoint plain, with --qformat fp8 | int8_wo | int4_wo [--group_size N],
// and with --kv_cache_dtype fp8. All engines stay loaded together, each with a KV pool of
// --batch sequences only.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/flags.h"
#include "executor/runner_factory.h"
#include "inflight/executor.h"
#include "model/engine_config.h"
#include "model/model_runner.h"
#include "quant_quality_metrics.h"
#include "table.h"

namespace inflight::bench {
namespace {

using Prompt = std::vector<TokenIdType>;

struct Options {
  std::string reference;
  std::string candidates;  // comma-separated engine directories
  std::string labels;      // comma-separated row names (default: the directories' last parts)
  std::int64_t num_prompts = 256;
  std::int64_t prompt_len_min = 64;
  std::int64_t prompt_len_max = 64;
  std::string prompts_file;
  std::int64_t seed = 1;
  std::int64_t last_positions = 0;  // 0: every prompt position
  std::int64_t generate = 16;
  std::int64_t batch = 16;
  std::string device = "auto";
};

struct Engine {
  std::string dir;
  std::string label;
  model::EngineConfig config;
  std::unique_ptr<model::ModelRunner> runner;
  std::int64_t blocks_per_sequence = 0;
};

// What one engine computed for one batch of prompts.
struct BatchOutput {
  model::StepOutput prompt_logits;               // every prompt position of every prompt
  std::vector<std::vector<TokenIdType>> greedy;  // per prompt, the --generate tokens
};

std::string Describe(const model::EngineConfig& c) {
  std::string s = model::QuantAlgoName(c.quant.quant_algo);
  if (c.quant.quant_algo == model::QuantAlgo::kNone) s = DTypeName(c.dtype);
  if (c.quant.weight_granularity == model::WeightScaleGranularity::kPerGroup) {
    s += " g" + std::to_string(c.quant.group_size);
  }
  if (c.quant.kv_cache_fp8) s += ", fp8 KV";
  return s;
}

// Engines of one checkpoint: anything else compares different models, which means nothing.
Status CheckSameModel(const Engine& reference, const Engine& candidate) {
  const model::EngineConfig& r = reference.config;
  const model::EngineConfig& c = candidate.config;
  auto differs = [&](const char* field, std::int64_t a, std::int64_t b) -> Status {
    if (a == b) return Status::Ok();
    return InvalidArgument("candidate engine " + candidate.dir + ": " + field + " " +
                           std::to_string(b) + " differs from the reference's " +
                           std::to_string(a) + " (" + reference.dir +
                           "); compare engines built from one checkpoint");
  };
  if (r.architecture_name != c.architecture_name) {
    return InvalidArgument("candidate engine " + candidate.dir + ": architecture " +
                           c.architecture_name + " differs from the reference's " +
                           r.architecture_name + "; compare engines built from one checkpoint");
  }
  RETURN_IF_ERROR(differs("vocab_size", r.vocab_size, c.vocab_size));
  RETURN_IF_ERROR(differs("hidden_size", r.hidden_size, c.hidden_size));
  RETURN_IF_ERROR(differs("num_layers", r.num_layers, c.num_layers));
  RETURN_IF_ERROR(differs("num_attention_heads", r.num_attention_heads, c.num_attention_heads));
  RETURN_IF_ERROR(differs("num_kv_heads", r.num_kv_heads, c.num_kv_heads));
  RETURN_IF_ERROR(differs("intermediate_size", r.intermediate_size, c.intermediate_size));
  return Status::Ok();
}

// Lines of token ids (spaces or commas between them); blank lines are skipped.
Result<std::vector<Prompt>> ReadPrompts(const std::string& path, std::int64_t vocab) {
  std::ifstream in(path);
  if (!in) return NotFound("--prompts_file " + path + " cannot be opened");
  std::vector<Prompt> prompts;
  std::string line;
  for (std::int64_t number = 1; std::getline(in, line); ++number) {
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream words(line);
    Prompt p;
    std::string word;
    while (words >> word) {
      std::int64_t id = 0;
      const Status s =
          tools::ParseInt("--prompts_file line " + std::to_string(number), word, 0, vocab - 1, &id);
      if (!s.ok()) return s;
      p.push_back(static_cast<TokenIdType>(id));
    }
    if (!p.empty()) prompts.push_back(std::move(p));
  }
  if (prompts.empty()) return InvalidArgument("--prompts_file " + path + " holds no prompt");
  return prompts;
}

// Uniform token ids and lengths from one seeded generator: the same prompts on every run.
std::vector<Prompt> RandomPrompts(const Options& o, std::int64_t vocab) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(o.seed));
  std::uniform_int_distribution<std::int64_t> length(o.prompt_len_min, o.prompt_len_max);
  std::uniform_int_distribution<std::int64_t> token(0, vocab - 1);
  std::vector<Prompt> prompts(static_cast<std::size_t>(o.num_prompts));
  for (Prompt& p : prompts) {
    p.resize(static_cast<std::size_t>(length(rng)));
    for (TokenIdType& t : p) t = static_cast<TokenIdType>(token(rng));
  }
  return prompts;
}

Result<Engine> LoadEngine(const std::string& dir, const std::string& label, const Options& o,
                          std::int64_t longest) {
  Engine e;
  e.dir = dir;
  e.label = label;
  ASSIGN_OR_RETURN(e.config, model::LoadEngineConfig(dir));
  const model::BuildLimits& b = e.config.build;
  if (longest + o.generate > b.max_seq_len) {
    return InvalidArgument("engine " + dir + ": a prompt of " + std::to_string(longest) +
                           " tokens plus --generate " + std::to_string(o.generate) +
                           " exceeds its max_seq_len " + std::to_string(b.max_seq_len));
  }
  if (longest > b.max_num_tokens) {
    return InvalidArgument("engine " + dir + ": a prompt of " + std::to_string(longest) +
                           " tokens exceeds its max_num_tokens " +
                           std::to_string(b.max_num_tokens));
  }
  e.blocks_per_sequence = (longest + o.generate + b.tokens_per_block - 1) / b.tokens_per_block;
  ExecutorConfig config;
  config.device = o.device == "cuda"  ? DeviceKind::kCuda
                  : o.device == "cpu" ? DeviceKind::kCpu
                                      : DeviceKind::kAuto;
  // A pool of --batch sequences only, so that every engine fits beside the others.
  config.kv_cache_config.max_tokens = o.batch * e.blocks_per_sequence * b.tokens_per_block;
  ASSIGN_OR_RETURN(e.runner, executor::CreateModelRunner(dir, e.config, config));
  if (e.runner->num_kv_blocks() < o.batch * e.blocks_per_sequence) {
    return Internal("engine " + dir + ": the runner allocated " +
                    std::to_string(e.runner->num_kv_blocks()) + " KV blocks, fewer than the " +
                    std::to_string(o.batch * e.blocks_per_sequence) + " asked for");
  }
  return e;
}

// One batch through one engine: the prompt pass with every position's logits, then the greedy
// continuation, one decode step per token.
Result<BatchOutput> RunBatch(Engine& e, const std::vector<Prompt>& batch, std::int64_t generate) {
  model::StepInput step;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    model::SequenceStep s;
    s.seq_id = static_cast<std::int64_t>(i);
    s.tokens = batch[i];
    s.logits = model::SequenceStep::Logits::kAll;
    for (std::int64_t b = 0; b < e.blocks_per_sequence; ++b) {
      s.block_table.push_back(static_cast<std::int32_t>(i * e.blocks_per_sequence + b));
    }
    step.sequences.push_back(std::move(s));
  }
  BatchOutput out;
  ASSIGN_OR_RETURN(out.prompt_logits, e.runner->Step(step));
  const std::int64_t vocab = out.prompt_logits.vocab_size;
  std::vector<TokenIdType> next(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::int64_t last = out.prompt_logits.row_begin[i] + std::int64_t(batch[i].size()) - 1;
    next[i] = static_cast<TokenIdType>(ArgMax(&out.prompt_logits.logits[last * vocab], vocab));
  }
  out.greedy.resize(batch.size());
  for (std::int64_t g = 0; g < generate; ++g) {
    for (std::size_t i = 0; i < batch.size(); ++i) out.greedy[i].push_back(next[i]);
    if (g + 1 == generate) break;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      model::SequenceStep& s = step.sequences[i];
      s.num_cached = static_cast<std::int32_t>(batch[i].size() + g);
      s.tokens = {next[i]};
      s.logits = model::SequenceStep::Logits::kLast;
    }
    ASSIGN_OR_RETURN(model::StepOutput decoded, e.runner->Step(step));
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const std::int64_t row = decoded.row_begin[i];
      next[i] = static_cast<TokenIdType>(ArgMax(&decoded.logits[row * vocab], vocab));
    }
  }
  return out;
}

void Compare(const std::vector<Prompt>& batch, const BatchOutput& reference,
             const BatchOutput& candidate, std::int64_t last_positions, QualityStats* stats) {
  const std::int64_t vocab = reference.prompt_logits.vocab_size;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto len = static_cast<std::int64_t>(batch[i].size());
    const std::int64_t first =
        last_positions > 0 ? std::max<std::int64_t>(0, len - last_positions) : 0;
    for (std::int64_t t = first; t < len; ++t) {
      const std::int64_t r = reference.prompt_logits.row_begin[i] + t;
      const std::int64_t c = candidate.prompt_logits.row_begin[i] + t;
      stats->AddPosition(&reference.prompt_logits.logits[r * vocab],
                         &candidate.prompt_logits.logits[c * vocab], vocab);
    }
    stats->AddContinuation(reference.greedy[i], candidate.greedy[i]);
  }
}

// Batches of at most --batch prompts and the engines' token and batch limits.
std::vector<std::vector<Prompt>> SplitBatches(const std::vector<Prompt>& prompts,
                                              std::int64_t max_prompts, std::int64_t max_tokens) {
  std::vector<std::vector<Prompt>> batches;
  std::int64_t tokens = 0;
  for (const Prompt& p : prompts) {
    const auto n = static_cast<std::int64_t>(p.size());
    if (batches.empty() || std::int64_t(batches.back().size()) >= max_prompts ||
        tokens + n > max_tokens) {
      batches.emplace_back();
      tokens = 0;
    }
    batches.back().push_back(p);
    tokens += n;
  }
  return batches;
}

Status Run(const Options& o) {
  const std::vector<std::string> dirs = tools::SplitCommas(o.candidates);
  std::vector<std::string> labels;
  if (!o.labels.empty()) {
    labels = tools::SplitCommas(o.labels);
    if (labels.size() != dirs.size()) {
      return InvalidArgument("--labels \"" + o.labels + "\" has " + std::to_string(labels.size()) +
                             " names for " + std::to_string(dirs.size()) + " --candidates");
    }
  }
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    if (dirs[i].empty()) {
      return InvalidArgument("--candidates \"" + o.candidates + "\" has an empty item");
    }
    if (labels.size() <= i) labels.push_back(std::filesystem::path(dirs[i]).filename().string());
  }
  ASSIGN_OR_RETURN(model::EngineConfig reference_config, model::LoadEngineConfig(o.reference));
  std::vector<Prompt> prompts;
  if (!o.prompts_file.empty()) {
    ASSIGN_OR_RETURN(prompts, ReadPrompts(o.prompts_file, reference_config.vocab_size));
  } else {
    prompts = RandomPrompts(o, reference_config.vocab_size);
  }
  std::int64_t longest = 0;
  for (const Prompt& p : prompts) longest = std::max<std::int64_t>(longest, p.size());

  ASSIGN_OR_RETURN(Engine reference, LoadEngine(o.reference, "reference", o, longest));
  std::vector<Engine> candidates;
  std::int64_t max_prompts = std::min<std::int64_t>(o.batch, reference.config.build.max_batch_size);
  std::int64_t max_tokens = reference.config.build.max_num_tokens;
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    ASSIGN_OR_RETURN(Engine e, LoadEngine(dirs[i], labels[i], o, longest));
    RETURN_IF_ERROR(CheckSameModel(reference, e));
    max_prompts = std::min<std::int64_t>(max_prompts, e.config.build.max_batch_size);
    max_tokens = std::min<std::int64_t>(max_tokens, e.config.build.max_num_tokens);
    candidates.push_back(std::move(e));
  }

  std::int64_t total_tokens = 0;
  for (const Prompt& p : prompts) total_tokens += static_cast<std::int64_t>(p.size());
  std::cout << "## Quantization quality against " << o.reference << " ("
            << Describe(reference.config) << ", " << reference.runner->device_name() << ")\n\n"
            << prompts.size() << " prompts, " << total_tokens << " tokens ("
            << (o.prompts_file.empty() ? "random ids, seed " + std::to_string(o.seed)
                                       : "from " + o.prompts_file)
            << "); compared at "
            << (o.last_positions > 0
                    ? "the last " + std::to_string(o.last_positions) + " positions of each prompt"
                    : std::string("every prompt position"))
            << "; greedy continuation of " << o.generate << " tokens\n\n"
            << std::flush;

  // The floor first: the reference against itself, through the same runner once more.
  std::vector<QualityStats> stats(candidates.size() + 1);
  for (const std::vector<Prompt>& batch : SplitBatches(prompts, max_prompts, max_tokens)) {
    ASSIGN_OR_RETURN(BatchOutput ref, RunBatch(reference, batch, o.generate));
    ASSIGN_OR_RETURN(BatchOutput again, RunBatch(reference, batch, o.generate));
    Compare(batch, ref, again, o.last_positions, &stats[0]);
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      ASSIGN_OR_RETURN(BatchOutput out, RunBatch(candidates[c], batch, o.generate));
      Compare(batch, ref, out, o.last_positions, &stats[c + 1]);
    }
  }

  Table table({"engine", "format", "positions", "top-1 agreement", "mean KL (nats)",
               "max KL (nats)", "greedy prefix", "identical continuations"});
  auto row = [&](const std::string& label, const Engine& e, const QualityStats& s) {
    const bool greedy = s.continuations() > 0;
    table.AddRow({label, Describe(e.config), std::to_string(s.positions()),
                  Fmt(s.top1_agreement(), 4), Fmt(s.mean_kl(), 6), Fmt(s.max_kl(), 6),
                  greedy ? Fmt(s.greedy_prefix_fraction(), 4) : "-",
                  greedy ? Fmt(s.identical_continuations(), 4) : "-"});
  };
  row("reference vs itself (floor)", reference, stats[0]);
  for (std::size_t c = 0; c < candidates.size(); ++c)
    row(candidates[c].label, candidates[c], stats[c + 1]);
  table.Print(std::cout);
  std::cout << "\nThe reference's own distributions at those positions: mean entropy "
            << Fmt(stats[0].mean_reference_entropy(), 4) << " nats (uniform over the vocabulary: "
            << Fmt(std::log(static_cast<double>(reference.config.vocab_size)), 4) << ")\n";
  return Status::Ok();
}

// "N" or "MIN:MAX": prompt lengths drawn uniformly from [MIN, MAX].
Status ParseLengths(const std::string& text, Options* o) {
  const std::size_t colon = text.find(':');
  const std::string lo = text.substr(0, colon);
  const std::string hi = colon == std::string::npos ? lo : text.substr(colon + 1);
  RETURN_IF_ERROR(tools::ParseInt("--prompt_len", lo, 1, 1 << 20, &o->prompt_len_min));
  RETURN_IF_ERROR(tools::ParseInt("--prompt_len", hi, 1, 1 << 20, &o->prompt_len_max));
  if (o->prompt_len_max < o->prompt_len_min) {
    return InvalidArgument("--prompt_len \"" + text + "\": MAX is below MIN (N or MIN:MAX)");
  }
  return Status::Ok();
}

}  // namespace
}  // namespace inflight::bench

int main(int argc, char** argv) {
  using inflight::Status;
  namespace tools = inflight::tools;
  inflight::bench::Options opt;
  tools::FlagSet flags("inflight-bench-quant-quality",
                       "Quantized engines against the unquantized engine of the same checkpoint: "
                       "top-1 agreement, KL(reference || candidate) and greedy agreement over "
                       "the same prompts. Prints a markdown table.");
  flags.AddString("reference", "DIR", "the unquantized engine (required)", &opt.reference);
  flags.AddString("candidates", "DIR[,DIR...]",
                  "engines of the same checkpoint to compare (required)", &opt.candidates);
  flags.AddString("labels", "NAME[,NAME...]",
                  "row names, one per candidate (default: folder names)", &opt.labels);
  flags.Add("num_prompts", "N", "random prompts (default 256)", [&](const std::string& v) {
    return tools::ParseInt("--num_prompts", v, 1, 1 << 24, &opt.num_prompts);
  });
  flags.Add("prompt_len", "N|MIN:MAX", "random prompts' lengths, uniform (default 64)",
            [&](const std::string& v) { return inflight::bench::ParseLengths(v, &opt); });
  flags.Add("seed", "N", "random prompts' generator seed (default 1)", [&](const std::string& v) {
    return tools::ParseInt("--seed", v, 0, INT64_MAX, &opt.seed);
  });
  flags.AddString("prompts_file", "FILE",
                  "prompts instead: one a line, token ids by spaces or commas", &opt.prompts_file);
  flags.Add("last_positions", "K", "compare the last K positions of each prompt (default 0: all)",
            [&](const std::string& v) {
              return tools::ParseInt("--last_positions", v, 0, 1 << 20, &opt.last_positions);
            });
  flags.Add("generate", "G", "greedy tokens generated per prompt and engine (default 16; 0: none)",
            [&](const std::string& v) {
              return tools::ParseInt("--generate", v, 0, 1 << 20, &opt.generate);
            });
  flags.Add("batch", "N", "prompts per forward pass (default 16)", [&](const std::string& v) {
    return tools::ParseInt("--batch", v, 1, 1 << 16, &opt.batch);
  });
  flags.Add("device", "auto|cpu|cuda", "model runner (default auto: CUDA when a GPU is present)",
            [&](const std::string& v) {
              return tools::ParseChoice("--device", v, {"auto", "cpu", "cuda"}, &opt.device);
            });
  flags.Require("reference");
  flags.Require("candidates");
  return flags.ParseAndRun(argc, argv, [&] { return inflight::bench::Run(opt); });
}
