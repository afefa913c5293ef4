// Whether a mixed step's two attentions should run side by side, and on how many SMs the context
// side runs. The context attention of prompt rows is bound by the tensor cores and the decode
// attention by memory bandwidth: with the context side confined to a few SMs at high priority
// (kernels/cuda/sm_subset_streams.h) and the decode side free to use every SM, both finish sooner
// than in turn. Plain host arithmetic: the runner feeds it a step's work.
#pragma once

#include <cstdint>
#include <vector>

namespace inflight::model {

// A step's attention work: causal multiply-adds of its prompt chunks (x2 flops), K and V bytes of
// its decodes.
struct AttentionWork {
  double context_flops = 0;
  double decode_bytes = 0;
};

// A prompt chunk of query_len rows after num_cached positions: QKᵀ and PV over its causal window.
double ContextAttentionFlops(std::int64_t query_len, std::int64_t num_cached,
                             std::int64_t num_heads, std::int64_t head_dim);
// QKᵀ and PV over `row_keys` (row, key) pairs, e.g. those a sliding window leaves.
double AttentionPairFlops(double row_keys, std::int64_t num_heads, std::int64_t head_dim);
// One decode row over kv_len keys: every K and V element of its KV heads read once.
double DecodeAttentionBytes(std::int64_t kv_len, std::int64_t num_kv_heads, std::int64_t head_dim,
                            std::int64_t element_bytes);

// What the device does, per the kernels' measured rates (bench/NOTES.md, entry 10).
struct AttentionRates {
  int sms = 0;
  double context_flops_per_ms_per_sm = 0;  // context attention, per multiprocessor
  double decode_bytes_per_ms = 0;          // decode attention on the whole device
  // Beside the context side the decode side takes this many times as long as alone (the two share
  // memory and L2, and the decode side has fewer SMs until the context side's blocks are out).
  double side_by_side = 1;
  // The context side gets SMs enough to finish within this fraction of the decode side's time:
  // too few SMs make it the longer side, too many only cost the decode side a little.
  double context_margin = 1;
};

// Rates for a device with `sms` multiprocessors and `peak_bytes_per_ms` of memory bandwidth.
AttentionRates HopperAttentionRates(int sms, double peak_bytes_per_ms);

// The index into offered_sms (SM counts the context side may be confined to) of the smallest that
// finishes the context side within the margin, else of the one predicted fastest; -1 when the two
// in turn on all SMs are predicted no slower (one side empty, or too small to pay for the split).
int ChooseAttentionSplit(const AttentionWork& work, const AttentionRates& rates,
                         const std::vector<int>& offered_sms);

}  // namespace inflight::model
