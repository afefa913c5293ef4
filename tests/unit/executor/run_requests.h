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

// Waits (up to 120 s) for the final response of each of `ids`; returns them in that order. `all`:
// every response, by request id.
inline std::vector<Response> AwaitFinals(Executor& ex, const std::vector<IdType>& ids,
                                         std::map<IdType, std::vector<Response>>* all = nullptr) {
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

// Enqueues `reqs` one by one (the executor may start the first before the last arrives) and
// waits for them: AwaitFinals.
inline std::vector<Response> RunAll(Executor& ex, const std::vector<Request>& reqs,
                                    std::map<IdType, std::vector<Response>>* all = nullptr) {
  std::vector<IdType> ids;
  for (const Request& r : reqs) {
    auto id = ex.enqueueRequest(r);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(id.ok() ? *id : 0);
  }
  return AwaitFinals(ex, ids, all);
}

// The same with every request enqueued in one call, so that the first step sees them all whatever
// the machine's load (tests that need requests to compete for the KV cache).
inline std::vector<Response> RunAllTogether(Executor& ex, const std::vector<Request>& reqs) {
  std::vector<IdType> ids;
  for (const Result<IdType>& id : ex.enqueueRequests(reqs)) {
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(id.ok() ? *id : 0);
  }
  return AwaitFinals(ex, ids);
}

}  // namespace inflight::testing
