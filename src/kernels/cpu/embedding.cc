#include "kernels/cpu/embedding.h"

#include <vector>

namespace inflight::kernels::cpu {

void EmbeddingGather(float* out, const std::int32_t* token_ids, std::int64_t num_tokens,
                     WeightPtr table, std::int64_t hidden, WeightPtr pos_table,
                     const std::int32_t* positions) {
  std::vector<float> pos_row(pos_table ? static_cast<std::size_t>(hidden) : 0);
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    float* o = out + t * hidden;
    table.LoadRange(static_cast<std::int64_t>(token_ids[t]) * hidden, hidden, o);
    if (pos_table) {
      pos_table.LoadRange(static_cast<std::int64_t>(positions[t]) * hidden, hidden, pos_row.data());
      for (std::int64_t i = 0; i < hidden; ++i) o[i] += pos_row[i];
    }
  }
}

}  // namespace inflight::kernels::cpu
