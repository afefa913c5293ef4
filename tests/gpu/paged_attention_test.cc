// Paged attention (context and decode kernels) against cpu::PagedAttention on the same pools, and
// against cpu::ReferenceAttention on contiguous K/V. Pools hold NaN everywhere a sequence has no
// token; block tables are random and non-monotonic.
#include <cmath>
#include <limits>
#include <string>

#include "gpu_test_util.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/reference_attention.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/paged_attention_context.h"
#include "kernels/cuda/paged_attention_decode.h"

namespace inflight::gpu_test {
namespace {

kernels::cpu::ThreadPool& Pool() {
  static kernels::cpu::ThreadPool pool(0);
  return pool;
}

struct AttentionCase {
  DType dtype;
  std::vector<int> query_lens, cached;
  int num_heads, num_kv_heads, head_dim, tokens_per_block;
  bool decode = false;
  int partition_tokens = 0;  // decode only; 0 = auto
};

void CheckAttention(const AttentionCase& c) {
  const int D = c.head_dim;
  std::string name = std::string(c.decode ? "decode " : "context ") + Describe(c.dtype) +
                     " hd=" + std::to_string(D) + " heads=" + std::to_string(c.num_heads) + "/" +
                     std::to_string(c.num_kv_heads) + " tpb=" + std::to_string(c.tokens_per_block) +
                     " seqs(q+cached)=";
  for (std::size_t s = 0; s < c.query_lens.size() && s < 6; ++s) {
    name += std::to_string(c.query_lens[s]) + "+" + std::to_string(c.cached[s]) + ",";
  }
  if (c.query_lens.size() > 6) name += "...(" + std::to_string(c.query_lens.size()) + ")";
  if (c.decode) name += " partition=" + std::to_string(c.partition_tokens);

  const HostPagedBatch hb = MakePagedBatch(c.query_lens, c.cached, c.tokens_per_block);
  const kernels::cpu::PagedKvShape shape{c.num_kv_heads, c.tokens_per_block, D};
  const std::size_t pool_n = static_cast<std::size_t>(hb.num_blocks * shape.BlockFloats());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> k_pool(pool_n, nan), v_pool(pool_n, nan);
  // Every position [0, cached + query_len) of every sequence holds a K/V (the step's own rows too,
  // as after RopeKvWrite).
  std::vector<std::vector<float>> contiguous_k(c.query_lens.size()),
      contiguous_v(c.query_lens.size());
  for (int s = 0; s < hb.num_seqs(); ++s) {
    const int kv_len =
        c.cached[static_cast<std::size_t>(s)] + c.query_lens[static_cast<std::size_t>(s)];
    auto k = RoundTo(c.dtype,
                     RandomVector(static_cast<std::size_t>(kv_len * c.num_kv_heads * D), -1, 1));
    auto v = RoundTo(c.dtype, RandomVector(k.size(), -1, 1));
    for (int p = 0; p < kv_len; ++p)
      for (int h = 0; h < c.num_kv_heads; ++h)
        for (int d = 0; d < D; ++d) {
          const std::size_t src = static_cast<std::size_t>((p * c.num_kv_heads + h) * D + d);
          const std::size_t dst =
              static_cast<std::size_t>(shape.Offset(hb.Block(s, p), h, p % c.tokens_per_block) + d);
          k_pool[dst] = k[src];
          v_pool[dst] = v[src];
        }
    contiguous_k[static_cast<std::size_t>(s)] = std::move(k);
    contiguous_v[static_cast<std::size_t>(s)] = std::move(v);
  }
  const int tokens = hb.num_tokens();
  // q rows strided as in a fused qkv output.
  const int q_stride = (c.num_heads + 2 * c.num_kv_heads) * D;
  const auto q = RoundTo(c.dtype, RandomVector(static_cast<std::size_t>(tokens) * q_stride, -1, 1));
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));

  DeviceArray<std::uint16_t> d_k(ToBits(c.dtype, k_pool)), d_v(ToBits(c.dtype, v_pool)),
      d_q(ToBits(c.dtype, q)), d_out(static_cast<std::size_t>(tokens * c.num_heads * D));
  DevicePagedBatch db(hb);
  if (c.decode) {
    const std::int32_t partition =
        c.partition_tokens > 0 ? c.partition_tokens
                               : kernels::cuda::DecodePartitionTokens(db.batch, c.num_kv_heads);
    const std::size_t ws_bytes =
        kernels::cuda::PagedAttentionDecodeWorkspaceBytes(db.batch, c.num_heads, D, partition);
    DeviceArray<unsigned char> ws(ws_bytes);
    CUDA_OK(kernels::cuda::PagedAttentionDecode(
        d_out.get(), d_q.get(), q_stride, d_k.get(), d_v.get(), db.batch, shape, c.num_heads, scale,
        c.dtype, c.partition_tokens, ws.get(), ws_bytes, nullptr));
  } else {
    CUDA_OK(kernels::cuda::PagedAttentionContext(d_out.get(), d_q.get(), q_stride, d_k.get(),
                                                 d_v.get(), db.batch, shape, c.num_heads, scale,
                                                 c.dtype, nullptr));
  }
  const auto found = FromBits(c.dtype, d_out.Download());

  std::vector<float> ref(found.size());
  const kernels::cpu::PagedBatch cb{hb.num_seqs(), hb.query_start.data(), hb.num_cached.data(),
                                    hb.block_tables.data(), hb.max_blocks_per_seq};
  kernels::cpu::PagedAttention(ref.data(), q.data(), q_stride, k_pool.data(), v_pool.data(), cb,
                               shape, c.num_heads, scale, &Pool());
  const float e = Epsilon(c.dtype);
  // Outputs are convex combinations of V rows in [-1, 1]: an absolute bound of a few roundings.
  ExpectClose(name + " vs paged cpu", found, ref, 2 * e, e);

  // Sequence 0 once more, against attention on contiguous K/V.
  const int n_q = c.query_lens[0], kv_len = c.cached[0] + n_q;
  std::vector<float> q0(static_cast<std::size_t>(n_q * c.num_heads * D));
  for (int r = 0; r < n_q; ++r)
    for (int i = 0; i < c.num_heads * D; ++i)
      q0[static_cast<std::size_t>(r * c.num_heads * D + i)] =
          q[static_cast<std::size_t>(r * q_stride + i)];
  std::vector<float> ref0(q0.size());
  kernels::cpu::ReferenceAttention(ref0.data(), q0.data(), contiguous_k[0].data(),
                                   contiguous_v[0].data(), n_q, kv_len, c.num_heads, c.num_kv_heads,
                                   D, scale);
  ExpectClose(
      name + " seq0 vs unpaged",
      std::vector<float>(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(q0.size())),
      ref0, 2 * e, e);
}

GPU_TEST(ContextAttentionMatchesCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (int D : {64, 80, 96, 128}) {
      CheckAttention({dtype, {1, 3, 19, 99}, {0, 17, 5, 130}, 8, 2, D, 16});
      CheckAttention({dtype, {3, 1}, {64, 0}, 6, 6, D, 32});
    }
}

GPU_TEST(ContextAttentionLongPromptMatchesCpu) {
  CheckAttention({DType::kBFloat16, {989, 19}, {40, 0}, 4, 1, 128, 64});
  CheckAttention({DType::kFloat16, {989}, {0}, 8, 2, 64, 16});
}

GPU_TEST(DecodeAttentionMatchesCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (int D : {64, 80, 96, 128}) {
      CheckAttention({dtype, {1}, {0}, 8, 2, D, 16, true});
      CheckAttention({dtype, {1, 1, 1}, {2, 130, 700}, 32, 8, D, 16, true});
      CheckAttention({dtype, {1, 1, 1}, {2, 130, 700}, 32, 8, D, 16, true, 64});
    }
}

GPU_TEST(DecodeAttentionManySequencesAndSplits) {
  std::uniform_int_distribution<int> len(0, 1500);
  std::vector<int> ones(19, 1), cached(19);
  for (int& x : cached) x = len(Rng());
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    CheckAttention({dtype, ones, cached, 28, 4, 128, 16, true});       // Qwen-like GQA 7
    CheckAttention({dtype, ones, cached, 28, 4, 128, 16, true, 192});  // forced splits
    CheckAttention({dtype, {1}, {4000}, 32, 1, 64, 64, true});         // MQA, long: auto split
    CheckAttention({dtype, {1, 1}, {4000, 3}, 12, 12, 80, 32, true, 256});
  }
}

}  // namespace
}  // namespace inflight::gpu_test
