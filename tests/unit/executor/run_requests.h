// Requests for the executor tests, and running them through an Executor to completion.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "inflight/executor.h"

namespace inflight::testing {

// `len` token ids in [0, vocab) drawn from `seed`.
inline VecTokens RandomPrompt(std::uint32_t seed, std::size_t len, std::int64_t vocab) {
  std::mt19937 rng(seed);
  VecTokens t(len);
  for (auto& x : t) x = static_cast<TokenIdType>(rng() % static_cast<std::uint64_t>(vocab));
  return t;
}

// A greedy request for `max_tokens` new tokens whose output leaves the prompt out.
inline Request Greedy(VecTokens prompt, SizeType max_tokens) {
  Request r;
  r.input_token_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.output_config.exclude_input_from_output = true;
  return r;
}

// Enqueues `reqs` and waits (up to 120 s) for each one's final response; returns them in request
// order. `all`: every response, by request id.
inline std::vector<Response> RunAll(Executor& ex, const std::vector<Request>& reqs,
                                    std::map<IdType, std::vector<Response>>* all = nullptr) {
  std::vector<IdType> ids;
  for (const Request& r : reqs) {
    auto id = ex.enqueueRequest(r);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(id.ok() ? *id : 0);
  }
  std::map<IdType, Response> finals;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (finals.size() < ids.size() && std::chrono::steady_clock::now() < deadline) {
    for (Response& r : ex.awaitResponses(std::chrono::milliseconds(100))) {
      if (all) (*all)[r.request_id].push_back(r);
      if (r.isFinal()) finals[r.request_id] = r;
    }
  }
  std::vector<Response> out;
  for (IdType id : ids) out.push_back(finals[id]);
  return out;
}

}  // namespace inflight::testing
