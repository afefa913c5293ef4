// The FP8 KV cache's kernels against the CPU runner's (kernels/cpu/kv_cache_write_fp8.h,
// paged_attention_fp8.h): RopeKvWriteFp8 must store the CPU's codes bit for bit (and rotate q and k
// exactly as RopeKvWrite does), and the decode and context attention over FP8 pools must give the
// CPU's outputs on the same codes and scales. Pools hold the NaN code (0x7f) everywhere a sequence
// has no token, and with a window also at the positions none of its queries sees; block tables are
// random and non-monotonic; scales are random.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

#include "common/fp8_e4m3.h"
#include "gpu_test_util.h"
#include "kernels/cpu/kv_cache_write_fp8.h"
#include "kernels/cpu/paged_attention_fp8.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/paged_attention_context.h"
#include "kernels/cuda/paged_attention_decode.h"
#include "kernels/cuda/rope_kv_write.h"

namespace inflight::gpu_test {
namespace {

constexpr std::uint8_t kNanCode = 0x7f;

kernels::cpu::ThreadPool& Pool() {
  static kernels::cpu::ThreadPool pool(0);
  return pool;
}

// How many of a and b's elements differ, printing the first few.
std::size_t CountByteMismatches(const std::string& what, const std::vector<std::uint8_t>& found,
                                const std::vector<std::uint8_t>& expected) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < found.size(); ++i) {
    if (found[i] == expected[i]) continue;
    if (++bad <= 5) {
      std::printf("  %s: byte %zu is 0x%02x (%g), expected 0x%02x (%g), seed %llu\n", what.c_str(),
                  i, found[i], Fp8E4M3ToFloat(found[i]), expected[i], Fp8E4M3ToFloat(expected[i]),
                  static_cast<unsigned long long>(Seed()));
    }
  }
  return bad;
}

struct WriteCase {
  DType dtype;
  std::vector<int> query_lens, cached;
  int num_heads, num_kv_heads, head_dim, tokens_per_block;
  bool rope;
  float range;  // q, k, v uniform in [-range, range]
  float k_scale, v_scale;
  int stride_pad = 0;    // elements added to the row stride: not a multiple of 8 -> scalar kernel
  bool qk_norm = false;  // Qwen3's q/k norm fused into the rotation (the vector kernel)
};

// RopeKvWriteFp8 on one copy of the inputs, RopeKvWrite on another: q and k must come out the same
// (the rotation is shared), and the FP8 pools must hold cpu::KvCacheWriteFp8 of the rotated k and
// of v, byte for byte, with every other byte as it was (the NaN code).
void CheckWriteFp8(const WriteCase& c) {
  const int D = c.head_dim;
  const std::string name =
      "rope_kv_write_fp8 " + Describe(c.dtype) + " hd=" + std::to_string(D) +
      " heads=" + std::to_string(c.num_heads) + "/" + std::to_string(c.num_kv_heads) +
      " tpb=" + std::to_string(c.tokens_per_block) + (c.rope ? " rope" : " no-rope") +
      " range=" + std::to_string(c.range) + " scales=" + std::to_string(c.k_scale) + "," +
      std::to_string(c.v_scale) + " stride_pad=" + std::to_string(c.stride_pad) +
      (c.qk_norm ? " qk_norm" : "") +
      " tokens=" + std::to_string(std::accumulate(c.query_lens.begin(), c.query_lens.end(), 0));
  const HostPagedBatch hb = MakePagedBatch(c.query_lens, c.cached, c.tokens_per_block);
  const int tokens = hb.num_tokens();
  const int stride = (c.num_heads + 2 * c.num_kv_heads) * D + c.stride_pad;
  const auto qkv =
      RoundTo(c.dtype, RandomVector(static_cast<std::size_t>(tokens) * stride, -c.range, c.range));
  const kernels::cpu::PagedKvShape shape{c.num_kv_heads, c.tokens_per_block, D};
  const std::size_t pool_n = static_cast<std::size_t>(hb.num_blocks * shape.BlockFloats());
  kernels::cpu::RopeParams params;
  params.head_dim = D;
  params.theta = 10000.0;
  std::vector<float> inv_freq(static_cast<std::size_t>(D / 2));
  kernels::cpu::RopeDynamicInvFrequencies(params, 0, inv_freq.data());
  DeviceArray<float> d_inv_freq(inv_freq);
  const kernels::cuda::RopeTable table{c.rope ? d_inv_freq.get() : nullptr, 0, 1.0f};
  DeviceArray<std::uint16_t> d_norm(
      ToBits(c.dtype, RandomVector(static_cast<std::size_t>(D), 0.25f, 2.0f)));
  kernels::cuda::QkNormWeights norm;
  if (c.qk_norm) norm = {d_norm.get(), d_norm.get(), 1e-6f};
  DevicePagedBatch db(hb);

  DeviceArray<std::uint16_t> d_qkv_ref(ToBits(c.dtype, qkv)), d_qkv(ToBits(c.dtype, qkv));
  DeviceArray<std::uint16_t> d_k16(pool_n), d_v16(pool_n);
  DeviceArray<std::uint8_t> d_k8(std::vector<std::uint8_t>(pool_n, kNanCode));
  DeviceArray<std::uint8_t> d_v8(std::vector<std::uint8_t>(pool_n, kNanCode));
  const auto heads = [&](std::uint16_t* base, int i) { return base + i * D; };
  std::uint16_t* r = d_qkv_ref.get();
  CUDA_OK(kernels::cuda::RopeKvWrite(
      r, heads(r, c.num_heads), heads(r, c.num_heads + c.num_kv_heads), stride, c.num_heads,
      d_k16.get(), d_v16.get(), db.batch, shape, table, norm, c.dtype, nullptr));
  std::uint16_t* f = d_qkv.get();
  CUDA_OK(kernels::cuda::RopeKvWriteFp8(
      f, heads(f, c.num_heads), heads(f, c.num_heads + c.num_kv_heads), stride, c.num_heads,
      d_k8.get(), d_v8.get(), db.batch, shape, table, norm, c.dtype,
      kernels::cuda::KvFp8Scales{c.k_scale, c.v_scale}, nullptr));

  const auto rotated = FromBits(c.dtype, d_qkv_ref.Download());
  ExpectClose(name + " q, k and v as RopeKvWrite's", FromBits(c.dtype, d_qkv.Download()), rotated,
              0.0f, 0.0f);
  std::vector<std::uint8_t> k_ref(pool_n, kNanCode), v_ref(pool_n, kNanCode);
  const kernels::cpu::PagedBatch cb{hb.num_seqs(), hb.query_start.data(), hb.num_cached.data(),
                                    hb.block_tables.data(), hb.max_blocks_per_seq};
  kernels::cpu::KvCacheWriteFp8(k_ref.data(), v_ref.data(), rotated.data() + c.num_heads * D,
                                rotated.data() + (c.num_heads + c.num_kv_heads) * D, stride, cb,
                                shape, c.k_scale, c.v_scale);
  std::size_t saturated = 0;
  for (std::uint8_t code : k_ref) saturated += (code & 0x7f) == 0x7e ? 1 : 0;
  const std::size_t bad_k = CountByteMismatches(name + " k_pool", d_k8.Download(), k_ref);
  const std::size_t bad_v = CountByteMismatches(name + " v_pool", d_v8.Download(), v_ref);
  std::printf("  %s: %zu + %zu of %zu pool bytes differ (bound 0); %zu k codes saturated\n",
              name.c_str(), bad_k, bad_v, 2 * pool_n, saturated);
  if (bad_k + bad_v > 0) Fail(name + ": FP8 pool bytes differ from cpu::KvCacheWriteFp8");
}

GPU_TEST(RopeKvWriteFp8MatchesCpuCodes) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int D : {64, 128}) {
      CheckWriteFp8({dtype, {1}, {0}, 4, 2, D, 16, true, 1.0f, 0.01f, 0.02f});
      // Values past 448 * scale saturate; tiny scales put codes in every binade.
      CheckWriteFp8({dtype, {3, 19, 1}, {5, 0, 77}, 8, 2, D, 16, true, 4.0f, 0.005f, 0.5f});
      CheckWriteFp8({dtype, {300, 2}, {0, 50}, 32, 8, D, 64, true, 2.0f, 0.0123f, 0.0071f});
      CheckWriteFp8({dtype, {989}, {17}, 4, 4, D, 32, false, 1.0f, 0.003f, 0.004f});
      // A row stride of no whole 16-byte chunks: the scalar kernel.
      CheckWriteFp8({dtype, {3, 19, 1}, {5, 0, 77}, 8, 2, D, 7, true, 1.0f, 0.01f, 0.01f, 3});
      CheckWriteFp8({dtype, {3, 19, 1}, {5, 0, 77}, 8, 2, D, 7, false, 1.0f, 0.01f, 0.01f, 3});
      CheckWriteFp8(
          {dtype, {3, 19, 1}, {5, 0, 77}, 16, 2, D, 16, true, 30.0f, 0.01f, 0.1f, 0, true});
      CheckWriteFp8({dtype, {300, 2}, {0, 50}, 12, 4, D, 64, true, 0.05f, 0.02f, 0.001f, 0, true});
    }
  }
}

struct AttentionCase {
  DType dtype;
  std::vector<int> query_lens, cached;
  int num_heads, num_kv_heads, head_dim, tokens_per_block;
  bool decode = false;
  int partition_tokens = 0;  // decode only; 0 = auto
  float q_range = 1.0f;
  int graph_max_kv_len = 0;  // decode only: launch sized for this max_kv_len (graph capture)
  kernels::cpu::AttentionWindow window = {};
  float softmax_scale = 0.0f;  // 0: 1 / sqrt(head_dim)
};

// hb's block tables with rows of `width` entries, the new ones far out of range.
std::vector<std::int32_t> WidenedTables(const HostPagedBatch& hb, int width) {
  std::vector<std::int32_t> wide(static_cast<std::size_t>(hb.num_seqs() * width), 1 << 30);
  for (int s = 0; s < hb.num_seqs(); ++s)
    for (int j = 0; j < hb.max_blocks_per_seq; ++j)
      wide[static_cast<std::size_t>(s * width + j)] =
          hb.block_tables[static_cast<std::size_t>(s * hb.max_blocks_per_seq + j)];
  return wide;
}

void CheckAttentionFp8(const AttentionCase& c) {
  const int D = c.head_dim;
  std::string name = std::string(c.decode ? "fp8 decode " : "fp8 context ") + Describe(c.dtype) +
                     " hd=" + std::to_string(D) + " heads=" + std::to_string(c.num_heads) + "/" +
                     std::to_string(c.num_kv_heads) + " tpb=" + std::to_string(c.tokens_per_block) +
                     " seqs(q+cached)=";
  for (std::size_t s = 0; s < c.query_lens.size() && s < 6; ++s) {
    name += std::to_string(c.query_lens[s]) + "+" + std::to_string(c.cached[s]) + ",";
  }
  if (c.query_lens.size() > 6) name += "...(" + std::to_string(c.query_lens.size()) + ")";
  if (c.decode) name += " partition=" + std::to_string(c.partition_tokens);
  if (c.q_range != 1.0f) name += " q_range=" + std::to_string(c.q_range);
  if (c.graph_max_kv_len > 0) name += " graph_max_kv_len=" + std::to_string(c.graph_max_kv_len);
  if (c.window.windowed()) {
    name += " window=" + std::to_string(c.window.window) + " sink=" + std::to_string(c.window.sink);
  }

  const HostPagedBatch hb = MakePagedBatch(c.query_lens, c.cached, c.tokens_per_block);
  const kernels::cpu::PagedKvShape shape{c.num_kv_heads, c.tokens_per_block, D};
  const std::size_t pool_n = static_cast<std::size_t>(hb.num_blocks * shape.BlockFloats());
  // Scales that map K and V in [-1, 1] onto codes up to about ±300: dequantized values in [-1, 1].
  std::uniform_real_distribution<float> scale_dist(1.0f / 400.0f, 1.0f / 250.0f);
  const float k_scale = scale_dist(Rng()), v_scale = scale_dist(Rng());
  std::vector<std::uint8_t> k_pool(pool_n, kNanCode), v_pool(pool_n, kNanCode);
  for (int s = 0; s < hb.num_seqs(); ++s) {
    const std::size_t si = static_cast<std::size_t>(s);
    const int kv_len = c.cached[si] + c.query_lens[si];
    const int first_query = c.cached[si];
    for (int p = 0; p < kv_len; ++p) {
      // Positions no query of the sequence sees (past the sinks, before its first query's window)
      // keep the NaN code: a kernel that reads one puts NaN in the output.
      const bool hidden = p >= c.window.sink && p < c.window.RecentBegin(first_query);
      if (hidden) continue;
      for (int h = 0; h < c.num_kv_heads; ++h) {
        const auto k = RandomVector(static_cast<std::size_t>(D), -1.0f, 1.0f);
        const auto v = RandomVector(static_cast<std::size_t>(D), -1.0f, 1.0f);
        const std::size_t dst =
            static_cast<std::size_t>(shape.Offset(hb.Block(s, p), h, p % c.tokens_per_block));
        for (int d = 0; d < D; ++d) {
          k_pool[dst + static_cast<std::size_t>(d)] = FloatToFp8E4M3(k[d] / k_scale);
          v_pool[dst + static_cast<std::size_t>(d)] = FloatToFp8E4M3(v[d] / v_scale);
        }
      }
    }
  }
  const int tokens = hb.num_tokens();
  const int q_stride = (c.num_heads + 2 * c.num_kv_heads) * D;
  const auto q = RoundTo(
      c.dtype, RandomVector(static_cast<std::size_t>(tokens) * q_stride, -c.q_range, c.q_range));
  const float scale =
      c.softmax_scale > 0.0f ? c.softmax_scale : 1.0f / std::sqrt(static_cast<float>(D));
  const kernels::cuda::KvFp8Scales scales{k_scale, v_scale};

  DeviceArray<std::uint8_t> d_k(k_pool), d_v(v_pool);
  DeviceArray<std::uint16_t> d_q(ToBits(c.dtype, q)),
      d_out(static_cast<std::size_t>(tokens * c.num_heads * D));
  CUDA_OK(cudaMemset(d_out.get(), 0xff, d_out.size() * sizeof(std::uint16_t)));
  DevicePagedBatch db(hb);
  if (c.decode) {
    kernels::cuda::PagedBatch batch = db.batch;
    const int width = std::max(hb.max_blocks_per_seq,
                               (c.graph_max_kv_len + c.tokens_per_block - 1) / c.tokens_per_block);
    DeviceArray<std::int32_t> wide_tables(WidenedTables(hb, width));
    batch.block_tables = wide_tables.get();
    batch.max_blocks_per_seq = width;
    batch.max_kv_len = std::max(hb.max_kv_len, c.graph_max_kv_len);
    const std::int32_t partition =
        c.partition_tokens > 0
            ? c.partition_tokens
            : kernels::cuda::DecodePartitionTokens(batch, c.num_kv_heads, c.window, true);
    const std::size_t ws_bytes = kernels::cuda::PagedAttentionDecodeWorkspaceBytes(
        batch, c.num_heads, D, partition, c.window);
    DeviceArray<unsigned char> ws(ws_bytes);
    CUDA_OK(kernels::cuda::PagedAttentionDecodeFp8(
        d_out.get(), d_q.get(), q_stride, d_k.get(), d_v.get(), scales, batch, shape, c.num_heads,
        scale, c.window, c.dtype, c.partition_tokens, ws.get(), ws_bytes, nullptr));
  } else {
    CUDA_OK(kernels::cuda::PagedAttentionContextFp8(d_out.get(), d_q.get(), q_stride, d_k.get(),
                                                    d_v.get(), scales, db.batch, shape, c.num_heads,
                                                    scale, c.window, c.dtype, nullptr));
  }
  const auto found = FromBits(c.dtype, d_out.Download());

  std::vector<float> ref(found.size());
  const kernels::cpu::PagedBatch cb{hb.num_seqs(), hb.query_start.data(), hb.num_cached.data(),
                                    hb.block_tables.data(), hb.max_blocks_per_seq};
  kernels::cpu::PagedAttentionFp8(ref.data(), q.data(), q_stride, k_pool.data(), v_pool.data(),
                                  k_scale, v_scale, cb, shape, c.num_heads, scale, c.window,
                                  &Pool());
  float max_err = 0.0f;
  for (std::size_t i = 0; i < found.size(); ++i) {
    max_err = std::max(max_err, std::fabs(found[i] - ref[i]));
  }
  const float e = Epsilon(c.dtype);
  // Outputs are convex combinations of dequantized V rows in [-1, 1], the codes widened to dtype
  // exactly: the bound of the fp16 / bf16 pools' test, a few roundings (the probabilities' for the
  // mma, the output's).
  std::printf("  %s: max |gpu - cpu| %.3g (bound %.3g + %.3g |cpu|)\n", name.c_str(), max_err,
              2 * e, e);
  ExpectClose(name + " vs cpu::PagedAttentionFp8", found, ref, 2 * e, e);
}

GPU_TEST(Fp8ContextAttentionMatchesCpu) {
  using W = kernels::cpu::AttentionWindow;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int D : {64, 128}) {
      CheckAttentionFp8({dtype, {1, 3, 19, 99}, {0, 17, 5, 130}, 8, 2, D, 16});
      CheckAttentionFp8({dtype, {3, 1}, {64, 0}, 6, 6, D, 32});
      // Query tiles (128 rows) and key tiles (64 keys) against blocks of 7 and 100 tokens, cached
      // prefixes (chunked context, prefix reuse) that put the diagonal mid tile.
      CheckAttentionFp8({dtype, {127, 128, 129, 255, 257}, {0, 37, 64, 1, 100}, 4, 2, D, 7});
      CheckAttentionFp8({dtype, {200, 1, 129}, {5, 511, 0}, 28, 4, D, 100});
      CheckAttentionFp8({dtype, {150, 40}, {70, 0}, 4, 4, D, 16, false, 0, 8.0f});
      for (W w : {W{1, 0}, W{40, 3}, W{100, 130}}) {
        CheckAttentionFp8(
            {dtype, {1, 3, 19, 99}, {0, 17, 5, 130}, 8, 2, D, 16, false, 0, 1.0f, 0, w});
      }
      CheckAttentionFp8(
          {dtype, {300, 1, 129}, {900, 2000, 0}, 8, 2, D, 7, false, 0, 1.0f, 0, {300, 2}});
    }
  }
  CheckAttentionFp8({DType::kBFloat16, {989, 19}, {40, 0}, 4, 1, 128, 64});
  CheckAttentionFp8({DType::kFloat16, {1500, 1}, {3000, 4000}, 4, 2, 128, 32, false, 0, 4.0f});
  std::vector<int> lens, cached;
  for (int i = 0; i < 32; ++i) {
    lens.push_back(1 + (i * 97) % 300);
    cached.push_back((i * 53) % 200);
  }
  CheckAttentionFp8({DType::kBFloat16, lens, cached, 32, 8, 128, 16});
  CheckAttentionFp8({DType::kFloat16, lens, cached, 16, 4, 64, 32});
}

GPU_TEST(Fp8DecodeAttentionMatchesCpu) {
  using W = kernels::cpu::AttentionWindow;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int D : {64, 128}) {
      CheckAttentionFp8({dtype, {1}, {0}, 8, 2, D, 16, true});
      CheckAttentionFp8({dtype, {1, 1, 1}, {2, 130, 700}, 32, 8, D, 16, true});
      CheckAttentionFp8({dtype, {1, 1, 1}, {2, 130, 700}, 32, 8, D, 16, true, 64});
      CheckAttentionFp8({dtype, {1}, {4095}, 32, 8, D, 64, true});               // 1 x 4096
      CheckAttentionFp8({dtype, {1, 1}, {4096, 5000}, 32, 8, D, 64, true, 64});  // 79 splits
      CheckAttentionFp8({dtype, {1, 1, 1, 1}, {15, 16, 63, 79}, 8, 8, D, 7, true, 64});
      CheckAttentionFp8({dtype, {1, 1}, {2100, 77}, 32, 1, D, 48, true});  // MQA: head tiles
      CheckAttentionFp8({dtype, {1, 1, 1}, {3000, 500, 9}, 16, 4, D, 32, true, 0, 8.0f});
      // Sized for a graph of a longer max_kv_len: most splits past a sequence's end.
      CheckAttentionFp8({dtype, {1, 1, 1}, {40, 700, 3}, 32, 8, D, 64, true, 0, 1.0f, 8192});
      for (W w : {W{1, 0}, W{100, 3}, W{300, 70}}) {
        CheckAttentionFp8({dtype, {1, 1, 1}, {2, 130, 700}, 32, 8, D, 16, true, 0, 1.0f, 0, w});
        CheckAttentionFp8({dtype, {1, 1, 1}, {2, 130, 700}, 32, 8, D, 16, true, 64, 1.0f, 0, w});
      }
    }
  }
  // bf16 queries past fp16's range and far below its normal range (the kernel's products are fp16:
  // it scales each block's queries by a power of two), scores as those of queries in [-8, 8].
  for (float q_range : {2.0e5f, 1.0e-5f}) {
    for (int D : {64, 128}) {
      CheckAttentionFp8({DType::kBFloat16,
                         {1, 1, 1},
                         {3000, 500, 9},
                         16,
                         4,
                         D,
                         32,
                         true,
                         0,
                         q_range,
                         0,
                         {},
                         8.0f / q_range / std::sqrt(static_cast<float>(D))});
    }
  }
  // 8 x 2048, and a batch of 64 of random lengths.
  std::vector<int> ones8(8, 1), cached8(8, 2047);
  CheckAttentionFp8({DType::kBFloat16, ones8, cached8, 32, 8, 128, 64, true});
  std::uniform_int_distribution<int> len(0, 3000);
  std::vector<int> ones(64, 1), cached(64);
  for (int& x : cached) x = len(Rng());
  CheckAttentionFp8({DType::kBFloat16, ones, cached, 32, 8, 128, 64, true});
  CheckAttentionFp8({DType::kFloat16, ones, cached, 8, 2, 64, 16, true, 64, 1.0f, 0, {333, 4}});
}

// Head dims without an FP8 kernel and scales that are not finite and > 0 are refused, not run.
GPU_TEST(Fp8AttentionRefusesUnsupportedShapesAndScales) {
  const HostPagedBatch hb = MakePagedBatch({1}, {10}, 16);
  DevicePagedBatch db(hb);
  struct Bad {
    int head_dim;
    kernels::cuda::KvFp8Scales scales;
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (const Bad& b : {Bad{80, {1.0f, 1.0f}}, Bad{96, {1.0f, 1.0f}}, Bad{64, {0.0f, 1.0f}},
                       Bad{64, {1.0f, -2.0f}}, Bad{128, {inf, 1.0f}}}) {
    const int D = b.head_dim;
    const std::string what = "hd " + std::to_string(D) + " scales " + std::to_string(b.scales.k) +
                             "," + std::to_string(b.scales.v);
    const kernels::cpu::PagedKvShape shape{1, 16, D};
    DeviceArray<std::uint16_t> q(static_cast<std::size_t>(3 * D)), out(static_cast<std::size_t>(D));
    DeviceArray<std::uint8_t> pool(static_cast<std::size_t>(hb.num_blocks * 16 * D));
    const cudaError_t context = kernels::cuda::PagedAttentionContextFp8(
        out.get(), q.get(), 3 * D, pool.get(), pool.get(), b.scales, db.batch, shape, 1, 0.125f, {},
        DType::kBFloat16, nullptr);
    GPU_CHECK(context == cudaErrorInvalidValue, "context, " + what);
    const cudaError_t decode = kernels::cuda::PagedAttentionDecodeFp8(
        out.get(), q.get(), 3 * D, pool.get(), pool.get(), b.scales, db.batch, shape, 1, 0.125f, {},
        DType::kBFloat16, 64, nullptr, 0, nullptr);
    GPU_CHECK(decode == cudaErrorInvalidValue, "decode, " + what);
  }
}

}  // namespace
}  // namespace inflight::gpu_test
