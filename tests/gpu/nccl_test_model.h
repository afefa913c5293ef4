// The small Llama the CUDA runner's split-engine tests run under mpirun
// (gpu_nccl_collectives_test).
#pragma once

#include <cstdint>

#include "model/random_checkpoint.h"

namespace inflight::model::testing {

inline RandomCheckpointOptions SmallLlama(std::uint64_t seed = 3) {
  RandomCheckpointOptions o;
  o.arch = "llama";
  o.hidden_size = 256;
  o.num_layers = 4;
  o.num_heads = 4;  // head_dim 64, which the CUDA attention kernels take
  o.num_kv_heads = 2;
  o.intermediate_size = 512;
  o.vocab_size = 1031;
  o.max_position_embeddings = 64;
  o.init_std = 0.05;
  o.seed = seed;
  return o;
}

}  // namespace inflight::model::testing
