// The host side of one step's device sampling: each sampled row's DeviceSampling (model_runner.h)
// as the kernel's SamplingParams, plus the one int32 list array those params index
// (kernels/cuda/sampling.h), both ready to upload with the rest of the step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "inflight/status.h"
#include "kernels/cuda/sampling.h"
#include "model/model_runner.h"

namespace inflight::model {

class DeviceSamplingBatch {
 public:
  void Clear() {
    params_.clear();
    lists_.clear();
  }
  // Appends the next sampled row. `bias`: the device copy of d.embedding_bias, or nullptr.
  // Errors (kInvalidArgument): penalty_tokens and penalty_counts differ in length.
  Status Add(const DeviceSampling& d, const float* bias);
  // Appends a row that only takes an argmax (padding of a captured batch).
  void AddPadding();

  const std::vector<kernels::cuda::SamplingParams>& params() const { return params_; }
  // Per row: its (token, generated count) pairs, then its banned ids.
  const std::vector<std::int32_t>& lists() const { return lists_; }

  // Words (int32) the lists of `d` take.
  static std::size_t ListWords(const DeviceSampling& d) {
    return 2 * d.penalty_tokens.size() + d.banned_tokens.size();
  }

 private:
  std::vector<kernels::cuda::SamplingParams> params_;
  std::vector<std::int32_t> lists_;
};

}  // namespace inflight::model
