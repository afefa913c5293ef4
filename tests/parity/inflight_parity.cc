// inflight-parity: greedy requests through the public Executor API (include/inflight/executor.h),
// with context and generation logits, written as JSON for tests/parity/gpu_parity.py to compare
// against Hugging Face transformers. All prompts are enqueued at once so that they share steps
// (in-flight batching), as they would in the server.
//
//   inflight-parity --engine_dir DIR --prompts '[[1,2,3],[0]]' --max_tokens 64 --device cuda
//       --out result.json
//
// Output: {"vocab_size": V, "device": "cuda", "results": [{"prompt": [...], "output_ids": [...],
//          "finish_reason": "length", "context_logits": [[V floats] x prompt_len],
//          "generation_logits": [[V floats] x new tokens]}, ...]} in prompt order.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/flags.h"
#include "inflight/executor.h"

namespace {

using inflight::Status;
using json = nlohmann::json;

struct Options {
  std::string engine_dir;
  std::string prompts_json;
  std::string out;
  std::string device = "cuda";
  std::int64_t max_tokens = 64;
  std::int64_t timeout_s = 120;
  // NOTE: a small KV pool, not the GPU default of 90% of free memory, so that other processes
  // sharing the device during a round (sanitizer runs, HF) keep theirs.
  std::int64_t kv_cache_max_tokens = 8192;
};

Status DefineAndParse(int argc, char** argv, Options* o, bool* run) {
  using inflight::tools::FlagSet;
  FlagSet flags("inflight-parity",
                "greedy requests through the Executor; prompts, tokens and logits as JSON");
  flags.Add("engine_dir", "DIR", "engine directory (required)", [o](const std::string& v) {
    o->engine_dir = v;
    return Status::Ok();
  });
  flags.Add("prompts", "JSON", "prompts as a JSON list of token-id lists (required)",
            [o](const std::string& v) {
              o->prompts_json = v;
              return Status::Ok();
            });
  flags.Add("out", "FILE", "where to write the JSON (required)", [o](const std::string& v) {
    o->out = v;
    return Status::Ok();
  });
  flags.Add("device", "auto|cuda|cpu", "executor device (default cuda)", [o](const std::string& v) {
    return inflight::tools::ParseChoice("--device", v, {"auto", "cuda", "cpu"}, &o->device);
  });
  flags.Add("max_tokens", "N", "new tokens per prompt (default 64)", [o](const std::string& v) {
    return inflight::tools::ParseInt("--max_tokens", v, 1, 1 << 20, &o->max_tokens);
  });
  flags.Add("timeout_s", "N", "give up after this many seconds (default 120)",
            [o](const std::string& v) {
              return inflight::tools::ParseInt("--timeout_s", v, 1, 86400, &o->timeout_s);
            });
  flags.Add("kv_cache_max_tokens", "N", "KV cache size in tokens (default 8192)",
            [o](const std::string& v) {
              return inflight::tools::ParseInt("--kv_cache_max_tokens", v, 1, INT64_MAX,
                                               &o->kv_cache_max_tokens);
            });
  flags.Require("engine_dir");
  flags.Require("prompts");
  flags.Require("out");
  ASSIGN_OR_RETURN(*run, flags.Parse(argc, argv));
  return Status::Ok();
}

inflight::DeviceKind DeviceOf(const std::string& name) {
  if (name == "cuda") return inflight::DeviceKind::kCuda;
  if (name == "cpu") return inflight::DeviceKind::kCpu;
  return inflight::DeviceKind::kAuto;
}

const char* FinishName(inflight::FinishReason r) {
  switch (r) {
    case inflight::FinishReason::kNotFinished:
      return "not_finished";
    case inflight::FinishReason::kEndId:
      return "end_id";
    case inflight::FinishReason::kStopWords:
      return "stop_words";
    case inflight::FinishReason::kLength:
      return "length";
    case inflight::FinishReason::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

// [rows * vocab] → a list of rows.
json Rows(const std::vector<float>& flat, std::size_t vocab) {
  json rows = json::array();
  for (std::size_t i = 0; vocab > 0 && i + vocab <= flat.size(); i += vocab) {
    rows.push_back(std::vector<float>(flat.begin() + static_cast<std::ptrdiff_t>(i),
                                      flat.begin() + static_cast<std::ptrdiff_t>(i + vocab)));
  }
  return rows;
}

Status Run(const Options& o) {
  std::vector<inflight::VecTokens> prompts;
  try {
    prompts = json::parse(o.prompts_json).get<std::vector<inflight::VecTokens>>();
  } catch (const std::exception& e) {
    return inflight::InvalidArgument("--prompts \"" + o.prompts_json +
                                     "\" is not a JSON list of token-id lists: " + e.what());
  }
  if (prompts.empty()) return inflight::InvalidArgument("--prompts is an empty list");

  inflight::ExecutorConfig config;
  config.device = DeviceOf(o.device);
  config.kv_cache_config.max_tokens = o.kv_cache_max_tokens;
  ASSIGN_OR_RETURN(auto executor, inflight::Executor::Create(o.engine_dir, config));

  std::map<inflight::IdType, std::size_t> index_of;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    inflight::Request r;
    r.input_token_ids = prompts[i];
    r.max_tokens = static_cast<inflight::SizeType>(o.max_tokens);
    r.output_config.return_context_logits = true;
    r.output_config.return_generation_logits = true;
    r.output_config.exclude_input_from_output = true;
    ASSIGN_OR_RETURN(const inflight::IdType id, executor->enqueueRequest(r));
    index_of[id] = i;
  }

  std::vector<json> results(prompts.size());
  std::size_t num_done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  while (num_done < prompts.size()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return inflight::Internal("inflight-parity: " + std::to_string(prompts.size() - num_done) +
                                " requests unfinished after --timeout_s " +
                                std::to_string(o.timeout_s));
    }
    for (inflight::Response& r : executor->awaitResponses(std::chrono::milliseconds(200))) {
      const std::size_t i = index_of.at(r.request_id);
      if (r.hasError()) {
        return inflight::Internal("prompt " + std::to_string(i) + ": " + r.error->ToString());
      }
      if (!r.isFinal()) continue;
      const auto vocab = static_cast<std::size_t>(r.result.vocab_size);
      results[i] = {
          {"prompt", prompts[i]},
          {"output_ids", r.result.output_token_ids.at(0)},
          {"finish_reason", FinishName(r.result.finish_reasons.at(0))},
          {"context_logits", Rows(r.result.context_logits, vocab)},
          {"generation_logits", Rows(r.result.generation_logits, vocab)},
      };
      ++num_done;
    }
  }
  const json out = {
      {"vocab_size", executor->vocabSize()}, {"device", o.device}, {"results", results}};
  executor->shutdown();
  std::ofstream f(o.out);
  f << out.dump() << "\n";
  if (!f) return inflight::Internal("could not write --out " + o.out);
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool run = false;
  Status s = DefineAndParse(argc, argv, &o, &run);
  if (s.ok() && run) s = Run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "inflight-parity: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
