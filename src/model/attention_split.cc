#include "model/attention_split.h"

#include <algorithm>
#include <cstddef>

namespace inflight::model {

double ContextAttentionFlops(std::int64_t query_len, std::int64_t num_cached,
                             std::int64_t num_heads, std::int64_t head_dim) {
  // Row r attends num_cached + r + 1 keys; QKᵀ and PV are 2 flops per key per dimension each.
  const auto q = static_cast<double>(query_len);
  const double keys = q * static_cast<double>(num_cached) + q * (q + 1) / 2;
  return AttentionPairFlops(keys, num_heads, head_dim);
}

double AttentionPairFlops(double row_keys, std::int64_t num_heads, std::int64_t head_dim) {
  return 4.0 * row_keys * static_cast<double>(num_heads * head_dim);
}

double DecodeAttentionBytes(std::int64_t kv_len, std::int64_t num_kv_heads, std::int64_t head_dim,
                            std::int64_t element_bytes) {
  return 2.0 * static_cast<double>(kv_len * num_kv_heads * head_dim * element_bytes);
}

AttentionRates HopperAttentionRates(int sms, double peak_bytes_per_ms) {
  // Fitted on an H100 (bench/results/2026-11-21-h100-round-9.md): context attention over ~1.8k-row
  // chunks 359 TFLOP/s on 132 SMs; decode attention 2.94 TB/s of a 3.35 TB/s attribute peak, and
  // 1.09-1.14x as long beside a context side confined to 32-48 SMs.
  AttentionRates r;
  r.sms = sms;
  r.context_flops_per_ms_per_sm = 359e9 / 132;
  r.decode_bytes_per_ms = 0.88 * peak_bytes_per_ms;
  r.side_by_side = 1.12;
  r.context_margin = 0.75;
  return r;
}

int ChooseAttentionSplit(const AttentionWork& work, const AttentionRates& rates,
                         const std::vector<int>& offered_sms) {
  if (work.context_flops <= 0 || work.decode_bytes <= 0 || rates.sms <= 0) return -1;
  const double decode_ms = work.decode_bytes / rates.decode_bytes_per_ms;
  const double serial_ms =
      work.context_flops / (rates.context_flops_per_ms_per_sm * rates.sms) + decode_ms;
  const double side_ms = decode_ms * rates.side_by_side;
  const auto context_ms = [&](int n) {
    return work.context_flops / (rates.context_flops_per_ms_per_sm * n);
  };
  int within = -1, fastest = -1;
  double fastest_ms = serial_ms;
  for (std::size_t i = 0; i < offered_sms.size(); ++i) {
    const int n = offered_sms[i];
    if (n <= 0 || n >= rates.sms) continue;
    const double split_ms = std::max(context_ms(n), side_ms);
    if (split_ms >= serial_ms) continue;
    if (context_ms(n) <= rates.context_margin * side_ms &&
        (within < 0 || n < offered_sms[static_cast<std::size_t>(within)])) {
      within = static_cast<int>(i);
    }
    // Ties (the decode side the longer) go to more SMs: the context side's estimate is the less
    // certain one.
    if (split_ms < fastest_ms ||
        (split_ms == fastest_ms && n > offered_sms[static_cast<std::size_t>(fastest)])) {
      fastest_ms = split_ms;
      fastest = static_cast<int>(i);
    }
  }
  return within >= 0 ? within : fastest;
}

}  // namespace inflight::model
